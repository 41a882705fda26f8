/*
 * Unit tests of the point-to-point engine (src/core/p2p_engine.c) on an
 * in-memory network of its own with virtual time: packets are dropped,
 * duplicated, reordered and delayed on purpose by a seeded PRNG, so one
 * seed gives one run.
 *
 * Each simulated rank behaves like a process calling the library: it is
 * "absent" until it calls its first collective (packets for it wait, as in
 * a socket buffer), runs a list of allreduces back to back with a random
 * compute gap between them (during which packets wait again), and after the
 * last one lingers as finalize does, then goes away (packets to it are
 * lost). Every rank checks every result: exact for integer sums (hashed
 * inputs: a contribution missing or counted twice changes the sum),
 * bitwise identical to the other ranks for floating point.
 */
#include "test.h"

#include "common/dtype.h"
#include "common/udp.h"
#include "core/p2p_engine.h"

#include <math.h>
#include <stdint.h>

/* sim_op_t's collective fields stay zero (an allreduce) in the tables of
 * the allreduce tests. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define SIM_MAX_RANKS 64
#define SIM_MAX_OPS 16
#define SIM_QUANTUM_NS 5000 /* packets arriving within this form one batch */
#ifndef P2P_TEST_SEEDS
#define P2P_TEST_SEEDS 3 /* raise for a soak run: -DP2P_TEST_SEEDS=200 */
#endif

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rnd(uint64_t *s)
{
    return mix64((*s)++);
}

static double rnd_unit(uint64_t *s)
{
    return (double)(rnd(s) >> 11) * 0x1.0p-53;
}

typedef struct {
    algo_kind_t kind;
    size_t count;
    incoll_dtype_t dtype;
    incoll_op_t op;
    int calgo1; /* 0: an allreduce; else collective calgo1 - 1
                 * (uint64 sums, count per block) */
    int root;
    size_t seg;
} sim_op_t;

typedef struct {
    uint64_t t;
    uint64_t order;
    int src, dst;
    size_t len;
    uint8_t data[];
} sim_pkt_t;

enum { R_ABSENT, R_RUNNING, R_WAITING, R_LINGER, R_GONE };

typedef struct sim sim_t;

typedef struct {
    sim_t *sim;
    int rank;
    p2p_engine_t *eng;
    int state;
    int opi;           /* current or next op */
    uint64_t start_ns; /* when the next op starts (ABSENT, WAITING) */
    uint64_t done_ns;
    uint8_t *work;
    incoll_status_t result[SIM_MAX_OPS];
    int dirty;            /* got packets in this batch */
    int never_start;      /* a dead process */
    int stop_after;       /* finalizes after this many ops (0: all) */
    uint64_t linger_next; /* LINGER: next call of p2p_engine_linger */
    uint64_t link_free;   /* its slow link is busy sending until then */
    udp_loss_t loss_in;   /* bursts of loss toward this rank */
} sim_rank_t;

typedef struct {
    uint64_t seed;
    double drop, dup, reorder;
    double drop_ack; /* extra drop of acks only */
    double burst;    /* drops in bursts of this mean length toward
                      * each rank (udp_loss_t); <= 1: independent */
    uint64_t delay_ns, jitter_ns, reorder_ns;
    uint64_t skew_ns; /* first op starts up to this late */
    uint64_t gap_ns;  /* compute between ops, up to this */
    uint32_t payload, window;
    uint64_t progress_timeout_ns;
    int max_retries;
    uint64_t link_ns; /* a slow link: a rank's data packets leave one per
                       * link_ns, in order, queueing behind each other */
    uint64_t rto_ns;  /* pins the retransmission timeout when set */
    int ack_cut_from; /* with ack_cut_to: every ack from this rank to */
    int ack_cut_to;   /* that one is lost (-1: none) */
    int no_linger;    /* a rank leaves the library after its last op
                       * (into another library's call, say) */
    int drop_absent;  /* packets to a rank that has not started its first
                       * op are lost (its engine does not exist yet: a
                       * recovery channel made on its first recovery),
                       * instead of waiting in its socket */
} sim_cfg_t;

struct sim {
    sim_cfg_t cfg;
    int n;
    sim_rank_t r[SIM_MAX_RANKS];
    incoll_ep_t eps[SIM_MAX_RANKS];
    sim_op_t ops[SIM_MAX_OPS];
    int nops;
    uint8_t *first[SIM_MAX_OPS]; /* first result of each op, for floats */
    sim_pkt_t **heap;
    size_t nheap, capheap;
    uint64_t order;
    uint64_t now;
    uint64_t rng;
    uint64_t sent, dropped, duplicated, delivered;
    int bad; /* a result check failed */
};

/* ---- packet queue (binary heap on (t, order)) ---- */

static int pkt_less(const sim_pkt_t *a, const sim_pkt_t *b)
{
    return a->t < b->t || (a->t == b->t && a->order < b->order);
}

static void heap_push(sim_t *s, sim_pkt_t *p)
{
    size_t i;
    if (s->nheap == s->capheap) {
        s->capheap = s->capheap ? 2 * s->capheap : 256;
        s->heap = realloc(s->heap, s->capheap * sizeof(*s->heap));
    }
    i = s->nheap++;
    s->heap[i] = p;
    while (i > 0 && pkt_less(s->heap[i], s->heap[(i - 1) / 2])) {
        sim_pkt_t *t = s->heap[i];
        s->heap[i] = s->heap[(i - 1) / 2];
        s->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static sim_pkt_t *heap_pop(sim_t *s)
{
    sim_pkt_t *top = s->heap[0];
    size_t i = 0;
    s->heap[0] = s->heap[--s->nheap];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->nheap && pkt_less(s->heap[l], s->heap[m]))
            m = l;
        if (r < s->nheap && pkt_less(s->heap[r], s->heap[m]))
            m = r;
        if (m == i)
            break;
        sim_pkt_t *t = s->heap[i];
        s->heap[i] = s->heap[m];
        s->heap[m] = t;
        i = m;
    }
    return top;
}

static void enqueue(sim_t *s, int src, int dst, const void *hdr,
                    const void *payload, size_t len, uint64_t t)
{
    sim_pkt_t *p = malloc(sizeof(*p) + WIRE_HDR_LEN + len);
    p->t = t;
    p->order = s->order++;
    p->src = src;
    p->dst = dst;
    p->len = WIRE_HDR_LEN + len;
    memcpy(p->data, hdr, WIRE_HDR_LEN);
    if (len)
        memcpy(p->data + WIRE_HDR_LEN, payload, len);
    heap_push(s, p);
}

static void sim_send(void *arg, incoll_ep_t dst, const void *hdr,
                     const void *payload, size_t len)
{
    sim_rank_t *rk = arg;
    sim_t *s = rk->sim;
    int d = (int)dst - 1, copies = 1;
    double drop = s->cfg.drop;

    s->sent++;
    if (((const uint8_t *)hdr)[5] == WIRE_P2P_ACK)
        drop = 1 - (1 - drop) * (1 - s->cfg.drop_ack);
    if (((const uint8_t *)hdr)[5] == WIRE_P2P_ACK &&
        rk->rank == s->cfg.ack_cut_from && d == s->cfg.ack_cut_to)
        drop = 1;
    if (d < 0 || d >= s->n)
        return;
    if (s->cfg.burst > 1 && drop == s->cfg.drop) {
        /* A full queue toward the rank drops a run of packets. */
        udp_loss_t *loss = &s->r[d].loss_in;
        loss->p = drop;
        loss->burst = s->cfg.burst;
        if (udp_loss_next(loss, rnd_unit(&s->rng))) {
            s->dropped++;
            return;
        }
    } else if (rnd_unit(&s->rng) < drop) {
        s->dropped++;
        return;
    }
    if (rnd_unit(&s->rng) < s->cfg.dup) {
        s->duplicated++;
        copies = 2;
    }
    if (s->cfg.link_ns && ((const uint8_t *)hdr)[5] == WIRE_P2P_DATA) {
        rk->link_free =
            (rk->link_free > s->now ? rk->link_free : s->now) + s->cfg.link_ns;
        /* Neither duplicated nor reordered: a queue keeps its order. */
        enqueue(s, rk->rank, d, hdr, payload, len,
                rk->link_free + s->cfg.delay_ns);
        return;
    }
    for (int c = 0; c < copies; c++) {
        uint64_t t = s->now + s->cfg.delay_ns;
        if (s->cfg.jitter_ns)
            t += rnd(&s->rng) % (s->cfg.jitter_ns + 1);
        if (s->cfg.reorder_ns && rnd_unit(&s->rng) < s->cfg.reorder)
            t += rnd(&s->rng) % (s->cfg.reorder_ns + 1);
        enqueue(s, rk->rank, d, hdr, payload, len, t);
    }
}

