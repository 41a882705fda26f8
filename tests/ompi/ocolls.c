/*
 * ocolls: every collective coll/incoll takes, in its blocking, nonblocking
 * and persistent (MPIX_*_init) forms, on MPI_COMM_WORLD, a dup and a split
 * in halves, each result checked against the value it must have (computed
 * here, not by MPI, since every MPI collective of the process goes
 * through the component). Sizes 1 element to 160 KB, in place where MPI
 * allows it, roots rotating, a bcast whose root sends a strided vector
 * (staged) while the others receive bytes. Then what the component must
 * leave to Open MPI: a user-defined op, MAXLOC on MPI_2INT,
 * MPI_Reduce_scatter with unequal counts, MPI_Scan. The verdict is
 * gathered with point-to-point messages: "ocolls: ok" at rank 0, else
 * each failure on stderr and exit 1.
 */
#include <mpi.h>
#include <mpi-ext.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int errors;
static int wrank;

#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            if (errors++ < 10) {                                               \
                fprintf(stderr, "ocolls: rank %d: ", wrank);                   \
                fprintf(stderr, __VA_ARGS__);                                  \
                fprintf(stderr, "\n");                                         \
            }                                                                  \
        }                                                                      \
    } while (0)

#define NSIZES 4
static const int sizes[NSIZES] = {1, 7, 1000, 20000};

typedef enum { BLOCKING = 0, NB, PERSISTENT } form_t;
static const char *const form_name[] = {"blocking", "nonblocking",
                                        "persistent"};

/* Waits (nb) or starts twice and waits (persistent) on req. */
static void finish(form_t form, MPI_Request *req, int reps)
{
    if (form == BLOCKING)
        return;
    if (form == NB) {
        MPI_Wait(req, MPI_STATUS_IGNORE);
        return;
    }
    for (int i = 0; i < reps; i++) {
        MPI_Start(req);
        MPI_Wait(req, MPI_STATUS_IGNORE);
    }
    MPI_Request_free(req);
}

static void check_allreduce(MPI_Comm comm, form_t form)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s];
        double *in = malloc(sizeof(double) * n),
               *out = malloc(sizeof(double) * n);
        int *iv = malloc(sizeof(int) * n);
        MPI_Request req;
        for (int i = 0; i < n; i++) {
            in[i] = rank + i * 0.5;
            iv[i] = rank * 3 + i;
        }
        if (form == BLOCKING)
            MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, comm);
        else if (form == NB)
            MPI_Iallreduce(in, out, n, MPI_DOUBLE, MPI_SUM, comm, &req);
        else
            MPIX_Allreduce_init(in, out, n, MPI_DOUBLE, MPI_SUM, comm,
                                MPI_INFO_NULL, &req);
        finish(form, &req, 2);
        for (int i = 0; i < n; i++) {
            double want = size * (size - 1) / 2.0 + size * i * 0.5;
            EXPECT(out[i] == want, "%s allreduce n=%d [%d]=%g want %g",
                   form_name[form], n, i, out[i], want);
            if (out[i] != want)
                break;
        }
        /* in place, MAX on int */
        if (form == BLOCKING)
            MPI_Allreduce(MPI_IN_PLACE, iv, n, MPI_INT, MPI_MAX, comm);
        else if (form == NB)
            MPI_Iallreduce(MPI_IN_PLACE, iv, n, MPI_INT, MPI_MAX, comm, &req);
        else
            MPIX_Allreduce_init(MPI_IN_PLACE, iv, n, MPI_INT, MPI_MAX, comm,
                                MPI_INFO_NULL, &req);
        finish(form, &req, 1);
        for (int i = 0; i < n; i++) {
            EXPECT(iv[i] == (size - 1) * 3 + i, "%s allreduce max n=%d [%d]=%d",
                   form_name[form], n, i, iv[i]);
            if (iv[i] != (size - 1) * 3 + i)
                break;
        }
        free(in);
        free(out);
        free(iv);
    }
}

