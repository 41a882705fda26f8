/*
 * Host protocol engine: see host_engine.h. The window is an array indexed
 * by slot; entry s holds the segment whose sequence number maps to slot s.
 * A segment is sent only when the one before it in the same slot (seq -
 * slots) has its result, which is what lets the ANs keep only two copies
 * of a slot's result.
 *
 * The retransmission clock restarts on progress: a segment is resent only
 * when both its own timeout (from its last transmission, with backoff) and
 * one timeout since the last result of the operation have passed. When a
 * long vector streams through a slow link, results queue behind each other
 * and arrive long after their segments were sent, but steadily: resending
 * them then would only add to the queue. Loss shows once results stop.
 */
#include "core/host_engine.h"

#include "common/log.h"
#include "common/settings.h"
#include "core/rto.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum { SEG_FREE = 0, SEG_SENT = 1, SEG_DONE = 2 };

/* Results of segments sent after a missing one that make it lost at once
 * (as TCP's three duplicate acks); fewer start the reordering timer. */
#define FAST_RETRANS_THRESH 3

/*
 * Adaptive copies (params.copy_adapt_bytes): a one-packet operation is
 * sent twice, as with copy_bytes, but only while the engine sees loss.
 * A sign of loss is an operation of that size that got fewer results
 * than it was due (copy_judge): a resend the AN never answered, or,
 * while copies are on, a result whose copy did not come. Two signs
 * within COPY_ON_WITHIN such operations turn copies on (one alone may
 * be a probe that a slow member's silence caused); COPY_HOLD operations
 * without a sign turn them off. A fabric that does not drop never pays
 * for copies; one that drops 1% shows a missing copy every 50
 * operations or so, and keeps them on.
 */
#define COPY_ON_WITHIN 256
#define COPY_HOLD 256

/* A result flagged TWICE to an operation we did not flag so says another
 * member copies: we follow for COPY_FOLLOW operations (renewed by every
 * such result), sending twice without the flag, so that followers never
 * keep each other copying. Members see loss on their own links only (a
 * resend the AN answers with WAIT, another member's loss, is no sign),
 * and one member sending once loses for all. */
#define COPY_FOLLOW 64

/*
 * Hedges (params.hedge_pct): while copies are on, the copy of a one-packet
 * operation waits. It goes, as a plain resend, only if the result has not
 * come hedge_pct percent of the smoothed round trip after the first
 * transmission; an operation whose result comes in time sends once, and
 * the ANs answer once (no TWICE flag). A lost packet of ours, or our lost
 * result, then costs that wait and one round trip instead of the tail
 * probe's two (and at least INCOLL_RTO_MIN_US); another member's loss is
 * that member's hedge to repair (the AN answers ours with WAIT). The AN
 * counts a hedge as it does any resend: once, and answered from the
 * result it keeps when it comes late. A hedge is one more transmission,
 * so copy_judge counts its answer as due: a lost packet of ours is still
 * a sign of loss, a slow member's is not. Its round-trip sample is taken
 * from the first transmission (the hedge does not make the segment
 * resent, Karn's rule aside): most hedges answer a slow, not a lost,
 * first transmission, and leaving their samples out would teach the
 * estimator a shorter round trip and hedge ever more; a lost one
 * overstates its sample by one wait, once in a hundred operations at 1%.
 */

typedef struct {
    uint64_t seq;
    uint64_t sent_ns;  /* last transmission */
    uint64_t first_ns; /* first transmission */
    uint64_t deadline;
    uint64_t tx;       /* engine-wide number of the last transmission */
    uint64_t rack_due; /* fast retransmission due (0: none) */
    uint32_t later;    /* results of later transmissions since ours */
    /* Resent, with its result: the round trip from the first
     * transmission and the gap since the result before, if the result
     * answered the first transmission (late_duplicate tells); 0: none. */
    uint64_t amb_rtt, amb_gap;
    int retries;    /* silent retransmissions (drive the backoff) */
    uint16_t ntx;   /* transmissions */
    uint16_t dups;  /* results after the first */
    uint8_t resent; /* sent more than once: no round-trip sample */
    uint8_t state;
    uint8_t twice;  /* eng->twice when sent */
    uint8_t adapt;  /* of an operation copy_adapt_bytes covers */
    uint8_t nres;   /* results received: 2 when no copy was lost */
    uint8_t rtwice; /* the first result said the AN sends them twice */
    uint8_t judged; /* counted by copy_judge */
    uint8_t ahead;  /* a broadcast's data came ahead of the result */
    uint8_t silent; /* a one-way broadcast's non-root: not sent, waits for
                       the data (eng->oneway); its result is no round-trip
                       sample */
    uint8_t held;   /* the AN said it holds our contribution and waits for
                       other members (WIRE_F_WAIT) */
} seg_t;

/* Early data: see early_keep. */
#define EARLY_KEEP HOST_ONEWAY_EVERY
typedef struct {
    uint64_t seq; /* the segment's sequence number (slot space) */
    size_t len;   /* 0: empty */
    uint8_t *pkt; /* WIRE_HDR_LEN + max_payload bytes, made at first use */
} early_t;

static void early_take(host_engine_t *eng, uint64_t now_ns);

struct host_engine {
    host_engine_params_t p;
    /* Multicast (docs/multicast.md): listening now (contributions say
     * WIRE_F_MCAST); a multicast result has arrived; operations done
     * while listening before one did; gave up listening (why). */
    int mc, mc_seen, mc_fell;
    uint32_t mc_ops;
    uint64_t next_seq; /* first sequence number of the next operation */
    seg_t *win;        /* p.slots entries */
    /* Streaming (host_engine_lock): the lock round's state and, while
     * granted, the stream window of st_n slots numbered from p.slots. */
    seg_t *st_segs;    /* p.stream_window entries */
    uint32_t lk_seq;   /* last lock round (the ANs' lk_seq) */
    uint32_t st_n;     /* stream slots granted (0: not locked) */
    uint64_t st_seq;   /* next stream sequence number of this lock */
    uint64_t ticket;   /* fairness ticket of our last refusal */
    uint32_t ops_left; /* operations the lock is still for (0: any) */
    uint16_t lk_nops;  /* operations asked for (0: until released) */
    uint8_t lk_why;    /* last refusal's reason (wire_lock_why_t) */
    uint8_t ctl;       /* round running: WIRE_LOCK, WIRE_UNLOCK or 0 */
    uint64_t ctl_first_ns, ctl_deadline;
    int ctl_retries;
    /* An unlock round in the background (host_engine_unlock_bg): running
     * while ul_bg, beside the operations that do not need the lock. */
    uint8_t ul_bg;
    uint64_t ul_first_ns, ul_deadline;
    int ul_retries;
    /* The running operation's slot space: ow[on] from slot obase, epochs
     * from oepoch, owin in flight; stream is 1 on the stream window. */
    seg_t *ow;
    uint32_t on, obase, oepoch, owin;
    int stream;
    /* The running operation. */
    const uint8_t *sendbuf;
    uint8_t *recvbuf;
    size_t count;
    incoll_dtype_t dtype;
    incoll_op_t op;
    wire_coll_t kind;
    int twice;  /* every packet goes twice: 1 flagged TWICE (copy_bytes,
                   or adaptive copies on), so the ANs send theirs twice
                   too; 2 without the flag (following another member's
                   copies, COPY_FOLLOW) */
    int adapt;  /* copy_adapt_bytes covers this operation */
    int push;   /* a broadcast's root asks for its data sent ahead */
    int oneway; /* a one-way broadcast (host_engine_oneway_every): the
                   root's data completes it, the others send nothing
                   unless their result is late */
    /* Adaptive copies: on/off, operations covered so far, and the
     * operation count of the last sign of loss (0: none yet). */
    int copying;
    uint64_t aops, last_sign;
    uint64_t follow_until;   /* operations up to this one follow copies */
    uint64_t hedge_due;      /* when this operation's waiting copy goes
                                (hedge_pct; UINT64_MAX: none pending) */
    int send_data;           /* our contributions carry data */
    int recv_data;           /* our results carry data */
    int root;                /* we are the reduce's or broadcast's root */
    size_t blk_off, blk_len; /* gathers: our block's bytes in the vector */
    uint8_t *piece;          /* gathers: descriptor + piece being sent */
    size_t dsize;
    size_t seg_elems;
    uint64_t base_seq;
    uint64_t nseg;
    uint64_t next_send; /* index of the next segment to send */
    uint64_t low;       /* index of the lowest segment without result */
    uint64_t ndone;
    uint64_t ndata;  /* segments whose data is in recvbuf (recv_data) */
    uint8_t *mirror; /* host_engine_set_mirror, or NULL */
    size_t mirrored; /* elements written into mirror by this operation */
    uint64_t last_progress_ns;
    incoll_status_t status;
    int failed; /* members out of step: no further operations */
    uint32_t call_root, next_root; /* the running and the next operation's
                                      root rank (host_engine_set_root) */
    unsigned mismatch;             /* the last failure's wire_mismatch_t */
    uint64_t alive_ns; /* the leaf AN last said it holds our contribution
                          of a segment without result and waits (0: never
                          in this operation) */
    /* The retransmission timer (core/rto.h) of the running operation's
     * slot space, and the other space's, swapped in when an operation
     * runs on the other (st_timer: rto is the stream window's). A window
     * of stream slots queues far more behind a slow link than the slots
     * do, so each learns its own round trip. */
    rto_t rto, rto_other;
    int st_timer;
    uint64_t tx_seq; /* transmissions so far */
    /* Lower bounds of the earliest fast retransmission (rack_due) and
     * timeout (deadline) of the segments in flight, UINT64_MAX for none:
     * host_engine_deadline reads them instead of walking a window of
     * hundreds of stream slots on every wait; on_time walks the window
     * only when one is due and then makes them exact again. */
    uint64_t rack_next, dl_next;
    /* Round trip without queueing: the least sample of this operation and
     * of the one before (0: none yet). Drives the tail probe. */
    uint64_t min_rtt, min_rtt_prev;
    /* The pace of results while segments queue behind each other: the
     * smoothed time between two results of an operation and its mean
     * deviation (0: none yet), and this operation's last result. */
    int64_t sgap, gapvar;
    uint64_t last_result_ns;
    int probes; /* tail probes since the last result */
    /* Pacing (params.pace): the window in 1/256 segments, kept across
     * operations. */
    uint32_t cwnd;
    uint32_t ssthresh; /* below it the window grows by one segment a
                          result, above by one a window (1/256 segments) */
    uint64_t cut_ns;   /* the last loss that halved it: one cut per round */
    uint32_t undo_cwnd, undo_ssthresh; /* before that cut (0: none to undo) */
    host_engine_counters_t ctr;
    early_t early[EARLY_KEEP];
    /* host_engine_presend: the operation starting at sequence pre_seq - 1
     * (0: none) was sent at pre_ns by another process on our socket;
     * pre_now: the one starting now is it (its first segment's first
     * transmission is not sent again). */
    uint64_t pre_seq, pre_ns;
    uint32_t pre_root; /* the header's root (host_engine_set_root) */
    int pre_mc;        /* the header's MCAST: listening then */
    int pre_now;
};

