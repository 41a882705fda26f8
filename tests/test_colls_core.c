/*
 * Unit tests of the collectives other than allreduce in the sans-I/O cores
 * (reduce, broadcast and barrier: the collective kind of wire.h), through
 * memnet with and without random drops, duplicates and reordering. Each
 * result is checked against a reference computed here: a reduce's root
 * gets the sum (and, for floats, exactly the bits an allreduce over the
 * same tree gives), the other ranks' buffers stay untouched; a broadcast
 * gives every rank the root's bytes and non-roots send no payload; a
 * barrier moves no payload at all.
 */
#include "test.h"

#include "common/dtype.h"
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

#define CN_MAX 64
#define CN_SENT 0x5A
#define CN_KEY 0x0C011EC7105EC12Eull
#define CN_US UINT64_C(1000)
#define CN_MS UINT64_C(1000000)
#define CN_SEC UINT64_C(1000000000)

typedef struct {
    memnet_t *net;
    memnet_tree_t tree;
    int g, n;
    size_t cap;
    uint32_t payload;
    uint8_t *send[CN_MAX], *recv[CN_MAX], *ref, *ref2;
    char name[256];
} cworld_t;

static void cw_free(cworld_t *w)
{
    memnet_destroy(w->net);
    for (int r = 0; r < CN_MAX; r++) {
        free(w->send[r]);
        free(w->recv[r]);
    }
    free(w->ref);
    free(w->ref2);
    memset(w, 0, sizeof(*w));
}

/* ahead_bytes: the broadcasts that go ahead of the round (the library's
 * default, INCOLL_BCAST_AHEAD, unless a test says otherwise). */
static uint32_t cw_ahead = 16384;

static int cw_init(cworld_t *w, const memnet_tree_t *t, const memnet_cfg_t *cfg,
                   uint32_t slots, uint32_t payload, int lossy, size_t cap)
{
    memnet_group_cfg_t g = {.id = 9,
                            .key = CN_KEY,
                            .gen = 3,
                            .slots = slots,
                            .max_payload = payload,
                            .ahead_bytes = cw_ahead};
    memset(w, 0, sizeof(*w));
    if (lossy) {
        g.rto_init_ns = 200 * CN_US;
        g.rto_min_ns = 50 * CN_US;
        g.rto_max_ns = 2 * CN_MS;
        g.max_retries = 200;
        g.progress_timeout_ns = 100 * CN_SEC;
    }
    w->tree = *t;
    w->n = t->nhosts;
    w->cap = cap;
    w->payload = payload;
    memnet_tree_str(t, w->name, sizeof(w->name));
    w->net = memnet_create(cfg);
    if (w->net == NULL || memnet_add_tree(w->net, t, 0xAD) != 0)
        FAILF("memnet setup failed");
    w->g = memnet_add_group(w->net, &g);
    if (w->g < 0)
        FAILF("memnet_add_group failed");
    for (int r = 0; r < w->n; r++) {
        w->send[r] = malloc(cap);
        w->recv[r] = malloc(cap);
        if (!w->send[r] || !w->recv[r])
            FAILF("out of memory");
    }
    w->ref = malloc(cap);
    w->ref2 = malloc(cap);
    return w->ref && w->ref2 ? 0 : -1;
}

static int cw_run(cworld_t *w, const char *what)
{
    if (memnet_run(w->net, 600 * CN_SEC) != 0)
        FAILF("%s on %s: no completion (%d hosts busy)", what, w->name,
              memnet_busy(w->net));
    for (int r = 0; r < w->n; r++) {
        incoll_status_t st = host_engine_status(memnet_host(w->net, w->g, r));
        if (st != INCOLL_OK)
            FAILF("%s on %s: rank %d: %s", what, w->name, r,
                  incoll_status_string(st));
    }
    return 0;
}

static uint64_t cw_payload_bytes(cworld_t *w, int r)
{
    const host_engine_counters_t *c =
        host_engine_counters(memnet_host(w->net, w->g, r));
    return c->bytes_sent - c->packets_sent * WIRE_HDR_LEN;
}

/* A broadcast of bytes from root: every other rank gets the root's bytes,
 * the root's buffer is not written, and only the root sends payload. */
