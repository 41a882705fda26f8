/*
 * Erroneous programs in the sans-I/O cores: members whose calls of one
 * operation differ (another collective, datatype, op, size or root; MPI
 * forbids it, programs do it by mistake). An AN that sees the children of
 * a slot describe it differently makes the slot's result an error
 * (WIRE_F_ERROR, the reason in why), which every member's engine gets:
 * each fails its operation with INCOLL_ERR_MISMATCH and the reason, none
 * returns a result, and the slot is used again normally afterwards.
 */
#include "test.h"

#include "common/wire.h"
#include "common/wire_mac.h"
#include "core/agg_core.h"
#include "core/host_engine.h"
#include "host/host.h"
#include "host/inc_coll.h"
#include "memnet.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MM_SEC UINT64_C(1000000000)

/* ---- one AN, packets by hand ---- */

typedef struct {
    int n;
    incoll_ep_t dst[64];
    wire_hdr_t h[64];
    size_t len[64];
} mm_cap_t;

static wire_key_t mm_key;

static void mm_send(void *arg, incoll_ep_t dst, const void *hdr,
                    const void *payload, size_t len)
{
    mm_cap_t *c = arg;
    uint8_t pkt[WIRE_HDR_LEN + 512];
    if (c->n >= 64 || len > 512)
        return;
    memcpy(pkt, hdr, WIRE_HDR_LEN);
    if (len)
        memcpy(pkt + WIRE_HDR_LEN, payload, len);
    if (wire_parse(pkt, WIRE_HDR_LEN + len, &c->h[c->n], NULL) != INCOLL_OK ||
        !wire_mac_check(&mm_key, pkt, WIRE_HDR_LEN + len))
        memset(&c->h[c->n], 0xff, sizeof(c->h[c->n]));
    c->dst[c->n] = dst;
    c->len[c->n] = len;
    c->n++;
}

/* A contribution of child c to slot 0 epoch e: 8 int64 summed, root 0. */
static wire_hdr_t mm_contrib(uint16_t c, uint32_t e)
{
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_CONTRIB,
                    .op = INCOLL_OP_SUM,
                    .dtype = INCOLL_INT64,
                    .group = 1,
                    .child = c,
                    .flags = WIRE_F_LAST,
                    .epoch = e,
                    .count = 8};
    return h;
}

static void mm_feed(agg_t *agg, incoll_ep_t src, const wire_hdr_t *h)
{
    uint8_t pkt[WIRE_HDR_LEN + 64];
    size_t plen = (h->flags & WIRE_F_NODATA)
                      ? 0
                      : (size_t)h->count * incoll_dtype_size(h->dtype);
    wire_pack(h, pkt);
    memset(pkt + WIRE_HDR_LEN, 0x21, plen);
    wire_mac_seal(&mm_key, pkt, pkt + WIRE_HDR_LEN, plen);
    agg_on_packet(agg, src, pkt, WIRE_HDR_LEN + plen);
}

/* The slot's result as sent to both children: an error with reason why
 * (or, why 0, data). */
static int mm_results(const mm_cap_t *cap, int from, unsigned why)
{
    CHECK_EQ_INT(cap->n, from + 2);
    for (int k = from; k < from + 2; k++) {
        CHECK_EQ_INT(cap->h[k].type, WIRE_RESULT);
        CHECK_EQ_INT(cap->dst[k], 11 + (k - from));
        if (why) {
            CHECK_EQ_INT(cap->h[k].flags & (WIRE_F_ERROR | WIRE_F_NODATA),
                         WIRE_F_ERROR | WIRE_F_NODATA);
            CHECK_EQ_INT(cap->h[k].why, why);
            CHECK_EQ_INT(cap->len[k], 0);
        } else {
            CHECK(!(cap->h[k].flags & WIRE_F_ERROR));
            CHECK_EQ_INT(cap->len[k], 64);
        }
    }
    return TEST_PASSED;
}