/* ---- inputs and checks ---- */

static uint64_t cval(int rank, int opi, size_t i)
{
    return mix64(((uint64_t)rank << 40) ^ ((uint64_t)opi << 32) ^ i ^ 0xc011);
}

/* A collective's working buffer, laid out as core/algo.h says. */
static void coll_fill(sim_t *s, int rank, int opi, uint64_t *w)
{
    const sim_op_t *op = &s->ops[opi];
    algo_calgo_t id = (algo_calgo_t)(op->calgo1 - 1);
    size_t n = op->count, wc = algo_coll_work_count(id, s->n, n);
    int vr = (rank - op->root + s->n) % s->n;

    for (size_t i = 0; i < wc; i++)
        w[i] = 0xdead;
    switch (algo_calgo_info(id)->coll) {
    case ALGO_COLL_BCAST:
        for (size_t i = 0; rank == op->root && i < n; i++)
            w[i] = cval(op->root, opi, i);
        break;
    case ALGO_COLL_BARRIER:
        w[0] = 1;
        break;
    case ALGO_COLL_ALLGATHER: {
        size_t at = algo_coll_rotated(id) ? 0 : (size_t)rank;
        for (size_t i = 0; i < n; i++)
            w[at * n + i] = cval(rank, opi, i);
        break;
    }
    case ALGO_COLL_GATHER:
        for (size_t i = 0; i < n; i++)
            w[(size_t)vr * n + i] = cval(rank, opi, i);
        break;
    case ALGO_COLL_SCATTER:
        for (int j = 0; rank == op->root && j < s->n; j++)
            for (size_t i = 0; i < n; i++)
                w[(size_t)j * n + i] = cval((op->root + j) % s->n, opi, i);
        break;
    default: /* reduce, reduce_scatter */
        for (size_t i = 0; i < wc; i++)
            w[i] = cval(rank, opi, i);
    }
}

static int coll_check(sim_t *s, int rank, int opi, const uint64_t *w)
{
    const sim_op_t *op = &s->ops[opi];
    algo_calgo_t id = (algo_calgo_t)(op->calgo1 - 1);
    algo_coll_t c = algo_calgo_info(id)->coll;
    size_t n = op->count;
    int size = s->n, root = op->root, vr = (rank - root + size) % size;

    for (size_t i = 0; i < n || (c == ALGO_COLL_BARRIER && i < 1); i++) {
        uint64_t want = 0, got = 0;
        switch (c) {
        case ALGO_COLL_BCAST:
            want = cval(root, opi, i);
            got = w[i];
            break;
        case ALGO_COLL_REDUCE:
            if (rank != root)
                return 0;
            for (int q = 0; q < size; q++)
                want += cval(q, opi, i);
            got = w[i];
            break;
        case ALGO_COLL_BARRIER:
            want = 1;
            got = w[1];
            break;
        case ALGO_COLL_ALLGATHER:
        case ALGO_COLL_GATHER:
            if (c == ALGO_COLL_GATHER && rank != root)
                return 0;
            for (int q = 0; q < size; q++) {
                size_t at =
                    c == ALGO_COLL_GATHER   ? (size_t)((q - root + size) % size)
                    : algo_coll_rotated(id) ? (size_t)((q - rank + size) % size)
                                            : (size_t)q;
                if (w[at * n + i] != cval(q, opi, i))
                    goto bad;
            }
            continue;
        case ALGO_COLL_SCATTER:
            want = cval(rank, opi, i);
            got = w[(size_t)vr * n + i];
            break;
        default:
            for (int q = 0; q < size; q++)
                want += cval(q, opi, (size_t)rank * n + i);
            got = w[(size_t)rank * n + i];
        }
        if (got != want)
            goto bad;
    }
    return 0;
bad:
    fprintf(stderr, "    rank %d op %d (%s/%s count %zu root %d): wrong\n",
            rank, opi, algo_coll_name(c), algo_calgo_info(id)->name, n, root);
    return -1;
}

static void fill_input(sim_t *s, int rank, int opi, uint8_t *buf)
{
    const sim_op_t *op = &s->ops[opi];
    if (op->calgo1) {
        coll_fill(s, rank, opi, (uint64_t *)(void *)buf);
        return;
    }
    for (size_t i = 0; i < op->count; i++) {
        uint64_t h = mix64(((uint64_t)rank << 40) ^ ((uint64_t)opi << 32) ^ i);
        if (op->dtype == INCOLL_FLOAT64) {
            double d = ((double)(h >> 11) * 0x1.0p-53 - 0.5) * 100.0;
            memcpy(buf + i * 8, &d, 8);
        } else if (op->dtype == INCOLL_INT32) {
            int32_t v = (int32_t)(uint32_t)h;
            memcpy(buf + i * 4, &v, 4);
        } else {
            memcpy(buf + i * 8, &h, 8);
        }
    }
}

static int check_result(sim_t *s, int rank, int opi, const uint8_t *buf)
{
    const sim_op_t *op = &s->ops[opi];
    size_t ds = incoll_dtype_size(op->dtype);
    if (op->calgo1)
        return coll_check(s, rank, opi, (const uint64_t *)(const void *)buf);
    if (op->dtype == INCOLL_UINT64 && op->op == INCOLL_OP_SUM) {
        for (size_t i = 0; i < op->count; i++) {
            uint64_t want = 0, got;
            for (int q = 0; q < s->n; q++)
                want += mix64(((uint64_t)q << 40) ^ ((uint64_t)opi << 32) ^ i);
            memcpy(&got, buf + i * 8, 8);
            if (got != want) {
                fprintf(stderr,
                        "    rank %d op %d (%s, count %zu): element "
                        "%zu wrong\n",
                        rank, opi, algo_name(op->kind), op->count, i);
                return -1;
            }
        }
    } else if (op->dtype == INCOLL_INT32 && op->op == INCOLL_OP_MAX) {
        for (size_t i = 0; i < op->count; i++) {
            int32_t want = INT32_MIN, got;
            for (int q = 0; q < s->n; q++) {
                int32_t v = (int32_t)(uint32_t)mix64(((uint64_t)q << 40) ^
                                                     ((uint64_t)opi << 32) ^ i);
                want = v > want ? v : want;
            }
            memcpy(&got, buf + i * 4, 4);
            if (got != want) {
                fprintf(stderr, "    rank %d op %d: max element %zu wrong\n",
                        rank, opi, i);
                return -1;
            }
        }
    } else if (op->dtype == INCOLL_FLOAT64) {
        for (size_t i = 0; i < op->count; i++) {
            double want = 0, got;
            for (int q = 0; q < s->n; q++) {
                uint64_t h =
                    mix64(((uint64_t)q << 40) ^ ((uint64_t)opi << 32) ^ i);
                want += ((double)(h >> 11) * 0x1.0p-53 - 0.5) * 100.0;
            }
            memcpy(&got, buf + i * 8, 8);
            if (fabs(got - want) > 1e-9 * s->n * 50) {
                fprintf(stderr,
                        "    rank %d op %d: float element %zu: %.17g "
                        "!= %.17g\n",
                        rank, opi, i, got, want);
                return -1;
            }
        }
    }
    if (s->first[opi] == NULL) {
        s->first[opi] = malloc(op->count * ds + 1);
        memcpy(s->first[opi], buf, op->count * ds);
    } else if (memcmp(s->first[opi], buf, op->count * ds) != 0) {
        fprintf(stderr,
                "    rank %d op %d (%s): result differs from another "
                "rank's\n",
                rank, opi, algo_name(op->kind));
        return -1;
    }
    return 0;
}

/* ---- the simulation ---- */

static void sim_cfg_default(sim_cfg_t *c)
{
    memset(c, 0, sizeof(*c));
    c->seed = 1;
    c->delay_ns = 20000;
    c->jitter_ns = 5000;
    c->payload = 1024;
    c->window = 16;
    c->progress_timeout_ns = 3000000000ull;
    c->max_retries = 12;
    c->ack_cut_from = c->ack_cut_to = -1;
}

