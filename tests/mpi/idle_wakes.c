/*
 * idle_wakes: what a process's threads do while its collectives run on
 * the MPI library's own, counted rather than timed (docs/tuning.md,
 * "What else a call given to MPI costs"). After one untimed call (where
 * the layer sets the communicator up), ITERS calls of COLL (bcast or
 * allgather) of BYTES bytes on MPI_COMM_WORLD; around that loop each
 * rank reads the context switches of every one of its threads
 * (/proc/self/task/TID/status: voluntary, nonvoluntary) and prints, per
 * thread, what changed:
 *
 *   idle: rank R tid T name NAME vol V invol I
 *   idle: rank R total vol V invol I threads N loop_us U
 *
 * (a thread's voluntary switches are its sleeps, so a sleeping thread's
 * count is the times it woke; the calling thread's are its waits inside
 * the MPI library). The result of the last call is checked. Run it with
 * the layer and a table that gives the call to MPI's own, and without
 * the layer (INCOLL_MPI_ENABLE=0), side by side.
 *
 *   idle_wakes [bcast|allgather] [BYTES] [ITERS] [allreduce]
 *                                                 (bcast 1024 10000)
 *
 * With "allreduce" one MPI_Allreduce of an int comes first, outside the
 * loop: where the table runs it in libincoll, MPI_COMM_WORLD then has
 * its libincoll communicator and group, as in a job whose earlier calls
 * ran in the network (incoll-tune-mpi's).
 *
 * Prints "idle_wakes: ok COLL BYTES ITERS" at rank 0.
 */
#include <mpi.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64

typedef struct {
    long tid, vol, invol;
    char name[32];
} thread_count_t;

static int rank, size;

/* One thread's name and switches; 0, or -1 when it is gone. */
static int read_thread(long tid, thread_count_t *t)
{
    char path[96], line[256];
    FILE *f;

    t->tid = tid;
    t->vol = t->invol = -1;
    t->name[0] = '\0';
    snprintf(path, sizeof(path), "/proc/self/task/%ld/status", tid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "Name:", 5) == 0)
            sscanf(line + 5, " %31[^\n]", t->name);
        else if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
            t->vol = atol(line + 24);
        else if (strncmp(line, "nonvoluntary_ctxt_switches:", 27) == 0)
            t->invol = atol(line + 27);
    }
    fclose(f);
    return t->vol < 0 || t->invol < 0 ? -1 : 0;
}

/* Every thread of the process now; their count. */
static int read_threads(thread_count_t *v, int max)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL && n < max) {
        long tid = atol(e->d_name);
        if (tid > 0 && read_thread(tid, &v[n]) == 0)
            n++;
    }
    closedir(d);
    return n;
}

/* The calls counted: nothing else inside. */
static __attribute__((noinline)) void calls(int allgather, char *send,
                                            char *recv, int bytes, int iters)
{
    for (int i = 0; i < iters; i++) {
        if (allgather)
            MPI_Allgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE,
                          MPI_COMM_WORLD);
        else
            MPI_Bcast(recv, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Each thread's change between before and after, printed; a thread
 * that started during the loop counts from 0. */
static void report(const thread_count_t *before, int nb,
                   const thread_count_t *after, int na, double us)
{
    char out[8192];
    size_t k = 0;
    long vol = 0, invol = 0;

    for (int i = 0; i < na; i++) {
        long v0 = 0, i0 = 0;
        for (int j = 0; j < nb; j++)
            if (before[j].tid == after[i].tid) {
                v0 = before[j].vol;
                i0 = before[j].invol;
            }
        vol += after[i].vol - v0;
        invol += after[i].invol - i0;
        k += (size_t)snprintf(
            out + k, k < sizeof(out) ? sizeof(out) - k : 0,
            "idle: rank %d tid %ld name %s%s vol %ld invol %ld\n", rank,
            after[i].tid, after[i].name,
            after[i].tid == (long)getpid() ? " (main)" : "", after[i].vol - v0,
            after[i].invol - i0);
    }
    if (k < sizeof(out))
        snprintf(out + k, sizeof(out) - k,
                 "idle: rank %d total vol %ld invol %ld threads %d loop_us "
                 "%.0f\n",
                 rank, vol, invol, na, us);
    fputs(out, stdout);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static thread_count_t before[MAX_THREADS], after[MAX_THREADS];
    const char *coll = argc > 1 ? argv[1] : "bcast";
    int bytes = argc > 2 ? atoi(argv[2]) : 1024;
    int iters = argc > 3 ? atoi(argv[3]) : 10000;
    int allgather = strcmp(coll, "allgather") == 0;
    int first_allreduce = argc > 4 && strcmp(argv[4], "allreduce") == 0;
    int nb, na;
    char *send, *recv;
    double t0, t1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if ((!allgather && strcmp(coll, "bcast") != 0) || bytes < 1 || iters < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: idle_wakes [bcast|allgather] [BYTES] "
                            "[ITERS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    send = malloc((size_t)bytes);
    recv = malloc((size_t)bytes * (size_t)size);
    if (send == NULL || recv == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < bytes; i++)
        send[i] = (char)(rank * 7 + i);
    memcpy(recv, send, (size_t)bytes);
    /* the first call outside the loop (the layer sets the communicator
     * up there) */
    calls(allgather, send, recv, bytes, 1);
    if (first_allreduce) {
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (sum != size) {
            fprintf(stderr, "idle_wakes: rank %d: WRONG allreduce %d\n", rank,
                    sum);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    nb = read_threads(before, MAX_THREADS);
    t0 = now_us();
    calls(allgather, send, recv, bytes, iters);
    t1 = now_us();
    na = read_threads(after, MAX_THREADS);
    for (int r = 0; r < (allgather ? size : 1); r++)
        for (int i = 0; i < bytes; i++)
            if (recv[(size_t)r * (size_t)bytes + (size_t)i] !=
                (char)(r * 7 + i)) {
                fprintf(stderr,
                        "idle_wakes: rank %d: WRONG %s block %d byte %d\n",
                        rank, coll, r, i);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
    /* one rank's lines at a time */
    for (int r = 0; r < size; r++) {
        if (r == rank)
            report(before, nb, after, na, t1 - t0);
        PMPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("idle_wakes: ok %s %d %d\n", coll, bytes, iters);
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
