/*
 * Streaming aggregation with tree locking (docs/streaming.md), through the
 * in-memory network: lock grant, refusal and release on 2- and 3-level
 * trees, groups racing for one tree, a quiet holder's lock reclaimed,
 * the fairness queue, credits (the stream window) under loss, and the
 * bits of streamed float sums.
 */
#include "test.h"

#include "common/wire.h"
#include "common/wire_mac.h"
#include "core/agg_core.h"
#include "core/host_engine.h"
#include "memnet.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define US UINT64_C(1000)
#define MS UINT64_C(1000000)
#define SEC UINT64_C(1000000000)
#define ADMIN_KEY 0xAD4113E5EC4E7000ull
#define NG 3         /* groups at most */
#define HMAX 16      /* hosts at most */
#define COUNT 6000   /* elements of the large operations */
#define PAYLOAD 1024 /* bytes per packet: many segments per operation */
#define WINDOW 64    /* stream slots a lock asks for */
#define POOL (4u << 20)

/* One memnet tree with up to NG groups over all its hosts, and buffers. */
typedef struct {
    memnet_t *net;
    memnet_tree_t tree;
    int n;       /* hosts */
    int ngroups; /* groups 0 .. ngroups-1, ids 40 + i */
    void *send[NG][HMAX];
    void *recv[NG][HMAX];
} sw_t;

static memnet_group_cfg_t sw_group(int i, int lossy)
{
    memnet_group_cfg_t g = {.id = 40 + (uint32_t)i,
                            .key = 0x5EC12E7C0FFEE000ull + (uint64_t)i,
                            .gen = 7,
                            .slots = 8,
                            .max_payload = PAYLOAD,
                            .stream_window = WINDOW};
    if (lossy) {
        g.rto_init_ns = 200 * US;
        g.rto_min_ns = 50 * US;
        g.rto_max_ns = 2 * MS;
        g.max_retries = 200;
        g.progress_timeout_ns = 100 * SEC;
    }
    return g;
}

static void sw_free(sw_t *w)
{
    memnet_destroy(w->net);
    for (int g = 0; g < NG; g++)
        for (int r = 0; r < HMAX; r++) {
            free(w->send[g][r]);
            free(w->recv[g][r]);
        }
    memset(w, 0, sizeof(*w));
}

/* memnet_cfg_t.an_shards of every network sw_init makes (stream_shards). */
static int sw_shards;

static int sw_init(sw_t *w, const char *spec, int ngroups, memnet_cfg_t cfg,
                   int lossy)
{
    memset(w, 0, sizeof(*w));
    cfg.an_shards = sw_shards;
    if (memnet_tree_parse(&w->tree, spec) != 0 || w->tree.nhosts > HMAX)
        FAILF("bad tree %s", spec);
    w->n = w->tree.nhosts;
    if (cfg.stream_pool_bytes == 0)
        cfg.stream_pool_bytes = POOL;
    w->net = memnet_create(&cfg);
    if (w->net == NULL || memnet_add_tree(w->net, &w->tree, ADMIN_KEY) != 0)
        FAILF("memnet setup failed");
    for (int g = 0; g < ngroups; g++) {
        memnet_group_cfg_t gc = sw_group(g, lossy);
        if (memnet_add_group(w->net, &gc) != g)
            FAILF("memnet_add_group failed");
        for (int r = 0; r < w->n; r++) {
            w->send[g][r] = calloc(COUNT, 8);
            w->recv[g][r] = calloc(COUNT, 8);
            if (!w->send[g][r] || !w->recv[g][r])
                FAILF("out of memory");
        }
    }
    w->ngroups = ngroups;
    return 0;
}

/* Runs the network until every host is idle. */
static int sw_run(sw_t *w, uint64_t limit)
{
    if (memnet_run(w->net, limit) != 0)
        FAILF("no completion within %" PRIu64 " ms (%d hosts busy)", limit / MS,
              memnet_busy(w->net));
    return 0;
}

/* The window every rank of group g holds (all must agree), or -1. */
static int sw_window(sw_t *w, int g, unsigned *why_p)
{
    uint32_t win0 = 0;
    for (int r = 0; r < w->n; r++) {
        host_engine_t *e = memnet_host(w->net, g, r);
        uint32_t win = host_engine_stream_window(e, NULL, why_p);
        if (host_engine_status(e) != INCOLL_OK)
            FAILF("group %d rank %d: status %s", g, r,
                  incoll_status_string(host_engine_status(e)));
        if (r == 0)
            win0 = win;
        else if (win != win0)
            FAILF("group %d: rank %d holds window %u, rank 0 %u", g, r, win,
                  win0);
    }
    return (int)win0;
}

