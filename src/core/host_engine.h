/*
 * The host protocol engine as a sans-I/O state machine: one per (process,
 * group). It cuts a vector into segments that fit one packet, keeps up to a
 * window of them in flight (one slot each), retransmits a segment whose
 * result is missing while later segments' results came (fast
 * retransmission), the first missing one after two path round trips of
 * silence (tail probe), and one whose result is late (a timeout after its
 * last transmission and a timeout after the operation's last result:
 * results that queue behind others on a slow link are not late; the
 * timer is core/rto.h), copies each segment's result into the user's
 * buffer exactly once, and fails the operation with INCOLL_ERR_TIMEOUT
 * after a bounded number of retries or a bounded time without progress.
 *
 * Slots and epochs come from a per-group segment sequence number that all
 * members advance identically (collectives are called in the same order on
 * every rank): seq -> slot = seq % slots, epoch = seq / slots.
 */
#ifndef INCOLL_HOST_ENGINE_H
#define INCOLL_HOST_ENGINE_H

#include "common/wire_mac.h"

#include <stddef.h>
#include <stdint.h>

typedef struct host_engine host_engine_t;

typedef void (*host_send_cb_t)(void *arg, incoll_ep_t dst, const void *hdr,
                               const void *payload, size_t len);

typedef struct {
    uint32_t group;
    wire_key_t key;       /* the group's mac key (wire_mac.h) */
    uint32_t gen;         /* the job's group generation (agg_core.h) */
    uint16_t child;       /* our child index at the leaf AN */
    incoll_ep_t an;       /* the leaf AN */
    uint32_t slots;       /* slots per group, as configured on the ANs */
    uint32_t window;      /* segments in flight, 1..slots; 0 = slots */
    uint32_t max_payload; /* bytes per packet */
    uint64_t rto_init_ns; /* first retransmission timeout */
    uint64_t rto_min_ns;
    uint64_t rto_max_ns;
    int max_retries;              /* per segment, then INCOLL_ERR_TIMEOUT (and
                                     at least as long as that many backoffs
                                     from rto_init_ns take: core/rto.h) */
    uint64_t progress_timeout_ns; /* no result at all for this long: fail */
    uint64_t wait_ns;             /* while the leaf AN answers that it holds our
                                     contribution and waits for other members
                                     (WIRE_F_WAIT: a member is late, the path works),
                                     an operation waits up to this long without a
                                     result before it fails; 0: progress_timeout_ns */
    uint32_t stream_window;       /* stream slots a lock asks for; 0: the
                                     engine never locks */
    int stream_large_only;        /* while locked, only operations of more
                                     segments than the group's slots stream
                                     (smaller ones take the slots, which
                                     carry them in one round); 0: every
                                     operation streams */
    uint32_t copy_bytes;          /* operations of at most this many bytes send
                                     every packet twice, and so do the ANs for
                                     them (WIRE_F_TWICE); 0: never */
    uint32_t copy_adapt_bytes;    /* operations of at most this many bytes
                                     (one packet) go twice while the engine
                                     sees loss (host_engine.c, adaptive
                                     copies); 0: never */
    uint32_t hedge_pct;           /* while adaptive copies are on, the copy
                                     of a one-packet operation goes only if
                                     its result has not come this many
                                     percent of the smoothed round trip after
                                     the first transmission (a hedge);
                                     0: at once, flagged TWICE */
    uint32_t ask_bytes;   /* a first fast resend of an allreduce or reduce
                             segment of at least this many bytes asks the AN
                             for the result instead of carrying the data
                             (WIRE_F_QUERY); 0: never */
    uint32_t ahead_bytes; /* a broadcast's root asks the ANs to send its
                             data ahead of the round (WIRE_F_PUSH) for
                             operations of at most this many bytes; 0:
                             never */
    uint32_t pace;        /* segments the window may keep queued on the path
                             (delay-based window, see host_engine.c); 0: the
                             window is always `window` */
    uint32_t window_min;  /* with pace: the window starts here and never goes
                             below (a loss halves it down to this); 0: it
                             starts at `window` and goes down to 2 */
    /* Multicast results (docs/multicast.md): 1 when the driver listens on
     * the group's multicast address, so contributions say WIRE_F_MCAST
     * and the leaf AN may send the results there; when the first
     * mcast_probe_ops operations (0: INCOLL_MCAST_PROBE_OPS's default) end
     * without one multicast result, the engine stops saying it
     * (host_engine_mcast turns -1). */
    int mcast;
    uint32_t mcast_probe_ops;
    host_send_cb_t send;
    void *send_arg;
    /* Optional, with flush: sends a contribution whose payload is the
     * operation's send buffer, which stays unchanged until the operation
     * ends, so the driver may send it without copying; flush(send_arg) is
     * called as an operation ends (done or failed), after which nothing
     * queued may point into its buffers. NULL: every packet goes through
     * send. */
    host_send_cb_t send_ref;
    void (*flush)(void *arg);
} host_engine_params_t;

