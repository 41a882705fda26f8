/*
 * Unit tests of the sans-I/O cores: the aggregation node (core/agg_core.h)
 * and the host protocol engine (core/host_engine.h), driven through memnet,
 * an in-memory network that drops, duplicates, reorders and delays packets
 * on purpose, on a virtual clock.
 *
 * Two independent oracles check results: integer inputs with one bit per
 * host (a contribution counted twice or not at all changes the sum), and a
 * reference computed here with reduce_n over the same tree in the same
 * child order, so that even floating-point results must match bit for bit.
 */
#include "test.h"

#include "common/dtype.h"
#include "common/log.h"
#include "common/wire.h"
#include "core/agg_core.h"
#include "core/host_engine.h"
#include "host/comm.h"
#include "host/host.h"
#include "memnet.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMAX MEMNET_MAX_HOSTS
#define KIDS_MAX (MEMNET_MAX_ANS + MEMNET_MAX_HOSTS)
#define SENTINEL 0xA5
#define ADMIN_KEY 0xAD4113E5EC4E7000ull
#define GROUP_KEY 0x5EC12E7C0FFEE123ull
#define US UINT64_C(1000)
#define MS UINT64_C(1000000)
#define SEC UINT64_C(1000000000)

/* Prints a failure line and returns -1 from a helper (CHECK returns
 * TEST_FAILED from a test function). */
/* ------------------------------------------------------------------ */
/* A world: one memnet with one tree and one group, and buffers per rank. */

typedef struct {
    memnet_t *net;
    memnet_tree_t tree;
    memnet_group_cfg_t gcfg;
    int g;
    int n;
    size_t cap; /* bytes per buffer */
    uint8_t *send[NMAX];
    uint8_t *recv[NMAX];
    uint8_t *ref;
} world_t;

static const memnet_cfg_t CLEAN_NET = {.seed = 1, .delay_ns = 2 * US};

static memnet_group_cfg_t group_cfg(uint32_t slots, uint32_t payload)
{
    memnet_group_cfg_t g = {
        .id = 5, .key = GROUP_KEY, .slots = slots, .max_payload = payload};
    return g;
}

/* Timing for lossy networks: quick retransmissions in virtual time and
 * enough retries that a correct engine never gives up. */
static memnet_group_cfg_t lossy_group_cfg(uint32_t slots, uint32_t payload)
{
    memnet_group_cfg_t g = group_cfg(slots, payload);
    g.rto_init_ns = 200 * US;
    g.rto_min_ns = 50 * US;
    g.rto_max_ns = 2 * MS;
    g.max_retries = 200;
    g.progress_timeout_ns = 100 * SEC;
    return g;
}

static void world_free(world_t *w)
{
    memnet_destroy(w->net);
    for (int r = 0; r < NMAX; r++) {
        free(w->send[r]);
        free(w->recv[r]);
    }
    free(w->ref);
    memset(w, 0, sizeof(*w));
}

static int world_init(world_t *w, const memnet_tree_t *tree,
                      const memnet_cfg_t *cfg, const memnet_group_cfg_t *g,
                      size_t cap)
{
    memset(w, 0, sizeof(*w));
    w->tree = *tree;
    w->gcfg = *g;
    w->n = tree->nhosts;
    w->cap = cap ? cap : 1;
    w->net = memnet_create(cfg);
    if (w->net == NULL)
        FAILF("memnet_create failed");
    if (memnet_add_tree(w->net, tree, ADMIN_KEY) != 0)
        FAILF("memnet_add_tree failed");
    w->g = memnet_add_group(w->net, g);
    if (w->g < 0)
        FAILF("memnet_add_group failed");
    for (int r = 0; r < w->n; r++) {
        w->send[r] = calloc(1, w->cap);
        w->recv[r] = calloc(1, w->cap);
        if (!w->send[r] || !w->recv[r])
            FAILF("out of memory");
    }
    w->ref = calloc(1, w->cap);
    return w->ref ? 0 : -1;
}

static int world_from_spec(world_t *w, const char *spec,
                           const memnet_cfg_t *cfg, const memnet_group_cfg_t *g,
                           size_t cap)
{
    memnet_tree_t t;
    if (memnet_tree_parse(&t, spec) != 0)
        FAILF("bad tree spec %s", spec);
    return world_init(w, &t, cfg, g, cap);
}

static const char *tree_name(const memnet_tree_t *t)
{
    static char buf[512];
    memnet_tree_str(t, buf, sizeof(buf));
    return buf;
}

/* Starts the allreduce on every rank (recv buffers filled with SENTINEL)
 * without running the network. */
static void world_start(world_t *w, size_t count, incoll_dtype_t dt,
                        incoll_op_t op)
{
    size_t bytes = count * incoll_dtype_size(dt);
    for (int r = 0; r < w->n; r++)
        memset(w->recv[r], SENTINEL, bytes < w->cap ? bytes : w->cap);
    memnet_start_allreduce(w->net, w->g, (const void *const *)w->send,
                           (void *const *)w->recv, count, dt, op);
}

/* Checks that every rank's last operation ended with INCOLL_OK. */
static int world_check_ok(world_t *w, size_t count)
{
    for (int r = 0; r < w->n; r++) {
        incoll_status_t ss = memnet_start_status(w->net, w->g, r);
        incoll_status_t st = host_engine_status(memnet_host(w->net, w->g, r));
        if (ss != (count ? INCOLL_INPROGRESS : INCOLL_OK))
            FAILF("rank %d: host_engine_start returned %d (%s)", r, ss,
                  incoll_status_string(ss));
        if (st != INCOLL_OK)
            FAILF("rank %d: status %d (%s), tree %s", r, st,
                  incoll_status_string(st), tree_name(&w->tree));
    }
    return 0;
}

/* Runs one allreduce on every rank and checks that each ended with OK. */
static int world_op(world_t *w, size_t count, incoll_dtype_t dt, incoll_op_t op,
                    uint64_t limit_ns)
{
    world_start(w, count, dt, op);
    if (memnet_run(w->net, limit_ns) != 0)
        FAILF("no completion within %" PRIu64 " ms of virtual time (tree %s, "
              "count %zu, %d hosts busy)",
              limit_ns / MS, tree_name(&w->tree), count, memnet_busy(w->net));
    return world_check_ok(w, count);
}

/* ------------------------------------------------------------------ */
/* Oracles. */

static uint64_t rotl64(uint64_t x, unsigned k)
{
    k &= 63;
    return k ? (x << k) | (x >> (64 - k)) : x;
}

static uint64_t all_hosts_mask(int n)
{
    return n >= 64 ? ~0ull : (1ull << n) - 1;
}

/* uint64 inputs with one bit per host, rotated by the element index so
 * that a segment landing at the wrong offset shows too. */
static void fill_onehot(world_t *w, size_t count)
{
    for (int r = 0; r < w->n; r++)
        for (size_t i = 0; i < count; i++)
            ((uint64_t *)w->send[r])[i] = rotl64(1ull << (r & 63), (unsigned)i);
}

static int check_onehot(world_t *w, size_t count)
{
    uint64_t mask = all_hosts_mask(w->n);
    for (int r = 0; r < w->n; r++) {
        for (size_t i = 0; i < count; i++) {
            uint64_t got = ((uint64_t *)w->recv[r])[i];
            uint64_t want = rotl64(mask, (unsigned)i);
            if (got != want)
                FAILF("rank %d element %zu: got 0x%016" PRIx64
                      " want 0x%016" PRIx64 " (a contribution counted %s), "
                      "tree %s",
                      r, i, got, want,
                      got > want ? "twice or misplaced" : "never or misplaced",
                      tree_name(&w->tree));
        }
    }
    return 0;
}

/* int64 inputs whose sum is known in closed form, element by element. */
static void fill_linear(world_t *w, size_t count)
{
    for (int r = 0; r < w->n; r++)
        for (size_t i = 0; i < count; i++)
            ((int64_t *)w->send[r])[i] = (int64_t)r * 1000003 + (int64_t)i * 7;
}

static int check_linear(world_t *w, size_t count)
{
    int64_t n = w->n;
    for (int r = 0; r < w->n; r++) {
        for (size_t i = 0; i < count; i++) {
            int64_t got = ((int64_t *)w->recv[r])[i];
            int64_t want = n * (int64_t)i * 7 + 1000003 * n * (n - 1) / 2;
            if (got != want)
                FAILF("rank %d element %zu: got %" PRId64 " want %" PRId64, r,
                      i, got, want);
        }
    }
    return 0;
}

/* The reference: AN an reduces its children in their fixed order (child
 * ANs' aggregates, then hosts in rank order), exactly as the ANs do. */
static void ref_an(const memnet_tree_t *t, int an, uint8_t *const *send,
                   size_t count, incoll_dtype_t dt, incoll_op_t op,
                   uint8_t *out)
{
    int kinds[KIDS_MAX], ntmp = 0;
    const void *srcs[KIDS_MAX];
    uint8_t *tmps[MEMNET_MAX_ANS];
    int n = memnet_tree_children(t, an, kinds);
    for (int i = 0; i < n; i++) {
        if (kinds[i] >= 0) {
            uint8_t *tmp = malloc(count * incoll_dtype_size(dt));
            ref_an(t, kinds[i], send, count, dt, op, tmp);
            tmps[ntmp++] = tmp;
            srcs[i] = tmp;
        } else {
            srcs[i] = send[-kinds[i] - 1];
        }
    }
    reduce_n(op, dt, out, srcs, n, count);
    for (int i = 0; i < ntmp; i++)
        free(tmps[i]);
}

static int check_ref(world_t *w, size_t count, incoll_dtype_t dt,
                     incoll_op_t op)
{
    size_t ds = incoll_dtype_size(dt), bytes = count * ds;
    if (count == 0)
        return 0;
    ref_an(&w->tree, 0, w->send, count, dt, op, w->ref);
    for (int r = 0; r < w->n; r++) {
        if (memcmp(w->recv[r], w->ref, bytes) != 0) {
            size_t b = 0;
            while (w->recv[r][b] == w->ref[b])
                b++;
            FAILF("rank %d differs from the reference at element %zu "
                  "(dtype %d op %d count %zu, tree %s)",
                  r, b / ds, dt, op, count, tree_name(&w->tree));
        }
        if (memcmp(w->recv[r], w->recv[0], bytes) != 0)
            FAILF("rank %d differs from rank 0", r);
    }
    return 0;
}

static int is_int(incoll_dtype_t dt)
{
    return dt <= INCOLL_UINT64;
}

/* Random inputs that keep integer arithmetic free of signed overflow. */
static void fill_value(uint8_t *p, incoll_dtype_t dt, incoll_op_t op,
                       uint64_t *rng)
{
    uint64_t x = memnet_rand(rng);
    double u = memnet_rand_unit(rng);
    int logical =
        op == INCOLL_OP_LAND || op == INCOLL_OP_LOR || op == INCOLL_OP_LXOR;
    if (is_int(dt)) {
        uint64_t v;
        if (logical)
            v = (x % 3 == 0) ? 0 : (x >> 8) | 1;
        else if (op == INCOLL_OP_SUM)
            v = (uint64_t)((int64_t)(x % 7) - 3);
        else if (op == INCOLL_OP_PROD)
            v = (x % 16 == 0)   ? 0
                : (x % 16 == 1) ? 2
                : (x % 16 < 9)  ? 1
                                : (uint64_t)-1;
        else
            v = x >> (x & 7);
        switch (incoll_dtype_size(dt)) {
        case 1: {
            uint8_t t = (uint8_t)v;
            memcpy(p, &t, 1);
            break;
        }
        case 2: {
            uint16_t t = (uint16_t)v;
            memcpy(p, &t, 2);
            break;
        }
        case 4: {
            uint32_t t = (uint32_t)v;
            memcpy(p, &t, 4);
            break;
        }
        default:
            memcpy(p, &v, 8);
            break;
        }
        return;
    }
    {
        double v;
        int small = dt == INCOLL_FLOAT16 || dt == INCOLL_BFLOAT16;
        if (logical)
            v = (x % 3 == 0) ? 0.0 : u * 4 - 2;
        else if (op == INCOLL_OP_PROD)
            v = (0.9 + 0.2 * u) * ((x & 4) ? -1 : 1);
        else
            v = ldexp(u * 2 - 1,
                      (int)(x % (small ? 10 : 40)) - (small ? 3 : 20));
        switch (dt) {
        case INCOLL_FLOAT32: {
            float f = (float)v;
            memcpy(p, &f, 4);
            break;
        }
        case INCOLL_FLOAT64:
            memcpy(p, &v, 8);
            break;
        case INCOLL_FLOAT16: {
            uint16_t h = dtype_float_to_half((float)v);
            memcpy(p, &h, 2);
            break;
        }
        default: {
            uint16_t h = dtype_float_to_bf16((float)v);
            memcpy(p, &h, 2);
            break;
        }
        }
    }
}

static void fill_random(world_t *w, uint64_t *rng, size_t count,
                        incoll_dtype_t dt, incoll_op_t op)
{
    size_t ds = incoll_dtype_size(dt);
    for (int r = 0; r < w->n; r++)
        for (size_t i = 0; i < count; i++)
            fill_value(w->send[r] + i * ds, dt, op, rng);
}

static void random_dtype_op(uint64_t *rng, incoll_dtype_t *dt, incoll_op_t *op)
{
    do {
        *dt = (incoll_dtype_t)memnet_rand_below(rng, INCOLL_DTYPE_COUNT);
        *op = (incoll_op_t)memnet_rand_below(rng, INCOLL_OP_COUNT);
    } while (!incoll_op_valid(*op, *dt));
}

static uint64_t nsegs(size_t count, incoll_dtype_t dt, uint32_t payload)
{
    size_t per = payload / incoll_dtype_size(dt);
    return (count + per - 1) / per;
}

/* ------------------------------------------------------------------ */
/* Counters. */

static agg_counters_t an_ctr(const memnet_t *net, int an)
{
    return memnet_an_counters(net, an);
}

static int an_nchildren(const memnet_tree_t *t, int an)
{
    int kinds[KIDS_MAX];
    return memnet_tree_children(t, an, kinds);
}

/* After a drain with every host idle, each AN must have reduced every
 * segment exactly once, from exactly one contribution per child. */
static int check_an_exactly_once(world_t *w, const agg_counters_t *base,
                                 uint64_t segs)
{
    for (int a = 0; a < w->tree.nans; a++) {
        agg_counters_t c = an_ctr(w->net, a);
        uint64_t red = c.reductions - base[a].reductions;
        uint64_t acc = c.contribs_accepted - base[a].contribs_accepted;
        if (red != segs)
            FAILF("an%d: %" PRIu64 " reductions for %" PRIu64 " segments", a,
                  red, segs);
        if (acc != segs * (uint64_t)an_nchildren(&w->tree, a))
            FAILF("an%d: %" PRIu64 " contributions accepted for %" PRIu64
                  " segments of %d children",
                  a, acc, segs, an_nchildren(&w->tree, a));
    }
    return 0;
}

static void snapshot_ans(world_t *w, agg_counters_t *base)
{
    for (int a = 0; a < w->tree.nans; a++)
        base[a] = an_ctr(w->net, a);
}

/* ------------------------------------------------------------------ */
/* Recording packets through the tap, to replay them later. */

typedef struct {
    incoll_ep_t src, dst;
    size_t len;
    uint8_t *data;
    wire_hdr_t h;
} rec_pkt_t;

typedef struct {
    rec_pkt_t *v;
    size_t n, cap;
    int on;
} recorder_t;

static void rec_tap(void *arg, incoll_ep_t src, incoll_ep_t dst,
                    const uint8_t *pkt, size_t len)
{
    recorder_t *rec = arg;
    rec_pkt_t *p;
    if (!rec->on)
        return;
    if (rec->n == rec->cap) {
        size_t ncap = rec->cap ? rec->cap * 2 : 256;
        rec_pkt_t *nv = realloc(rec->v, ncap * sizeof(*nv));
        if (nv == NULL)
            return;
        rec->v = nv;
        rec->cap = ncap;
    }
    p = &rec->v[rec->n];
    p->data = malloc(len);
    if (p->data == NULL)
        return;
    memcpy(p->data, pkt, len);
    p->src = src;
    p->dst = dst;
    p->len = len;
    if (wire_parse(pkt, len, &p->h, NULL) != INCOLL_OK)
        memset(&p->h, 0, sizeof(p->h));
    rec->n++;
}

static void rec_clear(recorder_t *rec)
{
    for (size_t i = 0; i < rec->n; i++)
        free(rec->v[i].data);
    rec->n = 0;
}

static void rec_free(recorder_t *rec)
{
    rec_clear(rec);
    free(rec->v);
    memset(rec, 0, sizeof(*rec));
}

static const rec_pkt_t *rec_find(const recorder_t *rec, incoll_ep_t src,
                                 incoll_ep_t dst, int type, int slot,
                                 int64_t epoch)
{
    for (size_t i = 0; i < rec->n; i++) {
        const rec_pkt_t *p = &rec->v[i];
        if (p->src == src && p->dst == dst && p->h.type == type &&
            p->h.slot == slot && p->h.epoch == (uint32_t)epoch)
            return p;
    }
    return NULL;
}

static void inject(memnet_t *net, const rec_pkt_t *p, uint64_t delay)
{
    memnet_inject(net, p->src, p->dst, p->data, p->len, delay);
}

/* ------------------------------------------------------------------ */
/* Packets made by hand. */

/* The mac key of group id with the 64-bit key k, as the drivers derive it
 * without a fabric secret. */
static wire_key_t gkey(uint32_t id, uint64_t k)
{
    wire_key_t key;
    wire_key_derive(NULL, WIRE_KEY_GROUP, id, k, &key);
    return key;
}

/* The key a header made by hand is sealed with: the tests put the 64-bit
 * group key (the admin key for STATS) into its mac field, as v1 had it in
 * its key field, and mkpkt() seals the packet under the key derived from
 * it. */
static wire_key_t hdr_key(const wire_hdr_t *h)
{
    wire_key_t key;
    if (h->type == WIRE_STATS_REQ || h->type == WIRE_STATS_REP)
        wire_key_derive(NULL, WIRE_KEY_ADMIN, h->mac, 0, &key);
    else
        key = gkey(h->group, h->mac);
    return key;
}

static size_t mkpkt(uint8_t *buf, const wire_hdr_t *h, const void *payload,
                    size_t plen)
{
    wire_key_t key = hdr_key(h);
    wire_hdr_t z = *h;

    z.mac = 0;
    wire_pack(&z, buf);
    if (plen) {
        if (payload)
            memcpy(buf + WIRE_HDR_LEN, payload, plen);
        else
            memset(buf + WIRE_HDR_LEN, 0x11, plen);
    }
    wire_mac_seal(&key, buf, buf + WIRE_HDR_LEN, plen);
    return WIRE_HDR_LEN + plen;
}

static wire_hdr_t contrib_hdr(uint32_t group, uint64_t key, uint16_t child,
                              uint16_t slot, uint32_t epoch, uint32_t count)
{
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_CONTRIB,
                    .op = INCOLL_OP_SUM,
                    .dtype = INCOLL_INT64,
                    .group = group,
                    .child = child,
                    .mac = key, /* sealed under it by mkpkt() */
                    .slot = slot,
                    .epoch = epoch,
                    .count = count,
                    .total = 0}; /* "total" carries the generation: 0 */
    return h;
}

/* A capturing send callback for a standalone AN or host engine. */
typedef struct {
    int n;
    /* The 64-bit group key of what is captured: macok[i] says whether
     * packet i's mac is right under it, and h[i].mac is set to it (so that
     * mkpkt() seals a copy of h[i] alike). */
    uint64_t key;
    int macok[256];
    incoll_ep_t dst[256];
    wire_hdr_t h[256];
    uint8_t payload[256][128];
    size_t len[256];
} capture_t;

static void cap_send(void *arg, incoll_ep_t dst, const void *hdr,
                     const void *payload, size_t len)
{
    capture_t *c = arg;
    uint8_t pkt[WIRE_HDR_LEN + 65536];
    if (c->n >= 256)
        return;
    memcpy(pkt, hdr, WIRE_HDR_LEN);
    if (len)
        memcpy(pkt + WIRE_HDR_LEN, payload, len);
    c->dst[c->n] = dst;
    if (wire_parse(pkt, WIRE_HDR_LEN + len, &c->h[c->n], NULL) != INCOLL_OK) {
        memset(&c->h[c->n], 0xff, sizeof(c->h[c->n]));
        c->macok[c->n] = 0;
    } else {
        wire_hdr_t *h = &c->h[c->n];
        wire_key_t key;
        h->mac = c->key;
        key = hdr_key(h);
        c->macok[c->n] = wire_mac_check(&key, pkt, WIRE_HDR_LEN + len);
    }
    memcpy(c->payload[c->n], payload, len < 128 ? len : 128);
    c->len[c->n] = len;
    c->n++;
}

/* ------------------------------------------------------------------ */
/* 1. A clean network over many shapes: every contribution exactly once,
 * at the right offset, and nothing retransmitted or dropped. */

static int clean_shape(const memnet_tree_t *t)
{
    static const size_t counts[] = {1, 3, 8, 9, 32, 8 * 4 * 50 + 5};
    const uint32_t payload = 64, slots = 4;
    memnet_group_cfg_t g = group_cfg(slots, payload);
    world_t w;
    agg_counters_t base[MEMNET_MAX_ANS];
    uint64_t segs = 0;
    int rc = -1;

    if (world_init(&w, t, &CLEAN_NET, &g, 8 * 1605) != 0)
        goto out;
    snapshot_ans(&w, base);
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        size_t count = counts[k];
        uint64_t s = nsegs(count, INCOLL_UINT64, payload);

        fill_onehot(&w, count);
        if (world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, 10 * SEC) != 0 ||
            check_onehot(&w, count) != 0)
            goto out;
        if (world_op(&w, count, INCOLL_UINT64, INCOLL_OP_BOR, 10 * SEC) != 0 ||
            check_onehot(&w, count) != 0)
            goto out;
        fill_linear(&w, count);
        if (world_op(&w, count, INCOLL_INT64, INCOLL_OP_SUM, 10 * SEC) != 0 ||
            check_linear(&w, count) != 0 ||
            check_ref(&w, count, INCOLL_INT64, INCOLL_OP_SUM) != 0)
            goto out;
        segs += 3 * s;
        /* Every AN replicated each segment once and saw nothing odd. */
        for (int a = 0; a < t->nans; a++) {
            agg_counters_t c = an_ctr(w.net, a);
            if (c.results_sent - base[a].results_sent != segs ||
                c.duplicates_dropped || c.stale_dropped || c.results_resent ||
                c.reforwards || c.malformed_dropped || c.mismatch_dropped ||
                c.bad_source || c.bad_mac || c.unknown_group) {
                fprintf(stderr,
                        "    an%d on a clean network: results_sent %" PRIu64
                        " for %" PRIu64 " segments, dup %" PRIu64
                        " stale %" PRIu64 " resent %" PRIu64 "\n",
                        a, c.results_sent, segs, c.duplicates_dropped,
                        c.stale_dropped, c.results_resent);
                goto out;
            }
        }
        for (int r = 0; r < w.n; r++) {
            const host_engine_counters_t *hc =
                host_engine_counters(memnet_host(w.net, w.g, r));
            if (hc->retransmits || hc->fast_retransmits ||
                hc->duplicate_results || hc->dropped || hc->results != segs ||
                hc->segments != segs) {
                fprintf(stderr,
                        "    rank %d on a clean network: retransmits %" PRIu64
                        " duplicates %" PRIu64 " results %" PRIu64
                        " for %" PRIu64 " segments\n",
                        r, hc->retransmits, hc->duplicate_results, hc->results,
                        segs);
                goto out;
            }
        }
    }
    if (check_an_exactly_once(&w, base, segs) != 0)
        goto out;
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "    tree %s\n", tree_name(t));
    world_free(&w);
    return rc;
}

