/*
 * nbcolls: the nonblocking collectives libincoll_mpi offloads
 * (MPI_Iallreduce, Ireduce, Ibcast, Ibarrier, Iallgather,
 * Ireduce_scatter_block), completed by every kind of MPI completion call
 * over arrays that mix them with point-to-point requests: Waitall,
 * Testany loops, Waitsome, Wait, Test, Request_get_status and
 * Request_free. Each result is compared with what PMPI_ computes from the
 * same input in the same run.
 *
 *   nbcolls [--threads]
 *
 * Then collectives on the world and a duplicate started in different
 * orders on even and odd ranks.
 *
 * --threads asks for MPI_THREAD_MULTIPLE and then runs, in two threads at
 * once, allreduces (blocking and not) on two duplicates of the world.
 * Prints "nbcolls: ok N checks" at rank 0 and exits 0, or names the first
 * mismatch and aborts.
 */
#include <mpi.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size;
static long checks;

static void fail(const char *what, long i, long long got, long long want)
{
    fprintf(stderr, "nbcolls: rank %d: %s: element %ld is %lld, want %lld\n",
            rank, what, i, got, want);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void same(const char *what, const int64_t *got, const int64_t *want,
                 long n)
{
    for (long i = 0; i < n; i++)
        if (got[i] != want[i])
            fail(what, i, (long long)got[i], (long long)want[i]);
    checks++;
}

static void fill(int64_t *v, long n, int k)
{
    for (long i = 0; i < n; i++)
        v[i] = (int64_t)(rank + 1) * (i % 977 + 1) + 5 * k - rank;
}

/* Collectives and a ring exchange in one Waitall, then in Testany, then
 * in Waitsome. */
static void mixed(int how, long n)
{
    enum { NR = 8 };
    int64_t *in = malloc(n * sizeof(int64_t)),
            *ar = malloc(n * sizeof(int64_t));
    int64_t *ref = malloc(n * sizeof(int64_t)),
            *red = malloc(n * sizeof(int64_t));
    int64_t *ag = malloc((size_t)size * 64 * sizeof(int64_t));
    int64_t *agref = malloc((size_t)size * 64 * sizeof(int64_t));
    int64_t *rsin = malloc((size_t)size * 16 * sizeof(int64_t));
    int64_t rs[16], rsref[16], bc[100], bcref[100], sendv = rank * 11,
                                                    recvv = -1;
    int64_t agin[64];
    MPI_Request r[NR];
    MPI_Status sts[NR];
    int root = size - 1, left = NR;

    fill(in, n, how);
    fill(agin, 64, how + 20);
    fill(rsin, (long)size * 16, how + 50);
    for (int i = 0; i < 100; i++)
        bc[i] = rank == root ? i * 3 + how : -1;
    MPI_Iallreduce(in, ar, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(&recvv, 1, MPI_INT64_T, (rank + size - 1) % size, 7,
              MPI_COMM_WORLD, &r[1]);
    MPI_Isend(&sendv, 1, MPI_INT64_T, (rank + 1) % size, 7, MPI_COMM_WORLD,
              &r[2]);
    MPI_Ibcast(bc, 100, MPI_INT64_T, root, MPI_COMM_WORLD, &r[3]);
    MPI_Ireduce(in, red, (int)n, MPI_INT64_T, MPI_MAX, 0, MPI_COMM_WORLD,
                &r[4]);
    MPI_Ibarrier(MPI_COMM_WORLD, &r[5]);
    MPI_Iallgather(agin, 64, MPI_INT64_T, ag, 64, MPI_INT64_T, MPI_COMM_WORLD,
                   &r[6]);
    MPI_Ireduce_scatter_block(rsin, rs, 16, MPI_INT64_T, MPI_SUM,
                              MPI_COMM_WORLD, &r[7]);
    if (how == 0) {
        MPI_Waitall(NR, r, sts);
    } else if (how == 1) {
        while (left > 0) {
            int idx, flag;
            MPI_Testany(NR, r, &idx, &flag, MPI_STATUS_IGNORE);
            if (getenv("NBCOLLS_NAP"))
                usleep(50);
            if (flag && idx != MPI_UNDEFINED)
                left--;
            else if (flag)
                break; /* all inactive */
        }
    } else if (how == 2) {
        while (left > 0) {
            int out, idx[NR];
            MPI_Waitsome(NR, r, &out, idx, sts);
            if (out == MPI_UNDEFINED)
                break;
            left -= out;
        }
    } else {
        /* One by one, backwards, by Test, Request_get_status and Wait. */
        for (int i = NR - 1; i >= 0; i--) {
            int flag = 0;
            if (i % 2) {
                while (!flag)
                    MPI_Request_get_status(r[i], &flag, MPI_STATUS_IGNORE);
                MPI_Wait(&r[i], MPI_STATUS_IGNORE);
            } else {
                while (!flag)
                    MPI_Test(&r[i], &flag, MPI_STATUS_IGNORE);
            }
        }
    }
    for (int i = 0; i < NR; i++)
        if (r[i] != MPI_REQUEST_NULL) {
            fprintf(stderr, "nbcolls: rank %d: request %d not freed\n", rank,
                    i);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    PMPI_Allreduce(in, ref, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    same("iallreduce", ar, ref, n);
    PMPI_Reduce(in, ref, (int)n, MPI_INT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        same("ireduce", red, ref, n);
    for (int i = 0; i < 100; i++)
        bcref[i] = i * 3 + how;
    same("ibcast", bc, bcref, 100);
    PMPI_Allgather(agin, 64, MPI_INT64_T, agref, 64, MPI_INT64_T,
                   MPI_COMM_WORLD);
    same("iallgather", ag, agref, (long)size * 64);
    PMPI_Reduce_scatter_block(rsin, rsref, 16, MPI_INT64_T, MPI_SUM,
                              MPI_COMM_WORLD);
    same("ireduce_scatter_block", rs, rsref, 16);
    if (recvv != ((rank + size - 1) % size) * 11)
        fail("ring receive", 0, (long long)recvv,
             (long long)((rank + size - 1) % size) * 11);
    free(in);
    free(ar);
    free(ref);
    free(red);
    free(ag);
    free(agref);
    free(rsin);
}

/* Many outstanding on one communicator, in place among them, waited for
 * at once; a freed request completes by itself. */
static void many(void)
{
    enum { K = 16, N = 3000 };
    int64_t *buf = malloc((size_t)K * N * sizeof(int64_t));
    int64_t *in = malloc(N * sizeof(int64_t)),
            *ref = malloc(N * sizeof(int64_t));
    MPI_Request r[K], fr;
    MPI_Status sts[K];
    for (int k = 0; k < K; k++) {
        fill(buf + (size_t)k * N, N, 100 + k);
        MPI_Iallreduce(MPI_IN_PLACE, buf + (size_t)k * N, N, MPI_INT64_T,
                       MPI_SUM, MPI_COMM_WORLD, &r[k]);
    }
    MPI_Ibarrier(MPI_COMM_WORLD, &fr);
    MPI_Request_free(&fr);
    MPI_Waitall(K, r, sts);
    for (int k = 0; k < K; k++) {
        fill(in, N, 100 + k);
        PMPI_Allreduce(in, ref, N, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        same("many in place", buf + (size_t)k * N, ref, N);
    }
    free(buf);
    free(in);
    free(ref);
}

/*
 * Collectives on two communicators started in different orders on
 * different ranks, as MPI allows (a collective's matching is per
 * communicator): even ranks start an MPI_Iallreduce on the world and
 * then a blocking MPI_Allreduce on a duplicate, odd ranks the other way
 * round. The vectors have the same length, so an offload that matched
 * the two by start order would return the other call's sums.
 */
static void cross(void)
{
    enum { N = 4000 };
    MPI_Comm dup;
    MPI_Request r;
    int64_t *a = malloc(N * sizeof(int64_t)), *b = malloc(N * sizeof(int64_t));
    int64_t *in = malloc(N * sizeof(int64_t)),
            *ref = malloc(N * sizeof(int64_t));

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int it = 0; it < 3; it++) {
        fill(a, N, 300 + it);
        fill(b, N, 400 + it);
        if (rank % 2 == 0) {
            MPI_Iallreduce(MPI_IN_PLACE, a, N, MPI_INT64_T, MPI_SUM,
                           MPI_COMM_WORLD, &r);
            MPI_Allreduce(MPI_IN_PLACE, b, N, MPI_INT64_T, MPI_SUM, dup);
        } else {
            MPI_Allreduce(MPI_IN_PLACE, b, N, MPI_INT64_T, MPI_SUM, dup);
            MPI_Iallreduce(MPI_IN_PLACE, a, N, MPI_INT64_T, MPI_SUM,
                           MPI_COMM_WORLD, &r);
        }
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        fill(in, N, 300 + it);
        PMPI_Allreduce(in, ref, N, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        same("world's iallreduce beside a dup's allreduce", a, ref, N);
        fill(in, N, 400 + it);
        PMPI_Allreduce(in, ref, N, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        same("dup's allreduce beside the world's iallreduce", b, ref, N);
    }
    MPI_Comm_free(&dup);
    free(a);
    free(b);
    free(in);
    free(ref);
}

typedef struct {
    MPI_Comm comm;
    int k;
} thr_t;

static void *thr_main(void *arg)
{
    thr_t *t = arg;
    enum { N = 5000 };
    int64_t *in = malloc(N * sizeof(int64_t)),
            *out = malloc(N * sizeof(int64_t));
    for (int it = 0; it < 30; it++) {
        int k = t->k * 100 + it;
        fill(in, N, k);
        if (it % 2) {
            MPI_Request r;
            MPI_Iallreduce(in, out, N, MPI_INT64_T, MPI_SUM, t->comm, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else {
            MPI_Allreduce(in, out, N, MPI_INT64_T, MPI_SUM, t->comm);
        }
        for (long i = 0; i < N; i++) {
            int64_t want = 0;
            for (int q = 0; q < size; q++)
                want += (int64_t)(q + 1) * (i % 977 + 1) + 5 * k - q;
            if (out[i] != want)
                fail("allreduce in a thread", i, (long long)out[i],
                     (long long)want);
        }
    }
    free(in);
    free(out);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 && strcmp(argv[1], "--threads") == 0;
    int provided;

    MPI_Init_thread(&argc, &argv,
                    threads ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE,
                    &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int how = 0; how < 4; how++) {
        mixed(how, 7);
        mixed(how, 20001);
        if (getenv("NBCOLLS_VERBOSE") && rank == 0)
            fprintf(stderr, "nbcolls: completion kind %d ok\n", how);
    }
    many();
    cross();
    if (threads) {
        thr_t t[2];
        pthread_t th[2];
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "nbcolls: MPI_THREAD_MULTIPLE not provided\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (int i = 0; i < 2; i++) {
            MPI_Comm_dup(MPI_COMM_WORLD, &t[i].comm);
            t[i].k = i + 1;
            /* The layer sets a communicator up at its first collective, a
             * collective call of its own: once here, before the threads. */
            MPI_Barrier(t[i].comm);
        }
        for (int i = 0; i < 2; i++)
            pthread_create(&th[i], NULL, thr_main, &t[i]);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < 2; i++)
            MPI_Comm_free(&t[i].comm);
        checks += 2;
    }
    if (rank == 0)
        printf("nbcolls: ok %ld checks\n", checks);
    MPI_Finalize();
    return 0;
}