TEST(mismatch_an_slot, TEST_UNIT)
{
    static mm_cap_t cap;
    incoll_ep_t kids[2] = {11, 12};
    agg_params_t ap = {.name = "root", .send = mm_send, .send_arg = &cap};
    agg_group_params_t gp = {.nchildren = 2,
                             .id = 1,
                             .children = kids,
                             .parent = INCOLL_EP_NONE,
                             .slots = 1,
                             .max_payload = 64};
    agg_t *agg;
    uint32_t e = 0;
    struct {
        unsigned why;
        wire_hdr_t h;
    } cases[7];
    int n = 0;

    wire_key_derive(NULL, WIRE_KEY_GROUP, 1, 42, &mm_key);
    gp.key = mm_key;
    agg = agg_create(&ap);
    CHECK(agg != NULL);
    CHECK_EQ_INT(agg_group_add(agg, &gp), INCOLL_OK);
    /* Child 1 calls something else than child 0, one field at a time. */
    cases[n].why = WIRE_MISMATCH_OP;
    cases[n].h = mm_contrib(1, 0);
    cases[n++].h.op = INCOLL_OP_MAX;
    cases[n].why = WIRE_MISMATCH_DTYPE;
    cases[n].h = mm_contrib(1, 0);
    cases[n++].h.dtype = INCOLL_FLOAT64; /* the same size */
    cases[n].why = WIRE_MISMATCH_SIZE;
    cases[n].h = mm_contrib(1, 0);
    cases[n++].h.count = 4;
    cases[n].why = WIRE_MISMATCH_SIZE; /* more segments to come there */
    cases[n].h = mm_contrib(1, 0);
    cases[n++].h.flags = 0;
    cases[n].why = WIRE_MISMATCH_KIND; /* a barrier against an allreduce */
    cases[n].h = mm_contrib(1, 0);
    cases[n].h.flags |= WIRE_F_NODATA | wire_kind_flags(WIRE_COLL_BARRIER);
    cases[n].h.dtype = INCOLL_INT64;
    n++;
    cases[n].why = WIRE_MISMATCH_ROOT; /* a reduce to root 0 and to 1 */
    cases[n].h = mm_contrib(1, 0);
    cases[n].h.flags |= wire_kind_flags(WIRE_COLL_REDUCE);
    cases[n].h.root = 1;
    n++;
    cases[n].why = WIRE_MISMATCH_ROOT; /* both claim the root of a reduce */
    cases[n].h = mm_contrib(1, 0);
    cases[n].h.flags |= wire_kind_flags(WIRE_COLL_REDUCE) | WIRE_F_ROOT;
    n++;
    for (int i = 0; i < n; i++, e++) {
        wire_hdr_t h0 = mm_contrib(0, e), h1 = cases[i].h;
        int r;
        h1.epoch = e;
        if (i >= 5) {
            h0.flags |= wire_kind_flags(WIRE_COLL_REDUCE) | WIRE_F_ROOT;
            h0.root = 0;
        }
        cap.n = 0;
        mm_feed(agg, 11, &h0);
        CHECK_EQ_INT(cap.n, 0);
        mm_feed(agg, 12, &h1);
        r = mm_results(&cap, 0, cases[i].why);
        if (r != TEST_PASSED) {
            fprintf(stderr, "    case %d\n", i);
            return r;
        }
        /* A lost error result comes again for a retransmission. */
        mm_feed(agg, 12, &h1);
        CHECK_EQ_INT(cap.n, 3);
        CHECK_EQ_INT(cap.dst[2], 12);
        CHECK(cap.h[2].flags & WIRE_F_ERROR);
        CHECK_EQ_INT(cap.h[2].why, cases[i].why);
    }
    CHECK_EQ_INT(agg_counters(agg)->calls_mismatched, (uint64_t)n);
    CHECK_EQ_INT(agg_counters(agg)->reductions, 0);
    /* The slot goes on with calls that match: a result with data. */
    {
        wire_hdr_t h0 = mm_contrib(0, e), h1 = mm_contrib(1, e);
        cap.n = 0;
        mm_feed(agg, 11, &h0);
        mm_feed(agg, 12, &h1);
        CHECK(mm_results(&cap, 0, 0) == TEST_PASSED);
        CHECK_EQ_INT(agg_counters(agg)->reductions, 1);
    }
    agg_destroy(agg);
    return TEST_PASSED;
}

