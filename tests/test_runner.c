/*
 * The test runner itself: it keeps every test registered, however many
 * (a fixed table once dropped those past 512 without a word). The test
 * runs in its own child, so the names it registers go with it.
 */
#include "test.h"

#include <fcntl.h>
#include <unistd.h>

static int never_run(void)
{
    return TEST_FAILED;
}

TEST(runner_keeps_every_test, TEST_UNIT)
{
    enum { EXTRA = 1500 };
    static char names[EXTRA][32];
    int before = test_count();

    CHECK(before > 0);
    CHECK(test_is_registered("runner_keeps_every_test"));
    for (int i = 0; i < EXTRA; i++) {
        snprintf(names[i], sizeof(names[i]), "runner_extra_%d", i);
        test_register(names[i], TEST_UNIT, never_run);
    }
    CHECK_MSG(test_count() == before + EXTRA,
              "%d tests registered after adding %d to %d", test_count(), EXTRA,
              before);
    CHECK(test_is_registered("runner_extra_0"));
    CHECK(test_is_registered("runner_extra_1499"));
    CHECK(test_is_registered("runner_keeps_every_test"));
    return TEST_PASSED;
}

/* Leaves a process running in a session of its own, as a test whose check
 * failed before its clean-up leaves a daemon, but only when the test below
 * asks for it (a run of the runner inside that test). */
TEST(runner_leaves_a_process, TEST_UNIT)
{
    const char *mark = getenv("INCOLL_TEST_LEAVE");
    pid_t pid;

    if (mark == NULL)
        return TEST_PASSED;
    int exec_seen[2];
    char c;

    CHECK(pipe2(exec_seen, O_CLOEXEC) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setsid();
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    /* Returns once the exec is done (the pipe closed by it), as a test's
     * daemons are when its check fails: a process only forked carries the
     * environment of the test's own exec, without the runner's tag. */
    close(exec_seen[1]);
    CHECK(read(exec_seen[0], &c, 1) == 0);
    close(exec_seen[0]);
    return TEST_PASSED;
}

TEST(runner_kills_what_a_test_leaves, TEST_UNIT)
{
    char cmd[512], out[4096] = "", self[256];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    size_t used = 0;
    FILE *p;
    int status;

    CHECK(n > 0);
    self[n] = '\0';
    snprintf(cmd, sizeof(cmd),
             "INCOLL_TEST_LEAVE=1 '%s' runner_leaves_a_process 2>&1", self);
    p = popen(cmd, "r");
    CHECK(p != NULL);
    while (used + 1 < sizeof(out) &&
           (n = (ssize_t)fread(out + used, 1, sizeof(out) - 1 - used, p)) > 0)
        used += (size_t)n;
    out[used] = '\0';
    status = pclose(p);
    CHECK_MSG(status == 0, "the inner run failed: %s", out);
    CHECK_MSG(strstr(out, "runner_leaves_a_process left 1 process running, "
                          "killed: sleep") != NULL,
              "the inner run did not say what it killed: %s", out);
    /* Nothing the inner run started may be left running. */
    CHECK_MSG(system("for p in $(pgrep -x sleep); do "
                     "{ tr '\\0' '\\n' </proc/$p/environ; } 2>/dev/null | "
                     "grep -q '^INCOLL_TEST_LEAVE=1$' && exit 1; done; "
                     "exit 0") == 0,
              "the process the inner test left is still running");
    return TEST_PASSED;
}