static sim_t *sim_create(const sim_cfg_t *cfg, int n, const sim_op_t *ops,
                         int nops)
{
    sim_t *s = calloc(1, sizeof(*s));
    size_t maxb = 0;
    if (s == NULL || n > SIM_MAX_RANKS || nops > SIM_MAX_OPS)
        return NULL;
    s->cfg = *cfg;
    s->n = n;
    s->nops = nops;
    s->rng = cfg->seed * 0x1234567ull + 99;
    memcpy(s->ops, ops, (size_t)nops * sizeof(*ops));
    for (int k = 0; k < nops; k++) {
        size_t b = ops[k].count * incoll_dtype_size(ops[k].dtype);
        if (ops[k].calgo1)
            b = algo_coll_work_count((algo_calgo_t)(ops[k].calgo1 - 1), n,
                                     ops[k].count) *
                8;
        maxb = b > maxb ? b : maxb;
    }
    for (int i = 0; i < n; i++)
        s->eps[i] = (incoll_ep_t)(i + 1);
    for (int i = 0; i < n; i++) {
        sim_rank_t *rk = &s->r[i];
        p2p_engine_params_t p;
        memset(&p, 0, sizeof(p));
        p2p_engine_params_default(&p);
        p.group = 7;
        wire_key_derive(NULL, WIRE_KEY_P2P, 0xfeed, 0, &p.key);
        p.rank = i;
        p.size = n;
        p.peers = s->eps;
        p.max_payload = cfg->payload;
        p.window = cfg->window;
        p.progress_timeout_ns = cfg->progress_timeout_ns;
        p.max_retries = cfg->max_retries;
        if (cfg->rto_ns)
            p.rto_init_ns = p.rto_min_ns = p.rto_max_ns = cfg->rto_ns;
        p.send = sim_send;
        p.send_arg = rk;
        rk->sim = s;
        rk->rank = i;
        rk->eng = p2p_engine_create(&p);
        rk->work = malloc(maxb + 1);
        rk->state = R_ABSENT;
        rk->start_ns = cfg->skew_ns ? rnd(&s->rng) % cfg->skew_ns : 0;
        for (int k = 0; k < nops; k++)
            rk->result[k] = INCOLL_INPROGRESS;
        if (rk->eng == NULL || rk->work == NULL)
            return NULL;
    }
    return s;
}

static void sim_destroy(sim_t *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->n; i++) {
        p2p_engine_destroy(s->r[i].eng);
        free(s->r[i].work);
    }
    for (int k = 0; k < s->nops; k++)
        free(s->first[k]);
    while (s->nheap)
        free(heap_pop(s));
    free(s->heap);
    free(s);
}

/* The rank's current operation ended (or could not start). */
static void op_ended(sim_t *s, sim_rank_t *rk, incoll_status_t st)
{
    rk->result[rk->opi] = st;
    if (st == INCOLL_OK && check_result(s, rk->rank, rk->opi, rk->work) != 0)
        s->bad = 1;
    rk->done_ns = s->now;
    rk->opi++;
    if (st == INCOLL_OK && rk->opi == s->nops && s->cfg.no_linger) {
        rk->state = R_GONE;
    } else if (st != INCOLL_OK || rk->opi == s->nops ||
               (rk->stop_after && rk->opi == rk->stop_after)) {
        rk->state = R_LINGER;
        rk->linger_next = s->now;
    } else {
        rk->state = R_WAITING;
        rk->start_ns =
            s->now + (s->cfg.gap_ns ? rnd(&s->rng) % s->cfg.gap_ns : 0);
    }
}

static void start_op(sim_t *s, sim_rank_t *rk)
{
    const sim_op_t *op = &s->ops[rk->opi];
    incoll_status_t st;
    fill_input(s, rk->rank, rk->opi, rk->work);
    rk->state = R_RUNNING;
    if (op->calgo1)
        st = p2p_engine_coll(rk->eng, (algo_calgo_t)(op->calgo1 - 1), op->root,
                             rk->work, op->count, op->seg, INCOLL_UINT64,
                             INCOLL_OP_SUM, s->now);
    else
        st = p2p_engine_allreduce(rk->eng, op->kind, rk->work, op->count,
                                  op->dtype, op->op, s->now);
    if (st != INCOLL_INPROGRESS)
        op_ended(s, rk, st);
}

/* When rank rk next needs attention, UINT64_MAX if never. */
static uint64_t rank_deadline(const sim_t *s, const sim_rank_t *rk)
{
    switch (rk->state) {
    case R_ABSENT:
        return rk->never_start ? UINT64_MAX : rk->start_ns;
    case R_WAITING:
        return rk->start_ns;
    case R_RUNNING: {
        uint64_t d = p2p_engine_deadline(rk->eng);
        return d < s->now ? s->now : d;
    }
    case R_LINGER: {
        uint64_t d = p2p_engine_deadline(rk->eng);
        uint64_t l = rk->linger_next;
        return d < l ? (d < s->now ? s->now : d) : l;
    }
    default:
        return UINT64_MAX;
    }
}

/* Runs until every rank is gone; -1 on virtual time beyond limit_ns. */
static int sim_run(sim_t *s, uint64_t limit_ns)
{
    uint64_t spins = 0, last_now = UINT64_MAX;
    for (;;) {
        uint64_t tnext = UINT64_MAX;
        int alive = 0;
        /* Time must move: a loop at one instant is a livelock. */
        if (s->now == last_now) {
            if (++spins > 100000) {
                fprintf(stderr, "    livelock at %.6f s\n", s->now / 1e9);
                for (int i = 0; i < s->n; i++)
                    fprintf(stderr, "      rank %d state %d deadline %llu\n", i,
                            s->r[i].state,
                            (unsigned long long)rank_deadline(s, &s->r[i]));
                return -1;
            }
        } else {
            spins = 0;
            last_now = s->now;
        }
        for (int i = 0; i < s->n; i++) {
            uint64_t d;
            if (s->r[i].state == R_GONE)
                continue;
            if (s->r[i].never_start && s->r[i].state == R_ABSENT)
                continue;
            alive++;
            d = rank_deadline(s, &s->r[i]);
            tnext = d < tnext ? d : tnext;
        }
        if (alive == 0)
            return 0;
        if (s->nheap) {
            uint64_t t = s->heap[0]->t;
            t = (t + SIM_QUANTUM_NS - 1) / SIM_QUANTUM_NS * SIM_QUANTUM_NS;
            tnext = t < tnext ? t : tnext;
        }
        if (tnext == UINT64_MAX)
            return -1; /* nothing will ever happen: a hang */
        if (tnext > s->now)
            s->now = tnext;
        if (s->now > limit_ns)
            return -1;
        /* Processes that call their next collective now. */
        for (int i = 0; i < s->n; i++) {
            sim_rank_t *rk = &s->r[i];
            if ((rk->state == R_ABSENT || rk->state == R_WAITING) &&
                !rk->never_start && rk->start_ns <= s->now)
                start_op(s, rk);
        }
        /* Deliver the batch. */
        while (s->nheap && s->heap[0]->t <= s->now) {
            sim_pkt_t *p = heap_pop(s);
            sim_rank_t *rk = &s->r[p->dst];
            if (rk->state == R_GONE) {
                free(p);
                continue;
            }
            if (rk->state == R_ABSENT || rk->state == R_WAITING) {
                /* Not in the library: the packet waits in the socket. */
                if (rk->never_start ||
                    (s->cfg.drop_absent && rk->state == R_ABSENT)) {
                    free(p);
                    continue;
                }
                p->t = rk->start_ns;
                p->order = s->order++;
                heap_push(s, p);
                continue;
            }
            s->delivered++;
            p2p_engine_on_packet(rk->eng, s->eps[p->src], p->data, p->len,
                                 s->now);
            rk->dirty = 1;
            free(p);
        }
        /* Timers, starts, ends. */
        for (int i = 0; i < s->n; i++) {
            sim_rank_t *rk = &s->r[i];
            switch (rk->state) {
            case R_RUNNING:
                if (rk->dirty || p2p_engine_deadline(rk->eng) <= s->now)
                    p2p_engine_on_time(rk->eng, s->now);
                if (p2p_engine_status(rk->eng) != INCOLL_INPROGRESS) {
                    p2p_engine_on_time(rk->eng, s->now); /* flush acks */
                    op_ended(s, rk, p2p_engine_status(rk->eng));
                }
                break;
            case R_LINGER:
                if (rk->dirty || p2p_engine_deadline(rk->eng) <= s->now)
                    p2p_engine_on_time(rk->eng, s->now);
                if (rk->linger_next <= s->now) {
                    rk->linger_next = p2p_engine_linger(rk->eng, s->now);
                    if (rk->linger_next == 0)
                        rk->state = R_GONE;
                }
                break;
            default:
                break;
            }
            rk->dirty = 0;
        }
    }
}

static int all_ok(const sim_t *s)
{
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < s->nops; k++)
            if (s->r[i].result[k] != INCOLL_OK) {
                fprintf(stderr, "    rank %d op %d (%s count %zu): %s\n", i, k,
                        algo_name(s->ops[k].kind), s->ops[k].count,
                        incoll_status_string(s->r[i].result[k]));
                return 0;
            }
    return !s->bad;
}

/* Runs ops over n ranks with cfg; returns 1 if every rank got every result
 * right. */
