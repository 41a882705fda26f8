/*
 * othreads: coll/incoll at each thread level Open MPI offers. Two
 * communicators, each a dup of MPI_COMM_WORLD, get ROUNDS rounds of
 * MPI_Allreduce (in place and not), MPI_Reduce, MPI_Bcast, MPI_Barrier
 * and MPI_Iallreduce, each result checked against the value it must have
 * (computed here: every MPI collective of the process goes through the
 * component).
 *
 *   othreads multiple|serialized|funneled|single [ROUNDS]
 *
 * multiple: two threads, one per communicator, at the same time (a
 * pthread barrier starts each round of both together); serialized: the
 * same two threads taking turns (one MPI call at a time, in the same order
 * on every rank); funneled and single: the
 * main thread, alternating between the two. The level asked for must be
 * the one provided. Prints at rank 0 "othreads: ok LEVEL N calls" (N the
 * collective calls made per rank), else each failure on stderr and exit 1.
 */
#include <mpi.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096

static int wrank, wsize, rounds = 20, errors, calls;
static pthread_barrier_t both;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, level;

#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            if (__atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED) < 10) {       \
                fprintf(stderr, "othreads: rank %d: ", wrank);                 \
                fprintf(stderr, __VA_ARGS__);                                  \
                fprintf(stderr, "\n");                                         \
            }                                                                  \
        }                                                                      \
    } while (0)

/* One round on comm (its index t), with n elements. */
static void round_on(MPI_Comm comm, int t, int r, int n, long *in, long *out)
{
    long sum_ranks = (long)wsize * (wsize - 1) / 2;
    MPI_Request req;

    for (int i = 0; i < n; i++)
        in[i] = (long)wrank * (t + 1) + i + r;
    /* allreduce: sum over ranks of rank*(t+1) + i + r */
    MPI_Allreduce(in, out, n, MPI_LONG, MPI_SUM, comm);
    for (int i = 0; i < n; i++)
        EXPECT(out[i] == sum_ranks * (t + 1) + (long)wsize * (i + r),
               "comm %d round %d allreduce [%d] = %ld", t, r, i, out[i]);
    memcpy(out, in, (size_t)n * sizeof(long));
    MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_LONG, MPI_MAX, comm);
    for (int i = 0; i < n; i++)
        EXPECT(out[i] == (long)(wsize - 1) * (t + 1) + i + r,
               "comm %d round %d allreduce in place [%d] = %ld", t, r, i,
               out[i]);
    /* reduce to a rotating root */
    memset(out, 0, (size_t)n * sizeof(long));
    MPI_Reduce(in, out, n, MPI_LONG, MPI_SUM, r % wsize, comm);
    if (wrank == r % wsize)
        for (int i = 0; i < n; i++)
            EXPECT(out[i] == sum_ranks * (t + 1) + (long)wsize * (i + r),
                   "comm %d round %d reduce [%d] = %ld", t, r, i, out[i]);
    /* bcast from another rotating root */
    for (int i = 0; i < n; i++)
        out[i] = wrank == (r + 1) % wsize ? 7L * i + t + r : -1;
    MPI_Bcast(out, n, MPI_LONG, (r + 1) % wsize, comm);
    for (int i = 0; i < n; i++)
        EXPECT(out[i] == 7L * i + t + r, "comm %d round %d bcast [%d] = %ld", t,
               r, i, out[i]);
    MPI_Barrier(comm);
    /* nonblocking */
    MPI_Iallreduce(in, out, n, MPI_LONG, MPI_MIN, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++)
        EXPECT(out[i] == (long)i + r, "comm %d round %d iallreduce [%d] = %ld",
               t, r, i, out[i]);
    __atomic_fetch_add(&calls, 6, __ATOMIC_RELAXED);
}

static int size_of(int r)
{
    static const int sizes[] = {1, 13, 250, N};
    return sizes[r % 4];
}

typedef struct {
    MPI_Comm comm;
    int t;
} arg_t;

static void *thread_main(void *p)
{
    arg_t *a = p;
    long *in = malloc(N * sizeof(long)), *out = malloc(N * sizeof(long));

    for (int r = 0; r < rounds; r++) {
        if (level == MPI_THREAD_MULTIPLE) {
            /* both threads in their collectives at once */
            pthread_barrier_wait(&both);
            round_on(a->comm, a->t, r, size_of(r), in, out);
        } else {
            /* in turns, the same order on every rank */
            pthread_mutex_lock(&mu);
            while (turn != a->t)
                pthread_cond_wait(&cv, &mu);
            round_on(a->comm, a->t, r, size_of(r), in, out);
            turn = 1 - turn;
            pthread_cond_broadcast(&cv);
            pthread_mutex_unlock(&mu);
        }
    }
    free(in);
    free(out);
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"single", "funneled", "serialized",
                                        "multiple"};
    MPI_Comm comm[2];
    arg_t args[2];
    int provided, total;

    level = MPI_THREAD_MULTIPLE;
    for (int l = 0; argc > 1 && l < 4; l++)
        if (strcmp(argv[1], names[l]) == 0)
            level = l == 0   ? MPI_THREAD_SINGLE
                    : l == 1 ? MPI_THREAD_FUNNELED
                    : l == 2 ? MPI_THREAD_SERIALIZED
                             : MPI_THREAD_MULTIPLE;
    if (argc > 2)
        rounds = atoi(argv[2]);
    MPI_Init_thread(&argc, &argv, level, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    EXPECT(provided == level, "asked for thread level %d, provided %d", level,
           provided);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm[1]);
    for (int t = 0; t < 2; t++) {
        args[t].comm = comm[t];
        args[t].t = t;
    }
    if (level == MPI_THREAD_MULTIPLE || level == MPI_THREAD_SERIALIZED) {
        pthread_t th[2];
        pthread_barrier_init(&both, NULL, 2);
        for (int t = 0; t < 2; t++)
            pthread_create(&th[t], NULL, thread_main, &args[t]);
        for (int t = 0; t < 2; t++)
            pthread_join(th[t], NULL);
        pthread_barrier_destroy(&both);
    } else {
        long *in = malloc(N * sizeof(long)), *out = malloc(N * sizeof(long));
        for (int r = 0; r < rounds; r++)
            for (int t = 0; t < 2; t++)
                round_on(comm[t], t, r, size_of(r), in, out);
        free(in);
        free(out);
    }
    MPI_Comm_free(&comm[0]);
    MPI_Comm_free(&comm[1]);
    /* the verdict, by point-to-point messages */
    total = errors;
    if (wrank == 0) {
        for (int r = 1; r < wsize; r++) {
            int e;
            MPI_Recv(&e, 1, MPI_INT, r, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            total += e;
        }
        if (total == 0)
            printf("othreads: ok %s %d calls\n",
                   argc > 1 ? argv[1] : "multiple", calls);
        else
            printf("othreads: %d errors\n", total);
        fflush(stdout);
    } else {
        MPI_Send(&errors, 1, MPI_INT, 0, 98, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return total ? 1 : 0;
}
