/*
 * Test runner: runs every registered test (or those whose name contains an
 * argument; =NAME: the test NAME alone), each in a forked child with a
 * time limit so a crash or a hang fails that test alone. Options: --unit
 * (unit tests only), --integ (integration tests only), --list, -j N
 * (INCOLL_TEST_JOBS=N): up to N tests at once, each one's output shown
 * whole when it ends. The unit tests come first; then the integration
 * tests that mostly wait (shares_machine() below), up to N at once; then
 * the other integration tests one at a time.
 */
#include "test.h"
#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

/* A test running in its child. */
typedef struct {
    const test_entry_t *t;
    pid_t pid;
    int why_fd; /* the skip reason's pipe */
    int out_fd; /* its output when captured, else -1 */
    double t0, deadline;
    int limit_s;
} running_t;

/* Every process a test starts carries INCOLL_TEST_TAG=<runner>.<test's
 * child> in its environment, daemons in process groups of their own too,
 * so that what a test leaves running can be found when it ends. */
static void tag_of(pid_t child, char *tag, size_t len)
{
    snprintf(tag, len, "INCOLL_TEST_TAG=%ld.%ld", (long)getpid(), (long)child);
}

static void set_tag(void)
{
    char tag[64];
    snprintf(tag, sizeof(tag), "%ld.%ld", (long)getppid(), (long)getpid());
    setenv("INCOLL_TEST_TAG", tag, 1);
}

/* 1 when process pid's environment holds tag (a whole entry). */
static int has_tag(const char *pid, const char *tag)
{
    char path[300], env[65536];
    size_t n, len = strlen(tag);
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%s/environ", pid);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    n = fread(env, 1, sizeof(env) - 1, f);
    fclose(f);
    env[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(env + i) + 1)
        if (strncmp(env + i, tag, len) == 0 && env[i + len] == '\0')
            return 1;
    return 0;
}

/* The processes still carrying tag (up to max, in pids); their count. */
static int find_tagged(const char *tag, pid_t *pids, int max)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL && n < max) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        if (atol(e->d_name) != (long)getpid() && has_tag(e->d_name, tag))
            pids[n++] = (pid_t)atol(e->d_name);
    }
    closedir(d);
    return n;
}

/* The emulated fabric (src/fabric/emu.h) whose namespace process pid runs
 * in: its directory, from /run/incoll-emu/<prefix> ("" when pid is not in
 * one). */
