/*
 * Recovery after failed in-network operations (docs/failures.md): no rank
 * returns a result other than the correct one, members one operation
 * apart converge.
 *
 *   recovery_decision        the decision of each member (comm.h,
 *                            host_recovery_action) against a model of
 *                            blocking collectives on an AN tree whose
 *                            results reach random subsets of the members,
 *                            with random timeouts and notices: every
 *                            member returns every result exactly once
 *   recovery_decision_apart  the same decision with the members up to
 *                            five operations apart (one-way broadcasts):
 *                            round by round those behind catch up
 *   recovery_keep_sizes      what each kind keeps for members behind
 *   integ_recovery_partition real daemons and a manager: leaf l0 drops its
 *                            results (INCOLL_AGG_FAULT_DROP_RESULTS) while
 *                            it still forwards up; ranks 0-1 time out on
 *                            operation 1, ranks 2-3 get it and stop on
 *                            operation 2 seconds later: all right
 *   integ_recovery_idle_serve the partition, ranks 2-3 making no
 *                            further call: with the library's threads
 *                            they take part from outside a call
 *   integ_recovery_random    the same partition with random sleeps per
 *                            rank and iteration (shorter than the
 *                            timeout: members notified inside a call, at
 *                            different times), a few seeds
 *   integ_recovery_leaf_kill leaf l0 killed during a tight loop, at a few
 *                            points: every call right (issue 11 item 6)
 *   integ_recovery_colls_partition
 *                            the partition under each native collective
 *                            (operation 1's root is behind): ranks 0-1
 *                            take operation 1's result from what ranks
 *                            2-3 kept, every call right
 *   integ_recovery_bcast_apart the root AN or a leaf killed while a late
 *                            rank is 3-4 one-way broadcasts behind: it
 *                            takes each from the others, in order
 *   integ_recovery_colls_kill a leaf, a middle and the root AN of an
 *                            8-host, 3-level tree killed while all seven
 *                            collectives run natively in turn: every call
 *                            of every rank right, in bounded time
 */
#include "integ.h"

#include "incoll.h"

#include "common/mgr_proto.h"
#include "host/comm.h"
#include "host/inc_coll.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the decision, against a model ---- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The result of operation k (what the AN computes). */
static uint64_t result_of(uint64_t k)
{
    return k * 0x2545f4914f6cdd1dull + 17;
}

#define MODEL_MAX 16
#define MODEL_OPS 40

typedef struct {
    uint64_t mine; /* the operation it is at */
    int started;
    int has_saved;
    uint64_t saved_op;
    uint64_t saved; /* its kept result */
    uint64_t got[MODEL_OPS];
    int ngot;
} member_t;

/*
 * One run of the model: n members call MODEL_OPS allreduces. An operation
 * on the tree completes only when every member contributed; its result then
 * reaches a random subset of the members (the rest time out on it); those
 * that got it return it, keep it and go on to the next operation, which
 * they may or may not have started when the failure stops them (a notice
 * from the manager, or their own timeout). Then all recover with
 * host_recovery_action() and the model's transfer: fetchers take the
 * servers' copy. Returns 0 when every member returned exactly the results
 * 0..MODEL_OPS-1 in order.
 */
static int model_run(uint64_t seed, int n)
{
    member_t m[MODEL_MAX];
    uint64_t rs = seed, op = 0;

    memset(m, 0, sizeof(m));
    while (op < MODEL_OPS) {
        uint64_t lo = UINT64_MAX, hi = 0;
        int ndel = 0, fail, serve_seen = 0;
        uint64_t serve_val = 0;
        host_rec_action_t act[MODEL_MAX];
        /* Everybody is at op here, having started it. */
        for (int i = 0; i < n; i++) {
            m[i].mine = op;
            m[i].started = 1;
        }
        /* Who gets the result: all (usually), a subset or nobody. */
        fail = rng_next(&rs) % 3 == 0;
        for (int i = 0; i < n; i++) {
            int del = !fail || rng_next(&rs) % 2;
            if (!del)
                continue;
            ndel++;
            m[i].got[m[i].ngot++] = result_of(op);
            m[i].has_saved = 1;
            m[i].saved_op = op;
            m[i].saved = result_of(op);
            m[i].mine = op + 1;
            /* Inside the next one, or noticed the failure before it. */
            m[i].started = (int)(rng_next(&rs) % 2);
        }
        if (!fail) {
            op++;
            continue;
        }
        if (ndel == n && op + 1 >= MODEL_OPS)
            break; /* the failure comes after the last call */
        for (int i = 0; i < n; i++) {
            lo = m[i].mine < lo ? m[i].mine : lo;
            hi = m[i].mine > hi ? m[i].mine : hi;
        }
        for (int i = 0; i < n; i++) {
            act[i] = host_recovery_action(lo, hi, m[i].mine, m[i].started,
                                          m[i].has_saved, m[i].saved_op);
            CHECK_MSG(act[i] != HOST_REC_FAIL,
                      "seed %llu member %d at %llu in %llu..%llu: fail",
                      (unsigned long long)seed, i,
                      (unsigned long long)m[i].mine, (unsigned long long)lo,
                      (unsigned long long)hi);
            CHECK((act[i] == HOST_REC_REDO) == (lo == hi));
            if (act[i] == HOST_REC_SERVE) {
                CHECK(!serve_seen || serve_val == m[i].saved);
                serve_seen = 1;
                serve_val = m[i].saved;
            }
        }
        for (int i = 0; i < n; i++) {
            if (act[i] != HOST_REC_FETCH)
                continue;
            CHECK(serve_seen);
            m[i].got[m[i].ngot++] = serve_val;
            m[i].has_saved = 1;
            m[i].saved_op = lo;
            m[i].saved = serve_val;
        }
        op = hi; /* everybody runs operation hi next (again or first) */
    }
    for (int i = 0; i < n; i++) {
        CHECK_MSG(m[i].ngot == MODEL_OPS, "seed %llu member %d: %d results",
                  (unsigned long long)seed, i, m[i].ngot);
        for (int k = 0; k < MODEL_OPS; k++)
            CHECK_MSG(m[i].got[k] == result_of((uint64_t)k),
                      "seed %llu member %d: call %d returned another result",
                      (unsigned long long)seed, i, k);
    }
    return 0;
}

