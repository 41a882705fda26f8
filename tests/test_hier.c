/*
 * Integration tests of the node and socket levels (src/host/hier.c):
 * real daemons from test_fabric_up (tests/integ.c), K ranks per host from
 * `incoll run --ppn K`, results checked by tests/progs/allreduce_check (every
 * op and dtype against the reference) and tests/progs/hier_check (a
 * communicator holding part of each host's ranks, bitwise equal results across
 * ranks and runs, a rank killed in the middle). The leaf AN's counters must
 * show one contribution per host (or socket) per reduction, not one per rank.
 * Socket mode runs on a two-socket host emulated by hwloc
 * (HWLOC_SYNTHETIC), each rank bound to one of its CPUs with taskset.
 * Unit tests of the segment's arrival counter (src/host/shm.c): its value
 * after posts in every order, and threads posting against a waiting
 * leader.
 */
#include "integ.h"

#include "fabric/fabric.h"
#include "host/host.h"
#include "host/shm.h"

#include <pthread.h>

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int seq;

/* A segment of 4 members, all attached from this process: shm[0] the
 * leader's mapping, shm[1..3] the members'. 0 or -1. */
static int shm_four(host_shm_t **shm, char *name, size_t len)
{
    snprintf(name, len, "/incoll-test-%d-%d", (int)getpid(), seq++);
    if (host_shm_create(name, 4, 2, 64, &shm[0]) != INCOLL_OK)
        return -1;
    for (int m = 1; m < 4; m++)
        if (host_shm_attach(name, m, &shm[m]) != INCOLL_OK)
            return -1;
    host_shm_unlink(name);
    return 0;
}

static void shm_four_free(host_shm_t **shm)
{
    for (int m = 3; m >= 0; m--)
        host_shm_detach(shm[m]);
}

/*
 * arrived is the newest segment every member posted: members posting in
 * any order, some ahead of others, raise it exactly when the last of
 * them gets there, never past the slowest, and never lower it.
 */
TEST(hier_shm_arrived, TEST_UNIT)
{
    /* member, posted value, arrived after it */
    static const uint32_t steps[][3] = {
        {1, 1, 0}, {3, 1, 0}, {2, 1, 1}, /* the last one completes 1 */
        {2, 2, 1}, {2, 3, 1}, {1, 2, 1}, /* 2 ahead; 3 still at 1 */
        {3, 3, 2}, /* 3 jumps past 2: completes 2, not 3 (1 is at 2) */
        {1, 3, 3}, {3, 4, 3}, {1, 4, 3}, {2, 4, 4},
    };
    host_shm_t *shm[4] = {NULL};
    char name[64];
    int bad = -1;
    uint32_t got = 0;

    CHECK(shm_four(shm, name, sizeof(name)) == 0);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        int m = (int)steps[i][0];
        host_shm_post(shm[m], m, steps[i][1]);
        if (host_shm_get(shm[0], HOST_SHM_ARRIVED, 0) != steps[i][2] ||
            host_shm_get(shm[0], HOST_SHM_POSTED, m) != steps[i][1]) {
            bad = (int)i;
            break;
        }
    }
    /* Counters wrap: 0xffffffff then 0 is one step forward (forward in
     * steps of less than 2^31, as the pipeline moves). */
    for (int k = 0; k < 3; k++) {
        static const uint32_t at[] = {0x70000000u, 0xe0000000u, 0xffffffffu};
        for (int m = 1; bad < 0 && m < 4; m++)
            host_shm_post(shm[m], m, at[k]);
        if (bad < 0 && host_shm_get(shm[0], HOST_SHM_ARRIVED, 0) != at[k])
            bad = 100 + k;
    }
    for (int m = 1; bad < 0 && m < 4; m++)
        host_shm_post(shm[m], m, 0);
    if (bad < 0 && host_shm_get(shm[0], HOST_SHM_ARRIVED, 0) != 0)
        bad = 103;
    if (bad < 0 && host_shm_wait(shm[0], HOST_SHM_ARRIVED, 0, 0,
                                 host_now_ns() + 1000000000ull) != INCOLL_OK)
        bad = 104;
    got = host_shm_get(shm[0], HOST_SHM_ARRIVED, 0);
    shm_four_free(shm);
    CHECK_MSG(bad < 0, "step %d: arrived %u", bad, got);
    return TEST_PASSED;
}

typedef struct {
    host_shm_t *shm;
    int idx;
    uint32_t n;
} poster_t;

static void *poster_main(void *arg)
{
    poster_t *p = arg;
    for (uint32_t v = 1; v <= p->n; v++) {
        host_shm_post(p->shm, p->idx, v);
        if (v % 7 == (uint32_t)p->idx)
            sched_yield(); /* vary who comes last */
    }
    return NULL;
}

/*
 * Three member threads post 20000 segments each while the leader waits
 * for each in turn on arrived alone: every wait ends (no wake is lost:
 * a lost one would stall until the deadline) and each time every member
 * has posted at least that far.
 */
