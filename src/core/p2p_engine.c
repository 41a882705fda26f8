/*
 * Point-to-point engine of the host-based algorithms: see p2p_engine.h.
 *
 * Blocks are numbered per (sender, receiver) pair: the n-th block rank a
 * sends to rank b is transfer n of that pair. Both ends count alike because
 * schedules pair every send with the peer's receive, in order; the numbers
 * advance only on real transfers, so ranks racing through empty steps do
 * not look further ahead than they are. tx_next[p] is the number of the
 * next (or current) block to p, rx_next[q] that of the next block from q.
 *
 * Receive slots form a small pool: the current step's block and blocks
 * that peers sent early (a peer finished the steps before and we acked
 * them). One slot always stays free for the current step, so early data
 * can never starve it. Data that cannot be
 * kept is answered with BEHIND (the peer keeps waiting) and asked for
 * again with a probe as soon as it can be kept.
 *
 * A received block lands in a staging buffer and is reduced into the
 * working buffer when the step completes (its own send block may overlap,
 * and must stay intact for retransmissions until the peer acked it); a copy
 * step's block goes straight into the working buffer (algo.h guarantees it
 * does not overlap the send block). Buffers grow when a larger block comes
 * (never per packet in the steady state).
 *
 * The retransmission clock restarts on progress: a packet is resent on a
 * timeout only when both its own timeout (with backoff) and one timeout
 * since the last ack that acked something new of the transfer have passed.
 * On a slow link packets queue behind each other and their acks come long
 * after they were sent, but steadily; resending them would only lengthen
 * the queue. A hole that later packets' acks reveal is still resent at
 * once (RACK, in on_ack), and a silent peer still gets retransmissions.
 */
#include "core/p2p_engine.h"

#include "common/dtype.h"
#include "common/log.h"
#include "common/settings.h"
#include "core/rto.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define ACK_BYTES_MAX (P2P_WINDOW_MAX / 8)
#define FAST_RETRANS_THRESH 3 /* later transmissions acked before a hole */
#define REFUSED_MAX 8         /* (peer, transfer) pairs to probe later */
#define NSLOTS 16             /* receive slots: current block + early ones */
/* Staging early blocks may take this much. */
#define EARLY_MIN_BYTES (4u << 20)
#define APPLY_CHUNK_BYTES 16384 /* stays in L1 between reduce and copy */
#define FINAL_MAX 64            /* peers whose last block we re-ack */
/* An exchange partner whose whole block of the step we hold and that
 * stays silent through this many retransmissions of ours (the default
 * INCOLL_RETRIES: about 1.8 s) has our block
 * (only_ack_missing): waiting for all of max_retries, which a manager
 * stretches to its operation timeout, would hold every rank that waits on
 * us meanwhile. */
#define PARTNER_SILENT_RETRIES 12

enum { SLOT_FREE = 0, SLOT_EARLY = 1, SLOT_ACTIVE = 2 };

typedef struct {
    uint64_t sent_ns;  /* last transmission */
    uint64_t first_ns; /* first transmission */
    uint64_t deadline; /* retransmission due */
    uint64_t tx;       /* engine-wide transmission number of the last send */
    uint64_t first_tx; /* ... and of the first */
    uint32_t retries;  /* silent retransmissions (drives the backoff) */
    uint8_t acked;
    uint8_t lost;     /* judged lost by RACK once its deadline passes */
    uint64_t fast_ns; /* last fast retransmission, 0 if none */
} pkt_t;

/* What a data packet says of the sender's call (wire_hdr_t: op, dtype,
 * root and call_hash of P2P_DATA): every member's must be the same. The
 * hash holds 8 bits of the schedule's (collective, algorithm) above 8 of
 * the count in each 16-bit half (SIG_KIND, SIG_SIZE), so that a
 * difference tells which of the two differs. */
typedef struct {
    uint8_t op, dtype;
    uint32_t root, hash;
} call_sig_t;

#define SIG_KIND 0xff00ff00u
#define SIG_SIZE 0x00ff00ffu

typedef struct {
    int state;
    uint64_t t;     /* transfer number from peer */
    int peer;       /* the sending rank */
    call_sig_t sig; /* the sender's call, from its first packet */
    uint32_t total; /* block bytes as announced (low 32 bits) */
    size_t bytes;   /* block bytes */
    size_t npkts;
    size_t nrecv;      /* packets stored */
    size_t cum;        /* packets 0..cum-1 all stored */
    size_t hi;         /* one past the highest packet stored */
    uint32_t unacked;  /* packets stored since the last ack */
    uint8_t resent_in; /* a packet was stored from a retransmission: acks
                        * no longer say WIRE_F_P2P_FIRST */
    uint8_t *buf;      /* staging, cap bytes */
    uint64_t *bits;    /* cap_pkts bits */
    size_t cap;
    size_t cap_pkts;
    uint8_t *dst; /* ACTIVE: where packets go (buf or working buffer) */
} rslot_t;

struct p2p_engine {
    p2p_engine_params_t p;
    incoll_ep_t *peers;

    /* The running operation. */
    const char *name; /* its algorithm, for messages */
    algo_step_t *steps;
    int steps_cap;
    int nsteps;
    int idx; /* current step index */
    uint8_t *work;
    size_t count;
    incoll_dtype_t dtype;
    incoll_op_t op;
    size_t dsize;
    int running;
    int failed; /* the ranks are out of step: no more operations */
    incoll_status_t status;
    call_sig_t sig;    /* the running operation's call (call_sig_t) */
    uint32_t next_tag; /* p2p_engine_set_tag */
    unsigned mismatch; /* why the last operation failed with
                          INCOLL_ERR_MISMATCH (wire_mismatch_t) */
    uint64_t *tx_next; /* per peer: number of the next block we send it */
    uint64_t *rx_next; /* per peer: number of the next block it sends us */
    uint64_t last_progress_ns;
    uint64_t next_probe_ns;
    uint64_t last_rx_ns; /* last data or probe: a peer wanted something */

    /* The last block received from each peer in the last operation: the
     * only acks a peer may still be waiting for once we are done. */
    struct {
        int peer;
        uint64_t t;
    } final[FINAL_MAX];
    int nfinal;
    uint64_t linger_start_ns; /* 0: not lingering */
    uint64_t linger_next_ns;
    uint64_t linger_gap_ns;

    /* Send side of the current step. */
    int send_peer; /* -1: nothing to send */
    const uint8_t *send_buf;
    size_t send_bytes;
    size_t send_npkts;
    size_t low;           /* first packet not acked */
    size_t next;          /* next packet never sent */
    uint64_t last_ack_ns; /* last ack of something new (or the send start) */
    pkt_t *win;           /* p.window entries */
    uint64_t tx_seq;
    uint64_t max_acked_tx;
    uint64_t max_acked_sent_ns; /* latest send time of a packet acked */
    uint64_t partner_ns;        /* the step's partner sent its whole block (0:
                                   not yet): it is in the step from then on */
    uint32_t partner_tx;        /* our timeout retransmissions since then */

    /* Receive side. */
    rslot_t slot[NSLOTS];
    rslot_t *rslot;   /* the current step's, NULL if it receives nothing */
    size_t max_block; /* largest block received so far */
    struct {
        int peer;
        uint64_t t;
    } refused[REFUSED_MAX];
    int nrefused;

    rto_t rto; /* retransmission timer (core/rto.h) */
    /* RACK's reordering window in quarter RTTs: grows on spurious fast
     * retransmissions, shrinks back after 64 calm steps. */
    uint32_t reo_mult;
    uint32_t reo_calm;

    p2p_engine_counters_t ctr;
};

