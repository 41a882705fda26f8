/*
 * tune: the MPI layer's selection table at work. Every collective the
 * layer knows, in its blocking, nonblocking and persistent (two starts)
 * forms, at each size given on the command line, in an order that
 * switches between the sizes on consecutive calls (up the list, then down
 * it), so that with a table putting some sizes in libincoll and others in
 * MPI's own a collective changes path from one call to the next. Every
 * result is checked over the whole buffer.
 *
 *   tune [--rank-env R:NAME=VALUE] BYTES...
 *
 * BYTES is what the table's sizes mean (src/common/tune.h): the vector of
 * an allreduce, reduce and bcast, a rank's block of an allgather, gather
 * and scatter, a rank's result of a reduce_scatter(_block); multiples of
 * 4 (ints). --rank-env sets NAME=VALUE in rank R's environment before
 * MPI_Init (from the launcher's rank variable), so that ranks start with
 * different settings. Rank 0 prints "tune: calls COLL FORM BYTES N" for
 * each (collective, form, size) (N: calls, or starts of persistent
 * requests, of which "inits" there are N / 2), then "tune: ok".
 */
#include <mpi.h>
#ifdef OPEN_MPI
#include <mpi-ext.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(OPEN_MPI) && defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define P_INIT(name) MPIX_##name##_init
#elif !defined(OPEN_MPI) && MPI_VERSION >= 4
#define P_INIT(name) MPI_##name##_init
#endif

enum {
    C_ALLREDUCE,
    C_REDUCE,
    C_BCAST,
    C_BARRIER,
    C_ALLGATHER,
    C_GATHER,
    C_SCATTER,
    C_RSB,
    C_RS,
    C_COUNT
};
static const char *const names[C_COUNT] = {
    "allreduce",     "reduce", "bcast",   "barrier",
    "allgather",     "gather", "scatter", "reduce_scatter_block",
    "reduce_scatter"};
static const char *const forms[3] = {"blocking", "nb", "persistent"};

#define MAX_SIZES 16

static int rank, size, *sendb, *recvb, *counts;