uint32_t host_engine_oneway_every(const host_engine_params_t *p)
{
    /* A round at least once every `slots` segments: see the header. */
    uint32_t every = HOST_ONEWAY_EVERY;
    if (p->ahead_bytes == 0 || p->slots < 2)
        return 0;
    return p->slots < every ? p->slots : every;
}

void host_engine_params_default(host_engine_params_t *p)
{
    rto_defaults_t d = rto_defaults();
    p->rto_init_ns = d.init_ns;
    p->rto_min_ns = d.min_ns;
    p->rto_max_ns = d.max_ns;
    p->max_retries = d.retries;
    p->progress_timeout_ns = d.timeout_ns;
}

host_engine_t *host_engine_create(const host_engine_params_t *params)
{
    host_engine_t *eng;
    if (params->slots < 1 || params->slots > 65535 || params->max_payload < 8 ||
        params->max_payload > WIRE_MAX_PAYLOAD || params->send == NULL)
        return NULL;
    eng = calloc(1, sizeof(*eng));
    if (eng == NULL)
        return NULL;
    eng->p = *params;
    eng->mc = params->mcast;
    if (eng->p.mcast_probe_ops == 0)
        eng->p.mcast_probe_ops =
            (uint32_t)setting_default(SETTING_MCAST_PROBE_OPS).i;
    if (eng->p.window == 0 || eng->p.window > eng->p.slots)
        eng->p.window = eng->p.slots;
    if (eng->p.window_min > eng->p.window)
        eng->p.window_min = eng->p.window;
    eng->cwnd = (eng->p.window_min ? eng->p.window_min : eng->p.window) * 256u;
    eng->ssthresh = UINT32_MAX;
    eng->win = calloc(params->slots, sizeof(*eng->win));
    eng->piece = malloc(WIRE_PIECE_LEN + params->max_payload);
    /* Stream slots are numbered after the slots, in 16 bits. */
    if (eng->p.stream_window > 65535 - params->slots)
        eng->p.stream_window = 65535 - params->slots;
    if (eng->p.stream_window > 0)
        eng->st_segs = calloc(eng->p.stream_window, sizeof(*eng->st_segs));
    if (eng->win == NULL || eng->piece == NULL ||
        (eng->p.stream_window > 0 && eng->st_segs == NULL)) {
        free(eng->st_segs);
        free(eng->win);
        free(eng->piece);
        free(eng);
        return NULL;
    }
    rto_init(&eng->rto, params->rto_init_ns, params->rto_min_ns,
             params->rto_max_ns);
    eng->rto_other = eng->rto;
    eng->hedge_due = UINT64_MAX;
    eng->status = INCOLL_OK;
    return eng;
}

void host_engine_destroy(host_engine_t *eng)
{
    if (eng == NULL)
        return;
    for (int i = 0; i < EARLY_KEEP; i++)
        free(eng->early[i].pkt);
    free(eng->win);
    free(eng->st_segs);
    free(eng->piece);
    free(eng);
}

const host_engine_counters_t *host_engine_counters(const host_engine_t *eng)
{
    return &eng->ctr;
}

incoll_status_t host_engine_status(const host_engine_t *eng)
{
    return eng->status;
}

/* Splits: the elements [*lo_p, *hi_p) of our block in the segment of n
 * elements at off (empty when *lo_p == *hi_p), as vector offsets. */
static void block_span(const host_engine_t *eng, uint64_t off, size_t n,
                       size_t *lo_p, size_t *hi_p)
{
    size_t lo = off > eng->blk_off ? off : eng->blk_off;
    size_t hi = off + n < eng->blk_off + eng->blk_len
                    ? off + n
                    : eng->blk_off + eng->blk_len;
    *lo_p = lo;
    *hi_p = hi > lo ? hi : lo;
}

/*
 * A fast resend of a segment of at least params.ask_bytes asks the AN
 * instead of
 * carrying the data again (WIRE_F_QUERY): a missing result most often
 * lacks another member's contribution or was lost above or below the
 * leaf AN, not ours, and every member's resend of the whole segment
 * would then only queue on the host links (at 5% loss about half the
 * segments of a large vector miss a result at every host). When our
 * contribution is the one missing the AN asks for it, which costs one
 * round trip to the leaf AN more.
 */

/* The bytes of our data in segment s. */
static size_t seg_bytes(const host_engine_t *eng, const seg_t *s)
{
    uint64_t off = (s->seq - eng->base_seq) * eng->seg_elems;
    size_t n =
        eng->count - off < eng->seg_elems ? eng->count - off : eng->seg_elems;
    return n * eng->dsize;
}

static void seg_send(host_engine_t *eng, seg_t *s, uint64_t now, int retrans,
                     int ask)
{
    uint64_t idx = s->seq - eng->base_seq;
    uint64_t off = idx * eng->seg_elems;
    size_t n =
        eng->count - off < eng->seg_elems ? eng->count - off : eng->seg_elems;
    uint8_t hdr[WIRE_HDR_LEN];
    wire_hdr_t h = {
        .version = WIRE_VERSION,
        .type = WIRE_CONTRIB,
        .op = (uint8_t)eng->op,
        .dtype = (uint8_t)eng->dtype,
        .group = eng->p.group,
        .child = eng->p.child,
        .flags = (uint16_t)((retrans ? WIRE_F_RETRANS : 0) |
                            (idx + 1 == eng->nseg ? WIRE_F_LAST : 0) |
                            wire_kind_flags(eng->kind) |
                            (eng->root ? WIRE_F_ROOT : 0) |
                            (eng->send_data ? 0 : WIRE_F_NODATA) |
                            (eng->twice == 1 ? WIRE_F_TWICE : 0) |
                            (eng->push ? WIRE_F_PUSH : 0) |
                            (eng->oneway ? WIRE_F_ONEWAY : 0) |
                            (eng->mc ? WIRE_F_MCAST : 0)),
        .slot = (uint16_t)(eng->obase + s->seq % eng->on),
        .root = eng->call_root, /* the ANs check that members agree */
        .epoch = (uint32_t)(eng->oepoch + s->seq / eng->on),
        .count = (uint32_t)n,
        .total = eng->p.gen, /* CONTRIB carries the generation here */
        .offset = off,
    };
    const uint8_t *data =
        eng->send_data ? eng->sendbuf + off * eng->dsize : NULL;
    size_t len = eng->send_data ? n * eng->dsize : 0;
    /* From the send buffer (not the piece scratch): may leave uncopied. */
    host_send_cb_t send = eng->p.send;

    if (ask) {
        h.flags |= WIRE_F_QUERY | WIRE_F_NODATA;
        data = NULL;
        len = 0;
        eng->ctr.queries++;
    } else if (wire_coll_is_split(eng->kind)) {
        /* Which elements of the segment we want, then our data if any. */
        size_t lo, hi;
        uint32_t po, pn;
        block_span(eng, off, n, &lo, &hi);
        po = lo < hi ? (uint32_t)(lo - off) : 0;
        pn = (uint32_t)(hi - lo);
        for (int b = 0; b < 4; b++) {
            eng->piece[b] = (uint8_t)(po >> (8 * b));
            eng->piece[4 + b] = (uint8_t)(pn >> (8 * b));
        }
        if (data)
            memcpy(eng->piece + WIRE_PIECE_LEN, data, len);
        data = eng->piece;
        len += WIRE_PIECE_LEN;
    } else if (wire_coll_is_gather(eng->kind)) {
        /* The part of our block in this segment, as a piece. */
        size_t lo = off > eng->blk_off ? off : eng->blk_off;
        size_t hi = off + n < eng->blk_off + eng->blk_len
                        ? off + n
                        : eng->blk_off + eng->blk_len;
        data = NULL;
        len = 0;
        h.flags |= WIRE_F_NODATA;
        if (lo < hi) {
            uint32_t po = (uint32_t)(lo - off), pn = (uint32_t)(hi - lo);
            for (int b = 0; b < 4; b++) {
                eng->piece[b] = (uint8_t)(po >> (8 * b));
                eng->piece[4 + b] = (uint8_t)(pn >> (8 * b));
            }
            memcpy(eng->piece + WIRE_PIECE_LEN,
                   eng->sendbuf + (lo - eng->blk_off), pn);
            data = eng->piece;
            len = WIRE_PIECE_LEN + pn;
            h.flags &= (uint16_t)~WIRE_F_NODATA;
        }
    }

    wire_pack(&h, hdr);
    if (data == NULL)
        data = hdr; /* no payload, but never a NULL pointer */
    else if (data != eng->piece && eng->p.send_ref && eng->p.flush)
        send = eng->p.send_ref;
    wire_mac_seal(&eng->p.key, hdr, data, len);
    s->sent_ns = now;
    s->deadline = now + rto_backoff(&eng->rto, (unsigned)s->retries);
    if (s->deadline < eng->dl_next)
        eng->dl_next = s->deadline;
    s->tx = ++eng->tx_seq;
    if (s->ntx < UINT16_MAX)
        s->ntx++;
    s->later = 0;
    s->rack_due = 0;
    eng->ctr.packets_sent++;
    eng->ctr.bytes_sent += WIRE_HDR_LEN + len;
    send(eng->p.send_arg, eng->p.an, hdr, data, len);
    if (eng->twice) {
        /* A small operation goes twice (params.copy_bytes): one loss then
         * costs nothing. The AN drops the copy when it has the first. */
        h.flags |= WIRE_F_COPY;
        wire_pack(&h, hdr);
        wire_mac_seal(&eng->p.key, hdr, data, len);
        eng->ctr.packets_sent++;
        eng->ctr.copies++;
        eng->ctr.bytes_sent += WIRE_HDR_LEN + len;
        send(eng->p.send_arg, eng->p.an, hdr, data, len);
    }
}

static void copy_judge(host_engine_t *eng, seg_t *s);
static void pace_loss(host_engine_t *eng, const seg_t *s, uint64_t now);
static void pace_undo(host_engine_t *eng);

/* Whether the window moves (params.pace or params.window_min). */
static int paced(const host_engine_t *eng)
{
    return eng->p.pace != 0 || eng->p.window_min != 0;
}
static void copy_count(host_engine_t *eng, const wire_hdr_t *h, int sent);

/* The segments that may be in flight now (see pace_sample). */
static uint64_t window_now(const host_engine_t *eng)
{
    uint64_t w = eng->owin;
    if (paced(eng) && !eng->stream && eng->cwnd / 256u < w)
        w = eng->cwnd / 256u;
    return w;
}

/*
 * Sends every segment the window allows: at most the window's segments
 * without a result in flight, and none whose slot still holds a segment
 * without one (seq - slots). The window counts segments in flight, not
 * the span from the oldest one without a result: while a lost segment
 * is repaired the segments after it keep the link busy, up to the slots.
 */
