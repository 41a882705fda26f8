/*
 * Integration tests of the aggregation manager with real daemons on
 * 127.0.0.1: an incoll-mgr on a generated fat-tree, one incoll-agg per
 * switch registered with it, and jobs of tests/progs/comm_grid, which
 * split their world into rows and columns (and create one more
 * communicator) and check every allreduce element by element. Covered:
 * two jobs at once on interleaved hosts; more groups than the ANs' quotas
 * (the rest runs on the hosts); a spine AN killed mid-run; a job killed
 * mid-run (reclaimed, as `incoll stat` shows); malformed and
 * unauthenticated control connections next to a running job; a manager
 * restarted under a running job; and the CLI around it (`incoll fabric
 * up` with the manager, `incoll run` with and without it, `incoll stat`,
 * `fabric down`). Every test stops what it started, also when it fails.
 */
#include "integ.h"

#include "flood.h"

#include "incoll.h"

#include "common/fabric_conf.h"
#include "common/log.h"
#include "common/mgr_proto.h"
#include "common/procstat.h"
#include "fabric/mgr_tool.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* ---- a fabric: a manager and one AN per switch ---- */

typedef struct {
    char dir[PATH_MAX];
    char secret[PATH_MAX + 16];
    char topo[PATH_MAX + 16];
    char addr[64];
    char mgr_log[PATH_MAX + 16];
    pid_t mgr;
    int nans;
    char names[64][32];
    pid_t an[64];
} fab_t;

static int start_an(fab_t *f, int i, char **env)
{
    char bin[PATH_MAX], log[PATH_MAX + 64];
    char *argv[] = {bin,     "--name", f->names[i], "--listen", "127.0.0.1:0",
                    "--mgr", f->addr,  "--secret",  f->secret,  NULL};
    snprintf(bin, sizeof(bin), "%s/incoll-agg", test_bindir());
    snprintf(log, sizeof(log), "%s/an-%s.log", f->dir, f->names[i]);
    f->an[i] = spawn(log, argv, env);
    return f->an[i] > 0 ? 0 : -1;
}

/* For the next start_mgr(): environment for the manager, and a
 * descriptor limit (soft and hard) when nonzero. */
static char **mgr_env;
static int mgr_nofile;

static pid_t spawn_mgr(const char *logpath, char **argv)
{
    pid_t pid;
    if (mgr_nofile == 0)
        return spawn(logpath, argv, mgr_env);
    pid = fork();
    if (pid == 0) {
        struct rlimit rl = {(rlim_t)mgr_nofile, (rlim_t)mgr_nofile};
        int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        close_range(3, ~0u, 0);
        for (int i = 0; mgr_env && mgr_env[i]; i++)
            putenv(mgr_env[i]);
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    track_pid(pid);
    return pid;
}

static int start_mgr(fab_t *f, const char *listen, char **extra_args)
{
    char bin[PATH_MAX], port[PATH_MAX + 16];
    char *argv[32];
    int n = 0;
    snprintf(bin, sizeof(bin), "%s/incoll-mgr", test_bindir());
    snprintf(port, sizeof(port), "%s/port", f->dir);
    unlink(port);
    argv[n++] = bin;
    if (access(f->topo, R_OK) == 0) {
        argv[n++] = "--topology";
        argv[n++] = f->topo;
    } else {
        argv[n++] = "--radix";
        argv[n++] = "4";
        argv[n++] = "--levels";
        argv[n++] = "2";
        argv[n++] = "--write-topology";
        argv[n++] = f->topo;
    }
    argv[n++] = "--listen";
    argv[n++] = (char *)listen;
    argv[n++] = "--port-file";
    argv[n++] = port;
    argv[n++] = "--secret";
    argv[n++] = f->secret;
    for (int i = 0; extra_args && extra_args[i] && n < 30; i++)
        argv[n++] = extra_args[i];
    argv[n] = NULL;
    f->mgr = spawn_mgr(f->mgr_log, argv);
    for (int i = 0; i < 250; i++) {
        char *text = slurp(port);
        size_t len = strlen(text);
        if (len > 0 && text[len - 1] == '\n') {
            text[len - 1] = '\0';
            snprintf(f->addr, sizeof(f->addr), "%s", text);
            free(text);
            return 0;
        }
        free(text);
        sleep_s(0.02);
    }
    return -1;
}

static long long stat_value(fab_t *f, const char *prefix, const char *key)
{
    char *text = NULL, err[256];
    long long v;
    if (mgr_tool_stat(f->addr, f->secret, 3000, &text, err, sizeof(err)) !=
        INCOLL_OK) {
        fprintf(stderr, "    stat: %s\n", err);
        return -1;
    }
    v = mgr_tool_stat_value(text, prefix, key);
    free(text);
    return v;
}

static char *stat_text(fab_t *f)
{
    char *text = NULL, err[256];
    if (mgr_tool_stat(f->addr, f->secret, 3000, &text, err, sizeof(err)) !=
        INCOLL_OK) {
        fprintf(stderr, "    stat: %s\n", err);
        return calloc(1, 1);
    }
    return text;
}

/* Waits until the manager's "manager" line has key == want. */
static int wait_stat(fab_t *f, const char *prefix, const char *key,
                     long long want, double timeout_s)
{
    double end = now_s() + timeout_s;
    long long v = -1;
    while (now_s() < end) {
        v = stat_value(f, prefix, key);
        if (v == want)
            return 0;
        sleep_s(0.1);
    }
    fprintf(stderr, "    stat %s%s=%lld, want %lld\n", prefix, key, v, want);
    return -1;
}

/* Starts the manager and every AN; an_env goes to the ANs. */
static int fab_up(fab_t *f, const char *name, char **an_env)
{
    char *text;
    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "%s/%s", test_tmpdir(), name);
    mkdir(f->dir, 0755);
    snprintf(f->secret, sizeof(f->secret), "%s/secret", f->dir);
    snprintf(f->topo, sizeof(f->topo), "%s/topology", f->dir);
    snprintf(f->mgr_log, sizeof(f->mgr_log), "%s/mgr.log", f->dir);
    if (mgr_secret_generate(f->secret) != INCOLL_OK)
        return -1;
    if (start_mgr(f, "127.0.0.1:0", NULL) != 0) {
        fprintf(stderr, "    incoll-mgr did not start (see %s)\n", f->mgr_log);
        return -1;
    }
    text = slurp(f->topo);
    for (char *p = text; (p = strstr(p, "switch ")) != NULL && f->nans < 64;) {
        if (p == text || p[-1] == '\n')
            sscanf(p + 7, "%31s", f->names[f->nans++]);
        p += 7;
    }
    free(text);
    for (int i = 0; i < f->nans; i++)
        if (start_an(f, i, an_env) != 0)
            return -1;
    return wait_stat(f, "manager ", "ans_up", f->nans, 10);
}

/* ---- jobs of comm_grid ---- */

typedef struct {
    const char *name;
    int n;
    int hosts[64];
    pid_t pid[64];
    char log[64][PATH_MAX + 64];
} job_t;

/* For the next job_start(): more environment for every rank (at most 4
 * entries), or NULL; and the program the ranks run (NULL: comm_grid). */
static char **job_env;
static const char *job_prog;

static int job_start(fab_t *f, job_t *j, char **args, const char *log_level)
{
    char bin[PATH_MAX];
    char *argv[24];
    int na = 0;
    snprintf(bin, sizeof(bin), "%s/%s", progdir(),
             job_prog ? job_prog : "comm_grid");
    argv[na++] = bin;
    for (int i = 0; args && args[i] && na < 22; i++)
        argv[na++] = args[i];
    argv[na] = NULL;
    for (int r = 0; r < j->n; r++) {
        char e[8][PATH_MAX + 64];
        char *env[13];
        int ne = 8;
        snprintf(e[0], sizeof(e[0]), "INCOLL_MGR=%s", f->addr);
        snprintf(e[1], sizeof(e[1]), "INCOLL_SECRET_FILE=%s", f->secret);
        snprintf(e[2], sizeof(e[2]), "INCOLL_JOB=%s", j->name);
        snprintf(e[3], sizeof(e[3]), "INCOLL_RANK=%d", r);
        snprintf(e[4], sizeof(e[4]), "INCOLL_SIZE=%d", j->n);
        snprintf(e[5], sizeof(e[5]), "INCOLL_HOST=h%d", j->hosts[r]);
        snprintf(e[6], sizeof(e[6]), "INCOLL_LOG_LEVEL=%s", log_level);
        snprintf(e[7], sizeof(e[7]), "INCOLL_FABRIC=");
        for (int k = 0; k < 8; k++)
            env[k] = e[k];
        for (int k = 0; job_env && job_env[k] && k < 4; k++)
            env[ne++] = job_env[k];
        env[ne] = NULL;
        snprintf(j->log[r], sizeof(j->log[r]), "%s/%s-%d.log", f->dir, j->name,
                 r);
        j->pid[r] = spawn(j->log[r], argv, env);
        if (j->pid[r] <= 0)
            return -1;
    }
    return 0;
}

/* Waits for every rank; 0 when all exited 0 with "ok" printed. */
static int job_wait(job_t *j, double timeout_s)
{
    double end = now_s() + timeout_s;
    int ret = 0;
    for (int r = 0; r < j->n; r++) {
        double left = end - now_s();
        int st = wait_pid(j->pid[r], left > 0 ? left : 0.1);
        char *out = slurp(j->log[r]);
        if (st != 0 || strstr(out, "\nok ") == NULL) {
            fprintf(stderr, "    job %s rank %d: exit %d; log %s:\n%.2000s\n",
                    j->name, r, st, j->log[r], out);
            ret = -1;
        }
        free(out);
    }
    return ret;
}

/* Counts a line pattern over all ranks' logs. */
static int job_count(job_t *j, const char *needle)
{
    int n = 0;
    for (int r = 0; r < j->n; r++) {
        char *out = slurp(j->log[r]);
        n += count_of(out, needle);
        free(out);
    }
    return n;
}

/* 1 when libincoll has communicators (host.h's hooks for comm.c). The
 * probe's own complaint is not news: logging is off meanwhile. */
static int have_comms(void)
{
    int level = log_level_current;
    incoll_comm_h c;
    incoll_status_t probe;
    log_level_current = -1;
    probe = incoll_comm_split(NULL, 0, 0, &c);
    log_level_current = level;
    return probe != INCOLL_ERR_UNSUPPORTED;
}

static int prerequisites(void)
{
    char path[PATH_MAX + 32], *out;
    const char *need[] = {"incoll-mgr", "incoll-agg"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", test_bindir(), need[i]);
        if (access(path, X_OK) != 0) {
            fprintf(stderr, "    %s is not built (`make test` builds it)\n",
                    path);
            return TEST_FAILED;
        }
    }
    snprintf(path, sizeof(path), "%s/comm_grid", progdir());
    if (access(path, X_OK) != 0) {
        fprintf(stderr, "    %s is not built (`make test` builds it)\n", path);
        return TEST_FAILED;
    }
    /* These are features of this tree, not optional packages: their
     * absence is a regression, so a FAIL, not a SKIP. */
    if (!have_comms()) {
        fprintf(stderr,
                "    incoll_comm_split answers INCOLL_ERR_UNSUPPORTED\n");
        return TEST_FAILED;
    }
    /* incoll-agg must know --mgr. */
    {
        char log[PATH_MAX + 32], bin[PATH_MAX];
        char *argv[] = {bin, "--help", NULL};
        int has;
        snprintf(bin, sizeof(bin), "%s/incoll-agg", test_bindir());
        snprintf(log, sizeof(log), "/tmp/incoll-agg-help.%d", (int)getpid());
        wait_pid(spawn(log, argv, NULL), 5);
        out = slurp(log);
        unlink(log);
        has = strstr(out, "--mgr") != NULL;
        free(out);
        if (!has) {
            fprintf(stderr, "    incoll-agg --help does not list --mgr\n");
            return TEST_FAILED;
        }
    }
    return TEST_PASSED;
}