TEST(recovery_decision, TEST_UNIT)
{
    uint64_t rs = 42;
    /* The decision alone: what it may never do. */
    for (int t = 0; t < 100000; t++) {
        uint64_t lo = rng_next(&rs) % 6, hi = lo + rng_next(&rs) % 4;
        uint64_t mine = rng_next(&rs) % 10, saved_op = rng_next(&rs) % 10;
        int started = (int)(rng_next(&rs) % 2), has = (int)(rng_next(&rs) % 2);
        host_rec_action_t a =
            host_recovery_action(lo, hi, mine, started, has, saved_op);
        if (a == HOST_REC_REDO)
            CHECK(lo == hi && mine == lo);
        if (a == HOST_REC_FETCH)
            CHECK(hi > lo && mine == lo);
        if (a == HOST_REC_SERVE)
            CHECK(hi > lo && mine > lo && mine <= hi && has && saved_op == lo);
        if (mine < lo || mine > hi)
            CHECK(a == HOST_REC_FAIL);
    }
    CHECK(host_recovery_action(3, 2, 3, 1, 1, 2) == HOST_REC_FAIL);
    /* Behind without having started: a broadcast ahead of its round
     * completed at members before this one started it. */
    CHECK(host_recovery_action(4, 5, 4, 0, 1, 3) == HOST_REC_FETCH);
    CHECK(host_recovery_action(4, 5, 5, 1, 1, 3) == HOST_REC_FAIL);
    CHECK(host_recovery_action(4, 5, 5, 0, 0, 4) == HOST_REC_FAIL);
    /* Several apart (one-way broadcasts): those behind fetch lo, every
     * member past it serves it, from wherever it is. */
    CHECK(host_recovery_action(4, 8, 4, 0, 0, 0) == HOST_REC_FETCH);
    CHECK(host_recovery_action(4, 8, 6, 1, 1, 4) == HOST_REC_SERVE);
    CHECK(host_recovery_action(4, 8, 8, 0, 1, 4) == HOST_REC_SERVE);
    CHECK(host_recovery_action(4, 8, 7, 1, 1, 6) == HOST_REC_FAIL);
    CHECK(host_recovery_action(4, 8, 9, 1, 1, 4) == HOST_REC_FAIL);
    /* Against the model, many runs. */
    for (uint64_t seed = 1; seed <= 3000; seed++) {
        int n = 2 + (int)(seed % (MODEL_MAX - 1));
        if (model_run(seed, n) != 0)
            return TEST_FAILED;
    }
    return TEST_PASSED;
}

/*
 * What each member keeps for a recovery (host_comm_keep_sizes), 4 ranks,
 * root 2: the members behind can get their part only from these bytes
 * (docs/failures.md), so each kind keeps exactly what its table says.
 */
/*
 * Members several operations apart (one-way broadcasts completed at some
 * members while another had not started them): a failure stops member i
 * at pos[i], in lo..lo+5, having kept every result before its position
 * back to lo. Rounds of the recovery (host_comm_recover_coll's): each
 * round those at the lowest position fetch it from every member ahead,
 * which all serve the same kept result, return it and move on one; the
 * rest wait. Every member returns each of lo..hi-1 exactly once, in
 * order, and all end at hi, where the usual end (redo) takes over.
 */
TEST(recovery_decision_apart, TEST_UNIT)
{
    uint64_t rs = 7;
    for (int t = 0; t < 20000; t++) {
        int n = 2 + (int)(rng_next(&rs) % 7), got[8] = {0};
        uint64_t lo0 = 10 + rng_next(&rs) % 30, pos[8], hi = 0, rounds = 0;
        for (int i = 0; i < n; i++)
            pos[i] = lo0 + rng_next(&rs) % 6;
        pos[rng_next(&rs) % (uint64_t)n] = lo0; /* someone is behind */
        for (int i = 0; i < n; i++) {
            hi = pos[i] > hi ? pos[i] : hi;
            got[i] = (int)(pos[i] - lo0); /* returned before the failure */
        }
        for (;;) {
            uint64_t lo = UINT64_MAX, h = 0, val = 0;
            int nserve = 0, nfetch = 0;
            for (int i = 0; i < n; i++) {
                lo = pos[i] < lo ? pos[i] : lo;
                h = pos[i] > h ? pos[i] : h;
            }
            CHECK(h == hi);
            if (lo == hi)
                break;
            CHECK(rounds++ < 6);
            for (int i = 0; i < n; i++) {
                /* Member i kept every operation from lo0 to pos[i] - 1. */
                int has = pos[i] > lo;
                host_rec_action_t a = host_recovery_action(
                    lo, hi, pos[i], (int)(rng_next(&rs) % 2), has, lo);
                CHECK_MSG(a != HOST_REC_FAIL, "member %d at %llu in %llu..%llu",
                          i, (unsigned long long)pos[i], (unsigned long long)lo,
                          (unsigned long long)hi);
                if (a == HOST_REC_SERVE) {
                    CHECK(!nserve || val == result_of(lo));
                    val = result_of(lo);
                    nserve++;
                }
                nfetch += a == HOST_REC_FETCH;
                CHECK((a == HOST_REC_FETCH) == (pos[i] == lo));
            }
            CHECK(nserve > 0 && nfetch > 0);
            for (int i = 0; i < n; i++) {
                if (pos[i] != lo)
                    continue;
                /* Returns lo's result, the next after what it returned. */
                CHECK(val == result_of(lo0 + (uint64_t)got[i]));
                got[i]++;
                pos[i]++;
            }
        }
        for (int i = 0; i < n; i++)
            CHECK(pos[i] == hi);
    }
    return TEST_PASSED;
}