static void fill_window(host_engine_t *eng, uint64_t now)
{
    uint64_t w = window_now(eng);
    while (eng->next_send < eng->nseg && eng->next_send < eng->low + eng->on &&
           eng->next_send - eng->ndone < w) {
        uint64_t seq = eng->base_seq + eng->next_send;
        seg_t *s = &eng->ow[seq % eng->on];
        copy_judge(eng, s); /* the slot's last segment, if not yet */
        s->seq = seq;
        s->state = SEG_SENT;
        s->retries = 0;
        s->resent = 0;
        s->ntx = 0;
        s->dups = 0;
        s->amb_rtt = 0;
        s->twice = (uint8_t)eng->twice;
        s->adapt = (uint8_t)eng->adapt;
        s->nres = 0;
        s->judged = 0;
        s->ahead = 0;
        s->held = 0;
        s->first_ns = now;
        s->silent = (uint8_t)(eng->oneway && !eng->root);
        if (s->silent) {
            /* Nothing to send: the data comes, or the timer resends. */
            s->sent_ns = now;
            s->deadline = now + rto_backoff(&eng->rto, 0);
            if (s->deadline < eng->dl_next)
                eng->dl_next = s->deadline;
            s->tx = ++eng->tx_seq;
            s->later = 0;
            s->rack_due = 0;
        } else if (eng->pre_now) {
            /* Sent at pre_ns on our socket by the member that completed
             * the host's fold (host_engine_presend): counted as ours. */
            eng->pre_now = 0;
            s->first_ns = eng->pre_ns;
            s->sent_ns = eng->pre_ns;
            s->deadline = eng->pre_ns + rto_backoff(&eng->rto, 0);
            if (s->deadline < eng->dl_next)
                eng->dl_next = s->deadline;
            s->tx = ++eng->tx_seq;
            s->ntx = 1;
            s->later = 0;
            s->rack_due = 0;
            eng->ctr.packets_sent++;
            eng->ctr.bytes_sent += WIRE_HDR_LEN + seg_bytes(eng, s);
        } else {
            seg_send(eng, s, now, 0, 0);
        }
        eng->next_send++;
    }
}

static void finish(host_engine_t *eng, incoll_status_t status)
{
    /* What is queued may point into the operation's buffers (send_ref):
     * it leaves before they go back to the caller. */
    if (eng->p.send_ref && eng->p.flush)
        eng->p.flush(eng->p.send_arg);
    eng->status = status;
    if (eng->stream) {
        eng->st_seq = eng->base_seq + eng->nseg;
        if (eng->ops_left > 0)
            eng->ops_left--;
    } else
        eng->next_seq = eng->base_seq + eng->nseg;
    if (status != INCOLL_OK)
        eng->failed = 1;
    else if (eng->mc && !eng->mc_seen &&
             ++eng->mc_ops >= eng->p.mcast_probe_ops) {
        /* Results come, but never by multicast: the fabric does not carry
         * it (or the AN does not send it). Stop asking for it, so no
         * result waits for a repair. */
        eng->mc = 0;
        eng->mc_fell = 1;
    }
    eng->sendbuf = NULL;
    eng->recvbuf = NULL;
    eng->mirror = NULL;
    eng->hedge_due = UINT64_MAX;
}

int host_engine_mcast(const host_engine_t *eng)
{
    return eng->mc ? 1 : eng->mc_fell ? -1 : 0;
}

int host_engine_copying(const host_engine_t *eng)
{
    return eng->copying || eng->aops < eng->follow_until;
}

/* A sign of loss on an operation copy_adapt_bytes covers: the second
 * within COPY_ON_WITHIN operations turns copies on. */
static void copy_loss_sign(host_engine_t *eng)
{
    eng->ctr.loss_signs++;
    if (!eng->copying && eng->last_sign != 0 &&
        eng->aops - eng->last_sign <= COPY_ON_WITHIN) {
        eng->copying = 1;
        eng->ctr.copy_on++;
        incoll_debug("host: group %u: loss seen, small operations go twice",
                     eng->p.group);
    }
    eng->last_sign = eng->aops;
}

/* Judges a finished segment of an operation copy_adapt_bytes covers,
 * once: fewer results than it was due is a sign of loss. Due is one per
 * transmission (the AN answers a duplicate from the result it holds,
 * and a copy not at all), two when the result came flagged TWICE (we or
 * another member sent twice: the AN sends every result and answer
 * twice), so a resend that only a slow machine caused (a tail probe or
 * a timer that fired early) is no sign. Called when the results had time to
 * come (an operation later: the AN sends them back to back, before the next
 * operation's). */
static void copy_judge(host_engine_t *eng, seg_t *s)
{
    unsigned due;
    if (s->state != SEG_DONE || !s->adapt || s->judged)
        return;
    s->judged = 1;
    if (s->silent)
        return; /* its resends asked for data a late root had not sent:
                   the answers it got say nothing about loss */
    due = (s->rtwice ? 2u : 1u) * (s->ntx > 0 ? s->ntx : 1u);
    if (s->nres < due)
        copy_loss_sign(eng);
}

/* How long a hedged operation's copy waits for the result (see the top):
 * hedge_pct percent of the smoothed round trip; no wait before the first
 * sample. */
static uint64_t hedge_wait(const host_engine_t *eng)
{
    return (uint64_t)eng->rto.srtt / 100u * eng->p.hedge_pct;
}

/* The hedge of the running one-packet operation is due: its copy goes
 * unless its result came or the segment was resent already. */
static void hedge_send(host_engine_t *eng, uint64_t now)
{
    seg_t *s = &eng->ow[eng->base_seq % eng->on];
    eng->hedge_due = UINT64_MAX;
    if (s->state != SEG_SENT || s->seq != eng->base_seq || s->ntx != 1)
        return;
    eng->ctr.hedges++;
    seg_send(eng, s, now, 1, 0);
}

/* Whether the operation about to start at now goes twice: always when it
 * is at most copy_bytes; while losses are seen when at most
 * copy_adapt_bytes and one packet (then, with hedge_pct, its copy waits
 * until hedge_due). */
static void copy_decide(host_engine_t *eng, size_t bytes, uint64_t now)
{
    eng->adapt = eng->p.copy_adapt_bytes != 0 &&
                 bytes <= eng->p.copy_adapt_bytes && eng->nseg == 1 &&
                 eng->ow == eng->win;
    if (eng->adapt) {
        eng->aops++;
        /* The operation two before this one had its copies' time. */
        if (eng->base_seq >= 2 && eng->on > 2) {
            seg_t *s = &eng->win[(eng->base_seq - 2) % eng->on];
            if (s->seq == eng->base_seq - 2)
                copy_judge(eng, s);
        }
        if (eng->copying && eng->aops - eng->last_sign > COPY_HOLD) {
            eng->copying = 0;
            eng->ctr.copy_off++;
            incoll_debug("host: group %u: no loss for %d operations, small "
                         "operations go once",
                         eng->p.group, COPY_HOLD);
        }
    }
    eng->hedge_due = UINT64_MAX;
    if (bytes <= eng->p.copy_bytes)
        eng->twice = 1;
    else if (eng->adapt && eng->copying && eng->p.hedge_pct != 0) {
        eng->twice = 0;
        eng->hedge_due = now + hedge_wait(eng);
    } else if (eng->adapt && eng->copying)
        eng->twice = 1;
    else if (eng->adapt && eng->aops <= eng->follow_until)
        eng->twice = 2;
    else
        eng->twice = 0;
}

incoll_status_t host_engine_start(host_engine_t *eng, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  incoll_dtype_t dtype, incoll_op_t op,
                                  uint64_t now_ns)
{
    return host_engine_start_coll(eng, WIRE_COLL_ALLREDUCE, 0, sendbuf, recvbuf,
                                  count, dtype, op, now_ns);
}

incoll_status_t host_engine_start_coll(host_engine_t *eng, wire_coll_t kind,
                                       int root, const void *sendbuf,
                                       void *recvbuf, size_t count,
                                       incoll_dtype_t dtype, incoll_op_t op,
                                       uint64_t now_ns)
{
    if (eng->status == INCOLL_INPROGRESS)
        return INCOLL_ERR_BUSY;
    if (eng->failed)
        return INCOLL_ERR_GROUP_FAILED;
    eng->ctl = 0;
    if (!incoll_op_valid(op, dtype) || (unsigned)kind >= WIRE_COLL_COUNT ||
        (kind == WIRE_COLL_BARRIER && count != 1) ||
        (wire_coll_is_gather(kind) && dtype != INCOLL_UINT8))
        return INCOLL_ERR_INVALID_ARG;
    eng->kind = kind;
    eng->root = root && (kind == WIRE_COLL_REDUCE || kind == WIRE_COLL_BCAST ||
                         kind == WIRE_COLL_GATHER || kind == WIRE_COLL_SCATTER);
    eng->send_data =
        kind == WIRE_COLL_ALLREDUCE || kind == WIRE_COLL_REDUCE ||
        kind == WIRE_COLL_REDUCE_SCATTER ||
        ((kind == WIRE_COLL_BCAST || kind == WIRE_COLL_SCATTER) && eng->root);
    eng->recv_data =
        kind == WIRE_COLL_ALLREDUCE || kind == WIRE_COLL_ALLGATHER ||
        ((kind == WIRE_COLL_REDUCE || kind == WIRE_COLL_GATHER) && eng->root) ||
        (kind == WIRE_COLL_BCAST && !eng->root) ||
        (wire_coll_is_split(kind) && eng->blk_len > 0);
    if (wire_coll_is_gather(kind)) {
        /* Set by host_engine_start_gather; the sendbuf is the block. */
        eng->send_data = 0;
        if (eng->blk_len > 0 && sendbuf == NULL)
            return INCOLL_ERR_INVALID_ARG;
    }
    if ((eng->send_data && sendbuf == NULL) ||
        (eng->recv_data && recvbuf == NULL))
        return INCOLL_ERR_INVALID_ARG;
    if (count == 0) {
        eng->next_root = 0;
        eng->status = INCOLL_OK;
        eng->ctr.ops++;
        return INCOLL_OK;
    }
    eng->dsize = incoll_dtype_size(dtype);
    eng->seg_elems = eng->p.max_payload / eng->dsize;
    if (wire_coll_is_gather(kind) || wire_coll_is_split(kind))
        /* a piece's descriptor must fit too */
        eng->seg_elems = (eng->p.max_payload - WIRE_PIECE_LEN) / eng->dsize;
    eng->sendbuf = sendbuf;
    eng->recvbuf = recvbuf;
    eng->mirrored = 0;
    if (kind != WIRE_COLL_ALLREDUCE)
        eng->mirror = NULL;
    eng->count = count;
    eng->dtype = dtype;
    eng->op = op;
    eng->call_root = eng->next_root;
    eng->next_root = 0;
    eng->mismatch = WIRE_MISMATCH_NONE;
    eng->alive_ns = 0;
    eng->nseg = (count + eng->seg_elems - 1) / eng->seg_elems;
    /* While the group holds a lock every operation streams (all members
     * hold it together), unless it would run past the 65536 uses of each
     * stream slot a lock's epochs allow, or it is small (stream_large_only:
     * no more segments than the group's slots, which carry it in one
     * round): then it takes the slots, on every member alike (the same
     * operation has the same segments on every member). */
    eng->stream = eng->st_n > 0 &&
                  (eng->st_seq + eng->nseg) / eng->st_n < 65535 &&
                  (!eng->p.stream_large_only || eng->nseg > eng->p.slots);
    if (eng->stream) {
        eng->ow = eng->st_segs;
        eng->on = eng->st_n;
        eng->obase = eng->p.slots;
        eng->oepoch = eng->lk_seq << 16;
        eng->owin = eng->st_n;
        eng->base_seq = eng->st_seq;
        eng->ctr.stream_ops++;
        eng->ctr.stream_bytes += count * eng->dsize;
    } else {
        eng->ow = eng->win;
        eng->on = eng->p.slots;
        eng->obase = 0;
        eng->oepoch = 0;
        eng->owin = eng->p.window;
        eng->base_seq = eng->next_seq;
    }
    if (eng->st_timer != eng->stream) {
        rto_t t = eng->rto;
        eng->rto = eng->rto_other;
        eng->rto_other = t;
        eng->st_timer = eng->stream;
    }
    copy_decide(eng, count * eng->dsize, now_ns);
    eng->push = kind == WIRE_COLL_BCAST && eng->root &&
                count * eng->dsize <= eng->p.ahead_bytes;
    {
        /* Every member decides alike: same kind, size and sequence. */
        uint32_t every = host_engine_oneway_every(&eng->p);
        eng->oneway = kind == WIRE_COLL_BCAST && every > 1 && !eng->stream &&
                      eng->nseg == 1 &&
                      count * eng->dsize <= eng->p.ahead_bytes &&
                      eng->base_seq % every != 0;
    }
    eng->next_send = 0;
    eng->low = 0;
    eng->ndone = 0;
    eng->ndata = 0;
    eng->rack_next = UINT64_MAX;
    eng->dl_next = UINT64_MAX;
    eng->last_progress_ns = now_ns;
    eng->probes = 0;
    eng->last_result_ns = 0;
    if (eng->min_rtt)
        eng->min_rtt_prev = eng->min_rtt;
    eng->min_rtt = 0;
    eng->status = INCOLL_INPROGRESS;
    eng->ctr.ops++;
    eng->ctr.segments += eng->nseg;
    /* The operation host_engine_next_hdr described, sent already: only
     * when it still is what the header said (else it goes again, and the
     * AN takes the second as a copy of the first). */
    eng->pre_now = eng->pre_seq == eng->base_seq + 1 && eng->nseg == 1 &&
                   kind == WIRE_COLL_ALLREDUCE && !eng->stream && !eng->twice &&
                   eng->call_root == eng->pre_root && eng->mc == eng->pre_mc &&
                   eng->hedge_due == UINT64_MAX;
    eng->pre_seq = 0;
    fill_window(eng, now_ns);
    eng->pre_now = 0;
    if (eng->recv_data && kind == WIRE_COLL_BCAST && !eng->stream) {
        early_take(eng, now_ns);
        if (eng->status != INCOLL_INPROGRESS)
            return eng->status; /* its data had come */
    }
    return INCOLL_INPROGRESS;
}

