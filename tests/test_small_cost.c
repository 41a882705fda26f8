/*
 * The cost of small broadcasts, counted exactly on the sans-I/O cores
 * (memnet), and one-way broadcasts (wire.h, WIRE_F_ONEWAY;
 * docs/wire-format.md, "One-way broadcasts") under loss and with a root
 * that runs ahead of a slow member:
 *  - small_bcast_datagrams: 1,000 broadcasts of 8 bytes, root rotating,
 *    on 8 hosts radix 4 send at most 10 datagrams into the ANs on
 *    average (the ANs' packets_in), every result right;
 *  - small_bcast_oneway_loss: the data alone lost (every tenth packet
 *    that carries it, up or down) and the acknowledgements alone lost
 *    (every third NODATA result of a one-way broadcast): every result
 *    right, exactly once;
 *  - small_bcast_window: a member that stops after the first broadcast
 *    while the root broadcasts on holds the root within the window (the
 *    root completes host_engine_oneway_every one-way broadcasts and waits
 *    in the round after them), and once it goes on, all complete with the
 *    right data;
 *  - small_bcast_late_root: a root 10 ms late costs each waiting member
 *    one packet (its timer's; the AN answers WAIT), not one per backoff;
 *  - small_bcast_early_data: data that reaches a member before it called
 *    its broadcast is kept for it: a one-way broadcast then costs that
 *    member no packet, a round's data is in as it starts;
 *  - small_allreduce_late_member: members waiting for a late one, their
 *    AN answering WAIT, wake only to send (a probe, a timeout);
 *  - integ_small_reduce_sent: a reduce's non-roots, returning early, have
 *    sent their contribution when the call returns (on real daemons).
 */
#include "integ.h"
#include "test.h"

#include "common/wire.h"
#include "core/agg_core.h"
#include "core/host_engine.h"
#include "memnet.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define SC_US UINT64_C(1000)
#define SC_SEC UINT64_C(1000000000)
#define SC_N 8
#define SC_BYTES 8

typedef struct {
    memnet_t *net;
    memnet_tree_t tree;
    int g;
    uint8_t buf[SC_N][SC_BYTES];
} sc_world_t;

static int sc_init_rto(sc_world_t *w, const memnet_cfg_t *cfg, uint32_t ahead,
                       uint64_t rto_max_ns)
{
    memnet_group_cfg_t g = {.id = 9,
                            .key = 0x5111A11,
                            .gen = 3,
                            .slots = 4,
                            .max_payload = 1024,
                            .ahead_bytes = ahead,
                            .rto_init_ns = 300 * SC_US,
                            .rto_min_ns = 100 * SC_US,
                            .rto_max_ns = rto_max_ns,
                            .max_retries = 100,
                            .progress_timeout_ns = 10 * SC_SEC};
    memset(w, 0, sizeof(*w));
    if (memnet_tree_radix(&w->tree, SC_N, 4) != 0)
        FAILF("tree");
    w->net = memnet_create(cfg);
    if (w->net == NULL || memnet_add_tree(w->net, &w->tree, 1) != 0)
        FAILF("memnet setup failed");
    w->g = memnet_add_group(w->net, &g);
    if (w->g < 0)
        FAILF("memnet_add_group failed");
    return 0;
}

static int sc_init(sc_world_t *w, const memnet_cfg_t *cfg, uint32_t ahead)
{
    return sc_init_rto(w, cfg, ahead, 2000 * SC_US);
}

static uint64_t an_packets_in(const sc_world_t *w)
{
    uint64_t n = 0;
    for (int a = 0; a < w->tree.nans; a++)
        n += memnet_an_counters(w->net, a).packets_in;
    return n;
}

/* The data of operation op: its bytes differ from every other's. */
static void sc_data(uint8_t *b, int op)
{
    for (int i = 0; i < SC_BYTES; i++)
        b[i] = (uint8_t)(op * 7 + i * 13 + 1);
}