/* A lock round of group g alone; returns the window (0: refused). */
static int sw_lock(sw_t *w, int g, uint16_t nops, unsigned *why_p)
{
    memnet_start_lock(w->net, g, nops);
    if (sw_run(w, 10 * SEC) != 0)
        return -1;
    return sw_window(w, g, why_p);
}

static int sw_unlock(sw_t *w, int g)
{
    memnet_start_unlock(w->net, g);
    if (sw_run(w, 10 * SEC) != 0)
        return -1;
    return sw_window(w, g, NULL) == 0 ? 0 : -1;
}

/* Fills group g's int64 inputs from seed. */
static void fill_i64(sw_t *w, int g, uint64_t seed)
{
    for (int r = 0; r < w->n; r++) {
        int64_t *s = w->send[g][r];
        uint64_t st = seed * 1000 + (uint64_t)r;
        for (size_t i = 0; i < COUNT; i++)
            s[i] = (int64_t)(memnet_rand(&st) % 2000001) - 1000000;
        memset(w->recv[g][r], 0xA5, COUNT * 8);
    }
}

static void start_allreduce(sw_t *w, int g, incoll_dtype_t dt)
{
    memnet_start_allreduce(w->net, g, (const void *const *)w->send[g],
                           (void *const *)w->recv[g], COUNT, dt, INCOLL_OP_SUM);
}

/* Every rank of group g ended OK with the int64 sum of the inputs. */
static int check_i64(sw_t *w, int g)
{
    for (int r = 0; r < w->n; r++) {
        host_engine_t *e = memnet_host(w->net, g, r);
        const int64_t *got = w->recv[g][r];
        if (host_engine_status(e) != INCOLL_OK)
            FAILF("group %d rank %d: %s", g, r,
                  incoll_status_string(host_engine_status(e)));
        for (size_t i = 0; i < COUNT; i++) {
            int64_t want = 0;
            for (int k = 0; k < w->n; k++)
                want += ((const int64_t *)w->send[g][k])[i];
            if (got[i] != want)
                FAILF("group %d rank %d element %zu: %" PRId64
                      ", want %" PRId64,
                      g, r, i, got[i], want);
        }
    }
    return 0;
}

static int sw_allreduce(sw_t *w, int g, uint64_t seed)
{
    fill_i64(w, g, seed);
    start_allreduce(w, g, INCOLL_INT64);
    if (sw_run(w, 100 * SEC) != 0)
        return -1;
    return check_i64(w, g);
}

static uint64_t stream_ops(sw_t *w, int g, int r)
{
    return host_engine_counters(memnet_host(w->net, g, r))->stream_ops;
}

static agg_counters_t ctr(sw_t *w, int an)
{
    return memnet_an_counters(w->net, an);
}

/* Grant, use and release, then refusal while another group holds it, on
 * a 2-level and a 3-level tree. */
static int grant_refuse_release(const char *spec)
{
    sw_t w;
    unsigned why = 0;
    memnet_cfg_t cfg = {.seed = 3, .delay_ns = 2 * US};

    if (sw_init(&w, spec, 2, cfg, 0) != 0)
        return -1;
    if (sw_lock(&w, 0, 0, &why) != WINDOW)
        FAILF("%s: group 0 not granted the window it asked", spec);
    for (int a = 0; a < w.tree.nans; a++)
        if (ctr(&w, a).locks_granted != 1)
            FAILF("%s: an %d granted %" PRIu64, spec, a,
                  ctr(&w, a).locks_granted);
    for (int k = 0; k < 3; k++)
        if (sw_allreduce(&w, 0, 10 + (uint64_t)k) != 0)
            return -1;
    for (int a = 0; a < w.tree.nans; a++)
        if (ctr(&w, a).stream_bytes == 0)
            FAILF("%s: an %d streamed nothing", spec, a);
    if (stream_ops(&w, 0, 0) != 3)
        FAILF("%s: %" PRIu64 " stream ops", spec, stream_ops(&w, 0, 0));

    /* Group 1 is refused (the tree is held) and runs on its slots. */
    if (sw_lock(&w, 1, 1, &why) != 0 || why != WIRE_LOCK_HELD)
        FAILF("%s: group 1 not refused as held (why %u)", spec, why);
    if (ctr(&w, 0).locks_refused != 1)
        FAILF("%s: root counted %" PRIu64 " refusals", spec,
              ctr(&w, 0).locks_refused);
    if (sw_allreduce(&w, 1, 20) != 0 || stream_ops(&w, 1, 0) != 0)
        FAILF("%s: group 1's fallback wrong", spec);

    /* Release: group 1 (the oldest waiter) gets the tree. */
    if (sw_unlock(&w, 0) != 0)
        FAILF("%s: unlock failed", spec);
    if (sw_lock(&w, 1, 1, &why) != WINDOW)
        FAILF("%s: group 1 not granted after the release", spec);
    if (sw_allreduce(&w, 1, 21) != 0 || stream_ops(&w, 1, 0) != 1)
        FAILF("%s: group 1's stream op wrong", spec);
    {
        uint32_t left = 9;
        host_engine_stream_window(memnet_host(w.net, 1, 0), &left, NULL);
        if (left != 0)
            FAILF("%s: lock for 1 op has %u left after it", spec, left);
    }
    if (sw_unlock(&w, 1) != 0)
        FAILF("%s: unlock of group 1 failed", spec);
    /* Both released: small operations of group 0 still use the slots. */
    if (sw_allreduce(&w, 0, 30) != 0 || stream_ops(&w, 0, 0) != 3)
        FAILF("%s: op after release", spec);
    sw_free(&w);
    return 0;
}