void p2p_engine_params_default(p2p_engine_params_t *p)
{
    rto_defaults_t d = rto_defaults();
    p->rto_init_ns = d.init_ns;
    p->rto_min_ns = d.min_ns;
    p->rto_max_ns = d.max_ns;
    p->max_retries = d.retries;
    p->progress_timeout_ns = d.timeout_ns;
}

p2p_engine_t *p2p_engine_create(const p2p_engine_params_t *params)
{
    p2p_engine_t *eng;

    if (params->size < 1 || params->size > P2P_MAX_RANKS || params->rank < 0 ||
        params->rank >= params->size || params->peers == NULL ||
        params->max_payload < 8 || params->max_payload > WIRE_MAX_PAYLOAD ||
        params->window > P2P_WINDOW_MAX || params->send == NULL ||
        params->rto_min_ns == 0 || params->rto_max_ns < params->rto_min_ns)
        return NULL;
    eng = calloc(1, sizeof(*eng));
    if (eng == NULL)
        return NULL;
    eng->p = *params;
    if (eng->p.window == 0)
        eng->p.window = (uint32_t)setting_default(SETTING_P2P_WINDOW).i;
    if (eng->p.ack_every == 0)
        eng->p.ack_every = eng->p.window / 8 ? eng->p.window / 8 : 1;
    if (eng->p.max_retries < 1)
        eng->p.max_retries = 1;
    eng->p.peers = NULL;
    eng->peers = malloc((size_t)params->size * sizeof(*eng->peers));
    eng->win = calloc(eng->p.window, sizeof(*eng->win));
    eng->tx_next = calloc((size_t)params->size, sizeof(*eng->tx_next));
    eng->rx_next = calloc((size_t)params->size, sizeof(*eng->rx_next));
    if (eng->peers == NULL || eng->win == NULL || eng->tx_next == NULL ||
        eng->rx_next == NULL) {
        p2p_engine_destroy(eng);
        return NULL;
    }
    memcpy(eng->peers, params->peers,
           (size_t)params->size * sizeof(*eng->peers));
    rto_init(&eng->rto, params->rto_init_ns, params->rto_min_ns,
             params->rto_max_ns);
    eng->reo_mult = 1;
    eng->status = INCOLL_OK;
    eng->send_peer = -1;
    return eng;
}

void p2p_engine_destroy(p2p_engine_t *eng)
{
    if (eng == NULL)
        return;
    for (int i = 0; i < NSLOTS; i++) {
        free(eng->slot[i].buf);
        free(eng->slot[i].bits);
    }
    free(eng->tx_next);
    free(eng->rx_next);
    free(eng->steps);
    free(eng->win);
    free(eng->peers);
    free(eng);
}

const p2p_engine_counters_t *p2p_engine_counters(const p2p_engine_t *eng)
{
    return &eng->ctr;
}

incoll_status_t p2p_engine_status(const p2p_engine_t *eng)
{
    return eng->status;
}

/* ---- bitmaps ---- */

static int bit_get(const uint64_t *b, size_t i)
{
    return (int)((b[i / 64] >> (i % 64)) & 1);
}

static void bit_set(uint64_t *b, size_t i)
{
    b[i / 64] |= (uint64_t)1 << (i % 64);
}

/* Clears bits [from, to). */
static void bits_clear(uint64_t *b, size_t from, size_t to)
{
    while (from < to && from % 64) {
        b[from / 64] &= ~((uint64_t)1 << (from % 64));
        from++;
    }
    if (from < to) {
        size_t words = (to - from) / 64;
        memset(&b[from / 64], 0, words * sizeof(*b));
        from += words * 64;
    }
    while (from < to) {
        b[from / 64] &= ~((uint64_t)1 << (from % 64));
        from++;
    }
}

static size_t npkts_of(const p2p_engine_t *eng, size_t bytes)
{
    return (bytes + eng->p.max_payload - 1) / eng->p.max_payload;
}

static size_t pkt_len(size_t stride, size_t bytes, size_t i)
{
    size_t off = i * stride;
    return bytes - off < stride ? bytes - off : stride;
}

/* ---- sending ---- */

static void send_pkt(p2p_engine_t *eng, const wire_hdr_t *h,
                     const void *payload, size_t len, int peer)
{
    uint8_t hdr[WIRE_HDR_LEN];
    wire_pack(h, hdr);
    wire_mac_seal(&eng->p.key, hdr, payload, len);
    eng->p.send(eng->p.send_arg, eng->peers[peer], hdr, payload, len);
}

static void emit_ack(p2p_engine_t *eng, int peer, uint32_t epoch,
                     uint16_t flags, size_t cum, const uint8_t *bitmap,
                     size_t nbytes)
{
    wire_hdr_t h = {
        .version = WIRE_VERSION,
        .type = WIRE_P2P_ACK,
        .op = INCOLL_OP_SUM,
        .dtype = INCOLL_UINT8,
        .group = eng->p.group,
        .child = (uint16_t)eng->p.rank,
        .flags = flags,
        .epoch = epoch,
        .count = (uint32_t)nbytes,
        .offset = cum,
    };
    eng->ctr.acks_sent++;
    send_pkt(eng, &h, bitmap, nbytes, peer);
}

/* Acks what slot s holds: DONE when complete, else cumulative + bitmap;
 * FIRST while every packet of the block came in its first transmission. */
static void send_ack(p2p_engine_t *eng, rslot_t *s, uint16_t flags)
{
    uint8_t bm[ACK_BYTES_MAX];
    size_t nbits = 0, nbytes;

    s->unacked = 0;
    if (!s->resent_in)
        flags |= WIRE_F_P2P_FIRST;
    if (s->nrecv == s->npkts) {
        emit_ack(eng, s->peer, (uint32_t)s->t, flags | WIRE_F_P2P_DONE,
                 s->npkts, NULL, 0);
        return;
    }
    if (s->hi > s->cum)
        nbits = s->hi - s->cum;
    if (nbits > ACK_BYTES_MAX * 8)
        nbits = ACK_BYTES_MAX * 8;
    nbytes = (nbits + 7) / 8;
    memset(bm, 0, nbytes);
    for (size_t b = 0; b < nbits; b++)
        if (bit_get(s->bits, s->cum + b))
            bm[b / 8] |= (uint8_t)(1u << (b % 8));
    emit_ack(eng, s->peer, (uint32_t)s->t, flags, s->cum, bm, nbytes);
}

static void send_data(p2p_engine_t *eng, size_t i, uint64_t now, int retrans)
{
    pkt_t *pk = &eng->win[i % eng->p.window];
    size_t stride = eng->p.max_payload;
    size_t n = pkt_len(stride, eng->send_bytes, i);
    wire_hdr_t h = {
        .version = WIRE_VERSION,
        .type = WIRE_P2P_DATA,
        .op = eng->sig.op,
        .dtype = eng->sig.dtype,
        .group = eng->p.group,
        .child = (uint16_t)eng->p.rank,
        .flags = (uint16_t)((retrans ? WIRE_F_RETRANS : 0) |
                            (i + 1 == eng->send_npkts ? WIRE_F_LAST : 0)),
        .root = eng->sig.root,
        .call_hash = eng->sig.hash,
        .epoch = (uint32_t)eng->tx_next[eng->send_peer],
        .count = (uint32_t)n,
        .total = (uint32_t)eng->send_bytes,
        .offset = (uint64_t)i * stride,
    };

    pk->sent_ns = now;
    pk->tx = ++eng->tx_seq;
    pk->deadline = now + rto_backoff(&eng->rto, pk->retries);
    eng->ctr.packets_sent++;
    eng->ctr.bytes_sent += n;
    send_pkt(eng, &h, eng->send_buf + (size_t)i * stride, n, eng->send_peer);
}

