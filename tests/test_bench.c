/*
 * The benchmarks' shared option parser (tools/bench_opts.c) as unit tests:
 * tables of good command lines and the values they give, and of bad ones,
 * each of which must give exit code 2 and one line naming the option and
 * the value; and --help from the table.
 *
 * `incoll bench allreduce` and `incoll bench pingpong`: argument parsing,
 * the CSV they write, that the per-iteration verification catches a
 * deliberately corrupted result, and (as root) that an emulated fabric's
 * namespaces, links and processes exist while it runs and are all gone
 * after `fabric down`, after a crash, and after SIGINT, and that its
 * manager makes groups for split communicators; and `--algos
 * ...,mpi`, the MPI library's own allreduce in the same run, on loopback
 * and (as root) on the emulated links, or a clear error without MPI.
 *
 * These run the built `incoll` (build/bin), so they are integration tests.
 * Every fabric a test brings up is torn down on every path, pass or fail.
 */
#include "integ.h"
#include "test.h"

#include "common/wire.h"

#include "../tools/bench_opts.h"
#include "../tools/bench_rank.h"
#include "core/algo.h"

#include "fabric/mgr_tool.h"
#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ALL_ALGOS "inc,rd,ring,rabenseifner"
#define CSV_HEADER                                                             \
    "algo,bytes,iters,avg_us,min_us,max_us,bw_MBps,tx_bytes_per_op,"           \
    "tx_packets_per_op,cpu_us_per_op,retransmits_per_op,spread_min_us,"        \
    "spread_p25_us,spread_p50_us,spread_p75_us,spread_max_us,"                 \
    "speedup_vs_best_host,best_host,hosts,emulated,link_rate_bps"

/*
 * Runs `incoll ARGS...` (NULL-terminated) with extra environment
 * "K=V" (may be NULL), stdout and stderr into out_path, waiting up to
 * timeout_s (then SIGKILL). Returns the exit status, 128+signal, or -1.
 */
static int incoll(const char *out_path, const char *env_kv, int timeout_s,
                  const char *arg0, ...)
{
    char bin[PATH_MAX];
    const char *argv[48];
    int n = 0, st;
    double deadline = now_s() + timeout_s;
    va_list ap;
    pid_t pid;

    snprintf(bin, sizeof(bin), "%s/incoll", test_bindir());
    argv[n++] = bin;
    va_start(ap, arg0);
    for (const char *a = arg0; a && n < 47; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (env_kv)
            putenv((char *)env_kv);
        setenv("TMPDIR", test_tmpdir(), 1);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (now_s() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fprintf(stderr, "    incoll %s: timed out after %d s\n", arg0,
                    timeout_s);
            return -1;
        }
        usleep(20000);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void show(const char *path)
{
    char *s = slurp(path);
    if (s) {
        fprintf(stderr, "    --- %s:\n%s    ---\n", path, s);
        free(s);
    }
}

static void tmp_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", test_tmpdir(), name);
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* Splits a CSV line in place; returns the number of fields. */
static int csv_split(char *line, char **fields, int max)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        fields[n++] = p;
        p = strchr(p, ',');
        if (p == NULL)
            break;
        *p++ = '\0';
    }
    return n;
}

/* ---- the shared option parser (tools/bench_opts.c), as unit tests ----- */

/* A benchmark taking every option, algorithms from the core's table (ids
 * are the core's kinds) plus mpi, as the drivers describe themselves. */
static const char *t_algo_name(const bench_cmd_t *cmd, int id)
{
    (void)cmd;
    if (id < ALGO_COUNT)
        return algo_name((algo_kind_t)id);
    if (id == ALGO_COUNT + 1)
        return ALGO_INC_STREAM_NAME;
    return id == ALGO_COUNT ? BENCH_NAME_MPI : NULL;
}

static void t_defaults(const bench_cmd_t *cmd, bench_opts_t *o)
{
    (void)cmd;
    o->algos_text = "inc,ring";
}

static const bench_cmd_t t_cmd = {
    .who = "bench test",
    .synopsis = "bench test [options]",
    .accepts = (1ull << BENCH_OPT_COUNT) - 1,
    .defaults = t_defaults,
    .algo_name = t_algo_name,
};

/* The same with fewer options, a range of its own and a smaller size
 * limit, as `bench pingpong` has. */
static const bench_range_t t_ranges[] = {{BENCH_OPT_HOSTS, 2, 64}, {0, 1, 0}};
static const bench_cmd_t t_small = {
    .who = "bench small",
    .synopsis = "bench small [options]",
    .accepts = BENCH_OPTS_FABRIC | BENCH_OPT(SIZES),
    .ranges = t_ranges,
    .max_size = 64u << 20,
};

#define T_MAXARGS 8