static int mm_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The tag an allreduce carries for the collective it runs (a broadcast, a
 * reduce... run as an allreduce: incoll_comm.call_tag) names the
 * collective and its root exactly: no two (kind, root) share one and none
 * is a plain allreduce's 0, so that the ANs (and the node level) tell
 * apart members whose calls differ in either, a broadcast from rank 68
 * and one from rank 479 say; an AN fails a slot whose members carry two. */
TEST(mismatch_call_tags, TEST_UNIT)
{
    enum { ROOTS = 1 << 16 };
    static uint32_t tags[HOST_COLL_COUNT * ROOTS];
    static mm_cap_t cap;
    incoll_ep_t kids[2] = {11, 12};
    agg_params_t ap = {.name = "root", .send = mm_send, .send_arg = &cap};
    agg_group_params_t gp = {.nchildren = 2,
                             .id = 1,
                             .children = kids,
                             .parent = INCOLL_EP_NONE,
                             .slots = 1,
                             .max_payload = 64};
    wire_hdr_t h0 = mm_contrib(0, 0), h1 = mm_contrib(1, 0);
    size_t n = 0;
    agg_t *agg;

    for (int k = 0; k < HOST_COLL_COUNT; k++)
        for (int r = 0; r < ROOTS; r++)
            tags[n++] = host_call_tag(k, r);
    qsort(tags, n, sizeof(tags[0]), mm_cmp_u32);
    CHECK(tags[0] != 0);
    for (size_t i = 1; i < n; i++)
        CHECK_MSG(tags[i] != tags[i - 1], "tag %#x for two calls", tags[i]);
    /* The highest rank INCOLL_SIZE allows. */
    CHECK(host_call_tag(HOST_COLL_BCAST, (1 << 24) - 1) !=
          host_call_tag(HOST_COLL_BCAST, 0));
    CHECK(host_call_tag(HOST_COLL_BCAST, (1 << 24) - 1) !=
          host_call_tag(HOST_COLL_GATHER, 0));

    wire_key_derive(NULL, WIRE_KEY_GROUP, 1, 42, &mm_key);
    gp.key = mm_key;
    agg = agg_create(&ap);
    CHECK(agg != NULL);
    CHECK_EQ_INT(agg_group_add(agg, &gp), INCOLL_OK);
    h0.root = host_call_tag(HOST_COLL_BCAST, 68);
    h1.root = host_call_tag(HOST_COLL_BCAST, 479);
    cap.n = 0;
    mm_feed(agg, 11, &h0);
    mm_feed(agg, 12, &h1);
    {
        int r = mm_results(&cap, 0, WIRE_MISMATCH_ROOT);
        if (r != TEST_PASSED) {
            agg_destroy(agg);
            return r;
        }
    }
    CHECK_EQ_INT(agg_counters(agg)->reductions, 0);
    agg_destroy(agg);
    return TEST_PASSED;
}

/* An AN below the root: its children's error goes up as its aggregate
 * (ERROR, NODATA, the reason), and its parent's error result goes down to
 * every child. */