#define RUN(body)                                                              \
    do {                                                                       \
        int r_ = prerequisites();                                              \
        if (r_ != TEST_PASSED)                                                 \
            return r_;                                                         \
        r_ = body();                                                           \
        stop_all();                                                            \
        return r_;                                                             \
    } while (0)

/* ---- the tests ---- */

/* Two jobs at once on interleaved hosts, each splitting its world into
 * rows and columns and making one more communicator, all offloaded. */
static int two_jobs_body(void)
{
    fab_t f;
    job_t a = {.name = "jobA", .n = 4}, b = {.name = "jobB", .n = 4};
    char *args[] = {"--cols", "2",        "--iters",          "150", "--count",
                    "1000",   "--create", "--expect-offload", "all", NULL};
    char *text;

    CHECK(fab_up(&f, "two_jobs", NULL) == 0);
    for (int r = 0; r < 4; r++) {
        a.hosts[r] = 2 * r;     /* h0 h2 h4 h6: one per leaf */
        b.hosts[r] = 7 - 2 * r; /* h7 h5 h3 h1: reversed */
    }
    CHECK(job_start(&f, &a, args, "warn") == 0);
    CHECK(job_start(&f, &b, args, "warn") == 0);
    CHECK(job_wait(&a, 120) == 0);
    CHECK(job_wait(&b, 120) == 0);
    /* world, 2 rows, 2 columns and the even ranks, in each job */
    CHECK_EQ_INT(job_count(&a, "offloaded 1"), 4 + 4 + 4 + 2);
    CHECK_EQ_INT(job_count(&b, "offloaded 1"), 4 + 4 + 4 + 2);
    CHECK(wait_stat(&f, "manager ", "groups", 0, 10) == 0);
    text = stat_text(&f);
    CHECK_MSG(mgr_tool_stat_value(text, "manager ", "groups_made") == 12, "%s",
              text);
    CHECK(mgr_tool_stat_value(text, "manager ", "groups_released") == 12);
    CHECK(wait_stat(&f, "manager ", "jobs", 0, 10) == 0);
    /* Every AN is free again. */
    CHECK(count_of(text, " groups=0 max_groups=") == f.nans);
    free(text);
    return TEST_PASSED;
}

TEST(integ_mgr_two_jobs, TEST_INTEG)
{
    RUN(two_jobs_body);
}

/* Sums "N of M operations streamed" over a job's logs: *streamed_p and
 * *ops_p. */
static void job_streamed(job_t *j, uint64_t *streamed_p, uint64_t *ops_p)
{
    *streamed_p = *ops_p = 0;
    for (int r = 0; r < j->n; r++) {
        char *out = slurp(j->log[r]);
        for (char *p = out; (p = strstr(p, "stream: group ")) != NULL; p++) {
            unsigned long long a, b;
            if (sscanf(p, "stream: group %*u: %llu of %llu operations streamed",
                       &a, &b) == 2) {
                *streamed_p += a;
                *ops_p += b;
            }
        }
        free(out);
    }
}

/* Streaming with real daemons: two jobs at once on interleaved hosts, on
 * ANs with a streaming pool, every allreduce of 8000 bytes locking its
 * tree for one operation (INCOLL_STREAM_THRESHOLD=4K). The jobs' groups
 * share the ANs: some locks are refused and those operations run on the
 * slots. Every result is checked (comm_grid); some operations streamed;
 * a refusal is said at most once per communicator. */
static int stream_two_jobs_run(char **an_env, int lossy)
{
    fab_t f;
    job_t a = {.name = "sjobA", .n = 4}, b = {.name = "sjobB", .n = 4};
    char *args[] = {"--cols", "2",        "--iters",          "60",  "--count",
                    "1000",   "--create", "--expect-offload", "all", NULL};
    /* 8000 bytes stream only when the group's slots carry less at once:
     * 8 slots of 512 bytes. */
    char *env[] = {"INCOLL_STREAM_THRESHOLD=4K", "INCOLL_STREAM_LOCK=op",
                   "INCOLL_PAYLOAD=512", "INCOLL_STREAM_SLOTS=8", NULL};
    char *env_lossy[] = {"INCOLL_STREAM_THRESHOLD=4K", "INCOLL_STREAM_LOCK=op",
                         "INCOLL_PAYLOAD=512",         "INCOLL_STREAM_SLOTS=8",
                         "INCOLL_FAULT_DROP=0.02",     "INCOLL_FAULT_DUP=0.01",
                         "INCOLL_FAULT_REORDER=0.02",  NULL};
    uint64_t sa, oa, sb, ob;
    int ret;

    CHECK(fab_up(&f, "stream_jobs", an_env) == 0);
    for (int r = 0; r < 4; r++) {
        a.hosts[r] = 2 * r;
        b.hosts[r] = 7 - 2 * r;
    }
    job_env = lossy ? env_lossy : env;
    ret = job_start(&f, &a, args, "info") == 0 &&
          job_start(&f, &b, args, "info") == 0;
    job_env = NULL;
    CHECK(ret);
    CHECK(job_wait(&a, 180) == 0);
    CHECK(job_wait(&b, 180) == 0);
    job_streamed(&a, &sa, &oa);
    job_streamed(&b, &sb, &ob);
    fprintf(stderr,
            "    streamed: job A %" PRIu64 " of %" PRIu64 ", job B %" PRIu64
            " of %" PRIu64 " operations\n",
            sa, oa, sb, ob);
    CHECK(sa + sb > 0);
    CHECK(oa > 0 && ob > 0);
    /* world, 2 rows, 2 columns, evens: at most one line each per rank */
    CHECK(job_count(&a, "stream: lock refused") <= 4 * 4 + 2);
    CHECK(job_count(&b, "stream: lock refused") <= 4 * 4 + 2);
    return TEST_PASSED;
}

static int stream_two_jobs_body(void)
{
    char *an_env[] = {"INCOLL_AGG_STREAM_POOL=4M", NULL};
    return stream_two_jobs_run(an_env, 0);
}

TEST(integ_mgr_stream_two_jobs, TEST_INTEG)
{
    RUN(stream_two_jobs_body);
}

/* The same with ANs of 4 threads (INCOLL_AGG_THREADS, each a shard of
 * every group's slots; lock rounds and stream windows on the first) and
 * 2% loss, 1% duplicates and 2% reordering on the hosts' sockets: two
 * groups at once, streaming and not, every result right. */
static int threads_two_jobs_body(void)
{
    char *an_env[] = {"INCOLL_AGG_STREAM_POOL=4M", "INCOLL_AGG_THREADS=4",
                      "INCOLL_FAULT_DROP=0.02",    "INCOLL_FAULT_DUP=0.01",
                      "INCOLL_FAULT_REORDER=0.02", NULL};
    return stream_two_jobs_run(an_env, 1);
}

TEST(integ_mgr_threads_two_jobs, TEST_INTEG)
{
    RUN(threads_two_jobs_body);
}

/* The sum of key=N over every line of text. */
static long long sum_key(const char *text, const char *key)
{
    char pat[64];
    long long sum = 0;
    snprintf(pat, sizeof(pat), " %s=", key);
    for (const char *p = text; (p = strstr(p, pat)) != NULL; p++)
        sum += strtoll(p + strlen(pat), NULL, 10);
    return sum;
}

/* Sums "locks granted G refused R" of the info lines over a job's logs. */
static void job_locks(job_t *j, uint64_t *granted_p, uint64_t *refused_p)
{
    *granted_p = *refused_p = 0;
    for (int r = 0; r < j->n; r++) {
        char *out = slurp(j->log[r]);
        for (char *p = out; (p = strstr(p, "locks granted ")) != NULL; p++) {
            unsigned long long g, f;
            if (sscanf(p, "locks granted %llu refused %llu", &g, &f) == 2) {
                *granted_p += g;
                *refused_p += f;
            }
        }
        free(out);
    }
}

/*
 * The public lock calls with real daemons (tests/progs/lock_check.c): one
 * job of four ranks, two per leaf, world and a split of the same ranks
 * whose groups share the leaves; streaming by size off
 * (INCOLL_STREAM_THRESHOLD=0), so only the calls' locks stream. Each of
 * the two rounds: world granted and streams; the other refused while
 * world holds the tree, its allreduce right on its slots; granted once
 * world unlocked; a lock for 2 operations goes by itself after them; a
 * nonblocking allreduce in flight when the lock is asked, and one under
 * it. Every result is checked by the program; here the numbers: per
 * round and rank world streams 4 operations with 4 locks, the other 2
 * with 2 locks and 1 refusal, and the ANs saw grants, refusals and
 * streamed bytes. lossy: 5% loss, 2% duplicates and 5% reordering on
 * every host's and AN's socket.
 */
static int lock_api_body(int lossy)
{
    fab_t f;
    job_t a = {.name = lossy ? "lockL" : "lockA", .n = 4};
    char *args[] = {"--iters", "2", NULL};
    char *an_plain[] = {"INCOLL_AGG_STREAM_POOL=16M", NULL};
    char *an_lossy[] = {"INCOLL_AGG_STREAM_POOL=16M", "INCOLL_FAULT_DROP=0.05",
                        "INCOLL_FAULT_DUP=0.02", "INCOLL_FAULT_REORDER=0.05",
                        NULL};
    /* (the program's vectors are more than 8 slots carry at once) */
    char *env_plain[] = {"INCOLL_STREAM_THRESHOLD=0", "INCOLL_STREAM_SLOTS=8",
                         NULL};
    char *env_lossy[] = {"INCOLL_STREAM_THRESHOLD=0", "INCOLL_STREAM_SLOTS=8",
                         "INCOLL_FAULT_DROP=0.05",    "INCOLL_FAULT_DUP=0.02",
                         "INCOLL_FAULT_REORDER=0.05", NULL};
    uint64_t streamed, ops, granted, refused;
    char *text;
    int ret;

    CHECK(fab_up(&f, lossy ? "lock_api_lossy" : "lock_api",
                 lossy ? an_lossy : an_plain) == 0);
    /* h0 h1 h2 h3: two per leaf, so that the leaves stay in both groups'
     * trees (a leaf of one member is pruned) and the groups share them */
    for (int r = 0; r < 4; r++)
        a.hosts[r] = r;
    job_env = lossy ? env_lossy : env_plain;
    job_prog = "lock_check";
    ret = job_start(&f, &a, args, "info") == 0;
    job_env = NULL;
    job_prog = NULL;
    CHECK(ret);
    CHECK(job_wait(&a, 240) == 0);
    job_streamed(&a, &streamed, &ops);
    job_locks(&a, &granted, &refused);
    fprintf(stderr,
            "    %" PRIu64 " of %" PRIu64 " operations streamed, locks granted "
            "%" PRIu64 " refused %" PRIu64 "\n",
            streamed, ops, granted, refused);
    /* 2 rounds x 4 ranks x (world 4 + other 2) */
    CHECK_EQ_INT((int)streamed, 2 * 4 * (4 + 2));
    CHECK_EQ_INT((int)granted, 2 * 4 * (4 + 2));
    CHECK_EQ_INT((int)refused, 2 * 4 * 1);
    /* the refusal said once per communicator and rank */
    CHECK_EQ_INT(job_count(&a, "stream: lock refused"), 4);
    text = stat_text(&f);
    CHECK_MSG(sum_key(text, "locks_granted") > 0 &&
                  sum_key(text, "locks_refused") > 0 &&
                  sum_key(text, "stream_bytes") > 0,
              "%s", text);
    free(text);
    return TEST_PASSED;
}