TEST(hier_shm_arrived_threads, TEST_UNIT)
{
    enum { N = 20000 };
    host_shm_t *shm[4] = {NULL};
    poster_t p[4];
    pthread_t th[4];
    char name[64];
    uint32_t bad_at = 0;
    incoll_status_t status = INCOLL_OK;
    uint64_t deadline;

    CHECK(shm_four(shm, name, sizeof(name)) == 0);
    for (int m = 1; m < 4; m++) {
        p[m] = (poster_t){shm[m], m, N};
        CHECK(pthread_create(&th[m], NULL, poster_main, &p[m]) == 0);
    }
    deadline = host_now_ns() + 120000000000ull;
    for (uint32_t g = 1; g <= N && status == INCOLL_OK && !bad_at; g++) {
        status = host_shm_wait(shm[0], HOST_SHM_ARRIVED, 0, g, deadline);
        for (int m = 1; m < 4 && status == INCOLL_OK; m++)
            if (host_shm_get(shm[0], HOST_SHM_POSTED, m) < g)
                bad_at = g;
    }
    for (int m = 1; m < 4; m++)
        pthread_join(th[m], NULL);
    shm_four_free(shm);
    CHECK_MSG(status == INCOLL_OK, "wait: %s", incoll_status_string(status));
    CHECK_MSG(bad_at == 0, "arrived %u before every member posted it", bad_at);
    return TEST_PASSED;
}

/* Brings up a fabric of hosts hosts in <tmp>/hierN; its path in dir and
 * the log file in out. 0 or -1. */
static int hier_fabric(int hosts, char *dir, size_t dlen, char *out,
                       size_t olen)
{
    snprintf(dir, dlen, "%.900s/hier%d", test_tmpdir(), seq++);
    snprintf(out, olen, "%s.txt", dir);
    if (test_fabric_up(dir, hosts, 4) != 0) {
        test_fabric_down(dir);
        return -1;
    }
    return 0;
}

static void hier_down(const char *dir, const char *out)
{
    test_fabric_down(dir);
}

/* Runs prog (in progdir) on n ranks, ppn per host, with env; exit status. */
static int hier_run(const char *dir, const char *out, int n, int ppn,
                    const char *env, const char *prog, const char *args)
{
    return run_cmd_file(out, 200,
                        "env INCOLL_JOB=hier-%d-%ld %s '%s/incoll' run -n %d "
                        "--ppn %d --fabric '%s' --timeout 180 -- %s %s",
                        seq++, (long)getpid(), env ? env : "", test_bindir(), n,
                        ppn, dir, prog, args);
}

/* Contributions per reduction on the fabric's one AN (l0), from `incoll
 * stat`; -1 when unreadable. */
static double contribs_per_reduction(const char *dir)
{
    char *text;
    uint64_t c = 0, r = 0;
    double ratio = -1;

    if (run_cmd(&text, 30, "'%s/incoll' stat --fabric '%s'", test_bindir(),
                dir) == 0 &&
        stat_get(text, "l0", "contribs_accepted", &c) == 0 &&
        stat_get(text, "l0", "reductions", &r) == 0 && r > 0)
        ratio = (double)c / (double)r;
    free(text);
    return ratio;
}

/*
 * Every op and dtype in node mode with 3 ranks on one host and 1 on the
 * other, out of place and in place, counts 0, 1, 7 and several pipeline
 * segments (INCOLL_HIER_SEG=4096). The AN sees about 2 contributions per
 * reduction (the flat exchanges that set the level up add a few of 4).
 */
TEST(hier_node_ops, TEST_INTEG)
{
    char dir[1024], out[1100], prog[PATH_MAX];
    static const char *const modes[] = {"", "--inplace"};
    double ratio;

    if (!have_fabric_binaries("allreduce_check"))
        return test_skip("incoll, incoll-agg or allreduce_check not built");
    CHECK(hier_fabric(2, dir, sizeof(dir), out, sizeof(out)) == 0);
    snprintf(prog, sizeof(prog), "'%s/allreduce_check'", progdir());
    for (int i = 0; i < 2; i++) {
        char args[256];
        int rc;
        snprintf(args, sizeof(args),
                 "--sizes 0,1,7,1000,5000 --dtype all --op all %s", modes[i]);
        rc = hier_run(dir, out, 4, 3, "INCOLL_HIER_SEG=4096", prog, args);
        if (rc != 0 || !file_has(out, ": ok")) {
            show_tail(out);
            hier_down(dir, out);
            CHECK_MSG(0, "allreduce_check %s exited %d", modes[i], rc);
        }
    }
    ratio = contribs_per_reduction(dir);
    hier_down(dir, out);
    CHECK_MSG(ratio >= 2.0 && ratio < 2.1,
              "the AN saw %.3f contributions per reduction, want 2 (one per "
              "host): %s",
              ratio, out);
    return TEST_PASSED;
}

/* The counts of cost_check's allreduce line for rank: ops, tx, rx, wake,
 * resent; -1 when absent. */