/*
 * One-way broadcasts, acknowledged cumulatively (docs/wire-format.md,
 * "One-way broadcasts"): a broadcast of one packet of at most
 * ahead_bytes whose sequence number is not a multiple of
 * host_engine_oneway_every() is complete at its root once the AN at the
 * tree's root has the data (its acknowledgement), and at every other
 * member once the data is in; those send nothing unless their result is
 * late. The other operations (every `every`-th sequence number at least)
 * are rounds that every member joins, and a member joins one only after
 * it has every earlier result: a round acknowledges all the one-way
 * broadcasts before it, and holds a root that runs ahead (the window).
 * With every <= slots, an AN still holds a one-way result (two epochs
 * per slot) until every member has it, so a member that lost one gets
 * it resent. 0: never one-way (ahead_bytes 0, or one slot).
 * The root's data may reach a member before it started the operation
 * (it still waits for an earlier result): the engine keeps it and the
 * operation takes it as it starts (counters.early), so a one-way
 * broadcast then completes at once, without a packet.
 */
#define HOST_ONEWAY_EVERY 4
uint32_t host_engine_oneway_every(const host_engine_params_t *p);

typedef struct {
    uint64_t ops;
    uint64_t segments;
    uint64_t packets_sent;
    uint64_t bytes_sent;       /* including headers */
    uint64_t retransmits;      /* on a timeout */
    uint64_t fast_retransmits; /* on later segments' results (no timeout) */
    uint64_t recovered;        /* results of segments sent more than once */
    uint64_t probes;           /* tail probes (their resends count as fast) */
    uint64_t queries;          /* fast resends that asked the AN instead of
                                  carrying the data (WIRE_F_QUERY; in
                                  fast_retransmits) */
    uint64_t asked;            /* the AN lacked our contribution: resent (not in
                                  the retransmission counters) */
    uint64_t copies;           /* second copies of small operations' packets
                                  (in packets_sent; params.copy_bytes) */
    uint64_t copy_on;          /* adaptive copies turned on (copy_adapt_bytes:
                                  two signs of loss close together) */
    uint64_t copy_off;         /* ... and off (no sign for COPY_HOLD ops) */
    uint64_t hedges;           /* delayed copies (params.hedge_pct): results
                                  late while copies were on (in packets_sent,
                                  not in the retransmission counters) */
    uint64_t loss_signs;       /* of the operations copy_adapt_bytes covers:
                                  resent, or a result's copy missing */
    uint64_t window_cuts;      /* pacing: the window set down to the path's
                                  measured capacity (params.pace) */
    uint64_t spurious; /* timeouts undone: the first transmission's result
                          came (also in recovered) */
    uint64_t results;
    uint64_t ahead; /* broadcast segments whose data came ahead of the
                       round's result (WIRE_F_AHEAD) */
    uint64_t early; /* broadcast data (one-way, or ahead of a round) that
                       came before its operation started here, kept and
                       taken when it started (host_engine.c, "Early
                       data") */
    uint64_t duplicate_results;
    uint64_t mcast_results;    /* results that came by multicast */
    uint64_t mcast_duplicates; /* multicast copies of results we had
                                  (also in duplicate_results) */
    uint64_t mcast_repaired;   /* results that came by unicast while
                                  listening: the multicast copy was lost
                                  (repair) or the unicast one won (dual) */
    uint64_t dropped;          /* malformed or foreign packets */
    uint64_t bad_mac;          /* results whose mac failed (also in dropped) */
    uint64_t mac_mismatch;     /* results of another mac algorithm (also in
                                  dropped; an error the first time) */
    uint64_t timeouts;
    uint64_t waits;      /* answers that the AN holds our contribution
                            and waits for other members (WIRE_F_WAIT) */
    uint64_t mismatches; /* operations the ANs failed: the members'
                            calls differ (WIRE_F_ERROR) */
    uint64_t locks_granted;
    uint64_t locks_refused;
    uint64_t locks_lost; /* reclaimed by an AN while we held them */
    uint64_t stream_ops;
    uint64_t stream_bytes; /* user bytes of operations that streamed */
} host_engine_counters_t;

