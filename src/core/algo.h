/*
 * Host-based allreduce algorithms as schedules: pure functions that list,
 * for one rank, the exchanges it makes with its peers. The host library
 * runs a schedule over the UDP point-to-point transport (src/host), the
 * simulator over SimGrid mailboxes (src/sim): the same algorithm in both.
 *
 * A schedule is a list of steps run in order. In a step the rank may send
 * a block of its working buffer to one peer and receive a block from one
 * peer (often the same one); the received block is either reduced into the
 * working buffer or copied over it. Blocks are element ranges. A step is
 * complete when its block has arrived and its own block has been delivered;
 * only then is the received block applied (the send block may overlap it).
 *
 * Guarantees, checked by tests/test_algo.c for every size and count:
 * - Every rank's schedule has the same number of steps, and a send in step i
 *   is matched by the peer's receive in step i of the same block (offset and
 *   count), so a transport can name an exchange by its step index alone.
 *   Ranks idle in a phase get empty steps (both peers -1).
 * - Empty blocks are never sent: send_peer/recv_peer are -1 when the count
 *   is 0 (count < size leaves some ring blocks empty).
 * - Every rank ends with the same bits: recursive doubling partners both
 *   compute op(lower rank's data, higher rank's data) (recv_left says which
 *   side the received block goes); ring and Rabenseifner reduce each block
 *   on one chain of ranks only and then copy it everywhere. In the ring the
 *   received partial result is always the left operand (a left fold in ring
 *   order); elsewhere the lower rank's data is on the left.
 * - A copy step's receive block never overlaps its send block, so a
 *   transport may write it straight into the working buffer.
 */
#ifndef INCOLL_ALGO_H
#define INCOLL_ALGO_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    ALGO_INC = 0,          /* in-network (not a schedule: the AN tree) */
    ALGO_RD = 1,           /* recursive doubling, for small vectors */
    ALGO_RING = 2,         /* ring reduce-scatter + ring allgather */
    ALGO_RABENSEIFNER = 3, /* recursive-halving reduce-scatter + recursive-
                              doubling allgather */
    ALGO_COUNT
} algo_kind_t;

typedef struct {
    int send_peer;   /* -1: nothing to send */
    size_t send_off; /* elements */
    size_t send_count;
    int recv_peer; /* -1: nothing to receive */
    size_t recv_off;
    size_t recv_count;
    int recv_reduce; /* 1: buf = op(...) with the block, 0: copy it in */
    int recv_left;   /* 1: received data is the left operand */
} algo_step_t;

/* The in-network allreduce streaming through a locked tree
 * (docs/streaming.md) rather than on the group's slots: not a kind of its
 * own (the library picks it by size, INCOLL_STREAM_THRESHOLD), the name
 * benchmarks run it under beside "inc". */
#define ALGO_INC_STREAM_NAME "inc-stream"
#define ALGO_INC_STREAM_DESC                                                   \
    "in the network, streaming: the tree locked, a large window from the "     \
    "ANs' streaming pools"

/* Name ("inc", "rd", "ring", "rabenseifner") and parse; -1 if unknown. */
const char *algo_name(algo_kind_t kind);
int algo_parse(const char *name);
/* One line on what the allreduce algorithm kind does. */
const char *algo_desc(algo_kind_t kind);

/*
 * Writes rank's schedule for an allreduce of count elements over size
 * ranks into steps (at most max) and returns the number of steps (0 when
 * size is 1 or count is 0), or -1 if max is too small or an argument is
 * invalid (kind ALGO_INC has no schedule). algo_max_steps() gives a
 * sufficient max (at least 1).
 */
int algo_schedule(algo_kind_t kind, int rank, int size, size_t count,
                  algo_step_t *steps, int max);
int algo_max_steps(algo_kind_t kind, int size);

/*
 * The host-based algorithm to use for an allreduce of count elements of
 * dsize bytes over size ranks when the caller has no preference: recursive
 * doubling for short vectors (latency: log2(size) rounds) and when count <
 * size, Rabenseifner for long vectors on a power of two, the ring for long
 * vectors otherwise (no extra fold steps; bandwidth-optimal).
 */
algo_kind_t algo_pick(int size, size_t count, size_t dsize);

/* Where the picks change: INCOLL_ALGO_SHORT_BYTES and
 * INCOLL_ALGO_PIPE_BYTES (libincoll's come from its context's
 * configuration, src/host/cfg.h). algo_pick() and algo_coll_pick() use
 * algo_cuts_default(), the settings table's defaults. */