static int cw_bcast(cworld_t *w, size_t bytes, int root, uint64_t *rng)
{
    uint64_t before[CN_MAX];
    for (size_t i = 0; i < bytes; i++)
        w->send[root][i] = (uint8_t)memnet_rand(rng);
    for (int r = 0; r < w->n; r++) {
        memset(w->recv[r], CN_SENT, w->cap);
        before[r] = cw_payload_bytes(w, r);
    }
    {
        const void *snd[CN_MAX] = {0};
        void *rcv[CN_MAX] = {0};
        snd[root] = w->send[root];
        for (int r = 0; r < w->n; r++)
            if (r != root)
                rcv[r] = w->recv[r];
        memnet_start_coll(w->net, w->g, WIRE_COLL_BCAST, root, snd, rcv, bytes,
                          INCOLL_UINT8, INCOLL_OP_SUM);
    }
    if (cw_run(w, "bcast") != 0)
        return -1;
    for (int r = 0; r < w->n; r++) {
        uint64_t sent = cw_payload_bytes(w, r) - before[r];
        if (r == root) {
            for (size_t i = 0; i < w->cap; i++)
                if (w->recv[r][i] != CN_SENT)
                    FAILF("bcast on %s: root %d's receive buffer written",
                          w->name, root);
            if (sent < bytes)
                FAILF("bcast: root sent %" PRIu64 " of %zu bytes", sent, bytes);
            continue;
        }
        if (memcmp(w->recv[r], w->send[root], bytes) != 0)
            FAILF("bcast of %zu bytes from %d on %s: rank %d differs", bytes,
                  root, w->name, r);
        if (bytes < w->cap && w->recv[r][bytes] != CN_SENT)
            FAILF("bcast: rank %d written past the end", r);
        if (sent != 0)
            FAILF("bcast: non-root %d sent %" PRIu64 " payload bytes", r, sent);
    }
    return 0;
}

/*
 * A reduce of count elements of dt to root: int64 inputs are exact, float64
 * ones must give the bits of an allreduce over the same data and tree
 * (run first, into ref2). Non-roots' receive buffers are never written.
 */
static int cw_reduce(cworld_t *w, size_t count, incoll_dtype_t dt, int root,
                     uint64_t *rng)
{
    size_t bytes = count * incoll_dtype_size(dt);
    const void *snd[CN_MAX];
    void *rcv[CN_MAX] = {0};

    for (int r = 0; r < w->n; r++) {
        for (size_t i = 0; i < count; i++) {
            if (dt == INCOLL_INT64) {
                int64_t v = (int64_t)(memnet_rand(rng) % 2000001) - 1000000;
                memcpy(w->send[r] + i * 8, &v, 8);
            } else {
                double v =
                    (double)(int64_t)(memnet_rand(rng) % 2000001) / 7.0e3;
                memcpy(w->send[r] + i * 8, &v, 8);
            }
        }
        snd[r] = w->send[r];
    }
    if (dt == INCOLL_INT64) {
        for (size_t i = 0; i < count; i++) {
            int64_t s = 0, v;
            for (int r = 0; r < w->n; r++) {
                memcpy(&v, w->send[r] + i * 8, 8);
                s += v;
            }
            memcpy(w->ref + i * 8, &s, 8);
        }
    } else {
        /* The reference of the same tree: an allreduce. */
        void *all[CN_MAX];
        for (int r = 0; r < w->n; r++)
            all[r] = r == 0 ? w->ref : w->recv[r];
        memnet_start_coll(w->net, w->g, WIRE_COLL_ALLREDUCE, -1, snd, all,
                          count, dt, INCOLL_OP_SUM);
        if (cw_run(w, "allreduce (reference)") != 0)
            return -1;
    }
    for (int r = 0; r < w->n; r++)
        memset(w->recv[r], CN_SENT, w->cap);
    rcv[root] = w->recv[root];
    memnet_start_coll(w->net, w->g, WIRE_COLL_REDUCE, root, snd, rcv, count, dt,
                      INCOLL_OP_SUM);
    if (cw_run(w, "reduce") != 0)
        return -1;
    if (memcmp(w->recv[root], w->ref, bytes) != 0)
        FAILF("reduce of %zu %s to %d on %s: wrong result", count,
              incoll_dtype_name(dt), root, w->name);
    for (int r = 0; r < w->n; r++)
        for (size_t i = (r == root ? bytes : 0); i < w->cap; i++)
            if (w->recv[r][i] != CN_SENT)
                FAILF("reduce on %s: rank %d's buffer written at %zu", w->name,
                      r, i);
    return 0;
}