TEST(recovery_keep_sizes, TEST_UNIT)
{
    /* kind, count, dtype; per rank: result bytes, input bytes (root 2) */
    static const struct {
        host_coll_kind_t kind;
        size_t count;
        incoll_dtype_t dt;
        size_t res[2], in[2]; /* [0] the root, [1] another rank */
    } want[] = {
        {HOST_COLL_ALLREDUCE, 10, INCOLL_INT32, {40, 40}, {0, 0}},
        {HOST_COLL_BCAST, 10, INCOLL_UINT8, {10, 10}, {0, 0}},
        {HOST_COLL_ALLGATHER, 10, INCOLL_UINT8, {40, 40}, {0, 0}},
        {HOST_COLL_BARRIER, 0, INCOLL_UINT8, {0, 0}, {0, 0}},
        {HOST_COLL_REDUCE, 10, INCOLL_FLOAT64, {0, 0}, {0, 80}},
        {HOST_COLL_GATHER, 10, INCOLL_UINT8, {0, 0}, {0, 10}},
        {HOST_COLL_SCATTER, 10, INCOLL_UINT8, {0, 0}, {40, 0}},
        {HOST_COLL_REDUCE_SCATTER, 10, INCOLL_INT16, {0, 0}, {80, 80}},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        for (int who = 0; who < 2; who++) {
            host_rec_call_t c = {
                (int)want[i].kind, 2,    want[i].count, want[i].dt,
                INCOLL_OP_SUM,     NULL, NULL};
            size_t rb = 99, ib = 99;
            host_comm_keep_sizes(&c, who == 0 ? 2 : 1, 4, &rb, &ib);
            CHECK_MSG(rb == want[i].res[who] && ib == want[i].in[who],
                      "kind %d, %s: keeps %zu + %zu bytes, want %zu + %zu",
                      (int)want[i].kind, who == 0 ? "root" : "non-root", rb, ib,
                      want[i].res[who], want[i].in[who]);
        }
    }
    return TEST_PASSED;
}

/* ---- real daemons ---- */

/* A manager on a 4-ary 2-level fat-tree and its six ANs (l0..l3, s0, s1);
 * l0 (hosts h0, h1) gets l0_env. */
typedef struct {
    char dir[PATH_MAX];
    char secret[PATH_MAX + 16];
    char addr[64];
    pid_t an[6];
} fab_t;

static const char *const an_names[6] = {"l0", "l1", "l2", "l3", "s0", "s1"};

static int fab_up(fab_t *f, const char *name, char **l0_env)
{
    char bin[PATH_MAX], topo[PATH_MAX + 16], port[PATH_MAX + 16];
    char log[PATH_MAX + 32];
    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "%s/%s", test_tmpdir(), name);
    mkdir(f->dir, 0755);
    snprintf(f->secret, sizeof(f->secret), "%s/secret", f->dir);
    snprintf(topo, sizeof(topo), "%s/topology", f->dir);
    snprintf(port, sizeof(port), "%s/port", f->dir);
    snprintf(log, sizeof(log), "%s/mgr.log", f->dir);
    if (mgr_secret_generate(f->secret) != INCOLL_OK)
        return -1;
    snprintf(bin, sizeof(bin), "%s/incoll-mgr", test_bindir());
    {
        char *argv[] = {bin,           "--radix",  "4",
                        "--levels",    "2",        "--write-topology",
                        topo,          "--listen", "127.0.0.1:0",
                        "--port-file", port,       "--secret",
                        f->secret,     NULL};
        char *env[] = {"INCOLL_LOG_LEVEL=info", NULL};
        if (spawn(log, argv, env) <= 0)
            return -1;
    }
    for (int i = 0; i < 250 && f->addr[0] == '\0'; i++) {
        char *text = slurp(port);
        size_t len = strlen(text);
        if (len > 0 && text[len - 1] == '\n') {
            text[len - 1] = '\0';
            snprintf(f->addr, sizeof(f->addr), "%s", text);
        }
        free(text);
        if (f->addr[0] == '\0')
            sleep_s(0.02);
    }
    if (f->addr[0] == '\0')
        return -1;
    snprintf(bin, sizeof(bin), "%s/incoll-agg", test_bindir());
    for (int i = 0; i < 6; i++) {
        char *argv[] = {bin,        (char *)"--name", (char *)an_names[i],
                        "--listen", "127.0.0.1:0",    "--mgr",
                        f->addr,    "--secret",       f->secret,
                        NULL};
        snprintf(log, sizeof(log), "%s/an-%s.log", f->dir, an_names[i]);
        f->an[i] = spawn(log, argv, i == 0 ? l0_env : NULL);
        if (f->an[i] <= 0)
            return -1;
    }
    /* The ANs register within a moment; a job started earlier runs on the
     * hosts, which the tests would see (offloaded=0). */
    sleep_s(0.8);
    return 0;
}

typedef struct {
    int n;
    pid_t pid[8];
    char log[8][PATH_MAX + 32];
} job_t;

/* Starts n ranks of recover_check on h0..h(n-1) with args and the
 * libincoll timeouts op_ms. */