/* Parses {"bench", args...} with cmd: the return code, *o and err. */
static int t_parse(const bench_cmd_t *cmd, const char *const *args,
                   bench_opts_t *o, char *err, size_t errlen)
{
    char *argv[T_MAXARGS + 2];
    int argc = 0;
    argv[argc++] = "bench";
    for (int i = 0; i < T_MAXARGS && args[i]; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    return bench_opts_parse(cmd, argc, argv, o, err, errlen);
}

/* The order the benchmarks run their algorithms in: each iteration a
 * permutation; over many iterations every algorithm runs at every position
 * and right after every other one about equally often (a rotation, or a
 * rotation reversed every other block, gives some pairs none). */
TEST(bench_run_order_fair, TEST_UNIT)
{
    enum { N = 6, ITERS = 6000 };
    int pos[N][N] = {{0}}, after[N][N] = {{0}}, prev = -1;

    CHECK_EQ_INT(bench_run_order(1, 7, 0), 0);
    for (int it = -2; it < ITERS; it++) {
        int seen = 0;
        for (int k = 0; k < N; k++) {
            int a = bench_run_order(N, it, k);
            CHECK(a >= 0 && a < N);
            CHECK_MSG(!(seen & (1 << a)), "iteration %d: %d twice", it, a);
            seen |= 1 << a;
            if (it >= 0) {
                pos[a][k]++;
                if (prev >= 0)
                    after[prev][a]++;
            }
            prev = a;
        }
        /* the same order on every call, as on every rank */
        CHECK_EQ_INT(bench_run_order(N, it, 0), bench_run_order(N, it, 0));
    }
    for (int a = 0; a < N; a++) {
        for (int b = 0; b < N; b++) {
            /* expected ITERS / N = 1000 at each position; a follows b
             * (a != b) about ITERS * N / (N * (N - 1)) = 1200 times */
            CHECK_MSG(pos[a][b] > 850 && pos[a][b] < 1150,
                      "algorithm %d at position %d %d times", a, b, pos[a][b]);
            if (a != b)
                CHECK_MSG(after[a][b] > 1000 && after[a][b] < 1400,
                          "%d right after %d %d times", b, a, after[a][b]);
        }
    }
    return TEST_PASSED;
}

TEST(bench_opts_good, TEST_UNIT)
{
    static const struct {
        const char *args[T_MAXARGS];
        const char *want; /* fields of the result, checked below */
    } good[] = {
        {{NULL}, "hosts=8 radix=4 sizes=8:1M iters=0 warmup=-1 algos=inc,ring"},
        {{"-n", "16", "--sizes", "8:4M", "--algos", "inc,ring", NULL},
         "hosts=16 radix=4 sizes=8:4M iters=0 warmup=-1 algos=inc,ring"},
        {{"--hosts=3", "--radix", "2", "--iters", "7", "--warmup", "0", NULL},
         "hosts=3 radix=2 sizes=8:1M iters=7 warmup=0 algos=inc,ring"},
        {{"--algos", "rabenseifner,rd:256K,mpi", "--sizes", "4K", NULL},
         "hosts=8 radix=4 sizes=4K:4K iters=0 warmup=-1 "
         "algos=rabenseifner,rd:256K,mpi"},
        {{"--emulate", "--link-rate", "250mbit", NULL},
         "hosts=8 radix=4 sizes=8:1M iters=0 warmup=-1 algos=inc,ring"},
        {{"-n", "16", "--jobs", "4", "--algos", "inc-stream,inc", NULL},
         "hosts=16 radix=4 sizes=8:1M iters=0 warmup=-1 "
         "algos=inc-stream,inc"},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        bench_opts_t o;
        char err[512], got[512], sz[64], al[128];
        int rc = t_parse(&t_cmd, good[i].args, &o, err, sizeof(err));
        CHECK_MSG(rc == 0, "case %zu: rc %d: %s", i, rc, err);
        bench_algos_str(&t_cmd, &o.algos, al, sizeof(al));
        snprintf(got, sizeof(got),
                 "hosts=%d radix=%d sizes=%s iters=%d warmup=%d algos=%s",
                 o.hosts, o.radix,
                 bench_sizes_str(o.min_size, o.max_size, sz, sizeof(sz)),
                 o.iters, o.warmup, al);
        CHECK_MSG(strcmp(got, good[i].want) == 0, "case %zu: got '%s'", i, got);
    }
    /* Values of the other kinds. */
    {
        static const char *const a[] = {
            "--emulate",    "--link-rate", "1.5gbit", "--loss",
            "0,0.001,0.05", "--burst",     "2.5",     NULL};
        static const char *const b[] = {
            "--pair", "3,5", "--plot", "p.png", "--dry-run", "--keep", NULL};
        bench_opts_t o;
        char err[512];
        CHECK_EQ_INT(t_parse(&t_cmd, a, &o, err, sizeof(err)), 0);
        CHECK(o.emulate == 1 && o.link_rate == 1500000000ull);
        CHECK(o.nloss == 3 && o.loss[0] == 0 && o.loss[1] == 0.001 &&
              o.loss[2] == 0.05);
        CHECK(o.burst == 2.5);
        CHECK(bench_opts_given(&o, BENCH_OPT_LOSS) &&
              !bench_opts_given(&o, BENCH_OPT_HOSTS));
        CHECK_EQ_INT(t_parse(&t_cmd, b, &o, err, sizeof(err)), 0);
        CHECK(o.a == 3 && o.b == 5 && strcmp(o.pair, "3,5") == 0);
        CHECK(strcmp(o.plot, "p.png") == 0 && o.dry_run && o.keep);
        CHECK(bench_algos_find(&o.algos, ALGO_RING) == 1);
        CHECK(bench_algos_active(&o.algos, 0, 1u << 30));
    }
    /* --jobs: the number, and one job when it is not given. */
    {
        static const char *const a[] = {"--jobs=3", "--algos", "inc-stream",
                                        NULL};
        static const char *const b[] = {NULL};
        bench_opts_t o;
        char err[512];
        CHECK_EQ_INT(t_parse(&t_cmd, a, &o, err, sizeof(err)), 0);
        CHECK_EQ_INT(o.jobs, 3);
        CHECK(bench_opts_given(&o, BENCH_OPT_JOBS));
        CHECK_EQ_INT(o.algos.n, 1);
        CHECK_EQ_INT(o.algos.id[0], ALGO_COUNT + 1);
        CHECK_EQ_INT(t_parse(&t_cmd, b, &o, err, sizeof(err)), 0);
        CHECK_EQ_INT(o.jobs, 0);
        CHECK(!bench_opts_given(&o, BENCH_OPT_JOBS));
    }
    /* Iterations by size, and the size helpers. */
    {
        bench_opts_t o;
        size_t lo = 0, hi = 0, *v = NULL;
        char buf[32];
        bench_opts_defaults(&o);
        CHECK_EQ_INT(bench_iters_for(&o, 8, 4u << 20, 4, 100), 100);
        CHECK_EQ_INT(bench_iters_for(&o, 1u << 20, 4u << 20, 4, 100), 4);
        CHECK_EQ_INT(bench_iters_for(&o, 64u << 20, 4u << 20, 4, 100), 4);
        CHECK_EQ_INT(bench_warmup_for(&o, 100), 10);
        CHECK_EQ_INT(bench_warmup_for(&o, 4), 1);
        o.iters = 9;
        o.warmup = 0;
        CHECK_EQ_INT(bench_iters_for(&o, 8, 4u << 20, 4, 100), 9);
        CHECK_EQ_INT(bench_warmup_for(&o, 9), 0);
        CHECK_EQ_INT(bench_sizes_parse("1KiB:2MB", &lo, &hi), 0);
        CHECK(lo == 1024 && hi == 2u << 20);
        CHECK_EQ_INT(bench_size_list(8, 64, &v), 4);
        CHECK(v && v[0] == 8 && v[3] == 64);
        free(v);
        CHECK(strcmp(bench_size_str(3u << 20, buf, sizeof(buf)), "3M") == 0);
        CHECK(strcmp(bench_size_str(1000, buf, sizeof(buf)), "1000") == 0);
    }
    return TEST_PASSED;
}

/* Every bad value: exit code 2 and one line naming the option (and the
 * value, where there is one). */
TEST(bench_opts_bad, TEST_UNIT)
{
    static const struct {
        const bench_cmd_t *cmd;
        const char *args[T_MAXARGS];
        const char *name, *value; /* both must be in the message */
    } bad[] = {
        {&t_cmd, {"-n", "0", NULL}, "-n", "'0'"},
        {&t_cmd, {"-n", "x", NULL}, "--hosts", "'x'"},
        {&t_cmd, {"--hosts", "5000", NULL}, "--hosts", "'5000'"},
        {&t_cmd, {"--radix", "1", NULL}, "--radix", "'1'"},
        {&t_cmd, {"--iters", "0", NULL}, "--iters", "'0'"},
        {&t_cmd, {"--iters", "3x", NULL}, "--iters", "'3x'"},
        {&t_cmd, {"--warmup", "-1", NULL}, "--warmup", "'-1'"},
        {&t_cmd, {"--timeout", "0", NULL}, "--timeout", "'0'"},
        {&t_cmd, {"--ppn", "0", NULL}, "--ppn", "'0'"},
        {&t_cmd, {"--sockets", "65", NULL}, "--sockets", "'65'"},
        {&t_cmd, {"--rounds", "101", NULL}, "--rounds", "'101'"},
        {&t_cmd, {"--jobs", "0", NULL}, "--jobs", "'0'"},
        {&t_cmd, {"--jobs", "65", NULL}, "--jobs", "'65'"},
        {&t_cmd, {"--jobs", "two", NULL}, "--jobs", "'two'"},
        {&t_cmd, {"--jobs", NULL}, "--jobs", "needs a value"},
        {&t_cmd,
         {"--algos", "inc-streaming", NULL},
         "--algos",
         "'inc-streaming'"},
        {&t_cmd,
         {"--algos", "inc-stream,inc-stream", NULL},
         "--algos",
         "'inc-stream'"},
        {&t_cmd, {"--burst", "0.5", NULL}, "--burst", "'0.5'"},
        {&t_cmd, {"--burst", "lots", NULL}, "--burst", "'lots'"},
        {&t_cmd, {"--sizes", "4M:8", NULL}, "--sizes", "'4M:8'"},
        {&t_cmd, {"--sizes", "8:lots", NULL}, "--sizes", "'8:lots'"},
        {&t_cmd, {"--sizes", "0", NULL}, "--sizes", "'0'"},
        {&t_cmd, {"--sizes", "8:2G", NULL}, "--sizes", "'8:2G'"},
        {&t_cmd, {"--algos", "inc,bogus", NULL}, "--algos", "'bogus'"},
        {&t_cmd, {"--algos", "ring,ring", NULL}, "--algos", "'ring'"},
        {&t_cmd, {"--algos", "rd:abc", NULL}, "--algos", "'abc'"},
        {&t_cmd, {"--algos", ",", NULL}, "--algos", "','"},
        {&t_cmd, {"--algos", "rab", NULL}, "--algos", "'rab'"},
        {&t_cmd,
         {"--emulate", "--link-rate", "7 parsecs", NULL},
         "--link-rate",
         "'7 parsecs'"},
        {&t_cmd, {"--link-rate", "100mbit", NULL}, "--link-rate", "--emulate"},
        {&t_cmd,
         {"--fabric", "/x", "--emulate", NULL},
         "--fabric",
         "--emulate"},
        {&t_cmd, {"--plot", "x.jpg", NULL}, "--plot", "'x.jpg'"},
        {&t_cmd, {"--an-cpus", "0-", NULL}, "--an-cpus", "'0-'"},
        {&t_cmd, {"--host-cpus", "1023", NULL}, "--host-cpus", "CPU 1023"},
        {&t_cmd,
         {"--fabric", "/x", "--an-cpus", "0", NULL},
         "--an-cpus",
         "--fabric"},
        {&t_cmd, {"--loss", "0,abc", NULL}, "--loss", "'0,abc'"},
        {&t_cmd, {"--loss", "0.95", NULL}, "--loss", "'0.95'"},
        {&t_cmd, {"--loss", "0.01,0.01", NULL}, "--loss", "'0.01,0.01'"},
        {&t_cmd, {"--loss", "0,", NULL}, "--loss", "'0,'"},
        {&t_cmd, {"--loss", "", NULL}, "--loss", "''"},
        {&t_cmd, {"--algos", "", NULL}, "--algos", "''"},
        {&t_cmd, {"--sizes", "", NULL}, "--sizes", "''"},
        {&t_cmd, {"--pair", "sideways", NULL}, "--pair", "'sideways'"},
        {&t_cmd, {"--frobnicate", NULL}, "unknown option", "'--frobnicate'"},
        {&t_cmd, {"--iters", NULL}, "--iters", "needs a value"},
        {&t_cmd, {"-n", NULL}, "-n", "needs a value"},
        {&t_cmd, {"stray", NULL}, "unexpected argument", "'stray'"},
        /* Another command: its own range and size limit, and an option
         * it does not take. */
        {&t_small, {"-n", "1", NULL}, "-n", "2..64"},
        {&t_small, {"--sizes", "8:128M", NULL}, "--sizes", "64M"},
        {&t_small, {"--loss", "0", NULL}, "unknown option", "'--loss'"},
        {&t_small, {"--algos", "inc", NULL}, "unknown option", "'--algos'"},
        {&t_small, {"--jobs", "2", NULL}, "unknown option", "'--jobs'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bench_opts_t o;
        char err[512];
        int rc = t_parse(bad[i].cmd, bad[i].args, &o, err, sizeof(err));
        CHECK_MSG(rc == 2, "case %zu (%s %s): rc %d, want 2", i, bad[i].args[0],
                  bad[i].args[1] ? bad[i].args[1] : "", rc);
        CHECK_MSG(strncmp(err, "incoll bench ", 13) == 0 &&
                      strchr(err, '\n') == NULL,
                  "case %zu: not one line naming the command: '%s'", i, err);
        CHECK_MSG(strstr(err, bad[i].name) && strstr(err, bad[i].value),
                  "case %zu: want '%s' and '%s' in '%s'", i, bad[i].name,
                  bad[i].value, err);
    }
    return TEST_PASSED;
}

/* --help comes from the table: every documented option of the command,
 * the algorithm names of the core, none of the rank side's options. */
TEST(bench_opts_usage, TEST_UNIT)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL);
    bench_opts_usage(&t_cmd, f);
    fclose(f);
    CHECK(strstr(text, "usage: incoll bench test [options]") != NULL);
    CHECK(strstr(text, "-n, --hosts P") != NULL);
    CHECK(strstr(text, "--sizes MIN:MAX") != NULL);
    CHECK(strstr(text, "(default 8:1M)") != NULL);
    for (int k = 0; k < ALGO_COUNT; k++)
        CHECK_MSG(strstr(text, algo_name((algo_kind_t)k)) != NULL,
                  "no %s in --help", algo_name((algo_kind_t)k));
    CHECK(strstr(text, ALGO_INC_STREAM_NAME) != NULL);
    CHECK(strstr(text, "--jobs J") != NULL);
    CHECK(strstr(text, "--out") == NULL && strstr(text, "--progress") == NULL);
    free(text);
    return TEST_PASSED;
}