/* 1 while listening for multicast results, 0 when not asked to, -1 after
 * giving up: the first operations brought none (params.mcast). */
int host_engine_mcast(const host_engine_t *eng);

/* 1 while operations of at most params.copy_adapt_bytes go twice: the
 * engine saw loss, or follows another member that did. */
int host_engine_copying(const host_engine_t *eng);

/* Fills params with defaults for the timing fields. */
void host_engine_params_default(host_engine_params_t *params);

host_engine_t *host_engine_create(const host_engine_params_t *params);
void host_engine_destroy(host_engine_t *eng);

/*
 * Starts an allreduce. sendbuf and recvbuf must not overlap (the library
 * stages in-place operations) and must stay valid until the operation ends.
 * Returns INCOLL_OK when it is already complete (count 0), INCOLL_INPROGRESS
 * when packets are out, INCOLL_ERR_BUSY if an operation is running,
 * INCOLL_ERR_GROUP_FAILED if an earlier operation failed (the members are
 * out of step and the group must be rebuilt).
 */
incoll_status_t host_engine_start(host_engine_t *eng, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  incoll_dtype_t dtype, incoll_op_t op,
                                  uint64_t now_ns);

/*
 * Starts a collective of the given kind (wire.h); host_engine_start is
 * the allreduce. root is 1 on the root rank of a reduce or broadcast.
 *  - REDUCE: every rank sends sendbuf; only the root gets the result in
 *    recvbuf (others get payload-free acknowledgements; recvbuf unused).
 *  - BCAST: the root sends sendbuf (count elements, usually UINT8) and
 *    gets an acknowledgement; the others send headers only and get the
 *    data in recvbuf.
 *  - BARRIER: count 1 (any dtype, e.g. UINT8 with SUM), no payload and
 *    no buffers.
 * Same returns as host_engine_start (INCOLL_OK also for a broadcast
 * whose data came before it started); INCOLL_ERR_INVALID_ARG when a
 * buffer the kind needs is NULL.
 */
incoll_status_t host_engine_start_coll(host_engine_t *eng, wire_coll_t kind,
                                       int root, const void *sendbuf,
                                       void *recvbuf, size_t count,
                                       incoll_dtype_t dtype, incoll_op_t op,
                                       uint64_t now_ns);

/*
 * Starts an allgather or gather (kind WIRE_COLL_ALLGATHER or _GATHER) of a
 * vector of total bytes, of which this member's block is bytes
 * [blk_off, blk_off + blk_len) and reads from block. The ANs concatenate
 * the members' blocks; the whole vector lands in recvbuf on every member
 * (allgather) or on the root only (gather: others may pass NULL). Every
 * member passes the same total. host_engine_start_coll with a gather kind
 * is for this function only.
 */
incoll_status_t host_engine_start_gather(host_engine_t *eng, wire_coll_t kind,
                                         int root, const void *block,
                                         size_t blk_off, size_t blk_len,
                                         void *recvbuf, size_t total,
                                         uint64_t now_ns);