static int job_start(fab_t *f, job_t *j, const char *name, int n, int op_ms,
                     char **args)
{
    char bin[PATH_MAX];
    char *argv[20];
    int na = 0;
    const char *pd = getenv("INCOLL_TEST_PROGDIR");
    snprintf(bin, sizeof(bin), "%s/recover_check",
             pd && *pd ? pd : "build/tests");
    argv[na++] = bin;
    for (int i = 0; args[i] && na < 19; i++)
        argv[na++] = args[i];
    argv[na] = NULL;
    j->n = n;
    for (int r = 0; r < n; r++) {
        char e[10][PATH_MAX + 64];
        char *env[11];
        snprintf(e[0], sizeof(e[0]), "INCOLL_MGR=%s", f->addr);
        snprintf(e[1], sizeof(e[1]), "INCOLL_SECRET_FILE=%s", f->secret);
        snprintf(e[2], sizeof(e[2]), "INCOLL_JOB=%s", name);
        snprintf(e[3], sizeof(e[3]), "INCOLL_RANK=%d", r);
        snprintf(e[4], sizeof(e[4]), "INCOLL_SIZE=%d", n);
        snprintf(e[5], sizeof(e[5]), "INCOLL_HOST=h%d", r);
        snprintf(e[6], sizeof(e[6]), "INCOLL_LOG_LEVEL=info");
        snprintf(e[7], sizeof(e[7]), "INCOLL_FABRIC=");
        snprintf(e[8], sizeof(e[8]), "INCOLL_MGR_OP_TIMEOUT_MS=%d", op_ms);
        snprintf(e[9], sizeof(e[9]), "INCOLL_TIMEOUT_MS=%d", op_ms);
        for (int k = 0; k < 10; k++)
            env[k] = e[k];
        env[10] = NULL;
        snprintf(j->log[r], sizeof(j->log[r]), "%s/%s-%d.log", f->dir, name, r);
        j->pid[r] = spawn(j->log[r], argv, env);
        if (j->pid[r] <= 0)
            return -1;
    }
    return 0;
}

/*
 * Waits for every rank. Never a wrong result (exit 1 or a WRONG line) in
 * any case; with all_ok, every call right too. Counts the ranks whose log
 * has needle into *nfound_p (when not NULL).
 */
static int job_check(job_t *j, double timeout_s, int all_ok, const char *needle,
                     int *nfound_p)
{
    double end = now_s() + timeout_s;
    int ret = 0, nfound = 0;
    for (int r = 0; r < j->n; r++) {
        double left = end - now_s();
        int st = wait_pid(j->pid[r], left > 0 ? left : 0.1);
        char *out = slurp(j->log[r]);
        int wrong = st == 1 || strstr(out, "WRONG") != NULL;
        if (wrong || st < 0 || strstr(out, "summary ") == NULL ||
            (all_ok && st != 0)) {
            fprintf(stderr, "    rank %d: exit %d%s; log %s:\n%.3000s\n", r, st,
                    wrong ? " (a WRONG result)" : "", j->log[r], out);
            ret = -1;
        }
        if (needle && strstr(out, needle))
            nfound++;
        free(out);
    }
    if (nfound_p)
        *nfound_p = nfound;
    return ret;
}

static int prerequisites(void)
{
    char path[PATH_MAX + 32];
    const char *need[] = {"incoll-mgr", "incoll-agg"};
    const char *pd = getenv("INCOLL_TEST_PROGDIR");
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", test_bindir(), need[i]);
        if (access(path, X_OK) != 0)
            return test_skip("%s not built", path);
    }
    snprintf(path, sizeof(path), "%s/recover_check",
             pd && *pd ? pd : "build/tests");
    if (access(path, X_OK) != 0)
        return test_skip("%s not built", path);
    return TEST_PASSED;
}

/*
 * Issue 11 item 1: l0 delivers operation 0 to ranks 0-1, then drops its
 * results while it still forwards their contributions up. Ranks 0-1 time
 * out on operation 1 (after 1.5 s); ranks 2-3 got it and, sleeping, reach
 * operation 2 a second later: one operation apart, seconds apart. Ranks
 * 0-1 must get operation 1's result from ranks 2-3, everybody goes on on
 * a new group, and every call of every rank is right.
 */
static int partition_coll(const char *name, const char *sleep_ms,
                          const char *jitter_ms, const char *seed, int iters,
                          const char *coll, int op_ms);

static int partition(const char *name, const char *sleep_ms,
                     const char *jitter_ms, const char *seed, int iters)
{
    return partition_coll(name, sleep_ms, jitter_ms, seed, iters, "allreduce",
                          1500);
}

