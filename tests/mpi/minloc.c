/*
 * minloc: MPI_MINLOC and MPI_MAXLOC on MPI's pair types (MPI_2INT,
 * MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT), which
 * libincoll_mpi runs as two allreduces on the fabric, compared with what
 * PMPI_ computes from the same input in the same run: MPI_Allreduce in
 * place and not, MPI_Reduce at two roots (in place at one), counts 1, 7
 * and 3000 (several packets), on MPI_COMM_WORLD and on a split into
 * odd-sized halves with keys reversed.
 *
 * Values come from a range of 3 (negative ones included) so most elements
 * tie on several ranks, and the indices are not the ranks and not in rank
 * order, so "the lowest index among the ranks that hold the extreme" is
 * really tested. Value and index of each result are compared; the padding
 * of a pair is not part of it.
 *
 * Prints "minloc: ok N checks" at rank 0 and exits 0, or names the first
 * mismatch and aborts the job.
 */
#include <mpi.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int v, i;
} p_2int;
typedef struct {
    float v;
    int i;
} p_float;
typedef struct {
    double v;
    int i;
} p_double;
typedef struct {
    long v;
    int i;
} p_long;
typedef struct {
    short v;
    int i;
} p_short;

typedef struct {
    MPI_Datatype dt;
    const char *name;
    size_t extent, vsize, ioff;
    int is_float;
} ptype_t;

#define PTYPE(dt, T, fl)                                                       \
    {                                                                          \
        dt, #dt, sizeof(T), sizeof(((T *)0)->v), offsetof(T, i), fl            \
    }

static int world_rank;
static long checks;

