/*
 * Test runner: runs every registered test (or those whose name contains an
 * argument), each in a forked child with a time limit so a crash or a hang
 * fails that test alone. Options: --unit (unit tests only), --integ
 * (integration tests only), --list.
 */
#include "test.h"
#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *name;
    int kind;
    test_fn_t fn;
    int limit_s; /* 0: the default of its kind */
} test_entry_t;

/* Grown as constructors register tests (before main); a registration that
 * cannot be stored is remembered and fails the run, never dropped. */
static test_entry_t *tests;
static int ntests, tests_cap;
static int tests_lost;
static char bindir[PATH_MAX];
static char tmpdir[PATH_MAX];
static int skip_fd = -1;

void test_register_limit(const char *name, int kind, test_fn_t fn, int limit_s)
{
    if (ntests == tests_cap) {
        int ncap = tests_cap ? tests_cap * 2 : 256;
        test_entry_t *nt = realloc(tests, (size_t)ncap * sizeof(*nt));
        if (nt == NULL) {
            tests_lost++;
            return;
        }
        tests = nt;
        tests_cap = ncap;
    }
    tests[ntests++] = (test_entry_t){name, kind, fn, limit_s};
}

void test_register(const char *name, int kind, test_fn_t fn)
{
    test_register_limit(name, kind, fn, 0);
}

int test_count(void)
{
    return ntests;
}

int test_is_registered(const char *name)
{
    for (int i = 0; i < ntests; i++)
        if (strcmp(tests[i].name, name) == 0)
            return 1;
    return 0;
}

int test_skip(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (skip_fd >= 0) {
        ssize_t r = write(skip_fd, buf, strlen(buf));
        (void)r;
    }
    return TEST_SKIPPED;
}

const char *test_bindir(void)
{
    return bindir;
}

const char *test_tmpdir(void)
{
    if (tmpdir[0] == '\0') {
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/incoll-test-XXXXXX");
        if (mkdtemp(tmpdir) == NULL) {
            perror("mkdtemp");
            tmpdir[0] = '\0';
            return "/tmp";
        }
    }
    return tmpdir;
}

const char *test_srcdir(void)
{
    static char dir[PATH_MAX];
    char up[PATH_MAX + 16], readme[PATH_MAX + 16];

    if (dir[0] == '\0') {
        snprintf(up, sizeof(up), "%s/../..", bindir);
        if (realpath(up, dir) == NULL)
            dir[0] = '\0';
        snprintf(readme, sizeof(readme), "%s/README.md", dir);
        if (access(readme, R_OK) != 0)
            dir[0] = '\0';
    }
    return dir;
}

int test_doc_line(const char *path, const char *prefix, char *buf, size_t len)
{
    char full[PATH_MAX + 64], *line = NULL;
    size_t cap = 0, plen = strlen(prefix);
    ssize_t n;
    int ret = -1;
    FILE *f;

    snprintf(full, sizeof(full), "%s/%s", test_srcdir(), path);
    f = fopen(full, "r");
    if (f == NULL)
        return -1;
    while (ret != 0 && (n = getline(&line, &cap, f)) >= 0) {
        if (n > 0 && line[n - 1] == '\n')
            line[--n] = '\0';
        if (strncmp(line, prefix, plen) != 0)
            continue;
        if ((size_t)n < len) {
            memcpy(buf, line, (size_t)n + 1);
            ret = 0;
        } else {
            break;
        }
    }
    free(line);
    fclose(f);
    return ret;
}

static int cmp_tests(const void *a, const void *b)
{
    return strcmp(((const test_entry_t *)a)->name,
                  ((const test_entry_t *)b)->name);
}

static int run_one(const test_entry_t *t, int limit_s, char *why, size_t whylen)
{
    int pipefd[2];
    pid_t pid;
    int status = 0, result;
    double deadline;

    why[0] = '\0';
    if (pipe(pipefd) != 0)
        return TEST_FAILED;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        skip_fd = pipefd[1];
        setpgid(0, 0);
        tmpdir[0] = '\0';
        result = t->fn();
        if (result == TEST_PASSED && tmpdir[0] != '\0' &&
            !getenv("INCOLL_TEST_KEEP")) {
            char cmd[PATH_MAX + 16];
            snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
            if (system(cmd) != 0)
                fprintf(stderr, "    could not remove %s\n", tmpdir);
        } else if (tmpdir[0] != '\0') {
            fprintf(stderr, "    test files kept in %s\n", tmpdir);
        }
        fflush(NULL);
        _exit(result);
    }
    close(pipefd[1]);
    deadline = now_s() + limit_s;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (now_s() > deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            snprintf(why, whylen, "timed out after %d s", limit_s);
            close(pipefd[0]);
            return TEST_FAILED;
        }
        usleep(20000);
    }
    {
        ssize_t n = read(pipefd[0], why, whylen - 1);
        why[n > 0 ? n : 0] = '\0';
    }
    close(pipefd[0]);
    if (WIFSIGNALED(status)) {
        snprintf(why, whylen, "killed by signal %d", WTERMSIG(status));
        return TEST_FAILED;
    }
    if (!WIFEXITED(status))
        return TEST_FAILED;
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    int want_kind = TEST_UNIT | TEST_INTEG, list = 0;
    const char *filters[64];
    int nfilters = 0, passed = 0, failed = 0, skipped = 0;
    int limit_all = 0; /* INCOLL_TEST_LIMIT_S: every test's limit */
    const char *env;

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--unit") == 0)
            want_kind = TEST_UNIT;
        else if (strcmp(argv[i], "--integ") == 0)
            want_kind = TEST_INTEG;
        else if (strcmp(argv[i], "--list") == 0)
            list = 1;
        else if (nfilters < 64)
            filters[nfilters++] = argv[i];
    }
    env = getenv("INCOLL_TEST_BINDIR");
    snprintf(bindir, sizeof(bindir), "%s", env ? env : "build/bin");
    env = getenv("INCOLL_TEST_LIMIT_S");
    if (env)
        limit_all = atoi(env);
    if (tests_lost > 0) {
        printf(
            "FAIL runner: %d test%s could not be registered (out of memory)\n",
            tests_lost, tests_lost == 1 ? "" : "s");
        failed += tests_lost;
    }
    if (ntests > 0)
        qsort(tests, (size_t)ntests, sizeof(tests[0]), cmp_tests);

    for (int i = 0; i < ntests; i++) {
        const test_entry_t *t = &tests[i];
        char why[512];
        int match = nfilters == 0, r, limit_s;
        double t0;

        if (!(t->kind & want_kind))
            continue;
        for (int f = 0; f < nfilters; f++)
            if (strstr(t->name, filters[f]))
                match = 1;
        if (!match)
            continue;
        if (list) {
            printf("%s %s\n", t->kind == TEST_UNIT ? "unit " : "integ",
                   t->name);
            continue;
        }
        limit_s = limit_all > 0          ? limit_all
                  : t->limit_s > 0       ? t->limit_s
                  : t->kind == TEST_UNIT ? TEST_LIMIT_UNIT_S
                                         : TEST_LIMIT_INTEG_S;
        t0 = now_s();
        r = run_one(t, limit_s, why, sizeof(why));
        if (r == TEST_PASSED) {
            passed++;
            printf("PASS %s (%.2f s)\n", t->name, now_s() - t0);
        } else if (r == TEST_SKIPPED) {
            skipped++;
            printf("SKIP %s: %s\n", t->name, why);
        } else {
            failed++;
            printf("FAIL %s%s%s (%.2f s)\n", t->name, why[0] ? ": " : "", why,
                   now_s() - t0);
        }
    }
    if (!list)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
