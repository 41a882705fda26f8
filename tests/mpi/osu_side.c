/*
 * osu_side: OSU-style latencies of MPI_Allreduce, MPI_Reduce, MPI_Bcast
 * and MPI_Barrier through the MPI layer (the program's MPI_ calls, with
 * libincoll_mpi preloaded) against the MPI library's own (its PMPI_
 * twins), side by side in one run: every iteration runs the layer's call
 * and MPI's, in an order that alternates, each after an untimed
 * PMPI_Barrier. Latency is averaged per rank over the iterations, then
 * over ranks (avg) and its max (as OSU prints). MPI_INT for the
 * reductions (MPI_SUM; Reduce rooted at 0), MPI_BYTE for Bcast (root 0),
 * sizes 4 B to MAX (default 4 MiB) by factors of 4; every result is
 * checked (outside the timing).
 *
 *   incoll mpirun -n 8 --emulate -- build/tests/mpi/osu_side [MAX_BYTES]
 *
 * Prints one line per collective and size:
 *   osu_side: allreduce 1024 layer_us 201.3 (max 230.1) mpi_us 402.7
 *   (max 431.0) mpi/layer 2.00
 * and "osu_side: ok" at rank 0.
 *
 * With INCOLL_TEST_KILL_CMD set, rank 0 runs it after the first call of
 * each collective (which sets up the layer's state) and the ranks make
 * allreduces through the layer until it runs on libincoll's host-based
 * algorithms: the rows then compare those with MPI's own, the choice the
 * layer makes after a failure (docs/mpi.md).
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C_ALLREDUCE, C_REDUCE, C_BCAST, C_BARRIER, C_COUNT };
static const char *const names[C_COUNT] = {"allreduce", "reduce", "bcast",
                                           "barrier"};

static int *sendb, *recvb;
static int rank, size;

static void die(const char *what, int bytes, int i)
{
    fprintf(stderr, "osu_side: rank %d: WRONG %s of %d bytes at element %d\n",
            rank, what, bytes, i);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One call of collective c on n ints (bytes for bcast); layer: through
 * the MPI layer (MPI_), else the MPI library's own (PMPI_). */
static void run(int c, int n, int bytes, int layer)
{
    switch (c) {
    case C_ALLREDUCE:
        if (layer)
            MPI_Allreduce(sendb, recvb, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        else
            PMPI_Allreduce(sendb, recvb, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case C_REDUCE:
        if (layer)
            MPI_Reduce(sendb, recvb, n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        else
            PMPI_Reduce(sendb, recvb, n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        break;
    case C_BCAST:
        if (layer)
            MPI_Bcast(recvb, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        else
            PMPI_Bcast(recvb, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        break;
    default:
        if (layer)
            MPI_Barrier(MPI_COMM_WORLD);
        else
            PMPI_Barrier(MPI_COMM_WORLD);
    }
}

static void prepare(int c, int n, int bytes, int it)
{
    for (int i = 0; i < n; i++)
        sendb[i] = (rank * 3 + i + it) % 101;
    if (c == C_BCAST)
        for (int i = 0; i < bytes; i++)
            ((unsigned char *)recvb)[i] =
                rank == 0 ? (unsigned char)(i * 7 + it) : 0;
    else
        memset(recvb, 0xee, (size_t)n * sizeof(int));
}

static void verify(int c, int n, int bytes, int it)
{
    if (c == C_BARRIER || (c == C_REDUCE && rank != 0))
        return;
    if (c == C_BCAST) {
        for (int i = 0; i < bytes; i++)
            if (((unsigned char *)recvb)[i] != (unsigned char)(i * 7 + it))
                die(names[c], bytes, i);
        return;
    }
    for (int i = 0; i < n; i++) {
        int want = 0;
        for (int r = 0; r < size; r++)
            want += (r * 3 + i + it) % 101;
        if (recvb[i] != want)
            die(names[c], bytes, i);
    }
}

int main(int argc, char **argv)
{
    long max = 4 << 20;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        max = strtol(argv[1], NULL, 10);
    if (max < 4 || max > (64 << 20))
        max = 4 << 20;
    sendb = malloc((size_t)max);
    recvb = malloc((size_t)max);
    if (sendb == NULL || recvb == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int c = 0; c < C_COUNT; c++)
        run(c, 1, 4, 1);
    if (getenv("INCOLL_TEST_KILL_CMD") && *getenv("INCOLL_TEST_KILL_CMD")) {
        if (rank == 0 && system(getenv("INCOLL_TEST_KILL_CMD")) != 0)
            fprintf(stderr, "osu_side: the kill command failed\n");
        for (int i = 0; i < 3; i++)
            run(C_ALLREDUCE, 1, 4, 1);
        if (rank == 0)
            printf("osu_side: after the kill, through the layer = "
                   "libincoll's host-based algorithms\n");
    }
    for (int c = 0; c < C_COUNT; c++) {
        for (long bytes = 4; bytes <= max; bytes *= 4) {
            int n = (int)(bytes / 4), b = (int)bytes;
            long it_n = (4l << 20) / bytes;
            int iters = it_n < 4 ? 4 : it_n > 100 ? 100 : (int)it_n;
            int warm = iters / 10 < 1 ? 1 : iters / 10;
            double t[2] = {0, 0}, avg[2], mx[2];
            if (c == C_BARRIER && bytes > 4)
                break;
            for (int it = 0; it < warm + iters; it++) {
                for (int k = 0; k < 2; k++) {
                    int layer = (k + it) % 2;
                    double t0, t1;
                    prepare(c, n, b, it);
                    PMPI_Barrier(MPI_COMM_WORLD);
                    t0 = MPI_Wtime();
                    run(c, n, b, layer);
                    t1 = MPI_Wtime();
                    if (it >= warm)
                        t[layer] += t1 - t0;
                    verify(c, n, b, it);
                }
            }
            for (int k = 0; k < 2; k++)
                t[k] = t[k] / iters * 1e6;
            PMPI_Reduce(t, avg, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            PMPI_Reduce(t, mx, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0)
                printf("osu_side: %-9s %8ld layer_us %10.1f (max %10.1f) "
                       "mpi_us %10.1f (max %10.1f) mpi/layer %5.2f\n",
                       names[c], c == C_BARRIER ? 0 : bytes, avg[1] / size,
                       mx[1], avg[0] / size, mx[0],
                       avg[1] > 0 ? avg[0] / avg[1] : 0);
            fflush(stdout);
        }
    }
    if (rank == 0)
        printf("osu_side: ok\n");
    free(sendb);
    free(recvb);
    MPI_Finalize();
    return 0;
}
