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
 * robust to the stalls of a loaded machine), and the median of a whole
 * iteration (iter_med_us: the untimed barrier, the timed call and the
 * check), which is what a shaped link's tokens bound: a call that waits
 * for tokens looks the slower the faster the rest of its iteration is.
 * Prints, at rank 0,
 *   osu_coll: allreduce 1024 avg_us 201.3 max_us 230.1 med_us 190.2
 *   iter_med_us 301.7
 * and "osu_coll: ok" when every check held on every rank.
 *
 *   osu_coll [MAX_BYTES [ITERS]]
 *
 * With OSU_COLL_KILL_CMD set, rank 0 runs it (e.g. kills an AN) after the
 * first timed allreduce: the rest must still be right. OSU_COLL_ONLY=NAME
 * (allreduce, reduce, bcast or barrier) runs that collective alone;
 * OSU_COLL_MIN=BYTES starts the sizes there (rounded down to 4 times a
 * power of 4; default 4). OSU_COLL_GAP_US=N sleeps N us at the start of
 * each iteration (a program that computes between its calls): on a shaped
 * link the tokens then refill, and a call bound by the link's rate when
 * the iterations run back to back measures its latency instead.
 * OSU_COLL_COUNTS=1 adds, per row, what the job's processes did during its
 * timed calls, summed over ranks, per call: context switches of all their
 * threads, voluntary and not (/proc/self/task/N/status), CPU time in us
 * (getrusage), the threads of rank 0, the sockets open in all ranks at its
 * end and the established TCP connections of their namespaces (MPI's
 * connections), then the same counts by class of thread with the time
 * each spent runnable but waiting for a CPU and its moves between CPUs,
 * and the datagrams and segments of the ranks' namespaces (ocounts.h):
 *   osu_coll: counts barrier 0 vcsw 7.9 ivcsw 1.2 cpu_us 310.5 threads 4
 *   sockets 61 tcp 56 main vcsw 0.00 ivcsw 1.10 cpu_us 300.1 wait_us 820.4
 *   migr 0.010 watch vcsw ... other vcsw ... udp_in 0.00 udp_out 0.00
 *   tcp_in 48.10 tcp_out 48.20
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ocounts.h"

/* The sockets this process has open (MPI's connections among them). */
static int proc_sockets(void)
{
    char path[300], link[64];
    struct dirent *e;
    DIR *d = opendir("/proc/self/fd");
    int n = 0;

    while (d && (e = readdir(d)) != NULL) {
        ssize_t len;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        len = readlink(path, link, sizeof(link) - 1);
        if (len > 0 && (link[len] = '\0', strncmp(link, "socket:", 7) == 0))
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* Established TCP connections of this process's network namespace (on an
 * emulated fabric, its host's: MPI's connections among them). */
static int net_tcp(void)
{
    char line[256];
    FILE *f = fopen("/proc/self/net/tcp", "r");
    int n = 0;
    unsigned st;

    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, " %*d: %*s %*s %x", &st) == 1 && st == 1)
            n++;
    if (f)
        fclose(f);
    return n;
}

/* Context switches of every thread of this process (voluntary, not) and
 * its CPU time in us, then the same by class of thread (ocounts.h); the
 * number of its threads. */
static int proc_counts(double *v)
{
    struct rusage ru;
    int threads = ocounts_take(v + 3);

    onet_take(v + 3 + OC_N);

    v[0] = v[1] = 0;
    for (int c = 0; c < OC_T; c++) {
        v[0] += v[3 + c * OC_K + OC_VCSW];
        v[1] += v[3 + c * OC_K + OC_IVCSW];
    }
    getrusage(RUSAGE_SELF, &ru);
    v[2] = (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
    return threads;
}

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
    double *times, *iter;
    const char *only = getenv("OSU_COLL_ONLY");
    int min = getenv("OSU_COLL_MIN") ? atoi(getenv("OSU_COLL_MIN")) : 4;
    long gap = getenv("OSU_COLL_GAP_US") ? atol(getenv("OSU_COLL_GAP_US")) : 0;
    int counts = getenv("OSU_COLL_COUNTS") && atoi(getenv("OSU_COLL_COUNTS"));

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
    iter = malloc(sizeof(double) * (size_t)iters);
    for (int coll = 0; coll < 4; coll++)
        for (int bytes = 4; bytes <= max; bytes *= 4) {
            double sum = 0, avg = 0, mx = 0, med[2] = {0}, mine, mymed[2];
            /* vcsw, ivcsw, cpu_us, by class and the namespace's traffic
             * (ocounts.h), sockets, tcp */
            enum { CN = 3 + OC_N + ON_N + 2 };
            double c0[CN] = {0}, c1[CN], call[CN];
            int threads = 0;
            if ((coll == 3 && bytes > 4) ||
                (only && strcmp(only, names[coll]) != 0))
                break;
            if (coll < 3 && bytes * 4 <= min)
                continue; /* below OSU_COLL_MIN */
            for (int it = -2; it < iters; it++) {
                double t0 = MPI_Wtime();
                if (counts && it == 0)
                    proc_counts(c0);
                if (gap > 0) {
                    struct timespec ts = {gap / 1000000, gap % 1000000 * 1000};
                    nanosleep(&ts, NULL);
                }
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
                if (it >= 0)
                    iter[it] = MPI_Wtime() - t0;
            }
            if (counts) {
                threads = proc_counts(c1);
                for (int k = 0; k < 3 + OC_N + ON_N; k++)
                    c1[k] = (c1[k] - c0[k]) / iters;
                c1[CN - 2] = proc_sockets();
                c1[CN - 1] = net_tcp();
                MPI_Reduce(c1, call, CN, MPI_DOUBLE, MPI_SUM, 0,
                           MPI_COMM_WORLD);
                if (rank == 0) {
                    printf("osu_coll: counts %s %d vcsw %.1f ivcsw %.1f cpu_us "
                           "%.1f threads %d sockets %.0f tcp %.0f",
                           names[coll], coll == 3 ? 0 : bytes, call[0], call[1],
                           call[2], threads, call[CN - 2], call[CN - 1]);
                    ocounts_print(call + 3);
                    onet_print(call + 3 + OC_N);
                    printf("\n");
                }
            }
            mine = sum / iters * 1e6;
            qsort(times, (size_t)iters, sizeof(double), cmp_double);
            qsort(iter, (size_t)iters, sizeof(double), cmp_double);
            mymed[0] = times[iters / 2] * 1e6;
            mymed[1] = iter[iters / 2] * 1e6;
            MPI_Reduce(&mine, &avg, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(mymed, med, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(&mine, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0)
                printf("osu_coll: %s %d avg_us %.1f max_us %.1f med_us %.1f "
                       "iter_med_us %.1f\n",
                       names[coll], coll == 3 ? 0 : bytes, avg / size, mx,
                       med[0] / size, med[1] / size);
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
