/*
 * Integration tests of reduce, bcast, barrier, allgather, gather, scatter and
 * reduce_scatter: real daemons from test_fabric_up (tests/integ.c), real ranks
 * from `incoll run`, results checked by tests/progs/coll_check through the
 * public API and every host-based algorithm, alternating on one communicator,
 * clean and with loss, duplication and reordering injected on the hosts'
 * sockets (INCOLL_FAULT_*). Every test brings its fabric down, also when it
 * fails.
 */
#include "integ.h"

#include <limits.h>

/* Prints the line of path holding text (the run's summary). */
static void show_line(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    while (f && fgets(line, sizeof(line), f))
        if (strstr(line, text))
            printf("    %s", line);
    if (f)
        fclose(f);
}

static int have_binaries(void)
{
    return have_fabric_binaries("coll_check");
}

/* run_fabric_check() of coll_check, in <tmp>/cfabN, as job coll-N-<pid>. */
static int run_coll_check(int n, int k, int keep_port0, const char *env,
                          const char *args, char *out, size_t outlen)
{
    return run_fabric_check("coll_check", "cfab", "coll", n, k, keep_port0, env,
                            args, out, outlen);
}

/* Odd and even sizes, 2- and 3-level trees; sizes 0, 1, odd, several
 * packets and several segments (a pipelined bcast and reduce). */
TEST(integ_colls_clean, TEST_INTEG)
{
    static const int shapes[][2] = {{2, 2}, {5, 2}, {8, 4}, {7, 3}};
    char out[PATH_MAX];
    if (!have_binaries())
        return test_skip(
            "build/bin/incoll, incoll-agg or build/tests/coll_check "
            "not built");
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int ret = run_coll_check(shapes[i][0], shapes[i][1], 0, NULL,
                                 i == 1 ? "--sizes 0,1,7,9000,3000001"
                                        : "--sizes 0,1,7,9000,300001",
                                 out, sizeof(out));
        show_line(out, "all correct");
        if (ret != 0 || !file_has(out, "all correct")) {
            show_tail(out);
            CHECK_MSG(0, "%d hosts, radix %d: coll_check exited %d",
                      shapes[i][0], shapes[i][1], ret);
        }
    }
    return TEST_PASSED;
}

TEST(integ_colls_lossy, TEST_INTEG)
{
    static const char *const faults[] = {
        "INCOLL_FAULT_DROP=0.05 INCOLL_FAULT_SEED=5",
        "INCOLL_FAULT_DROP=0.05 INCOLL_FAULT_DUP=0.02 INCOLL_FAULT_REORDER=0.1 "
        "INCOLL_FAULT_SEED=13",
    };
    char out[PATH_MAX];
    if (!have_binaries())
        return test_skip(
            "build/bin/incoll, incoll-agg or build/tests/coll_check "
            "not built");
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
        int ret = run_coll_check(6, 2, 0, faults[i], "--sizes 1,7,20000,300001",
                                 out, sizeof(out));
        show_line(out, "all correct");
        if (ret != 0 || !file_has(out, "all correct")) {
            show_tail(out);
            CHECK_MSG(0, "%s: coll_check exited %d", faults[i], ret);
        }
    }
    return TEST_PASSED;
}