/*
 * An allgather (root -1) or a gather to root of block bytes per rank: the
 * ranks' blocks in rank order on every rank (allgather) or on the root
 * only, other buffers untouched; each rank sends its block once plus a
 * piece descriptor per segment it touches.
 */
static int cw_gather(cworld_t *w, size_t block, int root, uint64_t *rng)
{
    wire_coll_t kind = root < 0 ? WIRE_COLL_ALLGATHER : WIRE_COLL_GATHER;
    size_t total = block * (size_t)w->n;
    uint64_t before[CN_MAX], rexmit[CN_MAX];
    const void *snd[CN_MAX];
    void *rcv[CN_MAX] = {0};

    if (total > w->cap)
        FAILF("gather of %zu bytes does not fit", total);
    for (int r = 0; r < w->n; r++) {
        for (size_t i = 0; i < block; i++) {
            w->send[r][i] = (uint8_t)memnet_rand(rng);
            w->ref[(size_t)r * block + i] = w->send[r][i];
        }
        memset(w->recv[r], CN_SENT, w->cap);
        before[r] = cw_payload_bytes(w, r);
        rexmit[r] =
            host_engine_counters(memnet_host(w->net, w->g, r))->retransmits +
            host_engine_counters(memnet_host(w->net, w->g, r))
                ->fast_retransmits;
        snd[r] = w->send[r];
        if (root < 0 || r == root)
            rcv[r] = w->recv[r];
    }
    memnet_start_gather(w->net, w->g, kind, root, snd, rcv, block);
    if (cw_run(w, root < 0 ? "allgather" : "gather") != 0)
        return -1;
    for (int r = 0; r < w->n; r++) {
        uint64_t sent = cw_payload_bytes(w, r) - before[r];
        uint64_t pieces = block / (w->payload - WIRE_PIECE_LEN) + 2;
        if (root < 0 || r == root) {
            if (memcmp(w->recv[r], w->ref, total) != 0)
                FAILF("%s of %zu bytes per rank on %s: rank %d differs",
                      wire_coll_name(kind), block, w->name, r);
            if (total < w->cap && w->recv[r][total] != CN_SENT)
                FAILF("%s: rank %d written past the end", wire_coll_name(kind),
                      r);
        } else {
            for (size_t i = 0; i < w->cap; i++)
                if (w->recv[r][i] != CN_SENT)
                    FAILF("gather to %d: rank %d's buffer written", root, r);
        }
        if (host_engine_counters(memnet_host(w->net, w->g, r))->retransmits +
                host_engine_counters(memnet_host(w->net, w->g, r))
                    ->fast_retransmits !=
            rexmit[r])
            continue; /* resent pieces count twice */
        if (sent < block || sent > block + WIRE_PIECE_LEN * pieces)
            FAILF("%s: rank %d sent %" PRIu64 " payload bytes for a block "
                  "of %zu",
                  wire_coll_name(kind), r, sent, block);
    }
    return 0;
}

/*
 * A scatter of block bytes per rank from root (root >= 0), or a
 * reduce_scatter (root -1) of block int64 (sum, exact) or float64
 * elements per rank (the bits of an allreduce over the same tree, run
 * first): each rank gets exactly its block; a scatter's non-roots send
 * descriptors only, a reduce_scatter's ranks their vector once.
 */