static void fill_window(p2p_engine_t *eng, uint64_t now)
{
    while (eng->next < eng->send_npkts &&
           eng->next < eng->low + eng->p.window) {
        pkt_t *pk = &eng->win[eng->next % eng->p.window];
        pk->acked = 0;
        pk->lost = 0;
        pk->fast_ns = 0;
        pk->retries = 0;
        pk->first_ns = now;
        send_data(eng, eng->next, now, 0);
        pk->first_tx = pk->tx;
        eng->next++;
    }
}

/* ---- receive slots ---- */

/* Grows slot s to hold a block of bytes, keeping what it holds (a peer's
 * early data). The slow path: once per size. */
static incoll_status_t slot_grow(p2p_engine_t *eng, rslot_t *s, size_t bytes)
{
    size_t words = (npkts_of(eng, bytes) + 63) / 64, old = s->cap_pkts / 64;

    if (bytes > s->cap) {
        uint8_t *b = realloc(s->buf, bytes);
        if (b == NULL)
            return INCOLL_ERR_NO_MEMORY;
        s->buf = b;
        s->cap = bytes;
    }
    if (words > old) {
        uint64_t *w = realloc(s->bits, words * sizeof(*w));
        if (w == NULL)
            return INCOLL_ERR_NO_MEMORY;
        memset(w + old, 0, (words - old) * sizeof(*w));
        s->bits = w;
        s->cap_pkts = words * 64;
    }
    return INCOLL_OK;
}

static rslot_t *slot_find(p2p_engine_t *eng, int peer, uint64_t t)
{
    for (int i = 0; i < NSLOTS; i++) {
        rslot_t *s = &eng->slot[i];
        if (s->state != SLOT_FREE && s->peer == peer && s->t == t)
            return s;
    }
    return NULL;
}

static int slots_free(const p2p_engine_t *eng)
{
    int n = 0;
    for (int i = 0; i < NSLOTS; i++)
        n += eng->slot[i].state == SLOT_FREE;
    return n;
}

/* A free slot able to hold bytes (growing the largest one if none is), or
 * NULL. Early data must leave one slot free for the current step, and may
 * grow the staging buffers only up to 4 blocks as large as any this engine
 * received so far (at least EARLY_MIN_BYTES in all): a peer's word alone
 * does not make us allocate, and a block we refuse comes again once our
 * own schedule asks for it. */
static rslot_t *slot_take(p2p_engine_t *eng, size_t bytes, int early)
{
    rslot_t *best = NULL;
    size_t caps = 0, budget = 4 * eng->max_block;

    if (slots_free(eng) < (early ? 2 : 1))
        return NULL;
    for (int i = 0; i < NSLOTS; i++) {
        rslot_t *s = &eng->slot[i];
        caps += s->cap;
        if (s->state != SLOT_FREE)
            continue;
        if (best == NULL || (best->cap < bytes && s->cap > best->cap) ||
            (s->cap >= bytes && s->cap < best->cap))
            best = s;
    }
    if (budget < EARLY_MIN_BYTES)
        budget = EARLY_MIN_BYTES;
    if (best == NULL ||
        (early && best->cap < bytes && caps + (bytes - best->cap) > budget) ||
        slot_grow(eng, best, bytes) != INCOLL_OK)
        return NULL;
    return best;
}

static void slot_init(p2p_engine_t *eng, rslot_t *s, int state, int peer,
                      uint64_t t, size_t bytes)
{
    s->state = state;
    s->peer = peer;
    s->t = t;
    s->total = (uint32_t)bytes;
    s->bytes = bytes;
    s->npkts = npkts_of(eng, bytes);
    s->nrecv = s->cum = s->hi = 0;
    s->unacked = 0;
    s->resent_in = 0;
    s->dst = s->buf;
    bits_clear(s->bits, 0, s->npkts);
}

static void remember_refused(p2p_engine_t *eng, int peer, uint64_t t)
{
    eng->ctr.refused++;
    for (int i = 0; i < eng->nrefused; i++)
        if (eng->refused[i].peer == peer && eng->refused[i].t == t)
            return;
    if (eng->nrefused == REFUSED_MAX) {
        memmove(&eng->refused[0], &eng->refused[1],
                (REFUSED_MAX - 1) * sizeof(eng->refused[0]));
        eng->nrefused--;
    }
    eng->refused[eng->nrefused].peer = peer;
    eng->refused[eng->nrefused].t = t;
    eng->nrefused++;
}

/* Asks peer to resend block t now (it may be waiting out a backoff). */
static void send_probe(p2p_engine_t *eng, int peer, uint64_t t)
{
    rslot_t *s = slot_find(eng, peer, t);
    eng->ctr.probes++;
    if (s != NULL)
        send_ack(eng, s, WIRE_F_P2P_PROBE);
    else
        emit_ack(eng, peer, (uint32_t)t, WIRE_F_P2P_PROBE, 0, NULL, 0);
}

/* Probes the peers whose data was refused and could now be kept. */
static void probe_refused(p2p_engine_t *eng)
{
    int j = 0;
    for (int i = 0; i < eng->nrefused; i++) {
        int peer = eng->refused[i].peer;
        uint64_t t = eng->refused[i].t;
        if (t < eng->rx_next[peer])
            continue;
        if (slot_find(eng, peer, t) != NULL || slots_free(eng) >= 2) {
            send_probe(eng, peer, t);
            continue;
        }
        eng->refused[j++] = eng->refused[i];
    }
    eng->nrefused = j;
}

/* ---- steps ---- */

static void send_final_acks(p2p_engine_t *eng)
{
    for (int i = 0; i < eng->nfinal; i++)
        emit_ack(eng, eng->final[i].peer, (uint32_t)eng->final[i].t,
                 WIRE_F_P2P_DONE, 0, NULL, 0);
}

/* Notes the last block received from each peer in the operation and acks
 * each once more: a peer that does not hear it would wait for us. Only
 * the last one is in doubt, because a peer sends us a block only after it
 * heard our ack of the one before. */
static void note_final_acks(p2p_engine_t *eng)
{
    eng->nfinal = 0;
    for (int i = eng->nsteps - 1; i >= 0 && eng->nfinal < FINAL_MAX; i--) {
        int peer = eng->steps[i].recv_peer, seen = 0;
        if (peer < 0)
            continue;
        for (int j = 0; j < eng->nfinal && !seen; j++)
            seen = eng->final[j].peer == peer;
        if (seen)
            continue;
        eng->final[eng->nfinal].peer = peer;
        eng->final[eng->nfinal].t = eng->rx_next[peer] - 1;
        eng->nfinal++;
    }
    send_final_acks(eng);
}

static void finish(p2p_engine_t *eng, incoll_status_t status)
{
    eng->running = 0;
    eng->status = status;
    eng->send_peer = -1;
    eng->work = NULL;
    if (status == INCOLL_OK) {
        eng->ctr.ops++;
        note_final_acks(eng);
        return;
    }
    eng->nfinal = 0;
    eng->mismatch = WIRE_MISMATCH_NONE;
    /* The ranks are out of step: forget partial receives. */
    eng->failed = 1;
    eng->rslot = NULL;
    for (int i = 0; i < NSLOTS; i++)
        eng->slot[i].state = SLOT_FREE;
}