TEST(mismatch_an_forward, TEST_UNIT)
{
    static mm_cap_t cap;
    incoll_ep_t kids[2] = {11, 12};
    agg_params_t ap = {.name = "mid", .send = mm_send, .send_arg = &cap};
    agg_group_params_t gp = {.nchildren = 2,
                             .id = 1,
                             .children = kids,
                             .parent = 99,
                             .index_at_parent = 3,
                             .slots = 1,
                             .max_payload = 64};
    wire_hdr_t h0 = mm_contrib(0, 0), h1 = mm_contrib(1, 0), r;
    agg_t *agg;

    wire_key_derive(NULL, WIRE_KEY_GROUP, 1, 42, &mm_key);
    gp.key = mm_key;
    agg = agg_create(&ap);
    CHECK(agg != NULL);
    CHECK_EQ_INT(agg_group_add(agg, &gp), INCOLL_OK);
    h1.dtype = INCOLL_UINT64;
    mm_feed(agg, 11, &h0);
    mm_feed(agg, 12, &h1);
    CHECK_EQ_INT(cap.n, 1);
    CHECK_EQ_INT(cap.dst[0], 99);
    CHECK_EQ_INT(cap.h[0].type, WIRE_CONTRIB);
    CHECK_EQ_INT(cap.h[0].child, 3);
    CHECK_EQ_INT(cap.h[0].flags & (WIRE_F_ERROR | WIRE_F_NODATA),
                 WIRE_F_ERROR | WIRE_F_NODATA);
    CHECK_EQ_INT(cap.h[0].why, WIRE_MISMATCH_DTYPE);
    CHECK_EQ_INT(cap.len[0], 0);
    /* The parent's answer (another subtree's reason wins there). */
    r = cap.h[0];
    r.type = WIRE_RESULT;
    r.child = 3;
    r.why = WIRE_MISMATCH_KIND;
    mm_feed(agg, 99, &r);
    CHECK(mm_results(&cap, 1, WIRE_MISMATCH_KIND) == TEST_PASSED);
    agg_destroy(agg);
    return TEST_PASSED;
}

/* ---- members' engines over an in-memory tree ---- */

#define MM_RANKS 4

typedef struct {
    const char *name;
    unsigned why;
    /* Rank r calls kind[r], count[r] elements of dtype[r] with op[r] and
     * root[r] (-1: none). */
    wire_coll_t kind[MM_RANKS];
    size_t count[MM_RANKS];
    incoll_dtype_t dtype[MM_RANKS];
    incoll_op_t op[MM_RANKS];
    int root[MM_RANKS];
} mm_case_t;

#define ALL4(x)                                                                \
    {                                                                          \
        x, x, x, x                                                             \
    }
#define AR WIRE_COLL_ALLREDUCE

/* Runs one case on a fresh [[2][2]] tree (payload 64, 4 slots; a lossy
 * network when lossy): every rank must fail with the case's reason, and a
 * matching allreduce afterwards on a fresh job must give the right sum. */
static int mm_run(const mm_case_t *c, int lossy)
{
    memnet_cfg_t cfg = {.seed = 7,
                        .delay_ns = 20000,
                        .jitter_ns = 10000,
                        .drop = lossy ? 0.05 : 0,
                        .dup = lossy ? 0.02 : 0,
                        .reorder = lossy ? 0.05 : 0,
                        .reorder_ns = 50000};
    memnet_group_cfg_t g = {.id = 9,
                            .key = 0x1234,
                            .gen = 1,
                            .slots = 4,
                            .max_payload = 64,
                            .progress_timeout_ns = 5 * MM_SEC};
    memnet_tree_t t;
    memnet_t *net;
    static int64_t send[MM_RANKS][64], recv[MM_RANKS][64];
    int grp, ret = TEST_PASSED;

    CHECK(memnet_tree_parse(&t, "[[2][2]]") == 0);
    net = memnet_create(&cfg);
    CHECK(net != NULL);
    CHECK(memnet_add_tree(net, &t, 1) == 0);
    grp = memnet_add_group(net, &g);
    CHECK(grp == 0);
    for (int r = 0; r < MM_RANKS; r++)
        for (int k = 0; k < 64; k++) {
            send[r][k] = r * 100 + k;
            recv[r][k] = -1;
        }
    for (int r = 0; r < MM_RANKS; r++) {
        int me = c->root[r] == r;
        wire_coll_t kind = c->kind[r];
        int sends = kind == AR || kind == WIRE_COLL_REDUCE ||
                    (kind == WIRE_COLL_BCAST && me);
        int recvs = kind == AR || (kind == WIRE_COLL_REDUCE && me) ||
                    (kind == WIRE_COLL_BCAST && !me);
        memnet_start_one(net, grp, r, kind, c->root[r], sends ? send[r] : NULL,
                         recvs ? recv[r] : NULL, c->count[r], c->dtype[r],
                         c->op[r]);
    }
    if (memnet_run(net, 60 * MM_SEC) != 0) {
        fprintf(stderr, "    %s: the ranks hang\n", c->name);
        ret = TEST_FAILED;
    }
    for (int r = 0; r < MM_RANKS && ret == TEST_PASSED; r++) {
        host_engine_t *eng = memnet_host(net, grp, r);
        CHECK_MSG(host_engine_status(eng) == INCOLL_ERR_MISMATCH &&
                      host_engine_mismatch(eng) == c->why,
                  "%s: rank %d: %s, reason %s (want %s)", c->name, r,
                  incoll_status_string(host_engine_status(eng)),
                  wire_mismatch_str(host_engine_mismatch(eng)),
                  wire_mismatch_str(c->why));
    }
    /* The next job on the group (a new generation, as the library's
     * resynchronisation makes) runs normally. */
    if (ret == TEST_PASSED) {
        const void *s[MM_RANKS];
        void *d[MM_RANKS];
        CHECK(memnet_new_job(net, grp, 2) == 0);
        for (int r = 0; r < MM_RANKS; r++) {
            s[r] = send[r];
            d[r] = recv[r];
        }
        memnet_start_allreduce(net, grp, s, d, 64, INCOLL_INT64, INCOLL_OP_SUM);
        CHECK(memnet_run(net, 60 * MM_SEC) == 0);
        for (int r = 0; r < MM_RANKS; r++) {
            CHECK_EQ_INT(host_engine_status(memnet_host(net, grp, r)),
                         INCOLL_OK);
            for (int k = 0; k < 64; k++)
                CHECK_EQ_INT(recv[r][k], 600 + 4 * k);
        }
    }
    memnet_destroy(net);
    return ret;
}