static int cw_split(cworld_t *w, size_t block, int root, incoll_dtype_t dt,
                    uint64_t *rng)
{
    wire_coll_t kind = root >= 0 ? WIRE_COLL_SCATTER : WIRE_COLL_REDUCE_SCATTER;
    size_t ds = root >= 0 ? 1 : 8, total = block * (size_t)w->n;
    const void *snd[CN_MAX] = {0};
    void *rcv[CN_MAX];
    uint64_t before[CN_MAX], rexmit[CN_MAX];

    if (total * ds > w->cap)
        FAILF("split of %zu does not fit", total);
    if (root >= 0) {
        dt = INCOLL_UINT8;
        for (size_t i = 0; i < total; i++)
            w->ref[i] = w->send[root][i] = (uint8_t)memnet_rand(rng);
        snd[root] = w->send[root];
    } else {
        for (int r = 0; r < w->n; r++) {
            for (size_t i = 0; i < total; i++) {
                int64_t v = (int64_t)(memnet_rand(rng) % 2000001) - 1000000;
                double d = (double)v / 7.0e3;
                if (dt == INCOLL_INT64)
                    memcpy(w->send[r] + i * 8, &v, 8);
                else
                    memcpy(w->send[r] + i * 8, &d, 8);
            }
            snd[r] = w->send[r];
        }
        if (dt == INCOLL_INT64) {
            for (size_t i = 0; i < total; i++) {
                int64_t s = 0, v;
                for (int r = 0; r < w->n; r++) {
                    memcpy(&v, w->send[r] + i * 8, 8);
                    s += v;
                }
                memcpy(w->ref + i * 8, &s, 8);
            }
        } else {
            void *all[CN_MAX];
            for (int r = 0; r < w->n; r++)
                all[r] = r == 0 ? w->ref : w->recv[r];
            memnet_start_coll(w->net, w->g, WIRE_COLL_ALLREDUCE, -1, snd, all,
                              total, dt, INCOLL_OP_SUM);
            if (total && cw_run(w, "allreduce (reference)") != 0)
                return -1;
        }
    }
    for (int r = 0; r < w->n; r++) {
        memset(w->recv[r], CN_SENT, w->cap);
        rcv[r] = w->recv[r];
        before[r] = cw_payload_bytes(w, r);
        rexmit[r] =
            host_engine_counters(memnet_host(w->net, w->g, r))->retransmits +
            host_engine_counters(memnet_host(w->net, w->g, r))
                ->fast_retransmits;
    }
    memnet_start_split(w->net, w->g, kind, root, snd, rcv, block, dt,
                       INCOLL_OP_SUM);
    if (cw_run(w, wire_coll_name(kind)) != 0)
        return -1;
    for (int r = 0; r < w->n; r++) {
        const host_engine_counters_t *c =
            host_engine_counters(memnet_host(w->net, w->g, r));
        uint64_t sent = cw_payload_bytes(w, r) - before[r];
        size_t seg = (w->payload - WIRE_PIECE_LEN) / ds;
        uint64_t pkts = (total + seg - 1) / seg;
        if (memcmp(w->recv[r], w->ref + (size_t)r * block * ds, block * ds) !=
            0)
            FAILF("%s of %zu per rank from %d on %s: rank %d differs",
                  wire_coll_name(kind), block, root, w->name, r);
        if (block * ds < w->cap && w->recv[r][block * ds] != CN_SENT)
            FAILF("%s: rank %d written past its block of %zu",
                  wire_coll_name(kind), r, block);
        if (c->retransmits + c->fast_retransmits != rexmit[r] || total == 0)
            continue;
        if (root >= 0 && r != root && sent != WIRE_PIECE_LEN * pkts)
            FAILF("scatter: non-root %d sent %" PRIu64 " payload bytes, want "
                  "%" PRIu64 " (descriptors)",
                  r, sent, WIRE_PIECE_LEN * pkts);
        if (root < 0 && sent != total * ds + WIRE_PIECE_LEN * pkts)
            FAILF("reduce_scatter: rank %d sent %" PRIu64 " payload bytes "
                  "for a vector of %zu",
                  r, sent, total * ds);
    }
    return 0;
}

static int cw_barrier(cworld_t *w)
{
    uint64_t before[CN_MAX];
    for (int r = 0; r < w->n; r++)
        before[r] = cw_payload_bytes(w, r);
    memnet_start_coll(w->net, w->g, WIRE_COLL_BARRIER, -1, NULL, NULL, 1,
                      INCOLL_UINT8, INCOLL_OP_SUM);
    if (cw_run(w, "barrier") != 0)
        return -1;
    for (int r = 0; r < w->n; r++)
        if (cw_payload_bytes(w, r) != before[r])
            FAILF("barrier: rank %d sent payload", r);
    return 0;
}

static const char *const cw_specs[] = {
    "[1]", "[2]", "[[4]]", "[[1][3][5]]", "[[[2][1]][[3]] 2]", "[3 [2] 1 [1]]",
};

/* Clean network: every shape, roots first, last and middle, sizes 0, 1,
 * odd and multi-segment (64-byte packets), with a small window so slots
 * are reused across kinds. */