static int run_ops(const sim_cfg_t *cfg, int n, const sim_op_t *ops, int nops,
                   uint64_t limit_ns, p2p_engine_counters_t *sum_p)
{
    sim_t *s = sim_create(cfg, n, ops, nops);
    int ok;
    if (s == NULL)
        return 0;
    if (sim_run(s, limit_ns) != 0) {
        fprintf(stderr,
                "    n=%d seed=%llu: hang or over the time limit at "
                "%.3f s\n",
                n, (unsigned long long)cfg->seed, s->now / 1e9);
        for (int i = 0; i < n; i++)
            fprintf(stderr, "      rank %d state %d op %d status %s\n", i,
                    s->r[i].state, s->r[i].opi,
                    incoll_status_string(p2p_engine_status(s->r[i].eng)));
        sim_destroy(s);
        return 0;
    }
    ok = all_ok(s);
    if (!ok)
        fprintf(stderr, "    n=%d seed=%llu failed\n", n,
                (unsigned long long)cfg->seed);
    if (sum_p)
        for (int i = 0; i < n; i++) {
            const p2p_engine_counters_t *c = p2p_engine_counters(s->r[i].eng);
            sum_p->packets_sent += c->packets_sent;
            sum_p->retransmits += c->retransmits;
            sum_p->fast_retransmits += c->fast_retransmits;
            sum_p->duplicates += c->duplicates;
            sum_p->early += c->early;
            sum_p->stale += c->stale;
            sum_p->refused += c->refused;
            sum_p->probes += c->probes;
            sum_p->acks_sent += c->acks_sent;
        }
    sim_destroy(s);
    return ok;
}

static const algo_kind_t kinds[] = {ALGO_RD, ALGO_RING, ALGO_RABENSEIFNER};

/* ---- tests ---- */

static int send_count;
static uint8_t last_sent[WIRE_HDR_LEN + 2048];

static void capture_send(void *arg, incoll_ep_t dst, const void *hdr,
                         const void *payload, size_t len)
{
    send_count++;
    memcpy(last_sent, hdr, WIRE_HDR_LEN);
    if (len && len <= 2048)
        memcpy(last_sent + WIRE_HDR_LEN, payload, len);
}

TEST(p2p_params, TEST_UNIT)
{
    incoll_ep_t eps[2] = {1, 2};
    p2p_engine_params_t p;
    p2p_engine_t *eng;
    memset(&p, 0, sizeof(p));
    p2p_engine_params_default(&p);
    p.rank = 0;
    p.size = 2;
    p.peers = eps;
    p.max_payload = 1024;
    p.send = capture_send;
    eng = p2p_engine_create(&p);
    CHECK(eng != NULL);
    /* Size 1 and count 0 complete at once; bad arguments are refused. */
    CHECK_EQ_INT(p2p_engine_allreduce(eng, ALGO_RD, eps, 0, INCOLL_UINT64,
                                      INCOLL_OP_SUM, 0),
                 INCOLL_OK);
    CHECK_EQ_INT(p2p_engine_allreduce(eng, ALGO_INC, eps, 1, INCOLL_UINT64,
                                      INCOLL_OP_SUM, 0),
                 INCOLL_ERR_INVALID_ARG);
    CHECK_EQ_INT(p2p_engine_allreduce(eng, ALGO_RD, eps, 1, INCOLL_FLOAT32,
                                      INCOLL_OP_BAND, 0),
                 INCOLL_ERR_INVALID_ARG);
    CHECK_EQ_INT(p2p_engine_deadline(eng), UINT64_MAX);
    CHECK_EQ_INT(p2p_engine_linger(eng, 1), 0); /* nothing received */
    p2p_engine_destroy(eng);
    p.rank = 2;
    CHECK(p2p_engine_create(&p) == NULL);
    p.rank = 0;
    p.window = P2P_WINDOW_MAX + 1;
    CHECK(p2p_engine_create(&p) == NULL);
    p.window = 0;
    p.max_payload = 4;
    CHECK(p2p_engine_create(&p) == NULL);
    return TEST_PASSED;
}

TEST(p2p_allreduce_clean, TEST_UNIT)
{
    sim_cfg_t cfg;
    int sizes[] = {2, 3, 4, 5, 7, 8, 12, 13, 16};
    sim_cfg_default(&cfg);
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        int n = sizes[si];
        sim_op_t ops[12];
        int nops = 0;
        for (int k = 0; k < 3; k++) {
            ops[nops++] = (sim_op_t){kinds[k], 1, INCOLL_UINT64, INCOLL_OP_SUM};
            ops[nops++] =
                (sim_op_t){kinds[k], (size_t)n - 1 ? (size_t)n - 1 : 1,
                           INCOLL_UINT64, INCOLL_OP_SUM};
            ops[nops++] =
                (sim_op_t){kinds[k], 3001, INCOLL_FLOAT64, INCOLL_OP_SUM};
            ops[nops++] =
                (sim_op_t){kinds[k], 777, INCOLL_INT32, INCOLL_OP_MAX};
        }
        CHECK_MSG(run_ops(&cfg, n, ops, nops, 60ull * 1000000000, NULL),
                  "size %d", n);
    }
    return TEST_PASSED;
}

/* Loss, duplication, reordering, skewed starts and compute gaps, with many
 * small packets and a small window. */
TEST(p2p_allreduce_lossy, TEST_UNIT)
{
    int sizes[] = {2, 3, 5, 6, 8, 11, 16, 17};
    p2p_engine_counters_t sum;
    memset(&sum, 0, sizeof(sum));
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
        for (uint64_t seed = 1; seed <= P2P_TEST_SEEDS; seed++) {
            int n = sizes[si];
            sim_cfg_t cfg;
            sim_op_t ops[10];
            int nops = 0;
            sim_cfg_default(&cfg);
            cfg.seed = seed * 1000 + (uint64_t)n;
            cfg.drop = 0.05;
            cfg.dup = 0.05;
            cfg.reorder = 0.1;
            cfg.reorder_ns = 100000;
            cfg.jitter_ns = 20000;
            cfg.skew_ns = 2000000;
            cfg.gap_ns = 300000;
            cfg.payload = 256;
            cfg.window = seed == 1 ? 4 : 32;
            for (int k = 0; k < 3; k++) {
                ops[nops++] = (sim_op_t){kinds[(k + seed) % 3], 1,
                                         INCOLL_UINT64, INCOLL_OP_SUM};
                ops[nops++] = (sim_op_t){kinds[(k + seed) % 3], 2000,
                                         INCOLL_UINT64, INCOLL_OP_SUM};
                ops[nops++] = (sim_op_t){kinds[k], (size_t)n + 1,
                                         INCOLL_FLOAT64, INCOLL_OP_SUM};
            }
            ops[nops++] =
                (sim_op_t){ALGO_RING, 5000, INCOLL_FLOAT64, INCOLL_OP_SUM};
            CHECK_MSG(run_ops(&cfg, n, ops, nops, 600ull * 1000000000, &sum),
                      "size %d seed %llu", n, (unsigned long long)cfg.seed);
        }
    printf("    packets %llu, retransmits %llu timeout + %llu fast, duplicates "
           "%llu, early %llu, stale %llu, refused %llu, probes %llu\n",
           (unsigned long long)sum.packets_sent,
           (unsigned long long)sum.retransmits,
           (unsigned long long)sum.fast_retransmits,
           (unsigned long long)sum.duplicates, (unsigned long long)sum.early,
           (unsigned long long)sum.stale, (unsigned long long)sum.refused,
           (unsigned long long)sum.probes);
    /* The loss recovery paths actually ran. */
    CHECK(sum.retransmits + sum.fast_retransmits > 0);
    CHECK(sum.duplicates > 0);
    CHECK(sum.early > 0);
    CHECK(sum.stale > 0);
    return TEST_PASSED;
}

/* Heavy loss of everything, and of acks only (the receivers have moved on
 * and must re-ack completed steps, even while lingering at the end). */
TEST(p2p_allreduce_heavy_loss, TEST_UNIT)
{
    for (uint64_t seed = 1; seed <= 4 * P2P_TEST_SEEDS / 3; seed++) {
        int n = 3 + (int)(seed % 6);
        sim_cfg_t cfg;
        sim_op_t ops[6];
        int nops = 0;
        sim_cfg_default(&cfg);
        cfg.seed = seed;
        if (seed % 2)
            cfg.drop = 0.3;
        else
            cfg.drop_ack = 0.5;
        cfg.dup = 0.1;
        cfg.payload = 512;
        cfg.window = 8;
        cfg.max_retries = 20;
        cfg.progress_timeout_ns = 20ull * 1000000000;
        for (int k = 0; k < 3; k++) {
            ops[nops++] =
                (sim_op_t){kinds[k], 300, INCOLL_UINT64, INCOLL_OP_SUM};
            ops[nops++] = (sim_op_t){kinds[k], 2, INCOLL_UINT64, INCOLL_OP_SUM};
        }
        CHECK_MSG(run_ops(&cfg, n, ops, nops, 3600ull * 1000000000, NULL),
                  "seed %llu", (unsigned long long)seed);
    }
    return TEST_PASSED;
}