static void fail_protocol(p2p_engine_t *eng, const char *fmt_why, int peer,
                          size_t got, size_t want)
{
    incoll_error("p2p: group %u %s step %d/%d: rank %d %s (%zu bytes, this "
                 "rank expects %zu): do all ranks call the same collective "
                 "with the same count, dtype and algorithm?",
                 eng->p.group, eng->name, eng->idx + 1, eng->nsteps, peer,
                 fmt_why, got, want);
    finish(eng, INCOLL_ERR_MISMATCH);
    eng->mismatch = WIRE_MISMATCH_SIZE;
}

/* Why call b (a peer's) is not call a (ours): the first field that
 * differs (wire_mismatch_t), or WIRE_MISMATCH_NONE. */
static unsigned sig_differs(const call_sig_t *a, const call_sig_t *b)
{
    if ((a->hash ^ b->hash) & SIG_KIND)
        return WIRE_MISMATCH_KIND; /* collective or algorithm */
    if ((a->hash ^ b->hash) & SIG_SIZE)
        return WIRE_MISMATCH_SIZE;
    if (a->op != b->op)
        return WIRE_MISMATCH_OP;
    if (a->dtype != b->dtype)
        return WIRE_MISMATCH_DTYPE;
    if (a->root != b->root)
        return WIRE_MISMATCH_ROOT;
    return WIRE_MISMATCH_NONE;
}

/* The peer's call differs from ours (why, wire_mismatch_t): the
 * operation fails with INCOLL_ERR_MISMATCH, its data never used. */
static void fail_mismatch(p2p_engine_t *eng, int peer, unsigned why,
                          const call_sig_t *theirs)
{
    incoll_error("p2p: group %u %s step %d/%d: rank %d called something else "
                 "(%s: op %d dtype %d root %u there, op %d dtype %d root %u "
                 "here): do all ranks call the same collective with the same "
                 "count, dtype, op and root?",
                 eng->p.group, eng->name, eng->idx + 1, eng->nsteps, peer,
                 wire_mismatch_str(why), theirs->op, theirs->dtype,
                 theirs->root, eng->sig.op, eng->sig.dtype, eng->sig.root);
    finish(eng, INCOLL_ERR_MISMATCH);
    eng->mismatch = why;
}

/* Folds the received block of a completed step into the working buffer. */
static void apply(p2p_engine_t *eng, const algo_step_t *st, rslot_t *s)
{
    size_t ds = eng->dsize, n = st->recv_count;
    uint8_t *w = eng->work + st->recv_off * ds, *in = s->buf;

    if (!st->recv_reduce) {
        if (s->dst != w)
            memcpy(w, in, n * ds);
        return;
    }
    if (st->recv_left) {
        /* reduce_n's dst may alias src[0] only: fold into the staging
         * block a chunk at a time, then copy the chunk while it is hot. */
        size_t chunk = APPLY_CHUNK_BYTES / ds ? APPLY_CHUNK_BYTES / ds : 1;
        for (size_t i = 0; i < n; i += chunk) {
            size_t c = n - i < chunk ? n - i : chunk;
            const void *src[2] = {in + i * ds, w + i * ds};
            reduce_n(eng->op, eng->dtype, in + i * ds, src, 2, c);
            memcpy(w + i * ds, in + i * ds, c * ds);
        }
    } else {
        const void *src[2] = {w, in};
        reduce_n(eng->op, eng->dtype, w, src, 2, n);
    }
}

/* Copies the packets an early slot already holds into its destination. */
static void copy_stored(p2p_engine_t *eng, rslot_t *s)
{
    size_t stride = eng->p.max_payload;
    for (size_t i = 0; i < s->npkts; i++)
        if (bit_get(s->bits, i))
            memcpy(s->dst + i * stride, s->buf + i * stride,
                   pkt_len(stride, s->bytes, i));
}

static uint64_t probe_interval(const p2p_engine_t *eng)
{
    uint64_t i = 4 * eng->rto.rto;
    return i > eng->p.rto_max_ns ? i : eng->p.rto_max_ns;
}

/* Starts step eng->idx: opens its receive (taking over early data) and
 * sends the first window. Returns 0, or -1 when the operation failed. */
static int start_step(p2p_engine_t *eng, uint64_t now)
{
    const algo_step_t *st = &eng->steps[eng->idx];

    eng->send_peer = -1;
    eng->rslot = NULL;
    eng->partner_ns = 0;
    eng->partner_tx = 0;
    if (st->recv_peer >= 0) {
        int q = st->recv_peer;
        uint64_t t = eng->rx_next[q];
        size_t bytes = st->recv_count * eng->dsize, npk = npkts_of(eng, bytes);
        rslot_t *s = slot_find(eng, q, t);
        if (bytes > eng->max_block)
            eng->max_block = bytes;
        if (s != NULL) {
            unsigned why = sig_differs(&eng->sig, &s->sig);
            if (why != WIRE_MISMATCH_NONE) {
                fail_mismatch(eng, q, why, &s->sig);
                return -1;
            }
            if (s->total != (uint32_t)bytes) {
                fail_protocol(eng, "sends a block of another size", q, s->total,
                              bytes);
                return -1;
            }
            if (slot_grow(eng, s, bytes) != INCOLL_OK)
                goto err_memory;
            if (npk > s->npkts)
                bits_clear(s->bits, s->npkts, npk); /* blocks over 4 GiB */
        } else {
            s = slot_take(eng, bytes, 0);
            if (s == NULL)
                goto err_memory;
            slot_init(eng, s, SLOT_ACTIVE, q, t, bytes);
            s->sig = eng->sig;
        }
        s->state = SLOT_ACTIVE;
        s->bytes = bytes;
        s->total = (uint32_t)bytes;
        s->npkts = npk;
        s->dst =
            st->recv_reduce ? s->buf : eng->work + st->recv_off * eng->dsize;
        if (s->dst != s->buf && s->nrecv)
            copy_stored(eng, s);
        eng->rslot = s;
        eng->next_probe_ns = now + probe_interval(eng);
    }
    if (st->send_peer >= 0) {
        eng->send_peer = st->send_peer;
        eng->send_buf = eng->work + st->send_off * eng->dsize;
        eng->send_bytes = st->send_count * eng->dsize;
        eng->send_npkts = npkts_of(eng, eng->send_bytes);
        eng->low = eng->next = 0;
        eng->max_acked_tx = eng->tx_seq;
        eng->max_acked_sent_ns = 0;
        eng->last_ack_ns = now;
        fill_window(eng, now);
    }
    eng->last_progress_ns = now;
    probe_refused(eng);
    return 0;

err_memory:
    incoll_error("p2p: group %u: cannot allocate %zu bytes to receive a block",
                 eng->p.group, st->recv_count * eng->dsize);
    finish(eng, INCOLL_ERR_NO_MEMORY);
    return -1;
}

static int step_complete(const p2p_engine_t *eng)
{
    if (eng->send_peer >= 0 && eng->low < eng->send_npkts)
        return 0;
    if (eng->rslot != NULL && eng->rslot->nrecv < eng->rslot->npkts)
        return 0;
    return 1;
}

/* Runs steps as long as they complete. */
static void advance(p2p_engine_t *eng, uint64_t now)
{
    while (eng->running && step_complete(eng)) {
        const algo_step_t *st = &eng->steps[eng->idx];
        if (eng->rslot != NULL) {
            apply(eng, st, eng->rslot);
            eng->rslot->state = SLOT_FREE;
            eng->rslot = NULL;
            eng->rx_next[st->recv_peer]++;
        }
        if (eng->send_peer >= 0)
            eng->tx_next[eng->send_peer]++;
        eng->send_peer = -1;
        eng->ctr.steps++;
        if (++eng->reo_calm >= 64 && eng->reo_mult > 1) {
            eng->reo_mult--;
            eng->reo_calm = 0;
        }
        eng->idx++;
        if (eng->idx == eng->nsteps) {
            finish(eng, INCOLL_OK);
            probe_refused(eng);
            return;
        }
        if (start_step(eng, now) != 0)
            return;
    }
}