TEST(colls_core_clean, TEST_UNIT)
{
    static const size_t sizes[] = {1, 7, 63, 64, 65, 1001};
    uint64_t rng = 42;
    for (size_t s = 0; s < sizeof(cw_specs) / sizeof(cw_specs[0]); s++) {
        memnet_tree_t t;
        cworld_t w;
        memnet_cfg_t cfg = {.seed = s + 1, .delay_ns = 2 * CN_US};
        CHECK(memnet_tree_parse(&t, cw_specs[s]) == 0);
        CHECK(cw_init(&w, &t, &cfg, 3, 64, 0, 1024 * 8 + 64) == 0);
        for (int k = 0; k < 3; k++) {
            int root = k == 0 ? 0 : k == 1 ? w.n - 1 : w.n / 2;
            CHECK(cw_barrier(&w) == 0);
            for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                if (sizes[i] * (size_t)w.n <= w.cap) {
                    CHECK(cw_gather(&w, sizes[i], -1, &rng) == 0);
                    CHECK(cw_gather(&w, sizes[i], root, &rng) == 0);
                    CHECK(cw_split(&w, sizes[i], root, INCOLL_UINT8, &rng) ==
                          0);
                }
                if (sizes[i] * 8 * (size_t)w.n <= w.cap) {
                    CHECK(cw_split(&w, sizes[i], -1, INCOLL_INT64, &rng) == 0);
                    CHECK(cw_split(&w, sizes[i], -1, INCOLL_FLOAT64, &rng) ==
                          0);
                }
                CHECK(cw_bcast(&w, sizes[i], root, &rng) == 0);
                CHECK(cw_reduce(&w, (sizes[i] + 7) / 8, INCOLL_INT64, root,
                                &rng) == 0);
                CHECK(cw_reduce(&w, sizes[i], INCOLL_FLOAT64, root, &rng) == 0);
            }
        }
        /* Size 0: complete at once, nothing sent. */
        {
            host_engine_t *e = memnet_host(w.net, w.g, 0);
            uint64_t pk = host_engine_counters(e)->packets_sent;
            CHECK_EQ_INT(host_engine_start_coll(e, WIRE_COLL_BCAST, 1,
                                                w.send[0], NULL, 0,
                                                INCOLL_UINT8, INCOLL_OP_SUM, 0),
                         INCOLL_OK);
            CHECK_EQ_INT(host_engine_counters(e)->packets_sent, pk);
        }
        /* Every AN completed segments of each kind. */
        for (int a = 0; a < t.nans; a++) {
            const agg_counters_t *c = agg_counters(memnet_an(w.net, a));
            CHECK(c->coll_bcast > 0 && c->coll_reduce > 0 &&
                  c->coll_barrier > 0 && c->coll_allreduce > 0 &&
                  c->coll_allgather > 0 && c->coll_gather > 0 &&
                  c->coll_scatter > 0 && c->coll_reduce_scatter > 0);
            CHECK_EQ_INT(c->malformed_dropped, 0);
            CHECK_EQ_INT(c->mismatch_dropped, 0);
        }
        cw_free(&w);
    }
    return TEST_PASSED;
}

/* Random shapes, kinds, roots and sizes under 5% loss, 2% duplication and
 * reordering, interleaved with allreduces on the same slots. */
