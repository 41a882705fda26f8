/*
 * osu_coll: OSU-style latencies of MPI_Allreduce, MPI_Reduce, MPI_Bcast and
 * MPI_Barrier as the program makes them, whatever runs them (coll/incoll,
 * the PMPI layer, Open MPI alone: the job's configuration decides), so
 * that alternating jobs compare the three. Each iteration follows an
 * untimed MPI_Barrier; latency is averaged per rank over the iterations,
 * then over ranks (avg) and its max. MPI_INT with MPI_SUM for the
 * reductions (Reduce rooted at 0), MPI_BYTE for Bcast (root 0), sizes
 * 4 B to MAX (default 1 MiB) by factors of 4; every result is checked
 * outside the timing. Also each rank's median, averaged over ranks (med_us:
 * robust to the stalls of a loaded machine). Prints, at rank 0,
 *   osu_coll: allreduce 1024 avg_us 201.3 max_us 230.1 med_us 190.2
 * and "osu_coll: ok" when every check held on every rank.
 *
 *   osu_coll [MAX_BYTES [ITERS]]
 *
 * With OSU_COLL_KILL_CMD set, rank 0 runs it (e.g. kills an AN) after the
 * first timed allreduce: the rest must still be right.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int rank, size, bad;

static double timed(int coll, void *buf, void *out, int bytes)
{
    double t;
    int n = bytes / 4;
    MPI_Barrier(MPI_COMM_WORLD);
    t = MPI_Wtime();
    switch (coll) {
    case 0:
        MPI_Allreduce(buf, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case 1:
        MPI_Reduce(buf, out, n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        break;
    case 2:
        MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        break;
    default:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    }
    return MPI_Wtime() - t;
}

static void check(int coll, int *buf, int *out, int bytes, int it)
{
    int n = bytes / 4;
    for (int i = 0; i < n; i++) {
        int want = coll == 2 ? (int)(i * 7 + it) : size * (i + it);
        int got = coll == 2 ? buf[i] : out[i];
        if ((coll == 0 || coll == 2 || (coll == 1 && rank == 0)) &&
            got != want) {
            if (bad++ < 5)
                fprintf(stderr,
                        "osu_coll: rank %d coll %d bytes %d [%d]=%d "
                        "want %d\n",
                        rank, coll, bytes, i, got, want);
            break;
        }
    }
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"allreduce", "reduce", "bcast",
                                        "barrier"};
    int max = 1 << 20, iters = 20;
    int *buf, *out;
    double *times;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        max = atoi(argv[1]);
    if (argc > 2)
        iters = atoi(argv[2]);
    buf = malloc((size_t)max);
    out = malloc((size_t)max);
    times = malloc(sizeof(double) * (size_t)iters);
    for (int coll = 0; coll < 4; coll++)
        for (int bytes = 4; bytes <= max; bytes *= 4) {
            double sum = 0, avg = 0, mx = 0, med = 0, mine, mymed;
            if (coll == 3 && bytes > 4)
                break;
            for (int it = -2; it < iters; it++) {
                for (int i = 0; i < bytes / 4; i++)
                    buf[i] = coll == 2 ? (rank == 0 ? i * 7 + it : -1) : i + it;
                double t = timed(coll, buf, out, bytes);
                if (it >= 0) {
                    sum += t;
                    times[it] = t;
                }
                if (coll < 3)
                    check(coll, buf, out, bytes, it);
                if (coll == 0 && bytes == 4 && it == 0 && rank == 0 &&
                    getenv("OSU_COLL_KILL_CMD") &&
                    system(getenv("OSU_COLL_KILL_CMD")) != 0)
                    fprintf(stderr, "osu_coll: the kill command failed\n");
            }
            mine = sum / iters * 1e6;
            qsort(times, (size_t)iters, sizeof(double), cmp_double);
            mymed = times[iters / 2] * 1e6;
            MPI_Reduce(&mine, &avg, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(&mymed, &med, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(&mine, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0)
                printf("osu_coll: %s %d avg_us %.1f max_us %.1f med_us %.1f\n",
                       names[coll], coll == 3 ? 0 : bytes, avg / size, mx,
                       med / size);
            fflush(stdout);
        }
    {
        int all = 0;
        MPI_Reduce(&bad, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0 && all == 0)
            printf("osu_coll: ok\n");
        bad = all;
    }
    MPI_Finalize();
    return rank == 0 && bad ? 1 : 0;
}