/* ops broadcasts on every member, root rotating; each result checked. */
static int sc_bcasts(sc_world_t *w, int ops)
{
    uint8_t want[SC_BYTES];
    for (int op = 0; op < ops; op++) {
        const void *snd[SC_N] = {0};
        void *rcv[SC_N] = {0};
        int root = op % SC_N;
        sc_data(w->buf[root], op);
        memcpy(want, w->buf[root], SC_BYTES);
        for (int r = 0; r < SC_N; r++) {
            if (r == root) {
                snd[r] = w->buf[r];
                continue;
            }
            memset(w->buf[r], 0xEE, SC_BYTES);
            rcv[r] = w->buf[r];
        }
        memnet_start_coll(w->net, w->g, WIRE_COLL_BCAST, root, snd, rcv,
                          SC_BYTES, INCOLL_UINT8, INCOLL_OP_SUM);
        if (memnet_run(w->net, 60 * SC_SEC) != 0)
            FAILF("bcast %d: no completion (%d hosts busy)", op,
                  memnet_busy(w->net));
        for (int r = 0; r < SC_N; r++) {
            incoll_status_t st =
                host_engine_status(memnet_host(w->net, w->g, r));
            if (st != INCOLL_OK)
                FAILF("bcast %d: rank %d: %s", op, r, incoll_status_string(st));
            if (memcmp(w->buf[r], want, SC_BYTES) != 0)
                FAILF("bcast %d from %d: rank %d has the wrong data", op, root,
                      r);
        }
    }
    return 0;
}

TEST(small_bcast_datagrams, TEST_UNIT)
{
    memnet_cfg_t cfg = {.seed = 5,
                        .delay_ns = 5 * SC_US,
                        .jitter_ns = 5 * SC_US,
                        .start_skew_ns = 20 * SC_US};
    sc_world_t w;
    uint64_t in0, ahead = 0;
    double per_op;
    int ops = 1000;

    CHECK(sc_init(&w, &cfg, 16384) == 0);
    CHECK(host_engine_oneway_every(
              &(host_engine_params_t){.slots = 4, .ahead_bytes = 16384}) == 4);
    in0 = an_packets_in(&w);
    CHECK(sc_bcasts(&w, ops) == 0);
    per_op = (double)(an_packets_in(&w) - in0) / ops;
    for (int a = 0; a < w.tree.nans; a++) {
        agg_counters_t c = memnet_an_counters(w.net, a);
        CHECK_EQ_INT(c.malformed_dropped, 0);
        CHECK_EQ_INT(c.mismatch_dropped, 0);
        ahead += c.ahead_sent;
    }
    printf("  %.2f datagrams into the ANs per 8-byte bcast on 8 hosts radix "
           "4 (%" PRIu64 " data sent ahead by ANs)\n",
           per_op, ahead);
    CHECK_MSG(per_op <= 10.0, "%.2f datagrams into the ANs per bcast", per_op);
    memnet_destroy(w.net);

    /* Without the one-way broadcasts (INCOLL_BCAST_AHEAD=0): every
     * member's arrival, the leaves' aggregates and the root's results. */
    CHECK(sc_init(&w, &cfg, 0) == 0);
    in0 = an_packets_in(&w);
    CHECK(sc_bcasts(&w, 100) == 0);
    CHECK_EQ_INT(an_packets_in(&w) - in0, 100 * 12);
    memnet_destroy(w.net);
    return TEST_PASSED;
}

/* Loss placed exactly: the data of one-way broadcasts, or their
 * acknowledgements. */
typedef struct {
    int acks; /* 1: drop acknowledgements, 0: drop data */
    int every;
    uint64_t seen, dropped;
} sc_loss_t;

static int sc_filter(void *arg, incoll_ep_t src, incoll_ep_t dst,
                     const uint8_t *pkt, size_t len)
{
    sc_loss_t *l = arg;
    wire_hdr_t h;
    int ack;
    (void)src;
    (void)dst;
    if (wire_parse(pkt, len, &h, NULL) != INCOLL_OK ||
        !(h.flags & WIRE_F_ONEWAY) || (h.flags & WIRE_F_QUERY))
        return 0;
    ack = h.type == WIRE_RESULT && (h.flags & WIRE_F_NODATA);
    if (l->acks ? !ack : (h.flags & WIRE_F_NODATA) != 0)
        return 0;
    if (++l->seen % (uint64_t)l->every != 0)
        return 0;
    l->dropped++;
    return 1;
}