TEST(colls_core_lossy, TEST_UNIT)
{
    uint64_t rng = 7;
    uint64_t drops = 0, dups = 0;
    for (int round = 0; round < 12; round++) {
        memnet_tree_t t;
        cworld_t w;
        memnet_cfg_t cfg = {.seed = 100 + (uint64_t)round,
                            .delay_ns = 5 * CN_US,
                            .jitter_ns = 5 * CN_US,
                            .drop = 0.05,
                            .dup = 0.02,
                            .reorder = 0.05,
                            .reorder_ns = 40 * CN_US,
                            .start_skew_ns = 30 * CN_US};
        memnet_tree_random(&t, &rng, 24, 3);
        CHECK(cw_init(&w, &t, &cfg, 1 + (uint32_t)(round % 4), 96, 1,
                      4096 + 64) == 0);
        for (int op = 0; op < 12; op++) {
            int root = (int)memnet_rand_below(&rng, (uint64_t)w.n);
            size_t size = 1 + memnet_rand_below(&rng, 4096);
            switch (memnet_rand_below(&rng, 9)) {
            case 6:
                CHECK_MSG(cw_split(&w, size / (size_t)w.n, root, INCOLL_UINT8,
                                   &rng) == 0,
                          "round %d", round);
                break;
            case 7:
                CHECK_MSG(cw_split(&w, size / 8 / (size_t)w.n, -1, INCOLL_INT64,
                                   &rng) == 0,
                          "round %d", round);
                break;
            case 8:
                CHECK_MSG(cw_split(&w, size / 8 / (size_t)w.n, -1,
                                   INCOLL_FLOAT64, &rng) == 0,
                          "round %d", round);
                break;
            case 4:
                CHECK_MSG(cw_gather(&w, size / (size_t)w.n, -1, &rng) == 0,
                          "round %d", round);
                break;
            case 5:
                CHECK_MSG(cw_gather(&w, size / (size_t)w.n, root, &rng) == 0,
                          "round %d", round);
                break;
            case 0:
                CHECK_MSG(cw_bcast(&w, size, root, &rng) == 0, "round %d",
                          round);
                break;
            case 1:
                CHECK_MSG(cw_reduce(&w, (size + 7) / 8, INCOLL_INT64, root,
                                    &rng) == 0,
                          "round %d", round);
                break;
            case 2:
                CHECK_MSG(cw_reduce(&w, (size + 7) / 8, INCOLL_FLOAT64, root,
                                    &rng) == 0,
                          "round %d", round);
                break;
            default:
                CHECK_MSG(cw_barrier(&w) == 0, "round %d", round);
                break;
            }
        }
        drops += memnet_stats(w.net)->dropped;
        dups += memnet_stats(w.net)->duplicated;
        cw_free(&w);
    }
    CHECK(drops > 200);
    CHECK(dups > 50);
    return TEST_PASSED;
}

/*
 * A broadcast ahead of the round (INCOLL_BCAST_AHEAD), stepped event by
 * event: a non-root's data is in (host_engine_data_in) with the root's
 * bytes while its operation still waits for the round; the test then
 * scribbles over its buffer, as a caller that returned would, and the
 * round's result must not write it again (exactly once). *early counts
 * the non-roots whose data was in while some member had not even started.
 */
static int cw_bcast_ahead(cworld_t *w, size_t bytes, int root, uint64_t *rng,
                          int *early)
{
    uint8_t taken[CN_MAX] = {0};
    const void *snd[CN_MAX] = {0};
    void *rcv[CN_MAX] = {0};
    uint64_t steps = 0;

    for (size_t i = 0; i < bytes; i++)
        w->send[root][i] = (uint8_t)memnet_rand(rng);
    for (int r = 0; r < w->n; r++) {
        memset(w->recv[r], CN_SENT, w->cap);
        if (r != root)
            rcv[r] = w->recv[r];
    }
    snd[root] = w->send[root];
    memnet_start_coll(w->net, w->g, WIRE_COLL_BCAST, root, snd, rcv, bytes,
                      INCOLL_UINT8, INCOLL_OP_SUM);
    while (memnet_busy(w->net) > 0) {
        if (!memnet_step(w->net) || ++steps > 50000000)
            FAILF("bcast ahead on %s: no completion", w->name);
        for (int r = 0; r < w->n; r++) {
            host_engine_t *e = memnet_host(w->net, w->g, r);
            if (r == root || taken[r] || !host_engine_data_in(e))
                continue;
            if (host_engine_status(e) != INCOLL_INPROGRESS)
                FAILF("bcast ahead: rank %d's data in, not running", r);
            if (memcmp(w->recv[r], w->send[root], bytes) != 0)
                FAILF("bcast ahead of %zu bytes on %s: rank %d's data in "
                      "but wrong",
                      bytes, w->name, r);
            for (int b = 0; b < w->n; b++)
                if (memnet_start_status(w->net, w->g, b) == INCOLL_INPROGRESS)
                    b = w->n, ++*early;
            memset(w->recv[r], 0xEE, bytes);
            taken[r] = 1;
        }
    }
    if (cw_run(w, "bcast ahead") != 0)
        return -1;
    for (int r = 0; r < w->n; r++) {
        if (r == root)
            continue;
        for (size_t i = 0; i < bytes; i++)
            if (w->recv[r][i] != (taken[r] ? 0xEE : w->send[root][i]))
                FAILF("bcast ahead of %zu bytes on %s: rank %d byte %zu "
                      "written %s",
                      bytes, w->name, r, i, taken[r] ? "twice" : "wrong");
        if (bytes < w->cap && w->recv[r][bytes] != CN_SENT)
            FAILF("bcast ahead: rank %d written past the end", r);
    }
    return 0;
}