static int partition_coll(const char *name, const char *sleep_ms,
                          const char *jitter_ms, const char *seed, int iters,
                          const char *coll, int op_ms)
{
    fab_t f;
    job_t j;
    char drop_env[] = "INCOLL_AGG_FAULT_DROP_RESULTS=1";
    char *l0_env[] = {drop_env, NULL};
    char it[16];
    char *args[] = {"--iters",     it,
                    "--count",     "300",
                    "--sleep-ms",  (char *)sleep_ms,
                    "--jitter-ms", (char *)jitter_ms,
                    "--seed",      (char *)seed,
                    "--coll",      (char *)coll,
                    NULL};
    int fetched = 0, rebuilt = 0, started;
    snprintf(it, sizeof(it), "%d", iters);
    CHECK(fab_up(&f, name, l0_env) == 0);
    /* The partition needs the members' calls where the blocking calls put
     * them: a member that returned early from a rooted collective
     * (INCOLL_EARLY_MAX) sleeps while its operation still recovers, and
     * reaches its next call that much ahead of the others, here more
     * than the 800 ms timeout (docs/failures.md); so does a non-root whose
     * broadcast data came ahead of the round (INCOLL_BCAST_AHEAD).
     * integ_recovery_colls_kill runs the failures with both. */
    setenv("INCOLL_EARLY_MAX", strcmp(coll, "allreduce") ? "0" : "64K", 1);
    setenv("INCOLL_BCAST_AHEAD", strcmp(coll, "allreduce") ? "0" : "16K", 1);
    started = job_start(&f, &j, name, 4, op_ms, args);
    unsetenv("INCOLL_EARLY_MAX");
    unsetenv("INCOLL_BCAST_AHEAD");
    CHECK(started == 0);
    CHECK(job_check(&j, 60, 1, "(fetch)", &fetched) == 0);
    for (int r = 0; r < 4; r++) {
        char *out = slurp(j.log[r]);
        rebuilt += strstr(out, "rebuilt on group") != NULL;
        CHECK_MSG(strstr(out, "summary ok=") != NULL, "%s", out);
        free(out);
    }
    /* Ranks 0-1 took operation 1 from ranks 2-3 (unless, with jitter, the
     * ranks happened to stop at one operation, or a loaded machine made
     * all time out on operation 0 first: then the fault, which hits the
     * first group only, is gone), on a new group. */
    if (jitter_ms[0] == '0' && fetched != 2) {
        int early = 0;
        for (int r = 0; r < 4; r++) {
            char *out = slurp(j.log[r]);
            early += strstr(out, "operations 0..0") != NULL;
            free(out);
        }
        CHECK_MSG(early > 0, "%d ranks fetched a result", fetched);
        fprintf(stderr, "    note: all ranks recovered on operation 0 (a "
                        "slow machine): the partition did not happen\n");
    }
    CHECK_MSG(rebuilt == 4, "%d ranks on a new group", rebuilt);
    return TEST_PASSED;
}

TEST(integ_recovery_partition, TEST_INTEG)
{
    int r = prerequisites();
    if (r != TEST_PASSED)
        return r;
    r = partition("partition", "2500", "0", "1", 4);
    stop_all();
    return r;
}

/*
 * The partition, but ranks 2-3 make their next call only long after the
 * one ranks 0-1 lack, later than ranks 0-1 wait for them (as a program
 * whose next step waits for ranks 0-1 outside the library, in an MPI
 * collective libincoll does not run, would never make it). With the library's
 * threads (INCOLL_PROGRESS_THREAD=1, as libincoll_mpi runs it) ranks 2-3 take
 * part in the recovery from outside any call: ranks 0-1 get operation 1's
 * result from them, every call right. Without that, ranks 0-1 would wait
 * for the next call of ranks 2-3 and give up first.
 */
TEST(integ_recovery_idle_serve, TEST_INTEG)
{
    fab_t f;
    job_t j;
    char drop_env[] = "INCOLL_AGG_FAULT_DROP_RESULTS=1";
    char *l0_env[] = {drop_env, NULL};
    char *args[] = {"--iters",    "3",    "--count", "300",
                    "--sleep-ms", "3000", NULL};
    int fetched = 0, served = 0, started;
    int r = prerequisites();
    if (r != TEST_PASSED)
        return r;
    CHECK(fab_up(&f, "idle", l0_env) == 0);
    setenv("INCOLL_PROGRESS_THREAD", "1", 1);
    /* Ranks 0-1 give up on operation 1 after 1 s and wait at most 1.5 s
     * more for the others in the recovery: less than the 3 s ranks 2-3
     * spend outside the library before their next call. */
    setenv("INCOLL_WAIT_MS", "1500", 1);
    started = job_start(&f, &j, "idle", 4, 1000, args);
    unsetenv("INCOLL_PROGRESS_THREAD");
    unsetenv("INCOLL_WAIT_MS");
    CHECK(started == 0);
    r = job_check(&j, 60, 1, "(fetch)", &fetched) == 0 ? TEST_PASSED
                                                       : TEST_FAILED;
    for (int k = 2; k < 4; k++) {
        char *out = slurp(j.log[k]);
        served += strstr(out, "the library takes part for it") != NULL;
        free(out);
    }
    stop_all();
    CHECK(r == TEST_PASSED);
    CHECK_MSG(fetched == 2, "%d ranks fetched operation 1's result", fetched);
    CHECK_MSG(served == 2, "%d of ranks 2-3 took part outside a call", served);
    return TEST_PASSED;
}

TEST(integ_recovery_random, TEST_INTEG)
{
    static const char *const seeds[] = {"11", "12", "13"};
    int r = prerequisites();
    if (r != TEST_PASSED)
        return r;
    for (int i = 0; i < 3 && r == TEST_PASSED; i++) {
        char name[32];
        snprintf(name, sizeof(name), "random-%s", seeds[i]);
        r = partition(name, "100", "600", seeds[i], 4);
        stop_all();
    }
    return r;
}

/* Issue 11 item 6: l0 killed while the ranks run allreduces back to back,
 * at a few points: the members may be one operation apart; every call of
 * every rank must be right (the job ends on the hosts: h0 and h1 have no
 * other leaf). */