TEST(small_bcast_oneway_loss, TEST_UNIT)
{
    for (int acks = 0; acks <= 1; acks++) {
        memnet_cfg_t cfg = {.seed = 17 + (uint64_t)acks,
                            .delay_ns = 5 * SC_US,
                            .jitter_ns = 5 * SC_US,
                            .start_skew_ns = 20 * SC_US};
        sc_loss_t loss = {.acks = acks, .every = acks ? 3 : 10};
        host_engine_counters_t hc;
        sc_world_t w;
        CHECK(sc_init(&w, &cfg, 16384) == 0);
        memnet_set_filter(w.net, sc_filter, &loss);
        CHECK_MSG(sc_bcasts(&w, 300) == 0, "%s lost",
                  acks ? "acknowledgements" : "data");
        hc = memnet_group_counters(w.net, w.g);
        printf("  %s lost: %" PRIu64 " dropped, %" PRIu64 " retransmissions\n",
               acks ? "acknowledgements" : "data", loss.dropped,
               hc.retransmits + hc.fast_retransmits);
        CHECK_MSG(loss.dropped >= 20, "only %" PRIu64 " packets dropped",
                  loss.dropped);
        CHECK(hc.retransmits + hc.fast_retransmits > 0);
        memnet_destroy(w.net);
    }
    return TEST_PASSED;
}

TEST(small_bcast_window, TEST_UNIT)
{
    memnet_cfg_t cfg = {.seed = 23, .delay_ns = 5 * SC_US};
    sc_world_t w;
    int next[SC_N] = {0}, ops = 40, slow = 6, held_at = -1;
    uint64_t steps = 0, t0;
    uint32_t every;

    CHECK(sc_init(&w, &cfg, 16384) == 0);
    every = host_engine_oneway_every(
        &(host_engine_params_t){.slots = 4, .ahead_bytes = 16384});
    /* Root 0 broadcasts ops times; rank `slow` stops after the first
     * until the others can go no further. */
    t0 = memnet_now(w.net);
    for (int pass = 0; pass < 2; pass++) {
        for (;;) {
            int started = 0;
            for (int r = 0; r < SC_N; r++) {
                host_engine_t *e = memnet_host(w.net, w.g, r);
                if ((r == slow && pass == 0 && next[r] >= 1) ||
                    next[r] >= ops ||
                    host_engine_status(e) == INCOLL_INPROGRESS ||
                    host_engine_counters(e)->ops < (uint64_t)next[r])
                    continue;
                if (next[r] > 0 && host_engine_status(e) != INCOLL_OK)
                    FAILF("rank %d op %d: %s", r, next[r] - 1,
                          incoll_status_string(host_engine_status(e)));
                if (r != 0 && next[r] > 0) {
                    uint8_t want[SC_BYTES];
                    sc_data(want, next[r] - 1);
                    if (memcmp(w.buf[r], want, SC_BYTES) != 0)
                        FAILF("rank %d op %d: wrong data", r, next[r] - 1);
                }
                if (r == 0)
                    sc_data(w.buf[0], next[0]);
                else
                    memset(w.buf[r], 0xEE, SC_BYTES);
                memnet_start_one(w.net, w.g, r, WIRE_COLL_BCAST, 0,
                                 r == 0 ? w.buf[0] : NULL,
                                 r == 0 ? NULL : w.buf[r], SC_BYTES,
                                 INCOLL_UINT8, INCOLL_OP_SUM);
                next[r]++;
                started = 1;
            }
            if (!started && !memnet_step(w.net))
                break;
            if (pass == 0 && memnet_now(w.net) > t0 + 30 * 1000 * SC_US)
                break; /* 30 ms: the others wait for `slow` */
            if (++steps > 10000000)
                FAILF("no end");
        }
        if (pass == 0) {
            held_at = next[0];
            CHECK_EQ_INT(host_engine_status(memnet_host(w.net, w.g, 0)),
                         INCOLL_INPROGRESS);
        }
    }
    CHECK(memnet_run(w.net, 60 * SC_SEC) == 0);
    printf("  the root started %d of %d broadcasts while a member did only "
           "the first (window %u)\n",
           held_at, ops, every);
    CHECK_MSG(held_at == 1 + (int)every,
              "root started %d broadcasts ahead of a member", held_at);
    for (int r = 0; r < SC_N; r++) {
        uint8_t want[SC_BYTES];
        CHECK_EQ_INT(next[r], ops);
        CHECK_EQ_INT(host_engine_status(memnet_host(w.net, w.g, r)), INCOLL_OK);
        sc_data(want, ops - 1);
        if (r != 0)
            CHECK_MSG(memcmp(w.buf[r], want, SC_BYTES) == 0,
                      "rank %d: wrong data of the last broadcast", r);
    }
    memnet_destroy(w.net);
    return TEST_PASSED;
}