/* Resends segment s now: its result is missing while later ones came.
 * The first fast resend of a large allreduce or reduce segment asks
 * (params.ask_bytes); a second, or one after a timeout, carries the
 * data. */
static void fast_retransmit(host_engine_t *eng, seg_t *s, uint64_t now)
{
    int ask =
        !s->resent && eng->send_data && !eng->twice &&
        (eng->kind == WIRE_COLL_ALLREDUCE || eng->kind == WIRE_COLL_REDUCE) &&
        eng->p.ask_bytes != 0 && seg_bytes(eng, s) >= eng->p.ask_bytes;
    s->resent = 1;
    eng->ctr.fast_retransmits++;
    pace_loss(eng, s, now);
    seg_send(eng, s, now, 1, ask);
}

/* The segment of the running slot space in h's slot when h carries its
 * epoch; NULL otherwise (the other slot space, or another epoch). */
static seg_t *seg_of(host_engine_t *eng, const wire_hdr_t *h)
{
    seg_t *s;
    if (eng->ow == NULL || h->slot < eng->obase ||
        h->slot - eng->obase >= eng->on)
        return NULL;
    s = &eng->ow[h->slot - eng->obase];
    return (uint32_t)(eng->oepoch + s->seq / eng->on) == h->epoch ? s : NULL;
}

/* The running operation's segment still without a result that h (a
 * result, or the AN's question) is for; NULL for anything else: a late
 * copy of an earlier result, one of the other slot space, or of a
 * segment that has its result. */
static seg_t *awaited_seg(host_engine_t *eng, const wire_hdr_t *h)
{
    seg_t *s;
    if (eng->status != INCOLL_INPROGRESS || eng->ctl)
        return NULL;
    s = seg_of(eng, h);
    return s && s->state == SEG_SENT && s->seq >= eng->base_seq ? s : NULL;
}

/*
 * A one-segment operation's part that the AN said it holds (WIRE_F_WAIT):
 * the result waits for another member, and a member that is only late (a
 * process descheduled on a busy host, a root that calls later) is no
 * loss, so its timer waits HELD_WAIT_NS (or its backoff when longer, at
 * most the timer's bound) before it asks again. What is left to repair
 * is the loss of the result, or of an aggregate above the leaf AN: the
 * resend the AN answered made an AN that forwarded send its aggregate up
 * again (a tail probe's purpose, so the silence's probes are spent), and
 * the longer wait only costs an operation whose result, or that
 * aggregate, was lost after the AN held its part.
 */
#define HELD_WAIT_NS 20000000ull
static void held_defer(host_engine_t *eng, seg_t *s, uint64_t now)
{
    uint64_t w = rto_backoff(&eng->rto, (unsigned)s->retries);
    if (eng->nseg != 1)
        return;
    if (w < HELD_WAIT_NS)
        w = HELD_WAIT_NS;
    if (w > eng->rto.max_ns)
        w = eng->rto.max_ns;
    if (s->deadline < now + w)
        s->deadline = now + w;
    /* The operation's one segment: the engine's next timeout is its own
     * (kept early, dl_next would wake the member once more for nothing).
     * The resend the AN answered made it send its aggregate up again
     * if it had (agg_core.h), which is what a tail probe is for here: the
     * silence's probes are spent. */
    eng->dl_next = s->deadline;
    eng->probes = 2;
}

/* The AN lacks our contribution to the segment in h's slot (it answered
 * a query, WIRE_F_QUERY): send it again at once. With WIRE_F_WAIT it
 * holds it and waits for another member: our resend arrived, which
 * copy_judge counts as its answer. */
static void on_ask(host_engine_t *eng, const wire_hdr_t *h, uint64_t now)
{
    seg_t *s;
    if (h->flags & WIRE_F_WAIT) {
        copy_count(eng, h, 1);
        /* The path to the AN works both ways and it has our part: the
         * result waits for another member, which may be late. */
        if ((s = awaited_seg(eng, h)) != NULL) {
            s->held = 1;
            eng->alive_ns = now;
            eng->ctr.waits++;
            held_defer(eng, s, now);
        }
        return;
    }
    if ((s = awaited_seg(eng, h)) == NULL) {
        eng->ctr.duplicate_results++;
        return;
    }
    eng->ctr.asked++;
    s->resent = 1;
    seg_send(eng, s, now, 1, 0);
}

/*
 * Loss detection from the order of results (RACK, RFC 8985, with TCP's
 * three duplicate acks): every member sends its segments in the same
 * order and an AN completes a slot as soon as all its children are in, so
 * results come back in the order the segments went out. A result of a
 * segment sent after s while s has none says that s, or another member's
 * s, or the result of s, was lost: s is resent at once after
 * FAST_RETRANS_THRESH such results, or a reordering window after the
 * first (when fewer segments are in flight). The AN answers a duplicate
 * at once (agg_core.h), so the loss costs about one round trip. Only
 * results of segments sent once count: a retransmitted segment's result
 * may answer its first transmission.
 *
 * done was sent once, in index order, so every segment after it was first
 * sent after it: only the segments between the lowest without a result
 * and done can have been sent before it. In order (no hole) that is none,
 * so a result costs O(1) whatever the window, not a walk of it.
 */
static void rack_on_result(host_engine_t *eng, const seg_t *done, uint64_t now)
{
    uint64_t reo = rto_reo_wnd(&eng->rto, 1), end = done->seq - eng->base_seq;

    for (uint64_t i = eng->low; i < end; i++) {
        seg_t *s = &eng->ow[(eng->base_seq + i) % eng->on];
        if (s->state != SEG_SENT || s->tx >= done->tx)
            continue;
        if (++s->later >= FAST_RETRANS_THRESH)
            fast_retransmit(eng, s, now);
        else if (s->rack_due == 0) {
            s->rack_due = now + (reo ? reo : 1);
            if (s->rack_due < eng->rack_next)
                eng->rack_next = s->rack_due;
        }
    }
}

/* The round trip without queueing, or 0 before any sample. */
static uint64_t path_rtt(const host_engine_t *eng)
{
    uint64_t a = eng->min_rtt, b = eng->min_rtt_prev;
    if (a == 0 || (b != 0 && b < a))
        return b;
    return a;
}

/*
 * 1 when the first segment still without a result was last sent before
 * this operation's last result: it waits behind the results that come in
 * at the pace of the slowest link (one packet time apart), not only for a
 * round trip of its own.
 */
static int queued(const host_engine_t *eng)
{
    const seg_t *s;
    if (eng->last_result_ns == 0 || eng->low >= eng->next_send)
        return 0;
    s = &eng->ow[(eng->base_seq + eng->low) % eng->on];
    return s->state == SEG_SENT && s->sent_ns < eng->last_result_ns;
}

/*
 * How long no result may come before the segments without one are late:
 * the timer (core/rto.h), and while segments queue, two gaps between
 * results and four of their deviations. A timer learnt on short round
 * trips (small operations that pass a shaper's bucket at once) may be
 * shorter than one packet time of a slow link; results that come at that
 * pace are not late.
 */
static uint64_t quiet_ns(const host_engine_t *eng)
{
    uint64_t t = rto_backoff(&eng->rto, 0);
    if (queued(eng)) {
        uint64_t g = (uint64_t)(2 * eng->sgap + 4 * eng->gapvar);
        if (g > t)
            t = g;
    }
    return t;
}

/*
 * When the tail probe is due (UINT64_MAX: none). Results come back in
 * order and, while a window streams, one every packet time: a silence of
 * two path round trips (without queueing), or of two gaps between
 * results while segments queue, after the last result means the results
 * still missing were lost, most often at the end of an operation, where
 * no later result can reveal a hole (the probe of RACK's tail loss
 * probe). Two probes per silence, doubling; then only the timeout.
 */
static uint64_t probe_due(const host_engine_t *eng)
{
    uint64_t rtt = path_rtt(eng), pto, due;
    const seg_t *s;
    if (rtt == 0 || eng->probes >= 2 || (eng->oneway && !eng->root))
        return UINT64_MAX; /* (a one-way member waits for the root) */
    if (queued(eng) && (uint64_t)eng->sgap > rtt)
        rtt = (uint64_t)eng->sgap;
    pto = (2 * rtt) << eng->probes;
    if (pto < eng->rto.min_ns)
        pto = eng->rto.min_ns;
    if (pto > quiet_ns(eng))
        return UINT64_MAX; /* the timeout comes first anyway */
    due = eng->last_progress_ns + pto;
    /* An operation of one packet: not before the probe would resend it
     * (tail_probe: sent a path round trip before), else a second probe
     * whose time came with the floor above, right after the first, woke
     * the member to send nothing. (A window that streams keeps its
     * probes as they are: there the first segment without a result is
     * most often queued behind the others, and a probe that waited for
     * it would resend it spuriously.) */
    if (eng->nseg == 1 && eng->low < eng->next_send) {
        s = &eng->ow[(eng->base_seq + eng->low) % eng->on];
        if (s->state == SEG_SENT && s->sent_ns + path_rtt(eng) > due)
            due = s->sent_ns + path_rtt(eng);
    }
    return due;
}