/* Many ranks, sizes around powers of two, no loss but lots of skew so peers
 * are often ahead (early data) or behind (BEHIND answers). */
TEST(p2p_allreduce_skew, TEST_UNIT)
{
    int sizes[] = {9, 15, 31, 33, 64};
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        int n = sizes[si];
        sim_cfg_t cfg;
        sim_op_t ops[6];
        sim_cfg_default(&cfg);
        cfg.seed = (uint64_t)n;
        cfg.skew_ns = 50000000;
        cfg.gap_ns = 10000000;
        cfg.jitter_ns = 100000;
        cfg.drop = n < 40 ? 0.01 : 0;
        for (int k = 0; k < 3; k++) {
            ops[2 * k] =
                (sim_op_t){kinds[k], 1000, INCOLL_UINT64, INCOLL_OP_SUM};
            ops[2 * k + 1] = (sim_op_t){kinds[k], (size_t)n / 2, INCOLL_FLOAT64,
                                        INCOLL_OP_SUM};
        }
        CHECK_MSG(run_ops(&cfg, n, ops, 6, 600ull * 1000000000, NULL),
                  "size %d", n);
    }
    return TEST_PASSED;
}

/* Every collective algorithm on the engine, back to back with allreduces
 * on one engine (they share the per-pair transfer numbers), clean and
 * under loss, duplication, reordering, skewed starts and compute gaps. */
TEST(p2p_colls_lossy, TEST_UNIT)
{
    int sizes[] = {2, 3, 5, 8, 13};
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
        for (uint64_t seed = 0; seed <= 2; seed++) {
            int n = sizes[si], nops = 0;
            sim_cfg_t cfg;
            sim_op_t ops[SIM_MAX_OPS];
            sim_cfg_default(&cfg);
            cfg.seed = seed * 100 + (uint64_t)n;
            if (seed) {
                cfg.drop = 0.05;
                cfg.dup = 0.02;
                cfg.reorder = 0.1;
                cfg.reorder_ns = 100000;
                cfg.skew_ns = 2000000;
                cfg.gap_ns = 300000;
            }
            cfg.payload = 256;
            cfg.window = 16;
            for (int id = 0; id < CALGO_COUNT && nops < SIM_MAX_OPS - 1; id++) {
                size_t count = seed == 2 ? 1 : 300 + (size_t)id;
                if (!algo_calgo_fits((algo_calgo_t)id, n))
                    continue;
                ops[nops++] = (sim_op_t){.kind = ALGO_RD,
                                         .count = count,
                                         .dtype = INCOLL_UINT64,
                                         .op = INCOLL_OP_SUM,
                                         .calgo1 = id + 1,
                                         .root = (int)((size_t)id % (size_t)n),
                                         .seg = 64};
            }
            ops[nops++] = (sim_op_t){
                ALGO_RING, 500, INCOLL_UINT64, INCOLL_OP_SUM, 0, 0, 0};
            CHECK_MSG(run_ops(&cfg, n, ops, nops, 600ull * 1000000000, NULL),
                      "size %d seed %llu", n, (unsigned long long)cfg.seed);
        }
    return TEST_PASSED;
}

/* Ranks that finalize while one rank still waits in a host-based call
 * (it called one collective more) must leave, and that rank must get an
 * error in bounded time: the lingering engines answered its probes with
 * BEHIND, which kept it waiting and them lingering for as long as it
 * asked. With loss, so the lingerers also have final acks to repeat. */
TEST(p2p_finalize_while_peer_waits, TEST_UNIT)
{
    for (int k = 0; k < 3; k++)
        for (uint64_t seed = 1; seed <= 2; seed++) {
            sim_cfg_t cfg;
            sim_op_t ops[2] = {{kinds[k], 600, INCOLL_UINT64, INCOLL_OP_SUM},
                               {kinds[k], 600, INCOLL_UINT64, INCOLL_OP_SUM}};
            sim_t *s;
            uint64_t after = 0;

            sim_cfg_default(&cfg);
            cfg.seed = seed;
            cfg.drop = seed == 2 ? 0.05 : 0;
            cfg.payload = 512;
            s = sim_create(&cfg, 4, ops, 2);
            CHECK(s != NULL);
            for (int i = 1; i < 4; i++)
                s->r[i].stop_after = 1;
            CHECK_MSG(sim_run(s, 120ull * 1000000000) == 0,
                      "%s seed %llu: hang at %.3f s", algo_name(kinds[k]),
                      (unsigned long long)seed, s->now / 1e9);
            /* Every rank got the first result; the extra call failed. */
            for (int i = 0; i < 4; i++)
                CHECK_EQ_INT(s->r[i].result[0], INCOLL_OK);
            CHECK_EQ_INT(s->r[0].result[1], INCOLL_ERR_TIMEOUT);
            CHECK(!s->bad);
            /* Within its progress timeout and a linger, not much later. */
            CHECK_MSG(s->r[0].done_ns < 2 * cfg.progress_timeout_ns,
                      "failed only at %.3f s", s->r[0].done_ns / 1e9);
            for (int i = 1; i < 4; i++)
                after += p2p_engine_counters(s->r[i].eng)->after_finalize;
            CHECK(after > 0);
            sim_destroy(s);
        }
    return TEST_PASSED;
}

/*
 * An exchange partner that comes late and drops what came before it
 * (a member joining a recovery seconds after the others: its recovery
 * channel does not exist until then): the early rank's block was lost
 * however often it went, so the partner's arrival, not the silence
 * before it, starts the count after which a silent partner is taken to
 * have our block. Before, the early rank took its block as delivered the
 * moment the partner's came, left, and the late rank waited for it in
 * vain. Both must complete, right, with the operation's long limits (a
 * manager's: the recovery waits as long as INCOLL_WAIT_MS).
 */
TEST(p2p_late_partner_dropped, TEST_UNIT)
{
    sim_cfg_t cfg;
    sim_op_t op = {ALGO_RD, 16, INCOLL_UINT64, INCOLL_OP_MAX};
    sim_t *s;

    sim_cfg_default(&cfg);
    cfg.drop_absent = 1;
    cfg.progress_timeout_ns = 600ull * 1000000000;
    cfg.max_retries = 2408; /* what 600 s over a 250 ms backoff cap asks */
    for (int late = 1; late < 4; late++) {
        s = sim_create(&cfg, 4, &op, 1);
        CHECK(s != NULL);
        s->r[late].start_ns = 5ull * 1000000000; /* 5 s late */
        CHECK(sim_run(s, 700ull * 1000000000) == 0);
        CHECK_MSG(all_ok(s), "rank %d late", late);
        /* Done soon after the late rank came, not at a timeout. */
        CHECK_MSG(s->now < 10ull * 1000000000, "ended at %.1f s",
                  (double)s->now / 1e9);
        sim_destroy(s);
    }
    return TEST_PASSED;
}

/*
 * A peer that took our block, sent us its block of a later step and left
 * the library (it waits elsewhere and reads no packets), every ack it
 * sent us lost: that later block proves it has ours. Rank 0 of a 5-rank
 * recursive doubling sends its input to rank 1 first and gets the result
 * from it last. With the long limits of INCOLL_WAIT_MS rank 0 waited for
 * the ack until they ran out (a job's init hung so, its rank 0 in an
 * exchange the others had left); before those limits it failed at its
 * first timeout.
 */
TEST(p2p_peer_past_step, TEST_UNIT)
{
    sim_cfg_t cfg;
    sim_op_t op = {ALGO_RD, 16, INCOLL_UINT64, INCOLL_OP_SUM};
    sim_t *s;

    sim_cfg_default(&cfg);
    cfg.no_linger = 1;
    cfg.ack_cut_from = 1;
    cfg.ack_cut_to = 0;
    cfg.progress_timeout_ns = 600ull * 1000000000;
    cfg.max_retries = 2408;
    s = sim_create(&cfg, 5, &op, 1);
    CHECK(s != NULL);
    CHECK(sim_run(s, 700ull * 1000000000) == 0);
    CHECK(all_ok(s));
    CHECK_MSG(s->now < 10ull * 1000000000, "ended at %.1f s",
              (double)s->now / 1e9);
    sim_destroy(s);
    return TEST_PASSED;
}