TEST(integ_recovery_leaf_kill, TEST_INTEG)
{
    static const double when[] = {0.0, 0.037, 0.171};
    int r = prerequisites();
    if (r != TEST_PASSED)
        return r;
    for (int i = 0; i < 3 && r == TEST_PASSED; i++) {
        fab_t f;
        job_t j;
        char name[32];
        char *args[] = {"--iters", "6000",       "--count", "64", "--sleep-ms",
                        "0",       "--progress", "500",     NULL};
        int ok;
        snprintf(name, sizeof(name), "leafkill-%d", i);
        ok = fab_up(&f, name, NULL) == 0 &&
             job_start(&f, &j, name, 4, 1000, args) == 0;
        if (ok) {
            /* Once the loop runs (iteration 1000 on rank 0). */
            double end = now_s() + 30;
            char *out = slurp(j.log[0]);
            while (strstr(out, "progress iter 1000") == NULL &&
                   strstr(out, "summary") == NULL && now_s() < end) {
                free(out);
                sleep_s(0.005);
                out = slurp(j.log[0]);
            }
            free(out);
            sleep_s(when[i]);
            kill(f.an[0], SIGKILL);
            wait_pid(f.an[0], 5);
            int nrec = 0, nfetch = 0;
            ok = job_check(&j, 60, 1, "recovered after a failure", &nrec) == 0;
            /* The kill came mid-run: every rank recovered. */
            if (ok && nrec != 4) {
                fprintf(stderr, "    %d ranks recovered\n", nrec);
                ok = 0;
            }
            for (int k = 0; k < 4; k++) {
                char *text = slurp(j.log[k]);
                nfetch += strstr(text, "(fetch)") != NULL;
                free(text);
            }
            fprintf(stderr,
                    "    kill %.3f s after iteration 1000: %d ranks "
                    "took a result from others\n",
                    when[i], nfetch);
        }
        stop_all();
        if (!ok) {
            fprintf(stderr, "    kill %d, %.3f s after iteration 1000\n", i,
                    when[i]);
            r = TEST_FAILED;
        }
    }
    return r;
}

/*
 * The partition under each native collective, 100 int64 per rank (one
 * segment: l0's third result packet is operation 1's): ranks 0-1 are
 * behind on operation 1, whose root (rank 1) is among them, so each kind
 * goes through its way of carrying a result (docs/failures.md): a
 * broadcast's and an allgather's kept copies, the kept inputs of a
 * reduce's, a gather's and a reduce_scatter's members ahead, a scatter
 * root's vector (the root is behind: its live input), nothing for a
 * barrier.
 */
TEST(integ_recovery_colls_partition, TEST_INTEG)
{
    static const char *const colls[] = {"reduce",        "bcast",  "barrier",
                                        "allgather",     "gather", "scatter",
                                        "reduce_scatter"};
    int r = prerequisites();
    if (r != TEST_PASSED)
        return r;
    for (int i = 0; i < 7 && r == TEST_PASSED; i++) {
        char name[48];
        snprintf(name, sizeof(name), "part-%s", colls[i]);
        r = partition_coll(name, "1400", "0", "1", 3, colls[i], 800);
        stop_all();
        if (r != TEST_PASSED)
            fprintf(stderr, "    under %s\n", colls[i]);
    }
    return r;
}

/*
 * An AN of an 8-host tree of radix 2 (leaves l0..l3, middle s2-0 and
 * s2-1, root) killed while the ranks run the seven collectives and the
 * allreduce in turn (`recover_check --coll mix`, natively in the
 * network) with a manager: every call of every rank right, the job done
 * in bounded time, every rank recovered (on the hosts: the fabric has no
 * other tree). Where the kill falls decides whether members end up one
 * operation apart (some fetch) or together (all redo); both are right.
 */
/* For a job in dir: its output file (dir.out, PATH_MAX + 16 bytes), the
 * incoll command and recover_check (PATH_MAX bytes each). */
static void job_paths(const char *dir, char *log, char *bin, char *prog)
{
    snprintf(log, PATH_MAX + 16, "%s.out", dir);
    snprintf(bin, PATH_MAX, "%s/incoll", test_bindir());
    snprintf(prog, PATH_MAX, "%s/recover_check", progdir());
}

/*
 * Runs argv (`incoll run` of recover_check) on an 8-host fabric of radix
 * 2 brought up in dir, its output in log, with 1 s timeouts, info lines
 * and broadcasts ahead of their round (off by default: on, so that a
 * failure also falls while non-roots are done before their round); once
 * the output has needle (or a summary, or after 60 s), waits delay
 * seconds and kills AN victim. Returns the job's output (to free), or
 * NULL when the fabric or the job did not start; *st_p the job's exit
 * status, *an_p the AN's pid (0 when it had none).
 */
static char *run_and_kill(const char *dir, const char *log, char **argv,
                          const char *needle, double delay, const char *victim,
                          int *st_p, pid_t *an_p)
{
    char *env[] = {"INCOLL_MGR_OP_TIMEOUT_MS=1000", "INCOLL_TIMEOUT_MS=1000",
                   "INCOLL_LOG_LEVEL=info", "INCOLL_BCAST_AHEAD=16K", NULL};
    char pidf[PATH_MAX + 64], *out = NULL, *pidtext;
    double end;
    pid_t run;

    *an_p = 0;
    if (test_fabric_up(dir, 8, 2) != 0)
        return NULL;
    run = spawn(log, argv, env);
    if (run <= 0) {
        test_fabric_down(dir);
        return NULL;
    }
    end = now_s() + 60;
    do {
        free(out);
        sleep_s(0.005);
        out = slurp(log);
    } while (strstr(out, needle) == NULL && strstr(out, "summary") == NULL &&
             now_s() < end);
    free(out);
    sleep_s(delay);
    snprintf(pidf, sizeof(pidf), "%s/%s.pid", dir, victim);
    pidtext = slurp(pidf);
    *an_p = (pid_t)atoi(pidtext);
    free(pidtext);
    if (*an_p > 0)
        kill(*an_p, SIGKILL);
    *st_p = wait_pid(run, 100);
    test_fabric_down(dir);
    return slurp(log);
}

