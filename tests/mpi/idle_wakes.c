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
#include "coll_loop.h"

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64

typedef struct {
    long tid, vol, invol;
    char name[32];
} thread_count_t;

static int rank; /* for report() */

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
static __attribute__((noinline)) void calls(const coll_loop_t *l)
{
    for (int i = 0; i < l->iters; i++)
        coll_loop_call(l);
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
    int first_allreduce = argc > 4 && strcmp(argv[4], "allreduce") == 0;
    coll_loop_t l;
    int nb, na;
    double t0, t1;

    MPI_Init(&argc, &argv);
    coll_loop_setup(&l, "idle_wakes",
                    "[bcast|allgather] [BYTES] [ITERS] [allreduce]", argc, argv,
                    10000);
    rank = l.rank;
    /* the first call outside the loop (the layer sets the communicator
     * up there) */
    coll_loop_call(&l);
    if (first_allreduce) {
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (sum != l.size) {
            fprintf(stderr, "idle_wakes: rank %d: WRONG allreduce %d\n", rank,
                    sum);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    nb = read_threads(before, MAX_THREADS);
    t0 = now_us();
    calls(&l);
    t1 = now_us();
    na = read_threads(after, MAX_THREADS);
    coll_loop_check(&l);
    /* one rank's lines at a time */
    for (int r = 0; r < l.size; r++) {
        if (r == rank)
            report(before, nb, after, na, t1 - t0);
        PMPI_Barrier(MPI_COMM_WORLD);
    }
    coll_loop_done(&l);
    MPI_Finalize();
    return 0;
}