TEST(stream_lock_grant_refuse_release, TEST_UNIT)
{
    CHECK(grant_refuse_release("[4]") == 0);
    CHECK(grant_refuse_release("[[2][3]]") == 0);
    CHECK(grant_refuse_release("[[[2][1]][[2]] 1]") == 0);
    return TEST_PASSED;
}

/* Two groups ask for the same tree at the same moment: one streams, the
 * other falls back to its slots; both get correct results, running at
 * the same time. */
TEST(stream_two_groups_race, TEST_UNIT)
{
    for (uint64_t seed = 1; seed <= 6; seed++) {
        sw_t w;
        unsigned why0 = 0, why1 = 0;
        int w0, w1, holder;
        memnet_cfg_t cfg = {.seed = seed,
                            .delay_ns = 2 * US,
                            .jitter_ns = 3 * US,
                            .start_skew_ns = 5 * US};
        CHECK(sw_init(&w, "[[3][2][2]]", 2, cfg, 0) == 0);
        memnet_start_lock(w.net, 0, 0);
        memnet_start_lock(w.net, 1, 0);
        CHECK(sw_run(&w, 10 * SEC) == 0);
        w0 = sw_window(&w, 0, &why0);
        w1 = sw_window(&w, 1, &why1);
        CHECK(w0 >= 0 && w1 >= 0);
        /* Each AN reserves for one group at a time: at most one wins
         * (both may lose, each refused where the other reserved). */
        CHECK_MSG(!(w0 > 0 && w1 > 0), "seed %" PRIu64 ": both granted", seed);
        holder = w0 > 0 ? 0 : w1 > 0 ? 1 : -1;
        fill_i64(&w, 0, seed * 7);
        fill_i64(&w, 1, seed * 7 + 1);
        start_allreduce(&w, 0, INCOLL_INT64);
        start_allreduce(&w, 1, INCOLL_INT64);
        CHECK(sw_run(&w, 100 * SEC) == 0);
        CHECK(check_i64(&w, 0) == 0);
        CHECK(check_i64(&w, 1) == 0);
        for (int g = 0; g < 2; g++)
            CHECK_EQ_INT(stream_ops(&w, g, 0), g == holder ? 1 : 0);
        if (holder >= 0)
            CHECK(sw_unlock(&w, holder) == 0);
        /* The other gets the tree afterwards; when both lost, the one
         * with the older ticket first, then the other. */
        {
            int done[2] = {holder == 0, holder == 1}, tries = 0;
            while (!(done[0] && done[1]) && tries++ < 4) {
                for (int g = 0; g < 2; g++) {
                    unsigned why = 0;
                    int win;
                    if (done[g])
                        continue;
                    win = sw_lock(&w, g, 1, &why);
                    CHECK(win >= 0);
                    if (win == 0) {
                        CHECK_MSG(holder < 0 && why == WIRE_LOCK_QUEUED,
                                  "seed %" PRIu64 ": group %d refused (%u)",
                                  seed, g, why);
                        continue;
                    }
                    CHECK(sw_allreduce(&w, g, seed + 99) == 0);
                    CHECK_EQ_INT(stream_ops(&w, g, 0), 1);
                    CHECK(sw_unlock(&w, g) == 0);
                    done[g] = 1;
                }
            }
            CHECK_MSG(done[0] && done[1], "seed %" PRIu64 ": starved", seed);
        }
        sw_free(&w);
    }
    return TEST_PASSED;
}

/* A holder that goes quiet (killed, or just silent) loses the tree to the
 * next group that asks after the idle time; if it comes back, its stream
 * operation fails at once (the ANs say the lock is gone) instead of
 * hanging. */