/* Checks what every operation needs; INCOLL_OK to go on. */
static incoll_status_t check_start(const p2p_engine_t *eng, const void *work,
                                   size_t count, incoll_dtype_t dtype,
                                   incoll_op_t op)
{
    if (eng->running)
        return INCOLL_ERR_BUSY;
    if (eng->failed)
        return INCOLL_ERR_GROUP_FAILED;
    if ((unsigned)dtype >= INCOLL_DTYPE_COUNT ||
        (unsigned)op >= INCOLL_OP_COUNT || !incoll_op_valid(op, dtype) ||
        (work == NULL && count > 0) ||
        count > SIZE_MAX / incoll_dtype_size(dtype))
        return INCOLL_ERR_INVALID_ARG;
    return INCOLL_OK;
}

static incoll_status_t steps_reserve(p2p_engine_t *eng, int max)
{
    if (max > eng->steps_cap) {
        algo_step_t *s = realloc(eng->steps, (size_t)max * sizeof(*s));
        if (s == NULL)
            return INCOLL_ERR_NO_MEMORY;
        eng->steps = s;
        eng->steps_cap = max;
    }
    return INCOLL_OK;
}

/* The call an operation's packets carry: op and dtype, root, and a hash
 * of the schedule (tag: the algorithm; below 256 one to one) and of the
 * count (call_sig_t). */
static void sig_set(p2p_engine_t *eng, unsigned tag, uint32_t root,
                    size_t count, incoll_dtype_t dtype, incoll_op_t op)
{
    uint64_t c = (uint64_t)count * 0x9e3779b97f4a7c15ull;
    uint32_t t = ((tag & 0xffu) * 0x9du + 0x5bu) & 0xffu;
    uint32_t t2 = ((tag >> 8) * 0x9du + 0x5bu) & 0xffu;
    uint32_t k = (uint32_t)(c >> 56 ^ c >> 32 ^ c >> 8) & 0xffu;
    uint32_t k2 = (uint32_t)(c >> 48 ^ c >> 24 ^ c) & 0xffu;
    eng->sig.op = (uint8_t)op;
    eng->sig.dtype = (uint8_t)dtype;
    eng->sig.root = root;
    eng->sig.hash = t2 << 24 | k2 << 16 | t << 8 | k;
}

/* Runs the n steps in eng->steps. */
static incoll_status_t start_ops(p2p_engine_t *eng, const char *name, int n,
                                 void *work, size_t count, incoll_dtype_t dtype,
                                 incoll_op_t op, uint64_t now_ns)
{
    if (n == 0) {
        eng->status = INCOLL_OK;
        eng->ctr.ops++;
        return INCOLL_OK;
    }
    eng->name = name;
    eng->linger_start_ns = 0;
    eng->nsteps = n;
    eng->idx = 0;
    eng->work = work;
    eng->count = count;
    eng->dtype = dtype;
    eng->op = op;
    eng->dsize = incoll_dtype_size(dtype);
    eng->running = 1;
    eng->status = INCOLL_INPROGRESS;
    if (start_step(eng, now_ns) == 0)
        advance(eng, now_ns);
    return eng->status;
}

incoll_status_t p2p_engine_allreduce(p2p_engine_t *eng, algo_kind_t kind,
                                     void *work, size_t count,
                                     incoll_dtype_t dtype, incoll_op_t op,
                                     uint64_t now_ns)
{
    incoll_status_t status = check_start(eng, work, count, dtype, op);
    int max, n;

    if (status != INCOLL_OK)
        return status;
    if (kind != ALGO_RD && kind != ALGO_RING && kind != ALGO_RABENSEIFNER)
        return INCOLL_ERR_INVALID_ARG;
    if (eng->p.size == 1 || count == 0)
        return start_ops(eng, algo_name(kind), 0, work, count, dtype, op,
                         now_ns);
    max = algo_max_steps(kind, eng->p.size);
    status = steps_reserve(eng, max);
    if (status != INCOLL_OK)
        return status;
    n = algo_schedule(kind, eng->p.rank, eng->p.size, count, eng->steps, max);
    if (n <= 0)
        return INCOLL_ERR_INVALID_ARG;
    sig_set(eng, (unsigned)kind, eng->next_tag, count, dtype, op);
    eng->next_tag = 0;
    return start_ops(eng, algo_name(kind), n, work, count, dtype, op, now_ns);
}

incoll_status_t p2p_engine_coll(p2p_engine_t *eng, algo_calgo_t id, int root,
                                void *work, size_t count, size_t seg,
                                incoll_dtype_t dtype, incoll_op_t op,
                                uint64_t now_ns)
{
    const algo_calgo_info_t *info = algo_calgo_info(id);
    size_t wc;
    incoll_status_t status;
    int max, n;

    if (info == NULL || root < 0 || root >= eng->p.size ||
        !algo_calgo_fits(id, eng->p.size))
        return INCOLL_ERR_INVALID_ARG;
    wc = algo_coll_work_count(id, eng->p.size, count);
    if (count > SIZE_MAX / (size_t)eng->p.size)
        return INCOLL_ERR_INVALID_ARG;
    status = check_start(eng, work, wc, dtype, op);
    if (status != INCOLL_OK)
        return status;
    max = algo_coll_max_steps(id, eng->p.size, count, seg);
    status = steps_reserve(eng, max);
    if (status != INCOLL_OK)
        return status;
    n = algo_coll_schedule(id, eng->p.rank, eng->p.size, root, count, seg,
                           eng->steps, max);
    if (n < 0)
        return INCOLL_ERR_INVALID_ARG;
    sig_set(eng, 64u + (unsigned)id, root, count, dtype, op);
    return start_ops(eng, info->name, n, work, wc, dtype, op, now_ns);
}

/* ---- receiving ---- */

/*
 * The partner of an exchange step sent its whole block while ours is not
 * acked: it has reached the step now. What we sent before may have found
 * no one there (a late rank whose engine did not exist yet drops it), so
 * the silence that partner_has_ours() reads counts from now
 * (partner_ns), in retransmissions sent since (partner_tx).
 */
static void partner_arrived(p2p_engine_t *eng, uint64_t now)
{
    if (eng->partner_ns == 0) {
        eng->partner_ns = now ? now : 1;
        eng->partner_tx = 0;
    }
}