/* ---- argument parsing ------------------------------------------------- */

TEST(bench_args_parse, TEST_INTEG)
{
    char out[PATH_MAX];
    char *text;
    int rc;

    tmp_path(out, sizeof(out), "out.txt");
    rc = incoll(out, NULL, 30, "bench", "allreduce", "--dry-run", "-n", "16",
                "--sizes", "8:4M", "--algos", "inc,ring", "--csv", "r.csv",
                NULL);
    text = slurp(out);
    CHECK_MSG(rc == 0 && text, "dry run exited %d", rc);
    CHECK(strstr(text, "hosts=16 radix=4 emulate=0") != NULL);
    CHECK(strstr(text, "algos=inc,ring csv=r.csv plot=-") != NULL);
    /* 8, 16, ..., 4M: 20 sizes; many iterations small, few large. */
    CHECK_EQ_INT(count_lines_with(text, "size="), 20);
    CHECK(strstr(text, "size=8 iters=100 warmup=10\n") != NULL);
    CHECK(strstr(text, "size=4194304 iters=4 warmup=1\n") != NULL);
    free(text);

    rc = incoll(out, NULL, 30, "bench", "allreduce", "--dry-run", "--emulate",
                "--link-rate", "250mbit", "--sizes", "1K:4K", "--iters", "7",
                "--warmup", "0", "--plot", "p.png", NULL);
    text = slurp(out);
    CHECK_MSG(rc == 0 && text, "dry run exited %d", rc);
    CHECK(strstr(text, "emulate=1 link_rate=250000000") != NULL);
    CHECK(strstr(text, "algos=inc,rd,ring,rabenseifner") != NULL);
    CHECK(strstr(text, "size=1024 iters=7 warmup=0\nsize=2048 iters=7 "
                       "warmup=0\nsize=4096 iters=7 warmup=0\n") != NULL);
    free(text);

    /* The MPI library's allreduce as one more algorithm. */
    rc = incoll(out, NULL, 30, "bench", "allreduce", "--dry-run", "--algos",
                "inc,ring:64K,mpi", NULL);
    text = slurp(out);
    CHECK_MSG(rc == 0 && text, "dry run exited %d", rc);
    CHECK(strstr(text, "algos=inc,ring:64K,mpi csv=") != NULL);
    free(text);

    /* Streaming beside the slots, four jobs at once. */
    rc = incoll(out, NULL, 30, "bench", "allreduce", "--dry-run", "-n", "16",
                "--jobs", "4", "--algos", "inc,inc-stream", "--sizes", "4M",
                NULL);
    text = slurp(out);
    CHECK_MSG(rc == 0 && text, "dry run exited %d", rc);
    CHECK(text &&
          strstr(text, "algos=inc,inc-stream csv=- plot=- jobs=4") != NULL);
    free(text);

    /* Bad input: exit 2 with a message naming the option. */
    {
        static const struct {
            const char *a, *b, *c, *word;
        } bad[] = {
            {"--jobs", "3", NULL, "multiple of J"},
            {"--jobs", "8", NULL, "two ranks per job"},
            {"--jobs", "2", "--csv=r.csv", "--jobs 2"},
            {"--jobs", "0", NULL, "--jobs"},
            {"--algos", "inc-stream,bogus", NULL, "--algos"},
            {"--sizes", "4M:8", NULL, "--sizes"},
            {"--sizes", "8:lots", NULL, "--sizes"},
            {"--algos", "inc,bogus", NULL, "--algos"},
            {"--algos", "ring,ring", NULL, "--algos"},
            {"--algos", "mpi,mpi", NULL, "--algos"},
            {"--link-rate", "100mbit", NULL, "--emulate"},
            {"--emulate", "--link-rate", "7 parsecs", "--link-rate"},
            {"--fabric", "/nonexistent", "--emulate", "--fabric"},
            {"--plot", "x.jpg", NULL, ".png"},
            {"--iters", "0", NULL, "--iters"},
            {"--frobnicate", NULL, NULL, "unknown option"},
            {"-n", "0", NULL, "-n"},
            {"--loss", "0,abc", NULL, "--loss"},
            {"--loss", "0.01,0.01", NULL, "--loss"},
            {"--loss", "0.95", NULL, "--loss"},
            {"--burst", "4", NULL, "--loss"},
            {"--loss", "0,0.01", "--burst", "--burst"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            rc = incoll(out, NULL, 30, "bench", "allreduce", "--dry-run",
                        bad[i].a, bad[i].b, bad[i].c, NULL);
            text = slurp(out);
            CHECK_MSG(rc == 2, "%s %s: exit %d, want 2", bad[i].a,
                      bad[i].b ? bad[i].b : "", rc);
            CHECK_MSG(text && strstr(text, bad[i].word),
                      "%s %s: no '%s' in: %s", bad[i].a,
                      bad[i].b ? bad[i].b : "", bad[i].word, text ? text : "");
            free(text);
        }
    }

    /* pingpong */
    rc = incoll(out, NULL, 30, "bench", "pingpong", "--dry-run", "--pair",
                "cross-leaf", "--sizes", "64K:256K", NULL);
    text = slurp(out);
    CHECK_MSG(rc == 0 && text, "pingpong dry run exited %d", rc);
    CHECK(strstr(text, "pair=cross-leaf") != NULL);
    CHECK_EQ_INT(count_lines_with(text, "size="), 3);
    free(text);
    rc = incoll(out, NULL, 30, "bench", "pingpong", "--dry-run", "--pair",
                "sideways", NULL);
    CHECK_EQ_INT(rc, 2);

    /* The hidden rank entry points stay out of the help. */
    rc = incoll(out, NULL, 30, "bench", "--help", NULL);
    text = slurp(out);
    CHECK(rc == 0 && text);
    CHECK(strstr(text, "allreduce") && strstr(text, "pingpong"));
    CHECK(strstr(text, "_allreduce") == NULL);
    free(text);
    return TEST_PASSED;
}

/* ---- a loopback run and its CSV --------------------------------------- */

/* No scratch directory of a bench may outlive it. */
static int leftover_work_dirs(void)
{
    DIR *d = opendir(test_tmpdir());
    struct dirent *de;
    int n = 0;
    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL)
        n += strncmp(de->d_name, "incoll-bench-", 13) == 0;
    closedir(d);
    return n;
}

