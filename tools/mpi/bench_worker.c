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
 * libincoll communicator as `inc`.
 */
#include "bench_common.h"
#include "mpi/mpi_layer.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

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

int main(int argc, char **argv)
{
    bench_mpi_t m = {.allreduce = mpi_allreduce,
                     .layer_allreduce = layer_allreduce};
    const char *why = NULL;
    int rank = 0, ret;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2 || strcmp(argv[1], "_allreduce") != 0) {
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