static int lock_api_plain(void)
{
    return lock_api_body(0);
}

static int lock_api_lossy(void)
{
    return lock_api_body(1);
}

TEST(integ_mgr_lock_api, TEST_INTEG)
{
    RUN(lock_api_plain);
}

TEST(integ_mgr_lock_api_lossy, TEST_INTEG)
{
    RUN(lock_api_lossy);
}

/* ANs that hold one group each: some communicators get none, run on the
 * hosts, and still get the right results. */
static int exhaustion_body(void)
{
    fab_t f;
    job_t a = {.name = "jobX", .n = 4};
    char *an_env[] = {"INCOLL_AGG_GROUPS=1", NULL};
    char *args[] = {"--cols",  "2",    "--iters",  "40",
                    "--count", "3000", "--create", NULL};
    char *text;

    CHECK(fab_up(&f, "exhaustion", an_env) == 0);
    for (int r = 0; r < 4; r++)
        a.hosts[r] = r; /* h0 h1 on l0, h2 h3 on l1 */
    CHECK(job_start(&f, &a, args, "info") == 0);
    CHECK(job_wait(&a, 120) == 0);
    CHECK(job_count(&a, "comm world rank") == 4);
    CHECK(job_count(&a, "offloaded 1") > 0);
    CHECK(job_count(&a, "offloaded 0 why no fabric group:") > 0);
    CHECK(job_count(&a, "has no free group (1 of 1 in use)") > 0);
    /* The reason is logged once per communicator and rank, at info. */
    CHECK(job_count(&a, "collectives run on the hosts: no fabric group") ==
          job_count(&a, "offloaded 0 why no fabric group"));
    CHECK(wait_stat(&f, "manager ", "groups", 0, 10) == 0);
    text = stat_text(&f);
    CHECK(mgr_tool_stat_value(text, "manager ", "groups_refused") > 0);
    free(text);
    return TEST_PASSED;
}

TEST(integ_mgr_exhaustion, TEST_INTEG)
{
    RUN(exhaustion_body);
}

/* Index of the AN at the root of the world group of the running job. */
static int world_root(fab_t *f)
{
    char *text, *p, root[32] = "";
    for (int i = 0; i < 100 && root[0] == '\0'; i++) {
        text = stat_text(f);
        p = strstr(text, "comm=0000000000000000");
        if (p && (p = strstr(p, " ans=")) != NULL)
            sscanf(p + 5, "%31[^,\n]", root);
        free(text);
        if (root[0] == '\0')
            sleep_s(0.1);
    }
    for (int i = 0; i < f->nans; i++)
        if (strcmp(f->names[i], root) == 0)
            return i;
    fprintf(stderr, "    no world group in the manager's stat\n");
    return -1;
}

/* The spine under the world group dies (hung = 0: killed; 1: stopped, so
 * only its heartbeats tell) mid-run: the members rebuild on the other
 * spine and every result is right, in bounded time. */
static int an_fails(const char *name, int hung)
{
    fab_t f;
    job_t a = {.name = "jobK", .n = 4};
    char *args[] = {"--cols", "2",       "--iters", "20", "--seconds",
                    "6",      "--count", "500",     NULL};
    char *text;
    double t0;
    int victim;

    CHECK(fab_up(&f, name, NULL) == 0);
    for (int r = 0; r < 4; r++)
        a.hosts[r] = r;
    t0 = now_s();
    CHECK(job_start(&f, &a, args, "info") == 0);
    victim = world_root(&f);
    CHECK(victim >= 0);
    sleep_s(2);
    if (hung) {
        kill(f.an[victim], SIGSTOP);
    } else {
        kill(f.an[victim], SIGKILL);
        wait_pid(f.an[victim], 5);
    }
    CHECK(job_wait(&a, 60) == 0);
    /* Bounded: the run takes its 6 s plus a few seconds of recovery. */
    CHECK_MSG(now_s() - t0 < 6 + 20, "took %.1f s", now_s() - t0);
    CHECK(job_count(&a, "failed: an ") >= 4);
    CHECK(job_count(&a, "rebuilt on group") +
              job_count(&a, "run on the hosts") >=
          4);
    text = stat_text(&f);
    CHECK_MSG(mgr_tool_stat_value(text, "manager ", "groups_failed") >= 1, "%s",
              text);
    CHECK(mgr_tool_stat_value(text, "manager ", "ans_up") == f.nans - 1);
    free(text);
    CHECK(wait_stat(&f, "manager ", "groups", 0, 10) == 0);
    if (hung) {
        /* Back to life, it registers again and drops the groups it held:
         * the manager gave them up. */
        char prefix[64];
        kill(f.an[victim], SIGCONT);
        CHECK(wait_stat(&f, "manager ", "ans_up", f.nans, 10) == 0);
        snprintf(prefix, sizeof(prefix), "an name=%s ", f.names[victim]);
        CHECK(stat_value(&f, prefix, "registrations") == 2);
        snprintf(prefix, sizeof(prefix), "counters an=%s ", f.names[victim]);
        CHECK(wait_stat(&f, prefix, "groups", 0, 5) == 0);
        CHECK(stat_value(&f, "manager ", "groups_adopted") == 0);
    }
    return TEST_PASSED;
}

static int an_killed_body(void)
{
    return an_fails("an_killed", 0);
}
static int an_hung_body(void)
{
    return an_fails("an_hung", 1);
}

TEST(integ_mgr_an_hung, TEST_INTEG)
{
    RUN(an_hung_body);
}
TEST(integ_mgr_an_killed, TEST_INTEG)
{
    RUN(an_killed_body);
}

/* A job killed mid-run loses its groups after the grace period, as stat
 * shows, while another job goes on undisturbed. */
static int job_killed_body(void)
{
    fab_t f;
    job_t a = {.name = "victim", .n = 4}, b = {.name = "bystander", .n = 4};
    char *args_a[] = {"--cols",  "2",   "--iters", "1000000",
                      "--count", "100", NULL};
    char *args_b[] = {"--cols", "2",       "--iters", "20", "--seconds",
                      "14",     "--count", "100",     NULL};
    char *text;
    long long groups;

    CHECK(fab_up(&f, "job_killed", NULL) == 0);
    for (int r = 0; r < 4; r++) {
        a.hosts[r] = r;
        b.hosts[r] = 4 + r;
    }
    CHECK(job_start(&f, &a, args_a, "warn") == 0);
    CHECK(job_start(&f, &b, args_b, "warn") == 0);
    CHECK(wait_stat(&f, "job name=victim ", "groups", 5, 20) == 0);
    sleep_s(1);
    text = stat_text(&f);
    groups = mgr_tool_stat_value(text, "manager ", "groups");
    CHECK_MSG(strstr(text, "job name=victim size=4 up=4") != NULL, "%s", text);
    free(text);
    for (int r = 0; r < 4; r++)
        kill(a.pid[r], SIGKILL);
    for (int r = 0; r < 4; r++)
        wait_pid(a.pid[r], 5);
    /* Lost first, then reclaimed after the grace period. */
    sleep_s(0.5);
    text = stat_text(&f);
    CHECK_MSG(strstr(text, "job name=victim size=4 up=0 lost=4") != NULL, "%s",
              text);
    free(text);
    CHECK(wait_stat(&f, "manager ", "groups_reclaimed", 5, 15) == 0);
    text = stat_text(&f);
    CHECK_MSG(strstr(text, "job name=victim") == NULL, "%s", text);
    CHECK(mgr_tool_stat_value(text, "manager ", "groups") == groups - 5);
    free(text);
    CHECK(job_wait(&b, 60) == 0);
    CHECK(wait_stat(&f, "manager ", "groups", 0, 10) == 0);
    return TEST_PASSED;
}

TEST(integ_mgr_job_killed, TEST_INTEG)
{
    RUN(job_killed_body);
}

/* A raw TCP connection to the manager. */
static int raw_connect(const char *addr)
{
    char err[128];
    int fd = mgr_connect(addr, err, sizeof(err));
    if (fd >= 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        poll(&pfd, 1, 2000);
    }
    return fd;
}

/* 1 when the peer closed fd within timeout_s (reading and dropping what
 * comes first). */
static int closed_within(int fd, double timeout_s)
{
    double end = now_s() + timeout_s;
    char buf[4096];
    while (now_s() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) > 0) {
            ssize_t n = recv(fd, buf, sizeof(buf), 0);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                return 1;
        }
    }
    return 0;
}

/* Runs the handshake of a client stream; returns 0 when ready. */
static int client_ready(mgr_stream_t *st, double timeout_s)
{
    double end = now_s() + timeout_s;
    while (now_s() < end) {
        struct pollfd pfd = {.fd = st->fd, .events = POLLIN};
        const char *why = NULL;
        uint16_t type;
        const uint8_t *body;
        size_t len;
        mgr_next_t r;
        mgr_stream_flush(st);
        poll(&pfd, 1, 100);
        if (mgr_stream_read(st, &why) != 0)
            return -1;
        while ((r = mgr_stream_next(st, &type, &body, &len, &why)) !=
               MGR_NEXT_NONE) {
            if (r == MGR_NEXT_ERROR)
                return -1;
            if (r == MGR_NEXT_READY) {
                mgr_stream_flush(st);
                return 0;
            }
        }
    }
    return -1;
}

/* Sends one frame and returns the type of the answer (0 for none, -1 when
 * the manager closed the connection). */
static int await_frame(mgr_stream_t *st);

static int ask(mgr_stream_t *st, uint16_t type, const mgr_wbuf_t *w)
{
    if (mgr_stream_send(st, type, w ? w->buf : NULL, w ? w->len : 0) !=
            INCOLL_OK ||
        mgr_stream_flush(st) != 0)
        return -1;
    return await_frame(st);
}

/* The type of the next frame on st within 2 s, 0 when none came, -1 on
 * an error. A group_shape (before each group_info) is passed over, as a
 * host that does not read it does. */
static int await_frame(mgr_stream_t *st)
{
    double end = now_s() + 2;
    while (now_s() < end) {
        struct pollfd pfd = {.fd = st->fd, .events = POLLIN};
        const char *why = NULL;
        uint16_t rtype;
        const uint8_t *body;
        size_t len;
        mgr_next_t r;
        poll(&pfd, 1, 100);
        if (mgr_stream_read(st, &why) != 0)
            return -1;
        r = mgr_stream_next(st, &rtype, &body, &len, &why);
        if (r == MGR_NEXT_ERROR)
            return -1;
        if (r == MGR_NEXT_FRAME && rtype != MGR_GROUP_SHAPE)
            return rtype;
    }
    return 0;
}

