/*
 * coll_loop.h: what select_cost.c and idle_wakes.c share: the arguments
 * COLL (bcast or allgather), BYTES and ITERS, the buffers, one call of
 * the collective and the check of the last call's result. Include after
 * <mpi.h>; call coll_loop_setup() after MPI_Init.
 */
#ifndef INCOLL_TESTS_MPI_COLL_LOOP_H
#define INCOLL_TESTS_MPI_COLL_LOOP_H

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *prog; /* for the messages */
    const char *coll; /* "bcast" or "allgather" */
    int allgather, bytes, iters;
    int rank, size;
    char *send, *recv; /* recv holds size blocks of bytes */
} coll_loop_t;

/* Reads argv[1..3] (bcast 1024 ITERS by default), allocates and fills
 * the buffers; a bad argument prints USAGE at rank 0 and aborts. */
static inline void coll_loop_setup(coll_loop_t *l, const char *prog,
                                   const char *usage, int argc, char **argv,
                                   int iters)
{
    l->prog = prog;
    l->coll = argc > 1 ? argv[1] : "bcast";
    l->bytes = argc > 2 ? atoi(argv[2]) : 1024;
    l->iters = argc > 3 ? atoi(argv[3]) : iters;
    l->allgather = strcmp(l->coll, "allgather") == 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &l->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &l->size);
    if ((!l->allgather && strcmp(l->coll, "bcast") != 0) || l->bytes < 1 ||
        l->iters < 1) {
        if (l->rank == 0)
            fprintf(stderr, "usage: %s %s\n", prog, usage);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    l->send = malloc((size_t)l->bytes);
    l->recv = malloc((size_t)l->bytes * (size_t)l->size);
    if (l->send == NULL || l->recv == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < l->bytes; i++)
        l->send[i] = (char)(l->rank * 7 + i);
    memcpy(l->recv, l->send, (size_t)l->bytes);
}

/* One call of the collective on MPI_COMM_WORLD. */
static inline void coll_loop_call(const coll_loop_t *l)
{
    if (l->allgather)
        MPI_Allgather(l->send, l->bytes, MPI_BYTE, l->recv, l->bytes, MPI_BYTE,
                      MPI_COMM_WORLD);
    else
        MPI_Bcast(l->recv, l->bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
}

/* The last call's result: every block as its rank filled it (rank 0's
 * alone for a bcast); a wrong byte is said and aborts the job. */
static inline void coll_loop_check(const coll_loop_t *l)
{
    for (int r = 0; r < (l->allgather ? l->size : 1); r++)
        for (int i = 0; i < l->bytes; i++)
            if (l->recv[(size_t)r * (size_t)l->bytes + (size_t)i] !=
                (char)(r * 7 + i)) {
                fprintf(stderr, "%s: rank %d: WRONG %s block %d byte %d\n",
                        l->prog, l->rank, l->coll, r, i);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
}

/* Rank 0's closing line and the buffers freed. */
static inline void coll_loop_done(coll_loop_t *l)
{
    if (l->rank == 0)
        printf("%s: ok %s %d %d\n", l->prog, l->coll, l->bytes, l->iters);
    free(l->send);
    free(l->recv);
}

#endif