/* inc-stream beside inc: every inc-stream operation streams (a lock per
 * operation) and no inc one does, every result checked by the ranks; the
 * crossover table. 1 MiB: more than the group's 64 slots of 8 KiB carry
 * in one round (512 KiB would stay on them). (--jobs: bench_loopback_jobs.) */
TEST(bench_loopback_stream, TEST_INTEG)
{
    char out[PATH_MAX];
    char *text;
    int rc;

    tmp_path(out, sizeof(out), "out.txt");
    rc = incoll(out, "INCOLL_LOG_LEVEL=info", 180, "bench", "allreduce", "-n",
                "4", "--radix", "2", "--sizes", "1M", "--algos",
                "inc,inc-stream", "--iters", "3", "--warmup", "1", NULL);
    text = slurp(out);
    CHECK_MSG(rc == 0 && text, "bench exited %d: %s", rc, text ? text : "");
    CHECK(strstr(text, "# streaming (inc-stream") != NULL);
    CHECK(strstr(text, "# crossover: streaming ") != NULL);
    /* 4 of each algorithm per rank, only inc-stream's streamed. */
    CHECK_MSG(count_lines_with(text, ": 4 of 8 operations streamed") == 4,
              "not every rank streamed exactly inc-stream's 4: %s", text);
    free(text);

    CHECK_EQ_INT(leftover_work_dirs(), 0);
    return TEST_PASSED;
}

TEST(bench_loopback_csv, TEST_INTEG)
{
    char out[PATH_MAX], csv[PATH_MAX], png[PATH_MAX];
    char *text, *line, *save = NULL;
    int rc, rows = 0, have_gnuplot = access("/usr/bin/gnuplot", X_OK) == 0;
    long last_bytes[4] = {0, 0, 0, 0};
    static const char *algos[] = {"inc", "rd", "ring", "rabenseifner"};

    tmp_path(out, sizeof(out), "out.txt");
    tmp_path(csv, sizeof(csv), "r.csv");
    tmp_path(png, sizeof(png), "r.png");
    rc = incoll(out, NULL, 240, "bench", "allreduce", "-n", "4", "--radix", "2",
                "--sizes", "8:64K", "--iters", "3", "--warmup", "1", "--algos",
                ALL_ALGOS, "--csv", csv, have_gnuplot ? "--plot" : NULL, png,
                NULL);
    if (rc != 0)
        show(out);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(leftover_work_dirs(), 0);
    text = slurp(out);
    CHECK(text && strstr(text, "# speedup of inc over the best host-based"));
    free(text);
    if (have_gnuplot) {
        struct stat st;
        CHECK_MSG(stat(png, &st) == 0 && st.st_size > 10000, "no plot in %s",
                  png);
    }

    text = slurp(csv);
    CHECK(text != NULL);
    line = strtok_r(text, "\n", &save);
    CHECK_MSG(line && strcmp(line, CSV_HEADER) == 0, "header is '%s'",
              line ? line : "");
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char *f[32];
        int nf = csv_split(line, f, 32), ai = -1;
        long bytes;
        double avg, mn, mx, bw, tx, pkts;
        CHECK_EQ_INT(nf, 21);
        for (int i = 0; i < 4; i++)
            if (strcmp(f[0], algos[i]) == 0)
                ai = i;
        CHECK_MSG(ai >= 0, "unknown algorithm '%s'", f[0]);
        bytes = atol(f[1]);
        avg = atof(f[3]);
        mn = atof(f[4]);
        mx = atof(f[5]);
        bw = atof(f[6]);
        tx = atof(f[7]);
        pkts = atof(f[8]);
        CHECK_MSG(bytes > last_bytes[ai], "%s: sizes not increasing", f[0]);
        last_bytes[ai] = bytes;
        CHECK_EQ_INT(atoi(f[2]), 3);
        CHECK(mn > 0 && mn <= avg && avg <= mx);
        CHECK(bw > 0 && bw < 1e5);
        /* Bandwidth is bytes / avg latency. */
        CHECK(fabs(bw - (double)bytes / avg) <= 0.01 * bw + 1e-3);
        /* Counters, not a formula: inc sends at least the vector and one
         * WIRE_HDR_LEN-byte header per 8192-byte packet; every algorithm sends
         * something. */
        if (ai == 0) {
            double min_pkts = (double)((bytes + 8191) / 8192);
            CHECK_MSG(tx >= (double)bytes + (double)WIRE_HDR_LEN * min_pkts &&
                          pkts >= min_pkts,
                      "inc %ld bytes: tx %g pkts %g", bytes, tx, pkts);
            CHECK(atof(f[16]) > 0);   /* speedup */
            CHECK(strlen(f[17]) > 0); /* best host algorithm */
        } else {
            CHECK(tx > 0 && pkts >= 1);
            CHECK(f[16][0] == '\0');
        }
        /* Spread: min <= p25 <= p50 <= p75 <= max. */
        for (int q = 11; q < 15; q++)
            CHECK(atof(f[q]) <= atof(f[q + 1]));
        CHECK_EQ_INT(atoi(f[18]), 4);
        CHECK_EQ_INT(atoi(f[19]), 0);
        rows++;
    }
    free(text);
    /* 8 .. 64K is 14 sizes, times 4 algorithms. */
    CHECK_EQ_INT(rows, 14 * 4);
    return TEST_PASSED;
}

/* `--jobs 2` on a loopback fabric: two jobs of two ranks each at once, every
 * result verified by the ranks; a row per job and algorithm with its
 * iterations, a sum per algorithm that is the jobs' rows added up, and
 * streaming really locked the tree (the ranks' info lines). */
TEST(bench_loopback_jobs, TEST_INTEG)
{
    char out[PATH_MAX];
    char *text, *p;
    int rc, rows = 0, sums = 0, lines = 0, streamed = 0;
    double bw_sum[2] = {0, 0};

    tmp_path(out, sizeof(out), "jobs.txt");
    rc = incoll(out, "INCOLL_LOG_LEVEL=info", 240, "bench", "allreduce", "-n",
                "4", "--radix", "2", "--jobs", "2", "--sizes", "1M:1M",
                "--iters", "3", "--warmup", "1", "--algos", "inc,inc-stream",
                NULL);
    if (rc != 0)
        show(out);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(leftover_work_dirs(), 0);
    text = slurp(out);
    CHECK(text != NULL);
    CHECK(strstr(text, "# job 0: window") && strstr(text, "# job 1: window"));
    for (p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        char algo[32];
        long bytes;
        int job, iters;
        double avg, bw, fair, least, share;
        int ai;
        if (sscanf(p, "%31s %ld %d %d %lf %lf", algo, &bytes, &job, &iters,
                   &avg, &bw) == 6 &&
            (strcmp(algo, "inc") == 0 || strcmp(algo, "inc-stream") == 0)) {
            ai = strcmp(algo, "inc") == 0 ? 0 : 1;
            CHECK_EQ_INT((int)bytes, 1048576);
            CHECK(job == 0 || job == 1);
            CHECK_EQ_INT(iters, 3);
            CHECK(avg > 0 && fabs(bw - 1048576.0 / avg) <= 0.01 * bw + 1e-3);
            bw_sum[ai] += bw;
            rows++;
        } else if (sscanf(p, "%31s %ld %lf %lf %lf %lf", algo, &bytes, &bw,
                          &fair, &least, &share) == 6 &&
                   (strcmp(algo, "inc") == 0 ||
                    strcmp(algo, "inc-stream") == 0)) {
            ai = strcmp(algo, "inc") == 0 ? 0 : 1;
            CHECK_MSG(fabs(bw - bw_sum[ai]) <= 0.02 + 0.001 * bw,
                      "%s: sum %g, rows add up to %g", algo, bw, bw_sum[ai]);
            CHECK(fabs(fair - bw / 2) <= 0.01 + 0.001 * bw);
            CHECK(least > 0 && least <= fair + 0.01 && share <= 1.0 + 1e-3);
            sums++;
        }
    }
    CHECK_EQ_INT(rows, 2 * 2);
    CHECK_EQ_INT(sums, 2);
    /* Each rank says what its group streamed when it frees it. */
    for (p = strstr(text, "locks granted "); p;
         p = strstr(p + 1, "locks granted ")) {
        lines++;
        streamed += atoi(p + strlen("locks granted ")) > 0;
    }
    CHECK_EQ_INT(lines, 4);
    CHECK_MSG(streamed > 0, "no rank's group was ever granted a lock");
    free(text);
    return TEST_PASSED;
}