/* Malformed and unauthenticated control traffic, next to a running job. */
static int bad_control_body(void)
{
    fab_t f;
    job_t a = {.name = "calm", .n = 4};
    char *args[] = {"--cols",           "2",   "--iters", "20",
                    "--seconds",        "7",   "--count", "300",
                    "--expect-offload", "all", NULL};
    uint8_t key[MGR_KEY_LEN], wrong[MGR_KEY_LEN], junk[1024];
    char err[256], *text;
    mgr_stream_t st;
    mgr_wbuf_t w = {0};
    int fd, silent;
    long long auth0, mal0;

    CHECK(fab_up(&f, "bad_control", NULL) == 0);
    for (int r = 0; r < 4; r++)
        a.hosts[r] = r;
    CHECK(job_start(&f, &a, args, "warn") == 0);
    CHECK(wait_stat(&f, "job name=calm ", "groups", 5, 20) == 0);
    auth0 = stat_value(&f, "manager ", "auth_failures");
    mal0 = stat_value(&f, "manager ", "malformed");
    CHECK(mgr_secret_load(f.secret, key, err, sizeof(err)) == INCOLL_OK);
    memset(wrong, 0x5a, sizeof(wrong));

    /* 1. A silent connection: dropped after the 5 s authentication time. */
    silent = raw_connect(f.addr);
    CHECK(silent >= 0);
    /* 2. Garbage instead of a handshake. */
    fd = raw_connect(f.addr);
    CHECK(fd >= 0);
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    CHECK(send(fd, junk, sizeof(junk), MSG_NOSIGNAL) > 0);
    CHECK(closed_within(fd, 3));
    close(fd);
    /* 3. The wrong secret. */
    fd = raw_connect(f.addr);
    CHECK(mgr_stream_init(&st, fd, 0, MGR_ROLE_HOST, wrong) == INCOLL_OK);
    CHECK(client_ready(&st, 3) != 0);
    CHECK(closed_within(st.fd, 3));
    mgr_stream_close(&st);
    /* 4. The right secret, then nonsense: each gets an error answer and
     * the connection lives on... */
    fd = raw_connect(f.addr);
    CHECK(mgr_stream_init(&st, fd, 0, MGR_ROLE_HOST, key) == INCOLL_OK);
    CHECK(client_ready(&st, 3) == 0);
    mgr_w_u32(&w, 5); /* a group request before joining */
    CHECK_EQ_INT(ask(&st, MGR_GROUP_REQ, &w), MGR_ERROR);
    mgr_wbuf_free(&w);
    {
        mgr_join_t jn = {0};
        snprintf(jn.job, sizeof(jn.job), "evil");
        jn.rank = 9; /* out of range */
        jn.size = 2;
        jn.ep = wire_ep(0x7f000001u, 12345);
        mgr_enc_join(&w, &jn);
        CHECK_EQ_INT(ask(&st, MGR_JOIN, &w), MGR_ERROR);
        mgr_wbuf_free(&w);
        jn.rank = 0;
        mgr_enc_join(&w, &jn);
        CHECK_EQ_INT(ask(&st, MGR_JOIN, &w), MGR_JOIN_OK);
        mgr_wbuf_free(&w);
    }
    {
        uint8_t members[8] = {0, 0, 0, 0, 7, 0, 0, 0}; /* rank 7 of 2 */
        mgr_group_req_t rq = {0};
        rq.req = 1;
        rq.comm = 99;
        rq.nmembers = 2;
        rq.members = members;
        mgr_enc_group_req(&w, &rq);
        CHECK_EQ_INT(ask(&st, MGR_GROUP_REQ, &w), MGR_ERROR);
        mgr_wbuf_free(&w);
    }
    CHECK_EQ_INT(ask(&st, 0x777, NULL), MGR_ERROR);
    /* ...until a frame whose mac is wrong: then it is closed. */
    CHECK(mgr_stream_send(&st, MGR_STAT_REQ, "x", 1) == INCOLL_OK);
    st.tx[st.tx_len - 1] ^= 0x80;
    CHECK(mgr_stream_flush(&st) == 0);
    CHECK(closed_within(st.fd, 3));
    mgr_stream_close(&st);
    /* 5. An oversized frame after the handshake. */
    fd = raw_connect(f.addr);
    CHECK(mgr_stream_init(&st, fd, 0, MGR_ROLE_TOOL, key) == INCOLL_OK);
    CHECK(client_ready(&st, 3) == 0);
    {
        uint8_t big[6] = {0xff, 0xff, 0xff, 0x7f, MGR_STAT_REQ, 0};
        CHECK(send(st.fd, big, sizeof(big), MSG_NOSIGNAL) == sizeof(big));
    }
    CHECK(closed_within(st.fd, 3));
    mgr_stream_close(&st);
    /* 6. An AN that is not in the topology. */
    fd = raw_connect(f.addr);
    CHECK(mgr_stream_init(&st, fd, 0, MGR_ROLE_AN, key) == INCOLL_OK);
    CHECK(client_ready(&st, 3) == 0);
    {
        mgr_an_register_t reg = {0};
        snprintf(reg.name, sizeof(reg.name), "intruder");
        reg.ep = wire_ep(0x7f000001u, 99);
        reg.caps = (mgr_caps_t){1, 1, 8192, 8, 8, 1 << 20};
        mgr_enc_an_register(&w, &reg);
        CHECK_EQ_INT(ask(&st, MGR_AN_REGISTER, &w), MGR_ERROR);
        mgr_wbuf_free(&w);
    }
    CHECK(closed_within(st.fd, 3));
    mgr_stream_close(&st);
    /* 7. An AN under a real name with a malformed registration. */
    fd = raw_connect(f.addr);
    CHECK(mgr_stream_init(&st, fd, 0, MGR_ROLE_AN, key) == INCOLL_OK);
    CHECK(client_ready(&st, 3) == 0);
    mgr_w_str(&w, f.names[0]);
    mgr_w_u32(&w, 3);
    CHECK(ask(&st, MGR_AN_REGISTER, &w) == -1);
    mgr_wbuf_free(&w);
    mgr_stream_close(&st);

    CHECK_MSG(closed_within(silent, 8), "a silent connection stayed open");
    close(silent);
    /* The job never noticed, and the real AN is still registered. */
    CHECK(job_wait(&a, 60) == 0);
    text = stat_text(&f);
    CHECK_MSG(mgr_tool_stat_value(text, "manager ", "auth_failures") >=
                  auth0 + 3,
              "%s", text);
    CHECK(mgr_tool_stat_value(text, "manager ", "malformed") >= mal0 + 5);
    CHECK(mgr_tool_stat_value(text, "manager ", "ans_up") == f.nans);
    CHECK(mgr_tool_stat_value(text, "manager ", "groups_failed") == 0);
    free(text);
    return TEST_PASSED;
}

TEST(integ_mgr_bad_control, TEST_INTEG)
{
    RUN(bad_control_body);
}

/* The manager restarts under a running job: the ANs keep the groups and
 * report them, the new manager adopts them, the job carries on and
 * releases them at the end. */
static int restart_body(void)
{
    fab_t f;
    job_t a = {.name = "steady", .n = 4};
    char *args[] = {"--cols",           "2",   "--iters", "20",
                    "--seconds",        "8",   "--count", "300",
                    "--expect-offload", "all", NULL};
    char *text, listen[64];

    CHECK(fab_up(&f, "restart", NULL) == 0);
    for (int r = 0; r < 4; r++)
        a.hosts[r] = r;
    CHECK(job_start(&f, &a, args, "warn") == 0);
    CHECK(wait_stat(&f, "job name=steady ", "groups", 5, 20) == 0);
    sleep_s(1);
    kill(f.mgr, SIGTERM);
    CHECK(wait_pid(f.mgr, 5) == 0);
    sleep_s(1);
    snprintf(listen, sizeof(listen), "%s", f.addr);
    CHECK(start_mgr(&f, listen, NULL) == 0);
    CHECK(strcmp(listen, f.addr) == 0);
    CHECK(job_wait(&a, 60) == 0);
    CHECK(wait_stat(&f, "manager ", "groups", 0, 10) == 0);
    text = stat_text(&f);
    CHECK_MSG(mgr_tool_stat_value(text, "manager ", "groups_adopted") == 5,
              "%s", text);
    CHECK(mgr_tool_stat_value(text, "manager ", "groups_released") == 5);
    CHECK(mgr_tool_stat_value(text, "manager ", "ans_up") == f.nans);
    free(text);
    return TEST_PASSED;
}

TEST(integ_mgr_restart, TEST_INTEG)
{
    RUN(restart_body);
}

/* A free UDP port on 127.0.0.1 (the kernel's pick, released again). */
static uint16_t free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    uint16_t port = 0;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    sa.sin_addr.s_addr = htonl(0x7f000001u);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Without a manager (fabric.conf only, as before the manager existed),
 * split and create still work: the new communicators run on the hosts and
 * say why. */
static int no_manager_body(void)
{
    fabric_conf_t conf;
    char dir[PATH_MAX], path[PATH_MAX + 32], bin[PATH_MAX];
    job_t a = {.name = "plain", .n = 4};
    char *args[] = {"--cols",  "2",    "--iters",  "30",
                    "--count", "2000", "--create", NULL};
    pid_t ans[16];

    snprintf(dir, sizeof(dir), "%s/no_manager", test_tmpdir());
    mkdir(dir, 0755);
    CHECK(fabric_conf_generate(4, 2, &conf) == INCOLL_OK);
    for (int i = 0; i < conf.nans; i++)
        conf.ans[i].addr = wire_ep(0x7f000001u, free_port());
    for (int r = 0; r < conf.nhosts; r++)
        conf.hosts[r].port = free_port();
    snprintf(path, sizeof(path), "%s/fabric.conf", dir);
    CHECK(fabric_conf_save(&conf, path) == INCOLL_OK);
    snprintf(bin, sizeof(bin), "%s/incoll-agg", test_bindir());
    for (int i = 0; i < conf.nans && i < 16; i++) {
        char log[PATH_MAX + 64];
        char *argv[] = {bin, "--conf", path, "--name", conf.ans[i].name, NULL};
        snprintf(log, sizeof(log), "%s/an-%s.log", dir, conf.ans[i].name);
        ans[i] = spawn(log, argv, NULL);
        CHECK(ans[i] > 0);
    }
    sleep_s(0.5);
    snprintf(bin, sizeof(bin), "%s/comm_grid", progdir());
    {
        char *argv[12];
        int na = 0;
        argv[na++] = bin;
        for (int i = 0; args[i]; i++)
            argv[na++] = args[i];
        argv[na] = NULL;
        for (int r = 0; r < 4; r++) {
            char e[5][PATH_MAX + 64];
            char *env[6];
            snprintf(e[0], sizeof(e[0]), "INCOLL_FABRIC=%s", dir);
            snprintf(e[1], sizeof(e[1]), "INCOLL_RANK=%d", r);
            snprintf(e[2], sizeof(e[2]), "INCOLL_SIZE=4");
            snprintf(e[3], sizeof(e[3]), "INCOLL_JOB=plain");
            snprintf(e[4], sizeof(e[4]), "INCOLL_MGR=");
            for (int k = 0; k < 5; k++)
                env[k] = e[k];
            env[5] = NULL;
            snprintf(a.log[r], sizeof(a.log[r]), "%s/plain-%d.log", dir, r);
            a.pid[r] = spawn(a.log[r], argv, env);
        }
    }
    CHECK(job_wait(&a, 120) == 0);
    /* The world runs in the network, everything else on the hosts. */
    CHECK_EQ_INT(job_count(&a, "comm world rank"), 4);
    CHECK_EQ_INT(job_count(&a, "offloaded 1"), 4);
    CHECK_EQ_INT(job_count(&a, "offloaded 0 why no manager (INCOLL_MGR is not "
                               "set)"),
                 4 + 4 + 2);
    fabric_conf_free(&conf);
    return TEST_PASSED;
}

