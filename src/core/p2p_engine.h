/*
 * The point-to-point engine of the host-based algorithms, as a sans-I/O
 * state machine: one per (process, communicator). It runs an allreduce
 * schedule (core/algo.h) step by step: in each step it sends a block of the
 * working buffer to one peer and receives a block from one peer, reliably
 * over a transport that may drop, duplicate, reorder and delay datagrams,
 * then reduces or copies the received block into the working buffer. No
 * sockets and no clocks: packets and the time come in through
 * p2p_engine_on_packet()/p2p_engine_on_time(), packets go out through the
 * send callback. The host library drives it over UDP (src/host/fallback.c),
 * the tests over an in-memory network (tests/test_p2p.c).
 *
 * Blocks are named per (sender, receiver) pair: the n-th block rank a sends
 * to rank b in the communicator's life is transfer n of that pair. Both
 * ends count alike because every rank runs the same schedules in the same
 * order and a schedule pairs each send with the peer's receive.
 *
 * Protocol (wire.h: WIRE_P2P_DATA, WIRE_P2P_ACK):
 *   DATA  group: the communicator's, mac under its key; child: the sender's
 *         rank; op, dtype, root and call_hash (a hash of the
 *         schedule and the count): the sender's call, which the receiver
 *         compares with its own (different calls fail with
 *         INCOLL_ERR_MISMATCH, their data never used);
 *         epoch: transfer number (low 32 bits); offset: byte offset in the
 * block, a multiple of the packet size (max_payload, which must be the same on
 * every rank); count: payload bytes; total: the block's size in bytes (low 32
 * bits), so a receiver expecting another size (ranks called with different
 * counts) fails loudly. ACK   child: the acknowledging rank; epoch: the
 * transfer; offset: cumulative ack (packets 0..offset-1 all arrived); payload
 * (count bytes): a bitmap of the packets offset, offset+1, ... that arrived
 *         (selective acks). Flags: WIRE_F_P2P_DONE (the whole block arrived,
 *         no bitmap), WIRE_F_P2P_FIRST (every packet of the block stored
 *         so far came in its first transmission: a resend of any of them
 *         was needless), WIRE_F_P2P_PROBE (the receiver is waiting: resend
 *         what it lacks now), WIRE_F_P2P_BEHIND (the acknowledging rank
 *         has not reached that block yet: it is alive, keep waiting).
 * Receivers store a packet once (a bitmap per block) at its offset, ack
 * every few packets and at the end of each received batch, re-ack a
 * consumed block with DONE whenever its data comes again (the last ack was
 * lost), and keep blocks peers send ahead of time (in a small pool of
 * slots, one always spare for the current step). Senders keep a window of
 * packets in flight, retransmit on an adaptive timeout with backoff (as
 * host_engine: only once acks of anything new have also stopped for a timeout)
 * or at once when three later packets were acked (fast retransmit), and fail
 * with INCOLL_ERR_TIMEOUT after max_retries silent retransmissions (and
 * at least the time that many backoffs from rto_init take, core/rto.h) or
 * progress_timeout without any progress. One exception: when a rank's
 * result is complete and only the ack of its last block is missing, a
 * silent peer has most likely finished and left, so the operation ends
 * with success (a peer that really lacked the block fails on its side).
 * Finalize should still linger (p2p_engine_linger) to answer peers whose
 * last ack was lost.
 */
#ifndef INCOLL_P2P_ENGINE_H
#define INCOLL_P2P_ENGINE_H

#include "common/wire_mac.h"
#include "core/algo.h"

#include <stddef.h>
#include <stdint.h>

#define P2P_WINDOW_MAX 512  /* packets in flight per step (ack bitmap bits) */
#define P2P_MAX_RANKS 65535 /* ranks travel in the 16-bit child field */

typedef struct p2p_engine p2p_engine_t;

/* Sends one datagram: hdr is WIRE_HDR_LEN bytes, then len payload bytes.
 * Both are valid only during the call (copy them). */
typedef void (*p2p_send_cb_t)(void *arg, incoll_ep_t dst, const void *hdr,
                              const void *payload, size_t len);

typedef struct {
    uint32_t group;           /* the communicator's id on the wire */
    wire_key_t key;           /* its mac key: secret (wire_mac.h) */
    int rank;                 /* this process's rank in the communicator */
    int size;                 /* 1..P2P_MAX_RANKS */
    const incoll_ep_t *peers; /* size endpoints, by rank (copied) */
    uint32_t max_payload;     /* bytes per packet, the same on every rank */
    uint32_t window; /* packets in flight, 1..P2P_WINDOW_MAX; 0: the default */
    uint32_t ack_every;   /* ack after this many new packets; 0 = window/8 */
    uint64_t rto_init_ns; /* first retransmission timeout */
    uint64_t rto_min_ns;
    uint64_t rto_max_ns;
    int max_retries;              /* silent retransmissions of one packet */
    uint64_t progress_timeout_ns; /* no progress at all for this long: fail */
    p2p_send_cb_t send;
    void *send_arg;
} p2p_engine_params_t;