/* Broadcasts ahead of the round, clean and under loss, duplicates and
 * reordering, with members starting up to a few milliseconds apart: the
 * data reaches members before the others arrive, each byte is written
 * once, the round still completes on every member (the next operation
 * on the same slots works), and with INCOLL_BCAST_AHEAD at 0, or above
 * it, nothing goes ahead. */
TEST(colls_core_bcast_ahead, TEST_UNIT)
{
    uint64_t rng = 11;
    int early_all = 0;
    for (int round = 0; round < 8; round++) {
        memnet_tree_t t;
        cworld_t w;
        int lossy = round >= 4, early = 0;
        /* (on a tree of two hosts every member started when data came) */
        uint64_t ahead = 0, sent = 0;
        memnet_cfg_t cfg = {.seed = 300 + (uint64_t)round,
                            .delay_ns = 5 * CN_US,
                            .jitter_ns = 5 * CN_US,
                            .start_skew_ns = 2 * CN_MS};
        if (lossy) {
            cfg.drop = 0.05;
            cfg.dup = 0.02;
            cfg.reorder = 0.05;
            cfg.reorder_ns = 40 * CN_US;
        }
        memnet_tree_random(&t, &rng, 24, 3);
        cw_ahead = 1024;
        CHECK(cw_init(&w, &t, &cfg, 1 + (uint32_t)(round % 3), 96, lossy,
                      4096 + 64) == 0);
        cw_ahead = 16384;
        for (int op = 0; op < 10; op++) {
            int root = (int)memnet_rand_below(&rng, (uint64_t)w.n);
            size_t size = 1 + memnet_rand_below(&rng, 1024);
            CHECK_MSG(cw_bcast_ahead(&w, size, root, &rng, &early) == 0,
                      "round %d op %d", round, op);
            if (op % 3 == 2)
                CHECK_MSG(cw_reduce(&w, (size + 7) / 8, INCOLL_INT64, root,
                                    &rng) == 0,
                          "round %d op %d", round, op);
        }
        /* Above INCOLL_BCAST_AHEAD: the round alone. */
        for (int r = 0; r < w.n; r++)
            ahead += host_engine_counters(memnet_host(w.net, w.g, r))->ahead;
        for (int a = 0; a < t.nans; a++)
            sent += agg_counters(memnet_an(w.net, a))->ahead_sent;
        CHECK(cw_bcast(&w, 2000, 0, &rng) == 0);
        for (int r = 0; r < w.n; r++)
            ahead -= host_engine_counters(memnet_host(w.net, w.g, r))->ahead;
        for (int a = 0; a < t.nans; a++) {
            const agg_counters_t *c = agg_counters(memnet_an(w.net, a));
            sent -= c->ahead_sent;
            CHECK_EQ_INT(c->malformed_dropped, 0);
            CHECK_EQ_INT(c->mismatch_dropped, 0);
        }
        CHECK_MSG(ahead == 0 && sent == 0,
                  "round %d: data went ahead above the limit", round);
        early_all += early;
        cw_free(&w);
    }
    CHECK_MSG(early_all > 0, "no member had its data before all members "
                             "started");
    /* INCOLL_BCAST_AHEAD=0: nothing goes ahead. */
    {
        memnet_tree_t t;
        cworld_t w;
        memnet_cfg_t cfg = {.seed = 9, .delay_ns = 2 * CN_US};
        CHECK(memnet_tree_parse(&t, cw_specs[0]) == 0);
        cw_ahead = 0;
        CHECK(cw_init(&w, &t, &cfg, 3, 64, 0, 1024) == 0);
        cw_ahead = 16384;
        CHECK(cw_bcast(&w, 100, 0, &rng) == 0);
        for (int r = 0; r < w.n; r++)
            CHECK_EQ_INT(
                host_engine_counters(memnet_host(w.net, w.g, r))->ahead, 0);
        for (int a = 0; a < t.nans; a++)
            CHECK_EQ_INT(agg_counters(memnet_an(w.net, a))->ahead_sent, 0);
        cw_free(&w);
    }
    return TEST_PASSED;
}

