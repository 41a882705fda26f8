/*
 * libFuzzer harness of the fabric.conf parser: the input goes to an
 * in-memory file that fabric_conf_load() reads by its /proc/self/fd name;
 * the properties are those of the unit test fuzz_fabric_conf
 * (tests/fuzz/fuzz_check.h). Build and run: docs/fuzzing.md.
 */
#include "fuzz_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[64], scratch[512];

/* libFuzzer ends a run with exit(): take the scratch file away. */
static void remove_scratch(void)
{
    unlink(scratch);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fd = fuzz_memfd_open(path, sizeof(path));
    atexit(remove_scratch);
    fuzz_scratch_path(scratch, sizeof(scratch), "fabric.conf");
    for (int k = 0; k < 2; k++) {
        size_t len;
        char *text = NULL;
        if (fuzz_fabric_seed(k, scratch) == INCOLL_OK)
            text = fuzz_read_file(scratch, &len);
        if (text)
            fuzz_corpus_add(*argc, *argv, "fabric", k, text, len);
        free(text);
    }
    return fd < 0 ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fuzz_memfd_set(fd, data, size) != 0)
        abort();
    fuzz_fail_if(
        fuzz_check_fabric_conf(path, (const char *)data, size, scratch));
    return 0;
}