TEST(integ_mgr_no_manager, TEST_INTEG)
{
    RUN(no_manager_body);
}

/* Runs the incoll CLI with args (NULL-terminated) and waits up to
 * timeout_s; its output goes to log. Returns its exit status. */
static int cli(const char *log, double timeout_s, char **args)
{
    char bin[PATH_MAX];
    char *argv[24];
    int n = 0;
    snprintf(bin, sizeof(bin), "%s/incoll", test_bindir());
    argv[n++] = bin;
    for (int i = 0; args[i] && n < 23; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    unlink(log);
    return wait_pid(spawn(log, argv, NULL), timeout_s);
}

/* What `incoll fabric up` made in dir: checked, used, and shown by stat. */
static int cli_check(const char *dir)
{
    char log[PATH_MAX + 32], path[PATH_MAX + 32], prog[PATH_MAX];
    char *text;
    struct stat sb;
    long long v;

    snprintf(log, sizeof(log), "%s/cli.log", dir);
    snprintf(prog, sizeof(prog), "%s/comm_grid", progdir());
    snprintf(path, sizeof(path), "%s/secret", dir);
    CHECK(stat(path, &sb) == 0);
    CHECK_MSG((sb.st_mode & 077) == 0, "secret mode %o", sb.st_mode & 0777);
    snprintf(path, sizeof(path), "%s/fabric.env", dir);
    text = slurp(path);
    CHECK_MSG(strstr(text, "\nINCOLL_MGR=127.0.0.1:") != NULL &&
                  strstr(text, "\nINCOLL_SECRET_FILE=") != NULL,
              "%s", text);
    free(text);
    /* Through the manager: every communicator offloaded. */
    {
        char *args[] = {"run",
                        "-n",
                        "4",
                        "--fabric",
                        (char *)dir,
                        "--",
                        prog,
                        "--cols",
                        "2",
                        "--iters",
                        "20",
                        "--create",
                        "--expect-offload",
                        "all",
                        NULL};
        int rc = cli(log, 60, args);
        text = slurp(log);
        CHECK_MSG(rc == 0 && count_of(text, "\nok 20") +
                                     (strncmp(text, "ok 20", 5) == 0) ==
                                 4,
                  "exit %d:\n%s", rc, text);
        CHECK_EQ_INT(count_of(text, "offloaded 1"), 4 + 4 + 4 + 2);
        free(text);
    }
    /* `incoll stat` shows the manager's view, then the ANs' counters. */
    {
        char *args[] = {"stat", "--fabric", (char *)dir, NULL};
        int rc = cli(log, 30, args);
        text = slurp(log);
        CHECK_MSG(rc == 0, "stat exit %d:\n%s", rc, text);
        CHECK_MSG(strstr(text, "tree id=0 root=root ") != NULL &&
                      strstr(text, "\nan name=l1 ") != NULL &&
                      strstr(text, "\nan=root packets_in=") != NULL,
                  "%s", text);
        /* world, 2 rows, 2 columns, the even ranks */
        v = mgr_tool_stat_value(text, "manager ", "groups_made");
        CHECK_MSG(v == 6, "groups_made=%lld:\n%s", v, text);
        free(text);
    }
    /* Without the manager only the world has a group. */
    {
        char *args[] = {"run",       "--no-mgr", "-n", "4",      "--fabric",
                        (char *)dir, "--",       prog, "--cols", "2",
                        "--iters",   "5",        NULL};
        int rc = cli(log, 60, args);
        text = slurp(log);
        CHECK_MSG(rc == 0, "exit %d:\n%s", rc, text);
        CHECK_EQ_INT(count_of(text, "offloaded 1"), 4);
        CHECK_EQ_INT(count_of(text, "offloaded 0 why no manager"), 8);
        free(text);
    }
    return TEST_PASSED;
}

/* `incoll fabric up` starts the manager beside the ANs and writes
 * fabric.env; `incoll run` and `incoll stat` use it; `fabric down`
 * stops the manager too. */
static int cli_body(void)
{
    char dir[PATH_MAX], log[PATH_MAX + 32], path[PATH_MAX + 32], *text;
    char *up[] = {"fabric", "up",    "--hosts", "4", "--radix",
                  "2",      "--dir", dir,       NULL};
    char *down[] = {"fabric", "down", "--dir", dir, NULL};
    pid_t mgr_pid;
    int rc, ret;

    snprintf(dir, sizeof(dir), "%s/cli", test_tmpdir());
    snprintf(log, sizeof(log), "%s-up.log", dir);
    rc = cli(log, 30, up);
    text = slurp(log);
    if (rc != 0) {
        fprintf(stderr, "    fabric up exited %d:\n%s", rc, text);
        free(text);
        cli(log, 30, down);
        return TEST_FAILED;
    }
    free(text);
    snprintf(path, sizeof(path), "%s/mgr.pid", dir);
    text = slurp(path);
    mgr_pid = (pid_t)atoi(text);
    free(text);
    ret = cli_check(dir);
    rc = cli(log, 30, down);
    text = slurp(log);
    CHECK_MSG(rc == 0 && strstr(text, "stopped 3 ans and the manager"),
              "fabric down exited %d:\n%s", rc, text);
    free(text);
    CHECK(mgr_pid > 0 && !proc_running(mgr_pid));
    snprintf(path, sizeof(path), "%s/fabric.env", dir);
    CHECK(access(path, F_OK) != 0);
    return ret;
}

TEST(integ_mgr_cli, TEST_INTEG)
{
    RUN(cli_body);
}

/* ---- hostile clients (issue 11) ---- */

/* Resident memory of pid in KiB (/proc/PID/status VmRSS), or -1. */
static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* CPU time of pid (user + system) in seconds, or -1. */
static double cpu_s(pid_t pid)
{
    proc_stat_t st;
    if (proc_stat_read(pid, &st) != 0)
        return -1;
    return (double)(st.utime + st.stime) / (double)sysconf(_SC_CLK_TCK);
}

static int count_lines(const char *path)
{
    char *text = slurp(path);
    int n = count_of(text, "\n");
    free(text);
    return n;
}

/* An authenticated connection of role to the manager at addr. */
static int hostile_ready(const char *addr, const uint8_t *key, int role,
                         mgr_stream_t *st)
{
    int fd = raw_connect(addr);
    if (fd < 0)
        return -1;
    if (mgr_stream_init(st, fd, 0, role, key) != INCOLL_OK ||
        client_ready(st, 5) != 0) {
        mgr_stream_close(st);
        return -1;
    }
    return 0;
}

/* Sends n bytes on a non-blocking fd within timeout_s. */
static int send_all(int fd, const uint8_t *p, size_t n, double timeout_s)
{
    double end = now_s() + timeout_s;
    while (n > 0 && now_s() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        ssize_t k;
        poll(&pfd, 1, 100);
        k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
            return -1;
        }
    }
    return n == 0 ? 0 : -1;
}

/* The start of a frame of flen bytes (type, body and mac), and `part`
 * bytes of its body. */
static int send_partial(mgr_stream_t *st, uint32_t flen, size_t part)
{
    uint8_t *buf = calloc(1, 6 + part);
    int ret;
    if (buf == NULL)
        return -1;
    for (int i = 0; i < 4; i++)
        buf[i] = (uint8_t)(flen >> (8 * i));
    buf[4] = MGR_STAT_REQ;
    for (size_t i = 0; i < part; i++)
        buf[6 + i] = (uint8_t)(i * 131 + 7);
    ret = send_all(st->fd, buf, 6 + part, 10);
    free(buf);
    return ret;
}

#define IDLE_CONNS 100

/*
 * A manager with 64 descriptors under 100 idle unauthenticated
 * connections, reopened as soon as it closes them: a real job still
 * connects and completes, the manager stays nearly idle (no accept loop
 * spinning on EMFILE) and its log stays short. With emfile, the manager
 * starts with its usual limit, which is lowered to 40 under it: accept()
 * then fails with EMFILE, and the manager sheds and bounds itself.
 */
static int crowd(const char *name, int emfile)
{
    fab_t f;
    job_t a = {.name = "crowded", .n = 4};
    char *args[] = {"--cols",  "2",   "--iters",          "20",
                    "--count", "300", "--expect-offload", "all",
                    NULL};
    int idle[IDLE_CONNS], rc, lines0, lines, reopened = 0, running;
    double t0, cpu0, cpu, dt;
    char *text;

    mgr_nofile = emfile ? 0 : 64;
    rc = fab_up(&f, name, NULL);
    mgr_nofile = 0;
    CHECK(rc == 0);
    if (emfile) {
        struct rlimit rl = {40, 40};
        CHECK(prlimit(f.mgr, RLIMIT_NOFILE, &rl, NULL) == 0);
    }
    lines0 = count_lines(f.mgr_log);
    for (int i = 0; i < IDLE_CONNS; i++) {
        idle[i] = raw_connect(f.addr);
        CHECK(idle[i] >= 0);
    }
    t0 = now_s();
    cpu0 = cpu_s(f.mgr);
    for (int r = 0; r < 4; r++)
        a.hosts[r] = r;
    /* Its ranks take the places of the crowd's oldest connections (they
     * share its address); on a loaded machine a rank may need more than
     * one try, so give them time (integ_mgr_flood_* hold the default). */
    setenv("INCOLL_MGR_CONNECT_MS", "30000", 1);
    rc = job_start(&f, &a, args, "warn");
    unsetenv("INCOLL_MGR_CONNECT_MS");
    CHECK(rc == 0);
    /* Keep the crowd up while the job runs, and 4 s at least. */
    do {
        struct pollfd pfd[IDLE_CONNS];
        for (int i = 0; i < IDLE_CONNS; i++)
            pfd[i] = (struct pollfd){.fd = idle[i], .events = POLLIN};
        poll(pfd, IDLE_CONNS, 100);
        for (int i = 0; i < IDLE_CONNS; i++) {
            char buf[512];
            ssize_t n;
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            n = recv(idle[i], buf, sizeof(buf), 0);
            if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
                continue;
            close(idle[i]);
            idle[i] = raw_connect(f.addr);
            CHECK(idle[i] >= 0);
            reopened++;
        }
        /* A rank that exited stays a zombie (not running) for job_wait to
         * reap with its status. */
        running = 0;
        for (int r = 0; r < 4; r++)
            running += proc_running(a.pid[r]);
    } while ((running > 0 && now_s() - t0 < 60) || now_s() - t0 < 4);
    cpu = cpu_s(f.mgr) - cpu0;
    dt = now_s() - t0;
    for (int i = 0; i < IDLE_CONNS; i++)
        close(idle[i]);
    lines = count_lines(f.mgr_log) - lines0;
    /* Resource use, not timing: a spinning accept loop took a third of a
     * core and wrote 60,000 lines a second. */
    CHECK_MSG(cpu < 0.5 * dt, "the manager used %.2f s of CPU in %.2f s", cpu,
              dt);
    CHECK_MSG(lines < 100, "the manager wrote %d log lines", lines);
    fprintf(stderr,
            "    manager: %.2f s of CPU in %.2f s, %d log lines; %d "
            "idle connections closed by it and reopened\n",
            cpu, dt, lines, reopened);
    CHECK_MSG(reopened > 0, "the manager never closed an idle connection");
    CHECK(job_wait(&a, 30) == 0);
    CHECK_EQ_INT(job_count(&a, "offloaded 1"), 4 + 4 + 4);
    text = stat_text(&f);
    CHECK_MSG(mgr_tool_stat_value(text, "manager ", "conns_evicted") > 0, "%s",
              text);
    CHECK(mgr_tool_stat_value(text, "manager ", "ans_up") == f.nans);
    if (emfile) {
        CHECK_MSG(mgr_tool_stat_value(text, "manager ", "conns_shed") > 0 &&
                      mgr_tool_stat_value(text, "manager ", "max_conns") < 40,
                  "%s", text);
    } else {
        CHECK(mgr_tool_stat_value(text, "manager ", "max_conns") == 64 - 16);
    }
    free(text);
    text = slurp(f.mgr_log);
    CHECK_MSG(strstr(text, "evicted after") != NULL, "%s", text);
    CHECK_MSG(!emfile || strstr(text, "Too many open files"), "%s", text);
    free(text);
    return TEST_PASSED;
}