/* A rank that arrives a second late is waited for; one that never comes
 * makes the others fail with a timeout, and later calls report the group
 * as failed. */
TEST(p2p_late_and_dead_rank, TEST_UNIT)
{
    sim_cfg_t cfg;
    sim_op_t ops[2] = {{ALGO_RING, 4000, INCOLL_UINT64, INCOLL_OP_SUM},
                       {ALGO_RD, 10, INCOLL_UINT64, INCOLL_OP_SUM}};
    sim_t *s;

    sim_cfg_default(&cfg);
    s = sim_create(&cfg, 5, ops, 2);
    CHECK(s != NULL);
    s->r[3].start_ns = 1000000000; /* one second late */
    CHECK(sim_run(s, 100ull * 1000000000) == 0);
    CHECK(all_ok(s));
    sim_destroy(s);

    for (int k = 0; k < 3; k++) {
        sim_op_t op1 = {kinds[k], 4000, INCOLL_UINT64, INCOLL_OP_SUM};
        cfg.progress_timeout_ns = 1000000000;
        s = sim_create(&cfg, 6, &op1, 1);
        CHECK(s != NULL);
        s->r[2].never_start = 1;
        CHECK(sim_run(s, 100ull * 1000000000) == 0);
        for (int i = 0; i < 6; i++) {
            if (i == 2)
                continue;
            /* Ranks that depend on rank 2 time out; none may succeed with
             * a wrong result (all_ok would have flagged it). */
            CHECK_MSG(s->r[i].result[0] == INCOLL_ERR_TIMEOUT ||
                          s->r[i].result[0] == INCOLL_OK,
                      "%s rank %d: %s", algo_name(kinds[k]), i,
                      incoll_status_string(s->r[i].result[0]));
        }
        CHECK(s->r[(2 + 1) % 6].result[0] == INCOLL_ERR_TIMEOUT ||
              s->r[(2 + 5) % 6].result[0] == INCOLL_ERR_TIMEOUT);
        CHECK(s->bad == 0);
        /* Within a few timeouts of virtual time, not forever. */
        CHECK(s->now < 20ull * 1000000000);
        {
            sim_rank_t *rk = NULL;
            for (int i = 0; i < 6; i++)
                if (s->r[i].result[0] == INCOLL_ERR_TIMEOUT)
                    rk = &s->r[i];
            CHECK(rk != NULL);
            CHECK_EQ_INT(p2p_engine_allreduce(rk->eng, ALGO_RD, rk->work, 1,
                                              INCOLL_UINT64, INCOLL_OP_SUM,
                                              s->now),
                         INCOLL_ERR_GROUP_FAILED);
        }
        sim_destroy(s);
    }
    return TEST_PASSED;
}

/*
 * A rank that finished a recursive-doubling allreduce and left the library
 * at once (into the MPI library's own next collective, which waits for the
 * others) while every ack it sent to its first partner was lost: that
 * partner has the rank's block of the exchange and hears nothing more. It
 * must take its own block as received (the rank could not have finished
 * without it) and complete, not time out at the first of several steps.
 */
TEST(p2p_exchange_partner_left, TEST_UNIT)
{
    sim_op_t op = {ALGO_RD, 100, INCOLL_UINT64, INCOLL_OP_SUM};
    sim_cfg_t cfg;
    sim_t *s;
    uint64_t assumed = 0;

    sim_cfg_default(&cfg);
    cfg.ack_cut_from = 2;
    cfg.ack_cut_to = 3;
    cfg.no_linger = 1;
    /* As a manager makes them (INCOLL_MGR_OP_TIMEOUT_MS): the partner's
     * silence must not be waited out to the last of these. */
    cfg.max_retries = 128;
    cfg.progress_timeout_ns = 30000000000ull;
    s = sim_create(&cfg, 4, &op, 1);
    CHECK(s != NULL);
    CHECK(sim_run(s, 100ull * 1000000000) == 0);
    /* Virtual time: a few retransmission timeouts, not 128 of them. */
    CHECK_MSG(s->r[3].done_ns < 3000000000ull, "rank 3 done at %.3f s",
              s->r[3].done_ns / 1e9);
    for (int i = 0; i < 4; i++)
        CHECK_MSG(s->r[i].result[0] == INCOLL_OK, "rank %d: %s", i,
                  incoll_status_string(s->r[i].result[0]));
    CHECK(all_ok(s));
    for (int i = 0; i < 4; i++)
        assumed += p2p_engine_counters(s->r[i].eng)->assumed_acked;
    CHECK(p2p_engine_counters(s->r[3].eng)->assumed_acked >= 1);
    CHECK_EQ_INT((int)assumed,
                 (int)p2p_engine_counters(s->r[3].eng)->assumed_acked);
    sim_destroy(s);
    return TEST_PASSED;
}

/* Ranks called with different counts: the calls disagree and both sides
 * fail with INCOLL_ERR_MISMATCH (different sizes) instead of computing
 * garbage. */
TEST(p2p_count_mismatch, TEST_UNIT)
{
    sim_cfg_t cfg;
    sim_op_t op = {ALGO_RD, 10, INCOLL_UINT64, INCOLL_OP_SUM};
    sim_t *s;
    sim_cfg_default(&cfg);
    cfg.progress_timeout_ns = 500000000;
    s = sim_create(&cfg, 2, &op, 1);
    CHECK(s != NULL);
    /* Rank 1 runs with count 20 instead: start it by hand. */
    s->r[1].state = R_RUNNING;
    fill_input(s, 1, 0, s->r[1].work);
    CHECK_EQ_INT(p2p_engine_allreduce(s->r[1].eng, ALGO_RD, s->r[1].work, 5,
                                      INCOLL_UINT64, INCOLL_OP_SUM, 0),
                 INCOLL_INPROGRESS);
    CHECK(sim_run(s, 100ull * 1000000000) == 0);
    CHECK_EQ_INT(s->r[0].result[0], INCOLL_ERR_MISMATCH);
    CHECK_EQ_INT(s->r[1].result[0], INCOLL_ERR_MISMATCH);
    CHECK_EQ_INT(p2p_engine_mismatch(s->r[0].eng), WIRE_MISMATCH_SIZE);
    CHECK_EQ_INT(p2p_engine_mismatch(s->r[1].eng), WIRE_MISMATCH_SIZE);
    sim_destroy(s);
    return TEST_PASSED;
}

/* Foreign, malformed and out-of-range packets are counted and dropped;
 * data of a consumed block is re-acked with DONE; data that finds no spare
 * slot is answered with BEHIND. */
/*
 * Feeds a copy of the datagram made by hand, sealed first (wire_mac.h)
 * under the key derived from what its header's mac field holds: the
 * packets below put the communicator's 64-bit key there (77, or 78 for a
 * wrong one), and the engine's key is derived from 77 alike.
 */