TEST(stream_holder_quiet_reclaimed, TEST_UNIT)
{
    sw_t w;
    unsigned why = 0;
    uint64_t reclaimed = 0;
    memnet_cfg_t cfg = {.seed = 5, .delay_ns = 2 * US, .lock_idle_ns = 20 * MS};

    CHECK(sw_init(&w, "[[2][2]]", 2, cfg, 0) == 0);
    CHECK(sw_lock(&w, 0, 0, &why) == WINDOW);
    CHECK(sw_allreduce(&w, 0, 1) == 0);
    /* Group 0 falls silent. Group 1 is refused while the holder is fresh. */
    CHECK(sw_lock(&w, 1, 0, &why) == 0);
    CHECK_EQ_INT(why, WIRE_LOCK_HELD);
    memnet_advance(w.net, memnet_now(w.net) + 25 * MS);
    CHECK(sw_lock(&w, 1, 0, &why) == WINDOW);
    for (int a = 0; a < w.tree.nans; a++)
        reclaimed += ctr(&w, a).locks_reclaimed;
    CHECK_EQ_INT(reclaimed, (uint64_t)w.tree.nans);
    CHECK(sw_allreduce(&w, 1, 2) == 0);
    CHECK_EQ_INT(stream_ops(&w, 1, 0), 1);
    /* Group 0 comes back believing it holds the tree: it learns it does
     * not, and its operation fails in bounded time. */
    fill_i64(&w, 0, 3);
    start_allreduce(&w, 0, INCOLL_INT64);
    CHECK(sw_run(&w, 10 * SEC) == 0);
    for (int r = 0; r < w.n; r++) {
        host_engine_t *e = memnet_host(w.net, 0, r);
        CHECK_EQ_INT(host_engine_status(e), INCOLL_ERR_GROUP_FAILED);
        CHECK_EQ_INT(host_engine_counters(e)->locks_lost, 1);
    }
    CHECK(sw_unlock(&w, 1) == 0);
    sw_free(&w);
    return TEST_PASSED;
}

/* Fairness: refused groups wait in ticket order. With group 0 holding,
 * group 1 then group 2 are refused; after the release group 2 asking
 * first is refused again (group 1 waited longer), group 1 gets the tree,
 * then group 2. */
TEST(stream_fair_queue, TEST_UNIT)
{
    sw_t w;
    unsigned why = 0;
    memnet_cfg_t cfg = {.seed = 9, .delay_ns = 2 * US, .lock_idle_ns = SEC};

    CHECK(sw_init(&w, "[[2][1]]", 3, cfg, 0) == 0);
    CHECK(sw_lock(&w, 0, 0, &why) == WINDOW);
    CHECK(sw_lock(&w, 1, 0, &why) == 0);
    CHECK_EQ_INT(why, WIRE_LOCK_HELD);
    memnet_advance(w.net, memnet_now(w.net) + MS);
    CHECK(sw_lock(&w, 2, 0, &why) == 0);
    CHECK(sw_unlock(&w, 0) == 0);
    CHECK(sw_lock(&w, 2, 0, &why) == 0);
    CHECK_EQ_INT(why, WIRE_LOCK_QUEUED);
    /* A newcomer (never refused) queues behind both. */
    CHECK(sw_lock(&w, 0, 0, &why) == 0);
    CHECK_EQ_INT(why, WIRE_LOCK_QUEUED);
    CHECK(sw_lock(&w, 1, 0, &why) == WINDOW);
    CHECK(sw_allreduce(&w, 1, 4) == 0);
    CHECK(sw_unlock(&w, 1) == 0);
    CHECK(sw_lock(&w, 2, 0, &why) == WINDOW);
    CHECK(sw_allreduce(&w, 2, 5) == 0);
    CHECK(sw_unlock(&w, 2) == 0);
    CHECK(sw_lock(&w, 0, 0, &why) == WINDOW);
    CHECK(sw_unlock(&w, 0) == 0);
    sw_free(&w);
    return TEST_PASSED;
}

/* Credits under loss: 5% of packets (lock rounds included) lost,
 * duplicated and reordered; twenty streamed allreduces, every result
 * checked, each contribution counted once at every AN. */
static int stream_lossy_run(void);

TEST(stream_lossy, TEST_UNIT)
{
    return stream_lossy_run();
}