/* Resends the first segment without a result, if it was sent at least a
 * path round trip ago: one packet, whatever the window (a silence that
 * was only a slow member or a descheduled process costs no more). Its
 * result is progress; the next silence probes the next one. */
static void tail_probe(host_engine_t *eng, uint64_t now)
{
    uint64_t rtt = path_rtt(eng);
    eng->probes++;
    for (uint64_t i = eng->low; i < eng->next_send; i++) {
        seg_t *s = &eng->ow[(eng->base_seq + i) % eng->on];
        if (s->state != SEG_SENT)
            continue;
        if (now - s->sent_ns >= rtt) {
            eng->ctr.probes++;
            fast_retransmit(eng, s, now);
        }
        return;
    }
}

/* Sends a lock (type WIRE_LOCK) or unlock round's request to the leaf
 * AN, its retries-th retransmission; returns when to resend it. */
static uint64_t ctl_send_type(host_engine_t *eng, uint8_t type, int retries,
                              uint64_t now)
{
    uint8_t hdr[WIRE_HDR_LEN];
    wire_hdr_t h = {
        .version = WIRE_VERSION,
        .type = type,
        .group = eng->p.group,
        .child = eng->p.child,
        .slot = eng->lk_nops,
        .epoch = type == WIRE_LOCK ? eng->lk_seq + 1 : eng->lk_seq,
        .count = type == WIRE_LOCK ? eng->p.stream_window : 1,
        .total = eng->p.gen,
        .offset = type == WIRE_LOCK ? eng->ticket : 0,
    };
    wire_pack(&h, hdr);
    wire_mac_seal(&eng->p.key, hdr, hdr, 0);
    eng->ctr.packets_sent++;
    eng->ctr.bytes_sent += WIRE_HDR_LEN;
    eng->p.send(eng->p.send_arg, eng->p.an, hdr, hdr, 0);
    return now + rto_backoff(&eng->rto, (unsigned)retries);
}

/* Sends the running lock or unlock round's request to the leaf AN. */
static void ctl_send(host_engine_t *eng, uint64_t now)
{
    eng->ctl_deadline = ctl_send_type(eng, eng->ctl, eng->ctl_retries, now);
}

/* Starts a lock or unlock round. */
static incoll_status_t ctl_start(host_engine_t *eng, uint8_t type,
                                 uint64_t now_ns)
{
    if (eng->status == INCOLL_INPROGRESS)
        return INCOLL_ERR_BUSY;
    if (eng->failed)
        return INCOLL_ERR_GROUP_FAILED;
    eng->ctl = type;
    eng->ctl_retries = 0;
    eng->ctl_first_ns = now_ns;
    eng->status = INCOLL_INPROGRESS;
    ctl_send(eng, now_ns);
    return INCOLL_INPROGRESS;
}

incoll_status_t host_engine_lock(host_engine_t *eng, uint16_t nops,
                                 uint64_t now_ns)
{
    if (eng->p.stream_window == 0)
        return INCOLL_ERR_UNSUPPORTED;
    if (eng->st_n > 0 || eng->ul_bg)
        return INCOLL_ERR_BUSY;
    eng->lk_nops = nops;
    return ctl_start(eng, WIRE_LOCK, now_ns);
}

incoll_status_t host_engine_unlock(host_engine_t *eng, uint64_t now_ns)
{
    if (eng->st_n == 0)
        return INCOLL_OK;
    return ctl_start(eng, WIRE_UNLOCK, now_ns);
}

incoll_status_t host_engine_unlock_bg(host_engine_t *eng, uint64_t now_ns)
{
    if (eng->st_n == 0)
        return INCOLL_OK;
    if (eng->status == INCOLL_INPROGRESS)
        return INCOLL_ERR_BUSY;
    if (eng->failed)
        return INCOLL_ERR_GROUP_FAILED;
    /* Nothing streams any more: operations from now on take the slots,
     * on every member alike (all unlock at the same point), and the
     * stream slots' late results are dropped as of no window. */
    eng->st_n = 0;
    eng->ops_left = 0;
    eng->ul_bg = 1;
    eng->ul_retries = 0;
    eng->ul_first_ns = now_ns;
    eng->ul_deadline = ctl_send_type(eng, WIRE_UNLOCK, 0, now_ns);
    return INCOLL_INPROGRESS;
}

int host_engine_unlock_pending(const host_engine_t *eng)
{
    return eng->ul_bg;
}

uint32_t host_engine_window(const host_engine_t *eng)
{
    if (paced(eng) && eng->cwnd / 256u < eng->p.window)
        return eng->cwnd / 256u;
    return eng->p.window;
}

uint32_t host_engine_stream_window(const host_engine_t *eng,
                                   uint32_t *ops_left_p, unsigned *why_p)
{
    if (ops_left_p)
        *ops_left_p = eng->ops_left;
    if (why_p)
        *why_p = eng->lk_why;
    return eng->st_n;
}

int host_stream_policy_parse(const char *text, uint16_t *nops_p)
{
    char *end = NULL;
    long n;

    if (text == NULL || strcmp(text, "op") == 0) {
        *nops_p = 1;
        return 0;
    }
    if (strcmp(text, "comm") == 0) {
        *nops_p = 0;
        return 0;
    }
    n = strtol(text, &end, 10);
    if (end == text || *end != '\0' || n < 1 || n > 65535)
        return -1;
    *nops_p = (uint16_t)n;
    return 0;
}

int host_engine_stream_wants_lock(const host_engine_t *eng, size_t threshold,
                                  size_t bytes)
{
    return threshold > 0 && bytes >= threshold && eng->p.stream_window > 0 &&
           eng->st_n == 0 &&
           (!eng->p.stream_large_only ||
            bytes > (size_t)eng->p.slots * eng->p.max_payload);
}

int host_engine_stream_wants_unlock(const host_engine_t *eng, uint16_t nops)
{
    return eng->st_n > 0 && nops > 0 && eng->ops_left == 0;
}

/* A LOCK_REP or UNLOCK_REP from the leaf AN. */
static void on_lock_answer(host_engine_t *eng, const wire_hdr_t *h,
                           uint64_t now_ns)
{
    (void)now_ns;
    if (h->type == WIRE_LOCK_REP && (h->flags & WIRE_F_LOST)) {
        /* An AN gave our window to another group (we were quiet too
         * long): a stream operation cannot finish any more. */
        if (eng->st_n == 0 || h->epoch != eng->lk_seq)
            return;
        eng->ctr.locks_lost++;
        eng->st_n = 0;
        incoll_warn("host: group %u: stream lock %u reclaimed by an an",
                    eng->p.group, eng->lk_seq);
        if (eng->status == INCOLL_INPROGRESS && !eng->ctl && eng->stream)
            finish(eng, INCOLL_ERR_GROUP_FAILED);
        return;
    }
    if (h->type == WIRE_UNLOCK_REP && eng->ul_bg) {
        /* The background unlock's answer (no other round runs with it:
         * host_engine_lock waits for it, the unlock needs a lock). */
        if (h->epoch != eng->lk_seq) {
            eng->ctr.duplicate_results++;
            return;
        }
        eng->ul_bg = 0;
        return;
    }
    if (eng->status != INCOLL_INPROGRESS || eng->ctl != h->type - 1 ||
        h->epoch != (eng->ctl == WIRE_LOCK ? eng->lk_seq + 1 : eng->lk_seq)) {
        eng->ctr.duplicate_results++;
        return;
    }
    eng->ctl = 0;
    eng->status = INCOLL_OK;
    if (h->type == WIRE_UNLOCK_REP) {
        eng->st_n = 0;
        eng->ops_left = 0;
        return;
    }
    eng->lk_seq = h->epoch;
    if (h->flags & WIRE_F_REFUSE) {
        eng->lk_why = h->op;
        eng->ticket = h->offset;
        eng->ctr.locks_refused++;
        return;
    }
    if (h->count > eng->p.stream_window) {
        /* Never more than we asked: a broken AN. */
        eng->ctr.dropped++;
        finish(eng, INCOLL_ERR_PROTOCOL);
        return;
    }
    eng->lk_why = WIRE_LOCK_OK;
    eng->ticket = 0;
    eng->st_n = h->count;
    eng->st_seq = 0;
    eng->ops_left = eng->lk_nops;
    memset(eng->st_segs, 0, eng->p.stream_window * sizeof(*eng->st_segs));
    eng->ctr.locks_granted++;
}

/* Resends a lock or unlock round's request (type) when due; after the
 * retries says so, fails the group (the members may now disagree on the
 * lock) and returns -1. */
static int round_timer(host_engine_t *eng, uint8_t type, uint64_t first_ns,
                       int *retries, uint64_t *deadline, uint64_t now_ns)
{
    char ep[32];
    if (now_ns < *deadline)
        return 0;
    if (rto_give_up(&eng->rto, *retries, eng->p.max_retries, first_ns,
                    now_ns)) {
        eng->ctr.timeouts++;
        incoll_error("group %u: no answer to %s %u from an %s after %d "
                     "retries, giving up",
                     eng->p.group, type == WIRE_LOCK ? "lock" : "unlock",
                     type == WIRE_LOCK ? eng->lk_seq + 1 : eng->lk_seq,
                     wire_ep_str(eng->p.an, ep, sizeof(ep)), *retries);
        eng->failed = 1;
        return -1;
    }
    (*retries)++;
    eng->ctr.retransmits++;
    *deadline = ctl_send_type(eng, type, *retries, now_ns);
    return 0;
}

/* The running round's timer: no answer ends it with INCOLL_ERR_TIMEOUT. */
static void ctl_on_time(host_engine_t *eng, uint64_t now_ns)
{
    if (round_timer(eng, eng->ctl, eng->ctl_first_ns, &eng->ctl_retries,
                    &eng->ctl_deadline, now_ns) < 0) {
        eng->ctl = 0;
        eng->st_n = 0;
        eng->status = INCOLL_ERR_TIMEOUT;
    }
}

/* The background unlock's timer: no answer leaves the group failed for
 * the next operation, which recovers; the running one, if any, goes on. */
static void ul_on_time(host_engine_t *eng, uint64_t now_ns)
{
    if (round_timer(eng, WIRE_UNLOCK, eng->ul_first_ns, &eng->ul_retries,
                    &eng->ul_deadline, now_ns) < 0)
        eng->ul_bg = 0;
}

/* The least paced window, in 1/256 segments: params.window_min, else 2. */
static uint64_t pace_floor(const host_engine_t *eng)
{
    return (eng->p.window_min > 2 ? eng->p.window_min : 2) * 256u;
}

