/*
 * libFuzzer harness of the data plane's parsers: wire_parse() on the
 * input as a datagram and, when it is short, wire_ep_parse() on it as
 * text. The properties are those of the unit test fuzz_wire
 * (tests/fuzz/fuzz_check.h); build and run: docs/fuzzing.md.
 */
#include "fuzz_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char *const eps[] = {"10.0.0.7:80", "192.168.100.255:65535",
                                      "0.0.0.0:00001"};
    uint8_t buf[WIRE_HDR_LEN + 64];

    for (int k = 0; k < FUZZ_WIRE_SEEDS; k++)
        fuzz_corpus_add(*argc, *argv, "wire", k, buf, fuzz_wire_seed(k, buf));
    for (int k = 0; k < 3; k++)
        fuzz_corpus_add(*argc, *argv, "ep", k, eps[k], strlen(eps[k]));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[64];

    fuzz_fail_if(fuzz_check_wire(data, size));
    if (size < sizeof(text)) {
        memcpy(text, data, size);
        text[size] = '\0';
        fuzz_fail_if(fuzz_check_ep(text));
    }
    return 0;
}