static int stream_lossy_run(void)
{
    sw_t w;
    memnet_cfg_t cfg = {.seed = 17,
                        .delay_ns = 5 * US,
                        .jitter_ns = 10 * US,
                        .drop = 0.05,
                        .dup = 0.02,
                        .reorder = 0.05,
                        .reorder_ns = 30 * US};
    uint64_t acc0 = 0, acc1 = 0, nseg = (COUNT * 8 + PAYLOAD - 1) / PAYLOAD;

    CHECK(sw_init(&w, "[[3][2][2]]", 1, cfg, 1) == 0);
    CHECK(sw_lock(&w, 0, 0, NULL) == WINDOW);
    acc0 = ctr(&w, 0).contribs_accepted;
    for (uint64_t k = 0; k < 20; k++)
        CHECK(sw_allreduce(&w, 0, 100 + k) == 0);
    CHECK(sw_unlock(&w, 0) == 0);
    acc1 = ctr(&w, 0).contribs_accepted;
    /* The root has 3 children: each segment counted exactly 3 times. */
    CHECK_EQ_INT(acc1 - acc0, 20 * nseg * 3);
    CHECK_EQ_INT(stream_ops(&w, 0, 0), 20);
    CHECK(memnet_stats(w.net)->dropped > 0);
    /* A lock per operation: lock, allreduce, unlock, and at once the next
     * lock, which some members send while others still wait for their
     * lost unlock answer. */
    for (uint64_t k = 0; k < 30; k++) {
        CHECK(sw_lock(&w, 0, 1, NULL) == WINDOW);
        CHECK(sw_allreduce(&w, 0, 200 + k) == 0);
        CHECK(sw_unlock(&w, 0) == 0);
    }
    CHECK_EQ_INT(stream_ops(&w, 0, 0), 50);
    sw_free(&w);
    return TEST_PASSED;
}

/* Steps the network until no host of group g waits for the answer to its
 * background unlock. */
static int sw_settle(sw_t *w, int g, uint64_t limit)
{
    uint64_t end = memnet_now(w->net) + limit;
    while (memnet_unlock_pending(w->net, g) > 0)
        if (memnet_now(w->net) > end || !memnet_step(w->net))
            FAILF("group %d: %d unlocks without answer after %" PRIu64 " ms", g,
                  memnet_unlock_pending(w->net, g), limit / MS);
    return 0;
}

/*
 * The unlock in the background (host_engine_unlock_bg, libincoll's
 * host_stream_end): a lock per operation, the operation streamed, then
 * every member starts the unlock and is idle again at once, its unlock
 * still without answer; the lock is no longer used (no window, a new lock
 * refused as busy), and an operation on the slots runs while the unlock
 * is in flight, right. The unlock then ends on every member, and the
 * other group gets the lock and streams. Over two trees, without loss and
 * with 5% loss, 2% duplicates and reordering; every contribution counted
 * exactly once at the root.
 */
static int unlock_bg_run(const char *spec, double drop)
{
    sw_t w;
    memnet_cfg_t cfg = {.seed = 29,
                        .delay_ns = 5 * US,
                        .jitter_ns = 10 * US,
                        .drop = drop,
                        .dup = drop > 0 ? 0.02 : 0,
                        .reorder = drop > 0 ? 0.05 : 0,
                        .reorder_ns = 30 * US};
    uint64_t acc0, acc1, nseg = (COUNT * 8 + PAYLOAD - 1) / PAYLOAD;
    uint64_t rounds = 8, granted0;
    int kinds[64], kids;

    CHECK(sw_init(&w, spec, 2, cfg, 1) == 0);
    kids = memnet_tree_children(&w.tree, 0, kinds);
    acc0 = ctr(&w, 0).contribs_accepted;
    granted0 = ctr(&w, 0).locks_granted;
    for (uint64_t k = 0; k < rounds; k++) {
        int g = (int)(k % 2), other = 1 - g;
        host_engine_t *e0 = memnet_host(w.net, g, 0);
        uint64_t st = stream_ops(&w, g, 0);

        CHECK_EQ_INT(sw_lock(&w, g, 1, NULL), WINDOW);
        CHECK(sw_allreduce(&w, g, 500 + k) == 0);
        CHECK_EQ_INT(stream_ops(&w, g, 0), st + 1);
        memnet_start_unlock_bg(w.net, g);
        CHECK(sw_run(&w, 10 * SEC) == 0);
        /* Every member idle, its operation's status kept, the unlock
         * started and not yet answered (the answer is a round trip of
         * the tree away). */
        CHECK_EQ_INT(memnet_unlock_pending(w.net, g), w.n);
        for (int r = 0; r < w.n; r++)
            CHECK_EQ_INT(memnet_start_status(w.net, g, r), INCOLL_INPROGRESS);
        CHECK_EQ_INT(sw_window(&w, g, NULL), 0);
        CHECK_EQ_INT(host_engine_lock(e0, 1, memnet_now(w.net)),
                     INCOLL_ERR_BUSY);
        /* An operation on the slots beside the unlock. */
        fill_i64(&w, g, 600 + k);
        start_allreduce(&w, g, INCOLL_INT64);
        CHECK(sw_run(&w, 100 * SEC) == 0);
        CHECK(check_i64(&w, g) == 0);
        CHECK_EQ_INT(stream_ops(&w, g, 0), st + 1);
        /* The unlock ends on every member; then the tree is free. */
        CHECK(sw_settle(&w, g, 10 * SEC) == 0);
        CHECK_EQ_INT(sw_window(&w, g, NULL), 0);
        CHECK_EQ_INT(host_engine_counters(e0)->timeouts, 0);
        CHECK_EQ_INT(sw_lock(&w, other, 1, NULL), WINDOW);
        CHECK(sw_allreduce(&w, other, 700 + k) == 0);
        memnet_start_unlock_bg(w.net, other);
        CHECK(sw_run(&w, 10 * SEC) == 0);
        CHECK(sw_settle(&w, other, 10 * SEC) == 0);
    }
    acc1 = ctr(&w, 0).contribs_accepted;
    /* Three operations a round, each segment once per child of the root. */
    CHECK_EQ_INT(acc1 - acc0, rounds * 3 * nseg * (uint64_t)kids);
    CHECK_EQ_INT(ctr(&w, 0).locks_granted - granted0, rounds * 2);
    CHECK_EQ_INT(stream_ops(&w, 0, 0) + stream_ops(&w, 1, 0), rounds * 2);
    if (drop > 0)
        CHECK(memnet_stats(w.net)->dropped > 0);
    sw_free(&w);
    return TEST_PASSED;
}

