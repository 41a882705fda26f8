/*
 * libFuzzer harness of the control protocol: the first byte of the input
 * picks what the rest goes to. 0-5: every message decoder (mgr_dec_*),
 * with the properties of the unit test fuzz_mgr_proto; 6: the manager's
 * end of a stream during the handshake; 7: a host's end
 * (mgr_stream_next, as in the unit test fuzz_mgr_stream). See
 * tests/fuzz/fuzz_check.h and docs/fuzzing.md.
 */
#include "fuzz_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A fixed fabric key and manager nonce, so that an input replays. */
static uint8_t key[MGR_KEY_LEN], snonce[MGR_NONCE_LEN];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    mgr_wbuf_t seed[FUZZ_MGR_SEEDS] = {{0}};

    for (int i = 0; i < MGR_KEY_LEN; i++) {
        key[i] = (uint8_t)(i * 7 + 1);
        snonce[i] = (uint8_t)(255 - i);
    }
    fuzz_mgr_seeds(seed);
    for (int k = 0; k < FUZZ_MGR_SEEDS; k++) {
        uint8_t buf[1024];
        if (!seed[k].oom && seed[k].len < sizeof(buf)) {
            buf[0] = (uint8_t)(k < 6 ? k : k + 2); /* 6, 7: the stream's */
            memcpy(buf + 1, seed[k].buf, seed[k].len);
            fuzz_corpus_add(*argc, *argv, "mgr", k, buf, seed[k].len + 1);
        }
        mgr_wbuf_free(&seed[k]);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 8) {
    case 6:
        fuzz_fail_if(
            fuzz_check_mgr_stream(1, key, snonce, data + 1, size - 1, NULL));
        break;
    case 7:
        fuzz_fail_if(
            fuzz_check_mgr_stream(0, key, snonce, data + 1, size - 1, NULL));
        break;
    default:
        fuzz_fail_if(fuzz_check_mgr_msg(data + 1, size - 1, NULL));
        break;
    }
    return 0;
}
