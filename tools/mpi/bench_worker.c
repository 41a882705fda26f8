/*
 * incoll-bench-mpi: the rank side of `incoll bench allreduce` for runs
 * whose --algos include `mpi`, the MPI library's own MPI_Allreduce as a
 * baseline next to incoll's algorithms (docs/benchmarks.md).
 *
 *   incoll mpirun -n P --fabric DIR --no-preload -- incoll-bench-mpi \
 *       _allreduce --sizes ... --algos inc,ring,mpi --out DIR ...
 *
 * The driver starts it that way (bench_launch_mpi), so on an emulated
 * fabric each rank runs in its host's namespace and MPI's own TCP traffic
 * crosses the emulated links. Built with mpicc from this file, the MPI
 * layer's mpi_layer.c (not its MPI_ wrappers: MPI_Allreduce here is the
 * library's) and the benchmark's objects. libincoll comes up exactly as
 * in libincoll_mpi: rank, size and job id from MPI_COMM_WORLD
 * (mpi_layer_bootstrap), the fabric from INCOLL_FABRIC; then the same
 * rank code as under `incoll run` (bench_allreduce_rank_run) runs every
 * algorithm, `mpi` included, side by side and checks every result.
 * `mpi-layer` is the same MPI_Allreduce through the layer's offload path
 * (what the preloaded libincoll_mpi's MPI_Allreduce runs), on the same
 * libincoll communicator as `inc`. `_overhead` measures the layer's own
 * cost per call on one rank (docs/benchmarks.md).
 */
#include "bench_common.h"
#include "bench_hier.h"
#include "mpi/mpi_layer.h"
#include "common/clock.h"

#include "core/algo.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int mpi_allreduce(const float *send, float *recv, size_t count)
{
    if (count > INT_MAX)
        return MPI_ERR_COUNT;
    return MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD);
}

/* What libincoll_mpi's MPI_Allreduce does (src/mpi/mpi_wrap.c). */
static int layer_allreduce(const float *send, float *recv, size_t count)
{
    int ret;
    if (count > INT_MAX)
        return MPI_ERR_COUNT;
    if (mpi_layer_allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD, &ret))
        return ret;
    return PMPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
}

/* The MPI library's own collective for `incoll bench <collective>`
 * (bench_mpi_t.coll; the algo_coll_t order of core/algo.h). */
static int mpi_coll(int coll, const void *send, void *recv, size_t count,
                    int root)
{
    int n = (int)count;
    if (count > INT_MAX)
        return MPI_ERR_COUNT;
    switch (coll) {
    case ALGO_COLL_BCAST:
        return MPI_Bcast(recv, n, MPI_BYTE, root, MPI_COMM_WORLD);
    case ALGO_COLL_REDUCE:
        return MPI_Reduce(send, recv, n, MPI_INT64_T, MPI_SUM, root,
                          MPI_COMM_WORLD);
    case ALGO_COLL_BARRIER:
        return MPI_Barrier(MPI_COMM_WORLD);
    case ALGO_COLL_ALLGATHER:
        return MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE,
                             MPI_COMM_WORLD);
    case ALGO_COLL_GATHER:
        return MPI_Gather(send, n, MPI_BYTE, recv, n, MPI_BYTE, root,
                          MPI_COMM_WORLD);
    case ALGO_COLL_SCATTER:
        return MPI_Scatter(send, n, MPI_BYTE, recv, n, MPI_BYTE, root,
                           MPI_COMM_WORLD);
    default:
        return MPI_Reduce_scatter_block(send, recv, n, MPI_INT64_T, MPI_SUM,
                                        MPI_COMM_WORLD);
    }
}