/*
 * The lock rules with ANs of 2 and 4 shards (incoll-agg's threads): lock
 * rounds and the stream window live on the first shard, the slots are
 * spread; grant, refusal and release, two groups racing for the tree,
 * credits under loss, unlock in the background beside operations on the
 * slots.
 */
TEST(stream_shards, TEST_UNIT)
{
    static const int shards[] = {2, 4};
    for (int k = 0; k < 2; k++) {
        sw_shards = shards[k];
        CHECK(grant_refuse_release("[[2][3]]") == 0);
        CHECK(stream_lossy_run() == TEST_PASSED);
        CHECK(unlock_bg_run("[[3][2][2]]", 0.05) == TEST_PASSED);
    }
    sw_shards = 0;
    return TEST_PASSED;
}

TEST(stream_unlock_in_background, TEST_UNIT)
{
    CHECK(unlock_bg_run("[4]", 0) == TEST_PASSED);
    CHECK(unlock_bg_run("[[3][2][2]]", 0) == TEST_PASSED);
    CHECK(unlock_bg_run("[4]", 0.05) == TEST_PASSED);
    CHECK(unlock_bg_run("[[3][2][2]]", 0.05) == TEST_PASSED);
    return TEST_PASSED;
}

/*
 * Streamed operations alternating with operations on the slots, over
 * links shaped as the emulated fabric's tbf (50 Mbit/s, two frames of
 * tokens), nothing lost. The slots keep 8 segments in flight and learn a
 * round trip of a few packet times; a streamed operation queues its whole
 * window behind each host's link, and its hosts start it up to 6 ms apart
 * (ranks that each send a window at once on a shared CPU do). A segment of
 * the window outlives the slots' timer by far without being late, so each
 * slot space has a timer of its own: the streamed operations must not
 * resend their window on the timer the slots learnt just before (each
 * alternation did, which halved streaming's bandwidth in a sweep of both).
 * Every result is checked; no segment is resent on a timeout.
 */
TEST(stream_alternate_keeps_timers, TEST_UNIT)
{
    sw_t w;
    memnet_cfg_t cfg = {.seed = 23,
                        .delay_ns = 20 * US,
                        .jitter_ns = 5 * US,
                        .link_rate = 6250000,
                        .link_burst = 2 * (PAYLOAD + 64)},
                 skew = cfg;
    host_engine_counters_t c0 = {0}, c1;

    skew.start_skew_ns = 6 * MS;
    CHECK(sw_init(&w, "[4]", 1, cfg, 0) == 0);
    for (uint64_t k = 0; k < 8; k++) {
        CHECK(sw_allreduce(&w, 0, 300 + k) == 0);
        CHECK(sw_lock(&w, 0, 1, NULL) == WINDOW);
        memnet_set_faults(w.net, &skew);
        CHECK(sw_allreduce(&w, 0, 400 + k) == 0);
        memnet_set_faults(w.net, &cfg);
        CHECK(sw_unlock(&w, 0) == 0);
        CHECK(memnet_drain(w.net, SEC) == 0);
        if (k == 0)
            c0 = memnet_group_counters(w.net, 0);
    }
    c1 = memnet_group_counters(w.net, 0);
    CHECK_EQ_INT(stream_ops(&w, 0, 0), 8);
    /* No timer fired; a tail probe may resend one segment per silence
     * (two per operation at most) while a late host has not started. */
    CHECK_MSG(c1.retransmits == c0.retransmits &&
                  c1.fast_retransmits - c0.fast_retransmits <= 2 * 14 * 4,
              "%" PRIu64 " resent on a timeout (%" PRIu64 " spurious), %" PRIu64
              " fast, %" PRIu64 " probes",
              c1.retransmits - c0.retransmits, c1.spurious - c0.spurious,
              c1.fast_retransmits - c0.fast_retransmits, c1.probes - c0.probes);
    sw_free(&w);
    return TEST_PASSED;
}