static int cost_of(const char *text, int rank, long v[5])
{
    char key[64];
    const char *p;
    snprintf(key, sizeof(key), "cost rank=%d kind=allreduce ", rank);
    p = strstr(text, key);
    if (p == NULL ||
        sscanf(p + strlen(key), "ops=%ld tx=%ld rx=%ld wake=%ld resent=%ld",
               &v[0], &v[1], &v[2], &v[3], &v[4]) != 5)
        return -1;
    return 0;
}

/*
 * The counts of node mode's one-packet allreduce per rank
 * (tests/progs/cost_check: 200 allreduces of one int64 on 2 hosts x 4
 * ranks, every result checked), with env. A member never receives a
 * datagram on its own socket and wakes at most once per operation (the
 * leader's publication of the result). The leader receives one datagram
 * per operation (and one per resend) and wakes at most lead_max times
 * per operation: twice in the usual way (the last member's arrival, then
 * the result: three wake-ups in a row on the path), once with the shared
 * socket (INCOLL_HIER_SHARED: the member completing the fold sends the
 * leader's packet, the result alone wakes the leader). Adaptive copies
 * off, so that every datagram is a first transmission or a counted
 * resend. With mcast set the results must come by multicast: the leaf
 * AN sends at least one multicast copy per operation (`incoll stat`).
 * The leader's and the members' wake-ups per operation in *lead_p and
 * *member_p.
 */
static int node_costs(const char *env, int shared, int mcast, double lead_max,
                      double *lead_p, double *member_p)
{
    char dir[1024], out[1100], prog[PATH_MAX], envs[512];
    const int n = 8, ppn = 4, iters = 200;
    long lead_wake = 0, member_wake = 0, resent = 0, lead_tx = 0, probes;
    uint64_t mc_sent = 0;
    char *text;
    int rc;

    if (!have_fabric_binaries("cost_check"))
        return test_skip("incoll, incoll-agg or cost_check not built");
    CHECK(hier_fabric(2, dir, sizeof(dir), out, sizeof(out)) == 0);
    snprintf(prog, sizeof(prog), "'%s/cost_check'", progdir());
    snprintf(envs, sizeof(envs), "INCOLL_COPY_ADAPT=0 %s", env);
    rc = hier_run(dir, out, n, ppn, envs, prog, "--iters 200");
    if (mcast) {
        char *st = NULL;
        if (run_cmd(&st, 30, "'%s/incoll' stat --fabric '%s'", test_bindir(),
                    dir) != 0 ||
            stat_get(st, "l0", "mcast_sent", &mc_sent) != 0)
            mc_sent = 0;
        free(st);
    }
    hier_down(dir, out);
    CHECK_MSG(!mcast || mc_sent >= (uint64_t)iters,
              "the leaf AN sent %llu multicast results for %d allreduces",
              (unsigned long long)mc_sent, iters);
    text = slurp(out);
    if (rc != 0 || strstr(text, "summary ok=400 wrong=0") == NULL) {
        show_tail(out);
        free(text);
        FAILF("cost_check exited %d or a result was wrong", rc);
    }
    for (int r = 0; r < n; r++) {
        long a[5];
        if (cost_of(text, r, a) != 0) {
            show_tail(out);
            free(text);
            FAILF("rank %d: no cost line", r);
        }
        printf("  rank %d (%s): tx %ld rx %ld wake %ld resent %ld\n", r,
               r % ppn == 0 ? "leader" : "member", a[1], a[2], a[3], a[4]);
        CHECK_EQ_INT(a[0], iters);
        if (r % ppn == 0) {
            /* With the shared socket a member sends the first
             * transmissions (on the leader's socket, not counted here). */
            /* (+iters / 2: a result later than the engine expects (the
             * leader's round trips include its members' fold) draws a tail
             * probe, which is not a resend, and its answer: 5-14% of the
             * operations seen, loaded or not) */
            CHECK_MSG(a[1] <= iters + a[4] + iters / 2 &&
                          (shared || a[1] >= iters + a[4]),
                      "leader %d sent %ld datagrams for %d operations (%ld "
                      "resent)",
                      r, a[1], iters, a[4]);
            CHECK_MSG(a[2] >= iters && a[2] <= iters + 2 * a[4] + iters / 2,
                      "leader %d received %ld datagrams", r, a[2]);
            lead_wake += a[3];
            lead_tx += a[1];
            resent += a[4];
        } else {
            CHECK_MSG(a[2] == 0 && a[4] == 0 && (shared || a[1] == 0),
                      "member %d used the network: tx %ld rx %ld", r, a[1],
                      a[2]);
            /* (+2: the manager's heartbeat may be due during the run) */
            CHECK_MSG(a[3] <= iters + 2,
                      "member %d: %ld wake-ups for %d allreduces", r, a[3],
                      iters);
            member_wake += a[3];
        }
    }
    free(text);
    *lead_p = (double)lead_wake / (2.0 * iters);
    *member_p = (double)member_wake / ((double)(n - 2) * iters);
    printf("  wake-ups per operation: leader %.3f, member %.3f\n", *lead_p,
           *member_p);
    CHECK_MSG(lead_wake > 0 && member_wake > 0, "no wake-up counted");
    /* With the shared socket some first transmissions were the members'. */
    CHECK_MSG(!shared || lead_tx < 2 * iters + resent,
              "the leaders sent all %ld first transmissions themselves",
              lead_tx);
    /* A resend adds a wake-up (its timer) and its answer; so does a tail
     * probe (a leader's datagram beyond its first transmissions and
     * resends). */
    probes = lead_tx - (2L * iters + resent);
    if (probes < 0)
        probes = 0;
    CHECK_MSG(lead_wake <=
                  (long)(lead_max * 2 * iters) + 2 * (resent + probes) + 4,
              "the leaders woke %.3f times per operation (%ld resends), "
              "want at most %.0f",
              *lead_p, resent, lead_max);
    return TEST_PASSED;
}