static int colls_kill(const char *victim, double delay)
{
    char dir[PATH_MAX], log[PATH_MAX + 16], bin[PATH_MAX], prog[PATH_MAX];
    char *argv[] = {bin,      "run",        "-n",      "8",    "--fabric",
                    dir,      "--timeout",  "90",      "--",   prog,
                    "--coll", "mix",        "--iters", "2400", "--count",
                    "100",    "--progress", "200",     NULL};
    char *out;
    pid_t an;
    int st, n = 0, nrec = 0, ret = TEST_PASSED;

    snprintf(dir, sizeof(dir), "%s/colls-kill-%s", test_tmpdir(), victim);
    job_paths(dir, log, bin, prog);
    /* Once the loop runs: iteration 400 on some rank. */
    out = run_and_kill(dir, log, argv, "progress iter 400", delay, victim, &st,
                       &an);
    if (out == NULL)
        return TEST_FAILED;
    for (const char *p = out; (p = strstr(p, "summary ok=2400 wrong=0 "
                                             "errors=0")) != NULL;
         p++)
        n++;
    for (const char *p = out; (p = strstr(p, "recovered after a failure")); p++)
        nrec++;
    if (an <= 0 || st != 0 || n != 8 || strstr(out, "WRONG") || nrec != 8) {
        fprintf(stderr,
                "    %s killed %.3f s after iteration 400: exit %d, %d ranks "
                "all right, %d recovered; %s:\n%.3000s\n",
                victim, delay, st, n, nrec, log, out);
        ret = TEST_FAILED;
    } else {
        const char *f = strstr(out, "(fetch)");
        fprintf(stderr, "    %s killed %.3f s after iteration 400: %s\n",
                victim, delay,
                f ? "members one operation apart" : "all at one operation");
    }
    free(out);
    return ret;
}

TEST(integ_recovery_colls_kill, TEST_INTEG)
{
    static const char *const victims[] = {"l1", "s2-0", "root"};
    static const double delays[] = {0.0, 0.011, 0.003};
    int r = prerequisites();
    if (r != TEST_PASSED)
        return r;
    for (int i = 0; i < 3 && r == TEST_PASSED; i++) {
        r = colls_kill(victims[i], delays[i]);
        stop_all();
    }
    return r;
}

/*
 * A broadcast ahead of its round completes at members before others have
 * called it (docs/failures.md). Rank 5 is late for broadcast 20 (root 4):
 * the others have its data and wait in broadcast 21 for its round; the
 * root AN is killed then, and rank 5 hears of the failure before it
 * calls, so it recovers at the start of its call, behind the others, and
 * must return broadcast 20's data taken from them (it once returned
 * INCOLL_ERR_GROUP_FAILED there). Every call of every rank right.
 */
TEST(integ_recovery_bcast_late_member, TEST_INTEG)
{
    char dir[PATH_MAX], log[PATH_MAX + 16], bin[PATH_MAX], prog[PATH_MAX];
    char *argv[] = {bin,      "run",       "-n",        "8",  "--fabric",
                    dir,      "--timeout", "60",        "--", prog,
                    "--coll", "bcast",     "--iters",   "40", "--count",
                    "16",     "--late",    "5:20:1500", NULL};
    char *out;
    const char *fetch, *serve;
    pid_t an;
    int r = prerequisites(), st, n = 0;

    if (r != TEST_PASSED)
        return r;
    snprintf(dir, sizeof(dir), "%s/bcast-late", test_tmpdir());
    job_paths(dir, log, bin, prog);
    /* The others get broadcast 20's data and wait in 21 meanwhile. */
    out = run_and_kill(dir, log, argv, "late iter 20", 0.3, "root", &st, &an);
    if (out == NULL)
        return TEST_FAILED;
    for (const char *p = out;
         (p = strstr(p, "summary ok=40 wrong=0 errors=0")) != NULL; p++)
        n++;
    /* Rank 5 recovers either at the start of its call, behind the others
     * (fetch), or, when its watcher thread sees the failure while it
     * sleeps, on its behalf with no call of its own (serve; docs/failures.md,
     * idle members); either way every call of every rank is right. */
    fetch = strstr(out, "incoll rank 5: info: comm 0000000000000000: "
                        "recovered after a failure: members at operations "
                        "20..21, this one at 20 (fetch)");
    serve = strstr(out, "incoll rank 5: info: comm 0000000000000000: "
                        "recovered after a failure: members at operations ");
    if (serve != NULL) {
        const char *eol = strchr(serve, '\n');
        const char *tag = strstr(serve, "(serve)");
        if (tag == NULL || (eol != NULL && tag > eol))
            serve = NULL;
    }
    if (an <= 0 || st != 0 || n != 8 || strstr(out, "WRONG") ||
        (fetch == NULL && serve == NULL)) {
        fprintf(stderr,
                "    exit %d, %d ranks all right (rank 5 must recover, "
                "fetching operation 20 or serving idle); %s:\n%.3000s\n",
                st, n, log, out);
        r = TEST_FAILED;
    } else {
        fprintf(stderr, "    rank 5 recovered %s\n",
                fetch ? "in its call, behind (fetch)"
                      : "before its call, idle (serve)");
    }
    free(out);
    stop_all();
    return r;
}

/*
 * One-way broadcasts (INCOLL_BCAST_AHEAD) complete at the members that
 * have the root's data while another has not called them, up to the next
 * round (every fourth sequence number) and a round sent ahead: rank 3
 * waits before its broadcast late_iter (1.5 s; none of the broadcasts up
 * to 24 is its own), the others complete it and the ones up to 24 and
 * wait in 25 for round 24; then victim is killed. The members are
 * 25 - late_iter operations apart: rank 3 must take each broadcast it
 * lacks from the others, in order (they used to fail the recovery with
 * an error on every member), and every call of every rank is right.
 */
