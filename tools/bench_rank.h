/*
 * What the rank sides of the benchmarks share (the hidden `incoll bench
 * _<kind>` processes that `incoll run` or the MPI worker starts): bringing
 * libincoll up (from the environment of `incoll run`, or taking the
 * context the MPI layer made), a barrier in shared memory that sends
 * nothing, the order in which algorithms take turns, and the clocks and
 * counters read around one timed operation.
 *
 * The barrier: the ranks share this machine (only their network
 * namespaces differ), so they meet in shared memory, a counter and a
 * generation in a file of the scratch directory waited on with a futex.
 * It sends nothing, so it neither loads the links nor shows in the
 * counters or the engines' round-trip estimates, and it waits for a rank
 * still busy with a long operation however long that takes (a barrier
 * through the network would give up after its retries). While waiting, a
 * rank keeps its library answering every couple of milliseconds: a peer
 * may still need an acknowledgement of the operation just finished.
 *
 * The library's counters (socket bytes and datagrams, the engine's
 * retransmissions) come through src/host/counters.h, the library's one
 * documented window on them.
 */
#ifndef INCOLL_BENCH_RANK_H
#define INCOLL_BENCH_RANK_H

#include "bench_common.h"

#include <stdint.h>

typedef struct {
    incoll_ctx_h ctx;
    incoll_comm_h world;
    int rank, size;
    const bench_mpi_t *mpi; /* non-NULL: the MPI layer owns ctx */
} bench_rank_t;

/* Brings libincoll up (incoll_init) or takes mpi's context. Returns 0,
 * or 1 after a message naming who. */
int bench_rank_start(bench_rank_t *r, const bench_mpi_t *mpi, const char *who);
/* Finalizes what start brought up (not the MPI layer's). */
void bench_rank_stop(bench_rank_t *r);

typedef struct bench_barrier bench_barrier_t;

/* Makes DIR/barrier; the driver calls it before the ranks start. 0/-1. */
int bench_barrier_create(const char *dir);
/* Maps DIR/barrier; NULL (errno set) when it cannot. */
bench_barrier_t *bench_barrier_open(const char *dir);
/* Waits for all size ranks, keeping comm's context answering peers. */
void bench_barrier_wait(bench_barrier_t *b, int size, incoll_comm_h comm);
void bench_barrier_close(bench_barrier_t *b);

/*
 * Which of n algorithms runs k-th in iteration it: a permutation of the
 * n drawn afresh for each iteration from a generator seeded by it (the
 * same on every rank). A rotation keeps the cyclic order, so each
 * algorithm would always follow the same one (and pay for what that one
 * leaves behind: MPI's polling ranks late out of their call, its TCP
 * acknowledgements); reversing every other block of n iterations still
 * leaves each with only two predecessors when there are four or more.
 * Here each follows every other one equally often on average, and runs
 * at each position equally often.
 */
int bench_run_order(int n, int it, int k);

/* User + system CPU time of this process, ns. */
uint64_t bench_cpu_ns(void);

/* Bytes and packets sent by interface dev of this process's network
 * namespace. Returns 0, or -1 when there is no such interface. */
int bench_netdev_tx(const char *dev, uint64_t *bytes_p, uint64_t *pkts_p);

#endif