typedef struct {
    uint64_t ops;
    uint64_t steps;
    uint64_t packets_sent;     /* data packets, retransmissions included */
    uint64_t bytes_sent;       /* data payload bytes */
    uint64_t retransmits;      /* on timeout */
    uint64_t fast_retransmits; /* on selective acks or a probe */
    uint64_t spurious;         /* fast retransmissions found needless */
    uint64_t needless;         /* resent packets acked with WIRE_F_P2P_FIRST */
    uint64_t acks_sent;
    uint64_t acks_received;
    uint64_t data_received; /* data packets stored */
    uint64_t duplicates;    /* data packets already stored */
    uint64_t stale;         /* data of consumed blocks (re-acked) */
    uint64_t early;         /* data stored ahead of its step */
    uint64_t refused;       /* data too far ahead or too large to keep */
    uint64_t probes;        /* probes sent */
    uint64_t dropped;       /* malformed, foreign or mismatched packets */
    uint64_t bad_mac;       /* packets whose mac failed (also dropped) */
    uint64_t timeouts;
    uint64_t assumed_acked;  /* last block never acked: peer gone, done */
    uint64_t after_finalize; /* data or probes of a later operation
                              * while lingering: left unanswered */
} p2p_engine_counters_t;

/* Fills the timing fields of params with defaults. */
void p2p_engine_params_default(p2p_engine_params_t *params);

/* Returns NULL on bad parameters or without memory. The caller destroys
 * the engine; it owns its buffers, the caller owns the working buffers. */
p2p_engine_t *p2p_engine_create(const p2p_engine_params_t *params);
void p2p_engine_destroy(p2p_engine_t *eng);

/*
 * Starts an allreduce of count elements with the schedule kind: work holds
 * this rank's contribution and receives the result; it must stay valid and
 * untouched until the operation ends. Grows the engine's buffers (the only
 * allocation, not per packet). Returns INCOLL_OK when already complete
 * (size 1 or count 0), INCOLL_INPROGRESS while packets are out,
 * INCOLL_ERR_BUSY if an operation is running, INCOLL_ERR_GROUP_FAILED if an
 * earlier operation failed (the ranks are out of step),
 * INCOLL_ERR_INVALID_ARG or INCOLL_ERR_NO_MEMORY.
 */
incoll_status_t p2p_engine_allreduce(p2p_engine_t *eng, algo_kind_t kind,
                                     void *work, size_t count,
                                     incoll_dtype_t dtype, incoll_op_t op,
                                     uint64_t now_ns);

/*
 * Starts collective algorithm id (core/algo.h: algo_coll_schedule) with
 * root, count elements per block and segment seg over the working buffer
 * work, laid out as algo.h says for the collective (algo_coll_work_count()
 * elements); op matters only for the reductions (any valid op for the
 * others). Same returns as p2p_engine_allreduce(). Collectives and
 * allreduces share the per-pair transfer numbering, so every rank must run
 * the same sequence of operations on the engine.
 */
incoll_status_t p2p_engine_coll(p2p_engine_t *eng, algo_calgo_t id, int root,
                                void *work, size_t count, size_t seg,
                                incoll_dtype_t dtype, incoll_op_t op,
                                uint64_t now_ns);

/* Feeds one received datagram (from src). Call it whether or not an
 * operation is running: peers ahead or behind need answers. */
void p2p_engine_on_packet(p2p_engine_t *eng, incoll_ep_t src, const void *buf,
                          size_t len, uint64_t now_ns);

/* Sends pending acks, retransmits what is due and checks the time limits.
 * Call it after each batch of received packets and at the deadline. */
void p2p_engine_on_time(p2p_engine_t *eng, uint64_t now_ns);

/* When on_time() must next be called: now (0) when acks are pending,
 * UINT64_MAX when nothing is. */
uint64_t p2p_engine_deadline(const p2p_engine_t *eng);

/* INCOLL_INPROGRESS while running, else the result of the last operation. */
incoll_status_t p2p_engine_status(const p2p_engine_t *eng);

/* A tag of the next operation started (an allreduce that carries
 * another collective: its kind and root), carried as its root so that
 * receivers whose tag differs fail; 0 for none. */
void p2p_engine_set_tag(p2p_engine_t *eng, uint32_t tag);

/* 1 when the engine holds data of a block it has not started (a peer
 * is in an operation this rank has not reached), or refused some. */
int p2p_engine_early_held(const p2p_engine_t *eng);

/* Ends the running operation with status (an error): the caller gives
 * it up (another member recovers the communicator). The engine then
 * refuses further operations, as after any failure. */
void p2p_engine_abandon(p2p_engine_t *eng, incoll_status_t status);

/* Why the last operation failed with INCOLL_ERR_MISMATCH: a peer's call
 * (its data packets' op, dtype, root and schedule) differs from this
 * rank's (wire_mismatch_t); WIRE_MISMATCH_NONE otherwise. */
unsigned p2p_engine_mismatch(const p2p_engine_t *eng);

/*
 * Finalize: keeps answering peers whose last ack from us was lost before
 * the process goes away. Call it (feeding received packets to
 * p2p_engine_on_packet and calling p2p_engine_on_time in between) until it
 * returns 0; otherwise it returns when to call it next. It re-sends the
 * DONE acks of the last block received from each peer a few times, spaced
 * out, and lasts until rto_max (the longest a retrying peer waits between
 * retransmissions) passed without data or a probe from a peer. Returns 0
 * at once when no operation completed. A lingering engine answers only
 * about blocks it already received (DONE again); a peer that waits in an
 * operation this rank never calls gets no answer (no BEHIND) and fails
 * with a timeout within its own limits, instead of both staying alive.
 */
uint64_t p2p_engine_linger(p2p_engine_t *eng, uint64_t now_ns);

const p2p_engine_counters_t *p2p_engine_counters(const p2p_engine_t *eng);

#endif