/*
 * Starts a scatter (kind WIRE_COLL_SCATTER, bytes: dtype UINT8) or a
 * reduce_scatter (WIRE_COLL_REDUCE_SCATTER) of a vector of total elements
 * of which this member's block is [blk_off, blk_off + blk_len): it lands
 * in block (blk_len elements). sendbuf is the whole vector: the root's
 * (scatter; others pass NULL) or every member's input (reduce_scatter).
 */
incoll_status_t host_engine_start_split(host_engine_t *eng, wire_coll_t kind,
                                        int root, const void *sendbuf,
                                        size_t blk_off, size_t blk_len,
                                        void *block, size_t total,
                                        incoll_dtype_t dtype, incoll_op_t op,
                                        uint64_t now_ns);

/*
 * Streaming (docs/streaming.md). host_engine_lock starts a lock round for
 * a window of params.stream_window stream slots, for nops operations (0:
 * until host_engine_unlock); every member calls it at the same point of
 * its sequence of operations. It ends (status INCOLL_OK) granted or
 * refused; a refusal is no error: operations keep using the slots. While
 * granted, every operation streams through the window. After the lock's
 * operations (ops_left reaches 0) or whenever the caller is done, it
 * calls host_engine_unlock (every member, at the same point). No answer
 * after the retries: INCOLL_ERR_TIMEOUT and the group fails, as an
 * operation would. Returns INCOLL_INPROGRESS, INCOLL_ERR_BUSY (running, or
 * already locked), INCOLL_ERR_UNSUPPORTED (stream_window 0),
 * INCOLL_ERR_GROUP_FAILED.
 */
incoll_status_t host_engine_lock(host_engine_t *eng, uint16_t nops,
                                 uint64_t now_ns);
/* Starts the unlock round; INCOLL_OK at once when not locked. */
incoll_status_t host_engine_unlock(host_engine_t *eng, uint64_t now_ns);
/*
 * Starts the unlock round in the background (docs/streaming.md, *Unlock*):
 * the lock is no longer used at once (operations take the slots, on every
 * member alike), the round runs beside them, progressed by on_packet and
 * on_time (host_engine_deadline includes it), and host_engine_unlock_pending
 * says 1 until its answer is in. host_engine_lock returns INCOLL_ERR_BUSY
 * until then. No answer after the retries fails the group. Returns
 * INCOLL_INPROGRESS, INCOLL_OK at once when not locked, INCOLL_ERR_BUSY
 * while an operation or round runs, INCOLL_ERR_GROUP_FAILED.
 */
incoll_status_t host_engine_unlock_bg(host_engine_t *eng, uint64_t now_ns);
int host_engine_unlock_pending(const host_engine_t *eng);
/* The segments the window lets be in flight now (params.pace moves it
 * within params.window_min (or 2)..params.window). */
uint32_t host_engine_window(const host_engine_t *eng);

/* The stream window granted (0: not locked); *ops_left_p the operations
 * the lock is still for (0 with a lock until released), *why_p the last
 * refusal's reason (wire_lock_why_t). Either may be NULL. */
uint32_t host_engine_stream_window(const host_engine_t *eng,
                                   uint32_t *ops_left_p, unsigned *why_p);

/*
 * The streaming policy of libincoll's blocking allreduce (docs/streaming.md,
 * "In libincoll"), here so that the library and the simulator run the
 * same one. host_stream_policy_parse reads INCOLL_STREAM_LOCK's text:
 * "op" (or NULL) is 1 operation, "comm" 0 (until released), or a number
 * 1..65535; returns -1 on anything else. host_engine_stream_wants_lock:
 * an operation of bytes locks first when threshold is set, bytes reach it,
 * no lock is held and the operation would stream (stream_large_only: more
 * bytes than the group's slots carry in one round).
 * host_engine_stream_wants_unlock: after an operation, the lock goes when it
 * was for nops > 0 operations and they are used up.
 */
int host_stream_policy_parse(const char *text, uint16_t *nops_p);
int host_engine_stream_wants_lock(const host_engine_t *eng, size_t threshold,
                                  size_t bytes);
int host_engine_stream_wants_unlock(const host_engine_t *eng, uint16_t nops);

/* Feeds one received datagram. */
void host_engine_on_packet(host_engine_t *eng, incoll_ep_t src, const void *buf,
                           size_t len, uint64_t now_ns);