/*
 * A root that calls a one-way broadcast 10 ms after the other members
 * (the timers' bound 100 ms): each waiting member's timer goes once, its
 * leaf AN answers WAIT, and it sends nothing more until the data comes;
 * every member gets the right data.
 */
TEST(small_bcast_late_root, TEST_UNIT)
{
    memnet_cfg_t cfg = {.seed = 29, .delay_ns = 5 * SC_US};
    sc_world_t w;
    uint64_t sent0[SC_N], waits0[SC_N], t0;
    uint8_t want[SC_BYTES];
    const int op = 1, root = 1;

    CHECK(sc_init_rto(&w, &cfg, 16384, 100000 * SC_US) == 0);
    CHECK(sc_bcasts(&w, op) == 0); /* a round: sequence number 0 */
    for (int r = 0; r < SC_N; r++) {
        const host_engine_counters_t *k =
            host_engine_counters(memnet_host(w.net, w.g, r));
        sent0[r] = k->packets_sent;
        waits0[r] = k->waits;
        if (r == root)
            continue;
        memset(w.buf[r], 0xEE, SC_BYTES);
        memnet_start_one(w.net, w.g, r, WIRE_COLL_BCAST, root, NULL, w.buf[r],
                         SC_BYTES, INCOLL_UINT8, INCOLL_OP_SUM);
    }
    /* The members wait for the root: no completion within 10 ms. */
    t0 = memnet_now(w.net);
    CHECK(memnet_run(w.net, 10000 * SC_US) != 0);
    memnet_advance(w.net, t0 + 10000 * SC_US);
    sc_data(w.buf[root], op);
    memcpy(want, w.buf[root], SC_BYTES);
    memnet_start_one(w.net, w.g, root, WIRE_COLL_BCAST, root, w.buf[root], NULL,
                     SC_BYTES, INCOLL_UINT8, INCOLL_OP_SUM);
    CHECK(memnet_run(w.net, 60 * SC_SEC) == 0);
    for (int r = 0; r < SC_N; r++) {
        const host_engine_counters_t *k =
            host_engine_counters(memnet_host(w.net, w.g, r));
        CHECK_EQ_INT(host_engine_status(memnet_host(w.net, w.g, r)), INCOLL_OK);
        if (r == root)
            continue;
        CHECK_MSG(memcmp(w.buf[r], want, SC_BYTES) == 0, "rank %d: wrong data",
                  r);
        CHECK_MSG(k->packets_sent - sent0[r] == 1,
                  "rank %d sent %" PRIu64 " packets waiting 10 ms for the "
                  "root",
                  r, k->packets_sent - sent0[r]);
        CHECK_EQ_INT(k->waits - waits0[r], 1);
    }
    memnet_destroy(w.net);
    return TEST_PASSED;
}

/*
 * Data that comes before a member started its broadcast (host_engine.c,
 * "Early data"): members 2 (the root's leaf) and 6 (another leaf) call
 * the one-way broadcast of sequence number 1 only after the others
 * completed it and its data reached them, and the round of sequence
 * number 4 only after its data went ahead to them. Each keeps the data
 * and takes it as it starts: the one-way broadcast completes at once
 * without a packet, the round's data is in at once (ahead); every
 * result is right.
 */
static int sc_start_some(sc_world_t *w, int op, int root, const int *late,
                         int nlate, int only_late, uint64_t limit_ns)
{
    for (int r = 0; r < SC_N; r++) {
        int is_late = 0;
        for (int i = 0; i < nlate; i++)
            is_late |= late[i] == r;
        if (is_late != only_late)
            continue;
        if (r == root)
            sc_data(w->buf[r], op);
        else
            memset(w->buf[r], 0xEE, SC_BYTES);
        memnet_start_one(w->net, w->g, r, WIRE_COLL_BCAST, root,
                         r == root ? w->buf[r] : NULL,
                         r == root ? NULL : w->buf[r], SC_BYTES, INCOLL_UINT8,
                         INCOLL_OP_SUM);
    }
    return memnet_run(w->net, limit_ns);
}

