/*
 * The reference for incoll-sim's host-based algorithms: an MPI program run
 * under SimGrid's own MPI (smpicc, smpirun) on the platform incoll-sim
 * writes, with SMPI's allreduce algorithm chosen by
 * --cfg=smpi/allreduce:NAME (rdb, lr, rab_rdb, ...). tests/test_sim.c
 * compares the times.
 *
 *   allreduce_smpi BYTES
 *
 * Every rank starts at simulated time 0 (nothing runs before), allreduces
 * BYTES of float32 with MPI_SUM once, checks the result, and rank 0 prints
 * "bytes=B latency_us=T ok=1" where T is the time until the last rank has
 * its result, as incoll-sim reports it.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, ok = 1, all_ok = 0;
    long bytes;
    size_t count;
    float *in, *out;
    double t0, t1, dt, dt_max = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bytes = argc > 1 ? atol(argv[1]) : 8;
    count = (size_t)(bytes / 4);
    in = malloc(count * sizeof(float) + 1);
    out = malloc(count * sizeof(float) + 1);
    if (count == 0 || in == NULL || out == NULL) {
        fprintf(stderr, "allreduce_smpi: bad size or out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t j = 0; j < count; j++)
        in[j] = (float)((1 + (rank & 1)) * (int)(1 + j % 251));

    t0 = MPI_Wtime();
    MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t1 = MPI_Wtime();
    dt = t1 - t0;

    for (size_t j = 0; j < count; j++)
        if (out[j] != (float)((long)(size + size / 2) * (long)(1 + j % 251)))
            ok = 0;
    MPI_Reduce(&dt, &dt_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("bytes=%ld latency_us=%.6f ok=%d\n", bytes, dt_max * 1e6,
               all_ok);
    free(in);
    free(out);
    MPI_Finalize();
    return all_ok || rank != 0 ? 0 : 1;
}