typedef struct {
    uint64_t short_bytes; /* allreduce: recursive doubling up to this */
    uint64_t pipe_bytes;  /* bcast and reduce pipeline above this */
} algo_cuts_t;

algo_cuts_t algo_cuts_default(void);
algo_kind_t algo_pick_cut(const algo_cuts_t *cuts, int size, size_t count,
                          size_t dsize);

/*
 * Host-based algorithms of the other collectives, as schedules of the same
 * steps (the same guarantees as above; a copy step's receive block never
 * overlaps its send block). A table lists them (id, collective, name,
 * description); `incoll bench <collective>` and the tests walk it.
 *
 * What the working buffer of count elements per block holds, per
 * collective (the caller lays it out and takes the result from it):
 *   bcast           count elements: the root's data, then everyone's.
 *   reduce          count elements: each rank's contribution; the root
 *                   ends with the result (others with partial results).
 *   barrier         2 elements (bytes): token out, token in; count unused.
 *   allgather       size blocks of count, block i = rank i's; with the
 *                   Bruck algorithm block i = rank (rank + i) % size's
 *                   (algo_coll_rotated(): the caller rotates in and out).
 *   gather, scatter size blocks of count in the order relative to the
 *                   root: block i = rank (root + i) % size's.
 *   reduce_scatter  size blocks of count, block i for rank i; each rank
 *                   ends with its block reduced.
 * seg: elements per segment of the pipelined algorithms (0: one segment).
 */
typedef enum {
    ALGO_COLL_BCAST = 0,
    ALGO_COLL_REDUCE,
    ALGO_COLL_BARRIER,
    ALGO_COLL_ALLGATHER,
    ALGO_COLL_GATHER,
    ALGO_COLL_SCATTER,
    ALGO_COLL_REDUCE_SCATTER,
    ALGO_COLL_NCOLLS
} algo_coll_t;

typedef enum {
    CALGO_BCAST_BINOMIAL = 0,
    CALGO_BCAST_PIPELINE,
    CALGO_REDUCE_BINOMIAL,
    CALGO_REDUCE_PIPELINE,
    CALGO_BARRIER_DISSEMINATION,
    CALGO_ALLGATHER_RING,
    CALGO_ALLGATHER_BRUCK,
    CALGO_ALLGATHER_RD,
    CALGO_GATHER_BINOMIAL,
    CALGO_SCATTER_BINOMIAL,
    CALGO_RS_RING,
    CALGO_RS_HALVING,
    CALGO_COUNT
} algo_calgo_t;

typedef struct {
    algo_calgo_t id;
    algo_coll_t coll;
    const char *name; /* unique within its collective */
    const char *desc;
    int pof2_only; /* needs a power-of-two size */
} algo_calgo_info_t;

/* The collective's name ("bcast", ..., "reduce_scatter"), and parse (-1). */
const char *algo_coll_name(algo_coll_t coll);
int algo_coll_parse(const char *name);

/* The table entry of id (NULL if out of range); the id of coll's
 * algorithm called name, or -1. */
const algo_calgo_info_t *algo_calgo_info(algo_calgo_t id);
int algo_calgo_parse(algo_coll_t coll, const char *name);

/* 1 when id can run over size ranks (pof2_only). */
int algo_calgo_fits(algo_calgo_t id, int size);

/* 1 when the working buffer is in rotated order (Bruck). */
int algo_coll_rotated(algo_calgo_t id);

/* Elements of the working buffer (count per block as above). */
size_t algo_coll_work_count(algo_calgo_t id, int size, size_t count);

/*
 * Writes rank's schedule of algorithm id over size ranks with root (ignored
 * where there is none) into steps (at most max); returns the number of
 * steps (0 when there is nothing to exchange) or -1 on a bad argument, a
 * size the algorithm does not fit or max too small (algo_coll_max_steps()
 * gives enough).
 */
int algo_coll_schedule(algo_calgo_t id, int rank, int size, int root,
                       size_t count, size_t seg, algo_step_t *steps, int max);
int algo_coll_max_steps(algo_calgo_t id, int size, size_t count, size_t seg);

/* Segment of the pipelined algorithms, in bytes. */
#define ALGO_SEG_BYTES (64u << 10)

/* The default algorithm of coll for count elements of dsize bytes (per
 * rank's block) over size ranks, and its segment (elements). */
algo_calgo_t algo_coll_pick(algo_coll_t coll, int size, size_t count,
                            size_t dsize, size_t *seg_p);
algo_calgo_t algo_coll_pick_cut(const algo_cuts_t *cuts, algo_coll_t coll,
                                int size, size_t count, size_t dsize,
                                size_t *seg_p);

#endif