TEST(small_bcast_early_data, TEST_UNIT)
{
    memnet_cfg_t cfg = {.seed = 31, .delay_ns = 5 * SC_US};
    const int late[2] = {2, 6};
    sc_world_t w;
    uint64_t sent0[2], early0[2], ahead0[2];

    CHECK(sc_init_rto(&w, &cfg, 16384, 100000 * SC_US) == 0);
    CHECK(sc_bcasts(&w, 1) == 0); /* a round: sequence number 0 */
    for (int op = 1; op <= 4; op++) {
        int root = op == 4 ? 4 : 1;
        uint8_t want[SC_BYTES];
        for (int i = 0; i < 2; i++) {
            const host_engine_counters_t *k =
                host_engine_counters(memnet_host(w.net, w.g, late[i]));
            sent0[i] = k->packets_sent;
            early0[i] = k->early;
            ahead0[i] = k->ahead;
        }
        if (op == 4) {
            /* The round waits for the late members: the others start
             * it, and its data goes ahead to all. */
            CHECK(sc_start_some(&w, op, root, late, 2, 0, 5000 * SC_US) != 0);
        } else {
            CHECK(sc_start_some(&w, op, root, late, 2, 0, 60 * SC_SEC) == 0);
            CHECK(memnet_drain(w.net, SC_SEC) == 0);
        }
        CHECK(sc_start_some(&w, op, root, late, 2, 1, 60 * SC_SEC) == 0);
        sc_data(want, op);
        for (int r = 0; r < SC_N; r++) {
            CHECK_EQ_INT(host_engine_status(memnet_host(w.net, w.g, r)),
                         INCOLL_OK);
            if (r != root)
                CHECK_MSG(memcmp(w.buf[r], want, SC_BYTES) == 0,
                          "op %d: rank %d has the wrong data", op, r);
        }
        for (int i = 0; i < 2 && (op == 1 || op == 4); i++) {
            const host_engine_counters_t *k =
                host_engine_counters(memnet_host(w.net, w.g, late[i]));
            if (op == 1)
                CHECK_MSG(k->packets_sent == sent0[i],
                          "rank %d sent %" PRIu64 " packets for a one-way "
                          "broadcast whose data it had",
                          late[i], k->packets_sent - sent0[i]);
            else
                CHECK_MSG(k->ahead - ahead0[i] == 1 &&
                              k->packets_sent - sent0[i] == 1,
                          "rank %d: round: %" PRIu64 " data ahead, %" PRIu64
                          " packets sent",
                          late[i], k->ahead - ahead0[i],
                          k->packets_sent - sent0[i]);
            CHECK_MSG(k->early - early0[i] == 1,
                      "op %d: rank %d kept %" PRIu64 " early packets", op,
                      late[i], k->early - early0[i]);
        }
    }
    memnet_destroy(w.net);
    return TEST_PASSED;
}

/*
 * A member late for an allreduce of one packet: the others' timers go (a
 * tail probe, a timeout), their leaf AN answers WAIT, and they wait for
 * the late member without waking for nothing: every timer event of a
 * waiting member sends a packet (its start, a probe, a timeout). Before,
 * the WAIT moved the segment's timeout 20 ms on but not the engine's
 * deadline (host_engine_deadline), which stayed at the earlier one: each
 * waiting member woke once more there, to send nothing.
 */