/* Streamed float sums: the same bits on every rank, in every run whatever
 * the network does, and the same as the slots' (child-order reduction). */
static int float_run(uint64_t seed, int stream, float *out)
{
    sw_t w;
    memnet_cfg_t cfg = {.seed = seed,
                        .delay_ns = 3 * US,
                        .jitter_ns = 20 * US,
                        .drop = 0.02,
                        .reorder = 0.2,
                        .reorder_ns = 50 * US,
                        .start_skew_ns = 30 * US};
    if (sw_init(&w, "[[3][1][4]]", 1, cfg, 1) != 0)
        return -1;
    for (int r = 0; r < w.n; r++) {
        float *s = w.send[0][r];
        uint64_t st = 77 + (uint64_t)r;
        for (size_t i = 0; i < COUNT; i++)
            s[i] = (float)((memnet_rand_unit(&st) - 0.5) *
                           (double)(1u << (memnet_rand(&st) % 24)));
    }
    if (stream && sw_lock(&w, 0, 1, NULL) != WINDOW)
        FAILF("not granted");
    start_allreduce(&w, 0, INCOLL_FLOAT32);
    if (sw_run(&w, 100 * SEC) != 0)
        return -1;
    for (int r = 0; r < w.n; r++) {
        if (host_engine_status(memnet_host(w.net, 0, r)) != INCOLL_OK)
            FAILF("rank %d failed", r);
        if (memcmp(w.recv[0][r], w.recv[0][0], COUNT * sizeof(float)) != 0)
            FAILF("rank %d's bits differ from rank 0's", r);
    }
    if ((int)stream_ops(&w, 0, 0) != stream)
        FAILF("stream ops %" PRIu64, stream_ops(&w, 0, 0));
    memcpy(out, w.recv[0][0], COUNT * sizeof(float));
    if (stream && sw_unlock(&w, 0) != 0)
        return -1;
    sw_free(&w);
    return 0;
}

TEST(stream_float_deterministic, TEST_UNIT)
{
    static float ref[COUNT], got[COUNT];
    CHECK(float_run(1, 0, ref) == 0);
    for (uint64_t seed = 2; seed <= 5; seed++) {
        CHECK(float_run(seed, 1, got) == 0);
        CHECK_MSG(memcmp(ref, got, sizeof(ref)) == 0,
                  "seed %" PRIu64 ": streamed sum differs in bits", seed);
    }
    return TEST_PASSED;
}

/* An AN without a pool refuses (reason NOPOOL), and the refusal is no
 * error: the operation runs on the slots. */
TEST(stream_no_pool_refuses, TEST_UNIT)
{
    sw_t w;
    unsigned why = 0;
    memnet_cfg_t cfg = {.seed = 2, .delay_ns = 2 * US};
    cfg.stream_pool_bytes = 1000; /* not one stream slot */
    CHECK(sw_init(&w, "[[2][2]]", 1, cfg, 0) == 0);
    CHECK(sw_lock(&w, 0, 0, &why) == 0);
    CHECK_EQ_INT(why, WIRE_LOCK_POOL);
    CHECK(sw_allreduce(&w, 0, 3) == 0);
    CHECK_EQ_INT(stream_ops(&w, 0, 0), 0);
    sw_free(&w);
    return TEST_PASSED;
}

/* The lock packets' parser checks: reason and window in range, no
 * payload. */
