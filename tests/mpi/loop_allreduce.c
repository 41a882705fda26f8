/*
 * loop_allreduce: a long-running MPI program, as a batch job is: each
 * iteration runs an allreduce of 1000 longs on MPI_COMM_WORLD and on a
 * split of it into halves, checks both against what the ranks' values
 * must give, and sleeps --pause-ms (10). It runs --iters N iterations
 * (default 100) or, with --seconds S, until rank 0 has run S seconds (the
 * ranks agree on when to stop through the world allreduce itself).
 *
 * Prints "loop_allreduce: ok N iterations on P ranks" at rank 0 and exits
 * 0, or names the first wrong element and aborts the job.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 1000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One allreduce of comm (ranks r0..: rank r contributes r + i + iter at
 * element i), checked; the stop flag of rank 0 rides in element N. */
static long run(MPI_Comm comm, int iter, long stop)
{
    static long in[N + 1], out[N + 1];
    int r, n, wr;
    long base = 0;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    for (int i = 0; i < N; i++)
        in[i] = (long)wr + i + iter;
    in[N] = r == 0 ? stop : 0;
    MPI_Allreduce(in, out, N + 1, MPI_LONG, MPI_SUM, comm);
    /* The sum of the members' world ranks, from element 0 of iter 0. */
    {
        long sum_wr = 0, mine = wr;
        MPI_Allreduce(&mine, &sum_wr, 1, MPI_LONG, MPI_SUM, comm);
        base = sum_wr;
    }
    for (int i = 0; i < N; i++) {
        long want = base + (long)n * (i + iter);
        if (out[i] != want) {
            fprintf(stderr,
                    "loop_allreduce: rank %d iteration %d element %d: got "
                    "%ld want %ld\n",
                    wr, iter, i, out[i], want);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    return out[N];
}

int main(int argc, char **argv)
{
    int iters = 100, pause_ms = 10, rank, size, it;
    double seconds = 0, t0;
    MPI_Comm half;

    MPI_Init(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--pause-ms") == 0 && i + 1 < argc)
            pause_ms = atoi(argv[++i]);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2, rank, &half);
    t0 = now_s();
    for (it = 0;; it++) {
        long stop = seconds > 0 ? now_s() - t0 >= seconds : it + 1 >= iters;
        stop = run(MPI_COMM_WORLD, it, stop);
        run(half, it, 0);
        if (stop)
            break;
        if (pause_ms > 0) {
            struct timespec ts = {pause_ms / 1000,
                                  (long)(pause_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    MPI_Comm_free(&half);
    if (rank == 0)
        printf("loop_allreduce: ok %d iterations on %d ranks\n", it + 1, size);
    MPI_Finalize();
    return 0;
}
