/*
 * The test runner itself: it keeps every test registered, however many
 * (a fixed table once dropped those past 512 without a word). The test
 * runs in its own child, so the names it registers go with it. It picks
 * one test by its whole name (=NAME), and with -j 2 runs two integration
 * tests of the families that mostly wait side by side, the others alone.
 */
#include "test.h"

#include "common/clock.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

/* Runs this test binary with the shell words args, env before it, its
 * output (stdout and stderr) into out; the exit status, -1 when it could
 * not run. */
static int run_self(const char *env, const char *args, char *out, size_t len)
{
    char cmd[1024], self[256];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    size_t used = 0;
    FILE *p;

    out[0] = '\0';
    if (n <= 0)
        return -1;
    self[n] = '\0';
    snprintf(cmd, sizeof(cmd), "%s '%s' %s 2>&1", env, self, args);
    p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    while (used + 1 < len &&
           (n = (ssize_t)fread(out + used, 1, len - 1 - used, p)) > 0)
        used += (size_t)n;
    out[used] = '\0';
    return pclose(p);
}

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
    char out[4096];
    int status = run_self("INCOLL_TEST_LEAVE=1", "runner_leaves_a_process", out,
                          sizeof(out));

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

/* =NAME picks the test of that name alone, not those whose names contain
 * it; a bare word still picks every name that contains it. */
TEST(runner_exact_name, TEST_UNIT)
{
    char out[4096];

    CHECK(run_self("", "--list =runner_kills_what_a_test_leaves", out,
                   sizeof(out)) == 0);
    CHECK_MSG(strcmp(out, "unit  runner_kills_what_a_test_leaves\n") == 0,
              "listed: %s", out);
    CHECK(run_self("", "--list =runner_kills", out, sizeof(out)) == 0);
    CHECK_MSG(out[0] == '\0', "listed: %s", out);
    CHECK(run_self("", "--list runner_kills", out, sizeof(out)) == 0);
    CHECK_MSG(strcmp(out, "unit  runner_kills_what_a_test_leaves\n") == 0,
              "listed: %s", out);
    return TEST_PASSED;
}

/* Three integration tests that, when the test below runs them
 * (INCOLL_TEST_SIDE names a file), write when they start and end and
 * wait half a second between: two of a family that shares the machine,
 * one of a family that runs alone. */
static int side_log(const char *name)
{
    const char *path = getenv("INCOLL_TEST_SIDE");
    FILE *f;

    if (path == NULL)
        return TEST_PASSED;
    f = fopen(path, "a");
    CHECK(f != NULL);
    fprintf(f, "start %s %.6f\n", name, now_s());
    fclose(f);
    usleep(500000);
    f = fopen(path, "a");
    CHECK(f != NULL);
    fprintf(f, "end %s %.6f\n", name, now_s());
    fclose(f);
    return TEST_PASSED;
}

TEST(integ_runner_side_a, TEST_INTEG)
{
    return side_log("a");
}

TEST(integ_runner_side_b, TEST_INTEG)
{
    return side_log("b");
}

TEST(runner_alone_integ, TEST_INTEG)
{
    return side_log("c");
}

/* The start and end of test name in the log text; 0, or -1 when absent. */
static int side_times(const char *text, char name, double *t0, double *t1)
{
    char key[16];
    const char *p;

    snprintf(key, sizeof(key), "start %c ", name);
    if ((p = strstr(text, key)) == NULL || sscanf(p + 8, "%lf", t0) != 1)
        return -1;
    snprintf(key, sizeof(key), "end %c ", name);
    if ((p = strstr(text, key)) == NULL || sscanf(p + 6, "%lf", t1) != 1)
        return -1;
    return 0;
}

TEST(runner_side_by_side, TEST_UNIT)
{
    char out[4096], env[PATH_MAX + 32], path[PATH_MAX], text[1024] = "";
    double a0, a1, b0, b1, c0, c1;
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/side.log", test_tmpdir());
    snprintf(env, sizeof(env), "INCOLL_TEST_SIDE='%s'", path);
    CHECK_MSG(run_self(env,
                       "-j 2 =integ_runner_side_a =integ_runner_side_b "
                       "=runner_alone_integ",
                       out, sizeof(out)) == 0,
              "the inner run failed: %s", out);
    CHECK_MSG(strstr(out, "3 passed, 0 failed") != NULL, "%s", out);
    f = fopen(path, "r");
    CHECK(f != NULL);
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    CHECK_MSG(side_times(text, 'a', &a0, &a1) == 0 &&
                  side_times(text, 'b', &b0, &b1) == 0 &&
                  side_times(text, 'c', &c0, &c1) == 0,
              "%s", text);
    /* a and b side by side; c after both. */
    CHECK_MSG(a0 < b1 && b0 < a1, "a and b one after the other: %s", text);
    CHECK_MSG(c0 > a1 && c0 > b1, "c beside a or b: %s", text);
    return TEST_PASSED;
}