static void feed(p2p_engine_t *eng, incoll_ep_t src, const uint8_t *pkt,
                 size_t len, uint64_t now)
{
    uint8_t copy[WIRE_HDR_LEN + P2P_WINDOW_MAX];
    wire_key_t key;
    uint64_t k = 0;

    memcpy(copy, pkt, len);
    if (len >= WIRE_HDR_LEN) {
        for (int i = 0; i < 8; i++)
            k |= (uint64_t)copy[16 + i] << (8 * i);
        wire_key_derive(NULL, WIRE_KEY_P2P, k, 0, &key);
        wire_mac_seal(&key, copy, copy + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
    }
    p2p_engine_on_packet(eng, src, copy, len, now);
}

TEST(p2p_bad_packets, TEST_UNIT)
{
    incoll_ep_t eps[3] = {10, 11, 12};
    p2p_engine_params_t p;
    p2p_engine_t *eng;
    uint8_t pkt[WIRE_HDR_LEN + 64];
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_P2P_DATA,
                    .group = 5,
                    .mac = 77,
                    .child = 1,
                    .epoch = 0,
                    .count = 64,
                    .total = 64,
                    .offset = 0};
    wire_hdr_t r;
    uint64_t dropped;

    memset(&p, 0, sizeof(p));
    p2p_engine_params_default(&p);
    p.group = 5;
    wire_key_derive(NULL, WIRE_KEY_P2P, 77, 0, &p.key);
    p.rank = 0;
    p.size = 3;
    p.peers = eps;
    p.max_payload = 1024;
    p.send = capture_send;
    eng = p2p_engine_create(&p);
    CHECK(eng != NULL);
    memset(pkt, 0xab, sizeof(pkt));

    /* Wrong key, wrong group, wrong source, our own rank, bad rank. */
    h.mac = 78;
    wire_pack(&h, pkt);
    feed(eng, 11, pkt, sizeof(pkt), 0);
    h.mac = 77;
    h.group = 6;
    wire_pack(&h, pkt);
    feed(eng, 11, pkt, sizeof(pkt), 0);
    h.group = 5;
    wire_pack(&h, pkt);
    feed(eng, 12, pkt, sizeof(pkt), 0);
    h.child = 0;
    wire_pack(&h, pkt);
    feed(eng, 10, pkt, sizeof(pkt), 0);
    h.child = 9;
    wire_pack(&h, pkt);
    feed(eng, 11, pkt, sizeof(pkt), 0);
    /* Truncated. */
    h.child = 1;
    wire_pack(&h, pkt);
    feed(eng, 11, pkt, sizeof(pkt) - 1, 0);
    feed(eng, 11, pkt, 10, 0);
    CHECK_EQ_INT(p2p_engine_counters(eng)->dropped, 7);
    CHECK_EQ_INT(p2p_engine_counters(eng)->bad_mac, 1); /* the wrong key */
    CHECK_EQ_INT(send_count, 0);

    /* A block from a peer ahead of us (idle engine): kept and acked. */
    h.offset = 0;
    h.total = 64;
    wire_pack(&h, pkt);
    feed(eng, 11, pkt, sizeof(pkt), 0);
    CHECK_EQ_INT(send_count, 1);
    CHECK_EQ_INT(p2p_engine_counters(eng)->early, 1);
    CHECK(wire_parse(last_sent, WIRE_HDR_LEN, &r, NULL) == INCOLL_OK);
    CHECK(r.flags & WIRE_F_P2P_DONE);
    /* A huge block announced early is not allocated for: refused. */
    h.child = 2;
    h.total = 1u << 30;
    h.count = 64;
    wire_pack(&h, pkt);
    feed(eng, 12, pkt, sizeof(pkt), 0);
    CHECK_EQ_INT(p2p_engine_counters(eng)->refused, 1);
    CHECK_EQ_INT(send_count, 2);
    CHECK(wire_parse(last_sent, WIRE_HDR_LEN, &r, NULL) == INCOLL_OK);
    CHECK(r.flags & WIRE_F_P2P_BEHIND);
    h.child = 1;
    h.total = 64;

    /* Blocks further ahead are kept while slots are spare (one always
     * stays free for the current step); then answered with BEHIND. */
    {
        uint32_t e;
        for (e = 1; e < 40; e++) {
            h.epoch = e;
            wire_pack(&h, pkt);
            feed(eng, 11, pkt, sizeof(pkt), 0);
            CHECK(wire_parse(last_sent, WIRE_HDR_LEN, &r, NULL) == INCOLL_OK);
            CHECK_EQ_INT(r.type, WIRE_P2P_ACK);
            CHECK_EQ_INT(r.epoch, e);
            CHECK_EQ_INT(r.child, 0);
            if (r.flags & WIRE_F_P2P_BEHIND)
                break;
            CHECK(r.flags & WIRE_F_P2P_DONE);
        }
        CHECK(e >= 8 && e < 40);
        CHECK_EQ_INT(p2p_engine_counters(eng)->early, e);
        CHECK_EQ_INT(p2p_engine_counters(eng)->refused, 2);
        send_count = 3;
    }

    /* An old step (epoch before 0 in serial arithmetic): DONE. */
    h.epoch = 0xffffffffu;
    wire_pack(&h, pkt);
    feed(eng, 11, pkt, sizeof(pkt), 0);
    CHECK_EQ_INT(send_count, 4);
    CHECK(wire_parse(last_sent, WIRE_HDR_LEN, &r, NULL) == INCOLL_OK);
    CHECK(r.flags & WIRE_F_P2P_DONE);

    /* Acks with an oversize bitmap are dropped. */
    {
        uint8_t big[WIRE_HDR_LEN + P2P_WINDOW_MAX];
        wire_hdr_t a = {.version = WIRE_VERSION,
                        .type = WIRE_P2P_ACK,
                        .group = 5,
                        .mac = 77,
                        .child = 1,
                        .count = P2P_WINDOW_MAX};
        memset(big, 0xff, sizeof(big));
        wire_pack(&a, big);
        dropped = p2p_engine_counters(eng)->dropped;
        feed(eng, 11, big, sizeof(big), 0);
        CHECK_EQ_INT(p2p_engine_counters(eng)->dropped, dropped + 1);
        /* A probe for a step we have not reached: BEHIND. */
        a.count = 0;
        a.flags = WIRE_F_P2P_PROBE;
        a.epoch = 1;
        wire_pack(&a, big);
        feed(eng, 11, big, WIRE_HDR_LEN, 0);
        CHECK_EQ_INT(send_count, 5);
        CHECK(wire_parse(last_sent, WIRE_HDR_LEN, &r, NULL) == INCOLL_OK);
        CHECK(r.flags & WIRE_F_P2P_BEHIND);
    }
    p2p_engine_destroy(eng);

    /* During an operation (2 ranks, one step of 4 packets of 64 bytes):
     * a packet off the packet grid is dropped, a duplicate is acked again,
     * the step ends when every packet is in and our own block is acked. */
    {
        uint64_t work[32], peer[32];
        int sent0;
        p.size = 2;
        p.max_payload = 64;
        eng = p2p_engine_create(&p);
        CHECK(eng != NULL);
        for (int i = 0; i < 32; i++) {
            work[i] = (uint64_t)i;
            peer[i] = 1000 + (uint64_t)i;
        }
        sent0 = send_count;
        CHECK_EQ_INT(p2p_engine_allreduce(eng, ALGO_RD, work, 32, INCOLL_UINT64,
                                          INCOLL_OP_SUM, 0),
                     INCOLL_INPROGRESS);
        CHECK_EQ_INT(send_count - sent0, 4);
        CHECK_EQ_INT(p2p_engine_counters(eng)->packets_sent, 4);
        h = (wire_hdr_t){.version = WIRE_VERSION,
                         .type = WIRE_P2P_DATA,
                         .group = 5,
                         .mac = 77,
                         .child = 1,
                         .epoch = 0,
                         .count = 64,
                         .total = 256,
                         .offset = 3};
        /* The peer's call is ours: what our own data packets say. */
        CHECK(wire_parse(last_sent, WIRE_HDR_LEN + 64, &r, NULL) == INCOLL_OK);
        CHECK_EQ_INT(r.type, WIRE_P2P_DATA);
        h.op = r.op;
        h.dtype = r.dtype;
        h.root = r.root;
        h.call_hash = r.call_hash;
        wire_pack(&h, pkt);
        memcpy(pkt + WIRE_HDR_LEN, peer, 64);
        dropped = p2p_engine_counters(eng)->dropped;
        feed(eng, 11, pkt, sizeof(pkt), 1);
        CHECK_EQ_INT(p2p_engine_counters(eng)->dropped, dropped + 1);
        for (int k = 0; k < 5; k++) {
            static const int order[5] = {1, 1, 3, 0, 2};
            h.offset = (uint64_t)order[k] * 64;
            wire_pack(&h, pkt);
            memcpy(pkt + WIRE_HDR_LEN, (uint8_t *)peer + h.offset, 64);
            feed(eng, 11, pkt, sizeof(pkt), 2);
        }
        CHECK_EQ_INT(p2p_engine_counters(eng)->duplicates, 1);
        CHECK_EQ_INT(p2p_engine_counters(eng)->data_received, 4);
        /* The last ack says DONE. */
        CHECK(wire_parse(last_sent, WIRE_HDR_LEN, &r, NULL) == INCOLL_OK);
        CHECK_EQ_INT(r.type, WIRE_P2P_ACK);
        CHECK(r.flags & WIRE_F_P2P_DONE);
        /* Our block is not acked yet: still running, result not applied. */
        CHECK_EQ_INT(p2p_engine_status(eng), INCOLL_INPROGRESS);
        CHECK_EQ_INT(work[5], 5);
        /* A selective ack of packets 0 and 2, then a cumulative one. */
        {
            uint8_t ack[WIRE_HDR_LEN + 1];
            wire_hdr_t a = {.version = WIRE_VERSION,
                            .type = WIRE_P2P_ACK,
                            .group = 5,
                            .mac = 77,
                            .child = 1,
                            .epoch = 0,
                            .count = 1,
                            .offset = 0};
            wire_pack(&a, ack);
            ack[WIRE_HDR_LEN] = 0x5; /* packets 0 and 2 */
            feed(eng, 11, ack, sizeof(ack), 3);
            CHECK_EQ_INT(p2p_engine_status(eng), INCOLL_INPROGRESS);
            a.offset = 4;
            a.count = 0;
            wire_pack(&a, ack);
            feed(eng, 11, ack, WIRE_HDR_LEN, 4);
        }
        CHECK_EQ_INT(p2p_engine_status(eng), INCOLL_OK);
        for (int i = 0; i < 32; i++)
            CHECK_EQ_INT(work[i], 1000 + 2 * i);
        /* Data of the completed step again: re-acked with DONE. */
        feed(eng, 11, pkt, sizeof(pkt), 5);
        CHECK_EQ_INT(p2p_engine_counters(eng)->stale, 1);
        CHECK(wire_parse(last_sent, WIRE_HDR_LEN, &r, NULL) == INCOLL_OK);
        CHECK(r.flags & WIRE_F_P2P_DONE);
        CHECK_EQ_INT(r.epoch, 0);
        p2p_engine_destroy(eng);
    }
    return TEST_PASSED;
}