static int fd_exhaustion_body(void)
{
    return crowd("fd_exhaustion", 0);
}
static int fd_emfile_body(void)
{
    return crowd("fd_emfile", 1);
}

TEST(integ_mgr_fd_exhaustion, TEST_INTEG)
{
    RUN(fd_exhaustion_body);
}
TEST(integ_mgr_fd_emfile, TEST_INTEG)
{
    RUN(fd_emfile_body);
}

#define PARTIALS 20
#define PARTIAL_FRAME 2000000u
#define PARTIAL_SENT (1u << 20)

/*
 * Authenticated connections that begin big frames and never finish them:
 * closed after the frame deadline, their memory given back; a frame over
 * a job's budget or over its role's limit is refused at once; a job runs
 * meanwhile.
 */
static int partial_frames_body(void)
{
    fab_t f;
    job_t a = {.name = "steady", .n = 4};
    char *args[] = {"--cols",           "2",   "--iters", "20",
                    "--seconds",        "6",   "--count", "300",
                    "--expect-offload", "all", NULL};
    char *env[] = {"INCOLL_MGR_FRAME_MS=4000",
                   "INCOLL_MGR_JOB_RX_BUDGET=3000000", NULL};
    mgr_stream_t st[PARTIALS], hog[2], tool;
    uint8_t key[MGR_KEY_LEN];
    char err[256], *text;
    long rss0, rss1 = -1, rss2 = -1;
    mgr_wbuf_t w = {0};
    int rc;

    mgr_env = env;
    rc = fab_up(&f, "partial_frames", NULL);
    mgr_env = NULL;
    CHECK(rc == 0);
    CHECK(mgr_secret_load(f.secret, key, err, sizeof(err)) == INCOLL_OK);
    for (int r = 0; r < 4; r++)
        a.hosts[r] = r;
    CHECK(job_start(&f, &a, args, "warn") == 0);
    CHECK(wait_stat(&f, "job name=steady ", "groups", 5, 20) == 0);
    rss0 = rss_kb(f.mgr);
    CHECK(rss0 > 0);

    for (int i = 0; i < PARTIALS; i++) {
        CHECK(hostile_ready(f.addr, key, MGR_ROLE_HOST, &st[i]) == 0);
        CHECK(send_partial(&st[i], PARTIAL_FRAME, PARTIAL_SENT) == 0);
    }
    /* Two ranks of one job: the second frame is over the job's budget. */
    for (int i = 0; i < 2; i++) {
        mgr_join_t jn = {0};
        CHECK(hostile_ready(f.addr, key, MGR_ROLE_HOST, &hog[i]) == 0);
        snprintf(jn.job, sizeof(jn.job), "hog");
        jn.rank = i;
        jn.size = 2;
        jn.ep = wire_ep(0x7f000001u, (uint16_t)(40000 + i));
        mgr_enc_join(&w, &jn);
        CHECK_EQ_INT(ask(&hog[i], MGR_JOIN, &w), MGR_JOIN_OK);
        mgr_wbuf_free(&w);
        CHECK(send_partial(&hog[i], PARTIAL_FRAME, 1000) == 0);
        sleep_s(0.2);
    }
    CHECK_MSG(closed_within(hog[1].fd, 10), "over the job's budget, open");
    /* A tool has no use for a frame of 100 kB. */
    CHECK(hostile_ready(f.addr, key, MGR_ROLE_TOOL, &tool) == 0);
    CHECK(send_partial(&tool, 100000, 10) == 0);
    CHECK_MSG(closed_within(tool.fd, 10), "over the tool's limit, open");

    /* Every frame in progress is charged at its announced size, and the
     * memory is really held (the test would prove nothing else). */
    CHECK(wait_stat(&f, "manager ", "rx_buffered",
                    (PARTIALS + 1) * (4 + (long long)PARTIAL_FRAME), 2) == 0);
    for (int i = 0; i < 20; i++) {
        rss1 = rss_kb(f.mgr);
        if (rss1 - rss0 > PARTIALS * (PARTIAL_SENT / 1024) / 2)
            break;
        sleep_s(0.1);
    }
    CHECK_MSG(rss1 - rss0 > PARTIALS * (PARTIAL_SENT / 1024) / 2,
              "rss %ld kB then %ld kB", rss0, rss1);
    for (int i = 0; i < PARTIALS; i++)
        CHECK_MSG(closed_within(st[i].fd, 10), "partial frame %d still open",
                  i);
    CHECK(closed_within(hog[0].fd, 10));
    for (int i = 0; i < 50; i++) {
        rss2 = rss_kb(f.mgr);
        if (rss2 < rss0 + 6 * 1024)
            break;
        sleep_s(0.1);
    }
    fprintf(stderr,
            "    manager rss: %ld kB, %ld kB with %d partial frames, "
            "%ld kB after they were closed\n",
            rss0, rss1, PARTIALS + 1, rss2);
    CHECK_MSG(rss2 < rss0 + 6 * 1024, "rss %ld kB, %ld kB held, %ld kB after",
              rss0, rss1, rss2);
    text = stat_text(&f);
    CHECK_MSG(
        mgr_tool_stat_value(text, "manager ", "frames_late") == PARTIALS + 1 &&
            mgr_tool_stat_value(text, "manager ", "frames_refused") == 2 &&
            mgr_tool_stat_value(text, "manager ", "rx_buffered") == 0,
        "%s", text);
    free(text);
    for (int i = 0; i < PARTIALS; i++)
        mgr_stream_close(&st[i]);
    mgr_stream_close(&hog[0]);
    mgr_stream_close(&hog[1]);
    mgr_stream_close(&tool);
    CHECK(job_wait(&a, 60) == 0);
    text = slurp(f.mgr_log);
    CHECK_MSG(strstr(text, "closed: frame incomplete after 4000 ms (") &&
                  strstr(text, "of job hog's 3000000 bytes") &&
                  strstr(text, "over the limit of 65536"),
              "%s", text);
    free(text);
    return TEST_PASSED;
}

TEST(integ_mgr_partial_frames, TEST_INTEG)
{
    RUN(partial_frames_body);
}

/*
 * `incoll fabric restart` starts a killed manager again on its address:
 * the ANs come back, a job afterwards is offloaded, and a job started
 * while the manager was gone waits for it and completes.
 */
static int fabric_restart_steps(void);

/* Runs steps on the fabric of `fabric_dir`, which is brought down
 * whatever they find. */
static char fabric_dir[PATH_MAX];

static int with_fabric_down(int (*steps)(void))
{
    char log[PATH_MAX + 32];
    char *down[] = {"fabric", "down", "--dir", fabric_dir, NULL};
    int ret = steps();
    if (ret != TEST_PASSED) {
        snprintf(log, sizeof(log), "%s-down.log", fabric_dir);
        cli(log, 30, down);
    }
    return ret;
}

static int fabric_restart_body(void)
{
    snprintf(fabric_dir, sizeof(fabric_dir), "%s/fabric_restart",
             test_tmpdir());
    return with_fabric_down(fabric_restart_steps);
}

static int fabric_restart_steps(void)
{
    char dir[PATH_MAX], log[PATH_MAX + 32], path[PATH_MAX + 32];
    char prog[PATH_MAX], env0[512], want[160], *text;
    char *up[] = {"fabric", "up",    "--hosts", "4", "--radix",
                  "2",      "--dir", dir,       NULL};
    char *restart[] = {"fabric", "restart", "--dir", dir, NULL};
    char *down[] = {"fabric", "down", "--dir", dir, NULL};
    pid_t mgr_pid, job;
    int rc;

    snprintf(dir, sizeof(dir), "%s", fabric_dir);
    snprintf(log, sizeof(log), "%s-cli.log", dir);
    snprintf(prog, sizeof(prog), "%s/comm_grid", progdir());
    rc = cli(log, 30, up);
    if (rc != 0) {
        text = slurp(log);
        fprintf(stderr, "    fabric up exited %d:\n%s", rc, text);
        free(text);
        cli(log, 30, down);
        return TEST_FAILED;
    }
    snprintf(path, sizeof(path), "%s/fabric.env", dir);
    text = slurp(path);
    snprintf(env0, sizeof(env0), "%s", text);
    free(text);
    {
        const char *p = strstr(env0, "INCOLL_MGR=");
        char addr[64] = "";
        if (p)
            sscanf(p + 11, "%63[^\n]", addr);
        snprintf(want, sizeof(want), "restarted at %s (pid ", addr);
    }
    for (int round = 0; round < 2; round++) {
        snprintf(path, sizeof(path), "%s/mgr.pid", dir);
        text = slurp(path);
        mgr_pid = (pid_t)atoi(text);
        free(text);
        CHECK(mgr_pid > 0 && proc_running(mgr_pid));
        kill(mgr_pid, SIGKILL);
        for (int i = 0; i < 100 && proc_running(mgr_pid); i++)
            sleep_s(0.05);
        CHECK(!proc_running(mgr_pid));
        job = -1;
        if (round == 1) {
            /* A job starts while the manager is gone... */
            char jlog[PATH_MAX + 32];
            char bin[PATH_MAX];
            char *argv[] = {bin,       "run", "-n", "4",      "--fabric",
                            dir,       "--",  prog, "--cols", "2",
                            "--iters", "20",  NULL};
            snprintf(bin, sizeof(bin), "%s/incoll", test_bindir());
            snprintf(jlog, sizeof(jlog), "%s-job.log", dir);
            job = spawn(jlog, argv, NULL);
            CHECK(job > 0);
            sleep_s(1);
        }
        rc = cli(log, 30, restart);
        text = slurp(log);
        CHECK_MSG(rc == 0 && strstr(text, want) &&
                      strstr(text, "3 of 3 ans registered again"),
                  "exit %d, want '%s':\n%s", rc, want, text);
        free(text);
        /* Same address, so nothing else changes. */
        snprintf(path, sizeof(path), "%s/fabric.env", dir);
        text = slurp(path);
        CHECK_MSG(strcmp(text, env0) == 0, "%s", text);
        free(text);
        if (round == 1) {
            /* ...and completes once it is back. */
            char jlog[PATH_MAX + 32];
            snprintf(jlog, sizeof(jlog), "%s-job.log", dir);
            rc = wait_pid(job, 60);
            text = slurp(jlog);
            CHECK_MSG(rc == 0 && count_of(text, "ok 20") == 4, "exit %d:\n%s",
                      rc, text);
            free(text);
        }
        /* Running it again changes nothing. */
        rc = cli(log, 30, restart);
        text = slurp(log);
        CHECK_MSG(rc == 0 && strstr(text, "nothing to restart"), "%s", text);
        free(text);
    }
    {
        char *args[] = {"run", "-n",      "4",  "--fabric",
                        dir,   "--",      prog, "--cols",
                        "2",   "--iters", "20", "--expect-offload",
                        "all", NULL};
        rc = cli(log, 60, args);
        text = slurp(log);
        CHECK_MSG(rc == 0 && count_of(text, "ok 20") == 4 &&
                      count_of(text, "offloaded 1") == 4 + 4 + 4,
                  "exit %d:\n%s", rc, text);
        free(text);
    }
    rc = cli(log, 30, down);
    text = slurp(log);
    CHECK_MSG(rc == 0 && strstr(text, "stopped 3 ans and the manager"), "%s",
              text);
    free(text);
    return TEST_PASSED;
}

