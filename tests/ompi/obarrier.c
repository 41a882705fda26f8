/*
 * obarrier: MPI_Barrier against a barrier of point-to-point calls in the
 * same job, so that the machine's load, which changes from job to job,
 * cancels out of their ratio. Each iteration times both, in alternating
 * order, each after an untimed MPI_Barrier; the second is recursive
 * doubling of zero-byte MPI_Sendrecv (a power-of-two number of ranks).
 * Prints at rank 0 each one's median over the iterations, averaged over
 * ranks, and their ratio:
 *   obarrier: barrier_med 877.1 manual_med 818.8 ratio 1.071
 * Under coll/incoll or the PMPI layer, with the selection table giving
 * barriers to the MPI library's own, a ratio above Open MPI alone's would
 * be the front end's cost on the call (docs/ompi.md, "Measured").
 *
 *   obarrier [ITERS]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int rank, size, n = argc > 1 ? atoi(argv[1]) : 500;
    double *tb, *tm, v[2], s[2];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (n < 1 || (size & (size - 1)) != 0) {
        if (rank == 0)
            fprintf(stderr, "obarrier: ITERS >= 1 and a power-of-two number "
                            "of ranks\n");
        MPI_Finalize();
        return 2;
    }
    tb = malloc(sizeof(double) * (size_t)n);
    tm = malloc(sizeof(double) * (size_t)n);
    for (int it = -5; it < n; it++)
        for (int k = 0; k < 2; k++) {
            double t;
            MPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
            if ((k ^ (it & 1)) == 0) {
                MPI_Barrier(MPI_COMM_WORLD);
                if (it >= 0)
                    tb[it] = MPI_Wtime() - t;
            } else {
                char a = 0, b;
                for (int d = 1; d < size; d <<= 1)
                    MPI_Sendrecv(&a, 0, MPI_BYTE, rank ^ d, 99, &b, 0, MPI_BYTE,
                                 rank ^ d, 99, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE);
                if (it >= 0)
                    tm[it] = MPI_Wtime() - t;
            }
        }
    qsort(tb, (size_t)n, sizeof(double), cmp_double);
    qsort(tm, (size_t)n, sizeof(double), cmp_double);
    v[0] = tb[n / 2] * 1e6;
    v[1] = tm[n / 2] * 1e6;
    MPI_Reduce(v, s, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("obarrier: barrier_med %.1f manual_med %.1f ratio %.3f\n",
               s[0] / size, s[1] / size, s[0] / s[1]);
    free(tb);
    free(tm);
    MPI_Finalize();
    return 0;
}
