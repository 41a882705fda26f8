/*
 * Host-based allreduce algorithms as schedules: pure functions that list,
 * for one rank, the exchanges it makes with its peers. The host library
 * runs a schedule over the UDP point-to-point transport (src/host), the
 * simulator over SimGrid mailboxes (src/sim): the same algorithm in both.
 *
 * A schedule is a list of steps run in order. In a step the rank may send
 * a block of its working buffer to one peer and receive a block from one
 * peer (often the same one); the received block is either reduced into the
 * working buffer or copied over it. Blocks are element ranges. Reductions
 * always put the lower rank's data on the left, so every rank computes the
 * same bits.
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
 * ranks into steps (at most max) and returns the number of steps, or -1
 * if max is too small. algo_max_steps() gives a sufficient max.
 */
int algo_schedule(algo_kind_t kind, int rank, int size, size_t count,
                  algo_step_t *steps, int max);
int algo_max_steps(algo_kind_t kind, int size);

#endif