TEST(core_clean_shapes, TEST_UNIT)
{
    static const char *const specs[] = {
        "[1]",                     /* one AN, one host */
        "[[4]]",                   /* a root with one child AN */
        "[[1][3][5]]",             /* uneven leaves */
        "[[[2][1]][[3]] 2]",       /* three levels, hosts at the root */
        "[[[[1]]]]",               /* a chain */
        "[3 [2] 1 [1]]",           /* hosts and ANs interleaved */
        "[[1][1][1][1][1][1][1]]", /* many leaves of one host */
    };
    static const int radix[][2] = {{1, 4},  {2, 2},  {5, 2},   {16, 4},
                                   {27, 3}, {62, 4}, {62, 62}, {62, 2}};
    memnet_tree_t t;

    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        CHECK_MSG(memnet_tree_parse(&t, specs[i]) == 0, "%s", specs[i]);
        CHECK(clean_shape(&t) == 0);
    }
    for (size_t i = 0; i < sizeof(radix) / sizeof(radix[0]); i++) {
        CHECK(memnet_tree_radix(&t, radix[i][0], radix[i][1]) == 0);
        CHECK_EQ_INT(t.nhosts, radix[i][0]);
        CHECK(clean_shape(&t) == 0);
    }
    /* The shape builders themselves. */
    CHECK(memnet_tree_radix(&t, 16, 4) == 0);
    CHECK_EQ_INT(t.nans, 5);
    CHECK(memnet_tree_radix(&t, 62, 2) == 0);
    CHECK_EQ_INT(t.nans, 31 + 16 + 8 + 4 + 2 + 1);
    CHECK(memnet_tree_parse(&t, "[[1][3][5]]") == 0);
    CHECK_EQ_INT(t.nans, 4);
    CHECK_EQ_INT(t.nhosts, 9);
    CHECK_EQ_INT(t.host_an[0], 1);
    CHECK_EQ_INT(t.host_an[8], 3);
    CHECK(memnet_tree_parse(&t, "[]") != 0);
    CHECK(memnet_tree_parse(&t, "[[]1]") != 0);
    CHECK(memnet_tree_parse(&t, "[1") != 0);
    CHECK(memnet_tree_parse(&t, "[1]x") != 0);
    return TEST_PASSED;
}

/* A larger payload: one float64 vector in few big segments, against the
 * reference. */