TEST(small_allreduce_late_member, TEST_UNIT)
{
    memnet_cfg_t cfg = {.seed = 31, .delay_ns = 5 * SC_US};
    sc_world_t w;
    int64_t in[SC_N], out[SC_N];
    const void *snd[SC_N];
    void *rcv[SC_N];
    uint64_t fires0, t0, sent = 0, waits = 0, fires;
    const int late = 7;

    CHECK(sc_init_rto(&w, &cfg, 0, 100000 * SC_US) == 0);
    for (int r = 0; r < SC_N; r++) {
        in[r] = r + 1;
        snd[r] = &in[r];
        rcv[r] = &out[r];
    }
    /* One allreduce first: the timers learn the round trip. */
    memnet_start_allreduce(w.net, w.g, snd, rcv, 1, INCOLL_INT64,
                           INCOLL_OP_SUM);
    CHECK(memnet_run(w.net, 60 * SC_SEC) == 0);
    fires0 = memnet_stats(w.net)->timer_fires;
    for (int r = 0; r < SC_N; r++) {
        const host_engine_counters_t *k =
            host_engine_counters(memnet_host(w.net, w.g, r));
        sent -= k->packets_sent;
        waits -= k->waits;
        if (r != late)
            memnet_start_one(w.net, w.g, r, WIRE_COLL_ALLREDUCE, -1, &in[r],
                             &out[r], 1, INCOLL_INT64, INCOLL_OP_SUM);
    }
    t0 = memnet_now(w.net);
    CHECK(memnet_run(w.net, 10000 * SC_US) != 0); /* (they wait) */
    memnet_advance(w.net, t0 + 10000 * SC_US);
    fires = memnet_stats(w.net)->timer_fires - fires0;
    for (int r = 0; r < SC_N; r++) {
        const host_engine_counters_t *k =
            host_engine_counters(memnet_host(w.net, w.g, r));
        sent += k->packets_sent;
        waits += k->waits;
    }
    printf("  7 members waiting 10 ms: %" PRIu64 " timer events, %" PRIu64
           " datagrams sent, %" PRIu64 " WAIT answers\n",
           fires, sent, waits);
    CHECK_MSG(waits >= SC_N - 1, "%" PRIu64 " WAIT answers", waits);
    CHECK_MSG(fires == sent,
              "%" PRIu64 " timer events of the waiting members, %" PRIu64
              " of them sent nothing",
              fires, fires - sent);
    memnet_start_one(w.net, w.g, late, WIRE_COLL_ALLREDUCE, -1, &in[late],
                     &out[late], 1, INCOLL_INT64, INCOLL_OP_SUM);
    CHECK(memnet_run(w.net, 60 * SC_SEC) == 0);
    for (int r = 0; r < SC_N; r++) {
        CHECK_EQ_INT(host_engine_status(memnet_host(w.net, w.g, r)), INCOLL_OK);
        CHECK_EQ_INT(out[r], SC_N * (SC_N + 1) / 2);
    }
    memnet_destroy(w.net);
    return TEST_PASSED;
}

/* The datagrams rank's host-based engine took during kind's loop
 * (cost_check's hostrx; -1: not found), and in *early_p those of the
 * next loop's broadcasts that came meanwhile (early). */
static long cost_hostrx(const char *text, int rank, const char *kind,
                        long *early_p)
{
    char key[64];
    const char *p;
    long v;
    snprintf(key, sizeof(key), "cost rank=%d kind=%s hostrx=", rank, kind);
    p = strstr(text, key);
    if (p == NULL || sscanf(p + strlen(key), "%ld early=%ld", &v, early_p) != 2)
        return -1;
    return v;
}

/* The counts of one cost_check line of kind for rank (-1: not found). */
static int cost_line(const char *text, int rank, const char *kind, long v[5])
{
    char key[64];
    const char *p;
    snprintf(key, sizeof(key), "cost rank=%d kind=%s ", rank, kind);
    p = strstr(text, key);
    if (p == NULL ||
        sscanf(p + strlen(key), "ops=%ld tx=%ld rx=%ld wake=%ld resent=%ld",
               &v[0], &v[1], &v[2], &v[3], &v[4]) != 5)
        return -1;
    return 0;
}

/*
 * The counters on real daemons (tests/progs/cost_check, 8 hosts radix 4,
 * flat, one-way broadcasts on, adaptive copies off so that every
 * datagram is a first transmission or a counted resend): per rank, an
 * allreduce of one packet sends exactly one datagram and receives
 * exactly one (plus one per resend and its answer; datagrams of the
 * host-based exchanges of the set-up, whose last acknowledgements may
 * come late, are counted apart), and wakes at most
 * once (twice when it resent: its timer, then the result); over all
 * ranks 40 broadcasts of 8 bytes (root rotating) send
 * exactly 11 datagrams per four (three one-way broadcasts: their roots'
 * data; one round: every member), plus the barrier after them and the
 * resends. Results by unicast: with multicast an AN's answer to another
 * member's resend reaches every member of the leaf, a datagram no bound
 * per rank here can count (integ_mcast_* count those).
 */