/* Two ranks and one step, packet by packet: the receiver places data at its
 * offset, acks selectively, dedups, and the sender stops at the window and
 * fast-retransmits a hole. */
TEST(p2p_window_and_sack, TEST_UNIT)
{
    sim_cfg_t cfg;
    sim_op_t op = {ALGO_RD, 64 * 40, INCOLL_UINT64, INCOLL_OP_SUM};
    p2p_engine_counters_t sum;
    sim_cfg_default(&cfg);
    cfg.payload = 64;
    cfg.window = 32;
    cfg.drop = 0.1;
    memset(&sum, 0, sizeof(sum));
    for (uint64_t seed = 1; seed <= 3 * P2P_TEST_SEEDS; seed++) {
        cfg.seed = seed;
        CHECK(run_ops(&cfg, 2, &op, 1, 600ull * 1000000000, &sum));
    }
    CHECK(sum.fast_retransmits > 0);
    /* Acks are batched: fewer than one per data packet. */
    CHECK(sum.acks_sent < sum.packets_sent);
    return TEST_PASSED;
}

/* A slow link: each rank's packets queue behind each other, so the acks of
 * a window come long after the packets were sent, but steadily (one ack of
 * 8 packets every 8 ms, under the 10 ms timeout, for transfers of 256 ms
 * and more). Nothing is resent and nothing times out; with some loss on
 * top, the operations still complete. */
TEST(p2p_slow_link_no_retransmit, TEST_UNIT)
{
    static const struct {
        int n;
        algo_kind_t kind;
    } cases[] = {{2, ALGO_RD}, {4, ALGO_RING}, {4, ALGO_RABENSEIFNER}};
    sim_cfg_t cfg;

    sim_cfg_default(&cfg);
    cfg.payload = 1024;
    cfg.window = 64;
    cfg.jitter_ns = 0;
    cfg.link_ns = 1000000;
    cfg.rto_ns = 10000000;
    cfg.progress_timeout_ns = 50000000;
    cfg.max_retries = 3;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sim_op_t op = {cases[i].kind, 32768 * (size_t)cases[i].n / 2,
                       INCOLL_UINT64, INCOLL_OP_SUM};
        p2p_engine_counters_t sum;
        memset(&sum, 0, sizeof(sum));
        CHECK_MSG(run_ops(&cfg, cases[i].n, &op, 1, 60ull * 1000000000, &sum),
                  "%s over %d ranks", algo_name(cases[i].kind), cases[i].n);
        CHECK_MSG(sum.retransmits == 0 && sum.fast_retransmits == 0,
                  "%s over %d ranks: %llu + %llu fast retransmissions of %llu "
                  "packets on a link that loses nothing",
                  algo_name(cases[i].kind), cases[i].n,
                  (unsigned long long)sum.retransmits,
                  (unsigned long long)sum.fast_retransmits,
                  (unsigned long long)sum.packets_sent);
    }
    /* Loss on the slow link: recovered, by fast retransmission mostly. */
    cfg.drop = 0.02;
    cfg.max_retries = 12;
    cfg.progress_timeout_ns = 3000000000ull;
    for (uint64_t seed = 1; seed <= P2P_TEST_SEEDS; seed++) {
        sim_op_t op = {kinds[seed % 3], 16384, INCOLL_UINT64, INCOLL_OP_SUM};
        p2p_engine_counters_t sum;
        memset(&sum, 0, sizeof(sum));
        cfg.seed = seed;
        CHECK_MSG(run_ops(&cfg, 3, &op, 1, 600ull * 1000000000, &sum),
                  "seed %llu", (unsigned long long)seed);
        CHECK(sum.retransmits + sum.fast_retransmits > 0);
    }
    return TEST_PASSED;
}

/* A slow link and a peer that comes late: its partner's block queues on
 * the link, its first packet is resent on a timeout while only queued,
 * and the peer's ack of the first transmission comes with the packets
 * queued behind it still on their way. The ack says they all came in
 * their first transmission (WIRE_F_P2P_FIRST), so nothing behind the
 * resent packet is taken for a hole: no fast retransmission, and the
 * timeout's resend is counted needless. Taken for the resend's ack, it
 * made every packet queued behind a hole and resent them all into the
 * same queue, where they outlived the operation. */
TEST(p2p_slow_link_resend_acked_first, TEST_UNIT)
{
    sim_op_t op = {ALGO_RD, 2048, INCOLL_UINT64, INCOLL_OP_SUM};
    p2p_engine_counters_t sum;
    sim_cfg_t cfg;
    sim_t *s;

    sim_cfg_default(&cfg);
    cfg.payload = 1024; /* 16 packets a block */
    cfg.window = 64;
    cfg.jitter_ns = 0;
    cfg.link_ns = 1000000; /* 1 ms a packet */
    cfg.rto_ns = 3000000;  /* shorter than the block's 16 ms on the link */
    s = sim_create(&cfg, 2, &op, 1);
    CHECK(s != NULL);
    s->r[1].start_ns = 5000000; /* rank 0's packets 0-3 wait for it */
    CHECK(sim_run(s, 10ull * 1000000000) == 0);
    CHECK(all_ok(s));
    memset(&sum, 0, sizeof(sum));
    for (int i = 0; i < 2; i++) {
        const p2p_engine_counters_t *c = p2p_engine_counters(s->r[i].eng);
        sum.packets_sent += c->packets_sent;
        sum.retransmits += c->retransmits;
        sum.fast_retransmits += c->fast_retransmits;
        sum.needless += c->needless;
    }
    sim_destroy(s);
    printf("    packets %llu, retransmits %llu timeout + %llu fast, %llu "
           "needless\n",
           (unsigned long long)sum.packets_sent,
           (unsigned long long)sum.retransmits,
           (unsigned long long)sum.fast_retransmits,
           (unsigned long long)sum.needless);
    CHECK(sum.retransmits > 0); /* the timeout fired on a queued packet */
    CHECK_MSG(sum.fast_retransmits == 0,
              "%llu fast retransmissions on a link that loses nothing",
              (unsigned long long)sum.fast_retransmits);
    CHECK(sum.needless > 0);
    CHECK(sum.packets_sent == 32 + sum.retransmits);
    return TEST_PASSED;
}

/* Loss in bursts (a queue toward a rank overflowing under incast drops a
 * run of packets): every algorithm still gives each rank the exact result
 * once, bitwise the same on every rank, and the holes the bursts leave
 * are resent from selective acks, not only on timeouts. */
TEST(p2p_allreduce_burst_loss, TEST_UNIT)
{
    p2p_engine_counters_t sum;
    memset(&sum, 0, sizeof(sum));
    for (uint64_t seed = 1; seed <= 3; seed++) {
        int n = seed == 2 ? 5 : 8;
        sim_cfg_t cfg;
        sim_op_t ops[9];
        int nops = 0;
        sim_cfg_default(&cfg);
        cfg.seed = 7000 + seed;
        cfg.drop = 0.05;
        cfg.burst = 4;
        cfg.jitter_ns = 5000;
        cfg.payload = 256;
        cfg.window = 32;
        for (int k = 0; k < 3; k++) {
            ops[nops++] = (sim_op_t){kinds[k], 1, INCOLL_UINT64, INCOLL_OP_SUM};
            ops[nops++] =
                (sim_op_t){kinds[k], 4000, INCOLL_UINT64, INCOLL_OP_SUM};
            ops[nops++] =
                (sim_op_t){kinds[k], 3001, INCOLL_FLOAT64, INCOLL_OP_SUM};
        }
        CHECK_MSG(run_ops(&cfg, n, ops, nops, 600ull * 1000000000, &sum),
                  "size %d seed %llu", n, (unsigned long long)cfg.seed);
    }
    printf("    packets %llu, retransmits %llu timeout + %llu fast\n",
           (unsigned long long)sum.packets_sent,
           (unsigned long long)sum.retransmits,
           (unsigned long long)sum.fast_retransmits);
    CHECK(sum.fast_retransmits > 0);
    return TEST_PASSED;
}