/*
 * The moving window, kept across operations, between pace_floor and
 * params.window, for each result that gives a round trip rtt with
 * inflight segments in flight.
 *
 * With params.window_min and no pace, loss-based as TCP Reno: the window
 * starts at the floor and grows by a segment per result (doubling every
 * round trip) up to the threshold the last loss left, then by one
 * segment per window; a loss halves it (pace_loss). A path that sustains
 * more (10 Gbit/s links: the window a 100 Mbit/s link needs keeps them
 * a sixth busy) gets the slots in flight after a few round trips; a
 * lossy one keeps it near the floor, where a resend waits behind few
 * segments.
 *
 * With pace, delay-based as TCP Vegas: a result's round trip rtt against
 * the path's without queueing (path_rtt) tells how many of the inflight
 * segments wait in a queue, q = inflight (rtt - base) / rtt. A window
 * larger than the path holds only lengthens the queue in front of the
 * slowest link (a 100 Mbit/s link queues 64 segments of 8 KiB for 42 ms),
 * and a resend waits behind it, and the timer learns its round trip. So
 * while q < pace the window grows (by one segment per result while
 * q < pace / 2, as a slow start, else by one per window); when q > 2 pace
 * it is set to what the path holds without queueing plus pace.
 */
static void pace_sample(host_engine_t *eng, uint64_t rtt, uint64_t inflight)
{
    uint64_t base = path_rtt(eng), q, w = eng->cwnd, max = eng->p.window * 256u;
    uint64_t min = pace_floor(eng);
    if (!paced(eng) || eng->stream)
        return;
    if (eng->p.pace == 0) {
        /* Loss-based, as TCP Reno: slow start up to the threshold the
         * last loss left, then one segment a window. */
        w += w < eng->ssthresh ? 256 : 65536 / (w ? w : 1);
    } else {
        if (base == 0 || rtt == 0)
            return;
        q = rtt > base ? inflight * (rtt - base) / rtt : 0;
        if (2 * q < eng->p.pace)
            w += 256;
        else if (q < eng->p.pace)
            w += 65536 / (w ? w : 1);
        else if (q > 2u * eng->p.pace) {
            uint64_t t = (inflight * base / rtt + eng->p.pace) * 256;
            if (t < w) {
                w = t;
                eng->ctr.window_cuts++;
            }
        }
    }
    if (w < min)
        w = min;
    if (w > max)
        w = max;
    eng->cwnd = (uint32_t)w;
}

/* A segment was lost (a fast resend or a timeout): as TCP's congestion
 * window, the paced window halves, down to its floor. */
static void pace_loss(host_engine_t *eng, const seg_t *s, uint64_t now)
{
    uint64_t w = eng->cwnd / 2u, min = pace_floor(eng);
    /* Segments sent before the last cut were in flight with the larger
     * window: their losses are the same event. */
    if (!paced(eng) || eng->stream || s->first_ns <= eng->cut_ns)
        return;
    eng->cut_ns = now;
    eng->undo_cwnd = eng->cwnd;
    eng->undo_ssthresh = eng->ssthresh;
    eng->ssthresh = (uint32_t)(w < min ? min : w);
    if (w < min)
        w = min;
    if (w < eng->cwnd)
        eng->ctr.window_cuts++;
    eng->cwnd = (uint32_t)w;
}

/* A resend was spurious (its segment's first transmission was late, not
 * lost, as TCP's DSACK shows): the cut it made is undone. */
static void pace_undo(host_engine_t *eng)
{
    if (eng->undo_cwnd > eng->cwnd) {
        eng->cwnd = eng->undo_cwnd;
        eng->ssthresh = eng->undo_ssthresh;
    }
    eng->undo_cwnd = 0;
}

/*
 * A further result of a segment that was resent: the leaf AN answers a
 * duplicate contribution of a slot it holds the result of, and only that
 * (a result from above is never passed down twice). Once every
 * transmission has been answered so, all of them reached the AN, so the
 * first result answered the first transmission: the resends were
 * spurious (as TCP's DSACK shows) and the round trip and gap it measured
 * are samples after all. This is what teaches the timers a round trip
 * that every segment outlived: a window queued behind a slow link, all of
 * it resent on timers learnt on smaller operations whose packets passed
 * at once. Returns 1 when h was such a result.
 */
static int late_duplicate(host_engine_t *eng, const wire_hdr_t *h)
{
    seg_t *s;
    if (h->flags & WIRE_F_COPY)
        return 0; /* (the AN's second copy is no answer of its own) */
    s = seg_of(eng, h);
    if (s == NULL || s->state != SEG_DONE || s->amb_rtt == 0)
        return 0;
    if (++s->dups + 1 < s->ntx)
        return 1;
    rto_sample(&eng->rto, s->amb_rtt);
    if (s->amb_gap)
        rto_smooth(&eng->sgap, &eng->gapvar, s->amb_gap);
    s->amb_rtt = 0;
    eng->ctr.spurious += s->ntx - 1u;
    pace_undo(eng);
    return 1;
}

/* A further answer for a segment of an operation copy_adapt_bytes
 * covers (copy_judge): of a finished one, the copy of its result or the
 * answer to a resend; with sent 1 (a WIRE_F_WAIT answer) also of one
 * still without a result. */
static void copy_count(host_engine_t *eng, const wire_hdr_t *h, int sent)
{
    seg_t *s;
    if (eng->ow != eng->win || h->slot >= eng->on)
        return;
    s = &eng->win[h->slot];
    if ((s->state == SEG_DONE || (sent && s->state == SEG_SENT)) && s->adapt &&
        s->nres < UINT8_MAX && (uint32_t)(s->seq / eng->on) == h->epoch)
        s->nres++;
}

/* Whether result h describes s, the awaited segment it is for (offset,
 * count, dtype, op, kind), with the segment's offset and elements; a
 * result that does not is counted as dropped. */
static int result_fits(host_engine_t *eng, const wire_hdr_t *h, const seg_t *s,
                       uint64_t *off_p, size_t *n_p)
{
    uint64_t off = (s->seq - eng->base_seq) * eng->seg_elems;
    size_t n =
        eng->count - off < eng->seg_elems ? eng->count - off : eng->seg_elems;

    if (h->offset != off || h->count != n || h->dtype != eng->dtype ||
        h->op != eng->op || wire_flags_kind(h->flags) != eng->kind) {
        eng->ctr.dropped++;
        incoll_debug("host: group %u slot %u: result does not match the "
                     "segment (offset %" PRIu64 "/%" PRIu64 ", count %u/%zu)",
                     eng->p.group, h->slot, h->offset, off, h->count, n);
        return 0;
    }
    *off_p = off;
    *n_p = n;
    return 1;
}

/* A broadcast's data ahead of the round's result (WIRE_F_AHEAD): into
 * the receive buffer, once; the segment still waits for its result. */
static void on_ahead(host_engine_t *eng, const wire_hdr_t *h, const void *buf)
{
    seg_t *s;
    uint64_t off;
    size_t n;
    if (eng->kind != WIRE_COLL_BCAST || !eng->recv_data ||
        (h->flags & WIRE_F_NODATA) || (s = awaited_seg(eng, h)) == NULL ||
        s->ahead) {
        eng->ctr.duplicate_results++;
        return;
    }
    if (!result_fits(eng, h, s, &off, &n))
        return;
    memcpy(eng->recvbuf + off * eng->dsize, (const uint8_t *)buf + WIRE_HDR_LEN,
           n * eng->dsize);
    s->ahead = 1;
    eng->ndata++;
    eng->ctr.ahead++;
}

int host_engine_data_in(const host_engine_t *eng)
{
    return eng->status == INCOLL_INPROGRESS && !eng->ctl &&
           eng->kind == WIRE_COLL_BCAST && eng->recv_data &&
           eng->ndata == eng->nseg;
}

void host_engine_resume(host_engine_t *eng, uint64_t now_ns)
{
    uint64_t quiet = quiet_ns(eng);
    if (eng->status != INCOLL_INPROGRESS || now_ns < eng->last_progress_ns)
        return;
    if (now_ns - eng->last_progress_ns > quiet)
        eng->last_progress_ns = now_ns - quiet;
}

void host_engine_set_root(host_engine_t *eng, uint32_t root)
{
    eng->next_root = root;
}

void host_engine_set_mirror(host_engine_t *eng, void *mirror)
{
    eng->mirror = mirror;
}

size_t host_engine_mirrored(const host_engine_t *eng)
{
    return eng->mirrored;
}

unsigned host_engine_mismatch(const host_engine_t *eng)
{
    return eng->mismatch;
}

const host_engine_params_t *host_engine_params(const host_engine_t *eng)
{
    return &eng->p;
}

void host_engine_abandon(host_engine_t *eng, incoll_status_t status)
{
    if (eng->status == INCOLL_INPROGRESS && status != INCOLL_OK &&
        status != INCOLL_INPROGRESS)
        finish(eng, status);
}

/* A packet whose mac does not check (forged, or of another group under
 * the same id): counted and never used; a mac algorithm other than ours is
 * a misconfiguration, said once. */
static __attribute__((noinline, cold)) void
mac_refused(host_engine_t *eng, incoll_ep_t src, const wire_hdr_t *h)
{
    char ep[32];
    eng->ctr.dropped++;
    if (h->mac_alg == eng->p.key.alg) {
        eng->ctr.bad_mac++;
        return;
    }
    if (eng->ctr.mac_mismatch++ == 0)
        incoll_error("host: group %u: packets from the an at %s are "
                     "authenticated with %s, this process with %s: "
                     "set INCOLL_MAC alike on every host and AN",
                     eng->p.group, wire_ep_str(src, ep, sizeof(ep)),
                     wire_mac_alg_name(h->mac_alg),
                     wire_mac_alg_name(eng->p.key.alg));
}

/* Parses buf into *h and says whether it is for this engine: a result or
 * a lock answer of our group and generation from our AN, in our slots,
 * that authenticates. Counts what it drops. */
static int packet_ours(host_engine_t *eng, incoll_ep_t src, const void *buf,
                       size_t len, wire_hdr_t *h)
{
    if (wire_parse(buf, len, h, NULL) != INCOLL_OK ||
        (h->type != WIRE_RESULT && h->type != WIRE_LOCK_REP &&
         h->type != WIRE_UNLOCK_REP) ||
        h->group != eng->p.group || src != eng->p.an ||
        h->total != eng->p.gen ||
        (h->type == WIRE_RESULT && h->slot >= eng->p.slots + eng->st_n)) {
        eng->ctr.dropped++;
        return 0;
    }
    if ((h->flags & WIRE_F_MCAST) && !(h->flags & WIRE_F_NODATA) &&
        eng->kind == WIRE_COLL_BCAST && eng->root) {
        /* A broadcast's data for the other members: its root gets its
         * result from the leaf by unicast, and drops this copy unread (no
         * mac over data it has). */
        eng->ctr.duplicate_results++;
        eng->ctr.mcast_duplicates++;
        return 0;
    }
    if (!wire_mac_check(&eng->p.key, buf, len)) {
        mac_refused(eng, src, h);
        return 0;
    }
    return 1;
}

/* An error result (WIRE_F_ERROR): the members' calls differ (an AN
 * compared them), and the operation fails on every member, with the
 * reason. */
