/*
 * The body of a libFuzzer harness of a text-file parser (fuzz_fabric_conf.c,
 * fuzz_topo.c): the input goes to an in-memory file that the parser reads
 * by its /proc/self/fd name, and the seeds are the project's own files.
 * The including file defines, before including this:
 *   FUZZ_SEED(k, path)   writes seed file k (0, 1) to path: incoll_status_t
 *   FUZZ_CHECK(path, data, size, scratch)   the checks of fuzz_check.h
 *   FUZZ_CORPUS          the seeds' name in the corpus
 *   FUZZ_SCRATCH         the scratch file's name
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
    fuzz_scratch_path(scratch, sizeof(scratch), FUZZ_SCRATCH);
    for (int k = 0; k < 2; k++) {
        size_t len;
        char *text = NULL;
        if (FUZZ_SEED(k, scratch) == INCOLL_OK)
            text = fuzz_read_file(scratch, &len);
        if (text)
            fuzz_corpus_add(*argc, *argv, FUZZ_CORPUS, k, text, len);
        free(text);
    }
    return fd < 0 ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fuzz_memfd_set(fd, data, size) != 0)
        abort();
    fuzz_fail_if(FUZZ_CHECK(path, (const char *)data, size, scratch));
    return 0;
}