/* Retransmits what is due and checks the time limits. A now_ns earlier
 * than the last packet fed does nothing. */
void host_engine_on_time(host_engine_t *eng, uint64_t now_ns);

/*
 * Sending an operation's one packet from another process (node mode's
 * shared socket, src/host/hier.c): host_engine_next_hdr packs into hdr
 * (unsealed: the sender seals it over the data with the engine's key)
 * the header of the first transmission of the next allreduce of count
 * elements whose root field (host_engine_set_root) is root, if that
 * operation would go in one packet, once, from the window's slots (no
 * copy, no stream lock), and gives its sequence number; 0 when it would
 * not. The header asks for a multicast result (WIRE_F_MCAST) while the
 * engine listens for one. host_engine_presend says that packet went at
 * sent_ns: the operation, when it starts with that sequence number and
 * still as described (listening as then too), does not send it again
 * (its resends go as usual). host_engine_presend_clear forgets it.
 */
int host_engine_next_hdr(host_engine_t *eng, size_t count, incoll_dtype_t dtype,
                         incoll_op_t op, uint32_t root,
                         uint8_t hdr[WIRE_HDR_LEN], uint64_t *seq_p);
void host_engine_presend(host_engine_t *eng, uint64_t seq, uint64_t sent_ns);
void host_engine_presend_clear(host_engine_t *eng);

/* When on_time() must next be called; UINT64_MAX if nothing is pending. */
uint64_t host_engine_deadline(const host_engine_t *eng);

/* INCOLL_INPROGRESS while running, else the result of the last operation. */
incoll_status_t host_engine_status(const host_engine_t *eng);

/*
 * 1 while the running operation is a broadcast's at a non-root whose every
 * segment has its data (come ahead of the round, WIRE_F_AHEAD, or with
 * its result): the caller may return with the data while the operation
 * still waits for the round's results (the ANs' acknowledgement that
 * lets the slots be used again). Nothing is written to the receive buffer
 * any more; the operation must still run to its end (host_engine_status)
 * before the next one starts.
 */
int host_engine_data_in(const host_engine_t *eng);

/* The running operation was left unattended until now_ns (its data was
 * in, host_engine_data_in): that time counts neither toward its progress
 * timeout nor as silence that makes results late twice over; a segment
 * whose retransmission is due goes at once. */
void host_engine_resume(host_engine_t *eng, uint64_t now_ns);

/* Ends the running operation with status (not INCOLL_OK): the group
 * failed under it. The engine then refuses further operations, as after
 * any failure. */
void host_engine_abandon(host_engine_t *eng, incoll_status_t status);

/* The root rank of the next operation started (a reduce's, broadcast's,
 * gather's or scatter's; every member passes the same), carried in its
 * contributions so that the ANs can tell members that disagree about it;
 * 0 for an operation started without it. */
void host_engine_set_root(host_engine_t *eng, uint32_t root);

/*
 * The next allreduce started also writes its result, segment by segment
 * as each arrives, into mirror (count elements, not overlapping the
 * operation's buffers): a second copy made from the packet while it is in
 * the cache, for a caller that keeps one copy of the result and hands the
 * other back (a communicator's kept result and the caller's recvbuf),
 * instead of copying the whole result once more at the end. NULL stops
 * it; the operation's end stops it too. host_engine_mirrored() is the
 * number of elements the last operation started wrote into mirror: all of
 * them (count) when the copy is whole.
 */
void host_engine_set_mirror(host_engine_t *eng, void *mirror);
size_t host_engine_mirrored(const host_engine_t *eng);

/* Why the last operation failed with INCOLL_ERR_MISMATCH (an AN saw the
 * members' calls differ: wire_mismatch_t), else WIRE_MISMATCH_NONE. */
unsigned host_engine_mismatch(const host_engine_t *eng);

/* The parameters the engine was made with (to make another on the same
 * group, e.g. with another generation). */
const host_engine_params_t *host_engine_params(const host_engine_t *eng);

const host_engine_counters_t *host_engine_counters(const host_engine_t *eng);

#endif