/* `--loss`: one loopback fabric per drop rate, every daemon and host
 * dropping in bursts at that rate; every result is verified by the ranks,
 * the CSV has one row per rate and algorithm, inc's share at the lowest
 * rate is 1 and it counted retransmissions under loss (the drops were
 * real), and the plot is drawn. */
TEST(bench_loopback_loss, TEST_INTEG)
{
    char out[PATH_MAX], csv[PATH_MAX], png[PATH_MAX];
    char *text, *line, *save = NULL;
    int rc, rows = 0, have_gnuplot = access("/usr/bin/gnuplot", X_OK) == 0;

    tmp_path(out, sizeof(out), "out.txt");
    tmp_path(csv, sizeof(csv), "loss.csv");
    tmp_path(png, sizeof(png), "loss.png");
    rc = incoll(out, NULL, 240, "bench", "allreduce", "-n", "4", "--radix", "2",
                "--sizes", "64K:64K", "--iters", "4", "--warmup", "1",
                "--algos", "inc,ring", "--loss", "0,0.05", "--burst", "3",
                "--csv", csv, have_gnuplot ? "--plot" : NULL, png, NULL);
    if (rc != 0)
        show(out);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(leftover_work_dirs(), 0);
    text = slurp(out);
    CHECK(text && strstr(text, "# incoll bench allreduce --loss"));
    free(text);
    if (have_gnuplot) {
        struct stat st;
        CHECK_MSG(stat(png, &st) == 0 && st.st_size > 10000, "no plot in %s",
                  png);
    }
    text = slurp(csv);
    CHECK(text != NULL);
    line = strtok_r(text, "\n", &save);
    CHECK_MSG(line && strcmp(line, "loss,burst,algo,bytes,samples,avg_us,"
                                   "p50_us,p99_us,goodput_MBps,goodput_share,"
                                   "retransmits_per_op,hosts,emulated,"
                                   "link_rate_bps") == 0,
              "header is '%s'", line ? line : "");
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char *f[16];
        double loss;
        int inc;
        CHECK_EQ_INT(csv_split(line, f, 16), 14);
        loss = atof(f[0]);
        inc = strcmp(f[2], "inc") == 0;
        CHECK(inc || strcmp(f[2], "ring") == 0);
        CHECK(loss == 0 || loss == 0.05);
        CHECK_EQ_INT(atoi(f[1]), 3);
        CHECK_EQ_INT(atol(f[3]), 65536);
        CHECK_EQ_INT(atoi(f[4]), 4 * 4); /* iterations x ranks */
        CHECK(atof(f[6]) > 0 && atof(f[6]) <= atof(f[7]));
        if (loss == 0)
            CHECK(fabs(atof(f[9]) - 1.0) < 1e-9);
        if (inc && loss > 0)
            CHECK_MSG(atof(f[10]) > 0, "inc at 5%%: no retransmission");
        if (!inc)
            CHECK(f[10][0] == '\0');
        rows++;
    }
    free(text);
    CHECK_EQ_INT(rows, 4);
    return TEST_PASSED;
}

/* ---- verification catches a wrong result ------------------------------- */

TEST(bench_catches_corruption, TEST_INTEG)
{
    static const char *modes[] = {"INCOLL_BENCH_CORRUPT=1",
                                  "INCOLL_BENCH_CORRUPT=input"};
    char out[PATH_MAX];

    tmp_path(out, sizeof(out), "out.txt");
    for (int m = 0; m < 2; m++) {
        for (int a = 0; a < 2; a++) {
            char *text;
            const char *algo = a == 0 ? "inc" : "ring";
            int rc = incoll(out, modes[m], 120, "bench", "allreduce", "-n", "4",
                            "--radix", "2", "--sizes", "4K:8K", "--iters", "2",
                            "--warmup", "1", "--algos", algo, NULL);
            text = slurp(out);
            CHECK_MSG(rc != 0, "%s with %s: the run passed", algo, modes[m]);
            CHECK_MSG(text && strstr(text, "WRONG RESULT"),
                      "%s with %s: no verification message in: %s", algo,
                      modes[m], text ? text : "");
            /* The corrupted element is the one in the middle. */
            CHECK(strstr(text, "element 512 is") != NULL);
            CHECK(strstr(text, "no results") != NULL);
            free(text);
            CHECK_EQ_INT(leftover_work_dirs(), 0);
        }
    }
    return TEST_PASSED;
}

/* ---- the emulated fabric (root) ---------------------------------------- */

/* Names in /run/netns. */
typedef struct {
    int n;
    char name[512][64];
} nslist_t;

static void ns_list(nslist_t *l)
{
    DIR *d = opendir("/run/netns");
    struct dirent *de;
    l->n = 0;
    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL && l->n < 512)
        if (de->d_name[0] != '.' && strlen(de->d_name) < 64)
            memcpy(l->name[l->n++], de->d_name, strlen(de->d_name) + 1);
    closedir(d);
}

static int ns_count_prefix(const char *prefix)
{
    nslist_t l;
    int n = 0;
    ns_list(&l);
    for (int i = 0; i < l.n; i++)
        n += prefix[0] && strncmp(l.name[i], prefix, strlen(prefix)) == 0 &&
             l.name[i][strlen(prefix)] == '-';
    return n;
}

/* The prefix recorded in DIR/emu.state, or "" if none. */
static void emu_prefix(const char *dir, char *prefix, size_t len)
{
    char path[PATH_MAX + 16], line[256];
    FILE *f;
    prefix[0] = '\0';
    snprintf(path, sizeof(path), "%s/emu.state", dir);
    f = fopen(path, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "emu prefix=%15s", prefix) == 1)
            break;
    fclose(f);
}

/* Processes whose network namespace is not ours but one named prefix-*. */
static int procs_in_prefix(const char *prefix)
{
    nslist_t l;
    struct stat ns[512];
    int ok[512], n = 0;
    DIR *d;
    struct dirent *de;

    ns_list(&l);
    for (int i = 0; i < l.n; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "/run/netns/%s", l.name[i]);
        ok[i] = prefix[0] && strncmp(l.name[i], prefix, strlen(prefix)) == 0 &&
                l.name[i][strlen(prefix)] == '-' && stat(p, &ns[i]) == 0;
    }
    d = opendir("/proc");
    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL) {
        char p[300];
        struct stat st;
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(p, sizeof(p), "/proc/%s/ns/net", de->d_name);
        if (stat(p, &st) != 0)
            continue;
        for (int i = 0; i < l.n; i++)
            if (ok[i] && ns[i].st_ino == st.st_ino && ns[i].st_dev == st.st_dev)
                n++;
    }
    closedir(d);
    return n;
}

/* Runs a command (argv) inside nothing special and returns its output. */
static char *capture(const char *cmd)
{
    char path[PATH_MAX], line[PATH_MAX + 300];
    tmp_path(path, sizeof(path), "capture.txt");
    snprintf(line, sizeof(line), "{ %s; } > '%s' 2>&1", cmd, path);
    if (system(line) != 0)
        return NULL;
    return slurp(path);
}