TEST(integ_mgr_fabric_restart, TEST_INTEG)
{
    RUN(fabric_restart_body);
}

/* Reads pid file dir/name. */
static pid_t pid_in(const char *dir, const char *name)
{
    char path[PATH_MAX + 64], *text;
    pid_t pid;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    text = slurp(path);
    pid = (pid_t)atoi(text);
    free(text);
    return pid;
}

/*
 * `incoll fabric up --keep`: the manager, killed, comes back by itself on
 * its address; a job started right after the kill completes; `fabric
 * down` stops the keeper before the daemons.
 */
static int fabric_keep_steps(void);

static int fabric_keep_body(void)
{
    snprintf(fabric_dir, sizeof(fabric_dir), "%s/fabric_keep", test_tmpdir());
    return with_fabric_down(fabric_keep_steps);
}

static int fabric_keep_steps(void)
{
    char dir[PATH_MAX], log[PATH_MAX + 32], prog[PATH_MAX], *text;
    char jlog[PATH_MAX + 32], bin[PATH_MAX];
    char *up[] = {"fabric", "up",    "--hosts", "4",      "--radix",
                  "2",      "--dir", dir,       "--keep", NULL};
    char *down[] = {"fabric", "down", "--dir", dir, NULL};
    char *argv[] = {bin,  "run",    "-n", "4",       "--fabric", dir, "--",
                    prog, "--cols", "2",  "--iters", "20",       NULL};
    pid_t mgr_pid, keeper, now_pid = 0, job;
    int rc;

    snprintf(dir, sizeof(dir), "%s", fabric_dir);
    snprintf(log, sizeof(log), "%s-cli.log", dir);
    snprintf(jlog, sizeof(jlog), "%s-job.log", dir);
    snprintf(prog, sizeof(prog), "%s/comm_grid", progdir());
    snprintf(bin, sizeof(bin), "%s/incoll", test_bindir());
    rc = cli(log, 30, up);
    text = slurp(log);
    if (rc != 0 || strstr(text, "keeper   pid") == NULL) {
        fprintf(stderr, "    fabric up --keep exited %d:\n%s", rc, text);
        free(text);
        cli(log, 30, down);
        return TEST_FAILED;
    }
    free(text);
    keeper = pid_in(dir, "keep.pid");
    mgr_pid = pid_in(dir, "mgr.pid");
    CHECK(keeper > 0 && proc_running(keeper));
    CHECK(mgr_pid > 0 && proc_running(mgr_pid));
    kill(mgr_pid, SIGKILL);
    job = spawn(jlog, argv, NULL);
    CHECK(job > 0);
    for (int i = 0; i < 200; i++) {
        now_pid = pid_in(dir, "mgr.pid");
        if (now_pid > 0 && now_pid != mgr_pid && proc_running(now_pid))
            break;
        sleep_s(0.05);
    }
    CHECK_MSG(now_pid != mgr_pid && proc_running(now_pid),
              "no new manager (pid file says %d)", (int)now_pid);
    rc = wait_pid(job, 60);
    text = slurp(jlog);
    CHECK_MSG(rc == 0 && count_of(text, "ok 20") == 4, "exit %d:\n%s", rc,
              text);
    free(text);
    snprintf(log, sizeof(log), "%s/keep.log", dir);
    text = slurp(log);
    CHECK_MSG(strstr(text, "is gone; starting it again") &&
                  strstr(text, "3 of 3 ans registered again"),
              "%s", text);
    free(text);
    snprintf(log, sizeof(log), "%s-cli.log", dir);
    rc = cli(log, 30, down);
    text = slurp(log);
    CHECK_MSG(rc == 0 && strstr(text, "stopped 3 ans and the manager"), "%s",
              text);
    free(text);
    CHECK(!proc_running(keeper));
    CHECK(!proc_running(now_pid));
    return TEST_PASSED;
}

TEST(integ_mgr_fabric_keep, TEST_INTEG)
{
    RUN(fabric_keep_body);
}

/* ---- floods and a client with the secret ---- */

/*
 * A manager with 64 descriptors under a flood of 300 connections that
 * never authenticate, held open (from the job's own address) or reopened
 * as soon as they are closed (from another address): a job started
 * after it joins with the default INCOLL_MGR_CONNECT_MS (5 s) and runs
 * offloaded. Before, the flood sat in the listen queue, evicted one at a
 * time every half second, and every rank timed out.
 */
static int flood(const char *name, const char *src, int reopen)
{
    fab_t f;
    job_t a = {.name = "afterflood", .n = 4};
    char *args[] = {"--cols",  "2",   "--iters",          "20",
                    "--count", "300", "--expect-offload", "all",
                    NULL};
    pid_t flooder;
    double t0;
    char *text;
    int rc;

    mgr_nofile = 64;
    rc = fab_up(&f, name, NULL);
    mgr_nofile = 0;
    CHECK(rc == 0);
    flooder = flood_start(f.addr, src, 300, reopen);
    CHECK(flooder > 0);
    track_pid(flooder);
    sleep_s(0.3);
    for (int r = 0; r < 4; r++)
        a.hosts[r] = r;
    t0 = now_s();
    CHECK(getenv("INCOLL_MGR_CONNECT_MS") == NULL);
    CHECK(job_start(&f, &a, args, "warn") == 0);
    rc = job_wait(&a, 60);
    fprintf(stderr, "    the job ran in %.2f s under the flood\n",
            now_s() - t0);
    CHECK(rc == 0);
    CHECK_EQ_INT(job_count(&a, "offloaded 1"), 4 + 4 + 4);
    CHECK(proc_running(flooder));
    text = stat_text(&f);
    CHECK_MSG(mgr_tool_stat_value(text, "manager ", "conns_evicted") > 0, "%s",
              text);
    CHECK(mgr_tool_stat_value(text, "manager ", "ans_up") == f.nans);
    free(text);
    return TEST_PASSED;
}

static int flood_held_body(void)
{
    return flood("flood_held", "127.0.0.1", 0);
}

static int flood_reopen_body(void)
{
    return flood("flood_reopen", "127.0.0.2", 1);
}

TEST(integ_mgr_flood_held, TEST_INTEG)
{
    RUN(flood_held_body);
}

TEST(integ_mgr_flood_reopen, TEST_INTEG)
{
    RUN(flood_reopen_body);
}

#define FAT_JOBS 40
#define FAT_STATE_MIB 32

/* Reads what arrived on st without waiting: the type of the first frame,
 * or 0; with an error frame, its reason into why. */
static int peek_reply(mgr_stream_t *st, char *why, size_t len)
{
    const char *w = NULL;
    uint16_t type;
    const uint8_t *body;
    size_t n;
    if (mgr_stream_read(st, &w) != 0)
        return -1;
    if (mgr_stream_next(st, &type, &body, &n, &w) != MGR_NEXT_FRAME)
        return 0;
    if (type == MGR_ERROR) {
        mgr_rbuf_t r = {body, n, 0, 0};
        mgr_r_u32(&r);
        mgr_r_u32(&r);
        mgr_r_str(&r, why, len);
    }
    return type;
}

/*
 * A client with the secret joins 40 jobs of 2^18 ranks each and asks,
 * for each, for a group of all 2^18 (1 MiB requests), two for one job,
 * and keeps the connections: the manager's memory grows by less than its
 * state budget (32 MiB here), the requests beyond are refused naming it,
 * its ANs stay up, a real job runs offloaded meanwhile, and the memory
 * charged goes back once the client goes. Before, every join allocated
 * and wrote 2^18 rank records (10 MB), every request a seen-array of the
 * job's size, and the ticks walked every rank of every job.
 */