/* The same through the MPI layer (what libincoll_mpi's wrappers run). */
static int layer_coll(int coll, const void *send, void *recv, size_t count,
                      int root)
{
    MPI_Comm w = MPI_COMM_WORLD;
    int n = (int)count, ret = 0, done;
    if (count > INT_MAX)
        return MPI_ERR_COUNT;
    switch (coll) {
    case ALGO_COLL_BCAST:
        done = mpi_layer_bcast(recv, n, MPI_BYTE, root, w, &ret);
        break;
    case ALGO_COLL_REDUCE:
        done = mpi_layer_reduce(send, recv, n, MPI_INT64_T, MPI_SUM, root, w,
                                &ret);
        break;
    case ALGO_COLL_BARRIER:
        done = mpi_layer_barrier(w, &ret);
        break;
    case ALGO_COLL_ALLGATHER:
        done =
            mpi_layer_allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, w, &ret);
        break;
    case ALGO_COLL_GATHER:
        done = mpi_layer_gather(send, n, MPI_BYTE, recv, n, MPI_BYTE, root, w,
                                &ret);
        break;
    case ALGO_COLL_SCATTER:
        done = mpi_layer_scatter(send, n, MPI_BYTE, recv, n, MPI_BYTE, root, w,
                                 &ret);
        break;
    default:
        done = mpi_layer_reduce_scatter_block(send, recv, n, MPI_INT64_T,
                                              MPI_SUM, w, &ret);
        break;
    }
    return done ? ret : mpi_coll(coll, send, recv, count, root);
}

/*
 * `_overhead [N]`: what the MPI layer adds to a call, without a network
 * in the way. On one rank (INCOLL_MPI_MIN_RANKS=1, a fabric of one host)
 * libincoll's allreduce is a copy of 8 bytes, so N calls of it, of the
 * layer's offload path and of MPI's own, alternating over 5 rounds, give
 * each one's cost per call; the layer's minus libincoll's is the layer's
 * own (lookup, checks, counters).
 */
static int overhead(int argc, char **argv, incoll_comm_h world)
{
    float s[2] = {1, 2}, r[2];
    long n = argc > 2 ? strtol(argv[2], NULL, 10) : 1000000;
    int ret;

    if (n < 1)
        n = 1000000;
    for (int rep = 0; rep < 5; rep++) {
        double t0, t1, t2, t3;
        long done = 0;
        t0 = now_s();
        for (long i = 0; i < n; i++)
            incoll_allreduce(world, s, r, 2, INCOLL_FLOAT32, INCOLL_OP_SUM);
        t1 = now_s();
        for (long i = 0; i < n; i++)
            done += mpi_layer_allreduce(s, r, 2, MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD, &ret);
        t2 = now_s();
        for (long i = 0; i < n; i++)
            PMPI_Allreduce(s, r, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t3 = now_s();
        printf("overhead: per call: incoll_allreduce %.1f ns, through the "
               "layer %.1f ns (offloaded %ld of %ld), MPI's own %.1f ns\n",
               (t1 - t0) / (double)n * 1e9, (t2 - t1) / (double)n * 1e9, done,
               n, (t3 - t2) / (double)n * 1e9);
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_mpi_t m = {.allreduce = mpi_allreduce,
                     .layer_allreduce = layer_allreduce,
                     .coll = mpi_coll,
                     .layer_coll = layer_coll};
    const char *why = NULL;
    int rank = 0, ret;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2 ||
        (strcmp(argv[1], "_allreduce") != 0 && strcmp(argv[1], "_coll") != 0 &&
         strcmp(argv[1], "_overhead") != 0 && strcmp(argv[1], "_hier") != 0)) {
        if (rank == 0)
            fprintf(stderr, "usage: incoll mpirun ... -- " BENCH_MPI_WORKER
                            " _allreduce OPTIONS (started by `incoll bench "
                            "allreduce --algos ...,mpi`)\n");
        MPI_Finalize();
        return 2;
    }
    /* Errors in MPI_Allreduce come back as codes, for the message. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mpi_layer_bootstrap(1);
    m.ctx = mpi_layer_incoll(&m.world, &why);
    if (m.ctx == NULL) {
        fprintf(stderr,
                "incoll bench allreduce: rank %d: libincoll did not come up "
                "from MPI: %s\n",
                rank, why ? why : "?");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (strcmp(argv[1], "_overhead") == 0)
        ret = overhead(argc, argv, m.world);
    else if (strcmp(argv[1], "_coll") == 0)
        ret = bench_coll_rank_run(argc - 1, argv + 1, &m);
    else if (strcmp(argv[1], "_hier") == 0)
        ret = bench_hier_rank_run(argc - 1, argv + 1, &m); /* --ppn K */
    else
        ret = bench_allreduce_rank_run(argc - 1, argv + 1, &m);
    if (ret != 0) {
        /* The others may wait for this rank in the benchmark's barrier:
         * end the job. */
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, ret);
    }
    MPI_Finalize();
    return 0;
}