TEST(integ_small_cost_counts, TEST_INTEG)
{
    char out[PATH_MAX];
    char *text;
    int ret, n = 8, iters = 40;
    long btx = 0, bresent = 0, wake = 0;

    if (!have_fabric_binaries("cost_check"))
        return test_skip("build/bin/incoll, incoll-agg or "
                         "build/tests/cost_check not built");
    ret = run_fabric_check("cost_check", "costfab", "cost", n, 4, 0,
                           "INCOLL_BCAST_AHEAD=16K INCOLL_COPY_ADAPT=0 "
                           "INCOLL_MCAST=0",
                           "--iters 40", out, sizeof(out));
    text = slurp(out);
    if (ret != 0 || strstr(text, "summary ok=80 wrong=0") == NULL) {
        show_tail(out);
        free(text);
        FAILF("cost_check failed (%d)", ret);
    }
    for (int r = 0; r < n; r++) {
        long a[5], b[5], hrx, early;
        if (cost_line(text, r, "allreduce", a) != 0 ||
            cost_line(text, r, "bcast", b) != 0 ||
            (hrx = cost_hostrx(text, r, "allreduce", &early)) < 0) {
            show_tail(out);
            free(text);
            FAILF("rank %d: no cost lines", r);
        }
        printf("  rank %d: allreduce tx %ld rx %ld (host-based %ld, next "
               "broadcasts' %ld) wake %ld resent %ld; bcast tx %ld rx %ld "
               "wake %ld resent %ld\n",
               r, a[1], a[2], hrx, early, a[3], a[4], b[1], b[2], b[3], b[4]);
        CHECK_EQ_INT(a[0], iters);
        CHECK_EQ_INT(a[1], iters + a[4]);
        /* (+1: the answer to this member's resend of the last warm-up
         * operation may arrive inside the counted run; the next loop's
         * first broadcasts, one-way or ahead of their round, reach a
         * member that still waits for its last allreduce's result, at
         * most one datagram each before the round it needs) */
        CHECK_MSG(early >= 0 && early <= HOST_ONEWAY_EVERY,
                  "rank %d: %ld broadcasts' data before they started", r,
                  early);
        CHECK_MSG(a[2] - hrx - early >= iters &&
                      a[2] - hrx - early <= iters + 2 * a[4] + 1,
                  "rank %d: %ld datagrams received (%ld of them the "
                  "host-based engine's, %ld the next broadcasts')",
                  r, a[2], hrx, early);
        /* (+2: the manager's heartbeat may be due during the run; each
         * of the next broadcasts' datagrams may wake it too) */
        CHECK_MSG(a[3] <= iters + 2 * a[4] + 2 + early,
                  "rank %d: %ld wake-ups for %d allreduces", r, a[3], iters);
        btx += b[1];
        bresent += b[4];
        wake += a[3];
    }
    free(text);
    CHECK_MSG(wake > 0, "no wake-up counted");
    CHECK_MSG(btx == iters / 4 * 11 + n + bresent,
              "%ld datagrams for %d broadcasts (%ld resent), want %d", btx,
              iters, bresent, iters / 4 * 11 + n);
    return TEST_PASSED;
}

/*
 * A reduce's non-roots send their contribution from the calling thread
 * (tests/progs/cost_check --reduce, 8 hosts radix 4, each reduce of one
 * int64 followed by a barrier as in OSU's loop): after every one of its
 * calls returned, early, each non-root's socket has sent the datagram
 * (counted before the communicator's thread could have sent it), every
 * datagram of the loop is one of its operations or a counted resend
 * (one per reduce, one per barrier), and every sum at the root is right;
 * a gather's leaves send their block alike.
 * *wake_p: the non-roots' wake-ups (all threads) in the reduce loop
 * beyond those of the barrier loop, per reduce, at most.
 */
