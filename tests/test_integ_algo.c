/*
 * Integration tests of the host-based allreduce algorithms (recursive doubling,
 * ring, Rabenseifner) next to the in-network one: real daemons from
 * test_fabric_up (tests/integ.c), real ranks from `incoll run`, results checked
 * by tests/progs/algo_check, alternating algorithms on one communicator, clean
 * and with loss, duplication and reordering injected on the hosts' sockets
 * (INCOLL_FAULT_*). Host-based algorithms need fixed host ports; when the
 * fabric leaves them out (port 0), the test gives every host a free port in
 * fabric.conf before starting the ranks. Every test brings its fabric down,
 * also when it fails.
 */
#include "integ.h"

#include <limits.h>

static int have_binaries(void)
{
    return have_fabric_binaries("algo_check");
}

/* run_fabric_check() of algo_check, in <tmp>/fabN, as job algo-N-<pid>. */
static int run_algo_check(int n, int k, int keep_port0, const char *env,
                          const char *args, char *out, size_t outlen)
{
    return run_fabric_check("algo_check", "fab", "algo", n, k, keep_port0, env,
                            args, out, outlen);
}

TEST(integ_algo_clean, TEST_INTEG)
{
    static const int shapes[][2] = {{2, 2}, {5, 2}, {8, 4}, {7, 3}};
    char out[PATH_MAX];
    if (!have_binaries())
        return test_skip(
            "build/bin/incoll, incoll-agg or build/tests/algo_check "
            "not built");
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int ret = run_algo_check(shapes[i][0], shapes[i][1], 0, NULL, NULL, out,
                                 sizeof(out));
        if (ret != 0 || !file_has(out, "all correct")) {
            show_tail(out);
            CHECK_MSG(0, "%d hosts, radix %d: algo_check exited %d",
                      shapes[i][0], shapes[i][1], ret);
        }
    }
    return TEST_PASSED;
}

TEST(integ_algo_lossy, TEST_INTEG)
{
    static const char *const faults[] = {
        "INCOLL_FAULT_DROP=0.05 INCOLL_FAULT_SEED=3",
        "INCOLL_FAULT_DROP=0.05 INCOLL_FAULT_DUP=0.05 INCOLL_FAULT_REORDER=0.1 "
        "INCOLL_FAULT_SEED=11",
        /* Bursts, as a queue overflowing under incast drops them. */
        "INCOLL_FAULT_DROP=0.05 INCOLL_FAULT_BURST=4 INCOLL_FAULT_SEED=17",
    };
    char out[PATH_MAX];
    if (!have_binaries())
        return test_skip(
            "build/bin/incoll, incoll-agg or build/tests/algo_check "
            "not built");
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
        int ret = run_algo_check(
            6, 2, 0, faults[i], "--sizes 1,5,6,7,1000,30000", out, sizeof(out));
        if (ret != 0 || !file_has(out, "all correct")) {
            show_tail(out);
            CHECK_MSG(0, "%s: algo_check exited %d", faults[i], ret);
        }
    }
    return TEST_PASSED;
}

/* Without fixed host ports the host-based algorithms refuse to run, with a
 * message that says why, instead of hanging. */
TEST(integ_algo_needs_ports, TEST_INTEG)
{
    char out[PATH_MAX];
    int ret;

    if (!have_binaries())
        return test_skip(
            "build/bin/incoll, incoll-agg or build/tests/algo_check "
            "not built");
    ret = run_algo_check(3, 2, 1, NULL, "--algos ring --sizes 10", out,
                         sizeof(out));
    /* If `incoll fabric up` assigns host ports itself, the run succeeds. */
    if (ret == 0) {
        CHECK(file_has(out, "all correct"));
        return TEST_PASSED;
    }
    if (ret != 4 || !file_has(out, "need fixed host ports"))
        show_tail(out);
    CHECK_EQ_INT(ret, 4);
    CHECK(file_has(out, "need fixed host ports"));
    return TEST_PASSED;
}