static int secret_memory_body(void)
{
    fab_t f;
    job_t a = {.name = "meanwhile", .n = 4};
    char *args[] = {"--cols",  "2",   "--iters",          "20",
                    "--count", "300", "--expect-offload", "all",
                    NULL};
    char *env[] = {"INCOLL_MGR_STATE_BUDGET=32M",
                   "INCOLL_MGR_JOB_STATE_BUDGET=16M", NULL};
    mgr_stream_t st[FAT_JOBS];
    uint8_t key[MGR_KEY_LEN];
    char err[256], why[256], *text;
    mgr_wbuf_t mem = {0}, w = {0};
    mgr_group_req_t rq = {0};
    long rss0, rss1;
    int refused = 0, rc;

    mgr_env = env;
    rc = fab_up(&f, "secret_memory", NULL);
    mgr_env = NULL;
    CHECK(rc == 0);
    CHECK(mgr_secret_load(f.secret, key, err, sizeof(err)) == INCOLL_OK);
    rss0 = rss_kb(f.mgr);
    CHECK(rss0 > 0);
    for (uint32_t i = 0; i < MGR_MAX_MEMBERS; i++)
        mgr_w_u32(&mem, i);
    rq.nmembers = MGR_MAX_MEMBERS;
    rq.members = mem.buf;
    for (int i = 0; i < FAT_JOBS; i++) {
        mgr_join_t jn = {0};
        CHECK(hostile_ready(f.addr, key, MGR_ROLE_HOST, &st[i]) == 0);
        snprintf(jn.job, sizeof(jn.job), "fat%d", i);
        jn.size = MGR_MAX_MEMBERS;
        jn.ep = wire_ep(0x7f000001u, (uint16_t)(41000 + i));
        w.len = 0;
        mgr_enc_join(&w, &jn);
        CHECK_EQ_INT(ask(&st[i], MGR_JOIN, &w), MGR_JOIN_OK);
        for (int k = 0; k < (i == 0 ? 2 : 1); k++) {
            rq.req = 1 + (uint32_t)k;
            rq.comm = 100 + (uint64_t)k;
            w.len = 0;
            mgr_enc_group_req(&w, &rq);
            CHECK(mgr_stream_send(&st[i], MGR_GROUP_REQ, w.buf, w.len) ==
                  INCOLL_OK);
            CHECK(send_all(st[i].fd, st[i].tx + st[i].tx_off,
                           st[i].tx_len - st[i].tx_off, 10) == 0);
            st[i].tx_off = st[i].tx_len = 0;
        }
    }
    mgr_wbuf_free(&w);
    mgr_wbuf_free(&mem);
    sleep_s(1);
    for (int i = 0; i < FAT_JOBS; i++) {
        why[0] = '\0';
        if (peek_reply(&st[i], why, sizeof(why)) == MGR_ERROR) {
            refused++;
            CHECK_MSG(strstr(why, "state is full"), "%s", why);
        }
    }
    rss1 = rss_kb(f.mgr);
    fprintf(stderr,
            "    manager: %ld KiB before, %ld KiB with %d jobs of %d ranks "
            "(%d requests refused)\n",
            rss0, rss1, FAT_JOBS, MGR_MAX_MEMBERS, refused);
    CHECK_MSG(rss1 - rss0 < (FAT_STATE_MIB + 16) * 1024,
              "the manager grew by %ld KiB", rss1 - rss0);
    CHECK(refused >= FAT_JOBS - 32 / 6);
    text = stat_text(&f);
    CHECK_MSG(mgr_tool_stat_value(text, "manager ", "state_bytes") <=
                  (long long)FAT_STATE_MIB << 20,
              "%s", text);
    CHECK(mgr_tool_stat_value(text, "manager ", "jobs") == FAT_JOBS);
    free(text);
    /* A real job meanwhile, its groups within what is left. */
    for (int r = 0; r < 4; r++)
        a.hosts[r] = r;
    CHECK(job_start(&f, &a, args, "warn") == 0);
    CHECK(job_wait(&a, 60) == 0);
    CHECK_EQ_INT(job_count(&a, "offloaded 1"), 4 + 4 + 4);
    CHECK(stat_value(&f, "manager ", "ans_up") == f.nans);
    text = slurp(f.mgr_log);
    CHECK_MSG(strstr(text, " down:") == NULL, "%s", text);
    free(text);
    for (int i = 0; i < FAT_JOBS; i++)
        mgr_stream_close(&st[i]);
    {
        /* The requests and ranks go with the client's connections. */
        double end = now_s() + 5;
        long long bytes = -1;
        while (now_s() < end &&
               (bytes = stat_value(&f, "manager ", "state_bytes")) >= 1 << 20)
            sleep_s(0.1);
        CHECK_MSG(bytes >= 0 && bytes < 1 << 20, "%lld bytes left", bytes);
    }
    return TEST_PASSED;
}

TEST(integ_mgr_secret_memory, TEST_INTEG)
{
    RUN(secret_memory_body);
}

/* ---- a machine that vanishes ---- */

static char vanish_ns[64];

static void vanish_net_down(void)
{
    char out[PATH_MAX];
    if (vanish_ns[0] == '\0')
        return;
    snprintf(out, sizeof(out), "%s/netns.out", test_tmpdir());
    /* The veth first: a namespace whose sockets linger outlives its
     * deletion, and its veth with it. */
    sh(out, "ip link del ivn%da; ip netns del %s", (int)getpid(), vanish_ns);
    vanish_ns[0] = '\0';
}

/* Runs fn(arg) with the calling thread in network namespace ns (sockets
 * made there stay there). */
static int in_netns(const char *ns, int (*fn)(void *), void *arg)
{
    char path[128];
    int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), there, r;
    snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
    there = open(path, O_RDONLY | O_CLOEXEC);
    if (self < 0 || there < 0 || setns(there, CLONE_NEWNET) != 0) {
        r = -1;
    } else {
        r = fn(arg);
        if (setns(self, CLONE_NEWNET) != 0)
            abort(); /* the rest of the tests would run elsewhere */
    }
    if (self >= 0)
        close(self);
    if (there >= 0)
        close(there);
    return r;
}

typedef struct {
    fab_t *f;
    uint8_t key[MGR_KEY_LEN];
    mgr_stream_t st[2];
} vanish_t;

/* Two ranks of job "vanish" join from hosts h0 and h1 and ask for the
 * group of both. */
static int vanish_join(void *arg)
{
    vanish_t *v = arg;
    mgr_wbuf_t w = {0}, mem = {0};
    mgr_group_req_t rq = {.req = 1, .comm = 7};
    int got = 0;

    for (uint32_t i = 0; i < 2; i++)
        mgr_w_u32(&mem, i);
    rq.nmembers = 2;
    rq.members = mem.buf;
    for (int r = 0; r < 2; r++) {
        mgr_join_t jn = {.rank = r, .size = 2, .pid = 1000u + (uint32_t)r};
        snprintf(jn.job, sizeof(jn.job), "vanish");
        snprintf(jn.host, sizeof(jn.host), "h%d", r);
        jn.ep = wire_ep(0x0a4e0002u, (uint16_t)(42000 + r));
        if (hostile_ready(v->f->addr, v->key, MGR_ROLE_HOST, &v->st[r]) != 0)
            goto out;
        w.len = 0;
        mgr_enc_join(&w, &jn);
        if (ask(&v->st[r], MGR_JOIN, &w) != MGR_JOIN_OK)
            goto out;
    }
    /* The manager answers when both asked. */
    w.len = 0;
    mgr_enc_group_req(&w, &rq);
    if (mgr_stream_send(&v->st[0], MGR_GROUP_REQ, w.buf, w.len) != INCOLL_OK ||
        mgr_stream_flush(&v->st[0]) != 0)
        goto out;
    got += ask(&v->st[1], MGR_GROUP_REQ, &w) == MGR_GROUP_INFO;
    got += await_frame(&v->st[0]) == MGR_GROUP_INFO;
out:
    mgr_wbuf_free(&w);
    mgr_wbuf_free(&mem);
    return got == 2 ? 0 : -1;
}

/*
 * The machine of a job's processes vanishes without a word (its link goes
 * down, as when a node dies or is cut off: no FIN, no RST): the manager
 * closes their connections within INCOLL_MGR_PEER_TIMEOUT_MS (3 s here,
 * TCP keepalive) and, INCOLL_MGR_HOST_GRACE_MS (1 s here) later, holds
 * nothing of the job. Before, the idle connections of a dead machine were
 * kept for ever, and the job's groups with them. The ranks connect from a
 * network namespace of the test's own, over a veth pair (10.78.X.0/30)
 * that it makes and always removes.
 */
static int vanish_body(void)
{
    fab_t f;
    vanish_t v = {.f = &f};
    char out[PATH_MAX], listen[64], *text;
    char *env[] = {"INCOLL_MGR_PEER_TIMEOUT_MS=3000",
                   "INCOLL_MGR_HOST_GRACE_MS=1000", NULL};
    int x = (int)(getpid() % 250), rc;
    double t0, took = -1;

    snprintf(vanish_ns, sizeof(vanish_ns), "incoll-vanish-%d", (int)getpid());
    snprintf(out, sizeof(out), "%s/netns.out", test_tmpdir());
    rc = sh(out,
            "ip netns add %s && ip link add ivn%da type veth peer name ivn%db "
            "netns %s && ip addr add 10.78.%d.1/30 dev ivn%da && ip link set "
            "ivn%da up && ip -n %s addr add 10.78.%d.2/30 dev ivn%db && ip -n "
            "%s link set ivn%db up && ip -n %s link set lo up",
            vanish_ns, (int)getpid(), (int)getpid(), vanish_ns, x,
            (int)getpid(), (int)getpid(), vanish_ns, x, (int)getpid(),
            vanish_ns, (int)getpid(), vanish_ns);
    if (rc != 0)
        show_tail(out);
    CHECK(rc == 0);

    /* The manager on the veth's address, its ANs on 127.0.0.1. */
    memset(&f, 0, sizeof(f));
    snprintf(f.dir, sizeof(f.dir), "%s/vanish", test_tmpdir());
    mkdir(f.dir, 0755);
    snprintf(f.secret, sizeof(f.secret), "%s/secret", f.dir);
    snprintf(f.topo, sizeof(f.topo), "%s/topology", f.dir);
    snprintf(f.mgr_log, sizeof(f.mgr_log), "%s/mgr.log", f.dir);
    CHECK(mgr_secret_generate(f.secret) == INCOLL_OK);
    snprintf(listen, sizeof(listen), "10.78.%d.1:0", x);
    mgr_env = env;
    rc = start_mgr(&f, listen, NULL);
    mgr_env = NULL;
    CHECK_MSG(rc == 0, "incoll-mgr did not start (%s)", f.mgr_log);
    text = slurp(f.topo);
    for (char *p = text; (p = strstr(p, "switch ")) != NULL && f.nans < 64;) {
        if (p == text || p[-1] == '\n')
            sscanf(p + 7, "%31s", f.names[f.nans++]);
        p += 7;
    }
    free(text);
    for (int i = 0; i < f.nans; i++)
        CHECK(start_an(&f, i, NULL) == 0);
    CHECK(wait_stat(&f, "manager ", "ans_up", f.nans, 10) == 0);

    CHECK(mgr_secret_load(f.secret, v.key, out, sizeof(out)) == INCOLL_OK);
    v.st[0].fd = v.st[1].fd = -1;
    rc = in_netns(vanish_ns, vanish_join, &v);
    CHECK_MSG(rc == 0, "the ranks did not join and get their group");
    CHECK(stat_value(&f, "job name=vanish ", "groups") == 1);

    /* The machine's link goes down; the ranks' sockets stay open. */
    CHECK(sh(out, "ip -n %s link set ivn%db down", vanish_ns, (int)getpid()) ==
          0);
    t0 = now_s();
    while (now_s() - t0 < 12) {
        text = stat_text(&f);
        if (text[0] && strstr(text, "job name=vanish ") == NULL) {
            took = now_s() - t0;
            free(text);
            break;
        }
        free(text);
        sleep_s(0.2);
    }
    fprintf(stderr, "    the manager let go of the vanished job in %.1f s\n",
            took);
    CHECK_MSG(took >= 0, "12 s after its machine vanished the manager still "
                         "held the job");
    CHECK(stat_value(&f, "manager ", "groups") == 0);
    CHECK(stat_value(&f, "manager ", "conns_timed_out") == 2);
    for (int r = 0; r < 2; r++) {
        /* Reset, not a FIN that would be sent again for minutes. */
        struct linger lg = {1, 0};
        setsockopt(v.st[r].fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        mgr_stream_close(&v.st[r]);
    }
    return TEST_PASSED;
}

TEST(integ_mgr_peer_vanishes, TEST_INTEG)
{
    int r;
    if (geteuid() != 0)
        return test_skip("not root: the test needs a network namespace");
    r = prerequisites();
    if (r != TEST_PASSED)
        return r;
    r = vanish_body();
    stop_all();
    vanish_net_down();
    return r;
}