static int reduce_sent(const char *env, const char *tag, double *wake_p,
                       long *others_p)
{
    char out[PATH_MAX];
    char *text;
    int ret, n = 8, iters = 60;

    *wake_p = 0;
    *others_p = 0;
    if (!have_fabric_binaries("cost_check"))
        return test_skip("build/bin/incoll, incoll-agg or "
                         "build/tests/cost_check not built");
    ret = run_fabric_check("cost_check", tag, tag, n, 4, 0, env,
                           "--iters 60 --reduce", out, sizeof(out));
    text = slurp(out);
    if (ret != 0 || strstr(text, "summary ok=180 wrong=0") == NULL) {
        show_tail(out);
        free(text);
        FAILF("cost_check --reduce failed (%d)", ret);
    }
    for (int r = 0; r < n; r++) {
        long v[5], b[5], sent = -1, wake_all = -1, bsent = -1, bwake_all = -1;
        char key[64];
        const char *p, *q;
        snprintf(key, sizeof(key), "cost rank=%d kind=reduce ", r);
        p = strstr(text, key);
        snprintf(key, sizeof(key), "cost rank=%d kind=barrier ", r);
        q = strstr(text, key);
        if (cost_line(text, r, "reduce", v) != 0 ||
            cost_line(text, r, "barrier", b) != 0 || p == NULL || q == NULL ||
            (p = strstr(p, " sent=")) == NULL ||
            (q = strstr(q, " sent=")) == NULL ||
            sscanf(p, " sent=%ld wake_all=%ld", &sent, &wake_all) != 2 ||
            sscanf(q, " sent=%ld wake_all=%ld", &bsent, &bwake_all) != 2) {
            show_tail(out);
            free(text);
            FAILF("rank %d: no reduce cost lines", r);
        }
        printf("  rank %d: reduce+barrier tx %ld rx %ld wake %ld (all "
               "threads %ld, barrier alone %ld) resent %ld, sent at return "
               "%ld\n",
               r, v[1], v[2], v[3], wake_all, bwake_all, v[4], sent);
        CHECK_EQ_INT(v[0], iters);
        CHECK_EQ_INT(v[1], 2 * iters + v[4]);
        if (r == 0)
            continue;
        CHECK_MSG(sent == iters,
                  "rank %d: %ld of %d reduces had sent their contribution "
                  "when the call returned",
                  r, sent, iters);
        /* (the other threads': the request thread's, the watcher's) */
        if (wake_all - v[3] > *others_p)
            *others_p = wake_all - v[3];
        if ((double)(wake_all - bwake_all) / iters > *wake_p)
            *wake_p = (double)(wake_all - bwake_all) / iters;
        /* A gather's leaves alike. */
        snprintf(key, sizeof(key), "cost rank=%d kind=gather ", r);
        if ((p = strstr(text, key)) == NULL ||
            (p = strstr(p, " sent=")) == NULL ||
            sscanf(p, " sent=%ld", &sent) != 1) {
            show_tail(out);
            free(text);
            FAILF("rank %d: no gather cost line", r);
        }
        CHECK_MSG(sent == iters,
                  "rank %d: %ld of %d gathers had sent their block when the "
                  "call returned",
                  r, sent, iters);
    }
    free(text);
    return TEST_PASSED;
}

/* Without the library's threads: the request thread takes the operation
 * over at once (it wakes for it and for the acknowledgement). */
TEST(integ_small_reduce_sent, TEST_INTEG)
{
    double wake;
    long others;
    int ret = reduce_sent("INCOLL_COPY_ADAPT=0 INCOLL_MCAST=0", "redfab", &wake,
                          &others);
    printf("  non-roots' wake-ups per reduce (beyond the barrier's): at "
           "most %.2f; other threads' at most %ld\n",
           wake, others);
    return ret;
}

/* With them (as the MPI layer runs): the same. */
TEST(integ_small_reduce_sent_threads, TEST_INTEG)
{
    double wake;
    long others;
    int ret = reduce_sent("INCOLL_COPY_ADAPT=0 INCOLL_MCAST=0 "
                          "INCOLL_PROGRESS_THREAD=1",
                          "redthr", &wake, &others);
    printf("  non-roots' wake-ups per reduce (beyond the barrier's): at "
           "most %.2f; other threads' at most %ld\n",
           wake, others);
    return ret;
}