/* The usual way (INCOLL_HIER_SHARED=0): the leader wakes for the last
 * member, then the result. */
TEST(hier_node_wakeups, TEST_INTEG)
{
    double lead, member;
    return node_costs("INCOLL_HIER_SHARED=0", 0, 0, 2.0, &lead, &member);
}

/*
 * With the shared socket (INCOLL_HIER_SHARED; results by unicast, which
 * it needs): every result exact, first transmissions sent by the members
 * on the leader's socket, one wake-up per operation on every rank, the
 * leader's too (on average: a leader woken by anything but the result
 * takes its pack back and goes the usual way).
 */
TEST(hier_node_shared_wakeups, TEST_INTEG)
{
    double lead, member;
    return node_costs("INCOLL_HIER_SHARED=1 INCOLL_MCAST=0", 1, 0, 1.1, &lead,
                      &member);
}

/* The same with multicast results (INCOLL_MCAST=1): the leader sleeps
 * on both its sockets and the multicast copy alone wakes it. */
TEST(hier_node_shared_mcast_wakeups, TEST_INTEG)
{
    double lead, member;
    return node_costs("INCOLL_HIER_SHARED=1 INCOLL_MCAST=1", 1, 1, 1.1, &lead,
                      &member);
}

/* allreduce_check with args on a fabric of 2 hosts, nranks ranks, ppn
 * per host, with env. */
static int check_run(int nranks, int ppn, const char *env, const char *args)
{
    char dir[1024], out[1100], prog[PATH_MAX];
    int rc;

    if (!have_fabric_binaries("allreduce_check"))
        return test_skip("incoll, incoll-agg or allreduce_check not built");
    CHECK(hier_fabric(2, dir, sizeof(dir), out, sizeof(out)) == 0);
    snprintf(prog, sizeof(prog), "'%s/allreduce_check'", progdir());
    rc = hier_run(dir, out, nranks, ppn, env, prog, args);
    hier_down(dir, out);
    if (rc != 0 || !file_has(out, ": ok"))
        show_tail(out);
    CHECK_MSG(rc == 0 && file_has(out, ": ok"), "allreduce_check exited %d",
              rc);
    return TEST_PASSED;
}

/* allreduce_check under 5% loss on every host socket, 2 ranks per host. */
TEST(hier_node_loss, TEST_INTEG)
{
    return check_run(4, 2,
                     "INCOLL_HIER_SEG=16384 INCOLL_FAULT_DROP=0.05 "
                     "INCOLL_FAULT_SEED=5",
                     "--sizes 1,1000,20000 --dtype float32,int64,bfloat16 "
                     "--op sum,max,bxor --iters 2");
}

/* The pipelined leader: 4 ranks per host, 3 segments in flight (a depth
 * that does not divide the segment counts), vectors of up to 59 segments
 * of 4 KiB, under 5% loss; every result checked against the reference. */
TEST(hier_node_pipeline_loss, TEST_INTEG)
{
    return check_run(8, 4,
                     "INCOLL_HIER_SEG=4096 INCOLL_HIER_DEPTH=3 "
                     "INCOLL_FAULT_DROP=0.05 INCOLL_FAULT_SEED=11",
                     "--sizes 1,1024,5000,30000 --dtype float32,int64 "
                     "--op sum,min --iters 2");
}

/* The pipeline with a host-based algorithm among the leaders (their
 * requests run the ring in their thread), 2 segments in flight. */
TEST(hier_node_pipeline_ring, TEST_INTEG)
{
    return check_run(8, 4, "INCOLL_HIER_SEG=4096 INCOLL_HIER_DEPTH=2",
                     "--sizes 1,3000,20000 --dtype float32,int32 "
                     "--op sum,max --algo ring --iters 2");
}

/* The hash hier_check prints, or "" when absent. */
static void hash_of(const char *path, char *buf, size_t len)
{
    char *text = slurp(path);
    const char *p = strstr(text, "hier_check: hash ");
    buf[0] = '\0';
    if (p)
        snprintf(buf, len, "%.16s", p + strlen("hier_check: hash "));
    free(text);
}