static void fabric_of(pid_t pid, char *dir, size_t len)
{
    char path[64], name[PATH_MAX];
    struct stat ns, st;
    DIR *d;
    struct dirent *e;

    dir[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%ld/ns/net", (long)pid);
    if (stat(path, &ns) != 0 || (d = opendir("/run/netns")) == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char *dash;
        FILE *f;

        snprintf(name, sizeof(name), "/run/netns/%s", e->d_name);
        if (stat(name, &st) != 0 || st.st_ino != ns.st_ino ||
            strncmp(e->d_name, "inc", 3) != 0 ||
            (dash = strchr(e->d_name, '-')) == NULL)
            continue;
        snprintf(name, sizeof(name), "/run/incoll-emu/%.*s",
                 (int)(dash - e->d_name), e->d_name);
        f = fopen(name, "r");
        if (f != NULL) {
            if (fgets(dir, (int)len, f) == NULL)
                dir[0] = '\0';
            dir[strcspn(dir, "\n")] = '\0';
            fclose(f);
        }
        break;
    }
    closedir(d);
}

/* Kills what r's test left running after it ended (a daemon whose test
 * returned on a failed check before its clean-up), after a second's grace
 * for processes already on their way out, and says so: a test that leaks
 * its daemons would otherwise load or disturb the tests after it. */
static void kill_strays(const running_t *r)
{
    char tag[64], names[256] = "", fabric[PATH_MAX] = "";
    pid_t pids[64];
    int n = 0;

    tag_of(r->pid, tag, sizeof(tag));
    for (int tries = 0; tries < 10; tries++) {
        n = find_tagged(tag, pids, 64);
        if (n == 0)
            return;
        usleep(100000);
    }
    for (int i = 0; i < n; i++) {
        char path[64], comm[32] = "?";
        FILE *f;
        size_t used = strlen(names);

        snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pids[i]);
        f = fopen(path, "r");
        if (f != NULL) {
            if (fgets(comm, sizeof(comm), f) != NULL)
                comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        if (used + strlen(comm) + 2 < sizeof(names))
            snprintf(names + used, sizeof(names) - used, " %s", comm);
        if (fabric[0] == '\0')
            fabric_of(pids[i], fabric, sizeof(fabric));
        kill(pids[i], SIGKILL);
    }
    printf("    %s left %d process%s running, killed:%s\n", r->t->name, n,
           n == 1 ? "" : "es", names);
    if (fabric[0] != '\0' && strchr(fabric, '\'') == NULL) {
        char cmd[2 * PATH_MAX + 64];
        snprintf(cmd, sizeof(cmd), "'%s/incoll' fabric down --dir '%s' >&2",
                 bindir, fabric);
        if (system(cmd) != 0)
            printf("    could not bring its fabric down (%s)\n", fabric);
    }
}

/* Starts t in a child of its own process group; with capture its stdout
 * and stderr go to a file shown when it ends (tests run side by side).
 * 0, or -1 when it cannot be started. */
static int start_one(const test_entry_t *t, int limit_s, int capture,
                     running_t *r)
{
    int pipefd[2], result;
    char outpath[] = "/tmp/incoll-test-out-XXXXXX";

    r->t = t;
    r->out_fd = -1;
    r->limit_s = limit_s;
    /* Close-on-exec: a daemon the test starts must not hold the skip
     * reason's pipe open. */
    if (pipe2(pipefd, O_CLOEXEC) != 0)
        return -1;
    if (capture) {
        r->out_fd = mkstemp(outpath);
        if (r->out_fd < 0) {
            close(pipefd[0]);
            close(pipefd[1]);
            return -1;
        }
        unlink(outpath);
    }
    fflush(NULL);
    r->pid = fork();
    if (r->pid < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        if (r->out_fd >= 0)
            close(r->out_fd);
        return -1;
    }
    if (r->pid == 0) {
        close(pipefd[0]);
        if (r->out_fd >= 0) {
            dup2(r->out_fd, 1);
            dup2(r->out_fd, 2);
            close(r->out_fd);
        }
        skip_fd = pipefd[1];
        setpgid(0, 0);
        set_tag();
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
    r->why_fd = pipefd[0];
    r->t0 = now_s();
    r->deadline = r->t0 + limit_s;
    return 0;
}

/* r's child ended (status) or ran out of time (timed_out: killed here);
 * its captured output is shown, its descriptors closed; the result. */
static int finish_one(running_t *r, int status, int timed_out, char *why,
                      size_t whylen)
{
    int result;
    why[0] = '\0';
    if (r->out_fd >= 0) {
        char buf[4096];
        ssize_t n;
        fflush(stdout);
        lseek(r->out_fd, 0, SEEK_SET);
        while ((n = read(r->out_fd, buf, sizeof(buf))) > 0)
            if (write(1, buf, (size_t)n) != n)
                break;
        close(r->out_fd);
    }
    if (timed_out) {
        snprintf(why, whylen, "timed out after %d s", r->limit_s);
        result = TEST_FAILED;
    } else {
        /* The child has ended: what it wrote is in the pipe; a process it
         * forked may still hold the pipe open, so never wait for more. */
        ssize_t n;
        fcntl(r->why_fd, F_SETFL, O_NONBLOCK);
        n = read(r->why_fd, why, whylen - 1);
        why[n > 0 ? n : 0] = '\0';
        if (WIFSIGNALED(status)) {
            snprintf(why, whylen, "killed by signal %d", WTERMSIG(status));
            result = TEST_FAILED;
        } else {
            result = WIFEXITED(status) ? WEXITSTATUS(status) : TEST_FAILED;
        }
    }
    close(r->why_fd);
    return result;
}

/* 1 when r's child ended or was killed for its time (*status, *timed_out
 * set), 0 while it runs. */
static int poll_one(running_t *r, int *status, int *timed_out)
{
    *timed_out = 0;
    if (waitpid(r->pid, status, WNOHANG) == r->pid)
        return 1;
    if (now_s() > r->deadline) {
        kill(-r->pid, SIGKILL);
        kill(r->pid, SIGKILL);
        waitpid(r->pid, status, 0);
        *timed_out = 1;
        return 1;
    }
    return 0;
}

typedef struct {
    int passed, failed, skipped;
} tally_t;

static void report(tally_t *n, const running_t *r, int result, const char *why)
{
    if (result == TEST_PASSED) {
        n->passed++;
        printf("PASS %s (%.2f s)\n", r->t->name, now_s() - r->t0);
    } else if (result == TEST_SKIPPED) {
        n->skipped++;
        printf("SKIP %s: %s\n", r->t->name, why);
    } else {
        n->failed++;
        printf("FAIL %s%s%s (%.2f s)\n", r->t->name, why[0] ? ": " : "", why,
               now_s() - r->t0);
    }
}

/*
 * The integration tests that may run beside another (with -j): those of
 * these families spend their time waiting (for timeouts, restarts,
 * retransmissions on 127.0.0.1 or an emulated fabric of their own) and
 * touch nothing another test uses: their ports are the kernel's free
 * ones, their fabrics and namespaces have names of their own. The others
 * run alone: the MPI jobs (ranks that poll for their progress), the
 * benchmarks and the simulator (the CPU), the tests that count wake-ups
 * or time what they measure, and any family not named here.
 */
static const char *const shared_families[] = {
    "early_",
    "hier_",
    "integ_",
    NULL,
};
/* ... but not those whose names contain these: they count the wake-ups
 * or the datagrams of a call, which a test beside them could change, or
 * (integ_fabric_count_) move a GiB through an AN with a time limit. */
static const char *const alone_words[] = {
    "wakeups",
    "_cost",
    "integ_fabric_count_",
    NULL,
};

static int shares_machine(const char *name)
{
    int shared = 0;
    for (int i = 0; shared_families[i] != NULL; i++)
        if (strncmp(name, shared_families[i], strlen(shared_families[i])) == 0)
            shared = 1;
    for (int i = 0; alone_words[i] != NULL; i++)
        if (strstr(name, alone_words[i]) != NULL)
            shared = 0;
    return shared;
}

/*
 * Runs the n tests of list: up to jobs at once, each one's output shown
 * whole when it ends (jobs > 1: tests that share nothing), or one after
 * the other with their output as it comes.
 */
static void run_list(const test_entry_t **list, int n, int jobs, int limit_all,
                     tally_t *tally)
{
    running_t *run = calloc((size_t)(jobs > 0 ? jobs : 1), sizeof(*run));
    int next = 0, active = 0;
    char why[512];

    if (run == NULL) {
        printf("FAIL runner: out of memory\n");
        tally->failed++;
        return;
    }
    if (jobs < 1)
        jobs = 1;
    while (next < n || active > 0) {
        int status, timed_out, result, progressed = 0;
        while (active < jobs && next < n) {
            const test_entry_t *t = list[next++];
            int limit_s = limit_all > 0          ? limit_all
                          : t->limit_s > 0       ? t->limit_s
                          : t->kind == TEST_UNIT ? TEST_LIMIT_UNIT_S
                                                 : TEST_LIMIT_INTEG_S;
            if (start_one(t, limit_s, jobs > 1, &run[active]) != 0) {
                printf("FAIL %s: cannot start it\n", t->name);
                tally->failed++;
                continue;
            }
            active++;
        }
        for (int i = 0; i < active; i++) {
            if (!poll_one(&run[i], &status, &timed_out))
                continue;
            result = finish_one(&run[i], status, timed_out, why, sizeof(why));
            kill_strays(&run[i]);
            report(tally, &run[i], result, why);
            run[i--] = run[--active];
            progressed = 1;
        }
        if (!progressed && active > 0)
            usleep(20000);
    }
    free(run);
}

int main(int argc, char **argv)
{
    int want_kind = TEST_UNIT | TEST_INTEG, list = 0;
    const char *filters[64];
    int nfilters = 0, nunit = 0, ninteg = 0, nalone = 0, jobs = 1;
    int limit_all = 0; /* INCOLL_TEST_LIMIT_S: every test's limit */
    const test_entry_t **unit, **integ, **alone;
    tally_t tally = {0, 0, 0};
    const char *env;

    setvbuf(stdout, NULL, _IOLBF, 0);
    env = getenv("INCOLL_TEST_JOBS");
    if (env)
        jobs = atoi(env);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--unit") == 0)
            want_kind = TEST_UNIT;
        else if (strcmp(argv[i], "--integ") == 0)
            want_kind = TEST_INTEG;
        else if (strcmp(argv[i], "--list") == 0)
            list = 1;
        else if (strncmp(argv[i], "-j", 2) == 0 && argv[i][2])
            jobs = atoi(argv[i] + 2);
        else if (strcmp(argv[i], "-j") == 0 && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (nfilters < 64)
            filters[nfilters++] = argv[i];
    }
    if (jobs < 1)
        jobs = 1;
    env = getenv("INCOLL_TEST_BINDIR");
    snprintf(bindir, sizeof(bindir), "%s", env ? env : "build/bin");
    env = getenv("INCOLL_TEST_LIMIT_S");
    if (env)
        limit_all = atoi(env);
    if (tests_lost > 0) {
        printf(
            "FAIL runner: %d test%s could not be registered (out of memory)\n",
            tests_lost, tests_lost == 1 ? "" : "s");
        tally.failed += tests_lost;
    }
    if (ntests > 0)
        qsort(tests, (size_t)ntests, sizeof(tests[0]), cmp_tests);
    unit = calloc((size_t)ntests + 1, sizeof(*unit));
    integ = calloc((size_t)ntests + 1, sizeof(*integ));
    alone = calloc((size_t)ntests + 1, sizeof(*alone));
    if (unit == NULL || integ == NULL || alone == NULL) {
        printf("FAIL runner: out of memory\n");
        return 1;
    }

    for (int i = 0; i < ntests; i++) {
        const test_entry_t *t = &tests[i];
        int match = nfilters == 0;

        if (!(t->kind & want_kind))
            continue;
        for (int f = 0; f < nfilters; f++)
            if (filters[f][0] == '=' ? strcmp(t->name, filters[f] + 1) == 0
                                     : strstr(t->name, filters[f]) != NULL)
                match = 1;
        if (!match)
            continue;
        if (list) {
            printf("%s %s\n", t->kind == TEST_UNIT ? "unit " : "integ",
                   t->name);
            continue;
        }
        if (t->kind == TEST_UNIT)
            unit[nunit++] = t;
        else if (shares_machine(t->name))
            integ[ninteg++] = t;
        else
            alone[nalone++] = t;
    }
    /* The unit tests and the integration tests that mostly wait side by
     * side (-j N, INCOLL_TEST_JOBS), then the other integration tests one
     * at a time. */
    run_list(unit, nunit, jobs, limit_all, &tally);
    run_list(integ, ninteg, jobs, limit_all, &tally);
    run_list(alone, nalone, 1, limit_all, &tally);
    free(unit);
    free(integ);
    free(alone);
    if (!list)
        printf("%d passed, %d failed, %d skipped\n", tally.passed, tally.failed,
               tally.skipped);
    return tally.failed ? 1 : 0;
}