static void check_reduce(MPI_Comm comm, form_t form)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s], root = s % size;
        long *buf = malloc(sizeof(long) * n), *out = malloc(sizeof(long) * n);
        MPI_Request req;
        for (int i = 0; i < n; i++)
            buf[i] = out[i] = rank + 1 + i;
        const void *sb = rank == root ? MPI_IN_PLACE : buf;
        if (form == BLOCKING)
            MPI_Reduce(sb, out, n, MPI_LONG, MPI_SUM, root, comm);
        else if (form == NB)
            MPI_Ireduce(sb, out, n, MPI_LONG, MPI_SUM, root, comm, &req);
        else
            MPIX_Reduce_init(sb, out, n, MPI_LONG, MPI_SUM, root, comm,
                             MPI_INFO_NULL, &req);
        finish(form, &req, 1);
        if (rank == root)
            for (int i = 0; i < n; i++) {
                long want = (long)size * (size + 1) / 2 + (long)size * i;
                EXPECT(out[i] == want,
                       "%s reduce n=%d root=%d [%d]=%ld want %ld",
                       form_name[form], n, root, i, out[i], want);
                if (out[i] != want)
                    break;
            }
        free(buf);
        free(out);
    }
}

static void check_bcast(MPI_Comm comm, form_t form)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s] * 8 + 3, root = (s + 1) % size;
        unsigned char *b = malloc((size_t)n);
        MPI_Request req;
        for (int i = 0; i < n; i++)
            b[i] = rank == root ? (unsigned char)(i * 7 + root) : 0;
        if (form == BLOCKING)
            MPI_Bcast(b, n, MPI_BYTE, root, comm);
        else if (form == NB)
            MPI_Ibcast(b, n, MPI_BYTE, root, comm, &req);
        else
            MPIX_Bcast_init(b, n, MPI_BYTE, root, comm, MPI_INFO_NULL, &req);
        finish(form, &req, 2);
        for (int i = 0; i < n; i++) {
            EXPECT(b[i] == (unsigned char)(i * 7 + root), "%s bcast n=%d [%d]",
                   form_name[form], n, i);
            if (b[i] != (unsigned char)(i * 7 + root))
                break;
        }
        free(b);
    }
    if (form == BLOCKING) {
        /* the root sends every other int of a strided vector, the others
         * receive ints: same signature, one staged side */
        int n = 500, *v = calloc((size_t)n * 2, sizeof(int));
        MPI_Datatype vec;
        MPI_Type_vector(n, 1, 2, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        for (int i = 0; i < n; i++)
            v[2 * i] = rank == 0 ? i * 11 : -1;
        if (rank == 0)
            MPI_Bcast(v, 1, vec, 0, comm);
        else
            MPI_Bcast(v, n, MPI_INT, 0, comm);
        for (int i = 0; i < n; i++) {
            int got = rank == 0 ? v[2 * i] : v[i];
            EXPECT(got == i * 11, "bcast vector [%d]=%d", i, got);
            if (got != i * 11)
                break;
        }
        MPI_Type_free(&vec);
        free(v);
    }
}

static void check_barrier(MPI_Comm comm, form_t form)
{
    MPI_Request req;
    if (form == BLOCKING)
        MPI_Barrier(comm);
    else if (form == NB)
        MPI_Ibarrier(comm, &req);
    else
        MPIX_Barrier_init(comm, MPI_INFO_NULL, &req);
    finish(form, &req, 3);
}