/*
 * hier_check on 2 hosts x 4 ranks: a communicator holding 2 of each host's
 * 4 ranks (its own leader per host) beside the world, exact; float sums
 * with the same bits on every rank, and in two runs.
 */
TEST(hier_node_subset_bitwise, TEST_INTEG)
{
    char dir[1024], out[1100], prog[PATH_MAX], h1[32], h2[32];
    int rc1, rc2;

    if (!have_fabric_binaries("hier_check"))
        return test_skip("incoll, incoll-agg or hier_check not built");
    CHECK(hier_fabric(2, dir, sizeof(dir), out, sizeof(out)) == 0);
    snprintf(prog, sizeof(prog), "'%s/hier_check'", progdir());
    rc1 = hier_run(dir, out, 8, 4, "INCOLL_HIER_SEG=8192", prog,
                   "--ppn 4 --count 50000 --iters 3");
    hash_of(out, h1, sizeof(h1));
    truncate(out, 0);
    rc2 = hier_run(dir, out, 8, 4, "INCOLL_HIER_SEG=8192", prog,
                   "--ppn 4 --count 50000 --iters 3");
    hash_of(out, h2, sizeof(h2));
    hier_down(dir, out);
    if (rc1 != 0 || rc2 != 0)
        show_tail(out);
    CHECK_MSG(rc1 == 0 && rc2 == 0, "hier_check exited %d and %d", rc1, rc2);
    CHECK_MSG(h1[0] && strcmp(h1, h2) == 0,
              "two runs gave different bits: %s and %s", h1, h2);
    return TEST_PASSED;
}

/*
 * Socket mode on a host that hwloc describes as two packages of one CPU
 * each: ranks bound by taskset to CPU rank % 2, 2 hosts x 4 ranks, so 4
 * socket leaders: every op and dtype, then 4 contributions per reduction.
 * An unbound rank runs node mode and says why.
 */