/* Builds a sealed CONTRIB for group 9 under key. */
static size_t cw_packet(uint8_t *buf, const wire_key_t *key, uint16_t flags,
                        uint32_t count, size_t payload)
{
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_CONTRIB,
                    .op = INCOLL_OP_SUM,
                    .dtype = INCOLL_UINT8,
                    .group = 9,
                    .child = 0,
                    .flags = flags,
                    .slot = 0,
                    .epoch = 0,
                    .count = count,
                    .total = 3,
                    .offset = 0};
    memset(buf + WIRE_HDR_LEN, 1, payload);
    wire_pack(&h, buf);
    wire_mac_seal(key, buf, buf + WIRE_HDR_LEN, payload);
    return WIRE_HDR_LEN + payload;
}

/* The wire checks of the kinds: NODATA packets carry no payload, unknown
 * kinds are refused, and the AN drops contributions whose payload or
 * root flag do not fit their kind. */
TEST(colls_core_wire, TEST_UNIT)
{
    uint8_t buf[WIRE_HDR_LEN + 64];
    wire_hdr_t h;
    const char *why = NULL;
    wire_key_t key;
    memnet_tree_t t;
    cworld_t w;
    memnet_cfg_t cfg = {.seed = 1, .delay_ns = CN_US};
    uint64_t bad;
    agg_t *an;

    wire_key_derive(NULL, WIRE_KEY_GROUP, 9, CN_KEY, &key);
    CHECK(
        wire_parse(buf,
                   cw_packet(buf, &key,
                             WIRE_F_NODATA | wire_kind_flags(WIRE_COLL_BARRIER),
                             1, 0),
                   &h, &why) == INCOLL_OK);
    CHECK_EQ_INT(wire_flags_kind(h.flags), WIRE_COLL_BARRIER);
    CHECK_EQ_INT(wire_payload_len(&h), 0);
    /* NODATA with a payload, and data without one: length mismatch. */
    CHECK(wire_parse(buf, cw_packet(buf, &key, WIRE_F_NODATA, 4, 4), &h,
                     &why) != INCOLL_OK);
    CHECK(wire_parse(buf, cw_packet(buf, &key, 0, 4, 0), &h, &why) !=
          INCOLL_OK);
    /* A split kind's contribution wanting elements past its segment. */
    CHECK(
        wire_parse(buf,
                   cw_packet(buf, &key,
                             wire_kind_flags(WIRE_COLL_SCATTER) | WIRE_F_NODATA,
                             4, WIRE_PIECE_LEN),
                   &h, &why) != INCOLL_OK);
    CHECK(strstr(why, "outside") != NULL);
    /* A NODATA segment larger than any packet is refused too. */
    CHECK(wire_parse(buf, cw_packet(buf, &key, WIRE_F_NODATA, 70000, 0), &h,
                     &why) != INCOLL_OK);

    CHECK(memnet_tree_parse(&t, "[2]") == 0);
    CHECK(cw_init(&w, &t, &cfg, 2, 64, 0, 64) == 0);
    an = memnet_an(w.net, 0);
    /* The group key the memnet derives is the same (WIRE_KEY_GROUP). */
    {
        const uint16_t badflags[] = {
            /* bcast data without the root flag */
            wire_kind_flags(WIRE_COLL_BCAST),
            /* barrier with data */
            wire_kind_flags(WIRE_COLL_BARRIER),
            /* allreduce with the root flag */
            WIRE_F_ROOT,
            /* reduce without data */
            wire_kind_flags(WIRE_COLL_REDUCE) | WIRE_F_NODATA,
        };
        for (size_t i = 0; i < sizeof(badflags) / sizeof(badflags[0]); i++) {
            int nod = !!(badflags[i] & WIRE_F_NODATA);
            size_t len = cw_packet(buf, &key, badflags[i], 4, nod ? 0 : 4);
            bad = agg_counters(an)->malformed_dropped;
            agg_on_packet(an, memnet_host_ep(w.net, w.g, 0), buf, len);
            CHECK_MSG(agg_counters(an)->malformed_dropped == bad + 1,
                      "flags %#x", badflags[i]);
            CHECK_EQ_INT(agg_counters(an)->contribs_accepted, 0);
        }
    }
    cw_free(&w);
    return TEST_PASSED;
}