static void check_gathers(MPI_Comm comm, form_t form)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int s = 0; s < 3; s++) {
        int n = sizes[s], root = s % size, inplace = s == 1;
        int *mine = malloc(sizeof(int) * n);
        int *all = malloc(sizeof(int) * n * size);
        MPI_Request req;
        for (int i = 0; i < n; i++)
            mine[i] = rank * 1000 + i;
        /* allgather */
        for (int i = 0; i < n * size; i++)
            all[i] = inplace && i / n == rank ? mine[i % n] : -1;
        const void *sb = inplace ? MPI_IN_PLACE : mine;
        if (form == BLOCKING)
            MPI_Allgather(sb, n, MPI_INT, all, n, MPI_INT, comm);
        else if (form == NB)
            MPI_Iallgather(sb, n, MPI_INT, all, n, MPI_INT, comm, &req);
        else
            MPIX_Allgather_init(sb, n, MPI_INT, all, n, MPI_INT, comm,
                                MPI_INFO_NULL, &req);
        finish(form, &req, 1);
        for (int i = 0; i < n * size; i++) {
            int want = (i / n) * 1000 + i % n;
            EXPECT(all[i] == want, "%s allgather n=%d [%d]=%d want %d",
                   form_name[form], n, i, all[i], want);
            if (all[i] != want)
                break;
        }
        /* gather, in place at the root when inplace */
        for (int i = 0; i < n * size; i++)
            all[i] =
                rank == root && inplace && i / n == rank ? mine[i % n] : -1;
        sb = rank == root && inplace ? MPI_IN_PLACE : mine;
        if (form == BLOCKING)
            MPI_Gather(sb, n, MPI_INT, all, n, MPI_INT, root, comm);
        else if (form == NB)
            MPI_Igather(sb, n, MPI_INT, all, n, MPI_INT, root, comm, &req);
        else
            MPIX_Gather_init(sb, n, MPI_INT, all, n, MPI_INT, root, comm,
                             MPI_INFO_NULL, &req);
        finish(form, &req, 1);
        if (rank == root)
            for (int i = 0; i < n * size; i++) {
                int want = (i / n) * 1000 + i % n;
                EXPECT(all[i] == want, "%s gather n=%d [%d]=%d want %d",
                       form_name[form], n, i, all[i], want);
                if (all[i] != want)
                    break;
            }
        /* scatter, in place at the root when inplace */
        for (int i = 0; i < n * size; i++)
            all[i] = rank == root ? i * 3 : -1;
        for (int i = 0; i < n; i++)
            mine[i] = -1;
        void *rb = rank == root && inplace ? MPI_IN_PLACE : mine;
        if (form == BLOCKING)
            MPI_Scatter(all, n, MPI_INT, rb, n, MPI_INT, root, comm);
        else if (form == NB)
            MPI_Iscatter(all, n, MPI_INT, rb, n, MPI_INT, root, comm, &req);
        else
            MPIX_Scatter_init(all, n, MPI_INT, rb, n, MPI_INT, root, comm,
                              MPI_INFO_NULL, &req);
        finish(form, &req, 1);
        if (!(rank == root && inplace))
            for (int i = 0; i < n; i++) {
                EXPECT(mine[i] == (rank * n + i) * 3, "%s scatter n=%d [%d]=%d",
                       form_name[form], n, i, mine[i]);
                if (mine[i] != (rank * n + i) * 3)
                    break;
            }
        free(mine);
        free(all);
    }
}

static void check_rsb(MPI_Comm comm, form_t form)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int s = 0; s < 3; s++) {
        int n = sizes[s];
        float *in = malloc(sizeof(float) * n * size),
              *out = malloc(sizeof(float) * n);
        int *counts = malloc(sizeof(int) * size);
        MPI_Request req;
        for (int i = 0; i < n * size; i++)
            in[i] = (float)(i % 97 + rank);
        for (int r = 0; r < size; r++)
            counts[r] = n;
        for (int k = 0; k < 2; k++) {
            if (form == BLOCKING)
                k ? MPI_Reduce_scatter(in, out, counts, MPI_FLOAT, MPI_SUM,
                                       comm)
                  : MPI_Reduce_scatter_block(in, out, n, MPI_FLOAT, MPI_SUM,
                                             comm);
            else if (form == NB)
                k ? MPI_Ireduce_scatter(in, out, counts, MPI_FLOAT, MPI_SUM,
                                        comm, &req)
                  : MPI_Ireduce_scatter_block(in, out, n, MPI_FLOAT, MPI_SUM,
                                              comm, &req);
            else
                k ? MPIX_Reduce_scatter_init(in, out, counts, MPI_FLOAT,
                                             MPI_SUM, comm, MPI_INFO_NULL, &req)
                  : MPIX_Reduce_scatter_block_init(in, out, n, MPI_FLOAT,
                                                   MPI_SUM, comm, MPI_INFO_NULL,
                                                   &req);
            finish(form, &req, 1);
            for (int i = 0; i < n; i++) {
                int g = rank * n + i;
                float want = (float)(size * (g % 97) + size * (size - 1) / 2);
                EXPECT(out[i] == want,
                       "%s reduce_scatter%s n=%d [%d]=%g want %g",
                       form_name[form], k ? "" : "_block", n, i, out[i], want);
                if (out[i] != want)
                    break;
            }
        }
        free(in);
        free(out);
        free(counts);
    }
}

