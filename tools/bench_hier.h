/*
 * `incoll bench allreduce --ppn K` (tools/bench_hier.c): several ranks per
 * host, the node, socket and flat modes of the in-network allreduce beside
 * the hierarchical host-based algorithms and MPI's own allreduce.
 */
#ifndef INCOLL_BENCH_HIER_H
#define INCOLL_BENCH_HIER_H

#include "bench_common.h"

/* The driver (`incoll bench allreduce --ppn K ...`). */
int bench_hier_main(int argc, char **argv);
/* The rank side, `incoll bench _hier` (mpi NULL) or from the MPI worker. */
int bench_hier_rank_main(int argc, char **argv);
int bench_hier_rank_run(int argc, char **argv, const bench_mpi_t *mpi);

#endif