TEST(hier_socket_ops, TEST_INTEG)
{
    char dir[1024], out[1100], prog[PATH_MAX];
    const char *topo = "HWLOC_SYNTHETIC='package:2 core:1 pu:1'";
    double ratio;
    int rc;

#ifndef INCOLL_HAVE_HWLOC
    return test_skip("built without hwloc (libhwloc-dev)");
#endif
    if (!have_fabric_binaries("allreduce_check"))
        return test_skip("incoll, incoll-agg or allreduce_check not built");
    if (system("taskset -c 0 true >/dev/null 2>&1") != 0 ||
        sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return test_skip("taskset or a second CPU is missing");
    CHECK(hier_fabric(2, dir, sizeof(dir), out, sizeof(out)) == 0);
    snprintf(prog, sizeof(prog),
             "sh -c 'exec taskset -c $((INCOLL_RANK %% 2)) "
             "%s/allreduce_check \"$@\"' allreduce_check",
             progdir());
    {
        char env[256];
        snprintf(env, sizeof(env),
                 "%s INCOLL_HIER=socket INCOLL_HIER_SEG=4096 "
                 "INCOLL_LOG_LEVEL=debug",
                 topo);
        rc = hier_run(dir, out, 8, 4, env, prog,
                      "--sizes 0,1,1000,3000 --dtype all --op all");
    }
    ratio = contribs_per_reduction(dir);
    if (rc != 0 || !file_has(out, ": ok"))
        show_tail(out);
    CHECK_MSG(rc == 0 && file_has(out, ": ok") &&
                  file_has(out, "socket mode: 4 sockets, 2 local ranks"),
              "allreduce_check in socket mode exited %d (or no socket "
              "level): %s",
              rc, out);
    CHECK_MSG(ratio >= 4.0 && ratio < 4.2,
              "the AN saw %.3f contributions per reduction, want 4 (one per "
              "socket): %s",
              ratio, out);
    /* Unbound ranks: node mode, with the reason. */
    {
        char env[256];
        snprintf(env, sizeof(env),
                 "%s INCOLL_HIER=socket INCOLL_LOG_LEVEL=info", topo);
        snprintf(prog, sizeof(prog), "'%s/allreduce_check'", progdir());
        rc = hier_run(dir, out, 4, 2, env, prog, "--sizes 1,100");
    }
    hier_down(dir, out);
    CHECK_MSG(rc == 0 && file_has(out, "INCOLL_HIER=socket runs as node: the "
                                       "rank is not bound to one socket"),
              "unbound ranks in socket mode: exit %d, want node mode and its "
              "reason: %s",
              rc, out);
    return TEST_PASSED;
}

/* 1 when /dev/shm holds a segment of the leader pid (src/host/hier.c
 * names them /incoll-<leader pid>-...). */
static int shm_left(pid_t pid)
{
    char prefix[32];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int found = 0;

    if (d == NULL)
        return 0;
    snprintf(prefix, sizeof(prefix), "incoll-%d-", (int)pid);
    while ((e = readdir(d)) != NULL)
        found |= strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return found;
}

/*
 * 2 hosts x 2 ranks started directly (not by `incoll run`, which would
 * stop the others itself); one rank kills itself before an allreduce the
 * others are already in: a member (rank 1), then a leader (rank 2). Every
 * other rank must fail its collective with an error, in bounded time, and
 * no segment may stay in /dev/shm. (The other host cannot tell a dead
 * rank from a late one: it waits INCOLL_WAIT_MS, 3 s here.) With shared
 * set (INCOLL_HIER_SHARED in env) the kill comes after 100 one-packet
 * allreduces, and the members must have sent some of their leaders'
 * packets before it: the leaders' sockets sent fewer datagrams than
 * operations.
 */
static int node_killed(const char *env, int count, const int *victims,
                       int nvictims, int shared)
{
    char dir[1024], out[1100];
    const int kill_at = shared ? 100 : 20;

    if (!have_fabric_binaries("hier_check"))
        return test_skip("incoll, incoll-agg or hier_check not built");
    CHECK(hier_fabric(2, dir, sizeof(dir), out, sizeof(out)) == 0);
    for (int v = 0; v < nvictims; v++) {
        proc_t p[4];
        int rc[4];
        double t0 = now_s();
        for (int r = 0; r < 4; r++) {
            memset(&p[r], 0, sizeof(p[r]));
            proc_start(&p[r], 60,
                       "sh -c \". '%s/fabric.env' && exec env INCOLL_RANK=%d "
                       "INCOLL_SIZE=4 INCOLL_JOB=hierkill-%d-%d-%ld "
                       "INCOLL_HOST=h%d INCOLL_MGR_OP_TIMEOUT_MS=1000 "
                       "INCOLL_WAIT_MS=3000 %s "
                       "'%s/hier_check' "
                       "--ppn 2 --count %d --iters %d --kill %d:%d\"",
                       dir, r, v, seq, (long)getpid(), r / 2, env, progdir(),
                       count, kill_at + 20, victims[v], kill_at);
        }
        for (int r = 0; r < 4; r++)
            rc[r] = proc_wait(&p[r]);
        if (shared) {
            long tx = 0;
            for (int r = 0; r < 4; r += 2) {
                char key[64];
                const char *at;
                long t = -1;
                snprintf(key, sizeof(key), "hier_check: rank %d: tx ", r);
                at = p[r].out ? strstr(p[r].out, key) : NULL;
                if (at == NULL || sscanf(at + strlen(key), "%ld", &t) != 1)
                    t = 2L * kill_at;
                tx += t;
            }
            /* (tail probes add a few) */
            if (tx >= 2L * kill_at) {
                for (int q = 0; q < 4; q++)
                    free(p[q].out);
                hier_down(dir, out);
                FAILF("the leaders sent %ld datagrams in %d operations each: "
                      "no member sent their packets",
                      tx, kill_at);
            }
        }
        for (int r = 0; r < 4; r++) {
            int want = r == victims[v] ? 128 + SIGKILL : 5;
            if (rc[r] != want || shm_left(p[r].pid)) {
                for (int q = 0; q < 4; q++)
                    fprintf(stderr, "    rank %d exited %d:\n%.1500s\n", q,
                            rc[q], p[q].out ? p[q].out : "");
                for (int q = 0; q < 4; q++)
                    free(p[q].out);
                hier_down(dir, out);
                CHECK_MSG(0,
                          "rank %d killed: rank %d exited %d (want %d) or "
                          "left its segment in /dev/shm",
                          victims[v], r, rc[r], want);
            }
        }
        for (int r = 0; r < 4; r++)
            free(p[r].out);
        CHECK_MSG(now_s() - t0 < 40, "the ranks took %.1f s to fail",
                  now_s() - t0);
    }
    hier_down(dir, out);
    return TEST_PASSED;
}

TEST(hier_node_killed, TEST_INTEG)
{
    static const int victims[] = {1, 2};
    return node_killed("INCOLL_HIER_SHARED=0", 1000, victims, 2, 0);
}

/*
 * The same with the shared socket (INCOLL_HIER_SHARED) and one-packet
 * allreduces (8 floats), a member killed: its leader, asleep on its
 * socket with the pack open, takes the pack back and finds the member
 * dead; the other host's ranks time out. Every rank fails in bounded
 * time, none with a wrong result.
 */
TEST(hier_node_shared_killed, TEST_INTEG)
{
    static const int victims[] = {1};
    return node_killed("INCOLL_HIER_SHARED=1 INCOLL_MCAST=0", 8, victims, 1, 1);
}

/* The same with multicast results (INCOLL_MCAST=1): the leader asleep on
 * both its sockets. */
TEST(hier_node_shared_mcast_killed, TEST_INTEG)
{
    static const int victims[] = {1};
    return node_killed("INCOLL_HIER_SHARED=1 INCOLL_MCAST=1", 8, victims, 1, 1);
}

/* allreduce_check's one-packet sizes with the shared socket under 5% loss
 * on every host socket: every result exact. */
TEST(hier_node_shared_loss, TEST_INTEG)
{
    return check_run(8, 4,
                     "INCOLL_HIER_SHARED=1 INCOLL_MCAST=0 "
                     "INCOLL_FAULT_DROP=0.05 INCOLL_FAULT_SEED=7",
                     "--sizes 1,7,100 --dtype float32,int64 --op sum,max "
                     "--iters 10");
}

/*
 * incoll_comm_lock and incoll_comm_unlock on a fabric without a manager
 * (tests/progs/lock_check --world-only): 4 ranks, 2 per host (the
 * leaders' communicator locks, an allreduce tells the others) and 1 per
 * host (flat), each under 5% loss on every host socket. Every rank must
 * be granted both locks, every result right, and exactly the large
 * operations streamed (the leaders' pieces of the node pipeline in the
 * first case).
 */
TEST(hier_lock_api, TEST_INTEG)
{
    char dir[1024], out[1100], prog[PATH_MAX];
    static const int ppn[] = {2, 1};

    if (!have_fabric_binaries("lock_check"))
        return test_skip("incoll, incoll-agg or lock_check not built");
    snprintf(prog, sizeof(prog), "'%s/lock_check' --world-only", progdir());
    for (int i = 0; i < 2; i++) {
        unsigned long long streamed;
        int rc;
        CHECK(hier_fabric(4 / ppn[i], dir, sizeof(dir), out, sizeof(out)) == 0);
        rc = hier_run(dir, out, 4, ppn[i],
                      "INCOLL_LOG_LEVEL=info INCOLL_FAULT_DROP=0.05 "
                      "INCOLL_FAULT_SEED=3 INCOLL_STREAM_SLOTS=8",
                      prog, "");
        hier_down(dir, out);
        streamed = streamed_in(out);
        fprintf(stderr, "    %d per host: %llu operations streamed\n", ppn[i],
                streamed);
        if (rc != 0 || !file_has(out, "ok 2 rounds"))
            show_tail(out);
        CHECK_MSG(rc == 0 && file_has(out, "ok 2 rounds"),
                  "lock_check, %d per host, exited %d", ppn[i], rc);
        /* per round and streaming rank (the leaders, or every rank):
         * one large operation under each of the two locks; with 2 per
         * host the leaders' operations are the node pipeline's pieces
         * (INCOLL_HIER_SEG, 256 KiB), of which the last, 57856 bytes,
         * keeps the 8 slots the run asks for */
        CHECK_EQ_INT((int)streamed, 2 * 2 * (4 / ppn[i]));
    }
    return TEST_PASSED;
}

/* ---- without a manager (src/host/rdv.c) ---- */

/* A fabric.conf-only fabric (`incoll fabric up --no-mgr`) of hosts hosts
 * in <tmp>/hierN; 0 or -1. */
static int nomgr_fabric(int hosts, char *dir, size_t dlen, char *out,
                        size_t olen)
{
    fabric_spec_t spec;

    snprintf(dir, dlen, "%.900s/hier%d", test_tmpdir(), seq++);
    snprintf(out, olen, "%s.txt", dir);
    fabric_spec_default(&spec);
    spec.dir = dir;
    spec.bindir = test_bindir();
    spec.hosts = hosts;
    spec.radix = 4;
    spec.managed = 0;
    spec.quiet = 1;
    if (fabric_up(&spec) != 0) {
        test_fabric_down(dir);
        return -1;
    }
    return 0;
}

/* `incoll run --no-mgr -n n --ppn ppn -- prog args`; exit status. */
static int nomgr_run(const char *dir, const char *out, int n, int ppn,
                     const char *env, const char *prog, const char *args)
{
    return run_cmd_file(out, 200,
                        "env INCOLL_JOB=nomgr-%d-%ld %s '%s/incoll' run "
                        "--no-mgr -n %d --ppn %d --fabric '%s' --timeout 180 "
                        "-- '%s/%s' %s",
                        seq++, (long)getpid(), env ? env : "", test_bindir(), n,
                        ppn, dir, progdir(), prog, args);
}

/*
 * Without a manager, 2 hosts of fabric.conf and 2 ranks on each (then 3
 * and 2, then 2 and 1): every op and dtype of allreduce against the
 * reference, in place and not, through several segments; every other
 * collective (coll_check); a communicator of part of each host's ranks
 * (hier_check: a split, which runs on the hosts without a manager) and
 * float sums with the same bits on every rank; 30% loss on every socket
 * (the endpoint exchange at init included). The leaf AN counts exactly
 * one contribution per host per reduction: only the hosts' leaders are its
 * children, and the exchanges that set the level up run host to host.
 */
TEST(hier_nomgr_ops, TEST_INTEG)
{
    static const struct {
        int n, ppn;
        const char *prog, *args, *env;
    } runs[] = {
        {4, 2, "allreduce_check",
         "--sizes 0,1,7,1000,5000 --dtype all --op all", ""},
        {4, 2, "allreduce_check",
         "--sizes 1,1000,5000 --dtype all --op all --inplace", ""},
        {5, 3, "allreduce_check",
         "--sizes 1,7,5000 --dtype float32,int64,uint8 --op all", ""},
        {3, 2, "allreduce_check",
         "--sizes 1,7,5000 --dtype float64,int32 --op sum,min,bor", ""},
        {4, 2, "coll_check", "", ""},
        {4, 2, "hier_check", "--ppn 2 --count 5000 --iters 3", ""},
        /* A third of every packet lost, the endpoint exchange's too. */
        {5, 3, "allreduce_check",
         "--sizes 1,5000 --dtype float32,int64 --op sum,max",
         "INCOLL_FAULT_DROP=0.3 INCOLL_FAULT_SEED=7"},
    };
    char dir[1024], out[1100], env[160];
    uint64_t c0 = 0, r0 = 0, c1 = 0, r1 = 0;

    if (!have_fabric_binaries("allreduce_check") ||
        !have_fabric_binaries("coll_check") ||
        !have_fabric_binaries("hier_check"))
        return test_skip("incoll, incoll-agg or the check programs not "
                         "built");
    CHECK(nomgr_fabric(2, dir, sizeof(dir), out, sizeof(out)) == 0);
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        int rc;
        if (an_counts(dir, "l0", &c0, &r0) != 0) {
            test_fabric_down(dir);
            CHECK_MSG(0, "incoll stat failed");
        }
        snprintf(env, sizeof(env), "INCOLL_HIER_SEG=4096 %s", runs[i].env);
        rc = nomgr_run(dir, out, runs[i].n, runs[i].ppn, env, runs[i].prog,
                       runs[i].args);
        if (rc != 0 || (!file_has(out, ": ok") && !file_has(out, ": all "
                                                                 "correct"))) {
            show_tail(out);
            test_fabric_down(dir);
            CHECK_MSG(0, "%s %s on %d ranks, %d per host, exited %d",
                      runs[i].prog, runs[i].args, runs[i].n, runs[i].ppn, rc);
        }
        if (an_counts(dir, "l0", &c1, &r1) != 0) {
            test_fabric_down(dir);
            CHECK_MSG(0, "incoll stat failed");
        }
        if (r1 <= r0 || c1 - c0 != 2 * (r1 - r0)) {
            test_fabric_down(dir);
            CHECK_MSG(0,
                      "%s on %d ranks: the AN saw %" PRIu64
                      " contributions in %" PRIu64 " reductions, want 2 per "
                      "reduction (one per host)",
                      runs[i].prog, runs[i].n, c1 - c0, r1 - r0);
        }
    }
    test_fabric_down(dir);
    return TEST_PASSED;
}