TEST(stream_wire_lock_parse, TEST_UNIT)
{
    uint8_t buf[WIRE_HDR_LEN + 8];
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_LOCK,
                    .group = 1,
                    .epoch = 1,
                    .count = 16},
               out;
    const char *why = NULL;
    wire_pack(&h, buf);
    CHECK(wire_parse(buf, WIRE_HDR_LEN, &out, &why) == INCOLL_OK);
    CHECK_EQ_INT(out.count, 16);
    CHECK(wire_parse(buf, WIRE_HDR_LEN + 8, &out, &why) != INCOLL_OK);
    h.op = WIRE_LOCK_WHY_COUNT;
    wire_pack(&h, buf);
    CHECK(wire_parse(buf, WIRE_HDR_LEN, &out, &why) != INCOLL_OK);
    CHECK(strcmp(why, "bad lock reason") == 0);
    h.op = 0;
    h.count = 0;
    wire_pack(&h, buf);
    CHECK(wire_parse(buf, WIRE_HDR_LEN, &out, &why) != INCOLL_OK);
    CHECK(strcmp(why, "bad lock window") == 0);
    return TEST_PASSED;
}

/* ---- one AN driven packet by packet ---- */

typedef struct {
    int n;
    incoll_ep_t dst[64];
    wire_hdr_t h[64];
} cap_t;

static void cap_send(void *arg, incoll_ep_t dst, const void *hdr,
                     const void *payload, size_t len)
{
    cap_t *c = arg;
    uint8_t buf[WIRE_HDR_LEN];
    (void)payload;
    (void)len;
    memcpy(buf, hdr, WIRE_HDR_LEN);
    if (c->n < 64 &&
        wire_parse(buf, WIRE_HDR_LEN, &c->h[c->n], NULL) == INCOLL_OK)
        c->dst[c->n++] = dst;
}

/* Feeds the AN a lock-kind packet from child c (endpoint 100 + c). */
static void feed(agg_t *agg, const wire_key_t *key, uint8_t type, int c,
                 uint32_t seq)
{
    uint8_t buf[WIRE_HDR_LEN];
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = type,
                    .group = 9,
                    .child = (uint16_t)c,
                    .epoch = seq,
                    .count = 16,
                    .total = 1};
    wire_pack(&h, buf);
    wire_mac_seal(key, buf, buf, 0);
    agg_on_packet(agg, 100 + (incoll_ep_t)c, buf, WIRE_HDR_LEN);
}

/* 1 when the capture holds a packet of type for lock round seq to child
 * c. */
static int sent(const cap_t *cap, uint8_t type, int c, uint32_t seq)
{
    for (int i = 0; i < cap->n; i++)
        if (cap->h[i].type == type && cap->dst[i] == 100 + (incoll_ep_t)c &&
            cap->h[i].epoch == seq)
            return 1;
    return 0;
}

/* A member whose unlock answer was lost asks again after another member
 * already started the next lock round: it still gets its answer (else it
 * would wait for ever while the others wait for it in the new round). */
TEST(stream_unlock_answer_after_next_lock, TEST_UNIT)
{
    cap_t cap = {0};
    incoll_ep_t kids[2] = {100, 101};
    agg_params_t ap = {.name = "t",
                       .send = cap_send,
                       .send_arg = &cap,
                       .stream_pool_bytes = POOL};
    agg_group_params_t gp = {.id = 9,
                             .nchildren = 2,
                             .children = kids,
                             .parent = INCOLL_EP_NONE,
                             .slots = 4,
                             .max_payload = 256};
    agg_t *agg = agg_create(&ap);
    wire_key_t key;

    CHECK(agg != NULL);
    wire_key_derive(NULL, WIRE_KEY_GROUP, 9, 77, &key);
    gp.key = key;
    CHECK(agg_group_add(agg, &gp) == INCOLL_OK);
    feed(agg, &key, WIRE_LOCK, 0, 1);
    feed(agg, &key, WIRE_LOCK, 1, 1);
    CHECK(sent(&cap, WIRE_LOCK_REP, 0, 1) && sent(&cap, WIRE_LOCK_REP, 1, 1));
    CHECK_EQ_INT(agg_counters(agg)->locks_granted, 1);
    feed(agg, &key, WIRE_UNLOCK, 0, 1);
    feed(agg, &key, WIRE_UNLOCK, 1, 1);
    CHECK(sent(&cap, WIRE_UNLOCK_REP, 1, 1));
    /* Child 0 locks again at once; child 1's answer was lost. */
    feed(agg, &key, WIRE_LOCK, 0, 2);
    cap.n = 0;
    feed(agg, &key, WIRE_UNLOCK, 1, 1);
    CHECK_MSG(sent(&cap, WIRE_UNLOCK_REP, 1, 1),
              "the repeated unlock got no answer");
    feed(agg, &key, WIRE_LOCK, 1, 2);
    CHECK(sent(&cap, WIRE_LOCK_REP, 0, 2) && sent(&cap, WIRE_LOCK_REP, 1, 2));
    CHECK_EQ_INT(agg_counters(agg)->locks_granted, 2);
    agg_destroy(agg);
    return TEST_PASSED;
}
