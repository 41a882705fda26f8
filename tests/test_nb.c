/*
 * Nonblocking and persistent collectives and threads in libincoll, on real
 * daemons: tests/progs/nb_check (many requests outstanding, every order of
 * test, wait and free, communicators interleaved, persistent requests
 * started 1000 times, two threads on two communicators), clean and under
 * 5% loss, with and without the progress thread; and with large
 * allreduces locking the tree and streaming (INCOLL_STREAM_THRESHOLD).
 */
#include "integ.h"
#include "test.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run_nb(int n, int k, const char *env, const char *args,
                  const char *what)
{
    char out[PATH_MAX];
    int ret;
    if (!have_fabric_binaries("nb_check"))
        return test_skip("build/bin/incoll, incoll-agg or build/tests/nb_check "
                         "not built");
    ret = run_fabric_check("nb_check", "nbfab", "nb", n, k, 0, env, args, out,
                           sizeof(out));
    if (ret != 0 || !file_has(out, "all correct")) {
        show_tail(out);
        CHECK_MSG(0, "%s: nb_check exited %d", what, ret);
    }
    return TEST_PASSED;
}

TEST(nb_requests_clean, TEST_INTEG)
{
    return run_nb(5, 2, NULL, "--iters 1000 --threads", "5 hosts, clean");
}

TEST(nb_requests_lossy, TEST_INTEG)
{
    return run_nb(4, 2, "INCOLL_FAULT_DROP=0.05 INCOLL_FAULT_SEED=7",
                  "--iters 100 --threads", "4 hosts, 5% loss");
}

TEST(nb_progress_thread, TEST_INTEG)
{
    return run_nb(6, 2,
                  "INCOLL_PROGRESS_THREAD=1 INCOLL_FAULT_DROP=0.05 "
                  "INCOLL_FAULT_SEED=9",
                  "--iters 100 --threads", "6 hosts, progress thread, 5% loss");
}

/* Nonblocking allreduces of 64 KiB and more lock the tree and stream
 * (with payloads of 1 KiB the 64 slots carry 64 KiB at once): they run
 * in the communicator's thread, lock, stream and unlock, among requests
 * on the slots, under 5% loss; every result checked, and some streamed. */
TEST(nb_requests_stream, TEST_INTEG)
{
    char out[PATH_MAX];
    int ret;
    if (!have_fabric_binaries("nb_check"))
        return test_skip("build/bin/incoll, incoll-agg or build/tests/nb_check "
                         "not built");
    ret = run_fabric_check("nb_check", "nbfab", "nbs", 4, 2, 0,
                           "INCOLL_STREAM_THRESHOLD=64K INCOLL_PAYLOAD=1024 "
                           "INCOLL_LOG_LEVEL=info INCOLL_FAULT_DROP=0.05 "
                           "INCOLL_FAULT_SEED=5",
                           "--iters 50", out, sizeof(out));
    if (ret != 0 || !file_has(out, "all correct")) {
        show_tail(out);
        CHECK_MSG(0, "nb_check exited %d", ret);
    }
    fprintf(stderr, "    %llu operations streamed\n", streamed_in(out));
    CHECK_MSG(streamed_in(out) > 0, "no operation streamed (%s)", out);
    return TEST_PASSED;
}