TEST(core_clean_big_payload, TEST_UNIT)
{
    memnet_group_cfg_t g = group_cfg(3, 8192);
    world_t w;
    uint64_t rng = 42;
    CHECK(world_from_spec(&w, "[[2][3] 1]", &CLEAN_NET, &g, 8 * 5000) == 0);
    for (int k = 0; k < 3; k++) {
        size_t count = k == 0 ? 5000 : k == 1 ? 1024 : 1023;
        fill_random(&w, &rng, count, INCOLL_FLOAT64, INCOLL_OP_SUM);
        CHECK(world_op(&w, count, INCOLL_FLOAT64, INCOLL_OP_SUM, SEC) == 0);
        CHECK(check_ref(&w, count, INCOLL_FLOAT64, INCOLL_OP_SUM) == 0);
    }
    world_free(&w);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* 2. Thousands of random allreduces over random trees on a network that
 * drops, duplicates, reorders and delays; consecutive operations on the
 * same engines, with count 0 now and then. */

static memnet_cfg_t random_net(uint64_t *rng, uint64_t seed)
{
    memnet_cfg_t c = {.seed = seed};
    c.delay_ns = 1 * US + memnet_rand_below(rng, 10 * US);
    c.jitter_ns = memnet_rand_below(rng, 20 * US);
    c.drop = 0.05 + 0.15 * memnet_rand_unit(rng);
    c.dup = 0.2 * memnet_rand_unit(rng);
    c.reorder = 0.3 * memnet_rand_unit(rng);
    c.reorder_ns = memnet_rand_below(rng, 100 * US);
    c.start_skew_ns = memnet_rand_below(rng, 50 * US);
    return c;
}

static size_t random_count(uint64_t *rng, size_t max)
{
    uint64_t k = memnet_rand_below(rng, 10);
    if (k == 0)
        return 0;
    if (k < 6)
        return 1 + memnet_rand_below(rng, 20);
    return 1 + memnet_rand_below(rng, max);
}

/* What the random rounds went through, to show the faults happened. */
static struct {
    uint64_t dropped, duplicated, reordered, retransmits;
    uint64_t inplace, copied;       /* contributions reduced where they arrived,
                                       and accepted (the rest were copied) */
    uint64_t accepted, first_shard; /* contributions accepted, and by the
                                       ANs' first shards */
} random_faults;

/* memnet_cfg_t.an_batch_ns and an_shards of the random rounds. */
static uint64_t round_batch_ns;
static int round_shards;

/* One round: a random tree and network, then nops operations. Returns the
 * number of operations run, or -1. */
static int random_round(uint64_t round_seed, int nops, int max_hosts,
                        size_t max_count)
{
    /* Multiples of 8 that cut odd segments (3, 5, 125 int64); payloads that
     * are not multiples of 8 have their own test (core_odd_payload). */
    static const uint32_t payloads[] = {16, 24, 40, 64, 128, 1000};
    uint64_t rng = round_seed * 0x9E3779B97F4A7C15ull + 7;
    memnet_tree_t t;
    memnet_cfg_t cfg;
    memnet_group_cfg_t g;
    world_t w;
    agg_counters_t base[MEMNET_MAX_ANS];
    uint64_t segs = 0;
    uint32_t slots, payload;
    int rc = -1;

    memnet_tree_random(&t, &rng, max_hosts,
                       1 + (int)memnet_rand_below(&rng, 4));
    cfg = random_net(&rng, round_seed);
    cfg.an_batch_ns = round_batch_ns;
    cfg.an_shards = round_shards;
    slots = 1 + (uint32_t)memnet_rand_below(&rng, 8);
    payload = payloads[memnet_rand_below(&rng, 6)];
    g = lossy_group_cfg(slots, payload);
    g.window = (uint32_t)memnet_rand_below(&rng, slots + 1);
    if (world_init(&w, &t, &cfg, &g, 8 * max_count) != 0)
        goto out;
    snapshot_ans(&w, base);
    for (int k = 0; k < nops; k++) {
        size_t count = random_count(&rng, max_count);
        incoll_dtype_t dt;
        incoll_op_t op;
        int onehot = memnet_rand_below(&rng, 6) == 0 && w.n <= 64;

        if (onehot) {
            dt = INCOLL_UINT64;
            op = INCOLL_OP_SUM;
            fill_onehot(&w, count);
        } else {
            random_dtype_op(&rng, &dt, &op);
            fill_random(&w, &rng, count, dt, op);
        }
        if (world_op(&w, count, dt, op, 100 * SEC) != 0)
            goto fail;
        if (onehot && check_onehot(&w, count) != 0)
            goto fail;
        if (check_ref(&w, count, dt, op) != 0)
            goto fail;
        segs += count ? nsegs(count, dt, payload) : 0;
        continue;
    fail:
        fprintf(stderr,
                "    round seed %" PRIu64 ", op %d: %d hosts, slots %u window "
                "%u payload %u, drop %.2f dup %.2f reorder %.2f\n",
                round_seed, k, w.n, slots, g.window, payload, cfg.drop, cfg.dup,
                cfg.reorder);
        goto out;
    }
    /* Late packets still in flight may still arrive: let them, then every
     * AN must have reduced each segment exactly once. */
    if (memnet_drain(w.net, 100 * SEC) != 0) {
        fprintf(stderr, "    drain did not end\n");
        goto out;
    }
    if (check_an_exactly_once(&w, base, segs) != 0)
        goto out;
    for (int r = 0; r < w.n; r++) {
        const host_engine_counters_t *hc =
            host_engine_counters(memnet_host(w.net, w.g, r));
        if (hc->results != segs || hc->timeouts != 0) {
            fprintf(stderr,
                    "    rank %d: %" PRIu64 " results for %" PRIu64
                    " segments, %" PRIu64 " timeouts\n",
                    r, hc->results, segs, hc->timeouts);
            goto out;
        }
    }
    {
        const memnet_stats_t *st = memnet_stats(w.net);
        random_faults.dropped += st->dropped;
        random_faults.duplicated += st->duplicated;
        random_faults.reordered += st->reordered;
        for (int r = 0; r < w.n; r++)
            random_faults.retransmits +=
                host_engine_counters(memnet_host(w.net, w.g, r))->retransmits +
                host_engine_counters(memnet_host(w.net, w.g, r))
                    ->fast_retransmits;
        for (int a = 0; a < t.nans; a++) {
            agg_counters_t c = an_ctr(w.net, a);
            random_faults.inplace += c.rx_inplace;
            random_faults.copied += c.contribs_accepted - c.rx_inplace;
            random_faults.accepted += c.contribs_accepted;
            random_faults.first_shard +=
                agg_counters(memnet_an(w.net, a))->contribs_accepted;
        }
    }
    rc = nops;
out:
    world_free(&w);
    return rc;
}

/*
 * The same rounds with the ANs taking what arrives within 50 us as one
 * batch (agg_on_batch), as the daemon's receive does: contributions are
 * reduced from where they arrived or copied aside at the end of the
 * batch, under the same drop, duplication and reordering, with the same
 * results exactly once.
 */
TEST(core_batch_lossy, TEST_UNIT)
{
    int total = 0;
    round_batch_ns = 50000;
    for (uint64_t round = 1; round <= 25; round++) {
        int n = random_round(round, 40, 40, 300);
        CHECK_MSG(n > 0, "round %" PRIu64, round);
        total += n;
    }
    CHECK(total >= 900);
    CHECK(random_faults.dropped > 300 && random_faults.duplicated > 300 &&
          random_faults.reordered > 300);
    /* Both ways were taken: reduced where it arrived, and copied. */
    CHECK(random_faults.inplace > 1000);
    CHECK(random_faults.copied > 1000);
    return TEST_PASSED;
}

/*
 * ANs of 2 and 4 shards (incoll-agg's threads, agg_shard_of), each owning
 * its share of every group's slots, under drop, duplication and
 * reordering, with and without batches: every segment reduced exactly
 * once at every AN, every result right.
 */
TEST(core_shards_lossy, TEST_UNIT)
{
    static const int shards[] = {2, 4};
    int total = 0;
    for (int k = 0; k < 2; k++) {
        round_shards = shards[k];
        for (uint64_t round = 1; round <= 12; round++) {
            int n;
            round_batch_ns = round % 2 ? 50000 : 0;
            n = random_round(round + 100 * (uint64_t)k, 30, 30, 300);
            CHECK_MSG(n > 0, "%d shards, round %" PRIu64, shards[k], round);
            total += n;
        }
    }
    CHECK(total >= 600);
    CHECK(random_faults.dropped > 200 && random_faults.duplicated > 200 &&
          random_faults.reordered > 200);
    /* The other shards did their share of the slots. */
    CHECK(random_faults.first_shard < random_faults.accepted * 3 / 4);
    return TEST_PASSED;
}

TEST(core_random_lossy, TEST_UNIT)
{
    int total = 0;
    for (uint64_t round = 1; round <= 50; round++) {
        int n = random_round(round, 50, 40, 300);
        CHECK_MSG(n > 0, "round %" PRIu64, round);
        total += n;
    }
    /* A few rounds on bigger trees (up to 62 hosts, bit per host). */
    for (uint64_t round = 1001; round <= 1003; round++) {
        int n = random_round(round, 15, 62, 60);
        CHECK_MSG(n > 0, "round %" PRIu64, round);
        total += n;
    }
    CHECK(total >= 2500);
    CHECK(random_faults.dropped > 1000);
    CHECK(random_faults.duplicated > 1000);
    CHECK(random_faults.reordered > 1000);
    CHECK(random_faults.retransmits > 1000);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* 3. Old packets re-injected after their slots moved on. */

TEST(core_late_packets, TEST_UNIT)
{
    /* an0 is the root over an1 (ranks 0, 1) and an2 (ranks 2, 3, 4). One
     * operation of 32 int64 in 64-byte packets is one epoch of 4 slots. */
    memnet_group_cfg_t g = group_cfg(4, 64);
    world_t w;
    recorder_t rec = {0}, rec1 = {0};
    recorder_t old[3] = {{0}, {0}, {0}};
    const rec_pkt_t *c0, *a0, *r0, *h0;
    incoll_ep_t an0, an1, host0;
    agg_counters_t b0, b1, c;
    host_engine_counters_t hb;
    const host_engine_counters_t *hc;
    const size_t count = 32;
    uint64_t rng = 3, segs = 0;
    agg_counters_t base[MEMNET_MAX_ANS];

    CHECK(world_from_spec(&w, "[[2][3]]", &CLEAN_NET, &g, 8 * count) == 0);
    an0 = memnet_an_ep(w.net, 0);
    an1 = memnet_an_ep(w.net, 1);
    host0 = memnet_host_ep(w.net, w.g, 0);
    hc = host_engine_counters(memnet_host(w.net, w.g, 0));
    snapshot_ans(&w, base);
    memnet_set_tap(w.net, rec_tap, &rec1);
    rec1.on = 1;
    fill_onehot(&w, count);
    CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
    CHECK(check_onehot(&w, count) == 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    segs += 4;
    rec1.on = 0;
    memnet_set_tap(w.net, rec_tap, &rec);
    c0 = rec_find(&rec1, host0, an1, WIRE_CONTRIB, 0, 0);
    a0 = rec_find(&rec1, an1, an0, WIRE_CONTRIB, 0, 0);
    r0 = rec_find(&rec1, an0, an1, WIRE_RESULT, 0, 0);
    h0 = rec_find(&rec1, an1, host0, WIRE_RESULT, 0, 0);
    CHECK(c0 && a0 && r0 && h0);

    /* Epoch 0 done everywhere. A duplicate contribution gets the result
     * resent to that child only; the host ignores it. */
    memset(w.recv[0], SENTINEL, 8 * count);
    b1 = an_ctr(w.net, 1);
    hb = *hc;
    inject(w.net, c0, 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    c = an_ctr(w.net, 1);
    CHECK_EQ_INT(c.duplicates_dropped, b1.duplicates_dropped + 1);
    CHECK_EQ_INT(c.results_resent, b1.results_resent + 1);
    CHECK_EQ_INT(c.packets_out, b1.packets_out + 1);
    CHECK_EQ_INT(hc->duplicate_results, hb.duplicate_results + 1);
    CHECK_EQ_INT(host_engine_status(memnet_host(w.net, w.g, 0)), INCOLL_OK);
    for (size_t i = 0; i < 8 * count; i++)
        CHECK_EQ_INT(w.recv[0][i], SENTINEL);

    /* A duplicate aggregate at the root: the root resends the result to
     * an1, which already has it and drops it without replicating. */
    b0 = an_ctr(w.net, 0);
    b1 = an_ctr(w.net, 1);
    inject(w.net, a0, 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    c = an_ctr(w.net, 0);
    CHECK_EQ_INT(c.duplicates_dropped, b0.duplicates_dropped + 1);
    CHECK_EQ_INT(c.results_resent, b0.results_resent + 1);
    c = an_ctr(w.net, 1);
    CHECK_EQ_INT(c.duplicates_dropped, b1.duplicates_dropped + 1);
    CHECK_EQ_INT(c.packets_out, b1.packets_out);
    CHECK_EQ_INT(c.results_sent, b1.results_sent);

    /* Old results: dropped by the AN, ignored by the host. */
    b1 = an_ctr(w.net, 1);
    hb = *hc;
    inject(w.net, r0, 0);
    inject(w.net, h0, 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    c = an_ctr(w.net, 1);
    CHECK_EQ_INT(c.duplicates_dropped, b1.duplicates_dropped + 1);
    CHECK_EQ_INT(c.packets_out, b1.packets_out);
    CHECK_EQ_INT(hc->duplicate_results, hb.duplicate_results + 1);
    for (size_t i = 0; i < 8 * count; i++)
        CHECK_EQ_INT(w.recv[0][i], SENTINEL);

    /* Epoch 1: epoch 0 is the previous one, whose result is still kept. */
    fill_onehot(&w, count);
    CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
    CHECK(check_onehot(&w, count) == 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    segs += 4;
    rec_clear(&rec);
    rec.on = 1;
    b0 = an_ctr(w.net, 0);
    b1 = an_ctr(w.net, 1);
    hb = *hc;
    inject(w.net, c0, 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    c = an_ctr(w.net, 1);
    CHECK_EQ_INT(c.results_resent, b1.results_resent + 1);
    CHECK_EQ_INT(c.duplicates_dropped, b1.duplicates_dropped);
    CHECK_EQ_INT(c.stale_dropped, b1.stale_dropped);
    CHECK_EQ_INT(hc->duplicate_results, hb.duplicate_results + 1);
    /* What went back is epoch 0's result, not epoch 1's. */
    CHECK(rec_find(&rec, an1, host0, WIRE_RESULT, 0, 0) != NULL);
    CHECK(rec_find(&rec, an1, host0, WIRE_RESULT, 0, 1) == NULL);
    b1 = an_ctr(w.net, 1);
    inject(w.net, a0, 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    c = an_ctr(w.net, 0);
    CHECK_EQ_INT(c.results_resent, b0.results_resent + 1);
    c = an_ctr(w.net, 1);
    CHECK_EQ_INT(c.duplicates_dropped, b1.duplicates_dropped + 1);
    CHECK_EQ_INT(c.packets_out, b1.packets_out);
    rec.on = 0;
    rec_clear(&rec);

    /* Epoch 2: epoch 0 is out of the window and dropped as stale. */
    fill_onehot(&w, count);
    CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
    CHECK(check_onehot(&w, count) == 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    segs += 4;
    b0 = an_ctr(w.net, 0);
    b1 = an_ctr(w.net, 1);
    inject(w.net, c0, 0);
    inject(w.net, a0, 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    c = an_ctr(w.net, 1);
    CHECK_EQ_INT(c.stale_dropped, b1.stale_dropped + 1);
    CHECK_EQ_INT(c.packets_out, b1.packets_out);
    c = an_ctr(w.net, 0);
    CHECK_EQ_INT(c.stale_dropped, b0.stale_dropped + 1);
    CHECK_EQ_INT(c.packets_out, b0.packets_out);

    /* Then old packets of the last three operations arrive in the middle
     * of each new one, on a network that also loses and duplicates. */
    {
        memnet_cfg_t lossy = {.delay_ns = 2 * US,
                              .jitter_ns = 5 * US,
                              .drop = 0.05,
                              .dup = 0.1,
                              .reorder = 0.1,
                              .reorder_ns = 20 * US};
        memnet_set_faults(w.net, &lossy);
    }
    {
        agg_counters_t before[MEMNET_MAX_ANS], after;
        uint64_t handled = 0;
        snapshot_ans(&w, before);
        for (int k = 0; k < 40; k++) {
            rec.on = 1;
            for (int o = 0; o < 3; o++)
                for (size_t i = 0; i < old[o].n; i++)
                    inject(w.net, &old[o].v[i],
                           memnet_rand_below(&rng, 60 * US));
            fill_onehot(&w, count);
            CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, 10 * SEC) ==
                  0);
            CHECK(check_onehot(&w, count) == 0);
            segs += 4;
            rec.on = 0;
            /* Shift: old[2] <- old[1] <- old[0] <- rec. */
            rec_free(&old[2]);
            old[2] = old[1];
            old[1] = old[0];
            old[0] = rec;
            memset(&rec, 0, sizeof(rec));
        }
        CHECK(memnet_drain(w.net, 10 * SEC) == 0);
        for (int a = 0; a < w.tree.nans; a++) {
            after = an_ctr(w.net, a);
            handled +=
                (after.stale_dropped - before[a].stale_dropped) +
                (after.duplicates_dropped - before[a].duplicates_dropped) +
                (after.results_resent - before[a].results_resent);
        }
        CHECK(handled > 100);
    }
    CHECK(check_an_exactly_once(&w, base, segs) == 0);
    for (int o = 0; o < 3; o++)
        rec_free(&old[o]);
    rec_free(&rec);
    rec_free(&rec1);
    world_free(&w);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* 4. An AN that never answers: a timeout in bounded virtual time, never a
 * hang, and the group refuses further operations. */

/* Time an engine with these parameters may wait for a result that never
 * comes: the progress limit, or every retry at the longest timeout. */
static uint64_t fail_bound(const memnet_group_cfg_t *g)
{
    uint64_t by_retries = (uint64_t)(g->max_retries + 1) * g->rto_max_ns;
    return by_retries < g->progress_timeout_ns ? by_retries
                                               : g->progress_timeout_ns;
}

static int dead_an_case(const char *spec, int dead_an, memnet_group_cfg_t g,
                        size_t count, int cut_after_results, int want_retries)
{
    world_t w;
    uint64_t t0, tcut, bound = fail_bound(&g);
    int rc = -1;

    if (world_from_spec(&w, spec, &CLEAN_NET, &g, 8 * count) != 0)
        goto out;
    log_level_current = -1; /* the timeouts are expected: keep quiet */
    fill_onehot(&w, count);
    if (cut_after_results == 0)
        memnet_set_node_drop(w.net, memnet_an_ep(w.net, dead_an), 1.0);
    t0 = memnet_now(w.net);
    world_start(&w, count, INCOLL_UINT64, INCOLL_OP_SUM);
    tcut = t0;
    if (cut_after_results > 0) {
        /* Let some segments complete, then the AN dies. */
        const host_engine_counters_t *hc =
            host_engine_counters(memnet_host(w.net, w.g, 0));
        while (hc->results < (uint64_t)cut_after_results && memnet_step(w.net))
            ;
        if (hc->results < (uint64_t)cut_after_results)
            FAILF("the operation never got going");
        memnet_set_node_drop(w.net, memnet_an_ep(w.net, dead_an), 1.0);
        tcut = memnet_now(w.net);
    }
    if (memnet_run(w.net, 100 * bound) != 0)
        FAILF("hang: hosts still busy %" PRIu64 " ms after the AN died",
              (memnet_now(w.net) - tcut) / MS);
    for (int r = 0; r < w.n; r++) {
        host_engine_t *eng = memnet_host(w.net, w.g, r);
        const host_engine_counters_t *hc = host_engine_counters(eng);
        uint64_t took = memnet_done_ns(w.net, w.g, r) - tcut;
        if (host_engine_status(eng) != INCOLL_ERR_TIMEOUT)
            FAILF("rank %d: status %s, not a timeout", r,
                  incoll_status_string(host_engine_status(eng)));
        /* In-flight results may still land just after the cut (a few
         * microseconds here), so allow 1 ms of slack past the bound. */
        if (took > bound + (cut_after_results ? MS : 0))
            FAILF("rank %d: failed %" PRIu64
                  " us after the AN died, bound %" PRIu64 " us",
                  r, took / US, bound / US);
        if (took < g.rto_init_ns)
            FAILF("rank %d: gave up after %" PRIu64 " us, before any retry", r,
                  took / US);
        if (hc->timeouts != 1)
            FAILF("rank %d: %" PRIu64 " timeouts", r, hc->timeouts);
        if (want_retries >= 0 && hc->retransmits != (uint64_t)want_retries)
            FAILF("rank %d: %" PRIu64 " retransmissions, want %d", r,
                  hc->retransmits, want_retries);
        if (host_engine_deadline(eng) != UINT64_MAX)
            FAILF("rank %d: a deadline after the failure", r);
        /* The members are out of step: no further operations. */
        if (host_engine_start(eng, w.send[r], w.recv[r], count, INCOLL_UINT64,
                              INCOLL_OP_SUM,
                              memnet_now(w.net)) != INCOLL_ERR_GROUP_FAILED)
            FAILF("rank %d: start after a timeout did not fail", r);
        if (host_engine_start(eng, w.send[r], w.recv[r], 0, INCOLL_UINT64,
                              INCOLL_OP_SUM,
                              memnet_now(w.net)) != INCOLL_ERR_GROUP_FAILED)
            FAILF("rank %d: count-0 start after a timeout did not fail", r);
    }
    /* And through the network driver too. */
    world_start(&w, count, INCOLL_UINT64, INCOLL_OP_SUM);
    if (memnet_run(w.net, SEC) != 0)
        FAILF("a start on a failed group hangs");
    for (int r = 0; r < w.n; r++)
        if (memnet_start_status(w.net, w.g, r) != INCOLL_ERR_GROUP_FAILED)
            FAILF("rank %d: start returned %d", r,
                  memnet_start_status(w.net, w.g, r));
    rc = 0;
out:
    world_free(&w);
    return rc;
}

TEST(core_timeout, TEST_UNIT)
{
    memnet_group_cfg_t g = group_cfg(4, 64);

    /* Bounded by retries: 5 retries at most 4 ms apart. */
    g.rto_init_ns = 1 * MS;
    g.rto_min_ns = 1 * MS;
    g.rto_max_ns = 4 * MS;
    g.max_retries = 5;
    g.progress_timeout_ns = 10 * SEC;
    CHECK(dead_an_case("[2]", 0, g, 8, 0, 5) == 0);
    CHECK(dead_an_case("[[2][3]]", 0, g, 40, 0, -1) == 0);
    CHECK(dead_an_case("[[2][3]]", 2, g, 40, 0, -1) == 0);

    /* Bounded by the progress limit: retries would go on for 1000 x 4 ms. */
    g.max_retries = 1000;
    g.progress_timeout_ns = 50 * MS;
    CHECK(dead_an_case("[2]", 0, g, 8, 0, -1) == 0);
    CHECK(dead_an_case("[[1][3][5]]", 3, g, 100, 0, -1) == 0);

    /* The AN dies in the middle of a long operation (slots reused many
     * times): every rank still ends, with a timeout. */
    g.slots = 2;
    CHECK(dead_an_case("[[2][2]]", 2, g, 8 * 200, 10, -1) == 0);
    g.max_retries = 4;
    g.progress_timeout_ns = 10 * SEC;
    CHECK(dead_an_case("[[2][2]]", 0, g, 8 * 200, 25, -1) == 0);

    /* The defaults fail within their documented bound too (3 s). */
    g = group_cfg(4, 64);
    {
        host_engine_params_t d;
        host_engine_params_default(&d);
        g.rto_init_ns = d.rto_init_ns;
        g.rto_min_ns = d.rto_min_ns;
        g.rto_max_ns = d.rto_max_ns;
        g.max_retries = d.max_retries;
        g.progress_timeout_ns = d.progress_timeout_ns;
        CHECK(fail_bound(&g) <= 3 * SEC + 250 * MS);
    }
    CHECK(dead_an_case("[[3][1]]", 1, g, 64, 0, -1) == 0);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* 5. The user's buffer is written exactly once per segment. */

TEST(core_recv_written_once, TEST_UNIT)
{
    memnet_group_cfg_t g = group_cfg(2, 64);
    world_t w;
    recorder_t rec = {0};
    const size_t count = 8 * 40; /* 40 segments over 2 slots */
    const host_engine_counters_t *hc;
    incoll_ep_t host0;
    uint64_t dups;
    size_t nres = 0;

    CHECK(world_from_spec(&w, "[[2][2]]", &CLEAN_NET, &g, 8 * count) == 0);
    host0 = memnet_host_ep(w.net, w.g, 0);
    hc = host_engine_counters(memnet_host(w.net, w.g, 0));
    memnet_set_tap(w.net, rec_tap, &rec);

    /* After the operation: replay every result rank 0 got, three times,
     * over a sentinel. */
    rec.on = 1;
    fill_onehot(&w, count);
    CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
    CHECK(check_onehot(&w, count) == 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    rec.on = 0;
    memset(w.recv[0], 0x5A, 8 * count);
    dups = hc->duplicate_results;
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < rec.n; i++)
            if (rec.v[i].dst == host0 && rec.v[i].h.type == WIRE_RESULT) {
                inject(w.net, &rec.v[i], (uint64_t)k * US);
                nres++;
            }
    CHECK_EQ_INT(nres, 3 * 40);
    CHECK(memnet_drain(w.net, SEC) == 0);
    CHECK_EQ_INT(hc->duplicate_results, dups + nres);
    CHECK_EQ_INT(host_engine_status(memnet_host(w.net, w.g, 0)), INCOLL_OK);
    for (size_t i = 0; i < 8 * count; i++)
        CHECK_EQ_INT(w.recv[0][i], 0x5A);

    /* During an operation: once segment 0 is in, mark it, and replay its
     * result; the engine must not write it again. */
    rec_clear(&rec);
    rec.on = 1;
    world_start(&w, count, INCOLL_UINT64, INCOLL_OP_SUM);
    while (w.recv[0][0] == SENTINEL && memnet_step(w.net))
        ;
    CHECK(host_engine_status(memnet_host(w.net, w.g, 0)) == INCOLL_INPROGRESS);
    CHECK_EQ_INT(((uint64_t *)w.recv[0])[0], all_hosts_mask(w.n));
    memset(w.recv[0], 0x5A, 64);
    dups = hc->duplicate_results;
    {
        const rec_pkt_t *seg0 = NULL;
        for (size_t i = 0; i < rec.n && !seg0; i++)
            if (rec.v[i].dst == host0 && rec.v[i].h.type == WIRE_RESULT &&
                rec.v[i].h.offset == 0)
                seg0 = &rec.v[i];
        CHECK(seg0 != NULL);
        inject(w.net, seg0, 0);
        inject(w.net, seg0, 3 * US);
        inject(w.net, seg0, 30 * US);
    }
    CHECK(memnet_run(w.net, SEC) == 0);
    CHECK(world_check_ok(&w, count) == 0);
    CHECK_EQ_INT(hc->duplicate_results, dups + 3);
    for (size_t i = 0; i < 64; i++)
        CHECK_EQ_INT(w.recv[0][i], 0x5A);
    for (size_t i = 8; i < count; i++)
        CHECK_EQ_INT(((uint64_t *)w.recv[0])[i],
                     rotl64(all_hosts_mask(w.n), (unsigned)i));
    rec_free(&rec);
    world_free(&w);
    return TEST_PASSED;
}

/* host_engine_set_mirror: the result lands in the mirror too, whole, on
 * a network that drops, duplicates and reorders; the operation after it
 * does not touch it; an operation of another kind ignores it. */
TEST(core_result_mirror, TEST_UNIT)
{
    memnet_cfg_t cfg = {.seed = 11,
                        .delay_ns = 2 * US,
                        .jitter_ns = 10 * US,
                        .drop = 0.1,
                        .dup = 0.3,
                        .reorder = 0.3,
                        .reorder_ns = 40 * US};
    memnet_group_cfg_t g = lossy_group_cfg(3, 64);
    world_t w;
    const size_t count = 8 * 48;
    host_engine_t *e0;
    uint8_t *mirror = malloc(8 * count + 64);

    CHECK(mirror != NULL);
    CHECK(world_from_spec(&w, "[[2][2]]", &cfg, &g, 8 * count) == 0);
    e0 = memnet_host(w.net, w.g, 0);
    memset(mirror, 0x5A, 8 * count + 64);
    fill_onehot(&w, count);
    host_engine_set_mirror(e0, mirror);
    CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
    CHECK(check_onehot(&w, count) == 0);
    CHECK_EQ_INT(host_engine_mirrored(e0), count);
    CHECK(memcmp(mirror, w.recv[0], 8 * count) == 0);
    for (size_t i = 8 * count; i < 8 * count + 64; i++)
        CHECK_EQ_INT(mirror[i], 0x5A);
    /* The end of the operation stopped it. */
    memset(mirror, 0x5A, 8 * count);
    fill_onehot(&w, count);
    CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
    CHECK(check_onehot(&w, count) == 0);
    CHECK_EQ_INT(host_engine_mirrored(e0), 0);
    for (size_t i = 0; i < 8 * count; i++)
        CHECK_EQ_INT(mirror[i], 0x5A);
    world_free(&w);
    free(mirror);
    return TEST_PASSED;
}

/* Watches every rank's buffer after every event on a network that
 * duplicates half the packets: each segment changes from the sentinel
 * once, to the right value, and never again. */
TEST(core_recv_watch, TEST_UNIT)
{
    memnet_cfg_t cfg = {.seed = 9,
                        .delay_ns = 2 * US,
                        .jitter_ns = 10 * US,
                        .drop = 0.1,
                        .dup = 0.5,
                        .reorder = 0.3,
                        .reorder_ns = 40 * US};
    memnet_group_cfg_t g = lossy_group_cfg(3, 64);
    world_t w;
    const size_t count = 8 * 64, per = 8, nseg = count / per;
    static uint8_t marked[NMAX][64];
    uint64_t events = 0;

    CHECK(world_from_spec(&w, "[[2][1] 1]", &cfg, &g, 8 * count) == 0);
    for (int round = 0; round < 3; round++) {
        memset(marked, 0, sizeof(marked));
        fill_onehot(&w, count);
        world_start(&w, count, INCOLL_UINT64, INCOLL_OP_SUM);
        while (memnet_busy(w.net) > 0) {
            CHECK(memnet_step(w.net) == 1);
            events++;
            for (int r = 0; r < w.n; r++) {
                uint64_t *v = (uint64_t *)w.recv[r];
                for (size_t s = 0; s < nseg; s++) {
                    uint64_t *seg = v + s * per;
                    if (!marked[r][s]) {
                        if (seg[0] == 0xA5A5A5A5A5A5A5A5ull)
                            continue;
                        for (size_t i = 0; i < per; i++)
                            CHECK_EQ_INT(seg[i],
                                         rotl64(all_hosts_mask(w.n),
                                                (unsigned)(s * per + i)));
                        memset(seg, 0x3C, per * 8);
                        marked[r][s] = 1;
                    } else {
                        for (size_t i = 0; i < per; i++)
                            CHECK_MSG(seg[i] == 0x3C3C3C3C3C3C3C3Cull,
                                      "rank %d segment %zu written twice", r,
                                      s);
                    }
                }
            }
        }
        CHECK(world_check_ok(&w, count) == 0);
        for (int r = 0; r < w.n; r++)
            for (size_t s = 0; s < nseg; s++)
                CHECK(marked[r][s]);
    }
    CHECK(memnet_stats(w.net)->duplicated > 100);
    CHECK(events > 1000);
    world_free(&w);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* 6. The AN never trusts a packet. */

typedef struct {
    const char *what;
    uint8_t pkt[WIRE_HDR_LEN + 65100];
    size_t len;
    incoll_ep_t src;
    int an;
    size_t ctr_off; /* offsetof(agg_counters_t, field) expected to grow */
} bad_case_t;

#define CTR(f) offsetof(agg_counters_t, f)

static uint64_t ctr_at(const agg_counters_t *c, size_t off)
{
    return *(const uint64_t *)((const uint8_t *)c + off);
}

static uint64_t drops_total(const agg_counters_t *c)
{
    return c->malformed_dropped + c->unknown_group + c->bad_mac +
           c->bad_source + c->mismatch_dropped + c->stale_dropped +
           c->duplicates_dropped + c->version_mismatch + c->mac_mismatch;
}

TEST(core_an_garbage, TEST_UNIT)
{
    /* an0: root over an1 (ranks 0, 1), an2 (ranks 2, 3) and rank 4.
     * Children of an0: 0 = an1, 1 = an2, 2 = rank 4 (learned). */
    memnet_group_cfg_t g = group_cfg(4, 64);
    world_t w;
    static bad_case_t bc;
    incoll_ep_t an0, an1, an2, h0, stranger = 999;
    uint64_t rng = 77;
    const size_t count = 40;
    int ncases = 0;

    CHECK(world_from_spec(&w, "[[2][2]1]", &CLEAN_NET, &g, 8 * count) == 0);
    an0 = memnet_an_ep(w.net, 0);
    an1 = memnet_an_ep(w.net, 1);
    an2 = memnet_an_ep(w.net, 2);
    h0 = memnet_host_ep(w.net, w.g, 0);

    for (int k = 0;; k++) {
        wire_hdr_t h = contrib_hdr(5, GROUP_KEY, 2, 0, 0, 8);
        size_t plen = 64;
        int raw = 0;
        memset(&bc, 0, sizeof(bc));
        bc.src = stranger;
        bc.an = 0;
        bc.ctr_off = CTR(malformed_dropped);
        switch (k) {
        case 0:
            bc.what = "empty";
            bc.len = 0;
            raw = 1;
            break;
        case 1:
            bc.what = "1 byte";
            bc.len = 1;
            raw = 1;
            break;
        case 2:
            bc.what = "truncated header";
            bc.len = WIRE_HDR_LEN - 1;
            break;
        case 3:
            bc.what = "bad magic";
            break;
        case 4:
            bc.what = "bad version";
            bc.ctr_off = CTR(version_mismatch);
            break;
        case 5:
            bc.what = "type 0";
            h.type = 0;
            break;
        case 6:
            bc.what = "type 99";
            h.type = 99;
            break;
        case 7:
            bc.what = "p2p data";
            h.type = WIRE_P2P_DATA;
            h.count = 0;
            plen = 0;
            break;
        case 8:
            bc.what = "stats reply";
            h.type = WIRE_STATS_REP;
            h.count = 3;
            plen = 3;
            break;
        case 9:
            bc.what = "bad dtype";
            h.dtype = INCOLL_DTYPE_COUNT;
            break;
        case 10:
            bc.what = "bad dtype 255";
            h.dtype = 255;
            break;
        case 11:
            bc.what = "bad op";
            h.op = INCOLL_OP_COUNT;
            break;
        case 12:
            bc.what = "band on float";
            h.op = INCOLL_OP_BAND;
            h.dtype = INCOLL_FLOAT64;
            break;
        case 13:
            bc.what = "bxor on half";
            h.op = INCOLL_OP_BXOR;
            h.dtype = INCOLL_FLOAT16;
            h.count = 32;
            break;
        case 14:
            bc.what = "zero count";
            h.count = 0;
            plen = 0;
            break;
        case 15:
            bc.what = "payload short";
            plen = 63;
            break;
        case 16:
            bc.what = "payload long";
            plen = 65;
            break;
        case 17:
            bc.what = "count too large";
            h.count = 10000;
            plen = 65000;
            break;
        case 18:
            bc.what = "child out of range";
            h.child = 3;
            bc.src = h0;
            break;
        case 19:
            bc.what = "child 0xffff";
            h.child = 0xffff;
            break;
        case 20:
            bc.what = "slot out of range";
            h.slot = 4;
            break;
        case 21:
            bc.what = "slot 0xffff";
            h.slot = 0xffff;
            break;
        case 22:
            bc.what = "payload over the group's";
            h.count = 9;
            plen = 72;
            break;
        case 23:
            bc.what = "unknown group";
            h.group = 6;
            bc.ctr_off = CTR(unknown_group);
            break;
        case 24:
            bc.what = "wrong key";
            h.mac = GROUP_KEY ^ 1;
            bc.ctr_off = CTR(bad_mac);
            break;
        case 25:
            bc.what = "admin key as group key";
            h.mac = ADMIN_KEY;
            bc.ctr_off = CTR(bad_mac);
            break;
        case 26:
            bc.what = "an child at a wrong endpoint";
            h.child = 0;
            bc.src = an2;
            bc.ctr_off = CTR(bad_source);
            break;
        case 27:
            bc.what = "an child spoofed by a host";
            h.child = 1;
            bc.src = h0;
            bc.ctr_off = CTR(bad_source);
            break;
        case 28:
            bc.what = "result at the root";
            h.type = WIRE_RESULT;
            bc.src = an1;
            bc.ctr_off = CTR(bad_source);
            break;
        case 29:
            bc.what = "result from a child";
            h.type = WIRE_RESULT;
            bc.an = 1;
            bc.src = h0;
            bc.ctr_off = CTR(bad_source);
            break;
        case 30:
            bc.what = "result from a sibling";
            h.type = WIRE_RESULT;
            bc.an = 1;
            bc.src = an2;
            bc.ctr_off = CTR(bad_source);
            break;
        case 31:
            bc.what = "result slot out of range";
            h.type = WIRE_RESULT;
            h.slot = 4;
            bc.an = 1;
            bc.src = an0;
            break;
        case 32:
            bc.what = "stats with a wrong key";
            h.type = WIRE_STATS_REQ;
            h.mac = ADMIN_KEY ^ 2;
            h.count = 0;
            plen = 0;
            bc.ctr_off = CTR(bad_mac);
            break;
        default:
            k = -1;
            break;
        }
        if (k < 0)
            break;
        if (!raw && bc.len == 0) {
            bc.len = mkpkt(bc.pkt, &h, NULL, plen);
            if (k == 3)
                bc.pkt[0] ^= 0x40;
            if (k == 4)
                bc.pkt[4] = WIRE_VERSION + 1;
        } else if (!raw) {
            mkpkt(bc.pkt, &h, NULL, 0); /* then cut short */
        }
        {
            agg_t *agg = memnet_an(w.net, bc.an);
            agg_counters_t before = *agg_counters(agg), after;
            agg_on_packet(agg, bc.src, bc.pkt, bc.len);
            after = *agg_counters(agg);
            CHECK_MSG(
                ctr_at(&after, bc.ctr_off) == ctr_at(&before, bc.ctr_off) + 1,
                "case %d (%s): the expected counter did not move", k, bc.what);
            CHECK_MSG(drops_total(&after) == drops_total(&before) + 1,
                      "case %d (%s): counted %" PRIu64 " times", k, bc.what,
                      drops_total(&after) - drops_total(&before));
            CHECK_EQ_INT(after.packets_in, before.packets_in + 1);
            CHECK_MSG(after.packets_out == before.packets_out,
                      "case %d (%s): the AN answered", k, bc.what);
            CHECK_EQ_INT(after.contribs_accepted, 0);
        }
        ncases++;
    }
    CHECK_EQ_INT(ncases, 33);

    /* Random bytes, then random headers with the right magic and version. */
    for (int k = 0; k < 4000; k++) {
        agg_t *agg = memnet_an(w.net, (int)memnet_rand_below(&rng, 3));
        agg_counters_t before = *agg_counters(agg), after;
        size_t len = (size_t)memnet_rand_below(&rng, 200);
        for (size_t i = 0; i < len; i++)
            bc.pkt[i] = (uint8_t)memnet_rand(&rng);
        if (k >= 2000 && len >= WIRE_HDR_LEN) {
            uint32_t grp = 1000 + (uint32_t)memnet_rand_below(&rng, 1000);
            static const uint8_t types[] = {WIRE_CONTRIB,
                                            WIRE_RESULT,
                                            WIRE_STATS_REQ,
                                            WIRE_STATS_REP,
                                            WIRE_P2P_DATA,
                                            WIRE_P2P_ACK,
                                            77};
            memcpy(bc.pkt, "INCL", 4);
            bc.pkt[4] = WIRE_VERSION;
            bc.pkt[5] = types[memnet_rand_below(&rng, 7)];
            bc.pkt[6] = (uint8_t)memnet_rand_below(&rng, INCOLL_OP_COUNT + 1);
            bc.pkt[7] =
                (uint8_t)memnet_rand_below(&rng, INCOLL_DTYPE_COUNT + 1);
            memcpy(bc.pkt + 8, &grp, 4); /* little-endian host assumed */
            if (memnet_rand_below(&rng, 2)) {
                /* Make the length consistent half of the time. */
                uint32_t cnt = (uint32_t)memnet_rand_below(&rng, 20);
                size_t ds = bc.pkt[7] < INCOLL_DTYPE_COUNT
                                ? incoll_dtype_size((incoll_dtype_t)bc.pkt[7])
                                : 1;
                if (bc.pkt[5] != WIRE_CONTRIB && bc.pkt[5] != WIRE_RESULT)
                    ds = 1;
                memcpy(bc.pkt + 32, &cnt, 4);
                len = WIRE_HDR_LEN + cnt * ds;
            }
        } else if (len >= 4 && memcmp(bc.pkt, "INCL", 4) == 0) {
            bc.pkt[0] = 0;
        }
        agg_on_packet(agg, stranger, bc.pkt, len);
        after = *agg_counters(agg);
        CHECK_MSG(drops_total(&after) == drops_total(&before) + 1,
                  "random packet %d (len %zu) not counted once", k, len);
        CHECK_EQ_INT(after.packets_out, before.packets_out);
        CHECK_EQ_INT(after.contribs_accepted, 0);
    }
    CHECK_EQ_INT(memnet_queued(w.net), 0);

    /* The group still works, and so do its learned hosts. */
    for (int k = 0; k < 3; k++) {
        fill_onehot(&w, count);
        CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
        CHECK(check_onehot(&w, count) == 0);
    }
    world_free(&w);
    return TEST_PASSED;
}

/* The AN state machine packet by packet, on a standalone AN with fixed
 * child endpoints 11 and 12 and parent 99. */
TEST(core_an_protocol, TEST_UNIT)
{
    static capture_t cap;
    agg_params_t ap = {
        .name = "mid", .admin_key = 0, .send = cap_send, .send_arg = &cap};
    incoll_ep_t kids[2] = {11, 12};

    cap.key = 42;
    agg_group_params_t gp = {.id = 1,
                             .key = gkey(1, 42),
                             .nchildren = 2,
                             .children = kids,
                             .parent = 99,
                             .index_at_parent = 3,
                             .slots = 2,
                             .max_payload = 64};
    agg_t *agg = agg_create(&ap);
    const agg_counters_t *c;
    uint8_t pkt[WIRE_HDR_LEN + 64];
    int64_t a[8], b[8], res[8];
    wire_hdr_t h;
    size_t len;

    CHECK(agg != NULL);
    c = agg_counters(agg);
    CHECK_EQ_INT(agg_group_add(agg, &gp), INCOLL_OK);
    for (int i = 0; i < 8; i++) {
        a[i] = i + 1;
        b[i] = 100 * (i + 1);
        res[i] = -7 * i;
    }
#define FEED(src, hdr, payload, plen)                                          \
    do {                                                                       \
        len = mkpkt(pkt, &(hdr), (payload), (plen));                           \
        agg_on_packet(agg, (src), pkt, len);                                   \
    } while (0)

    /* Epoch 0 of slot 0: child 0 arrives and sets the slot's shape. */
    h = contrib_hdr(1, 42, 0, 0, 0, 8);
    FEED(11, h, a, 64);
    CHECK_EQ_INT(c->contribs_accepted, 1);
    CHECK_EQ_INT(cap.n, 0);
    /* Child 1 from the wrong endpoint. (A child whose call differs:
     * core_an_mismatch.) */
    h = contrib_hdr(1, 42, 1, 0, 0, 8);
    FEED(13, h, b, 64);
    CHECK_EQ_INT(c->bad_source, 1);
    /* Child 0 again while collecting: a duplicate, answered with a
     * WAIT (its resend arrived; no data, no result). */
    h = contrib_hdr(1, 42, 0, 0, 0, 8);
    FEED(11, h, a, 64);
    CHECK_EQ_INT(c->duplicates_dropped, 1);
    CHECK_EQ_INT(c->waits, 1);
    CHECK_EQ_INT(cap.n, 1);
    CHECK_EQ_INT(cap.dst[0], 11);
    CHECK_EQ_INT(cap.h[0].type, WIRE_RESULT);
    CHECK_EQ_INT(cap.h[0].flags & (WIRE_F_QUERY | WIRE_F_WAIT | WIRE_F_NODATA),
                 WIRE_F_QUERY | WIRE_F_WAIT | WIRE_F_NODATA);
    CHECK_EQ_INT(c->contribs_accepted, 1);
    cap.n = 0;
    /* Child 1: the slot is reduced and forwarded to the parent. */
    h = contrib_hdr(1, 42, 1, 0, 0, 8);
    FEED(12, h, b, 64);
    CHECK_EQ_INT(c->reductions, 1);
    CHECK_EQ_INT(cap.n, 1);
    CHECK_EQ_INT(cap.dst[0], 99);
    CHECK_EQ_INT(cap.h[0].type, WIRE_CONTRIB);
    CHECK_EQ_INT(cap.h[0].child, 3);
    CHECK_EQ_INT(cap.h[0].slot, 0);
    CHECK_EQ_INT(cap.h[0].epoch, 0);
    CHECK_EQ_INT(cap.h[0].count, 8);
    CHECK_EQ_INT(cap.h[0].root, 0); /* the call's root: none */
    CHECK(cap.macok[0]);            /* sealed under the group's key */
    for (int i = 0; i < 8; i++)
        CHECK_EQ_INT(((int64_t *)cap.payload[0])[i], a[i] + b[i]);
    /* A duplicate now re-forwards the aggregate, and tells the child
     * its resend arrived (WAIT). */
    FEED(12, h, b, 64);
    CHECK_EQ_INT(c->reforwards, 1);
    CHECK_EQ_INT(cap.n, 3);
    CHECK_EQ_INT(cap.dst[1], 99);
    CHECK(memcmp(cap.payload[1], cap.payload[0], 64) == 0);
    CHECK_EQ_INT(cap.dst[2], 12);
    CHECK_EQ_INT(cap.h[2].flags & (WIRE_F_QUERY | WIRE_F_WAIT),
                 WIRE_F_QUERY | WIRE_F_WAIT);
    cap.n = 2; /* (the checks below count from the aggregates) */
    /* Epoch 1 before the result of epoch 0: impossible for a correct
     * child, dropped as stale. */
    h = contrib_hdr(1, 42, 0, 0, 1, 8);
    FEED(11, h, a, 64);
    CHECK_EQ_INT(c->stale_dropped, 1);
    /* Results: from a child, of the wrong shape, of another epoch. */
    h = contrib_hdr(1, 42, 3, 0, 0, 8);
    h.type = WIRE_RESULT;
    FEED(12, h, res, 64);
    CHECK_EQ_INT(c->bad_source, 2);
    h.count = 4;
    FEED(99, h, res, 32);
    CHECK_EQ_INT(c->mismatch_dropped, 1);
    h.count = 8;
    h.epoch = 1;
    FEED(99, h, res, 64);
    CHECK_EQ_INT(c->duplicates_dropped, 3);
    CHECK_EQ_INT(cap.n, 2);
    /* The right result is replicated to both children. */
    h.epoch = 0;
    FEED(99, h, res, 64);
    CHECK_EQ_INT(c->results_sent, 1);
    CHECK_EQ_INT(cap.n, 4);
    for (int k = 2; k < 4; k++) {
        CHECK_EQ_INT(cap.dst[k], k == 2 ? 11 : 12);
        CHECK_EQ_INT(cap.h[k].type, WIRE_RESULT);
        CHECK_EQ_INT(cap.h[k].child, k - 2);
        CHECK_EQ_INT(cap.h[k].epoch, 0);
        CHECK(memcmp(cap.payload[k], res, 64) == 0);
    }
    /* The same result again is a duplicate. */
    FEED(99, h, res, 64);
    CHECK_EQ_INT(c->duplicates_dropped, 4);
    CHECK_EQ_INT(cap.n, 4);
    /* Child 0 lost it: its retransmission gets it back, alone. */
    h = contrib_hdr(1, 42, 0, 0, 0, 8);
    FEED(11, h, a, 64);
    CHECK_EQ_INT(c->results_resent, 1);
    CHECK_EQ_INT(cap.n, 5);
    CHECK_EQ_INT(cap.dst[4], 11);
    CHECK(memcmp(cap.payload[4], res, 64) == 0);
    /* Child 0 moves to epoch 1 (with another shape: a new operation). */
    h = contrib_hdr(1, 42, 0, 0, 1, 2);
    FEED(11, h, a, 16);
    CHECK_EQ_INT(c->contribs_accepted, 3);
    /* Child 1 lost result 0: it is still kept beside epoch 1. */
    h = contrib_hdr(1, 42, 1, 0, 0, 8);
    FEED(12, h, b, 64);
    CHECK_EQ_INT(c->results_resent, 2);
    CHECK_EQ_INT(cap.n, 6);
    CHECK_EQ_INT(cap.dst[5], 12);
    CHECK_EQ_INT(cap.h[5].epoch, 0);
    CHECK_EQ_INT(cap.h[5].count, 8);
    CHECK(memcmp(cap.payload[5], res, 64) == 0);
    /* Child 1 joins epoch 1: reduced and forwarded. */
    h = contrib_hdr(1, 42, 1, 0, 1, 2);
    FEED(12, h, b, 16);
    CHECK_EQ_INT(c->reductions, 2);
    CHECK_EQ_INT(cap.n, 7);
    CHECK_EQ_INT(cap.h[6].epoch, 1);
    CHECK_EQ_INT(cap.h[6].count, 2);
    CHECK_EQ_INT(((int64_t *)cap.payload[6])[1], a[1] + b[1]);
    h = contrib_hdr(1, 42, 3, 0, 1, 2);
    h.type = WIRE_RESULT;
    FEED(99, h, res, 16);
    CHECK_EQ_INT(cap.n, 9);
    /* Epoch 2 from child 0; then child 1's epoch-0 retransmission is two
     * epochs old: stale, and nothing is sent. */
    h = contrib_hdr(1, 42, 0, 0, 2, 8);
    FEED(11, h, a, 64);
    h = contrib_hdr(1, 42, 1, 0, 0, 8);
    FEED(12, h, b, 64);
    CHECK_EQ_INT(c->stale_dropped, 2);
    CHECK_EQ_INT(cap.n, 9);
    /* Slot 1 was never touched by any of this. */
    h = contrib_hdr(1, 42, 0, 1, 0, 8);
    FEED(11, h, a, 64);
    h = contrib_hdr(1, 42, 1, 1, 0, 8);
    FEED(12, h, b, 64);
    CHECK_EQ_INT(cap.n, 10);
    CHECK_EQ_INT(cap.h[9].slot, 1);
    CHECK_EQ_INT(cap.h[9].epoch, 0);
    agg_destroy(agg);

    /* A root with learned (host) children: results go to wherever the
     * child last sent from. */
    {
        incoll_ep_t learn[2] = {INCOLL_EP_NONE, INCOLL_EP_NONE};
        agg_group_params_t rp = {.id = 2,
                                 .key = gkey(2, 43),
                                 .nchildren = 2,
                                 .children = learn,
                                 .parent = INCOLL_EP_NONE,
                                 .slots = 1,
                                 .max_payload = 64};
        memset(&cap, 0, sizeof(cap));
        agg = agg_create(&ap);
        CHECK(agg != NULL);
        c = agg_counters(agg);
        CHECK_EQ_INT(agg_group_add(agg, &rp), INCOLL_OK);
        h = contrib_hdr(2, 43, 0, 0, 0, 8);
        FEED(500, h, a, 64);
        h.child = 1;
        FEED(600, h, b, 64);
        CHECK_EQ_INT(cap.n, 2);
        CHECK_EQ_INT(cap.dst[0], 500);
        CHECK_EQ_INT(cap.dst[1], 600);
        CHECK_EQ_INT(cap.h[0].child, 0);
        CHECK_EQ_INT(cap.h[1].child, 1);
        CHECK_EQ_INT(((int64_t *)cap.payload[0])[7], a[7] + b[7]);
        /* Child 0 retransmits from a new port. */
        h.child = 0;
        FEED(501, h, a, 64);
        CHECK_EQ_INT(cap.n, 3);
        CHECK_EQ_INT(cap.dst[2], 501);
        CHECK_EQ_INT(c->bad_source, 0);
        /* A result at the root is never accepted. */
        h.type = WIRE_RESULT;
        FEED(501, h, a, 64);
        CHECK_EQ_INT(c->bad_source, 1);
        agg_destroy(agg);
    }
#undef FEED
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* Group table: arguments, duplicates, growth, removal, churn. */

/* 1 if the AN finds group id: a packet with a wrong key counts bad_mac
 * for a known group and unknown_group otherwise. */
static int an_knows(agg_t *agg, uint32_t id)
{
    uint8_t pkt[WIRE_HDR_LEN + 8];
    wire_hdr_t h = contrib_hdr(id, 0, 0, 0, 0, 1);
    uint64_t bad = agg_counters(agg)->bad_mac;
    uint64_t unk = agg_counters(agg)->unknown_group;
    size_t len = mkpkt(pkt, &h, NULL, 8);
    /* Keys are id-derived and never 0, so key 0 is always wrong. */
    agg_on_packet(agg, 1, pkt, len);
    if (agg_counters(agg)->bad_mac == bad + 1 &&
        agg_counters(agg)->unknown_group == unk)
        return 1;
    if (agg_counters(agg)->unknown_group == unk + 1 &&
        agg_counters(agg)->bad_mac == bad)
        return 0;
    return -1;
}

static incoll_status_t add_group(agg_t *agg, uint32_t id)
{
    incoll_ep_t kids[3] = {INCOLL_EP_NONE, 7, INCOLL_EP_NONE};
    agg_group_params_t gp = {.id = id,
                             .key = gkey(id, 0x1000 + id),
                             .nchildren = 3,
                             .children = kids,
                             .parent = INCOLL_EP_NONE,
                             .slots = 4,
                             .max_payload = 256};
    return agg_group_add(agg, &gp);
}

TEST(core_group_table, TEST_UNIT)
{
    static capture_t cap;
    agg_params_t ap = {.name = "tbl", .send = cap_send, .send_arg = &cap};
    agg_t *agg = agg_create(&ap);
    incoll_ep_t kids[AGG_MAX_CHILDREN + 1];
    agg_group_params_t gp;
    char text[4096];
    const uint32_t mul = 2654435761u; /* ids that collide in the hash */

    CHECK(agg != NULL);
    for (int i = 0; i <= AGG_MAX_CHILDREN; i++)
        kids[i] = INCOLL_EP_NONE;
    gp = (agg_group_params_t){.id = 9,
                              .key = gkey(9, 1),
                              .nchildren = 2,
                              .children = kids,
                              .parent = INCOLL_EP_NONE,
                              .slots = 4,
                              .max_payload = 64};
    /* Bad parameters. */
    {
        agg_group_params_t b;
        b = gp;
        b.nchildren = 0;
        CHECK_EQ_INT(agg_group_add(agg, &b), INCOLL_ERR_INVALID_ARG);
        b = gp;
        b.nchildren = -1;
        CHECK_EQ_INT(agg_group_add(agg, &b), INCOLL_ERR_INVALID_ARG);
        b = gp;
        b.nchildren = AGG_MAX_CHILDREN + 1;
        CHECK_EQ_INT(agg_group_add(agg, &b), INCOLL_ERR_INVALID_ARG);
        b = gp;
        b.slots = 0;
        CHECK_EQ_INT(agg_group_add(agg, &b), INCOLL_ERR_INVALID_ARG);
        b = gp;
        b.slots = 65536;
        CHECK_EQ_INT(agg_group_add(agg, &b), INCOLL_ERR_INVALID_ARG);
        b = gp;
        b.max_payload = 7;
        CHECK_EQ_INT(agg_group_add(agg, &b), INCOLL_ERR_INVALID_ARG);
        b = gp;
        b.max_payload = WIRE_MAX_PAYLOAD + 1;
        CHECK_EQ_INT(agg_group_add(agg, &b), INCOLL_ERR_INVALID_ARG);
        b = gp;
        b.children = NULL;
        CHECK_EQ_INT(agg_group_add(agg, &b), INCOLL_ERR_INVALID_ARG);
        CHECK_EQ_INT(agg_group_count(agg), 0);
        /* The limits themselves are fine. */
        b = gp;
        b.id = 100;
        b.nchildren = AGG_MAX_CHILDREN;
        b.slots = 1;
        b.max_payload = 8;
        CHECK_EQ_INT(agg_group_add(agg, &b), INCOLL_OK);
        b = gp;
        b.id = 101;
        b.nchildren = 1;
        b.slots = 65535;
        b.max_payload = 8;
        CHECK_EQ_INT(agg_group_add(agg, &b), INCOLL_OK);
        CHECK_EQ_INT(agg_group_count(agg), 2);
        CHECK_EQ_INT(agg_group_remove(agg, 100), INCOLL_OK);
        CHECK_EQ_INT(agg_group_remove(agg, 101), INCOLL_OK);
    }
    /* Duplicates and unknown ids. */
    CHECK_EQ_INT(agg_group_add(agg, &gp), INCOLL_OK);
    CHECK_EQ_INT(agg_group_add(agg, &gp), INCOLL_ERR_BUSY);
    gp.key = gkey(9, 2);
    gp.slots = 8;
    CHECK_EQ_INT(agg_group_add(agg, &gp), INCOLL_ERR_BUSY);
    CHECK_EQ_INT(agg_group_count(agg), 1);
    CHECK_EQ_INT(agg_group_remove(agg, 10), INCOLL_ERR_NOT_FOUND);
    CHECK_EQ_INT(agg_group_remove(agg, 9), INCOLL_OK);
    CHECK_EQ_INT(agg_group_remove(agg, 9), INCOLL_ERR_NOT_FOUND);
    CHECK_EQ_INT(agg_group_count(agg), 0);
    CHECK_EQ_INT(agg_counters(agg)->groups, 0);
    CHECK_EQ_INT(an_knows(agg, 9), 0);

    /* 100 groups, with ids that share hash buckets: the table grows. */
    for (uint32_t i = 0; i < 100; i++) {
        CHECK_EQ_INT(add_group(agg, i * mul + 3), INCOLL_OK);
        CHECK_EQ_INT(agg_group_count(agg), (int)i + 1);
    }
    CHECK_EQ_INT(agg_counters(agg)->groups, 100);
    agg_format_counters(agg, text, sizeof(text));
    CHECK(strstr(text, " groups=100") != NULL);
    for (uint32_t i = 0; i < 100; i++) {
        CHECK_EQ_INT(an_knows(agg, i * mul + 3), 1);
        CHECK_EQ_INT(add_group(agg, i * mul + 3), INCOLL_ERR_BUSY);
    }
    CHECK_EQ_INT(an_knows(agg, 100 * mul + 3), 0);
    for (uint32_t i = 0; i < 100; i += 2)
        CHECK_EQ_INT(agg_group_remove(agg, i * mul + 3), INCOLL_OK);
    CHECK_EQ_INT(agg_group_count(agg), 50);
    for (uint32_t i = 0; i < 100; i++)
        CHECK_EQ_INT(an_knows(agg, i * mul + 3), (int)(i & 1));
    for (uint32_t i = 1; i < 100; i += 2)
        CHECK_EQ_INT(agg_group_remove(agg, i * mul + 3), INCOLL_OK);
    CHECK_EQ_INT(agg_group_count(agg), 0);
    for (uint32_t i = 0; i < 100; i++)
        CHECK_EQ_INT(an_knows(agg, i * mul + 3), 0);

    /* Churn: 5 live groups at a time, 3000 adds and removes through a
     * table full of tombstones. */
    for (uint32_t i = 0; i < 3000; i++) {
        uint32_t id = 50000 + i * 7;
        CHECK_EQ_INT(add_group(agg, id), INCOLL_OK);
        if (i >= 5)
            CHECK_EQ_INT(agg_group_remove(agg, id - 35), INCOLL_OK);
        CHECK_EQ_INT(agg_group_count(agg), i < 5 ? (int)i + 1 : 5);
        if (i % 97 == 0 || i > 2990) {
            for (uint32_t j = (i >= 4 ? i - 4 : 0); j <= i; j++)
                CHECK_EQ_INT(an_knows(agg, 50000 + j * 7), 1);
            if (i >= 5)
                CHECK_EQ_INT(an_knows(agg, id - 35), 0);
        }
    }
    /* A group keeps working after all that: one host child contributes
     * with the right key. */
    {
        uint8_t pkt[WIRE_HDR_LEN + 8];
        incoll_ep_t one[1] = {INCOLL_EP_NONE};
        agg_group_params_t g1 = {.id = 77,
                                 .key = gkey(77, 5),
                                 .nchildren = 1,
                                 .children = one,
                                 .parent = INCOLL_EP_NONE,
                                 .slots = 1,
                                 .max_payload = 8};
        wire_hdr_t h = contrib_hdr(77, 5, 0, 0, 0, 1);
        int64_t v = 12345;
        CHECK_EQ_INT(agg_group_add(agg, &g1), INCOLL_OK);
        cap.n = 0;
        agg_on_packet(agg, 321, pkt, mkpkt(pkt, &h, &v, 8));
        CHECK_EQ_INT(cap.n, 1);
        CHECK_EQ_INT(cap.dst[0], 321);
        CHECK_EQ_INT(((int64_t *)cap.payload[0])[0], 12345);
    }
    agg_destroy(agg);
    return TEST_PASSED;
}

/* Two groups over the same ANs, with operations interleaved. */
TEST(core_concurrent_groups, TEST_UNIT)
{
    memnet_cfg_t cfg = {.seed = 4,
                        .delay_ns = 3 * US,
                        .jitter_ns = 10 * US,
                        .drop = 0.1,
                        .dup = 0.1,
                        .reorder = 0.2,
                        .reorder_ns = 30 * US,
                        .start_skew_ns = 20 * US};
    memnet_group_cfg_t ga = lossy_group_cfg(4, 64),
                       gb = lossy_group_cfg(2, 128);
    world_t a, b;
    uint64_t rng = 11;
    const size_t max_count = 500;

    ga.id = 7;
    ga.key = 0x7777;
    gb.id = 9;
    gb.key = 0x9999;
    /* World a owns the network; world b borrows it for its group. */
    CHECK(world_from_spec(&a, "[[3][2]1]", &cfg, &ga, 8 * max_count) == 0);
    memset(&b, 0, sizeof(b));
    b.net = a.net;
    b.tree = a.tree;
    b.gcfg = gb;
    b.n = a.n;
    b.cap = a.cap;
    b.g = memnet_add_group(a.net, &gb);
    CHECK(b.g == 1);
    for (int r = 0; r < b.n; r++) {
        b.send[r] = calloc(1, b.cap);
        b.recv[r] = calloc(1, b.cap);
    }
    b.ref = calloc(1, b.cap);
    for (int an = 0; an < a.tree.nans; an++)
        CHECK_EQ_INT(agg_group_count(memnet_an(a.net, an)), 2);

    for (int k = 0; k < 60; k++) {
        size_t ca = random_count(&rng, max_count),
               cb = random_count(&rng, max_count);
        incoll_dtype_t da, db;
        incoll_op_t oa, ob;
        random_dtype_op(&rng, &da, &oa);
        random_dtype_op(&rng, &db, &ob);
        if (k % 3 == 0) {
            /* Same shape on both: a packet crossing groups would show. */
            db = da;
            ob = oa;
            cb = ca;
        }
        fill_random(&a, &rng, ca, da, oa);
        fill_random(&b, &rng, cb, db, ob);
        world_start(&a, ca, da, oa);
        if (k % 2) {
            /* Start b while a is half way. */
            for (int s = 0; s < 50 && memnet_step(a.net); s++)
                ;
        }
        world_start(&b, cb, db, ob);
        CHECK(memnet_run(a.net, 100 * SEC) == 0);
        CHECK(world_check_ok(&a, ca) == 0);
        CHECK(world_check_ok(&b, cb) == 0);
        CHECK(check_ref(&a, ca, da, oa) == 0);
        CHECK(check_ref(&b, cb, db, ob) == 0);
    }
    for (int an = 0; an < a.tree.nans; an++) {
        const agg_counters_t *c = agg_counters(memnet_an(a.net, an));
        CHECK_EQ_INT(c->bad_mac, 0);
        CHECK_EQ_INT(c->unknown_group, 0);
        CHECK_EQ_INT(c->mismatch_dropped, 0);
    }
    /* Group b is released on every AN while its hosts still run an
     * operation: they time out, group a is unaffected. */
    for (int an = 0; an < a.tree.nans; an++) {
        CHECK_EQ_INT(agg_group_remove(memnet_an(a.net, an), gb.id), INCOLL_OK);
        CHECK_EQ_INT(agg_group_count(memnet_an(a.net, an)), 1);
    }
    log_level_current = -1; /* b's timeouts are expected */
    fill_onehot(&a, 100);
    fill_onehot(&b, 100);
    world_start(&b, 100, INCOLL_UINT64, INCOLL_OP_SUM);
    world_start(&a, 100, INCOLL_UINT64, INCOLL_OP_SUM);
    CHECK(memnet_run(a.net, 1000 * SEC) == 0);
    CHECK(world_check_ok(&a, 100) == 0);
    CHECK(check_onehot(&a, 100) == 0);
    for (int r = 0; r < b.n; r++)
        CHECK_EQ_INT(host_engine_status(memnet_host(a.net, b.g, r)),
                     INCOLL_ERR_TIMEOUT);
    {
        uint64_t unknown = 0;
        for (int an = 0; an < a.tree.nans; an++)
            unknown += agg_counters(memnet_an(a.net, an))->unknown_group;
        CHECK(unknown >= (uint64_t)b.n);
    }
    b.net = NULL;
    world_free(&b);
    world_free(&a);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* 7. Wire format. */

static uint64_t le_at(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static int why_is(const void *buf, size_t len, const char *want)
{
    wire_hdr_t h;
    const char *why = NULL;
    if (wire_parse(buf, len, &h, &why) != INCOLL_ERR_PROTOCOL)
        FAILF("accepted, expected '%s'", want);
    if (why == NULL || strcmp(why, want) != 0)
        FAILF("rejected for '%s', expected '%s'", why ? why : "(null)", want);
    /* why_p is optional. */
    if (wire_parse(buf, len, &h, NULL) != INCOLL_ERR_PROTOCOL)
        FAILF("accepted without why_p");
    return 0;
}

TEST(core_wire_format, TEST_UNIT)
{
    static uint8_t buf[WIRE_HDR_LEN + WIRE_MAX_PAYLOAD + 16];
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_CONTRIB,
                    .op = INCOLL_OP_BXOR,
                    .dtype = INCOLL_UINT32,
                    .group = 0xA1B2C3D4u,
                    .child = 0x1234,
                    .flags = 0x0003,
                    .mac = 0x0102030405060708ull,
                    .slot = 0xBEEF,
                    .hops = 0x55,
                    .mac_alg = 2,
                    .root = 0x55667788,
                    .call_hash = 0x99aabbcc,
                    .epoch = 0xCAFEBABEu,
                    .count = 3,
                    .total = 0x11223344u,
                    .offset = 0x8877665544332211ull};
    wire_hdr_t p;
    const char *why = "untouched";
    uint64_t rng = 5;
    char text[64];
    incoll_ep_t ep;

    CHECK_EQ_INT(WIRE_HDR_LEN, 56);
    memset(buf, 0xEE, sizeof(buf));
    wire_pack(&h, buf);
    /* Every field at its documented offset, little-endian. */
    CHECK(memcmp(buf, "INCL", 4) == 0);
    CHECK_EQ_INT(le_at(buf + 0, 4), WIRE_MAGIC);
    CHECK_EQ_INT(buf[4], 4);
    CHECK_EQ_INT(buf[5], WIRE_CONTRIB);
    CHECK_EQ_INT(buf[6], INCOLL_OP_BXOR);
    CHECK_EQ_INT(buf[7], INCOLL_UINT32);
    CHECK_EQ_INT(le_at(buf + 8, 4), 0xA1B2C3D4u);
    CHECK_EQ_INT(le_at(buf + 12, 2), 0x1234);
    CHECK_EQ_INT(le_at(buf + 14, 2), 0x0003);
    CHECK(le_at(buf + 16, 8) == 0x0102030405060708ull);
    CHECK_EQ_INT(le_at(buf + 24, 2), 0xBEEF);
    CHECK_EQ_INT(buf[26], 0x55);
    CHECK_EQ_INT(buf[27], 2);
    CHECK_EQ_INT(le_at(buf + 28, 4), 0xCAFEBABEu);
    CHECK_EQ_INT(le_at(buf + 32, 4), 3);
    CHECK_EQ_INT(le_at(buf + 36, 4), 0x11223344u);
    CHECK(le_at(buf + 40, 8) == 0x8877665544332211ull);
    CHECK_EQ_INT(le_at(buf + 48, 4), 0x55667788u);
    CHECK_EQ_INT(le_at(buf + 52, 4), 0x99aabbccu);
    CHECK_EQ_INT(buf[WIRE_HDR_LEN], 0xEE); /* nothing past the header */
    CHECK_EQ_INT(wire_payload_len(&h), 12);
    CHECK_EQ_INT(wire_parse(buf, WIRE_HDR_LEN + 12, &p, &why), INCOLL_OK);
    CHECK(strcmp(why, "untouched") == 0);
    CHECK_EQ_INT(p.version, h.version);
    CHECK_EQ_INT(p.type, h.type);
    CHECK_EQ_INT(p.op, h.op);
    CHECK_EQ_INT(p.dtype, h.dtype);
    CHECK_EQ_INT(p.group, h.group);
    CHECK_EQ_INT(p.child, h.child);
    CHECK_EQ_INT(p.flags, h.flags);
    CHECK(p.mac == h.mac);
    CHECK_EQ_INT(p.slot, h.slot);
    CHECK_EQ_INT(p.hops, h.hops);
    CHECK_EQ_INT(p.mac_alg, h.mac_alg);
    CHECK_EQ_INT(p.root, h.root);
    CHECK_EQ_INT(p.call_hash, h.call_hash);
    CHECK_EQ_INT(p.epoch, h.epoch);
    CHECK_EQ_INT(p.count, h.count);
    CHECK_EQ_INT(p.total, h.total);
    CHECK(p.offset == h.offset);

    /* Random round trips of every packet type. */
    for (int k = 0; k < 5000; k++) {
        static const uint8_t types[] = {WIRE_CONTRIB,   WIRE_RESULT,
                                        WIRE_STATS_REQ, WIRE_STATS_REP,
                                        WIRE_P2P_DATA,  WIRE_P2P_ACK};
        wire_hdr_t q;
        incoll_dtype_t dt;
        incoll_op_t op;
        size_t plen;
        random_dtype_op(&rng, &dt, &op);
        q.version = WIRE_VERSION;
        q.type = types[memnet_rand_below(&rng, 6)];
        q.op = (uint8_t)op;
        q.dtype = (uint8_t)dt;
        q.group = (uint32_t)memnet_rand(&rng);
        q.child = (uint16_t)memnet_rand(&rng);
        q.flags = (uint16_t)memnet_rand(&rng);
        /* A known kind, with a payload (NODATA and gather pieces:
         * tests/test_colls_core.c). */
        if (q.type == WIRE_CONTRIB || q.type == WIRE_RESULT) {
            q.flags &= (uint16_t)~WIRE_F_NODATA;
            if (wire_flags_kind(q.flags) >= WIRE_COLL_COUNT ||
                wire_coll_is_gather(wire_flags_kind(q.flags)) ||
                wire_coll_is_split(wire_flags_kind(q.flags)))
                q.flags &= (uint16_t)~WIRE_F_KIND_MASK;
        }
        q.mac = memnet_rand(&rng);
        q.slot = (uint16_t)memnet_rand(&rng);
        q.hops = (uint8_t)memnet_rand(&rng);
        q.mac_alg = (uint8_t)memnet_rand_below(&rng, WIRE_MAC_ALGS);
        /* The call's fields: a reason instead of a root in an error. */
        q.root = (uint32_t)memnet_rand(&rng);
        q.call_hash = (uint32_t)memnet_rand(&rng);
        q.why = 0;
        if ((q.type == WIRE_CONTRIB || q.type == WIRE_RESULT) &&
            (q.flags & WIRE_F_ERROR)) {
            q.why = (uint16_t)memnet_rand(&rng);
            q.root = 0;
        }
        q.epoch = (uint32_t)memnet_rand(&rng);
        q.count = 1 + (uint32_t)memnet_rand_below(&rng, 64);
        q.total = (uint32_t)memnet_rand(&rng);
        q.offset = memnet_rand(&rng);
        plen = wire_payload_len(&q);
        wire_pack(&q, buf);
        CHECK_EQ_INT(wire_parse(buf, WIRE_HDR_LEN + plen, &p, NULL), INCOLL_OK);
        CHECK(memcmp(&p.type, &q.type, 3) == 0);
        CHECK(p.group == q.group && p.child == q.child && p.flags == q.flags &&
              p.mac == q.mac && p.slot == q.slot && p.hops == q.hops &&
              p.mac_alg == q.mac_alg && p.root == q.root && p.why == q.why &&
              p.call_hash == q.call_hash && p.epoch == q.epoch &&
              p.count == q.count && p.total == q.total && p.offset == q.offset);
        /* One byte more or less is always refused. */
        CHECK(why_is(buf, WIRE_HDR_LEN + plen + 1,
                     "payload length does not match count") == 0);
        CHECK(why_is(buf, WIRE_HDR_LEN + plen - 1,
                     "payload length does not match count") == 0);
    }

    /* Every rejection. */
    wire_pack(&h, buf);
    CHECK(why_is(buf, 0, "truncated header") == 0);
    CHECK(why_is(buf, WIRE_HDR_LEN - 1, "truncated header") == 0);
    buf[3] ^= 1;
    CHECK(why_is(buf, WIRE_HDR_LEN + 12, "bad magic") == 0);
    buf[3] ^= 1;
    buf[4] = 1; /* v1 carried the key in clear: refused */
    CHECK(why_is(buf, WIRE_HDR_LEN + 12, "unsupported version") == 0);
    buf[4] = 0;
    CHECK(why_is(buf, WIRE_HDR_LEN + 12, "unsupported version") == 0);
    buf[4] = 3; /* v3 had no mac algorithm: refused, and the version said */
    CHECK(why_is(buf, WIRE_HDR_LEN + 12, "unsupported version") == 0);
    CHECK_EQ_INT(wire_peek_version(buf, WIRE_HDR_LEN + 12), 3);
    buf[4] = WIRE_VERSION;
    for (int a = WIRE_MAC_ALGS; a < 256; a++) {
        buf[WIRE_MACALG_OFF] = (uint8_t)a;
        CHECK(why_is(buf, WIRE_HDR_LEN + 12, "unknown mac algorithm") == 0);
    }
    buf[4] = 1;
    for (int t = 0; t < 256; t++) {
        wire_hdr_t q = h;
        int known =
            (t >= 1 && t <= 6) || t == 16 || t == 17 || (t >= 32 && t <= 35);
        q.type = (uint8_t)t;
        q.count = 4;
        if (wire_is_lock(q.type))
            q.op = q.dtype = 0; /* lock packets: a reason, no dtype */
        wire_pack(&q, buf);
        if (known)
            CHECK_EQ_INT(
                wire_parse(buf, WIRE_HDR_LEN + wire_payload_len(&q), &p, NULL),
                INCOLL_OK);
        else
            CHECK(why_is(buf, WIRE_HDR_LEN + 16, "unknown packet type") == 0);
    }
    {
        wire_hdr_t q = h;
        q.dtype = INCOLL_DTYPE_COUNT;
        wire_pack(&q, buf);
        CHECK(why_is(buf, WIRE_HDR_LEN + 12, "bad dtype") == 0);
        q = h;
        q.type = WIRE_RESULT;
        q.op = INCOLL_OP_COUNT;
        wire_pack(&q, buf);
        CHECK(why_is(buf, WIRE_HDR_LEN + 12, "bad op") == 0);
        for (int d = 0; d < INCOLL_DTYPE_COUNT; d++) {
            for (int o = 0; o < INCOLL_OP_COUNT; o++) {
                q = h;
                q.op = (uint8_t)o;
                q.dtype = (uint8_t)d;
                wire_pack(&q, buf);
                if (incoll_op_valid((incoll_op_t)o, (incoll_dtype_t)d))
                    CHECK_EQ_INT(wire_parse(buf,
                                            WIRE_HDR_LEN + wire_payload_len(&q),
                                            &p, NULL),
                                 INCOLL_OK);
                else
                    CHECK(why_is(buf, WIRE_HDR_LEN + wire_payload_len(&q),
                                 "op not valid for dtype") == 0);
            }
        }
        /* Bitwise ops are not for floating types. */
        CHECK(!incoll_op_valid(INCOLL_OP_BAND, INCOLL_FLOAT32));
        CHECK(!incoll_op_valid(INCOLL_OP_BXOR, INCOLL_BFLOAT16));
        CHECK(incoll_op_valid(INCOLL_OP_LXOR, INCOLL_FLOAT64));
        q = h;
        q.count = 0;
        wire_pack(&q, buf);
        CHECK(why_is(buf, WIRE_HDR_LEN, "zero count") == 0);
        q.type = WIRE_STATS_REQ; /* count 0 is fine for control packets */
        wire_pack(&q, buf);
        CHECK_EQ_INT(wire_parse(buf, WIRE_HDR_LEN, &p, NULL), INCOLL_OK);
        q = h;
        q.dtype = INCOLL_UINT8;
        q.count = WIRE_MAX_PAYLOAD;
        wire_pack(&q, buf);
        CHECK_EQ_INT(wire_parse(buf, WIRE_HDR_LEN + WIRE_MAX_PAYLOAD, &p, NULL),
                     INCOLL_OK);
        q.count = WIRE_MAX_PAYLOAD + 1;
        wire_pack(&q, buf);
        CHECK(why_is(buf, WIRE_HDR_LEN + WIRE_MAX_PAYLOAD + 1,
                     "count too large") == 0);
        q.dtype = INCOLL_FLOAT64;
        q.op = INCOLL_OP_SUM;
        q.count = 0x80000000u; /* count * 8 overflows 32 bits */
        wire_pack(&q, buf);
        CHECK(why_is(buf, WIRE_HDR_LEN + 16, "count too large") == 0);
        q.type = WIRE_STATS_REP;
        q.count = WIRE_MAX_PAYLOAD + 1;
        wire_pack(&q, buf);
        CHECK(why_is(buf, WIRE_HDR_LEN + 8, "count too large") == 0);
        q = h;
        wire_pack(&q, buf);
        CHECK(why_is(buf, WIRE_HDR_LEN + 11,
                     "payload length does not match count") == 0);
        CHECK(why_is(buf, WIRE_HDR_LEN,
                     "payload length does not match count") == 0);
    }
    /* Nothing is written to the header on failure. */
    {
        wire_hdr_t q;
        memset(&q, 0x77, sizeof(q));
        CHECK(wire_parse(buf, 3, &q, NULL) != INCOLL_OK);
        CHECK_EQ_INT(q.group, 0x77777777u);
    }

    /* Endpoints. */
    ep = wire_ep(0x0A000007u, 5100);
    CHECK(strcmp(wire_ep_str(ep, text, sizeof(text)), "10.0.0.7:5100") == 0);
    CHECK_EQ_INT(wire_ep_parse("10.0.0.7:5100", &ep), INCOLL_OK);
    CHECK(ep == wire_ep(0x0A000007u, 5100));
    CHECK_EQ_INT(wire_ep_parse("255.255.255.255:65535", &ep), INCOLL_OK);
    CHECK(ep == wire_ep(0xFFFFFFFFu, 65535));
    CHECK(strcmp(wire_ep_str(ep, text, sizeof(text)),
                 "255.255.255.255:65535") == 0);
    CHECK_EQ_INT(wire_ep_parse("127.0.0.1:1", &ep), INCOLL_OK);
    CHECK(ep == wire_ep(0x7F000001u, 1));
    for (int k = 0; k < 1000; k++) {
        incoll_ep_t e = wire_ep((uint32_t)memnet_rand(&rng),
                                (uint16_t)(1 + memnet_rand_below(&rng, 65535)));
        incoll_ep_t back = 0;
        wire_ep_str(e, text, sizeof(text));
        CHECK_EQ_INT(wire_ep_parse(text, &back), INCOLL_OK);
        CHECK(back == e);
    }
    {
        static const char *const bad[] = {
            "",
            ":",
            "10.0.0.7",
            "10.0.0.7:",
            ":5100",
            "10.0.0:5100",
            "10.0.0.256:5100",
            "10.0.0.7:0",
            "10.0.0.7:65536",
            "10.0.0.7:5100x",
            "10.0.0.7:x",
            "host.example:5100",
            "1.2.3.4.5:80",
            "10.0.0.7:99999999999999999999",
            "0123456789012345678901234567890123456789012345678901234567890123"
            "456789:80",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            incoll_ep_t e = 12345;
            CHECK_MSG(wire_ep_parse(bad[i], &e) == INCOLL_ERR_INVALID_ARG,
                      "'%s' accepted", bad[i]);
            CHECK_MSG(e == 12345, "'%s' wrote the output", bad[i]);
        }
    }
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* 8. STATS over the network. */

TEST(core_stats, TEST_UNIT)
{
    memnet_group_cfg_t g = group_cfg(4, 64);
    world_t w;
    incoll_ep_t tool;
    uint8_t pkt[WIRE_HDR_LEN + 4096];
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_STATS_REQ,
                    .mac = ADMIN_KEY, /* mkpkt() seals under it */
                    .child = WIRE_CHILD_NONE};
    wire_hdr_t rep;
    incoll_ep_t from = 0;
    size_t len;
    char text[4096], want[64];
    const agg_counters_t *c;

    CHECK(world_from_spec(&w, "[[2]1]", &CLEAN_NET, &g, 8 * 100) == 0);
    tool = memnet_add_sink(w.net);
    fill_onehot(&w, 100);
    CHECK(world_op(&w, 100, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    c = agg_counters(memnet_an(w.net, 1));
    CHECK_EQ_INT(c->reductions, 13);

    /* Right key: one reply to the asker, with the counters as text. */
    len = mkpkt(pkt, &h, NULL, 0);
    memnet_inject(w.net, tool, memnet_an_ep(w.net, 1), pkt, len, 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    CHECK_EQ_INT(c->stats_requests, 1);
    len = memnet_sink_take(w.net, tool, pkt, sizeof(pkt), &from);
    CHECK(len > WIRE_HDR_LEN);
    CHECK(from == memnet_an_ep(w.net, 1));
    CHECK_EQ_INT(wire_parse(pkt, len, &rep, NULL), INCOLL_OK);
    CHECK_EQ_INT(rep.type, WIRE_STATS_REP);
    {
        wire_key_t akey;
        wire_key_derive(NULL, WIRE_KEY_ADMIN, ADMIN_KEY, 0, &akey);
        CHECK(wire_mac_check(&akey, pkt, len)); /* the reply is sealed */
        CHECK(rep.mac != ADMIN_KEY);            /* and shows no key */
    }
    CHECK_EQ_INT(rep.count, len - WIRE_HDR_LEN);
    memcpy(text, pkt + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
    text[len - WIRE_HDR_LEN] = '\0';
    CHECK_MSG(strncmp(text, "an=an1 ", 7) == 0, "%s", text);
    snprintf(want, sizeof(want), " reductions=%" PRIu64 " ", c->reductions);
    CHECK_MSG(strstr(text, want) != NULL, "%s", text);
    CHECK(strstr(text, " groups=1") != NULL);
    CHECK(strstr(text, " stats_requests=1") != NULL);
    CHECK_EQ_INT(memnet_sink_take(w.net, tool, pkt, sizeof(pkt), NULL), 0);
    /* The same text as agg_format_counters, which is also bounded. */
    {
        char local[4096], tiny[16];
        size_t n =
            agg_format_counters(memnet_an(w.net, 1), local, sizeof(local));
        CHECK_EQ_INT(n, strlen(local));
        /* The reply was formatted before stats_requests was counted. */
        CHECK(strstr(local, " stats_requests=1") != NULL);
        n = agg_format_counters(memnet_an(w.net, 1), tiny, sizeof(tiny));
        CHECK(n < sizeof(tiny));
        CHECK_EQ_INT(strlen(tiny), n);
        CHECK(strncmp(tiny, "an=an1 ", 7) == 0);
    }

    /* Wrong key: counted, no reply. So is the group key. */
    h.mac = ADMIN_KEY + 1;
    len = mkpkt(pkt, &h, NULL, 0);
    memnet_inject(w.net, tool, memnet_an_ep(w.net, 0), pkt, len, 0);
    h.mac = GROUP_KEY;
    len = mkpkt(pkt, &h, NULL, 0);
    memnet_inject(w.net, tool, memnet_an_ep(w.net, 0), pkt, len, 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    c = agg_counters(memnet_an(w.net, 0));
    CHECK_EQ_INT(c->bad_mac, 2);
    CHECK_EQ_INT(c->stats_requests, 0);
    CHECK_EQ_INT(memnet_sink_take(w.net, tool, pkt, sizeof(pkt), NULL), 0);
    world_free(&w);

    /* An AN with admin key 0 refuses every request, even one with key 0. */
    {
        static capture_t cap;
        agg_params_t ap = {.name = "closed",
                           .admin_key = 0,
                           .send = cap_send,
                           .send_arg = &cap};
        agg_t *agg = agg_create(&ap);
        CHECK(agg != NULL);
        h.mac = 0;
        len = mkpkt(pkt, &h, NULL, 0);
        agg_on_packet(agg, 5, pkt, len);
        CHECK_EQ_INT(agg_counters(agg)->bad_mac, 1);
        CHECK_EQ_INT(cap.n, 0);
        agg_destroy(agg);
    }
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* 9. Determinism: one seed, one run; any arrival order, the same bits. */

typedef struct {
    uint64_t done_ns[NMAX];
    memnet_stats_t st;
    uint8_t *out[4]; /* rank 0's result of each floating-point op */
} det_run_t;

static const incoll_dtype_t det_types[4] = {INCOLL_FLOAT32, INCOLL_FLOAT64,
                                            INCOLL_FLOAT16, INCOLL_BFLOAT16};

static int det_run(uint64_t seed, det_run_t *out, size_t count)
{
    memnet_cfg_t cfg = {.seed = seed,
                        .delay_ns = 2 * US,
                        .jitter_ns = 30 * US,
                        .drop = 0.1,
                        .dup = 0.1,
                        .reorder = 0.3,
                        .reorder_ns = 50 * US,
                        .start_skew_ns = 20 * US};
    memnet_group_cfg_t g = lossy_group_cfg(3, 64);
    world_t w;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (world_from_spec(&w, "[[3][2 [2]][4]]", &cfg, &g, 8 * count) != 0)
        goto out;
    for (int k = 0; k < 4; k++) {
        /* Inputs depend on the type only, never on the seed: values of
         * very different magnitudes, so that the order of the sums shows
         * in the last bits. */
        uint64_t rng = 1000 + (uint64_t)k;
        size_t ds = incoll_dtype_size(det_types[k]);
        fill_random(&w, &rng, count, det_types[k], INCOLL_OP_SUM);
        if (world_op(&w, count, det_types[k], INCOLL_OP_SUM, 100 * SEC) != 0 ||
            check_ref(&w, count, det_types[k], INCOLL_OP_SUM) != 0)
            goto out;
        out->out[k] = malloc(count * ds);
        if (out->out[k] == NULL)
            goto out;
        memcpy(out->out[k], w.recv[0], count * ds);
    }
    for (int r = 0; r < w.n; r++)
        out->done_ns[r] = memnet_done_ns(w.net, w.g, r);
    out->st = *memnet_stats(w.net);
    rc = 0;
out:
    world_free(&w);
    return rc;
}

static void det_free(det_run_t *d)
{
    for (int k = 0; k < 4; k++)
        free(d->out[k]);
}

TEST(core_determinism, TEST_UNIT)
{
    const size_t count = 300;
    det_run_t a, b;
    int schedules_differ = 0;

    CHECK(det_run(1, &a, count) == 0);
    CHECK(det_run(1, &b, count) == 0);
    /* Same seed: same virtual times, same traffic, same bits. */
    for (int r = 0; r < 13; r++)
        CHECK_EQ_INT(a.done_ns[r], b.done_ns[r]);
    CHECK(memcmp(&a.st, &b.st, sizeof(a.st)) == 0);
    for (int k = 0; k < 4; k++)
        CHECK(memcmp(a.out[k], b.out[k],
                     count * incoll_dtype_size(det_types[k])) == 0);
    det_free(&b);
    /* Other seeds: other arrival orders, still the same bits. */
    for (uint64_t seed = 2; seed < 8; seed++) {
        CHECK(det_run(seed, &b, count) == 0);
        if (memcmp(&a.st, &b.st, sizeof(a.st)) != 0 ||
            a.done_ns[0] != b.done_ns[0])
            schedules_differ++;
        for (int k = 0; k < 4; k++)
            CHECK_MSG(memcmp(a.out[k], b.out[k],
                             count * incoll_dtype_size(det_types[k])) == 0,
                      "seed %" PRIu64 " dtype %d", seed, det_types[k]);
        det_free(&b);
    }
    CHECK_EQ_INT(schedules_differ, 6);

    /* The data is order-sensitive: summing the same inputs in rank order
     * instead of tree order changes some float32 and float64 bits, so the
     * checks above could see a reordering. */
    {
        memnet_tree_t t;
        world_t w;
        memnet_group_cfg_t g = group_cfg(3, 64);
        CHECK(memnet_tree_parse(&t, "[[3][2 [2]][4]]") == 0);
        CHECK(world_init(&w, &t, &CLEAN_NET, &g, 8 * count) == 0);
        for (int k = 0; k < 2; k++) {
            uint64_t rng = 1000 + (uint64_t)k;
            const void *srcs[NMAX];
            size_t ds = incoll_dtype_size(det_types[k]);
            fill_random(&w, &rng, count, det_types[k], INCOLL_OP_SUM);
            for (int r = 0; r < w.n; r++)
                srcs[r] = w.send[r];
            reduce_n(INCOLL_OP_SUM, det_types[k], w.ref, srcs, w.n, count);
            CHECK_MSG(memcmp(w.ref, a.out[k], count * ds) != 0,
                      "dtype %d: rank order gives the tree's bits",
                      det_types[k]);
        }
        world_free(&w);
    }
    det_free(&a);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* 10. Liveness with a tiny window under heavy reordering and duplication. */

TEST(core_small_window_liveness, TEST_UNIT)
{
    static const char *const specs[] = {"[[3][2][1]]", "[[[2][1]][[3]] 2]",
                                        "[4]"};
    for (int k = 0; k < 6; k++) {
        memnet_cfg_t cfg = {.seed = 100 + (uint64_t)k,
                            .delay_ns = 2 * US,
                            .jitter_ns = 50 * US,
                            .drop = 0.1,
                            .dup = 0.3,
                            .reorder = 0.5,
                            .reorder_ns = 200 * US,
                            .start_skew_ns = 100 * US};
        memnet_group_cfg_t g = lossy_group_cfg(k < 3 ? 2 : 1, 64);
        memnet_tree_t t;
        world_t w;
        const size_t count = 8 * 500; /* 500 segments per operation */
        agg_counters_t base[MEMNET_MAX_ANS];

        if (k == 5)
            CHECK(memnet_tree_radix(&t, 16, 4) == 0);
        else
            CHECK(memnet_tree_parse(&t, specs[k % 3]) == 0);
        CHECK(world_init(&w, &t, &cfg, &g, 8 * count) == 0);
        snapshot_ans(&w, base);
        for (int op = 0; op < 2; op++) {
            fill_onehot(&w, count);
            CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM,
                           1000 * SEC) == 0);
            CHECK(check_onehot(&w, count) == 0);
        }
        CHECK(memnet_drain(w.net, 100 * SEC) == 0);
        CHECK(check_an_exactly_once(&w, base, 1000) == 0);
        CHECK(memnet_stats(w.net)->duplicated > 500);
        CHECK(memnet_stats(w.net)->reordered > 1000);
        world_free(&w);
    }
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* The host engine on its own. */

static host_engine_params_t host_params(capture_t *cap, uint32_t slots,
                                        uint32_t window)
{
    host_engine_params_t p;
    memset(&p, 0, sizeof(p));
    host_engine_params_default(&p);
    p.group = 3;
    p.key = gkey(3, 0xABC);
    cap->key = 0xABC;
    p.gen = 0x6E6E0001u;
    p.child = 2;
    p.an = 50;
    p.slots = slots;
    p.window = window;
    p.max_payload = 64;
    p.send = cap_send;
    p.send_arg = cap;
    return p;
}

/* The RESULT an AN would send for captured contribution k. */
static size_t result_for(const capture_t *cap, int k, uint8_t *pkt,
                         const void *payload)
{
    wire_hdr_t h = cap->h[k];
    h.type = WIRE_RESULT;
    h.flags = 0;
    return mkpkt(pkt, &h, payload, cap->len[k]);
}

TEST(core_host_api, TEST_UNIT)
{
    static capture_t cap;
    host_engine_params_t p = host_params(&cap, 2, 0);
    host_engine_t *eng;
    int64_t send[24], recv[24];
    uint8_t pkt[WIRE_HDR_LEN + 64];
    const uint64_t t0 = 5 * SEC;

    for (int i = 0; i < 24; i++)
        send[i] = i * 3 + 1;
    /* Bad parameters. */
    p.slots = 0;
    CHECK(host_engine_create(&p) == NULL);
    p.slots = 65536;
    CHECK(host_engine_create(&p) == NULL);
    p.slots = 2;
    p.max_payload = 7;
    CHECK(host_engine_create(&p) == NULL);
    p.max_payload = WIRE_MAX_PAYLOAD + 1;
    CHECK(host_engine_create(&p) == NULL);
    p.max_payload = 64;
    p.send = NULL;
    CHECK(host_engine_create(&p) == NULL);
    p.send = cap_send;
    eng = host_engine_create(&p);
    CHECK(eng != NULL);
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_OK);
    CHECK(host_engine_deadline(eng) == UINT64_MAX);

    CHECK_EQ_INT(host_engine_start(eng, send, recv, 8, INCOLL_FLOAT32,
                                   INCOLL_OP_BAND, t0),
                 INCOLL_ERR_INVALID_ARG);
    CHECK_EQ_INT(
        host_engine_start(eng, send, recv, 0, INCOLL_INT64, INCOLL_OP_SUM, t0),
        INCOLL_OK);
    CHECK_EQ_INT(cap.n, 0);
    /* 20 int64 in 64-byte packets: 3 segments, 2 in flight. */
    CHECK_EQ_INT(
        host_engine_start(eng, send, recv, 20, INCOLL_INT64, INCOLL_OP_SUM, t0),
        INCOLL_INPROGRESS);
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_INPROGRESS);
    CHECK_EQ_INT(
        host_engine_start(eng, send, recv, 20, INCOLL_INT64, INCOLL_OP_SUM, t0),
        INCOLL_ERR_BUSY);
    CHECK_EQ_INT(cap.n, 2);
    for (int k = 0; k < 2; k++) {
        CHECK_EQ_INT(cap.dst[k], 50);
        CHECK_EQ_INT(cap.h[k].type, WIRE_CONTRIB);
        CHECK_EQ_INT(cap.h[k].group, 3);
        CHECK(cap.macok[k]);
        CHECK_EQ_INT(cap.h[k].child, 2);
        CHECK_EQ_INT(cap.h[k].slot, k);
        CHECK_EQ_INT(cap.h[k].epoch, 0);
        CHECK_EQ_INT(cap.h[k].count, 8);
        CHECK_EQ_INT(cap.h[k].total, p.gen); /* the generation */
        CHECK_EQ_INT(cap.h[k].offset, 8 * k);
        CHECK_EQ_INT(cap.h[k].flags, 0);
        CHECK(memcmp(cap.payload[k], send + 8 * k, 64) == 0);
    }
    CHECK(host_engine_deadline(eng) == t0 + p.rto_init_ns);
    /* Nothing is due before the deadline. */
    host_engine_on_time(eng, t0 + p.rto_init_ns - 1);
    CHECK_EQ_INT(cap.n, 2);
    /* At the deadline both are retransmitted, flagged, with backoff. */
    host_engine_on_time(eng, t0 + p.rto_init_ns);
    CHECK_EQ_INT(cap.n, 4);
    CHECK_EQ_INT(cap.h[2].flags & WIRE_F_RETRANS, WIRE_F_RETRANS);
    CHECK_EQ_INT(cap.h[2].slot, 0);
    CHECK(host_engine_deadline(eng) == t0 + 3 * p.rto_init_ns);
    CHECK_EQ_INT(host_engine_counters(eng)->retransmits, 2);
    /* Segment 1's result first: segment 2 may not go yet (slot 0 is still
     * busy with segment 0). */
    host_engine_on_packet(eng, 50, pkt, result_for(&cap, 1, pkt, send + 8),
                          t0 + 50 * MS);
    CHECK_EQ_INT(cap.n, 4);
    host_engine_on_packet(eng, 50, pkt, result_for(&cap, 0, pkt, send),
                          t0 + 51 * MS);
    CHECK_EQ_INT(cap.n, 5);
    CHECK_EQ_INT(cap.h[4].slot, 0);
    CHECK_EQ_INT(cap.h[4].epoch, 1);
    CHECK_EQ_INT(cap.h[4].count, 4);
    CHECK_EQ_INT(cap.h[4].offset, 16);
    CHECK_EQ_INT(cap.h[4].flags, WIRE_F_LAST);
    host_engine_on_packet(eng, 50, pkt, result_for(&cap, 4, pkt, send + 16),
                          t0 + 52 * MS);
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_OK);
    CHECK(memcmp(recv, send, 20 * 8) == 0);
    CHECK(host_engine_deadline(eng) == UINT64_MAX);
    CHECK_EQ_INT(host_engine_counters(eng)->segments, 3);
    CHECK_EQ_INT(host_engine_counters(eng)->results, 3);
    CHECK_EQ_INT(host_engine_counters(eng)->ops, 2);
    /* The next operation continues the sequence: seq 3 = slot 1 epoch 1. */
    cap.n = 0;
    CHECK_EQ_INT(host_engine_start(eng, send, recv, 1, INCOLL_INT64,
                                   INCOLL_OP_MAX, t0 + SEC),
                 INCOLL_INPROGRESS);
    CHECK_EQ_INT(cap.n, 1);
    CHECK_EQ_INT(cap.h[0].slot, 1);
    CHECK_EQ_INT(cap.h[0].epoch, 1);
    CHECK_EQ_INT(cap.h[0].flags, WIRE_F_LAST);
    host_engine_on_packet(eng, 50, pkt, result_for(&cap, 0, pkt, send),
                          t0 + SEC + MS);
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_OK);
    host_engine_destroy(eng);

    /* A window smaller than the slots. */
    p = host_params(&cap, 4, 1);
    cap.n = 0;
    eng = host_engine_create(&p);
    CHECK(eng != NULL);
    CHECK_EQ_INT(
        host_engine_start(eng, send, recv, 24, INCOLL_INT64, INCOLL_OP_SUM, t0),
        INCOLL_INPROGRESS);
    CHECK_EQ_INT(cap.n, 1);
    for (int k = 0; k < 3; k++) {
        host_engine_on_packet(eng, 50, pkt,
                              result_for(&cap, k, pkt, send + 8 * k),
                              t0 + (uint64_t)k * MS);
        CHECK_EQ_INT(cap.n, k < 2 ? k + 2 : 3);
    }
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_OK);
    CHECK(memcmp(recv, send, 24 * 8) == 0);
    host_engine_destroy(eng);
    return TEST_PASSED;
}

/* The host engine never trusts a packet either, and never writes the
 * user's buffer for one that does not match its segment. */
TEST(core_host_garbage, TEST_UNIT)
{
    static capture_t cap;
    host_engine_params_t p = host_params(&cap, 2, 0);
    host_engine_t *eng = host_engine_create(&p);
    const host_engine_counters_t *hc;
    int64_t send[16], recv[16], other[8];
    uint8_t pkt[WIRE_HDR_LEN + 128];
    const uint64_t t = SEC;
    wire_hdr_t h;
    size_t len;

    CHECK(eng != NULL);
    hc = host_engine_counters(eng);
    for (int i = 0; i < 16; i++)
        send[i] = 1000 + i;
    for (int i = 0; i < 8; i++)
        other[i] = -1;
    memset(recv, SENTINEL, sizeof(recv));
    CHECK_EQ_INT(
        host_engine_start(eng, send, recv, 16, INCOLL_INT64, INCOLL_OP_SUM, t),
        INCOLL_INPROGRESS);
    CHECK_EQ_INT(cap.n, 2);
#define HFEED(src, hdr, payload, plen)                                         \
    do {                                                                       \
        len = mkpkt(pkt, &(hdr), (payload), (plen));                           \
        host_engine_on_packet(eng, (src), pkt, len, t);                        \
    } while (0)
    h = cap.h[0];
    h.type = WIRE_RESULT;
    host_engine_on_packet(eng, 50, pkt, 10, t); /* truncated */
    CHECK_EQ_INT(hc->dropped, 1);
    {
        wire_hdr_t q = h;
        q.type = WIRE_CONTRIB;
        HFEED(50, q, other, 64);
        q = h;
        q.group = 4;
        HFEED(50, q, other, 64);
        q = h;
        q.mac ^= 1;
        HFEED(50, q, other, 64);
        HFEED(51, h, other, 64); /* not our AN */
        q = h;
        q.slot = 2;
        HFEED(50, q, other, 64);
        q = h;
        q.total ^= 0x100; /* another generation (job) */
        HFEED(50, q, other, 64);
        q = h;
        q.type = WIRE_STATS_REP;
        q.count = 64;
        HFEED(50, q, other, 64);
        CHECK_EQ_INT(hc->dropped, 8);
        /* Right slot and epoch, wrong segment shape. */
        q = h;
        q.offset = 8;
        HFEED(50, q, other, 64);
        q = h;
        q.count = 4;
        HFEED(50, q, other, 32);
        q = h;
        q.dtype = INCOLL_UINT64;
        HFEED(50, q, other, 64);
        q = h;
        q.op = INCOLL_OP_MAX;
        HFEED(50, q, other, 64);
        CHECK_EQ_INT(hc->dropped, 12);
        /* Another epoch of the slot. */
        q = h;
        q.epoch = 1;
        HFEED(50, q, other, 64);
        q.epoch = 0xFFFFFFFFu;
        HFEED(50, q, other, 64);
        CHECK_EQ_INT(hc->duplicate_results, 2);
    }
    CHECK_EQ_INT(hc->results, 0);
    for (size_t i = 0; i < sizeof(recv); i++)
        CHECK_EQ_INT(((uint8_t *)recv)[i], SENTINEL);
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_INPROGRESS);
    /* The real results complete it. */
    HFEED(50, h, send, 64);
    h = cap.h[1];
    h.type = WIRE_RESULT;
    HFEED(50, h, send + 8, 64);
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_OK);
    CHECK(memcmp(recv, send, sizeof(send)) == 0);
    /* Once done, even a well-formed result is only counted. */
    HFEED(50, h, other, 64);
    CHECK_EQ_INT(hc->duplicate_results, 3);
    CHECK(memcmp(recv, send, sizeof(send)) == 0);
#undef HFEED
    host_engine_destroy(eng);
    return TEST_PASSED;
}

/* Payload sizes that are not a multiple of the element size or of 8:
 * segments of odd length, and slot buffers at odd offsets in the AN. */
TEST(core_odd_payload, TEST_UNIT)
{
    static const uint32_t payloads[] = {60, 9, 62, 4097};
    static const incoll_dtype_t types[] = {INCOLL_INT64,   INCOLL_FLOAT64,
                                           INCOLL_FLOAT32, INCOLL_INT16,
                                           INCOLL_FLOAT16, INCOLL_UINT8};
    uint64_t rng = 99;
    for (size_t k = 0; k < sizeof(payloads) / sizeof(payloads[0]); k++) {
        memnet_group_cfg_t g = group_cfg(3, payloads[k]);
        world_t w;
        CHECK(world_from_spec(&w, "[[2][1] 1]", &CLEAN_NET, &g, 8 * 3000) == 0);
        for (size_t d = 0; d < sizeof(types) / sizeof(types[0]); d++) {
            size_t count = 1 + (size_t)memnet_rand_below(&rng, 3000);
            fill_random(&w, &rng, count, types[d], INCOLL_OP_SUM);
            CHECK(world_op(&w, count, types[d], INCOLL_OP_SUM, SEC) == 0);
            CHECK_MSG(check_ref(&w, count, types[d], INCOLL_OP_SUM) == 0,
                      "payload %u", payloads[k]);
        }
        world_free(&w);
    }
    return TEST_PASSED;
}

/* agg_format_counters never claims more than it wrote. */
TEST(core_format_counters_bounds, TEST_UNIT)
{
    static capture_t cap;
    agg_params_t ap = {.name = "fmt", .send = cap_send, .send_arg = &cap};
    agg_t *agg = agg_create(&ap);
    char buf[4096];
    size_t full;
    CHECK(agg != NULL);
    full = agg_format_counters(agg, buf, sizeof(buf));
    CHECK_EQ_INT(full, strlen(buf));
    CHECK(strncmp(buf, "an=fmt packets_in=0 ", 20) == 0);
    CHECK(strstr(buf, " groups=0") != NULL);
    for (size_t len = 1; len <= full + 1; len++) {
        size_t n = agg_format_counters(agg, buf, len);
        CHECK_MSG(n < len && n == strlen(buf), "len %zu: returned %zu", len, n);
        CHECK(strncmp(buf, "an=fmt packets_in=0 ", n < 20 ? n : 20) == 0);
    }
    /* With no room at all nothing is written, and the length is 0. */
    memset(buf, 'X', sizeof(buf));
    CHECK_MSG(agg_format_counters(agg, buf, 0) == 0, "returned %zu",
              agg_format_counters(agg, buf, 0));
    CHECK(buf[0] == 'X' && buf[1] == 'X');
    CHECK(agg_format_counters(agg, NULL, 0) == 0);
    /* The counters added for generations are shown with the others. */
    full = agg_format_counters(agg, buf, sizeof(buf));
    CHECK(strstr(buf, " gen_dropped=0 ") != NULL);
    CHECK(strstr(buf, " generation_resets=0 ") != NULL);
    agg_destroy(agg);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* Generations: a new job on the same group starts its sequence numbers
 * at 0 again; nothing of the old job may reach the new one. Generations
 * are ordered (serial-number arithmetic): a newer one takes the group
 * over, an older one only once the group has been quiet for a while. */

TEST(core_generations, TEST_UNIT)
{
    memnet_group_cfg_t g = group_cfg(4, 64);
    world_t w;
    recorder_t rec = {0};
    const size_t count = 40; /* 5 segments: the slots move on each op */
    const rec_pkt_t *old_c, *old_a, *old_r, *old_h;
    incoll_ep_t an0, an1, host0;
    agg_counters_t b1;
    uint64_t dropped;

    g.gen = 0xA1A1A1A1u;
    CHECK(world_from_spec(&w, "[[2][3]]", &CLEAN_NET, &g, 8 * count) == 0);
    an0 = memnet_an_ep(w.net, 0);
    an1 = memnet_an_ep(w.net, 1);
    host0 = memnet_host_ep(w.net, w.g, 0);

    /* Job A. */
    memnet_set_tap(w.net, rec_tap, &rec);
    rec.on = 1;
    for (int k = 0; k < 3; k++) {
        fill_onehot(&w, count);
        CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
        CHECK(check_onehot(&w, count) == 0);
    }
    CHECK(memnet_drain(w.net, SEC) == 0);
    rec.on = 0;
    old_c = rec_find(&rec, host0, an1, WIRE_CONTRIB, 0, 0);
    old_a = rec_find(&rec, an1, an0, WIRE_CONTRIB, 0, 0);
    old_r = rec_find(&rec, an0, an1, WIRE_RESULT, 0, 0);
    old_h = rec_find(&rec, an1, host0, WIRE_RESULT, 0, 0);
    CHECK(old_c && old_a && old_r && old_h);
    CHECK_EQ_INT(old_c->h.total, 0xA1A1A1A1u);
    for (int a = 0; a < w.tree.nans; a++)
        CHECK_EQ_INT(an_ctr(w.net, a).generation_resets, 0);

    /* Job B on the same group: the ANs start over. */
    CHECK(memnet_new_job(w.net, w.g, 0xB2B2B2B2u) == 0);
    for (int k = 0; k < 3; k++) {
        fill_onehot(&w, count);
        CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
        CHECK(check_onehot(&w, count) == 0);
    }
    CHECK(memnet_drain(w.net, SEC) == 0);
    for (int a = 0; a < w.tree.nans; a++)
        CHECK_EQ_INT(an_ctr(w.net, a).generation_resets, 1);
    CHECK_EQ_INT(host_engine_counters(memnet_host(w.net, w.g, 0))->results, 15);

    /* Old results: the new engine and the AN drop them. */
    dropped = host_engine_counters(memnet_host(w.net, w.g, 0))->dropped;
    b1 = an_ctr(w.net, 1);
    inject(w.net, old_h, 0);
    inject(w.net, old_r, 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    CHECK_EQ_INT(host_engine_counters(memnet_host(w.net, w.g, 0))->dropped,
                 dropped + 1);
    CHECK_EQ_INT(an_ctr(w.net, 1).gen_dropped, b1.gen_dropped + 1);
    CHECK_EQ_INT(an_ctr(w.net, 1).packets_out, b1.packets_out);

    /* An old contribution (a straggler of job A, or a late copy) arrives
     * while job B is under way: A's generation is older and the group is
     * busy, so the ANs drop it and job B goes on unharmed. */
    b1 = an_ctr(w.net, 1);
    for (int k = 0; k < 3; k++) {
        fill_onehot(&w, count);
        world_start(&w, count, INCOLL_UINT64, INCOLL_OP_SUM);
        if (k == 1) {
            inject(w.net, old_c, 3 * US);
            inject(w.net, old_a, 4 * US);
        }
        CHECK_MSG(memnet_run(w.net, 10 * SEC) == 0, "op %d hangs", k);
        CHECK_MSG(world_check_ok(&w, count) == 0,
                  "op %d of job B failed after an old packet of job A", k);
        CHECK(check_onehot(&w, count) == 0);
    }
    CHECK_EQ_INT(an_ctr(w.net, 1).gen_dropped, b1.gen_dropped + 1);
    CHECK_EQ_INT(an_ctr(w.net, 0).gen_dropped, 1);
    for (int a = 0; a < w.tree.nans; a++)
        CHECK_EQ_INT(an_ctr(w.net, a).generation_resets, 1);
    for (int r = 0; r < w.n; r++)
        CHECK_EQ_INT(
            host_engine_counters(memnet_host(w.net, w.g, r))->retransmits, 0);
    rec_free(&rec);
    world_free(&w);
    return TEST_PASSED;
}

/* Serial-number order across the 32-bit wrap, the idle exception, and a
 * straggler from another endpoint that must not steal the child's results,
 * on an AN driven by hand. */
TEST(core_gen_order, TEST_UNIT)
{
    static capture_t cap;
    const uint32_t g1 = 0xFFFFFFF0u, g2 = 0x00000010u; /* g2 is newer */
    const uint64_t idle = 100 * MS, t0 = 10 * SEC;
    agg_params_t ap = {
        .name = "gen", .send = cap_send, .send_arg = &cap, .gen_idle_ns = idle};
    incoll_ep_t kids[1] = {INCOLL_EP_NONE};
    agg_group_params_t gp = {.id = 1,
                             .key = gkey(1, 42),
                             .nchildren = 1,
                             .children = kids,
                             .parent = INCOLL_EP_NONE,
                             .slots = 2,
                             .max_payload = 64};
    uint8_t pkt[WIRE_HDR_LEN + 64];
    int64_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const agg_counters_t *c;
    wire_hdr_t h;
    agg_t *agg;

    cap.n = 0;
    agg = agg_create(&ap);
    CHECK(agg != NULL);
    c = agg_counters(agg);
    CHECK_EQ_INT(agg_group_add(agg, &gp), INCOLL_OK);
    agg_set_now(agg, t0);
    /* Job g1 from endpoint 100: one child, so each contribution is the
     * result at once. */
    h = contrib_hdr(1, 42, 0, 0, 0, 8);
    h.total = g1;
    agg_on_packet(agg, 100, pkt, mkpkt(pkt, &h, v, 64));
    CHECK_EQ_INT(cap.n, 1);
    CHECK_EQ_INT(cap.dst[0], 100);
    CHECK_EQ_INT(cap.h[0].total, g1);
    /* g2 is newer across the wrap: it takes the group over at once. */
    agg_set_now(agg, t0 + MS);
    h.total = g2;
    agg_on_packet(agg, 100, pkt, mkpkt(pkt, &h, v, 64));
    CHECK_EQ_INT(c->generation_resets, 1);
    CHECK_EQ_INT(cap.n, 2);
    CHECK_EQ_INT(cap.h[1].total, g2);
    /* g1 again, from the old process's endpoint, while g2 is busy:
     * dropped, nothing sent, and the child's endpoint stays. */
    agg_set_now(agg, t0 + 2 * MS);
    h.total = g1;
    agg_on_packet(agg, 200, pkt, mkpkt(pkt, &h, v, 64));
    CHECK_EQ_INT(c->gen_dropped, 1);
    CHECK_EQ_INT(c->generation_resets, 1);
    CHECK_EQ_INT(cap.n, 2);
    h.total = g2; /* a duplicate of g2: the result goes to 100 again */
    agg_on_packet(agg, 100, pkt, mkpkt(pkt, &h, v, 64));
    CHECK_EQ_INT(cap.n, 3);
    CHECK_EQ_INT(cap.dst[2], 100);
    CHECK_EQ_INT(cap.h[2].total, g2);
    /* Dropped packets do not keep the group busy: g2's last accepted
     * packet was at t0 + 2 ms. Just before the idle period ends, g1 is
     * still dropped; at its end, g1 takes the group over. */
    agg_set_now(agg, t0 + 2 * MS + idle - 1);
    h.total = g1;
    agg_on_packet(agg, 200, pkt, mkpkt(pkt, &h, v, 64));
    CHECK_EQ_INT(c->gen_dropped, 2);
    CHECK_EQ_INT(cap.n, 3);
    agg_set_now(agg, t0 + 2 * MS + idle);
    agg_on_packet(agg, 200, pkt, mkpkt(pkt, &h, v, 64));
    CHECK_EQ_INT(c->generation_resets, 2);
    CHECK_EQ_INT(c->gen_dropped, 2);
    CHECK_EQ_INT(cap.n, 4);
    CHECK_EQ_INT(cap.dst[3], 200);
    CHECK_EQ_INT(cap.h[3].total, g1);
    /* Now g2 is the newer one again. */
    h.total = g2;
    agg_on_packet(agg, 100, pkt, mkpkt(pkt, &h, v, 64));
    CHECK_EQ_INT(c->generation_resets, 3);
    CHECK_EQ_INT(cap.h[4].total, g2);
    agg_destroy(agg);

    /* Without a clock, or with an idle period of 0, generations are not
     * ordered: any other one takes the group over. */
    for (int k = 0; k < 2; k++) {
        cap.n = 0;
        ap.gen_idle_ns = k == 0 ? idle : 0;
        agg = agg_create(&ap);
        CHECK(agg != NULL);
        c = agg_counters(agg);
        CHECK_EQ_INT(agg_group_add(agg, &gp), INCOLL_OK);
        if (k == 1)
            agg_set_now(agg, t0);
        h.total = g2;
        agg_on_packet(agg, 100, pkt, mkpkt(pkt, &h, v, 64));
        h.total = g1;
        agg_on_packet(agg, 100, pkt, mkpkt(pkt, &h, v, 64));
        CHECK_EQ_INT(c->generation_resets, 1);
        CHECK_EQ_INT(c->gen_dropped, 0);
        CHECK_EQ_INT(cap.n, 2);
        CHECK_EQ_INT(cap.h[1].total, g1);
        agg_destroy(agg);
    }
    return TEST_PASSED;
}

/* A running job on a lossy network while packets of the job before it
 * (an older generation) keep coming back, from the hosts' endpoints and
 * from an endpoint of an old process: every operation completes with the
 * right result, each AN reduces every segment once, and nothing is ever
 * sent to the old process. */
TEST(core_gen_stale_interleaved, TEST_UNIT)
{
    memnet_group_cfg_t g = lossy_group_cfg(4, 64);
    memnet_cfg_t net = {.seed = 77,
                        .delay_ns = 2 * US,
                        .jitter_ns = 10 * US,
                        .drop = 0.05,
                        .dup = 0.05,
                        .reorder = 0.1,
                        .reorder_ns = 50 * US};
    const size_t count = 8 * 4 * 3 + 5; /* 13 segments: slots reused */
    world_t w;
    recorder_t rec = {0};
    agg_counters_t base[MEMNET_MAX_ANS];
    uint64_t rng = 5, segs = 0, gen_dropped = 0;
    incoll_ep_t old_proc;
    size_t nold = 0;

    g.gen = 0x00010000u;
    CHECK(world_from_spec(&w, "[[2][3] 1]", &net, &g, 8 * count) == 0);
    old_proc = memnet_add_sink(w.net);
    /* Job A: record everything it sends, retransmissions included. */
    memnet_set_tap(w.net, rec_tap, &rec);
    rec.on = 1;
    for (int k = 0; k < 4; k++) {
        fill_onehot(&w, count);
        CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, 10 * SEC) == 0);
        CHECK(check_onehot(&w, count) == 0);
    }
    CHECK(memnet_drain(w.net, SEC) == 0);
    rec.on = 0;
    for (size_t i = 0; i < rec.n; i++)
        nold +=
            rec.v[i].h.type == WIRE_CONTRIB || rec.v[i].h.type == WIRE_RESULT;
    CHECK(nold > 100);

    /* Job B, newer: A's packets are replayed all along. */
    CHECK(memnet_new_job(w.net, w.g, 0x00020000u) == 0);
    snapshot_ans(&w, base);
    for (int k = 0; k < 30; k++) {
        fill_onehot(&w, count);
        world_start(&w, count, INCOLL_UINT64, INCOLL_OP_SUM);
        for (int j = 0; j < 20; j++) {
            const rec_pkt_t *p = &rec.v[memnet_rand_below(&rng, rec.n)];
            uint64_t delay = memnet_rand_below(&rng, 300 * US);
            if (p->h.type != WIRE_CONTRIB && p->h.type != WIRE_RESULT)
                continue;
            inject(w.net, p, delay);
            /* The same contribution from the old process's endpoint. */
            if (p->h.type == WIRE_CONTRIB && p->src != memnet_an_ep(w.net, 1) &&
                p->src != memnet_an_ep(w.net, 2))
                memnet_inject(w.net, old_proc, p->dst, p->data, p->len,
                              delay + US);
        }
        CHECK_MSG(memnet_run(w.net, 10 * SEC) == 0, "op %d of job B hangs", k);
        CHECK_MSG(world_check_ok(&w, count) == 0, "op %d of job B", k);
        CHECK(check_onehot(&w, count) == 0);
        segs += nsegs(count, INCOLL_UINT64, 64);
    }
    CHECK(memnet_drain(w.net, 10 * SEC) == 0);
    CHECK(check_an_exactly_once(&w, base, segs) == 0);
    for (int a = 0; a < w.tree.nans; a++) {
        CHECK_EQ_INT(an_ctr(w.net, a).generation_resets, 1);
        gen_dropped += an_ctr(w.net, a).gen_dropped - base[a].gen_dropped;
    }
    CHECK(gen_dropped > 100);
    {
        uint8_t buf[WIRE_HDR_LEN + 64];
        CHECK_EQ_INT(memnet_sink_take(w.net, old_proc, buf, sizeof(buf), NULL),
                     0);
    }
    rec_free(&rec);
    world_free(&w);
    return TEST_PASSED;
}

/* A job whose generation is older than the last one's (hashes of job ids
 * are not ordered in time) gets the group once it has been quiet for the
 * idle period, not before; then it runs as any other. */
TEST(core_gen_idle_older, TEST_UNIT)
{
    memnet_group_cfg_t g = lossy_group_cfg(4, 64);
    memnet_cfg_t net = CLEAN_NET;
    const size_t count = 40;
    world_t w;
    agg_counters_t b[MEMNET_MAX_ANS];
    uint64_t t_end, dropped = 0;

    net.gen_idle_ns = 50 * MS;
    g.gen = 0xB0000000u;
    CHECK(world_from_spec(&w, "[[2][3]]", &net, &g, 8 * count) == 0);
    for (int k = 0; k < 2; k++) {
        fill_onehot(&w, count);
        CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
        CHECK(check_onehot(&w, count) == 0);
    }
    CHECK(memnet_drain(w.net, SEC) == 0);
    t_end = memnet_now(w.net);

    /* Job B starts at once with an older generation: the ANs drop it
     * until A has been quiet for 50 ms, and B's retransmissions get in. */
    CHECK(memnet_new_job(w.net, w.g, 0xA0000000u) == 0);
    fill_onehot(&w, count);
    CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, 10 * SEC) == 0);
    CHECK(check_onehot(&w, count) == 0);
    for (int r = 0; r < w.n; r++) {
        uint64_t took = memnet_done_ns(w.net, w.g, r) - t_end;
        CHECK_MSG(took >= 50 * MS - 50 * US,
                  "rank %d done after %" PRIu64 " us, before the idle period",
                  r, took / US);
        CHECK_MSG(took < 60 * MS, "rank %d done after %" PRIu64 " us", r,
                  took / US);
    }
    for (int a = 0; a < w.tree.nans; a++) {
        CHECK_EQ_INT(an_ctr(w.net, a).generation_resets, 1);
        dropped += an_ctr(w.net, a).gen_dropped;
    }
    CHECK(dropped > 0);
    CHECK(memnet_drain(w.net, SEC) == 0);
    /* From now on B is the group's generation: no more drops, no delay. */
    snapshot_ans(&w, b);
    for (int k = 0; k < 3; k++) {
        uint64_t t0 = memnet_now(w.net);
        fill_onehot(&w, count);
        CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
        CHECK(check_onehot(&w, count) == 0);
        CHECK(memnet_now(w.net) - t0 < MS);
    }
    for (int a = 0; a < w.tree.nans; a++) {
        CHECK_EQ_INT(an_ctr(w.net, a).gen_dropped, b[a].gen_dropped);
        CHECK_EQ_INT(an_ctr(w.net, a).generation_resets, 1);
    }
    world_free(&w);
    return TEST_PASSED;
}

/* INCOLL_HOSTS: rank r's host is entry r modulo the entries. */
TEST(core_rank_host, TEST_UNIT)
{
    char h[8];

    CHECK_EQ_INT(host_rank_host("a,bb,ccc", 0, h, sizeof(h)), 0);
    CHECK(strcmp(h, "a") == 0);
    CHECK_EQ_INT(host_rank_host("a,bb,ccc", 2, h, sizeof(h)), 0);
    CHECK(strcmp(h, "ccc") == 0);
    CHECK_EQ_INT(host_rank_host("a,bb,ccc", 4, h, sizeof(h)), 0);
    CHECK(strcmp(h, "bb") == 0);
    CHECK_EQ_INT(host_rank_host("solo", 7, h, sizeof(h)), 0);
    CHECK(strcmp(h, "solo") == 0);
    CHECK_EQ_INT(host_rank_host(NULL, 0, h, sizeof(h)), -1);
    CHECK_EQ_INT(host_rank_host("", 0, h, sizeof(h)), -1);
    CHECK_EQ_INT(host_rank_host("a,,b", 1, h, sizeof(h)), -1);
    CHECK_EQ_INT(host_rank_host("a,toolongname", 1, h, sizeof(h)), -1);
    CHECK_EQ_INT(host_rank_host("a,b", -1, h, sizeof(h)), -1);
    return TEST_PASSED;
}

/* INCOLL_GEN sets the generation (decimal or 0x hex, non-zero, 32 bits);
 * anything else is refused with an error and the job id's hash is used. */
TEST(core_job_generation, TEST_UNIT)
{
    static const char *const bad[] = {"0",    "0x0", "-5",         "+5",
                                      " 5",   "5 ",  "4294967296", "0x",
                                      "0x1g", "12a", "0x100000000"};
    const char *saved = getenv("INCOLL_GEN");
    char *keep = saved ? strdup(saved) : NULL;
    int level = log_level_current;
    uint32_t hashed;

    unsetenv("INCOLL_GEN");
    hashed = host_job_generation(getenv("INCOLL_GEN"), "job-7");
    CHECK(hashed != 0);
    CHECK(hashed != host_job_generation(getenv("INCOLL_GEN"), "job-8"));
    CHECK_EQ_INT(host_job_generation(getenv("INCOLL_GEN"), NULL), 0);
    setenv("INCOLL_GEN", "1234567", 1);
    CHECK_EQ_INT(host_job_generation(getenv("INCOLL_GEN"), "job-7"), 1234567);
    setenv("INCOLL_GEN", "4294967295", 1);
    CHECK_EQ_INT(host_job_generation(getenv("INCOLL_GEN"), NULL), 4294967295u);
    setenv("INCOLL_GEN", "0xdeadBEEF", 1);
    CHECK_EQ_INT(host_job_generation(getenv("INCOLL_GEN"), "job-7"),
                 0xDEADBEEFu);
    setenv("INCOLL_GEN", "", 1);
    CHECK_EQ_INT(host_job_generation(getenv("INCOLL_GEN"), "job-7"), hashed);
    log_level_current = -1; /* the errors are expected */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("INCOLL_GEN", bad[i], 1);
        CHECK_MSG(host_job_generation(getenv("INCOLL_GEN"), "job-7") == hashed,
                  "'%s' accepted", bad[i]);
    }
    log_level_current = level;
    if (keep) {
        setenv("INCOLL_GEN", keep, 1);
        free(keep);
    } else {
        unsetenv("INCOLL_GEN");
    }
    return TEST_PASSED;
}

/* Payloads that are not multiples of 8 (or are, like 1000): every result
 * copy and contribution buffer of the AN starts aligned, so 64-bit
 * reductions never touch a misaligned element (UBSan in the asan build). */
TEST(core_payload_alignment, TEST_UNIT)
{
    static const uint32_t payloads[] = {1000, 1004, 1001, 65000};
    static const incoll_dtype_t types[] = {INCOLL_FLOAT64, INCOLL_INT64,
                                           INCOLL_UINT64, INCOLL_FLOAT32};
    static const incoll_op_t ops[] = {INCOLL_OP_SUM, INCOLL_OP_PROD,
                                      INCOLL_OP_MIN, INCOLL_OP_MAX};
    uint64_t rng = 1000;
    for (size_t k = 0; k < sizeof(payloads) / sizeof(payloads[0]); k++) {
        memnet_group_cfg_t g = group_cfg(5, payloads[k]);
        const size_t cap = 8 * 40000;
        world_t w;
        CHECK(world_from_spec(&w, "[[2][1] 2]", &CLEAN_NET, &g, cap) == 0);
        for (size_t d = 0; d < sizeof(types) / sizeof(types[0]); d++) {
            for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
                size_t count = 1 + (size_t)memnet_rand_below(
                                       &rng, cap / incoll_dtype_size(types[d]));
                fill_random(&w, &rng, count, types[d], ops[o]);
                CHECK(world_op(&w, count, types[d], ops[o], SEC) == 0);
                CHECK_MSG(check_ref(&w, count, types[d], ops[o]) == 0,
                          "payload %u", payloads[k]);
            }
        }
        world_free(&w);
    }
    return TEST_PASSED;
}

/* A host engine whose window of results comes back slowly but steadily
 * (a slow link: each result just under a timeout after the one before,
 * the whole operation many timeouts long) retransmits nothing and does not
 * time out; a result that is really lost is resent one timeout after the
 * results stop. */
TEST(core_host_steady_results, TEST_UNIT)
{
    static capture_t cap;
    host_engine_params_t p = host_params(&cap, 16, 0);
    host_engine_t *eng;
    static int64_t send[8 * 40], recv[8 * 40];
    uint8_t pkt[WIRE_HDR_LEN + 64];
    const uint64_t rto = 10 * MS, gap = rto - 100 * US, t0 = 5 * SEC;
    const int nseg = 40;
    uint64_t now = t0;

    for (int i = 0; i < 8 * nseg; i++)
        send[i] = 3 * i - 100;
    p.rto_init_ns = p.rto_min_ns = p.rto_max_ns = rto;
    p.progress_timeout_ns = 5 * rto; /* the operation takes 40 gaps */
    p.max_retries = 2;
    cap.n = 0;
    eng = host_engine_create(&p);
    CHECK(eng != NULL);
    CHECK_EQ_INT(host_engine_start(eng, send, recv, 8 * nseg, INCOLL_INT64,
                                   INCOLL_OP_SUM, t0),
                 INCOLL_INPROGRESS);
    CHECK_EQ_INT(cap.n, 16);
    for (int k = 0; k < nseg; k++) {
        uint64_t at = t0 + (uint64_t)(k + 1) * gap;
        /* The driver wakes at every deadline before the result comes. */
        for (int guard = 0; host_engine_deadline(eng) <= at; guard++) {
            CHECK_MSG(guard < 4, "deadline stuck at %" PRIu64,
                      host_engine_deadline(eng));
            now = host_engine_deadline(eng);
            host_engine_on_time(eng, now);
        }
        CHECK_MSG(host_engine_counters(eng)->retransmits == 0,
                  "segment %d: a result that keeps coming was resent", k);
        CHECK_EQ_INT(host_engine_status(eng), INCOLL_INPROGRESS);
        CHECK_EQ_INT(cap.h[k].offset, 8 * k);
        host_engine_on_packet(eng, 50, pkt,
                              result_for(&cap, k, pkt, send + 8 * k), at);
    }
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_OK);
    CHECK(memcmp(recv, send, sizeof(send)) == 0);
    CHECK_EQ_INT(cap.n, nseg);
    CHECK_EQ_INT(host_engine_counters(eng)->retransmits, 0);
    CHECK_EQ_INT(host_engine_counters(eng)->timeouts, 0);

    /* The next operation: 4 segments, the result of the first is lost and
     * the others come steadily. The results of the three segments sent
     * after it say it is lost: it is resent at once, without a timeout
     * (a fast retransmission). */
    cap.n = 0;
    now = t0 + SEC;
    CHECK_EQ_INT(host_engine_start(eng, send, recv, 32, INCOLL_INT64,
                                   INCOLL_OP_SUM, now),
                 INCOLL_INPROGRESS);
    CHECK_EQ_INT(cap.n, 4);
    for (int k = 1; k < 4; k++) {
        host_engine_on_time(eng, now + (uint64_t)k * gap - 1);
        host_engine_on_packet(eng, 50, pkt,
                              result_for(&cap, k, pkt, send + 8 * k),
                              now + (uint64_t)k * gap);
    }
    CHECK_EQ_INT(host_engine_counters(eng)->retransmits, 0);
    CHECK_EQ_INT(host_engine_counters(eng)->fast_retransmits, 1);
    CHECK_EQ_INT(cap.n, 5);
    CHECK_EQ_INT(cap.h[4].offset, 0);
    CHECK_EQ_INT(cap.h[4].flags & WIRE_F_RETRANS, WIRE_F_RETRANS);
    host_engine_on_packet(eng, 50, pkt, result_for(&cap, 4, pkt, send),
                          now + 3 * gap + MS);
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_OK);
    CHECK(memcmp(recv, send, 32 * 8) == 0);
    CHECK_EQ_INT(host_engine_counters(eng)->retransmits, 0);
    CHECK_EQ_INT(host_engine_counters(eng)->recovered, 1);
    host_engine_destroy(eng);
    return TEST_PASSED;
}

/* A driver clock that lags the last packet (now earlier than the last
 * result) is not taken for an eternity without progress. */
TEST(core_host_clock_behind, TEST_UNIT)
{
    static capture_t cap;
    host_engine_params_t p = host_params(&cap, 2, 0);
    host_engine_t *eng;
    int64_t send[16], recv[16];
    uint8_t pkt[WIRE_HDR_LEN + 64];
    const uint64_t t0 = 5 * SEC;

    for (int i = 0; i < 16; i++)
        send[i] = i;
    cap.n = 0;
    eng = host_engine_create(&p);
    CHECK(eng != NULL);
    CHECK_EQ_INT(
        host_engine_start(eng, send, recv, 16, INCOLL_INT64, INCOLL_OP_SUM, t0),
        INCOLL_INPROGRESS);
    host_engine_on_packet(eng, 50, pkt, result_for(&cap, 0, pkt, send),
                          t0 + 10 * MS);
    host_engine_on_time(eng, t0 + 5 * MS);
    host_engine_on_time(eng, t0);
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_INPROGRESS);
    CHECK_EQ_INT(host_engine_counters(eng)->timeouts, 0);
    CHECK_EQ_INT(host_engine_counters(eng)->retransmits, 0);
    CHECK_EQ_INT(cap.n, 2);
    host_engine_on_packet(eng, 50, pkt, result_for(&cap, 1, pkt, send + 8),
                          t0 + 11 * MS);
    CHECK_EQ_INT(host_engine_status(eng), INCOLL_OK);
    CHECK(memcmp(recv, send, sizeof(send)) == 0);
    host_engine_destroy(eng);
    return TEST_PASSED;
}

/* wire_ep_parse takes a strict dotted quad and 1 to 5 decimal digits of
 * port in 1..65535, nothing else. */
TEST(wire_ep_parse_strict, TEST_UNIT)
{
    static const char *const bad[] = {
        "10.0.0.7:+80",  "10.0.0.7: 80",   "10.0.0.7:80 ",    "10.0.0.7:-80",
        " 10.0.0.7:80",  "10.0.0.7 :80",   "10.0.0.+7:80",    "10.0.0.-7:80",
        "10.0.0.07:80",  "010.0.0.7:80",   "10.0.0.7:000000", "10.0.0.7:065536",
        "10.0.0.7:0x50", "10.0.0.7:00000", "10..0.7:80",      "10.0.0.7.:80",
        ".10.0.0.7:80",  "1000.0.0.7:80",  "10.0.0.7::80",    "0x0a.0.0.7:80",
        "10.0.0:80",     "10:80",          "10.0.0.7:123456",
    };
    static const struct {
        const char *text;
        uint32_t ip;
        uint16_t port;
    } good[] = {
        {"10.0.0.7:80", 0x0A000007u, 80},
        {"0.0.0.0:1", 0, 1},
        {"10.0.0.7:080", 0x0A000007u, 80},
        {"10.0.0.7:00080", 0x0A000007u, 80},
        {"192.168.100.255:65535", 0xC0A864FFu, 65535},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        incoll_ep_t e = 12345;
        CHECK_MSG(wire_ep_parse(bad[i], &e) == INCOLL_ERR_INVALID_ARG,
                  "'%s' accepted", bad[i]);
        CHECK_MSG(e == 12345, "'%s' wrote the output", bad[i]);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        incoll_ep_t e = 0;
        CHECK_MSG(wire_ep_parse(good[i].text, &e) == INCOLL_OK, "'%s' refused",
                  good[i].text);
        CHECK_MSG(e == wire_ep(good[i].ip, good[i].port), "'%s'", good[i].text);
    }
    return TEST_PASSED;
}

/* ------------------------------------------------------------------ */
/* Loss recovery that costs about one round trip. */

/* Drops exactly the packets it is told: the first one from src to dst of
 * the given type and segment offset (src or dst 0: any). */
typedef struct {
    incoll_ep_t src, dst;
    uint8_t type;
    uint64_t offset;
    int done;
} one_loss_t;

static int drop_one(void *arg, incoll_ep_t src, incoll_ep_t dst,
                    const uint8_t *pkt, size_t len)
{
    one_loss_t *l = arg;
    wire_hdr_t h;
    if (l->done || wire_parse(pkt, len, &h, NULL) != INCOLL_OK ||
        h.type != l->type || h.offset != l->offset ||
        (l->src && src != l->src) || (l->dst && dst != l->dst))
        return 0;
    l->done = 1;
    return 1;
}

/*
 * One packet lost in an otherwise clean run: a host's contribution, an
 * AN's aggregate, a result on its way to one host, and the result of the
 * last segment (no later result reveals that one). Each is recovered by a
 * fast retransmission or a tail probe, with no retransmission timeout
 * (the timeout here is the old 5 ms floor, far above the microseconds of
 * the round trip), exactly once and with the right sums.
 */
TEST(core_loss_one_segment_fast, TEST_UNIT)
{
    memnet_group_cfg_t g = group_cfg(16, 64);
    const size_t count = 40 * 8; /* 40 segments of 8 uint64 */
    world_t w;
    agg_counters_t base[MEMNET_MAX_ANS];

    g.rto_init_ns = g.rto_min_ns = 5 * MS;
    g.rto_max_ns = 50 * MS;
    CHECK(world_from_spec(&w, "[[4][4]]", &CLEAN_NET, &g, count * 8) == 0);
    fill_onehot(&w, count);
    /* A first clean operation measures the round trip. */
    CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
    CHECK(check_onehot(&w, count) == 0);
    for (int k = 0; k < 4; k++) {
        one_loss_t l = {.type = WIRE_CONTRIB};
        uint64_t fast = 0, timeouts = 0;
        switch (k) {
        case 0: /* rank 3's contribution of segment 5 */
            l.src = memnet_host_ep(w.net, w.g, 3);
            l.offset = 5 * 8;
            break;
        case 1: /* the aggregate of segment 9 from AN 2 to the root */
            l.src = memnet_an_ep(w.net, 2);
            l.offset = 9 * 8;
            break;
        case 2: /* the result of segment 7 to rank 6 */
            l.type = WIRE_RESULT;
            l.dst = memnet_host_ep(w.net, w.g, 6);
            l.offset = 7 * 8;
            break;
        default: /* the result of the last segment to rank 1 */
            l.type = WIRE_RESULT;
            l.dst = memnet_host_ep(w.net, w.g, 1);
            l.offset = count - 8;
            break;
        }
        memnet_set_filter(w.net, drop_one, &l);
        snapshot_ans(&w, base);
        for (int r = 0; r < w.n; r++) {
            const host_engine_counters_t *hc =
                host_engine_counters(memnet_host(w.net, w.g, r));
            fast -= hc->fast_retransmits;
            timeouts -= hc->retransmits;
        }
        CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
        CHECK_MSG(l.done, "case %d: the packet to lose never went", k);
        CHECK(check_onehot(&w, count) == 0);
        CHECK(memnet_drain(w.net, SEC) == 0);
        CHECK(check_an_exactly_once(&w, base, count / 8) == 0);
        for (int r = 0; r < w.n; r++) {
            const host_engine_counters_t *hc =
                host_engine_counters(memnet_host(w.net, w.g, r));
            fast += hc->fast_retransmits;
            timeouts += hc->retransmits;
        }
        CHECK_MSG(fast > 0 && timeouts == 0,
                  "case %d: %" PRIu64 " fast retransmissions, %" PRIu64
                  " on a timeout",
                  k, fast, timeouts);
        if (k == 1) {
            /* Its 4 children all resent segment 9; the aggregate went up
             * again once, not once per child. */
            uint64_t re = an_ctr(w.net, 2).reforwards - base[2].reforwards;
            CHECK_MSG(re == 1, "an2 re-forwarded %" PRIu64 " times", re);
        }
        memnet_set_filter(w.net, NULL, NULL);
    }
    world_free(&w);
    return TEST_PASSED;
}

/*
 * Loss in bursts toward each node (INCOLL_FAULT_BURST's process), with
 * duplicates and reordering: every allreduce of float64 gives every rank
 * the bits of the reference reduced in child order, every AN reduces each
 * segment exactly once, and fast retransmissions did part of the work.
 */
TEST(core_loss_burst_exactly_once, TEST_UNIT)
{
    memnet_cfg_t net = {.seed = 77,
                        .delay_ns = 2 * US,
                        .jitter_ns = 3 * US,
                        .drop = 0.05,
                        .burst = 4,
                        .dup = 0.02,
                        .reorder = 0.02,
                        .reorder_ns = 10 * US};
    memnet_group_cfg_t g = lossy_group_cfg(8, 128);
    const size_t count = 16 * 100;
    world_t w;
    agg_counters_t base[MEMNET_MAX_ANS];
    uint64_t rng = 5, fast = 0;

    CHECK(world_from_spec(&w, "[[3][2 [2]] 1]", &net, &g, count * 8) == 0);
    for (int k = 0; k < 6; k++) {
        size_t n = k % 2 ? count : count / 3 + 1;
        snapshot_ans(&w, base);
        fill_random(&w, &rng, n, INCOLL_FLOAT64, INCOLL_OP_SUM);
        CHECK(world_op(&w, n, INCOLL_FLOAT64, INCOLL_OP_SUM, 100 * SEC) == 0);
        CHECK(check_ref(&w, n, INCOLL_FLOAT64, INCOLL_OP_SUM) == 0);
        CHECK(memnet_drain(w.net, 100 * SEC) == 0);
        CHECK(check_an_exactly_once(
                  &w, base, nsegs(n, INCOLL_FLOAT64, g.max_payload)) == 0);
    }
    for (int r = 0; r < w.n; r++)
        fast +=
            host_engine_counters(memnet_host(w.net, w.g, r))->fast_retransmits;
    CHECK(memnet_stats(w.net)->dropped > 50);
    CHECK(fast > 0);
    world_free(&w);
    return TEST_PASSED;
}

/* Sums of the hosts' engine counters. */
static host_engine_counters_t hosts_ctr(world_t *w)
{
    return memnet_group_counters(w->net, w->g);
}

/* Links shaped as the emulated fabric's tbf: 100 Mbit/s, 1 ms of tokens. */
static memnet_cfg_t shaped_net(uint64_t seed)
{
    memnet_cfg_t net = {.seed = seed,
                        .delay_ns = 20 * US,
                        .jitter_ns = 5 * US,
                        .link_rate = 12500000,
                        .link_burst = 12500};
    return net;
}

/* One allreduce of n one-hot elements: right, drained, exactly once. */
static int shaped_op(world_t *w, size_t n, uint32_t payload)
{
    agg_counters_t base[MEMNET_MAX_ANS];
    snapshot_ans(w, base);
    CHECK(world_op(w, n, INCOLL_UINT64, INCOLL_OP_SUM, 10 * SEC) == 0);
    CHECK(check_onehot(w, n) == 0);
    CHECK(memnet_drain(w->net, 10 * SEC) == 0);
    CHECK(check_an_exactly_once(w, base, nsegs(n, INCOLL_UINT64, payload)) ==
          0);
    return TEST_PASSED;
}

/* The hosts sent the segments between counters c0 and c1 about once. */
static int sent_about_once(const host_engine_counters_t *c0,
                           const host_engine_counters_t *c1)
{
    uint64_t sent = c1->packets_sent - c0->packets_sent,
             segs = c1->segments - c0->segments;
    CHECK_MSG(sent * 10 <= segs * 11,
              "%" PRIu64 " packets for %" PRIu64 " segments: %" PRIu64
              " on a timeout (%" PRIu64 " of them spurious), %" PRIu64
              " fast, %" PRIu64 " probes",
              sent, segs, c1->retransmits - c0->retransmits,
              c1->spurious - c0->spurious,
              c1->fast_retransmits - c0->fast_retransmits,
              c1->probes - c0->probes);
    return TEST_PASSED;
}

/*
 * A sweep of sizes over rate-limited links, as the emulated fabric's tbf
 * (100 Mbit/s, 1 ms of tokens) and nothing lost: the small operations
 * pass in the bucket, so the engine learns a round trip of microseconds;
 * a larger one queues its window behind the link, and its results come
 * one packet time (655 us) apart, longer than the timeout learnt on the
 * small ones. Those results are late, not lost: the engine must not
 * resend the window again and again (every segment sent several times
 * and no round trip ever learnt from them, Karn), but learn the longer
 * round trip and send the operations' packets about once.
 */
TEST(core_rto_learns_queued_round_trip, TEST_UNIT)
{
    memnet_cfg_t net = shaped_net(3);
    memnet_group_cfg_t g = group_cfg(64, 8192);
    const size_t big = 65536 / 8;
    world_t w;
    host_engine_counters_t c0, c1;

    CHECK(world_from_spec(&w, "[[4][4]]", &net, &g, big * 8) == 0);
    fill_onehot(&w, big);
    for (int k = 0; k < 50; k++) {
        CHECK(world_op(&w, 1, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
        CHECK(memnet_drain(w.net, SEC) == 0);
    }
    c0 = hosts_ctr(&w);
    CHECK(c0.retransmits == 0);
    for (size_t n = big / 4; n <= big; n *= 2) {
        for (int k = 0; k < 20; k++)
            CHECK(shaped_op(&w, n, g.max_payload) == TEST_PASSED);
    }
    c1 = hosts_ctr(&w);
    CHECK(sent_about_once(&c0, &c1) == TEST_PASSED);
    world_free(&w);
    return TEST_PASSED;
}

/*
 * Pacing (host_engine_params_t.pace) over links shaped as the emulated
 * fabric's (100 Mbit/s, 1 ms of tokens): a window of 64 segments of 8 KiB
 * would keep a 42 ms queue in each host's link; the delay-based window
 * sets itself to what the path holds plus a few queued segments, and the
 * operations stay right and exactly once, their packets sent about once.
 * Without pace the window stays the configured one.
 */
TEST(core_pace_short_queue, TEST_UNIT)
{
    memnet_cfg_t net = shaped_net(5);
    const size_t big = (1u << 20) / 8;
    for (int pace = 0; pace <= 4; pace += 4) {
        memnet_group_cfg_t g = group_cfg(64, 8192);
        world_t w;
        host_engine_counters_t c0 = {0}, c1;
        uint64_t cuts = 0;

        g.pace = (uint32_t)pace;
        CHECK(world_from_spec(&w, "[[4][4]]", &net, &g, big * 8) == 0);
        fill_onehot(&w, big);
        for (int k = 0; k < 10; k++) {
            CHECK(world_op(&w, 1, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
            CHECK(memnet_drain(w.net, SEC) == 0);
        }
        /* The first operations learn the queued round trip (see
         * core_rto_learns_queued_round_trip); then count. */
        for (int k = 0; k < 7; k++) {
            if (k == 3)
                c0 = hosts_ctr(&w);
            CHECK(shaped_op(&w, big, g.max_payload) == TEST_PASSED);
        }
        c1 = hosts_ctr(&w);
        if (pace)
            CHECK(sent_about_once(&c0, &c1) == TEST_PASSED);
        for (int r = 0; r < w.n; r++) {
            const host_engine_t *e = memnet_host(w.net, w.g, r);
            uint32_t win = host_engine_window(e);
            cuts += host_engine_counters(e)->window_cuts;
            if (pace)
                CHECK_MSG(win >= 2 && win <= 16, "rank %d window %u", r,
                          (unsigned)win);
            else
                CHECK_EQ_INT((int)win, 64);
        }
        if (pace)
            CHECK(cuts > 0);
        else
            CHECK(cuts == 0);
        world_free(&w);
    }
    return TEST_PASSED;
}

/*
 * The moving window with a floor (window_min, no pace: as the library's
 * defaults, 64 slots and INCOLL_WINDOW_MIN, here 8). It starts at the
 * floor; on
 * fast links with nothing lost it grows to the slots (a path that
 * sustains more gets more in flight); on links shaped as the emulated
 * fabric's 100 Mbit/s it grows above the floor, and the timer follows
 * the longer queue: packets still go about once. A loss halves it,
 * never below the floor, and the results stay right and exactly once.
 */
TEST(core_window_grows_from_floor, TEST_UNIT)
{
    const size_t big = (1u << 20) / 8;
    for (int net_kind = 0; net_kind < 3; net_kind++) {
        memnet_cfg_t net = net_kind == 1 ? shaped_net(7) : CLEAN_NET;
        memnet_group_cfg_t g =
            net_kind == 2 ? lossy_group_cfg(64, 8192) : group_cfg(64, 8192);
        world_t w;
        host_engine_counters_t c0, c1;
        uint64_t cuts = 0;
        uint32_t lo = UINT32_MAX, hi = 0;

        g.window_min = 8;
        CHECK(world_from_spec(&w, "[[4][4]]", &net, &g, big * 8) == 0);
        fill_onehot(&w, big);
        for (int r = 0; r < w.n; r++)
            CHECK_EQ_INT((int)host_engine_window(memnet_host(w.net, w.g, r)),
                         8);
        c0 = hosts_ctr(&w);
        for (int k = 0; k < 4; k++)
            CHECK(shaped_op(&w, big, g.max_payload) == TEST_PASSED);
        c1 = hosts_ctr(&w);
        if (net_kind == 2) {
            /* Every rank at 64, then a few packets lost. */
            for (int a = 0; a < 3; a++)
                memnet_set_node_drop(w.net, memnet_an_ep(w.net, a), 0.002);
            for (int k = 0; k < 4; k++)
                CHECK(shaped_op(&w, big, g.max_payload) == TEST_PASSED);
        }
        for (int r = 0; r < w.n; r++) {
            const host_engine_t *e = memnet_host(w.net, w.g, r);
            uint32_t win = host_engine_window(e);
            cuts += host_engine_counters(e)->window_cuts;
            lo = win < lo ? win : lo;
            hi = win > hi ? win : hi;
        }
        fprintf(stderr, "    %s: window %u..%u, %" PRIu64 " cuts\n",
                net_kind == 0   ? "fast links"
                : net_kind == 1 ? "100 Mbit/s links"
                                : "fast links, then 0.2% lost",
                lo, hi, cuts);
        CHECK(lo >= 8);
        if (net_kind == 0) {
            CHECK_EQ_INT((int)lo, 64);
            CHECK(cuts == 0);
            CHECK(sent_about_once(&c0, &c1) == TEST_PASSED);
        } else if (net_kind == 1) {
            CHECK_MSG(hi > 8, "window %u..%u", lo, hi);
            CHECK(sent_about_once(&c0, &c1) == TEST_PASSED);
        } else {
            CHECK(cuts > 0);
            CHECK_MSG(lo < 64, "no window halved: %u..%u", lo, hi);
        }
        world_free(&w);
    }
    return TEST_PASSED;
}

/* Holds back the first packet drop_one would drop and delivers it
 * delay_ns later: a packet late, not lost. */
typedef struct {
    one_loss_t l;
    memnet_t *net;
    uint64_t delay_ns;
} one_late_t;

static int delay_one(void *arg, incoll_ep_t src, incoll_ep_t dst,
                     const uint8_t *pkt, size_t len)
{
    one_late_t *d = arg;
    if (!drop_one(&d->l, src, dst, pkt, len))
        return 0;
    memnet_inject(d->net, src, dst, pkt, len, d->delay_ns);
    return 1;
}

/*
 * A contribution late, not lost, on fast links: the window (grown to the
 * slots) is halved by the fast resend it causes, and when the late
 * original's answer shows the resend was spurious, the cut is undone:
 * the window is the slots again at once, not a slow climb from half.
 */
TEST(core_window_spurious_cut_undone, TEST_UNIT)
{
    const size_t big = (1u << 20) / 8;
    memnet_group_cfg_t g = group_cfg(64, 8192);
    world_t w;
    one_late_t d = {.l = {.type = WIRE_CONTRIB}, .delay_ns = 50 * US};
    const host_engine_t *e;
    uint64_t cuts0, spurious0;

    g.window_min = 8;
    g.ask_bytes = 0; /* a resend carries the data: the AN answers both */
    CHECK(world_from_spec(&w, "[[4][4]]", &CLEAN_NET, &g, big * 8) == 0);
    fill_onehot(&w, big);
    for (int k = 0; k < 3; k++)
        CHECK(shaped_op(&w, big, g.max_payload) == TEST_PASSED);
    e = memnet_host(w.net, w.g, 2);
    CHECK_EQ_INT((int)host_engine_window(e), 64);
    cuts0 = host_engine_counters(e)->window_cuts;
    spurious0 = host_engine_counters(e)->spurious;
    d.net = w.net;
    d.l.src = memnet_host_ep(w.net, w.g, 2);
    d.l.offset = 120 * 1024; /* segment 120 of 128: its slot is not reused */
    memnet_set_filter(w.net, delay_one, &d);
    CHECK(shaped_op(&w, big, g.max_payload) == TEST_PASSED);
    memnet_set_filter(w.net, NULL, NULL);
    CHECK(d.l.done);
    fprintf(stderr,
            "    rank 2: %" PRIu64 " cuts, %" PRIu64
            " spurious resends, window %u\n",
            host_engine_counters(e)->window_cuts - cuts0,
            host_engine_counters(e)->spurious - spurious0,
            host_engine_window(e));
    CHECK(host_engine_counters(e)->window_cuts > cuts0);
    CHECK(host_engine_counters(e)->spurious > spurious0);
    CHECK_EQ_INT((int)host_engine_window(e), 64);
    world_free(&w);
    return TEST_PASSED;
}

/*
 * Small operations sent twice (copy_bytes): every host's contribution and
 * every AN's aggregate and result go twice, the second flagged a copy.
 * Under 2% loss the results are right, every AN counts each child once
 * (a copy is never reduced twice, nor taken for a question), and almost
 * no loss needs a retransmission, where without copies many do.
 */
TEST(core_small_ops_twice, TEST_UNIT)
{
    memnet_cfg_t net = {
        .seed = 21, .delay_ns = 10 * US, .jitter_ns = 5 * US, .drop = 0.02};
    uint64_t resent[2] = {0, 0}, copies[2] = {0, 0};
    for (int twice = 0; twice < 2; twice++) {
        memnet_group_cfg_t g = group_cfg(16, 1024);
        world_t w;
        agg_counters_t base[MEMNET_MAX_ANS];
        host_engine_counters_t c;

        g.copy_bytes = twice ? 64 : 0;
        CHECK(world_from_spec(&w, "[[4][4]]", &net, &g, 64) == 0);
        fill_onehot(&w, 1);
        for (int k = 0; k < 300; k++) {
            snapshot_ans(&w, base);
            CHECK(world_op(&w, 1, INCOLL_UINT64, INCOLL_OP_SUM, 10 * SEC) == 0);
            CHECK(check_onehot(&w, 1) == 0);
            CHECK(memnet_drain(w.net, 10 * SEC) == 0);
            CHECK(check_an_exactly_once(&w, base, 1) == 0);
        }
        c = hosts_ctr(&w);
        resent[twice] = c.retransmits + c.fast_retransmits;
        for (int r = 0; r < w.n; r++)
            copies[twice] +=
                host_engine_counters(memnet_host(w.net, w.g, r))->copies;
        world_free(&w);
    }
    CHECK(copies[0] == 0 && copies[1] >= 300 * 8);
    CHECK_MSG(resent[1] * 10 < resent[0],
              "%" PRIu64 " retransmissions with copies, %" PRIu64 " without",
              resent[1], resent[0]);
    return TEST_PASSED;
}

/* Runs k allreduces of one uint64 on w, each checked exact and counted
 * once by every AN; 0 on success. */
static int small_ops_checked(world_t *w, int k)
{
    agg_counters_t base[MEMNET_MAX_ANS];
    for (int i = 0; i < k; i++) {
        snapshot_ans(w, base);
        CHECK(world_op(w, 1, INCOLL_UINT64, INCOLL_OP_SUM, 10 * SEC) == 0);
        CHECK(check_onehot(w, 1) == 0);
        CHECK(memnet_drain(w->net, 10 * SEC) == 0);
        CHECK(check_an_exactly_once(w, base, 1) == 0);
    }
    return 0;
}

/* Timeout and fast resends in c. */
static uint64_t resends(const host_engine_counters_t *c)
{
    return c->retransmits + c->fast_retransmits;
}

/*
 * Adaptive copies (copy_adapt_bytes): on a clean network small
 * operations never go twice; under 2% loss every host turns copies on
 * and then needs far fewer resends; when the loss stops, every host
 * turns them off again and sends each packet once. Results are exact
 * and every AN counts each child once throughout, and two runs with the
 * same seed count the same.
 */
TEST(core_copies_adaptive, TEST_UNIT)
{
    memnet_cfg_t clean = {.seed = 23, .delay_ns = 10 * US, .jitter_ns = 2 * US};
    memnet_cfg_t lossy = clean;
    uint64_t signs[2] = {0, 0};
    lossy.drop = 0.02;
    for (int run = 0; run < 2; run++) {
        memnet_group_cfg_t g = group_cfg(16, 1024);
        world_t w;
        host_engine_counters_t c0, c1;

        g.copy_adapt_bytes = 64;
        CHECK(world_from_spec(&w, "[[4][4]]", &clean, &g, 64) == 0);
        fill_onehot(&w, 1);
        /* Clean: never on. */
        CHECK(small_ops_checked(&w, 300) == 0);
        c0 = hosts_ctr(&w);
        CHECK(c0.copies == 0 && c0.copy_on == 0);
        /* Lossy: on at every host within the first 100 operations. */
        memnet_set_faults(w.net, &lossy);
        CHECK(small_ops_checked(&w, 100) == 0);
        for (int r = 0; r < w.n; r++)
            CHECK_MSG(host_engine_copying(memnet_host(w.net, w.g, r)),
                      "rank %d sends once under 2%% loss", r);
        c0 = hosts_ctr(&w);
        CHECK(small_ops_checked(&w, 300) == 0);
        c1 = hosts_ctr(&w);
        CHECK(c1.copies >= c0.copies + 300 * 8 * 9 / 10);
        /* 300 operations once at 2% lose ~one in four (13 packets each
         * on the way of a host's result); with copies almost none. */
        CHECK_MSG(resends(&c1) - resends(&c0) < 40,
                  "%" PRIu64 " resends in 300 operations with copies on",
                  resends(&c1) - resends(&c0));
        signs[run] = c1.loss_signs;
        /* Clean again: off after COPY_HOLD (256) operations, and the
         * members that followed COPY_FOLLOW (64) after the last. */
        memnet_set_faults(w.net, &clean);
        CHECK(small_ops_checked(&w, 340) == 0);
        for (int r = 0; r < w.n; r++) {
            host_engine_t *e = memnet_host(w.net, w.g, r);
            CHECK_MSG(!host_engine_copying(e), "rank %d still copies", r);
            CHECK(host_engine_counters(e)->copy_off >= 1);
        }
        c0 = hosts_ctr(&w);
        CHECK(small_ops_checked(&w, 50) == 0);
        c1 = hosts_ctr(&w);
        CHECK(c1.copies == c0.copies && resends(&c1) == resends(&c0));
        world_free(&w);
    }
    CHECK(signs[0] > 0 && signs[0] == signs[1]);
    return TEST_PASSED;
}

/* The sum over the ANs of one counter (by offset) since base. */
static uint64_t ans_sum(const world_t *w, const agg_counters_t *base,
                        size_t off)
{
    uint64_t t = 0;
    for (int a = 0; a < memnet_tree(w->net)->nans; a++) {
        agg_counters_t c = an_ctr(w->net, a);
        t += *(const uint64_t *)(const void *)((const char *)&c + off) -
             *(const uint64_t *)(const void *)((const char *)&base[a] + off);
    }
    return t;
}

/* Runs one allreduce of one uint64 on w while filter l drops its one
 * packet, checked exact and counted once by every AN; 0 on success. */
static int small_op_losing(world_t *w, one_loss_t *l)
{
    agg_counters_t base[MEMNET_MAX_ANS];
    snapshot_ans(w, base);
    l->done = 0;
    memnet_set_filter(w->net, drop_one, l);
    CHECK(world_op(w, 1, INCOLL_UINT64, INCOLL_OP_SUM, 10 * SEC) == 0);
    memnet_set_filter(w->net, NULL, NULL);
    CHECK_MSG(l->done, "the packet to lose never went");
    CHECK(check_onehot(w, 1) == 0);
    CHECK(memnet_drain(w->net, 10 * SEC) == 0);
    CHECK(check_an_exactly_once(w, base, 1) == 0);
    return 0;
}

/*
 * Hedges (hedge_pct): while copies are on, a one-packet operation's copy
 * goes only when its result is late. Two lost contributions of rank 3
 * (recovered by its tail probe; the timeout floor, 5 ms, is far above
 * the round trip) turn its copies on, and no other rank's. On the clean
 * network that follows no hedge goes (the results come in time), nor any
 * immediate copy. Then one lost contribution of rank 3 and one lost
 * result to it are each repaired by rank 3's one hedge, with no
 * retransmission or probe anywhere; the late contribution is counted
 * once and the lost result is answered from the one the leaf AN keeps.
 */
TEST(core_loss_hedge, TEST_UNIT)
{
    memnet_group_cfg_t g = group_cfg(16, 1024);
    world_t w;
    host_engine_t *e3;
    host_engine_counters_t c0, c1;
    one_loss_t l = {.type = WIRE_CONTRIB};

    g.rto_init_ns = g.rto_min_ns = 5 * MS;
    g.rto_max_ns = 50 * MS;
    g.copy_adapt_bytes = 64;
    g.hedge_pct = 150;
    CHECK(world_from_spec(&w, "[[4][4]]", &CLEAN_NET, &g, 64) == 0);
    fill_onehot(&w, 1);
    e3 = memnet_host(w.net, w.g, 3);
    l.src = memnet_host_ep(w.net, w.g, 3);
    CHECK(small_ops_checked(&w, 20) == 0);
    for (int k = 0; k < 2; k++) {
        CHECK(small_op_losing(&w, &l) == 0);
        CHECK(small_ops_checked(&w, 3) == 0); /* judged two later */
    }
    for (int r = 0; r < w.n; r++)
        CHECK_MSG(host_engine_copying(memnet_host(w.net, w.g, r)) == (r == 3),
                  "rank %d copies: %d", r,
                  host_engine_copying(memnet_host(w.net, w.g, r)));
    c0 = hosts_ctr(&w);
    CHECK(small_ops_checked(&w, 50) == 0);
    c1 = hosts_ctr(&w);
    CHECK_MSG(c1.hedges == 0 && c1.copies == 0 &&
                  c1.packets_sent == c0.packets_sent + 50 * 8,
              "%" PRIu64 " hedges, %" PRIu64 " copies on a clean network",
              c1.hedges, c1.copies);
    CHECK(host_engine_copying(e3));

    for (int k = 0; k < 2; k++) {
        agg_counters_t base[MEMNET_MAX_ANS];
        uint64_t resent = 0;
        if (k == 1) { /* the result on its way to rank 3 */
            l.type = WIRE_RESULT;
            l.src = 0;
            l.dst = memnet_host_ep(w.net, w.g, 3);
        }
        snapshot_ans(&w, base);
        c0 = hosts_ctr(&w);
        CHECK(small_op_losing(&w, &l) == 0);
        c1 = hosts_ctr(&w);
        CHECK_MSG(c1.hedges == c0.hedges + 1 &&
                      host_engine_counters(e3)->hedges == (uint64_t)k + 1,
                  "case %d: %" PRIu64 " hedges", k, c1.hedges - c0.hedges);
        CHECK_MSG(resends(&c1) == resends(&c0) && c1.probes == c0.probes &&
                      c1.timeouts == c0.timeouts,
                  "case %d: %" PRIu64 " resends besides the hedge", k,
                  resends(&c1) - resends(&c0));
        resent = ans_sum(&w, base, offsetof(agg_counters_t, results_resent));
        CHECK_MSG(resent == (uint64_t)k, "case %d: %" PRIu64 " results resent",
                  k, resent);
        CHECK(small_ops_checked(&w, 3) == 0);
    }
    world_free(&w);
    return TEST_PASSED;
}

/*
 * Hedges under 5% loss, independent and in bursts of 3: every host turns
 * them on, results stay exact and every AN counts each child once, no
 * copy goes at once, and two runs with the same seed count the same.
 */
TEST(core_loss_hedge_lossy, TEST_UNIT)
{
    for (int b = 0; b < 2; b++) {
        host_engine_counters_t c[2];
        for (int run = 0; run < 2; run++) {
            memnet_cfg_t net = {.seed = 41,
                                .delay_ns = 10 * US,
                                .jitter_ns = 2 * US,
                                .drop = 0.05,
                                .burst = b ? 3.0 : 0.0};
            memnet_group_cfg_t g = lossy_group_cfg(16, 1024);
            world_t w;
            g.copy_adapt_bytes = 64;
            g.hedge_pct = 100;
            CHECK(world_from_spec(&w, "[[4][4]]", &net, &g, 64) == 0);
            fill_onehot(&w, 1);
            CHECK(small_ops_checked(&w, 300) == 0);
            c[run] = hosts_ctr(&w);
            for (int r = 0; r < w.n; r++)
                CHECK_MSG(
                    host_engine_counters(memnet_host(w.net, w.g, r))->copy_on >=
                        1,
                    "burst %d: rank %d never hedged", b, r);
            world_free(&w);
        }
        CHECK_MSG(c[0].hedges > 0 && c[0].copies == 0,
                  "burst %d: %" PRIu64 " hedges, %" PRIu64 " copies", b,
                  c[0].hedges, c[0].copies);
        CHECK_MSG(c[0].hedges == c[1].hedges &&
                      c[0].packets_sent == c[1].packets_sent &&
                      resends(&c[0]) == resends(&c[1]),
                  "burst %d: runs differ: %" PRIu64 "/%" PRIu64 " hedges", b,
                  c[0].hedges, c[1].hedges);
    }
    return TEST_PASSED;
}

/*
 * Fast resends that ask (ask_bytes, WIRE_F_QUERY). One rank's lost
 * contribution: every rank's first resend of the segment is a header;
 * the leaf AN asks that rank alone for its data (one ask, one data
 * resend) and the others' questions wait for it. One lost result: the
 * AN answers the question with the result, and asks nothing. Then 5%
 * loss on every link: results exact, every AN counts each child once,
 * and most fast resends were questions. No timeout in the single-loss
 * cases.
 */
TEST(core_loss_ask, TEST_UNIT)
{
    memnet_group_cfg_t g = group_cfg(16, 1024);
    const size_t count = 40 * 128; /* 40 segments of 128 uint64 */
    memnet_cfg_t lossy = {
        .seed = 31, .delay_ns = 2 * US, .jitter_ns = 1 * US, .drop = 0.05};
    world_t w;
    agg_counters_t base[MEMNET_MAX_ANS];
    host_engine_counters_t c0, c1;

    g.rto_init_ns = g.rto_min_ns = 5 * MS;
    g.rto_max_ns = 50 * MS;
    g.ask_bytes = 1024;
    CHECK(world_from_spec(&w, "[[4][4]]", &CLEAN_NET, &g, count * 8) == 0);
    fill_onehot(&w, count);
    CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
    CHECK(check_onehot(&w, count) == 0);
    for (int k = 0; k < 2; k++) {
        one_loss_t l = {.type = WIRE_CONTRIB};
        uint64_t asks, asked, queries;
        if (k == 0) { /* rank 3's contribution of segment 5 */
            l.src = memnet_host_ep(w.net, w.g, 3);
            l.offset = 5 * 128;
        } else { /* the result of segment 7 to rank 6 */
            l.type = WIRE_RESULT;
            l.dst = memnet_host_ep(w.net, w.g, 6);
            l.offset = 7 * 128;
        }
        memnet_set_filter(w.net, drop_one, &l);
        snapshot_ans(&w, base);
        c0 = hosts_ctr(&w);
        CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, SEC) == 0);
        CHECK_MSG(l.done, "case %d: the packet to lose never went", k);
        CHECK(check_onehot(&w, count) == 0);
        CHECK(memnet_drain(w.net, SEC) == 0);
        CHECK(check_an_exactly_once(&w, base, count / 128) == 0);
        c1 = hosts_ctr(&w);
        asks = ans_sum(&w, base, offsetof(agg_counters_t, asks));
        asked = c1.asked - c0.asked;
        queries = c1.queries - c0.queries;
        CHECK_MSG(c1.retransmits == c0.retransmits,
                  "case %d: %" PRIu64 " timeouts", k,
                  c1.retransmits - c0.retransmits);
        CHECK_MSG(queries >= 1 &&
                      queries == c1.fast_retransmits - c0.fast_retransmits,
                  "case %d: %" PRIu64 " of %" PRIu64 " fast resends asked", k,
                  queries, c1.fast_retransmits - c0.fast_retransmits);
        if (k == 0) {
            CHECK_MSG(asks == 1 && asked == 1,
                      "case 0: %" PRIu64 " asks, %" PRIu64 " answered", asks,
                      asked);
            CHECK(host_engine_counters(memnet_host(w.net, w.g, 3))->asked == 1);
        } else {
            CHECK_MSG(asks == 0 && asked == 0,
                      "case 1: %" PRIu64 " asks for a lost result", asks);
        }
        memnet_set_filter(w.net, NULL, NULL);
    }
    world_free(&w);

    /* 5% loss everywhere. */
    g = lossy_group_cfg(16, 1024);
    g.ask_bytes = 1024;
    CHECK(world_from_spec(&w, "[[4][4]]", &lossy, &g, count * 8) == 0);
    fill_onehot(&w, count);
    c0 = hosts_ctr(&w);
    for (int k = 0; k < 10; k++) {
        snapshot_ans(&w, base);
        CHECK(world_op(&w, count, INCOLL_UINT64, INCOLL_OP_SUM, 100 * SEC) ==
              0);
        CHECK(check_onehot(&w, count) == 0);
        CHECK(memnet_drain(w.net, 10 * SEC) == 0);
        CHECK(check_an_exactly_once(&w, base, count / 128) == 0);
    }
    c1 = hosts_ctr(&w);
    CHECK_MSG(c1.asked > 0 && 2 * c1.queries > c1.fast_retransmits,
              "%" PRIu64 " questions of %" PRIu64 " fast resends, %" PRIu64
              " asked",
              c1.queries, c1.fast_retransmits, c1.asked);
    (void)c0;
    world_free(&w);
    return TEST_PASSED;
}