static void on_data(p2p_engine_t *eng, const wire_hdr_t *h,
                    const uint8_t *payload, uint64_t now)
{
    int peer = h->child;
    int32_t d = (int32_t)(h->epoch - (uint32_t)eng->rx_next[peer]);
    size_t stride = eng->p.max_payload, idx;
    call_sig_t sig = {h->op, h->dtype, h->root, h->call_hash};
    unsigned why;
    uint64_t t;
    rslot_t *s;

    if (d < 0) {
        /* A block we consumed: our ack was lost. */
        eng->ctr.stale++;
        emit_ack(eng, peer, h->epoch, WIRE_F_P2P_DONE, 0, NULL, 0);
        return;
    }
    t = eng->rx_next[peer] + (uint64_t)d;
    s = slot_find(eng, peer, t);
    if (s == NULL) {
        /* A block we have not started: keep it if a slot is spare; else
         * say we live and ask for it later. A failed engine stays silent
         * so its peers time out too. */
        s = slot_take(eng, h->total, 1);
        if (s == NULL) {
            remember_refused(eng, peer, t);
            if (!eng->failed)
                emit_ack(eng, peer, h->epoch, WIRE_F_P2P_BEHIND, 0, NULL, 0);
            return;
        }
        slot_init(eng, s, SLOT_EARLY, peer, t, h->total);
        s->sig = sig;
    }
    if (s->state == SLOT_ACTIVE &&
        (why = sig_differs(&eng->sig, &sig)) != WIRE_MISMATCH_NONE) {
        eng->ctr.dropped++;
        fail_mismatch(eng, peer, why, &sig);
        return;
    }
    if (sig_differs(&s->sig, &sig) != WIRE_MISMATCH_NONE) {
        eng->ctr.dropped++; /* packets of one block that disagree */
        return;
    }
    if (s->total != h->total) {
        eng->ctr.dropped++;
        if (s->state == SLOT_ACTIVE)
            fail_protocol(eng, "sends a block of another size", peer, h->total,
                          s->bytes);
        return;
    }
    if (h->offset % stride != 0 || h->offset >= s->bytes ||
        h->count != pkt_len(stride, s->bytes, (size_t)(h->offset / stride))) {
        eng->ctr.dropped++;
        incoll_debug("p2p: group %u: drop data from rank %d: offset %" PRIu64
                     " count %u do not fit packets of %zu bytes (is the "
                     "payload size the same on every rank?)",
                     eng->p.group, peer, h->offset, h->count, stride);
        return;
    }
    idx = (size_t)(h->offset / stride);
    if (bit_get(s->bits, idx)) {
        eng->ctr.duplicates++;
        send_ack(eng, s, 0);
        return;
    }
    memcpy(s->dst + h->offset, payload, h->count);
    bit_set(s->bits, idx);
    s->nrecv++;
    if (h->flags & WIRE_F_RETRANS)
        s->resent_in = 1;
    if (idx >= s->hi)
        s->hi = idx + 1;
    while (s->cum < s->npkts && bit_get(s->bits, s->cum))
        s->cum++;
    s->unacked++;
    eng->ctr.data_received++;
    eng->last_progress_ns = now;
    if (s->state != SLOT_ACTIVE)
        eng->ctr.early++;
    else
        eng->next_probe_ns = now + probe_interval(eng);
    if (s->nrecv == s->npkts) {
        send_ack(eng, s, 0);
        if (s->state == SLOT_ACTIVE && eng->send_peer == peer &&
            eng->low < eng->send_npkts)
            partner_arrived(eng, now);
        if (s->state == SLOT_ACTIVE)
            advance(eng, now);
    } else if (s->unacked >= eng->p.ack_every) {
        send_ack(eng, s, 0);
    }
}

static void retransmit(p2p_engine_t *eng, size_t i, uint64_t now)
{
    eng->win[i % eng->p.window].lost = 0;
    eng->win[i % eng->p.window].fast_ns = now;
    eng->ctr.fast_retransmits++;
    send_data(eng, i, now, 1);
}

/*
 * Packet i is acked; first: the ack says it came in its first
 * transmission (WIRE_F_P2P_FIRST). Which transmission arrived is what
 * RACK measures from (max_acked_tx, max_acked_sent_ns): a resent packet
 * is taken as delivered by its last transmission unless the ack says
 * otherwise. On a slow link a packet resent on a timeout while its
 * first transmission was only queued is acked when the first arrives;
 * taken for the resend, that ack, newer than every packet queued behind
 * the first, would make each of them a hole and resend them all, into
 * the same queue, where they outlive the operation and delay the next
 * one on the link (the in-network allreduce after recursive doubling).
 * The round trip from the first transmission is then a sample too
 * (Karn's rule is for acks of unknown transmissions).
 */
static void ack_one(p2p_engine_t *eng, size_t i, uint64_t now, int first,
                    uint64_t *rtt_p)
{
    pkt_t *pk = &eng->win[i % eng->p.window];
    int resent = pk->retries != 0 || pk->fast_ns != 0;
    uint64_t tx = pk->tx, sent = pk->sent_ns;

    if (pk->acked)
        return;
    if (resent && first) {
        tx = pk->first_tx;
        sent = pk->first_ns;
        eng->ctr.needless++;
    }
    pk->acked = 1;
    if (now > eng->last_ack_ns)
        eng->last_ack_ns = now;
    if (now > eng->last_progress_ns)
        eng->last_progress_ns = now;
    if (tx > eng->max_acked_tx)
        eng->max_acked_tx = tx;
    if (sent > eng->max_acked_sent_ns)
        eng->max_acked_sent_ns = sent;
    /* Karn: no RTT sample from a packet sent more than once. An ack that
     * comes much sooner than an RTT after a fast retransmission was for
     * the original: the reordering window was too small. */
    if (pk->fast_ns != 0 && now - pk->fast_ns < (uint64_t)eng->rto.srtt / 2) {
        eng->ctr.spurious++;
        if (eng->reo_mult < 16)
            eng->reo_mult++;
        eng->reo_calm = 0;
    }
    if ((!resent || first) && now >= sent)
        *rtt_p = now - sent;
}

static void on_ack(p2p_engine_t *eng, const wire_hdr_t *h, const uint8_t *bm,
                   uint64_t now)
{
    int peer = h->child;
    int32_t d = (int32_t)(h->epoch - (uint32_t)eng->tx_next[peer]);
    size_t lim, cum;
    uint64_t rtt = 0;
    int first = (h->flags & WIRE_F_P2P_FIRST) != 0;

    eng->ctr.acks_received++;
    if (h->flags & WIRE_F_P2P_BEHIND) {
        /* The peer lives but has not reached this block: keep waiting, and
         * keep the packets from running out of retries. It answers about
         * a block we send it, or one we wait for from it (our probe). */
        if (eng->running && ((peer == eng->send_peer && d == 0) ||
                             (eng->rslot != NULL && peer == eng->rslot->peer &&
                              h->epoch == (uint32_t)eng->rslot->t))) {
            eng->last_progress_ns = now;
            for (size_t i = eng->low; eng->send_peer == peer && i < eng->next;
                 i++) {
                pkt_t *pk = &eng->win[i % eng->p.window];
                if (pk->retries > 1)
                    pk->retries = 1;
            }
        }
        return;
    }
    if (!eng->running || d != 0 || eng->send_peer != peer) {
        /* Not about what we send now: a probe for a block we have not
         * started gets a BEHIND; anything else is a late duplicate. */
        if ((h->flags & WIRE_F_P2P_PROBE) && d >= 0 && !eng->failed)
            emit_ack(eng, peer, h->epoch, WIRE_F_P2P_BEHIND, 0, NULL, 0);
        return;
    }
    if (eng->low == eng->send_npkts)
        return;
    lim = eng->next;
    if (h->flags & WIRE_F_P2P_DONE) {
        for (size_t i = eng->low; i < lim; i++)
            ack_one(eng, i, now, first, &rtt);
    } else {
        cum = h->offset < lim ? (size_t)h->offset : lim;
        for (size_t i = eng->low; i < cum; i++)
            ack_one(eng, i, now, first, &rtt);
        for (size_t b = 0; b < (size_t)h->count * 8; b++) {
            size_t i = cum + b;
            if (i >= lim)
                break;
            if (i >= eng->low && ((bm[b / 8] >> (b % 8)) & 1))
                ack_one(eng, i, now, first, &rtt);
        }
    }
    if (rtt)
        rto_sample(&eng->rto, rtt);
    {
        size_t old = eng->low;
        while (eng->low < eng->next && eng->win[eng->low % eng->p.window].acked)
            eng->low++;
        if (eng->low != old)
            eng->last_progress_ns = now;
    }
    if (eng->low == eng->send_npkts) {
        advance(eng, now);
        return;
    }
    /* RACK (RFC 8985): a hole below packets sent no earlier and acked is
     * lost once it is older than an RTT plus a reordering window (a
     * quarter RTT and twice the RTT's deviation): resend it then, at once
     * or from on_time, without waiting for the retransmission timeout.
     * With a probe, resend everything not acked that is not brand new. */
    {
        uint64_t reo = rto_reo_wnd(&eng->rto, eng->reo_mult);
        uint64_t wait = (uint64_t)eng->rto.srtt + reo;
        for (size_t i = eng->low; i < eng->next; i++) {
            pkt_t *pk = &eng->win[i % eng->p.window];
            uint64_t age = now - pk->sent_ns;
            if (pk->acked)
                continue;
            if ((h->flags & WIRE_F_P2P_PROBE) &&
                age >= (uint64_t)eng->rto.srtt) {
                retransmit(eng, i, now);
            } else if (pk->tx + FAST_RETRANS_THRESH <= eng->max_acked_tx &&
                       pk->sent_ns <= eng->max_acked_sent_ns) {
                if (age >= wait) {
                    retransmit(eng, i, now);
                } else if (!pk->lost || pk->deadline > pk->sent_ns + wait) {
                    pk->lost = 1;
                    pk->deadline = pk->sent_ns + wait;
                }
            }
        }
    }
    fill_window(eng, now);
}