/* Without a manager: what cannot work fails at once, naming the file and
 * the cause. Fewer ranks than hosts (a host of the world group without a
 * rank), a map naming a host fabric.conf does not have, and `incoll run`
 * with a --ppn that does not fill fabric.conf's hosts. */
TEST(hier_nomgr_errors, TEST_INTEG)
{
    char dir[1024], out[1100];
    int rc;

    if (!have_fabric_binaries("allreduce_check"))
        return test_skip("incoll, incoll-agg or allreduce_check not built");
    CHECK(nomgr_fabric(2, dir, sizeof(dir), out, sizeof(out)) == 0);
    rc = run_cmd_file(out, 60,
                      "env INCOLL_FABRIC='%s' INCOLL_RANK=0 INCOLL_SIZE=1 "
                      "'%s/allreduce_check' --sizes 1",
                      dir, progdir());
    if (rc == 0 || !file_has(out, "has 2 hosts but INCOLL_SIZE=1") ||
        !file_has(out, "at least 2 ranks")) {
        show_tail(out);
        test_fabric_down(dir);
        CHECK_MSG(0, "1 rank on 2 hosts: exit %d", rc);
    }
    rc = run_cmd_file(out, 60,
                      "env INCOLL_FABRIC='%s' INCOLL_RANK=0 INCOLL_SIZE=4 "
                      "INCOLL_HOST_MAP=0,0,1,2 '%s/allreduce_check' --sizes 1",
                      dir, progdir());
    if (rc == 0 || !file_has(out, "INCOLL_HOST_MAP must list the fabric.conf "
                                  "host (0..1)")) {
        show_tail(out);
        test_fabric_down(dir);
        CHECK_MSG(0, "a map naming host 2 of 2: exit %d", rc);
    }
    rc = nomgr_run(dir, out, 6, 2, NULL, "allreduce_check", "--sizes 1");
    test_fabric_down(dir);
    if (rc == 0 || !file_has(out, "has 2 hosts but -n 6 with 2 ranks per "
                                  "host"))
        show_tail(out);
    CHECK_MSG(rc != 0 && file_has(out, "has 2 hosts but -n 6 with 2 ranks per "
                                       "host"),
              "-n 6 --ppn 2 on 2 hosts: exit %d", rc);
    return TEST_PASSED;
}
