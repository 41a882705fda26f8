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
    int send_peer;      /* -1: nothing to send */
    size_t send_off;    /* elements */
    size_t send_count;
    int recv_peer;      /* -1: nothing to receive */
    size_t recv_off;
    size_t recv_count;
    int recv_reduce;    /* 1: buf = op(...) with the block, 0: copy it in */
    int recv_left;      /* 1: received data is the left operand */
} algo_step_t;

/* Name ("inc", "rd", "ring", "rabenseifner") and parse; -1 if unknown. */
const char *algo_name(algo_kind_t kind);
int algo_parse(const char *name);

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

#endif
