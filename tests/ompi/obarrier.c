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
 * With WARM > 0 the same is measured a second time after WARM rounds of
 * a 16 KiB MPI_Allreduce, MPI_Reduce and MPI_Bcast (which the front ends
 * run in the network), so that the library's threads and state are those
 * of a program that offloaded:
 *   obarrier: after 20 warm rounds: barrier_med ... ratio ...
 * and, for each phase, what the ranks' threads did during it, summed over
 * ranks, per iteration (two timed and two untimed barriers): context
 * switches, voluntary and not, CPU time and time spent runnable but
 * waiting for a CPU (/proc/self/task/N/schedstat) and moves between CPUs,
 * of the main threads, of libincoll's watcher (incoll-watch) and of every
 * other thread, and the UDP datagrams and TCP segments of the ranks'
 * network namespaces (ocounts.h):
 *   obarrier: counts before main vcsw 0.00 ivcsw 5.10 cpu_us 180.2
 *   wait_us 410.3 migr 0.020 watch vcsw 0.00 ... other vcsw 0.00 ...
 *   udp_in 0.00 udp_out 0.00 tcp_in 96.0 tcp_out 96.0 threads 3 secs 1.92
 * (secs: rank 0's time for the phase, which turns counts per iteration
 * into counts per second: the watcher's wake-ups, say)
 *
 *   obarrier [ITERS [WARM]]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocounts.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int rank, size;

/* One phase: n iterations (after 5 untimed); prints its line at rank 0. */
static void phase(int n, double *tb, double *tm, const char *label)
{
    enum { CN = OC_N + ON_N };
    double v[2], s[2], c0[CN], c1[CN], call[CN], t0 = 0, secs;
    int threads = 0;

    for (int it = -5; it < n; it++) {
        if (it == 0) {
            ocounts_take(c0);
            onet_take(c0 + OC_N);
            t0 = MPI_Wtime();
        }
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
    }
    secs = MPI_Wtime() - t0;
    threads = ocounts_take(c1);
    onet_take(c1 + OC_N);
    for (int k = 0; k < CN; k++)
        c1[k] = (c1[k] - c0[k]) / n;
    qsort(tb, (size_t)n, sizeof(double), cmp_double);
    qsort(tm, (size_t)n, sizeof(double), cmp_double);
    v[0] = tb[n / 2] * 1e6;
    v[1] = tm[n / 2] * 1e6;
    MPI_Reduce(v, s, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(c1, call, CN, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    printf("obarrier: %sbarrier_med %.1f manual_med %.1f ratio %.3f\n", label,
           s[0] / size, s[1] / size, s[0] / s[1]);
    printf("obarrier: counts %s", label[0] ? "after" : "before");
    ocounts_print(call);
    onet_print(call + OC_N);
    printf(" threads %d secs %.3f\n", threads, secs);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 500;
    int warm = argc > 2 ? atoi(argv[2]) : 0;
    double *tb, *tm;
    char label[64];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (n < 1 || warm < 0 || (size & (size - 1)) != 0) {
        if (rank == 0)
            fprintf(stderr, "obarrier: ITERS >= 1, WARM >= 0 and a "
                            "power-of-two number of ranks\n");
        MPI_Finalize();
        return 2;
    }
    tb = malloc(sizeof(double) * (size_t)n);
    tm = malloc(sizeof(double) * (size_t)n);
    phase(n, tb, tm, "");
    if (warm > 0) {
        enum { WN = 4096 };
        int *in = malloc(sizeof(int) * WN), *out = malloc(sizeof(int) * WN);
        int bad = 0, all = 0;
        for (int w = 0; w < warm; w++) {
            for (int i = 0; i < WN; i++)
                in[i] = i + w;
            MPI_Allreduce(in, out, WN, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            bad += out[WN - 1] != size * (WN - 1 + w);
            MPI_Reduce(in, out, WN, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
            bad += rank == 0 && out[0] != size * w;
            if (rank == 0)
                in[0] = 7 * w;
            MPI_Bcast(in, WN, MPI_INT, 0, MPI_COMM_WORLD);
            bad += in[0] != 7 * w;
        }
        MPI_Reduce(&bad, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0 && all)
            fprintf(stderr, "obarrier: %d wrong results of the warm rounds\n",
                    all);
        free(in);
        free(out);
        snprintf(label, sizeof(label), "after %d warm rounds: ", warm);
        phase(n, tb, tm, label);
    }
    free(tb);
    free(tm);
    MPI_Finalize();
    return 0;
}