static int skip_unless_root(void)
{
    if (geteuid() != 0)
        return test_skip("not root: emulated fabrics need network namespaces");
    if (access("/usr/sbin/ip", X_OK) != 0 && access("/sbin/ip", X_OK) != 0)
        return test_skip("iproute2 (ip, tc) is not installed");
    return 0;
}

TEST(bench_emulated_fabric, TEST_INTEG)
{
    char dir[PATH_MAX], out[PATH_MAX], conf[PATH_MAX + 16], prefix[16] = "";
    char made[16] = "", cmd[512], ns0[64];
    char *text = NULL;
    int rc, ret = TEST_FAILED;

    if (skip_unless_root())
        return TEST_SKIPPED;
    tmp_path(dir, sizeof(dir), "fab");
    tmp_path(out, sizeof(out), "out.txt");
    rc = incoll(out, NULL, 60, "fabric", "up", "--emulate", "--hosts", "4",
                "--radix", "2", "--dir", dir, "--link-rate", "100mbit", NULL);
    if (rc != 0) {
        show(out);
        goto down;
    }
    emu_prefix(dir, prefix, sizeof(prefix));
    snprintf(made, sizeof(made), "%s", prefix);
    if (prefix[0] == '\0') {
        fprintf(stderr, "    no emu.state in %s\n", dir);
        goto down;
    }
    /* 4 hosts + 2 leaves + root, each a namespace; an AN in each switch
     * and the manager in the root's. */
    if (ns_count_prefix(prefix) != 7 || procs_in_prefix(prefix) != 4) {
        fprintf(stderr, "    %d namespaces, %d processes in them\n",
                ns_count_prefix(prefix), procs_in_prefix(prefix));
        goto down;
    }
    snprintf(ns0, sizeof(ns0), "%s-h0", prefix);
    snprintf(cmd, sizeof(cmd),
             "ip -n %s link show dev uplink; tc -n %s qdisc "
             "show dev uplink; ip -n %s route",
             ns0, ns0, ns0);
    text = capture(cmd);
    if (text == NULL || !strstr(text, "mtu 9000") || !strstr(text, "tbf") ||
        !strstr(text, "rate 100Mbit") || !strstr(text, "10.77.0.0/16 via") ||
        strstr(text, "default via")) {
        fprintf(stderr, "    host namespace %s: %s\n", ns0, text ? text : "?");
        goto down;
    }
    free(text);
    snprintf(conf, sizeof(conf), "%s/fabric.conf", dir);
    text = slurp(conf);
    if (text == NULL || count_lines_with(text, " netns=") != 7) {
        fprintf(stderr, "    fabric.conf lacks netns= fields\n");
        goto down;
    }
    free(text);

    /* Ping-pong over the shaped links: the shaper holds it to the rate. */
    rc = incoll(out, NULL, 120, "bench", "pingpong", "--fabric", dir, "-n", "4",
                "--sizes", "1M", "--iters", "3", "--warmup", "1", NULL);
    text = slurp(out);
    if (rc != 0 || text == NULL) {
        show(out);
        goto down;
    }
    {
        const char *row = strstr(text, "\n  1048576 ");
        double avg = 0, bw = 0;
        int iters = 0;
        if (row == NULL ||
            sscanf(row, " %*d %d %lf %*f %*f %lf", &iters, &avg, &bw) != 3 ||
            bw <= 12.5 * 0.5 || bw > 12.5 * 1.05) {
            fprintf(stderr,
                    "    ping-pong at 100 Mbit/s = 12.5 MB/s gave "
                    "%g MB/s:\n%s\n",
                    bw, text);
            goto down;
        }
    }
    free(text);
    text = NULL;

    /* The collectives on it. */
    rc = incoll(out, NULL, 120, "bench", "allreduce", "--fabric", dir, "-n",
                "4", "--sizes", "8:64K", "--iters", "2", "--warmup", "1",
                "--algos", ALL_ALGOS, NULL);
    if (rc != 0) {
        show(out);
        goto down;
    }
    ret = TEST_PASSED;
down:
    free(text);
    rc = incoll(out, NULL, 60, "fabric", "down", "--dir", dir, NULL);
    if (rc != 0) {
        show(out);
        ret = TEST_FAILED;
    }
    emu_prefix(dir, prefix, sizeof(prefix));
    CHECK_MSG(prefix[0] == '\0', "emu.state still there after fabric down");
    CHECK_EQ_INT(ns_count_prefix(made), 0);
    CHECK_EQ_INT(procs_in_prefix(made), 0);
    snprintf(cmd, sizeof(cmd), "/run/incoll-emu/%s", made);
    CHECK_MSG(!made[0] || access(cmd, F_OK) != 0, "registry entry %s left",
              cmd);
    return ret;
}

/*
 * The manager on an emulated fabric: it runs in the root switch's
 * namespace, the ranks reach it from theirs, and it makes a group for
 * every communicator of comm_grid (world, 2 rows, 4 columns, the even
 * ranks), so all of them reduce at the ANs; `incoll stat` reaches it from
 * outside. `fabric down` leaves no namespace. With --no-mgr only the world
 * has a fabric group, as before.
 */
TEST(bench_emulated_mgr_groups, TEST_INTEG)
{
    char dir[PATH_MAX], out[PATH_MAX], path[PATH_MAX + 16], prog[PATH_MAX];
    char prefix[16] = "", made[16] = "";
    char *text = NULL;
    int rc, ret = TEST_FAILED;

    if (skip_unless_root())
        return TEST_SKIPPED;
    tmp_path(dir, sizeof(dir), "fab");
    tmp_path(out, sizeof(out), "out.txt");
    snprintf(prog, sizeof(prog), "%s/comm_grid", progdir());
    rc = incoll(out, NULL, 60, "fabric", "up", "--emulate", "--hosts", "8",
                "--radix", "4", "--dir", dir, NULL);
    emu_prefix(dir, made, sizeof(made));
    if (rc != 0 || made[0] == '\0') {
        show(out);
        goto down;
    }
    snprintf(path, sizeof(path), "%s/fabric.env", dir);
    text = slurp(path);
    /* 8 hosts + 2 leaves + root; 3 ANs and the manager. */
    if (text == NULL || strstr(text, "\nINCOLL_MGR=10.77.0.") == NULL ||
        ns_count_prefix(made) != 11 || procs_in_prefix(made) != 4) {
        fprintf(stderr, "    %d namespaces, %d processes in them; %s: %s\n",
                ns_count_prefix(made), procs_in_prefix(made), path,
                text ? text : "(none)");
        goto down;
    }
    free(text);

    rc = incoll(out, NULL, 120, "run", "-n", "8", "--fabric", dir, "--", prog,
                "--cols", "4", "--iters", "10", "--create", "--expect-offload",
                "all", NULL);
    text = slurp(out);
    if (rc != 0 || text == NULL || count_lines_with(text, "ok 10\n") != 8 ||
        count_lines_with(text, "offloaded 1") != 8 + 8 + 8 + 4) {
        fprintf(stderr, "    comm_grid exited %d:\n%s", rc, text ? text : "");
        goto down;
    }
    free(text);

    rc = incoll(out, NULL, 30, "stat", "--fabric", dir, NULL);
    text = slurp(out);
    {
        long long made_groups =
            text ? mgr_tool_stat_value(text, "manager ", "groups_made") : -1;
        int ans = 0;
        for (const char *p = text; p && (p = strstr(p, "\nan=")) != NULL; p++) {
            const char *r = strstr(p, " reductions=");
            ans += r && strtol(r + 12, NULL, 10) > 0;
        }
        if (rc != 0 || made_groups != 8 || ans != 3 ||
            strstr(text, "manager listen=10.77.0.") == NULL) {
            fprintf(stderr,
                    "    stat exited %d, groups_made=%lld (want 8), %d of 3 "
                    "ans reduced:\n%s",
                    rc, made_groups, ans, text ? text : "");
            goto down;
        }
    }
    ret = TEST_PASSED;
down:
    free(text);
    text = NULL;
    rc = incoll(out, NULL, 60, "fabric", "down", "--dir", dir, NULL);
    text = slurp(out);
    if (rc != 0 || text == NULL || strstr(text, "and the manager") == NULL) {
        show(out);
        ret = TEST_FAILED;
    }
    free(text);
    text = capture("ip netns list");
    CHECK_MSG(text && made[0] && strstr(text, made) == NULL,
              "namespaces of %s left: %s", made, text ? text : "?");
    free(text);
    CHECK_EQ_INT(procs_in_prefix(made), 0);
    if (ret != TEST_PASSED)
        return ret;

    /* --no-mgr: fabric.conf alone, only the world offloaded. */
    rc = incoll(out, NULL, 60, "fabric", "up", "--emulate", "--no-mgr",
                "--hosts", "4", "--radix", "2", "--dir", dir, NULL);
    emu_prefix(dir, prefix, sizeof(prefix));
    snprintf(path, sizeof(path), "%s/fabric.env", dir);
    if (rc != 0 || access(path, F_OK) == 0 || procs_in_prefix(prefix) != 3) {
        show(out);
        ret = TEST_FAILED;
    } else {
        rc = incoll(out, NULL, 120, "run", "-n", "4", "--fabric", dir, "--",
                    prog, "--cols", "2", "--iters", "5", NULL);
        text = slurp(out);
        if (rc != 0 || text == NULL ||
            count_lines_with(text, "offloaded 1") != 4 ||
            count_lines_with(text, "offloaded 0 why no manager") != 8) {
            fprintf(stderr, "    --no-mgr: comm_grid exited %d:\n%s", rc,
                    text ? text : "");
            ret = TEST_FAILED;
        }
        free(text);
    }
    rc = incoll(out, NULL, 60, "fabric", "down", "--dir", dir, NULL);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(ns_count_prefix(prefix), 0);
    return ret;
}