static int bcast_apart(const char *victim, int late_iter)
{
    char dir[PATH_MAX], log[PATH_MAX + 16], bin[PATH_MAX], prog[PATH_MAX];
    char late[32], needle[32], took[64];
    char *argv[] = {bin,      "run",       "-n",      "8",  "--fabric",
                    dir,      "--timeout", "60",      "--", prog,
                    "--coll", "bcast",     "--iters", "40", "--count",
                    "16",     "--late",    late,      NULL};
    char *out;
    pid_t an;
    int st, n = 0, ret = TEST_PASSED;

    snprintf(late, sizeof(late), "3:%d:1500", late_iter);
    snprintf(needle, sizeof(needle), "late iter %d", late_iter);
    snprintf(took, sizeof(took), "took the result of operation %d ", late_iter);
    snprintf(dir, sizeof(dir), "%s/bcast-apart-%s", test_tmpdir(), victim);
    job_paths(dir, log, bin, prog);
    out = run_and_kill(dir, log, argv, needle, 0.3, victim, &st, &an);
    if (out == NULL)
        return TEST_FAILED;
    for (const char *p = out;
         (p = strstr(p, "summary ok=40 wrong=0 errors=0")) != NULL; p++)
        n++;
    if (an <= 0 || st != 0 || n != 8 || strstr(out, "WRONG") ||
        strstr(out, took) == NULL) {
        fprintf(stderr,
                "    %s killed, rank 3 late for broadcast %d: exit %d, %d "
                "ranks all right, rank 3 %s; %s:\n%.4000s\n",
                victim, late_iter, st, n,
                strstr(out, took) ? "caught up" : "did not take broadcasts",
                log, out);
        ret = TEST_FAILED;
    } else {
        fprintf(stderr,
                "    %s killed, rank 3 late for broadcast %d: caught up, "
                "every call right\n",
                victim, late_iter);
    }
    free(out);
    return ret;
}

TEST(integ_recovery_bcast_apart, TEST_INTEG)
{
    int r = prerequisites();
    if (r != TEST_PASSED)
        return r;
    r = bcast_apart("root", 21);
    stop_all();
    if (r == TEST_PASSED)
        r = bcast_apart("l1", 22);
    stop_all();
    return r;
}

/* The same with nonblocking allreduces, 4 outstanding at a time: l0 killed
 * while requests are in flight; every request completes with the right
 * result (after the recovery, on the hosts) in bounded time. */
TEST(integ_recovery_leaf_kill_nb, TEST_INTEG)
{
    int r = prerequisites();
    fab_t f;
    job_t j;
    char *args[] = {"--iters",       "6000", "--count",    "64",
                    "--sleep-ms",    "0",    "--progress", "500",
                    "--nonblocking", "4",    NULL};
    int ok, nrec = 0;
    if (r != TEST_PASSED)
        return r;
    ok = fab_up(&f, "leafkill-nb", NULL) == 0 &&
         job_start(&f, &j, "leafkill-nb", 4, 1000, args) == 0;
    if (ok) {
        double end = now_s() + 30;
        char *out = slurp(j.log[0]);
        while (strstr(out, "progress iter 1000") == NULL &&
               strstr(out, "summary") == NULL && now_s() < end) {
            free(out);
            sleep_s(0.005);
            out = slurp(j.log[0]);
        }
        free(out);
        sleep_s(0.037);
        kill(f.an[0], SIGKILL);
        wait_pid(f.an[0], 5);
        ok = job_check(&j, 60, 1, "recovered after a failure", &nrec) == 0;
        if (ok && nrec != 4) {
            fprintf(stderr, "    %d ranks recovered\n", nrec);
            ok = 0;
        }
    }
    stop_all();
    return ok ? TEST_PASSED : TEST_FAILED;
}

/*
 * A reduce's non-roots return early (INCOLL_EARLY_MAX) while the root
 * (rank 0) sleeps before it calls; an AN is killed then: rank 0's leaf
 * (l0) or the tree's root. The root's reduce must return the right sum
 * (the non-roots' kept inputs, served by their communicators' threads in
 * the recovery) or an error, and then every rank's next call an error
 * too; never a wrong sum (tests/progs/early_check --kill-run).
 */
static int early_kill(const char *victim)
{
    char dir[PATH_MAX], log[PATH_MAX + 16], bin[PATH_MAX], prog[PATH_MAX];
    char *argv[] = {bin,         "run", "-n",         "8",  "--fabric", dir,
                    "--timeout", "60",  "--",         prog, "--iters",  "8",
                    "--count",   "16",  "--kill-run", "8",  NULL};
    char *out;
    const char *p;
    pid_t an;
    int st, err = 0, nall = 0, ret = TEST_PASSED, root_ok;

    snprintf(dir, sizeof(dir), "%s/early-kill-%s", test_tmpdir(), victim);
    job_paths(dir, log, bin, prog);
    snprintf(prog, PATH_MAX, "%s/early_check", progdir());
    out = run_and_kill(dir, log, argv, "early returned from reduce 8", 0.2,
                       victim, &st, &an);
    if (out == NULL)
        return TEST_FAILED;
    root_ok = strstr(out, "kill run: reduce success right 1") != NULL;
    for (p = out; (p = strstr(p, ", allreduce ")) != NULL; p++) {
        if (strncmp(p, ", allreduce success right 1", 27) != 0)
            err++;
        nall++;
    }
    if (an <= 0 || strstr(out, "WRONG") || nall != 8 ||
        (root_ok ? err != 0 : err != 8)) {
        fprintf(stderr,
                "    %s killed while the root sleeps: exit %d, root's reduce "
                "%s, %d of %d next calls failed; %s:\n%.3000s\n",
                victim, st, root_ok ? "right" : "failed", err, nall, log, out);
        ret = TEST_FAILED;
    } else {
        fprintf(stderr, "    %s killed: the root's reduce %s\n", victim,
                root_ok ? "right" : "failed on every rank");
    }
    free(out);
    return ret;
}

TEST(integ_recovery_early_kill, TEST_INTEG)
{
    static const char *const victims[] = {"l0", "root"};
    int r = prerequisites();
    if (r != TEST_PASSED)
        return r;
    for (int i = 0; i < 2 && r == TEST_PASSED; i++) {
        r = early_kill(victims[i]);
        stop_all();
    }
    return r;
}