static __attribute__((noinline, cold)) void on_mismatch(host_engine_t *eng,
                                                        const wire_hdr_t *h)
{
    if (awaited_seg(eng, h) == NULL) {
        eng->ctr.duplicate_results++;
        return;
    }
    eng->mismatch = h->why > WIRE_MISMATCH_NONE && h->why < WIRE_MISMATCH_COUNT
                        ? h->why
                        : WIRE_MISMATCH_KIND;
    eng->ctr.mismatches++;
    incoll_debug("host: group %u slot %u: the members' calls differ (%s)",
                 eng->p.group, h->slot, wire_mismatch_str(eng->mismatch));
    finish(eng, INCOLL_ERR_MISMATCH);
}

/* A result whose data (or its absence) is not what this member takes:
 * dropped. */
static __attribute__((noinline, cold)) void
data_unexpected(host_engine_t *eng, const wire_hdr_t *h, int want)
{
    eng->ctr.dropped++;
    incoll_debug("host: group %u slot %u: result %s data", eng->p.group,
                 h->slot, want ? "without" : "with");
}

/* A split collective's result (WIRE_PIECE_LEN header, then the elements):
 * exactly the elements of our block in the segment at off, span_n of them
 * from span_lo, into the receive buffer. 0 (dropped) when the piece's
 * header says otherwise. */
static int take_piece(host_engine_t *eng, const void *buf, uint64_t off,
                      size_t span_lo, size_t span_n)
{
    const uint8_t *pl = (const uint8_t *)buf + WIRE_HDR_LEN;
    uint32_t po = (uint32_t)pl[0] | (uint32_t)pl[1] << 8 |
                  (uint32_t)pl[2] << 16 | (uint32_t)pl[3] << 24;
    uint32_t pn = (uint32_t)pl[4] | (uint32_t)pl[5] << 8 |
                  (uint32_t)pl[6] << 16 | (uint32_t)pl[7] << 24;
    if (po != span_lo - off || pn != span_n) {
        eng->ctr.dropped++;
        return 0;
    }
    memcpy(eng->recvbuf + (span_lo - eng->blk_off) * eng->dsize,
           pl + WIRE_PIECE_LEN, span_n * eng->dsize);
    return 1;
}

/* Takes the data of result h for segment s (n elements at off) into the
 * receive buffer (and the mirror), when this member takes data; 0 when
 * the result is dropped instead (data where none was due, or none where
 * some was). */
static int take_data(host_engine_t *eng, const wire_hdr_t *h, const void *buf,
                     seg_t *s, uint64_t off, size_t n)
{
    const uint8_t *data = (const uint8_t *)buf + WIRE_HDR_LEN;
    size_t span_lo = 0, span_n = 0;
    int want = eng->recv_data;

    if (wire_coll_is_split(eng->kind)) {
        size_t lo, hi;
        block_span(eng, off, n, &lo, &hi);
        span_lo = lo;
        span_n = hi - lo;
        want = span_n > 0;
    }
    if ((!(h->flags & WIRE_F_NODATA)) != want) {
        data_unexpected(eng, h, want);
        return 0;
    }
    if (!want)
        return 1;
    if (wire_coll_is_split(eng->kind))
        return take_piece(eng, buf, off, span_lo, span_n);
    if (s->ahead)
        return 1;
    memcpy(eng->recvbuf + off * eng->dsize, data, n * eng->dsize);
    if (eng->mirror) {
        memcpy(eng->mirror + off * eng->dsize, data, n * eng->dsize);
        eng->mirrored += n;
    }
    eng->ndata++;
    return 1;
}

/* Segment s has its result h: its state and the counters. */
static void seg_answered(host_engine_t *eng, const wire_hdr_t *h, seg_t *s)
{
    s->state = SEG_DONE;
    if (h->flags & WIRE_F_MCAST)
        eng->ctr.mcast_results++;
    else if (eng->mc && !(eng->kind == WIRE_COLL_BCAST && eng->root))
        eng->ctr.mcast_repaired++;
    if (s->nres < UINT8_MAX)
        s->nres++;
    s->rtwice = (h->flags & WIRE_F_TWICE) != 0;
    if (s->adapt && s->rtwice && s->twice != 1)
        eng->follow_until = eng->aops + COPY_FOLLOW;
    eng->ctr.results++;
}

/* The result of resent segment s came (Karn): which transmission it
 * answers is not known, unless it came sooner after the only resend than
 * any round trip: then the first one, which the resend only joined.
 * Otherwise the late duplicates may tell (late_duplicate). */
static void resent_answered(host_engine_t *eng, seg_t *s, uint64_t gap,
                            uint64_t now_ns)
{
    uint64_t rtt = now_ns - s->first_ns, prtt = path_rtt(eng);
    eng->ctr.recovered++;
    if (s->ntx == 2 && prtt != 0 && now_ns - s->sent_ns < prtt) {
        eng->ctr.spurious++;
        pace_undo(eng);
        rto_sample(&eng->rto, rtt);
        if (gap)
            rto_smooth(&eng->sgap, &eng->gapvar, gap);
    } else {
        s->amb_rtt = rtt ? rtt : 1;
        s->amb_gap = gap;
    }
}

/* What the result of segment s, come at now_ns, teaches the timers: a
 * round-trip sample and the gap since the last result (the pace of
 * results, when the segment was in flight all along). */
static void seg_timed(host_engine_t *eng, seg_t *s, uint64_t now_ns)
{
    uint64_t gap = 0;

    if (eng->last_result_ns != 0 && s->first_ns < eng->last_result_ns &&
        now_ns > eng->last_result_ns)
        gap = now_ns - eng->last_result_ns;
    if (now_ns > eng->last_result_ns)
        eng->last_result_ns = now_ns;
    if (s->silent && !s->resent) {
        /* It waited for the root's data, not for a round trip. */
    } else if (!s->resent && now_ns >= s->first_ns) {
        uint64_t rtt = now_ns - s->first_ns;
        rto_sample(&eng->rto, rtt);
        if (gap)
            rto_smooth(&eng->sgap, &eng->gapvar, gap);
        if (eng->min_rtt == 0 || rtt < eng->min_rtt)
            eng->min_rtt = rtt ? rtt : 1;
        pace_sample(eng, rtt, eng->next_send - eng->low);
    } else if (now_ns >= s->first_ns)
        resent_answered(eng, s, gap, now_ns);
    else
        eng->ctr.recovered++;
}

/* After segment s's result: loss detection from the order of results,
 * the window's low edge, and the operation's end or its next segments. */
static void seg_advance(host_engine_t *eng, const seg_t *s, uint64_t now_ns)
{
    if (!s->resent && !s->silent)
        rack_on_result(eng, s, now_ns);
    eng->ndone++;
    eng->probes = 0;
    if (now_ns > eng->last_progress_ns)
        eng->last_progress_ns = now_ns;
    while (eng->low < eng->next_send &&
           eng->ow[(eng->base_seq + eng->low) % eng->on].state == SEG_DONE)
        eng->low++;
    if (eng->ndone == eng->nseg) {
        finish(eng, INCOLL_OK);
        return;
    }
    fill_window(eng, now_ns);
}

/* A plain result (no query, data ahead or error): for the segment it
 * answers, or a duplicate. */
static void on_result(host_engine_t *eng, const wire_hdr_t *h, const void *buf,
                      uint64_t now_ns)
{
    seg_t *s;
    uint64_t off;
    size_t n;

    copy_count(eng, h, 0);
    if (h->flags & WIRE_F_MCAST)
        eng->mc_seen = 1;
    if (late_duplicate(eng, h) || (s = awaited_seg(eng, h)) == NULL) {
        eng->ctr.duplicate_results++;
        if (h->flags & WIRE_F_MCAST)
            eng->ctr.mcast_duplicates++;
        return;
    }
    if (!result_fits(eng, h, s, &off, &n) || !take_data(eng, h, buf, s, off, n))
        return;
    seg_answered(eng, h, s);
    seg_timed(eng, s, now_ns);
    seg_advance(eng, s, now_ns);
}

/*
 * Early data. With one-way broadcasts and data ahead of rounds
 * (params.ahead_bytes) the ANs send a broadcast's data when its root
 * sends it, which may be before this member started that operation: it
 * may still wait for the result of the one before (a one-way root waits
 * for its acknowledgement, a round for the last member), up to the
 * window of slots behind. Such data for a segment of the slots not yet
 * started is kept (a packet per segment, EARLY_KEEP at most: a round
 * comes every HOST_ONEWAY_EVERY segments, and a member starts a round
 * only once it has every earlier result) and fed to the operation as it
 * starts, instead of being dropped and asked for again after a timeout.
 * 1 when h (buf, len; its mac checked) was kept.
 */
static int early_keep(host_engine_t *eng, const wire_hdr_t *h, const void *buf,
                      size_t len)
{
    uint64_t next, seq, slots = eng->p.slots;
    early_t *e = NULL;

    if (eng->p.ahead_bytes == 0 || h->type != WIRE_RESULT ||
        !(h->flags & (WIRE_F_ONEWAY | WIRE_F_AHEAD)) ||
        (h->flags & (WIRE_F_NODATA | WIRE_F_QUERY | WIRE_F_ERROR)) ||
        wire_flags_kind(h->flags) != WIRE_COLL_BCAST || h->slot >= slots ||
        len > WIRE_HDR_LEN + (size_t)eng->p.max_payload)
        return 0;
    /* The first sequence number of the slots not started yet. */
    next = eng->status == INCOLL_INPROGRESS && !eng->stream && !eng->ctl
               ? eng->base_seq + eng->nseg
               : eng->next_seq;
    seq = next + (h->slot + slots - next % slots) % slots;
    if ((uint32_t)(seq / slots) != h->epoch)
        return 0; /* a segment started already (or far off): as before */
    for (int i = 0; i < EARLY_KEEP; i++) {
        early_t *k = &eng->early[i];
        if (k->len != 0 && k->seq == seq)
            return 1; /* kept already: a copy */
        if (e == NULL && (k->len == 0 || k->seq < next))
            e = k;
    }
    if (e == NULL)
        return 0;
    if (e->pkt == NULL &&
        (e->pkt = malloc(WIRE_HDR_LEN + (size_t)eng->p.max_payload)) == NULL)
        return 0;
    memcpy(e->pkt, buf, len);
    e->len = len;
    e->seq = seq;
    eng->ctr.early++;
    return 1;
}

static void on_packet(host_engine_t *eng, const wire_hdr_t *h, const void *buf,
                      uint64_t now_ns);

/* The operation just started takes the early data kept for its
 * segments; what is older is dropped. */
static void early_take(host_engine_t *eng, uint64_t now_ns)
{
    for (int i = 0; i < EARLY_KEEP; i++) {
        early_t *k = &eng->early[i];
        wire_hdr_t h;
        if (k->len == 0 || k->seq >= eng->base_seq + eng->nseg)
            continue;
        if (k->seq >= eng->base_seq && !eng->stream &&
            eng->status == INCOLL_INPROGRESS &&
            wire_parse(k->pkt, k->len, &h, NULL) == INCOLL_OK)
            on_packet(eng, &h, k->pkt, now_ns);
        k->len = 0;
    }
}