/* SIGKILLs the daemons of DIR: what a crash of the machine's user does. */
static void crash_daemons(const char *dir)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd),
             "for f in '%s'/*.pid; do kill -9 $(cat $f); done", dir);
    free(capture(cmd));
    usleep(200000);
}

TEST(bench_emulated_crash_cleanup, TEST_INTEG)
{
    char dir[PATH_MAX], dir2[PATH_MAX], out[PATH_MAX], cmd[PATH_MAX + 16];
    char p1[16], p2[16], p3[16];
    int rc1, rc2, rc3, rc4, n1, n1_after, n2, n3_before;

    if (skip_unless_root())
        return TEST_SKIPPED;
    tmp_path(dir, sizeof(dir), "fab");
    tmp_path(dir2, sizeof(dir2), "fab2");
    tmp_path(out, sizeof(out), "out.txt");

    /* A crash: the daemons die, the namespaces stay. `fabric up` on the
     * same directory finds and removes the stale fabric. */
    rc1 = incoll(out, NULL, 60, "fabric", "up", "--emulate", "--hosts", "2",
                 "--radix", "2", "--dir", dir, NULL);
    emu_prefix(dir, p1, sizeof(p1));
    crash_daemons(dir);
    n1 = ns_count_prefix(p1);
    rc2 = incoll(out, NULL, 60, "fabric", "up", "--emulate", "--hosts", "2",
                 "--radix", "2", "--dir", dir, NULL);
    n1_after = ns_count_prefix(p1);
    emu_prefix(dir, p2, sizeof(p2));
    n2 = ns_count_prefix(p2);

    /* A lost directory: its fabric is swept by the next `fabric up`. */
    rc3 = incoll(out, NULL, 60, "fabric", "up", "--emulate", "--hosts", "2",
                 "--radix", "2", "--dir", dir2, NULL);
    emu_prefix(dir2, p3, sizeof(p3));
    crash_daemons(dir2);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir2);
    free(capture(cmd));
    n3_before = ns_count_prefix(p3);
    incoll(out, NULL, 60, "fabric", "down", "--dir", dir, NULL);
    rc4 = incoll(out, NULL, 60, "fabric", "up", "--emulate", "--hosts", "2",
                 "--radix", "2", "--dir", dir, NULL);
    incoll(out, NULL, 60, "fabric", "down", "--dir", dir, NULL);

    CHECK(rc1 == 0 && rc2 == 0 && rc3 == 0 && rc4 == 0);
    CHECK(p1[0] && p2[0] && p3[0] && strcmp(p1, p2) != 0);
    CHECK_EQ_INT(n1, 3);       /* 2 hosts + 1 leaf, left by the crash */
    CHECK_EQ_INT(n1_after, 0); /* removed by the second `fabric up` */
    CHECK_EQ_INT(n2, 3);
    CHECK_EQ_INT(n3_before, 3);
    CHECK_EQ_INT(ns_count_prefix(p1), 0);
    CHECK_EQ_INT(ns_count_prefix(p2), 0);
    CHECK_EQ_INT(ns_count_prefix(p3), 0); /* swept */
    snprintf(cmd, sizeof(cmd), "/run/incoll-emu/%s", p3);
    CHECK(access(cmd, F_OK) != 0);
    return TEST_PASSED;
}

/* The registry entry of a fabric whose directory is below ours, or "". */
static void our_registered(char *prefix, size_t len)
{
    DIR *d = opendir("/run/incoll-emu");
    struct dirent *de;
    prefix[0] = '\0';
    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        char path[PATH_MAX], *text;
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/run/incoll-emu/%s", de->d_name);
        text = slurp(path);
        if (text && strncmp(text, test_tmpdir(), strlen(test_tmpdir())) == 0 &&
            strlen(de->d_name) < len)
            memcpy(prefix, de->d_name, strlen(de->d_name) + 1);
        free(text);
    }
    closedir(d);
}

TEST(bench_emulated_run_and_sigint, TEST_INTEG)
{
    char out[PATH_MAX], csv[PATH_MAX], prefix[32], bin[PATH_MAX];
    char *text;
    int rc, st, seen = 0;
    double deadline;
    pid_t pid;

    if (skip_unless_root())
        return TEST_SKIPPED;
    tmp_path(out, sizeof(out), "out.txt");
    tmp_path(csv, sizeof(csv), "r.csv");

    /* A whole emulated run: up, ranks in namespaces, down. */
    rc = incoll(out, NULL, 180, "bench", "allreduce", "--emulate", "-n", "4",
                "--radix", "2", "--link-rate", "200mbit", "--sizes", "8:16K",
                "--iters", "2", "--warmup", "1", "--algos", ALL_ALGOS, "--csv",
                csv, NULL);
    if (rc != 0)
        show(out);
    our_registered(prefix, sizeof(prefix));
    CHECK_MSG(prefix[0] == '\0', "fabric %s left registered", prefix);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(leftover_work_dirs(), 0);
    text = slurp(csv);
    CHECK(text && strstr(text, ",4,1,200000000\n"));
    free(text);

    /* Interrupted in the middle: everything is still removed. */
    snprintf(bin, sizeof(bin), "%s/incoll", test_bindir());
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setenv("TMPDIR", test_tmpdir(), 1);
        execl(bin, bin, "bench", "allreduce", "--emulate", "-n", "4", "--radix",
              "2", "--sizes", "8:64K", "--iters", "100000", "--algos", "inc",
              (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0);
    deadline = now_s() + 60;
    while (now_s() < deadline) {
        our_registered(prefix, sizeof(prefix));
        if (prefix[0] && ns_count_prefix(prefix) == 7 &&
            procs_in_prefix(prefix) >= 3 + 4) {
            seen = 1;
            break;
        }
        usleep(50000);
    }
    usleep(300000);
    kill(pid, SIGINT);
    deadline = now_s() + 60;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (now_s() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        usleep(20000);
    }
    if (!seen)
        show(out);
    CHECK_MSG(seen, "the ranks never ran in the emulated fabric");
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 130,
              "interrupted bench: status 0x%x, want exit 130", st);
    CHECK_EQ_INT(ns_count_prefix(prefix), 0);
    our_registered(prefix, sizeof(prefix));
    CHECK_MSG(prefix[0] == '\0', "fabric %s left registered", prefix);
    CHECK_EQ_INT(leftover_work_dirs(), 0);
    return TEST_PASSED;
}

/* ---- the MPI library's allreduce as a baseline (--algos ...,mpi) ------- */

/* NULL when `--algos mpi` can run here, else why not. */
static const char *mpi_bench_ready(void)
{
    static char why[PATH_MAX + 64];
    char worker[PATH_MAX];

    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        return "Open MPI (mpirun) is not installed";
    snprintf(worker, sizeof(worker), "%s/incoll-bench-mpi", test_bindir());
    if (access(worker, X_OK) != 0) {
        snprintf(why, sizeof(why), "%s is not built (no mpicc?)", worker);
        return why;
    }
    return NULL;
}