static void fail(const char *what, const char *comm, const ptype_t *t,
                 const char *op, int count, int elem)
{
    fprintf(stderr,
            "minloc: MISMATCH rank %d: %s on %s, type %s, op %s, count %d, "
            "element %d\n",
            world_rank, what, comm, t->name, op, count, elem);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Pair i of rank r: value in -1..1 (ties on most elements), index a
 * scramble of (r, i) that is neither r nor monotonic in r. */
static void fill(char *buf, const ptype_t *t, int count, int r, int salt)
{
    memset(buf, 0x5a, (size_t)count * t->extent);
    for (int k = 0; k < count; k++) {
        char *p = buf + (size_t)k * t->extent;
        int v = (r * 5 + k * 3 + salt) % 3 - 1;
        int idx = ((r * 7 + 3) % 11) * 100 + (k + salt) % 97;
        if (t->is_float) {
            if (t->vsize == sizeof(float)) {
                float f = (float)v + 0.5f;
                memcpy(p, &f, sizeof(f));
            } else {
                double d = (double)v - 0.25;
                memcpy(p, &d, sizeof(d));
            }
        } else if (t->vsize == sizeof(short)) {
            short s = (short)v;
            memcpy(p, &s, sizeof(s));
        } else if (t->vsize == sizeof(int)) {
            memcpy(p, &v, sizeof(v));
        } else {
            long l = (long)v * 100000L;
            memcpy(p, &l, sizeof(l));
        }
        memcpy(p + t->ioff, &idx, sizeof(idx));
    }
}

/* Index of the first pair whose value or index differs, or -1. */
static int diff(const char *a, const char *b, const ptype_t *t, int count)
{
    for (int k = 0; k < count; k++) {
        const char *x = a + (size_t)k * t->extent;
        const char *y = b + (size_t)k * t->extent;
        if (memcmp(x, y, t->vsize) != 0 ||
            memcmp(x + t->ioff, y + t->ioff, sizeof(int)) != 0)
            return k;
    }
    return -1;
}

static void check_allreduce(MPI_Comm comm, const char *cname, const ptype_t *t,
                            MPI_Op op, const char *oname, int count,
                            int in_place, int salt)
{
    size_t bytes = (size_t)count * t->extent;
    char *in = malloc(bytes), *out = malloc(bytes), *ref = malloc(bytes);
    int r, bad;

    MPI_Comm_rank(comm, &r);
    fill(in, t, count, r, salt);
    PMPI_Allreduce(in, ref, count, t->dt, op, comm);
    if (in_place) {
        memcpy(out, in, bytes);
        MPI_Allreduce(MPI_IN_PLACE, out, count, t->dt, op, comm);
    } else {
        memset(out, 0x33, bytes);
        MPI_Allreduce(in, out, count, t->dt, op, comm);
    }
    bad = diff(out, ref, t, count);
    if (bad >= 0)
        fail(in_place ? "allreduce in place" : "allreduce", cname, t, oname,
             count, bad);
    checks++;
    free(in);
    free(out);
    free(ref);
}

static void check_reduce(MPI_Comm comm, const char *cname, const ptype_t *t,
                         MPI_Op op, const char *oname, int count, int root,
                         int in_place, int salt)
{
    size_t bytes = (size_t)count * t->extent;
    char *in = malloc(bytes), *out = malloc(bytes), *ref = malloc(bytes);
    int r, bad;

    MPI_Comm_rank(comm, &r);
    fill(in, t, count, r, salt);
    PMPI_Reduce(in, ref, count, t->dt, op, root, comm);
    memset(out, 0x33, bytes);
    if (in_place && r == root) {
        memcpy(out, in, bytes);
        MPI_Reduce(MPI_IN_PLACE, out, count, t->dt, op, root, comm);
    } else {
        MPI_Reduce(in, out, count, t->dt, op, root, comm);
    }
    if (r == root) {
        bad = diff(out, ref, t, count);
        if (bad >= 0)
            fail(in_place ? "reduce in place" : "reduce", cname, t, oname,
                 count, bad);
    } else {
        /* A non-root's receive buffer is not touched. */
        for (size_t k = 0; k < bytes; k++)
            if ((unsigned char)out[k] != 0x33)
                fail("reduce wrote a non-root's buffer", cname, t, oname, count,
                     (int)k);
    }
    checks++;
    free(in);
    free(out);
    free(ref);
}

static void run_comm(MPI_Comm comm, const char *cname, const ptype_t *types,
                     int ntypes)
{
    static const int counts[] = {1, 7, 3000};
    int n;

    MPI_Comm_size(comm, &n);
    for (int t = 0; t < ntypes; t++) {
        for (int o = 0; o < 2; o++) {
            MPI_Op op = o == 0 ? MPI_MINLOC : MPI_MAXLOC;
            const char *oname = o == 0 ? "minloc" : "maxloc";
            for (int c = 0; c < 3; c++)
                for (int ip = 0; ip < 2; ip++)
                    check_allreduce(comm, cname, &types[t], op, oname,
                                    counts[c], ip, c + 3 * ip + t);
            check_reduce(comm, cname, &types[t], op, oname, 7, n - 1, 0, t);
            check_reduce(comm, cname, &types[t], op, oname, 3000, 0, 1, t + 1);
        }
    }
}

int main(int argc, char **argv)
{
    const ptype_t types[] = {
        PTYPE(MPI_2INT, p_2int, 0),         PTYPE(MPI_FLOAT_INT, p_float, 1),
        PTYPE(MPI_DOUBLE_INT, p_double, 1), PTYPE(MPI_LONG_INT, p_long, 0),
        PTYPE(MPI_SHORT_INT, p_short, 0),
    };
    const int ntypes = sizeof(types) / sizeof(types[0]);
    MPI_Comm half;
    char hname[32];
    int n;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    run_comm(MPI_COMM_WORLD, "world", types, ntypes);
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, -world_rank, &half);
    snprintf(hname, sizeof(hname), "split half %d", world_rank % 2);
    run_comm(half, hname, types, ntypes);
    MPI_Comm_free(&half);
    {
        long total = 0;
        PMPI_Reduce(&checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (world_rank == 0)
            printf("minloc: ok %ld checks on %d ranks\n", total, n);
    }
    MPI_Finalize();
    return 0;
}
