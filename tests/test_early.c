/*
 * Early returns of the blocking rooted collectives (INCOLL_EARLY_MAX,
 * docs/nonblocking.md) on real daemons: tests/progs/early_check runs
 * reduce, gather, bcast and scatter in turn; a reduce's and gather's
 * non-roots and a bcast's and scatter's root overwrite their buffers at
 * once after the call, and every result is checked. The handshake proves
 * that each such call returned before its operation completed (the
 * members with a result call only once the early members have returned),
 * and libincoll's counter of early returns must equal the calls that
 * could return early. Clean, under 5% loss, and with an operation that
 * fails after its early members returned (the next call returns the
 * error; the broken communicator fails every later call).
 */
#include "integ.h"
#include "test.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* early_check on n hosts (radix k): every rank must say "all correct";
 * with needle, the output must have it too. */
static int run_early(int n, int k, const char *env, const char *args,
                     const char *what, const char *needle)
{
    char out[PATH_MAX];
    int ret, found;
    if (!have_fabric_binaries("early_check"))
        return test_skip("build/bin/incoll, incoll-agg or "
                         "build/tests/early_check not built");
    ret = run_fabric_check("early_check", "earlyfab", "early", n, k, 0, env,
                           args, out, sizeof(out));
    found = 0;
    {
        char *text = slurp(out);
        for (const char *p = text; (p = strstr(p, "all correct")); p++)
            found++;
        if (needle && strstr(text, needle) == NULL)
            found = -1;
        free(text);
    }
    if (ret != 0 || found != n) {
        show_tail(out);
        CHECK_MSG(0, "%s: early_check exited %d, %d of %d ranks all correct%s",
                  what, ret, found, n,
                  found < 0 ? " (no warning of the failure)" : "");
    }
    return TEST_PASSED;
}

static const char *flag_dir(const char *tag)
{
    static char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/early-flags-%s", test_tmpdir(), tag);
    mkdir(dir, 0755);
    return dir;
}

TEST(early_rooted_handshake, TEST_INTEG)
{
    char args[PATH_MAX + 64];
    snprintf(args, sizeof(args), "--iters 48 --count 16 --handshake %s",
             flag_dir("clean"));
    return run_early(5, 2, NULL, args, "5 hosts, handshake", NULL);
}

TEST(early_rooted_lossy, TEST_INTEG)
{
    return run_early(4, 2, "INCOLL_FAULT_DROP=0.05 INCOLL_FAULT_SEED=11",
                     "--iters 400 --count 64", "4 hosts, 5% loss", NULL);
}

/* Off: the same calls, none returns early (expected counts the calls that
 * did, and the counter must agree: both 0 is checked by the program's
 * equality, the handshake would fail). */
TEST(early_rooted_off, TEST_INTEG)
{
    return run_early(4, 2, "INCOLL_EARLY_MAX=0", "--iters 40 --count 16",
                     "4 hosts, INCOLL_EARLY_MAX=0", NULL);
}

TEST(early_rooted_fail_next_call, TEST_INTEG)
{
    return run_early(4, 2,
                     "INCOLL_TIMEOUT_MS=500 INCOLL_MGR_OP_TIMEOUT_MS=500 "
                     "INCOLL_WAIT_MS=1000 INCOLL_MGR_TIMEOUT_MS=2000 "
                     "INCOLL_LOG_LEVEL=warn",
                     "--fail-at 8 --count 16", "4 hosts, a failure",
                     "the operation this member returned early from failed");
}

/* A communicator whose thread cannot be started (the system out of
 * threads): its blocking calls run as usual without returning early, its
 * nonblocking bcast fails at once with INCOLL_ERR_NO_MEMORY on every rank,
 * and the reason is said. */
TEST(early_rooted_no_thread, TEST_INTEG)
{
    return run_early(4, 2, "INCOLL_FAULT_NO_THREAD=1", "--iters 40 --count 16",
                     "4 hosts, no thread", "cannot start the thread");
}