/*
 * A packet for an engine that lingers at finalize: it will never run
 * another operation. Only what it already holds is answered: data of a
 * block it consumed gets its DONE ack again (the peer then completes), and
 * that keeps the lingering going. Anything about a later operation (data
 * of a block not started, a probe for a block it will never send) gets no
 * answer at all, neither stored nor BEHIND: a BEHIND would tell the peer
 * to keep waiting, and its asking again would keep us lingering, so both
 * would stay as long as the peer asks. Silent, the peer fails with a
 * timeout naming this rank within its own limits, and we leave once it
 * stops asking for what we hold.
 */
static void on_finalized(p2p_engine_t *eng, const wire_hdr_t *h,
                         const uint8_t *payload, uint64_t now)
{
    int peer = h->child;

    if (h->type == WIRE_P2P_DATA &&
        (int32_t)(h->epoch - (uint32_t)eng->rx_next[peer]) < 0) {
        eng->last_rx_ns = now;
        on_data(eng, h, payload, now);
        return;
    }
    if (h->type == WIRE_P2P_DATA || (h->flags & WIRE_F_P2P_PROBE)) {
        eng->ctr.after_finalize++;
        incoll_debug("p2p: group %u: rank %d asks for block %u of an operation "
                     "this rank never runs (it is finalizing): no answer",
                     eng->p.group, peer, h->epoch);
    }
}

void p2p_engine_on_packet(p2p_engine_t *eng, incoll_ep_t src, const void *buf,
                          size_t len, uint64_t now_ns)
{
    wire_hdr_t h;
    const uint8_t *payload = (const uint8_t *)buf + WIRE_HDR_LEN;

    if (wire_parse(buf, len, &h, NULL) != INCOLL_OK ||
        (h.type != WIRE_P2P_DATA && h.type != WIRE_P2P_ACK) ||
        h.group != eng->p.group || h.child >= eng->p.size ||
        h.child == eng->p.rank || eng->peers[h.child] != src ||
        (h.type == WIRE_P2P_DATA && (h.count == 0 || h.total == 0)) ||
        (h.type == WIRE_P2P_ACK && h.count > ACK_BYTES_MAX)) {
        eng->ctr.dropped++;
        return;
    }
    if (!wire_mac_check(&eng->p.key, buf, len)) {
        eng->ctr.dropped++;
        eng->ctr.bad_mac++;
        return;
    }
    if (eng->linger_start_ns != 0 && !eng->running) {
        on_finalized(eng, &h, payload, now_ns);
        return;
    }
    /* Lingering lasts while peers still ask for something (data or a
     * probe); acks answer us and need nothing. */
    if (h.type == WIRE_P2P_DATA || (h.flags & WIRE_F_P2P_PROBE))
        eng->last_rx_ns = now_ns;
    if (h.type == WIRE_P2P_DATA)
        on_data(eng, &h, payload, now_ns);
    else
        on_ack(eng, &h, payload, now_ns);
}

/* ---- time ---- */

/*
 * 1 when the current step lacks only the ack of its send and the peer's
 * silence through all retries says it left the operation with our block:
 *  - the step also received the whole block of the same peer (an
 *    exchange, as in recursive doubling): the peer reached this step, and
 *    it cannot leave the operation without our block of it, so a peer
 *    that no longer answers has it (its acks were lost and it went on, to
 *    a later step with another rank or out of the library, say into the
 *    MPI library's own collective) or is dead;
 *  - or no later step has anything to do: the peer most likely received
 *    everything and left (its DONE acks were lost).
 * The result here is complete and correct either way, and a peer that did
 * lack data keeps waiting and fails loudly itself, never silently wrong.
 */
static int partner_has_ours(const p2p_engine_t *eng)
{
    return eng->rslot != NULL && eng->rslot->nrecv == eng->rslot->npkts &&
           eng->rslot->peer == eng->send_peer;
}

/* partner_has_ours(), and the partner has been silent through
 * PARTNER_SILENT_RETRIES of our retransmissions since it reached the
 * step (what we sent before it did proves nothing). */
static int partner_silent(const p2p_engine_t *eng, const pkt_t *pk,
                          uint64_t now)
{
    uint64_t from = eng->partner_ns;
    if (!partner_has_ours(eng))
        return 0;
    if (from == 0) /* complete before the step started: there since */
        from = pk->first_ns;
    return eng->partner_tx >= PARTNER_SILENT_RETRIES &&
           rto_give_up(&eng->rto, (int)eng->partner_tx, PARTNER_SILENT_RETRIES,
                       from > pk->first_ns ? from : pk->first_ns, now);
}

/* We hold a block that the step's send peer sent us for a later step
 * (kept early, or refused for want of room): the schedules pair a send of
 * step j with the peer's receive of step j, so it sent that only after
 * its step here, in which it took our block. It has it; our acks of it
 * were lost (and it may wait elsewhere now, not reading its socket). */
static int peer_past_step(const p2p_engine_t *eng)
{
    for (int i = 0; i < NSLOTS; i++)
        if (eng->slot[i].state == SLOT_EARLY &&
            eng->slot[i].peer == eng->send_peer)
            return 1;
    for (int i = 0; i < eng->nrefused; i++)
        if (eng->refused[i].peer == eng->send_peer)
            return 1;
    return 0;
}

static int only_ack_missing(const p2p_engine_t *eng)
{
    if (eng->rslot != NULL && eng->rslot->nrecv < eng->rslot->npkts)
        return 0;
    if (partner_has_ours(eng) || peer_past_step(eng))
        return 1;
    for (int j = eng->idx + 1; j < eng->nsteps; j++)
        if (eng->steps[j].send_peer >= 0 || eng->steps[j].recv_peer >= 0)
            return 0;
    return 1;
}

/* Whether to stop waiting for the ack of pk, the current step's: its
 * partner was silent (partner_silent), the peer is past the step
 * (peer_past_step), or this is the operation's last
 * step, only its ack is missing and the peer stayed silent through
 * PARTNER_SILENT_RETRIES of our retransmissions. Such a peer has most
 * likely finished and waits elsewhere without reading its socket (in
 * shared memory, say); one that is merely late finds one of those copies
 * in its socket when it comes. Waiting for all of max_retries (stretched
 * to INCOLL_WAIT_MS) would hold this rank that long. */