/* Checks the CSV of a run with algorithms algos (listed in order) over
 * nsizes sizes: a row per size and algorithm, mpi rows with latencies,
 * CPU time and, when emulated, the bytes its host's link carried (at
 * least a quarter of the vector per host: every allreduce of 3 ranks
 * sends that much); on loopback its counters are empty (not measured). */
static int check_mpi_csv(const char *csv, int nalgos, int nsizes, int emulated)
{
    char *text = slurp(csv), *line, *save = NULL;
    int rows = 0, mpi_rows = 0;

    CHECK(text != NULL);
    line = strtok_r(text, "\n", &save);
    CHECK_MSG(line && strcmp(line, CSV_HEADER) == 0, "header '%s'",
              line ? line : "");
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char *f[32];
        int nf = csv_split(line, f, 32);
        CHECK_EQ_INT(nf, 21);
        rows++;
        CHECK_EQ_INT(atoi(f[19]), emulated);
        if (strcmp(f[0], "mpi") != 0)
            continue;
        mpi_rows++;
        CHECK(atof(f[3]) > 0 && atof(f[4]) <= atof(f[3]));
        CHECK(atof(f[9]) > 0);   /* CPU time of the rank processes */
        CHECK(f[10][0] == '\0'); /* no retransmission counter */
        CHECK(f[16][0] == '\0'); /* speedups are on inc rows */
        if (emulated) {
            long bytes = atol(f[1]);
            CHECK_MSG(f[7][0] && atof(f[7]) >= bytes / 4.0 && atof(f[8]) >= 1,
                      "mpi %ld bytes: tx/host '%s', pkts '%s'", bytes, f[7],
                      f[8]);
        } else {
            CHECK_MSG(f[7][0] == '\0' && f[8][0] == '\0',
                      "mpi on loopback: tx/host '%s', pkts '%s' (want "
                      "empty)",
                      f[7], f[8]);
        }
    }
    free(text);
    CHECK_EQ_INT(rows, nalgos * nsizes);
    CHECK_EQ_INT(mpi_rows, nsizes);
    return TEST_PASSED;
}

/* On loopback: the MPI worker runs the ranks under mpirun, inc and ring
 * and mpi alternate, every result checked; a corrupted mpi result fails
 * the run. */
TEST(bench_mpi_loopback, TEST_INTEG)
{
    const char *why = mpi_bench_ready();
    char out[PATH_MAX], csv[PATH_MAX];
    char *text;
    int rc, ret;

    if (why)
        return test_skip("%s", why);
    tmp_path(out, sizeof(out), "out.txt");
    tmp_path(csv, sizeof(csv), "r.csv");
    rc = incoll(out, NULL, 180, "bench", "allreduce", "-n", "3", "--radix", "2",
                "--sizes", "8:16K", "--iters", "2", "--warmup", "1", "--algos",
                "inc,ring,mpi", "--csv", csv, NULL);
    if (rc != 0)
        show(out);
    CHECK_EQ_INT(rc, 0);
    text = slurp(out);
    CHECK(text && strstr(text, "mpi(us)  vs mpi") &&
          strstr(text, "# mpi: the MPI library's own MPI_Allreduce"));
    free(text);
    ret = check_mpi_csv(csv, 3, 12, 0);
    if (ret != TEST_PASSED)
        return ret;
    CHECK_EQ_INT(leftover_work_dirs(), 0);

    rc = incoll(out, "INCOLL_BENCH_CORRUPT=1", 120, "bench", "allreduce", "-n",
                "3", "--radix", "2", "--sizes", "4K", "--iters", "2",
                "--warmup", "1", "--algos", "mpi", NULL);
    text = slurp(out);
    CHECK_MSG(rc != 0, "a corrupted mpi result passed");
    CHECK_MSG(text && strstr(text, "WRONG RESULT: mpi allreduce") &&
                  strstr(text, "element 512 is"),
              "no verification message in: %s", text ? text : "");
    free(text);
    CHECK_EQ_INT(leftover_work_dirs(), 0);
    return TEST_PASSED;
}

/* Without Open MPI, `mpi` is a clear error (here: mpirun not in PATH). */
TEST(bench_mpi_missing, TEST_INTEG)
{
    char out[PATH_MAX];
    char *text;
    int rc;

    tmp_path(out, sizeof(out), "out.txt");
    rc = incoll(out, "PATH=/nonexistent", 30, "bench", "allreduce", "-n", "2",
                "--algos", "inc,mpi", NULL);
    text = slurp(out);
    CHECK_EQ_INT(rc, 1);
    CHECK_MSG(text && strstr(text, "--algos mpi") &&
                  strstr(text, "needs Open MPI: Open MPI's mpirun is not in "
                               "PATH"),
              "message: %s", text ? text : "");
    free(text);
    CHECK_EQ_INT(leftover_work_dirs(), 0);
    return TEST_PASSED;
}

/* On the emulated links (root): MPI's own traffic is counted on each
 * host's link, and the fabric is gone afterwards. */
TEST(bench_mpi_emulated, TEST_INTEG)
{
    const char *why = mpi_bench_ready();
    char out[PATH_MAX], csv[PATH_MAX], prefix[32];
    int rc, ret;

    if (why)
        return test_skip("%s", why);
    if (skip_unless_root())
        return TEST_SKIPPED;
    tmp_path(out, sizeof(out), "out.txt");
    tmp_path(csv, sizeof(csv), "r.csv");
    rc = incoll(out, NULL, 180, "bench", "allreduce", "--emulate", "-n", "3",
                "--radix", "2", "--link-rate", "1g", "--sizes", "64K:256K",
                "--iters", "2", "--warmup", "1", "--algos", "inc,mpi", "--csv",
                csv, NULL);
    if (rc != 0)
        show(out);
    our_registered(prefix, sizeof(prefix));
    CHECK_MSG(prefix[0] == '\0', "fabric %s left registered", prefix);
    CHECK_EQ_INT(rc, 0);
    ret = check_mpi_csv(csv, 2, 3, 1);
    if (ret != TEST_PASSED)
        show(out);
    CHECK_EQ_INT(leftover_work_dirs(), 0);
    return ret;
}

/* The tx/host column of algo's row for bytes in a --ppn table ("algo
 * bytes iters avg min max MB/s tx/host"), or -1 when there is none. */
static double ppn_tx(const char *text, const char *algo, unsigned long bytes)
{
    for (const char *p = text; p && *p;
         p = strchr(p, '\n'), p = p ? p + 1 : p) {
        char a[32];
        unsigned long b;
        double v[6];
        if (sscanf(p, "%31s %lu %lf %lf %lf %lf %lf %lf", a, &b, &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5]) == 8 &&
            strcmp(a, algo) == 0 && b == bytes)
            return v[5];
    }
    return -1;
}

/* `incoll bench allreduce --ppn`: 2 ranks on each of 2 loopback hosts,
 * node and flat mode and hierarchical recursive doubling side by side;
 * every row there (the ranks check every result), and node mode sends
 * about half of flat mode's bytes per host (one vector, not two); 20
 * operations a size, so that one resend or tail probe of a loaded machine
 * (a datagram more) does not decide the average. */
TEST(bench_loopback_ppn, TEST_INTEG)
{
    static const unsigned long sizes[] = {8, 1024, 65536};
    char out[PATH_MAX];
    char *text;
    int rc;

    tmp_path(out, sizeof(out), "out.txt");
    rc = incoll(out, NULL, 180, "bench", "allreduce", "--ppn", "2", "-n", "2",
                "--sizes", "8:64K", "--algos", "inc-node,inc-flat,rd",
                "--iters", "20", "--warmup", "1", NULL);
    text = slurp(out);
    CHECK_MSG(rc == 0 && text, "bench exited %d: %s", rc, text ? text : "");
    CHECK_MSG(strstr(text, "failed") == NULL, "a row failed: %s", text);
    for (int i = 0; i < 3; i++) {
        double tn = ppn_tx(text, "inc-node", sizes[i]);
        double tf = ppn_tx(text, "inc-flat", sizes[i]);
        CHECK_MSG(tn > 0 && tf > 0 && ppn_tx(text, "rd", sizes[i]) > 0,
                  "a row missing at %lu B: %s", sizes[i], text);
        CHECK_MSG(tn < 0.65 * tf,
                  "%lu B: node sent %.0f bytes a host, flat %.0f: %s", sizes[i],
                  tn, tf, text);
    }
    free(text);
    CHECK_EQ_INT(leftover_work_dirs(), 0);
    return TEST_PASSED;
}