/* a user-defined op: the component leaves it to Open MPI */
static void my_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

static void check_fallbacks(MPI_Comm comm)
{
    int rank, size, x, y = 0;
    MPI_Op op;
    int pin[2], pout[2];
    int *counts, out[4];
    int in[64];
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);

    MPI_Op_create(my_sum, 1, &op);
    x = rank + 1;
    MPI_Allreduce(&x, &y, 1, MPI_INT, op, comm);
    EXPECT(y == size * (size + 1) / 2, "user op allreduce %d", y);
    MPI_Op_free(&op);
    /* a pair type (MAXLOC), which incoll does not reduce */
    pin[0] = rank % 3;
    pin[1] = rank;
    MPI_Allreduce(pin, pout, 1, MPI_2INT, MPI_MAXLOC, comm);
    EXPECT(pout[0] == (size > 2 ? 2 : size - 1) && pout[1] == pout[0],
           "maxloc allreduce %d %d", pout[0], pout[1]);
    /* unequal counts */
    counts = malloc(sizeof(int) * size);
    for (int r = 0; r < size; r++)
        counts[r] = 1 + r % 2;
    for (int i = 0; i < 64; i++)
        in[i] = i + rank;
    MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, comm);
    {
        int off = 0;
        for (int r = 0; r < rank; r++)
            off += counts[r];
        for (int i = 0; i < counts[rank]; i++)
            EXPECT(out[i] == size * (off + i) + size * (size - 1) / 2,
                   "unequal reduce_scatter [%d]=%d", i, out[i]);
    }
    free(counts);
    /* a collective the component does not take */
    x = rank;
    MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, comm);
    EXPECT(y == rank * (rank + 1) / 2, "scan %d", y);
}

/* OCOLLS_FORM=1 starts at the nonblocking forms, 2 at the persistent
 * ones (to narrow a failure down). */
static int first_form(void)
{
    const char *v = getenv("OCOLLS_FORM");
    return v ? atoi(v) : BLOCKING;
}

/* OCOLLS_TRACE=1: each step on stderr (where a job stopped). */
#define STEP(call)                                                             \
    do {                                                                       \
        if (getenv("OCOLLS_TRACE"))                                            \
            fprintf(stderr, "ocolls: rank %d: %s\n", wrank, #call);            \
        call;                                                                  \
    } while (0)

static void all_on(MPI_Comm comm, int iters)
{
    for (int it = 0; it < iters; it++)
        for (int f = first_form(); f <= PERSISTENT; f++) {
            STEP(check_allreduce(comm, f));
            STEP(check_reduce(comm, f));
            STEP(check_bcast(comm, f));
            STEP(check_barrier(comm, f));
            STEP(check_gathers(comm, f));
            STEP(check_rsb(comm, f));
        }
    check_fallbacks(comm);
}

int main(int argc, char **argv)
{
    int size, iters = 1, provided;
    MPI_Comm dup, half;

    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
    MPI_Init_thread(&argc, &argv,
                    getenv("OCOLLS_SINGLE") ? MPI_THREAD_SINGLE
                                            : MPI_THREAD_MULTIPLE,
                    &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    all_on(MPI_COMM_WORLD, iters);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    all_on(dup, 1);
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
    all_on(half, 1);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    /* the verdict, by point-to-point messages */
    if (wrank == 0) {
        int total = errors, e;
        for (int r = 1; r < size; r++) {
            MPI_Recv(&e, 1, MPI_INT, r, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            total += e;
        }
        if (total == 0)
            printf("ocolls: ok\n");
        else
            printf("ocolls: %d errors\n", total);
        fflush(stdout);
        errors = total;
    } else {
        MPI_Send(&errors, 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return errors ? 1 : 0;
}