void host_engine_on_packet(host_engine_t *eng, incoll_ep_t src, const void *buf,
                           size_t len, uint64_t now_ns)
{
    wire_hdr_t h;

    if (!packet_ours(eng, src, buf, len, &h) || early_keep(eng, &h, buf, len))
        return;
    on_packet(eng, &h, buf, now_ns);
}

/* A packet of ours (packet_ours), h its header. */
static void on_packet(host_engine_t *eng, const wire_hdr_t *h, const void *buf,
                      uint64_t now_ns)
{
    if (h->type != WIRE_RESULT)
        on_lock_answer(eng, h, now_ns);
    else if (h->flags & WIRE_F_QUERY)
        on_ask(eng, h, now_ns);
    else if (h->flags & WIRE_F_AHEAD)
        on_ahead(eng, h, buf);
    else if (h->flags & WIRE_F_ERROR)
        on_mismatch(eng, h);
    else
        on_result(eng, h, buf, now_ns);
}

/*
 * 1 while the operation waits for a member that has not called it yet:
 * the leaf AN said lately (within a progress timeout) that it holds our
 * part and waits, and no result is later than params.wait_ns. Such an
 * operation neither times out nor gives up on retries (a late member is
 * waited for, as MPI waits); silence from the AN still fails it.
 */
static int waiting_for_member(const host_engine_t *eng, uint64_t now_ns)
{
    return eng->p.wait_ns > eng->p.progress_timeout_ns && eng->alive_ns != 0 &&
           now_ns < eng->alive_ns + eng->p.progress_timeout_ns &&
           now_ns < eng->last_progress_ns + eng->p.wait_ns;
}

void host_engine_on_time(host_engine_t *eng, uint64_t now_ns)
{
    char ep[32];
    int fired = 0;

    if (eng->ul_bg)
        ul_on_time(eng, now_ns);
    if (eng->status != INCOLL_INPROGRESS)
        return;
    if (eng->ctl) {
        ctl_on_time(eng, now_ns);
        return;
    }
    /* A driver's clock may lag the time of the last result it fed (two
     * threads reading the clock): nothing is due before the last result. */
    if (now_ns < eng->last_progress_ns)
        return;
    if (now_ns - eng->last_progress_ns >= eng->p.progress_timeout_ns &&
        !waiting_for_member(eng, now_ns)) {
        uint64_t seq = eng->base_seq + eng->low;
        eng->ctr.timeouts++;
        if (eng->alive_ns != 0 &&
            now_ns < eng->alive_ns + eng->p.progress_timeout_ns)
            incoll_error("group %u slot %" PRIu64 " epoch %" PRIu64
                         ": no result for %" PRIu64 " ms: an %s holds this "
                         "member's part and still waits for other members "
                         "(INCOLL_WAIT_MS), giving up",
                         eng->p.group, eng->obase + seq % eng->on,
                         eng->oepoch + seq / eng->on,
                         (now_ns - eng->last_progress_ns) / 1000000,
                         wire_ep_str(eng->p.an, ep, sizeof(ep)));
        else
            incoll_error("group %u slot %" PRIu64 " epoch %" PRIu64
                         ": no result from an %s for %" PRIu64 " ms, giving up",
                         eng->p.group, eng->obase + seq % eng->on,
                         eng->oepoch + seq / eng->on,
                         wire_ep_str(eng->p.an, ep, sizeof(ep)),
                         (now_ns - eng->last_progress_ns) / 1000000);
        finish(eng, INCOLL_ERR_TIMEOUT);
        return;
    }
    if (now_ns >= eng->hedge_due)
        hedge_send(eng, now_ns);
    if (now_ns >= eng->rack_next) {
        uint64_t next = UINT64_MAX;
        for (uint64_t i = eng->low; i < eng->next_send; i++) {
            seg_t *s = &eng->ow[(eng->base_seq + i) % eng->on];
            if (s->state != SEG_SENT || s->rack_due == 0)
                continue;
            if (s->rack_due <= now_ns)
                fast_retransmit(eng, s, now_ns);
            else if (s->rack_due < next)
                next = s->rack_due;
        }
        eng->rack_next = next;
    }
    if (now_ns >= probe_due(eng))
        tail_probe(eng, now_ns);
    if (now_ns < eng->last_progress_ns + quiet_ns(eng) || now_ns < eng->dl_next)
        return; /* results are still coming, or none is late yet */
    eng->dl_next = UINT64_MAX; /* exact again below (and in seg_send) */
    for (uint64_t i = eng->low; i < eng->next_send; i++) {
        seg_t *s = &eng->ow[(eng->base_seq + i) % eng->on];
        if (s->state == SEG_SENT && s->deadline > now_ns &&
            s->deadline < eng->dl_next)
            eng->dl_next = s->deadline;
        if (s->state != SEG_SENT || s->deadline > now_ns)
            continue;
        if (!fired) {
            rto_timeout(&eng->rto);
            pace_loss(eng, s, now_ns);
            fired = 1;
        }
        if (rto_give_up(&eng->rto, s->retries, eng->p.max_retries, s->first_ns,
                        now_ns) &&
            !waiting_for_member(eng, now_ns)) {
            eng->ctr.timeouts++;
            incoll_error("group %u slot %" PRIu64 " epoch %" PRIu64
                         ": no result from an %s after %d retries, giving up",
                         eng->p.group, eng->obase + s->seq % eng->on,
                         eng->oepoch + s->seq / eng->on,
                         wire_ep_str(eng->p.an, ep, sizeof(ep)), s->retries);
            finish(eng, INCOLL_ERR_TIMEOUT);
            return;
        }
        s->retries++;
        s->resent = 1;
        eng->ctr.retransmits++;
        /* A part the AN said it holds is asked about, not sent again
         * (the kinds whose resends may ask). */
        seg_send(eng, s, now_ns, 1,
                 s->held && eng->send_data && !eng->twice &&
                     (eng->kind == WIRE_COLL_ALLREDUCE ||
                      eng->kind == WIRE_COLL_REDUCE));
    }
}

incoll_status_t host_engine_start_gather(host_engine_t *eng, wire_coll_t kind,
                                         int root, const void *block,
                                         size_t blk_off, size_t blk_len,
                                         void *recvbuf, size_t total,
                                         uint64_t now_ns)
{
    if (!wire_coll_is_gather(kind) || blk_off > total ||
        blk_len > total - blk_off)
        return INCOLL_ERR_INVALID_ARG;
    if (eng->status == INCOLL_INPROGRESS)
        return INCOLL_ERR_BUSY;
    eng->blk_off = blk_off;
    eng->blk_len = blk_len;
    return host_engine_start_coll(eng, kind, root, block, recvbuf, total,
                                  INCOLL_UINT8, INCOLL_OP_SUM, now_ns);
}

incoll_status_t host_engine_start_split(host_engine_t *eng, wire_coll_t kind,
                                        int root, const void *sendbuf,
                                        size_t blk_off, size_t blk_len,
                                        void *block, size_t total,
                                        incoll_dtype_t dtype, incoll_op_t op,
                                        uint64_t now_ns)
{
    if (!wire_coll_is_split(kind) || blk_off > total ||
        blk_len > total - blk_off ||
        (kind == WIRE_COLL_SCATTER && dtype != INCOLL_UINT8))
        return INCOLL_ERR_INVALID_ARG;
    if (eng->status == INCOLL_INPROGRESS)
        return INCOLL_ERR_BUSY;
    eng->blk_off = blk_off;
    eng->blk_len = blk_len;
    return host_engine_start_coll(eng, kind, root, sendbuf, block, total, dtype,
                                  op, now_ns);
}

int host_engine_next_hdr(host_engine_t *eng, size_t count, incoll_dtype_t dtype,
                         incoll_op_t op, uint32_t root,
                         uint8_t hdr[WIRE_HDR_LEN], uint64_t *seq_p)
{
    size_t dsize = incoll_dtype_size(dtype);
    size_t bytes = count * dsize;
    int adapt =
        eng->p.copy_adapt_bytes != 0 && bytes <= eng->p.copy_adapt_bytes;
    uint64_t w = eng->p.window, seq = eng->next_seq;

    if (paced(eng) && eng->cwnd / 256u < w)
        w = eng->cwnd / 256u;
    if (eng->status == INCOLL_INPROGRESS || eng->failed || eng->st_n > 0 ||
        eng->next_root != 0 || count == 0 || dsize == 0 ||
        !incoll_op_valid(op, dtype) || count > eng->p.max_payload / dsize ||
        bytes <= eng->p.copy_bytes ||
        (adapt && (eng->copying || eng->aops + 1 <= eng->follow_until)) ||
        w < 1 || eng->p.slots == 0) {
        return 0;
    }
    {
        wire_hdr_t h = {
            .version = WIRE_VERSION,
            .type = WIRE_CONTRIB,
            .op = (uint8_t)op,
            .dtype = (uint8_t)dtype,
            .group = eng->p.group,
            .child = eng->p.child,
            .flags =
                (uint16_t)(WIRE_F_LAST | wire_kind_flags(WIRE_COLL_ALLREDUCE) |
                           (eng->mc ? WIRE_F_MCAST : 0)),
            .slot = (uint16_t)(seq % eng->p.slots),
            .root = root,
            .epoch = (uint32_t)(seq / eng->p.slots),
            .count = (uint32_t)count,
            .total = eng->p.gen,
            .offset = 0,
        };
        wire_pack(&h, hdr);
    }
    eng->pre_root = root;
    eng->pre_mc = eng->mc;
    *seq_p = seq;
    return 1;
}

void host_engine_presend(host_engine_t *eng, uint64_t seq, uint64_t sent_ns)
{
    eng->pre_seq = seq + 1;
    eng->pre_ns = sent_ns;
}

void host_engine_presend_clear(host_engine_t *eng)
{
    eng->pre_seq = 0;
}

uint64_t host_engine_deadline(const host_engine_t *eng)
{
    uint64_t d, quiet, ul = eng->ul_bg ? eng->ul_deadline : UINT64_MAX;
    if (eng->status != INCOLL_INPROGRESS)
        return ul;
    if (eng->ctl)
        return eng->ctl_deadline;
    d = eng->last_progress_ns + eng->p.progress_timeout_ns;
    if (waiting_for_member(eng, d)) {
        /* Waiting for a late member: until the AN's word gets old, or
         * the wait's end. */
        uint64_t w = eng->last_progress_ns + eng->p.wait_ns;
        d = eng->alive_ns + eng->p.progress_timeout_ns;
        if (w < d)
            d = w;
    }
    /* No retransmission before one timeout without results (see top). The
     * bounds may be early (a segment's result came since), never late: an
     * early call of on_time walks the window and makes them exact. */
    quiet = eng->last_progress_ns + quiet_ns(eng);
    if (eng->dl_next != UINT64_MAX) {
        uint64_t due = eng->dl_next > quiet ? eng->dl_next : quiet;
        if (due < d)
            d = due;
    }
    if (eng->rack_next < d)
        d = eng->rack_next;
    if (eng->hedge_due < d)
        d = eng->hedge_due;
    if (probe_due(eng) < d)
        d = probe_due(eng);
    return ul < d ? ul : d;
}