TEST(mismatch_engines, TEST_UNIT)
{
    static const mm_case_t cases[] = {
        {"datatype of the same size",
         WIRE_MISMATCH_DTYPE,
         ALL4(AR),
         ALL4(16),
         {INCOLL_INT32, INCOLL_INT32, INCOLL_INT32, INCOLL_FLOAT32},
         ALL4(INCOLL_OP_SUM),
         ALL4(-1)},
        {"op",
         WIRE_MISMATCH_OP,
         ALL4(AR),
         ALL4(16),
         ALL4(INCOLL_INT64),
         {INCOLL_OP_SUM, INCOLL_OP_SUM, INCOLL_OP_MAX, INCOLL_OP_SUM},
         ALL4(-1)},
        {"count",
         WIRE_MISMATCH_SIZE,
         ALL4(AR),
         {6, 6, 6, 5},
         ALL4(INCOLL_INT64),
         ALL4(INCOLL_OP_SUM),
         ALL4(-1)},
        {"count over segments",
         WIRE_MISMATCH_SIZE,
         ALL4(AR),
         {40, 40, 48, 40},
         ALL4(INCOLL_INT64),
         ALL4(INCOLL_OP_SUM),
         ALL4(-1)},
        {"bcast against allreduce",
         WIRE_MISMATCH_KIND,
         {AR, WIRE_COLL_BCAST, AR, AR},
         ALL4(64),
         ALL4(INCOLL_UINT8),
         ALL4(INCOLL_OP_SUM),
         {-1, 0, -1, -1}},
        {"two bcast roots",
         WIRE_MISMATCH_ROOT,
         ALL4(WIRE_COLL_BCAST),
         ALL4(64),
         ALL4(INCOLL_UINT8),
         ALL4(INCOLL_OP_SUM),
         {0, 0, 2, 0}},
        {"reduce roots",
         WIRE_MISMATCH_ROOT,
         ALL4(WIRE_COLL_REDUCE),
         ALL4(8),
         ALL4(INCOLL_INT64),
         ALL4(INCOLL_OP_SUM),
         {0, 0, 3, 3}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (int lossy = 0; lossy < 2; lossy++)
            if (mm_run(&cases[i], lossy) != TEST_PASSED) {
                fprintf(stderr, "    %s%s\n", cases[i].name,
                        lossy ? " (lossy network)" : "");
                return TEST_FAILED;
            }
    return TEST_PASSED;
}