static void fail(int c, int f, long bytes, long i, int got, int want)
{
    fprintf(stderr,
            "tune: rank %d: %s %s of %ld bytes: int %ld is %d, want %d\n", rank,
            names[c], forms[f], bytes, i, got, want);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int val(int r, long i, int it)
{
    return (int)((r * 7 + i * 3 + it) % 1009);
}

/* Starts (persistent: inits) call c in form f on n ints; *rq for nb and
 * persistent. */
static int start(int c, int f, int n, MPI_Request *rq)
{
    MPI_Comm w = MPI_COMM_WORLD;
#ifdef P_INIT
#define PI(name, ...) P_INIT(name)(__VA_ARGS__, MPI_INFO_NULL, rq)
#else
#define PI(name, ...) (MPI_Abort(w, 3), MPI_ERR_OTHER)
#endif
#define GO(B, I, P, ...)                                                       \
    return f == 0   ? MPI_##B(__VA_ARGS__)                                     \
           : f == 1 ? MPI_##I(__VA_ARGS__, rq)                                 \
                    : PI(P, __VA_ARGS__)
    switch (c) {
    case C_ALLREDUCE:
        GO(Allreduce, Iallreduce, Allreduce, sendb, recvb, n, MPI_INT, MPI_SUM,
           w);
    case C_REDUCE:
        GO(Reduce, Ireduce, Reduce, sendb, recvb, n, MPI_INT, MPI_SUM, 0, w);
    case C_BCAST:
        GO(Bcast, Ibcast, Bcast, recvb, n, MPI_INT, 0, w);
    case C_BARRIER:
        return f == 0   ? MPI_Barrier(w)
               : f == 1 ? MPI_Ibarrier(w, rq)
                        : PI(Barrier, w);
    case C_ALLGATHER:
        GO(Allgather, Iallgather, Allgather, sendb, n, MPI_INT, recvb, n,
           MPI_INT, w);
    case C_GATHER:
        GO(Gather, Igather, Gather, sendb, n, MPI_INT, recvb, n, MPI_INT, 0, w);
    case C_SCATTER:
        GO(Scatter, Iscatter, Scatter, sendb, n, MPI_INT, recvb, n, MPI_INT, 0,
           w);
    case C_RSB:
        GO(Reduce_scatter_block, Ireduce_scatter_block, Reduce_scatter_block,
           sendb, recvb, n, MPI_INT, MPI_SUM, w);
    default:
        GO(Reduce_scatter, Ireduce_scatter, Reduce_scatter, sendb, recvb,
           counts, MPI_INT, MPI_SUM, w);
    }
#undef GO
#undef PI
}

static void prepare(int c, int n, int it)
{
    long k = c == C_SCATTER || c == C_RSB || c == C_RS ? (long)n * size : n;
    for (long i = 0; i < k; i++)
        sendb[i] = val(rank, i, it);
    for (long i = 0; i < (long)n * size + 4; i++)
        recvb[i] = -5;
    if (c == C_BCAST && rank == 0)
        for (long i = 0; i < n; i++)
            recvb[i] = val(0, i, it);
    for (int r = 0; r < size; r++)
        counts[r] = n;
}

static void verify(int c, int f, int n, int it)
{
    long bytes = (long)n * 4, got_n = n;
    int sum;
    for (long i = 0; i < (long)n * size + 4; i++) {
        int want = -5;
        long blk = i / (n ? n : 1), off = i % (n ? n : 1);
        switch (c) {
        case C_BARRIER:
            break;
        case C_BCAST:
            if (i < n)
                want = val(0, i, it);
            break;
        case C_ALLREDUCE:
        case C_REDUCE:
        case C_RSB:
        case C_RS:
            if (i < n && (c != C_REDUCE || rank == 0)) {
                long at = c == C_RSB || c == C_RS ? (long)rank * n + i : i;
                sum = 0;
                for (int r = 0; r < size; r++)
                    sum += val(r, at, it);
                want = sum;
            }
            break;
        case C_ALLGATHER:
        case C_GATHER:
            if (i < (long)n * size && (c == C_ALLGATHER || rank == 0))
                want = val((int)blk, off, it);
            break;
        default:
            if (i < n)
                want = val(0, (long)rank * n + i, it);
        }
        if (recvb[i] != want)
            fail(c, f, bytes, i, recvb[i], want);
    }
    (void)got_n;
}

int main(int argc, char **argv)
{
    long sizes[MAX_SIZES];
    int ns = 0, it = 0, calls[C_COUNT][3][MAX_SIZES];
    const char *env_rank = getenv("OMPI_COMM_WORLD_RANK");
    long max = 4;

    if (env_rank == NULL)
        env_rank = getenv("PMI_RANK");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rank-env") == 0 && i + 1 < argc) {
            char *spec = argv[++i], *colon = strchr(spec, ':');
            char *eq = colon ? strchr(colon, '=') : NULL;
            if (eq == NULL) {
                fprintf(stderr, "tune: bad --rank-env %s\n", spec);
                return 2;
            }
            if (env_rank && atoi(spec) == atoi(env_rank)) {
                *eq = '\0';
                setenv(colon + 1, eq + 1, 1);
            }
        } else if (ns < MAX_SIZES) {
            sizes[ns] = strtol(argv[i], NULL, 10);
            if (sizes[ns] < 0 || sizes[ns] % 4 != 0) {
                fprintf(stderr, "tune: bad size %s\n", argv[i]);
                return 2;
            }
            if (sizes[ns] > max)
                max = sizes[ns];
            ns++;
        }
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sendb = malloc((size_t)max * size + 64);
    recvb = malloc((size_t)max * size + 64);
    counts = malloc(sizeof(int) * (size_t)size);
    if (sendb == NULL || recvb == NULL || counts == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    memset(calls, 0, sizeof(calls));
    for (int c = 0; c < C_COUNT; c++) {
        for (int f = 0; f < 3; f++) {
#ifndef P_INIT
            if (f == 2)
                continue;
#endif
            /* Up the list and down again: the path may change at each
             * call. */
            for (int k = 0; k < 2 * ns; k++) {
                int s = k < ns ? k : 2 * ns - 1 - k;
                int n = (int)(sizes[s] / 4);
                MPI_Request rq = MPI_REQUEST_NULL;
                int rc;
                prepare(c, n, it);
                rc = start(c, f, n, &rq);
                if (rc == MPI_SUCCESS && f == 1)
                    rc = MPI_Wait(&rq, MPI_STATUS_IGNORE);
                if (rc == MPI_SUCCESS && f == 2) {
                    for (int round = 0; round < 2 && rc == MPI_SUCCESS;
                         round++) {
                        if (round == 1) {
                            verify(c, f, n, it);
                            prepare(c, n, ++it);
                        }
                        rc = MPI_Start(&rq);
                        if (rc == MPI_SUCCESS)
                            rc = MPI_Wait(&rq, MPI_STATUS_IGNORE);
                    }
                    if (rc == MPI_SUCCESS)
                        rc = MPI_Request_free(&rq);
                    calls[c][f][s]++;
                }
                if (rc != MPI_SUCCESS) {
                    fprintf(stderr,
                            "tune: rank %d: %s %s of %ld bytes: "
                            "error %d\n",
                            rank, names[c], forms[f], sizes[s], rc);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                verify(c, f, n, it);
                calls[c][f][s]++;
                it++;
            }
        }
    }
    if (rank == 0) {
        for (int c = 0; c < C_COUNT; c++)
            for (int f = 0; f < 3; f++)
                for (int s = 0; s < ns; s++)
                    if (calls[c][f][s])
                        printf("tune: calls %s %s %ld %d\n", names[c], forms[f],
                               sizes[s], calls[c][f][s]);
        printf("tune: ok\n");
    }
    free(sendb);
    free(recvb);
    free(counts);
    MPI_Finalize();
    return 0;
}