static int ack_hopeless(const p2p_engine_t *eng, const pkt_t *pk, uint64_t now)
{
    if (partner_silent(eng, pk, now))
        return 1;
    if (!only_ack_missing(eng))
        return 0;
    if (peer_past_step(eng))
        return 1;
    if (partner_has_ours(eng))
        return 0;
    return pk->retries >= PARTNER_SILENT_RETRIES &&
           rto_give_up(&eng->rto, (int)pk->retries, PARTNER_SILENT_RETRIES,
                       pk->first_ns, now);
}

/* Fails the operation; retries < 0 means no progress for the whole
 * progress timeout. */
static void timeout(p2p_engine_t *eng, const char *why, int peer, int retries,
                    uint64_t now)
{
    char ep[32];
    if (eng->send_peer == peer && only_ack_missing(eng)) {
        incoll_info("p2p: group %u %s step %d/%d: rank %d never acked the "
                    "last block (it has probably finished); the result here "
                    "is complete",
                    eng->p.group, eng->name, eng->idx + 1, eng->nsteps, peer);
        eng->ctr.assumed_acked++;
        eng->low = eng->next = eng->send_npkts;
        advance(eng, now);
        return;
    }
    eng->ctr.timeouts++;
    if (retries >= 0)
        incoll_error("p2p: group %u %s step %d/%d: %s rank %d (%s) after %d "
                     "retries, giving up",
                     eng->p.group, eng->name, eng->idx + 1, eng->nsteps, why,
                     peer, wire_ep_str(eng->peers[peer], ep, sizeof(ep)),
                     retries);
    else
        incoll_error("p2p: group %u %s step %d/%d: %s rank %d (%s) for %" PRIu64
                     " ms, giving up",
                     eng->p.group, eng->name, eng->idx + 1, eng->nsteps, why,
                     peer, wire_ep_str(eng->peers[peer], ep, sizeof(ep)),
                     eng->p.progress_timeout_ns / 1000000);
    finish(eng, INCOLL_ERR_TIMEOUT);
}

void p2p_engine_on_time(p2p_engine_t *eng, uint64_t now_ns)
{
    const algo_step_t *st;

    for (int i = 0; i < NSLOTS; i++)
        if (eng->slot[i].state != SLOT_FREE && eng->slot[i].unacked)
            send_ack(eng, &eng->slot[i], 0);
    if (!eng->running)
        return;
    st = &eng->steps[eng->idx];
    if (now_ns < eng->last_progress_ns)
        return; /* the driver's clock lags the last packet it fed */
    if (now_ns - eng->last_progress_ns >= eng->p.progress_timeout_ns) {
        int peer = eng->send_peer >= 0 && eng->low < eng->send_npkts
                       ? eng->send_peer
                       : st->recv_peer;
        timeout(eng,
                eng->send_peer == peer ? "no progress sending to"
                                       : "no data from",
                peer, -1, now_ns);
        return;
    }
    /* On a timeout resend only the first packet due and hold the others
     * back until its deadline: when the peer was merely slow (descheduled,
     * or computing), one packet finds out, and its selective ack tells
     * which others are really missing (then resent at once, see on_ack).
     * While acks of something new keep coming, nothing is resent on a
     * timeout (see the top of this file). */
    {
        uint64_t hold = 0, quiet = eng->last_ack_ns + eng->rto.rto;
        for (size_t i = eng->low; eng->send_peer >= 0 && i < eng->next; i++) {
            pkt_t *pk = &eng->win[i % eng->p.window];
            if (pk->acked || pk->deadline > now_ns)
                continue;
            if (pk->lost) {
                retransmit(eng, i, now_ns);
                continue;
            }
            if (now_ns < quiet)
                continue;
            if (hold) {
                pk->deadline = hold;
                continue;
            }
            if (rto_give_up(&eng->rto, (int)pk->retries, eng->p.max_retries,
                            pk->first_ns, now_ns) ||
                ack_hopeless(eng, pk, now_ns)) {
                timeout(eng, "no ack from", eng->send_peer, (int)pk->retries,
                        now_ns);
                return;
            }
            pk->retries++;
            if (eng->partner_ns != 0 || partner_has_ours(eng))
                eng->partner_tx++;
            eng->ctr.retransmits++;
            send_data(eng, i, now_ns, 1);
            hold = pk->deadline;
        }
    }
    if (eng->rslot != NULL && eng->rslot->nrecv < eng->rslot->npkts &&
        now_ns >= eng->next_probe_ns) {
        send_probe(eng, eng->rslot->peer, eng->rslot->t);
        eng->next_probe_ns = now_ns + probe_interval(eng);
    }
}

uint64_t p2p_engine_deadline(const p2p_engine_t *eng)
{
    uint64_t d, quiet;

    for (int i = 0; i < NSLOTS; i++)
        if (eng->slot[i].state != SLOT_FREE && eng->slot[i].unacked)
            return 0;
    if (!eng->running)
        return UINT64_MAX;
    d = eng->last_progress_ns + eng->p.progress_timeout_ns;
    quiet = eng->last_ack_ns + eng->rto.rto;
    for (size_t i = eng->low; eng->send_peer >= 0 && i < eng->next; i++) {
        const pkt_t *pk = &eng->win[i % eng->p.window];
        uint64_t due = pk->lost || pk->deadline > quiet ? pk->deadline : quiet;
        if (!pk->acked && due < d)
            d = due;
    }
    if (eng->rslot != NULL && eng->rslot->nrecv < eng->rslot->npkts &&
        eng->next_probe_ns < d)
        d = eng->next_probe_ns;
    return d;
}

int p2p_engine_early_held(const p2p_engine_t *eng)
{
    if (eng->nrefused > 0)
        return 1;
    for (int i = 0; i < NSLOTS; i++)
        if (eng->slot[i].state == SLOT_EARLY)
            return 1;
    return 0;
}

void p2p_engine_set_tag(p2p_engine_t *eng, uint32_t tag)
{
    eng->next_tag = tag;
}

void p2p_engine_abandon(p2p_engine_t *eng, incoll_status_t status)
{
    if (eng->running && status != INCOLL_OK && status != INCOLL_INPROGRESS)
        finish(eng, status);
}

unsigned p2p_engine_mismatch(const p2p_engine_t *eng)
{
    return eng->mismatch;
}

uint64_t p2p_engine_linger(p2p_engine_t *eng, uint64_t now_ns)
{
    uint64_t quiet, quiet_end;

    if (eng->running || eng->ctr.ops == 0 || eng->nfinal == 0)
        return 0;
    if (eng->linger_start_ns == 0) {
        eng->linger_start_ns = now_ns ? now_ns : 1;
        eng->linger_gap_ns = eng->rto.rto;
        eng->linger_next_ns = now_ns;
    }
    /* Until a peer still retrying has had the chance to be answered: it
     * retransmits at least every rto_max (the cap of its backoff), so
     * that long without data or a probe means nobody is waiting for us. */
    quiet = eng->p.rto_max_ns;
    quiet_end =
        (eng->last_rx_ns > eng->linger_start_ns ? eng->last_rx_ns
                                                : eng->linger_start_ns) +
        quiet + 2 * eng->rto.rto;
    if (now_ns >= quiet_end)
        return 0;
    if (now_ns >= eng->linger_next_ns) {
        send_final_acks(eng);
        eng->linger_next_ns = now_ns + eng->linger_gap_ns;
        if (eng->linger_gap_ns < eng->p.rto_max_ns / 4)
            eng->linger_gap_ns *= 2;
    }
    return eng->linger_next_ns < quiet_end ? eng->linger_next_ns : quiet_end;
}
