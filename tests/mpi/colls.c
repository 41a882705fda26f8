/*
 * colls: every collective libincoll_mpi offloads, on MPI_COMM_WORLD, a dup
 * of it and a split into odd-sized halves (keys reversed, so rank order
 * differs from the world's), for every mapped datatype and every op MPI
 * defines on it, in place and not, count 0, 1, 7 and a multi-packet
 * vector. Each result is compared, byte for byte, with what PMPI_ computes
 * from the same input in the same run (integers exactly; floating-point
 * inputs are small integers, so every sum and product is exact in any
 * order). A reduction on a derived datatype and a user-defined op must
 * pass through and still be right, a broadcast of a derived datatype is
 * offloaded (its bytes); one MINLOC (offloaded as two allreduces, see
 * minloc.c) is checked too.
 *
 * Prints "colls: ok N checks" at rank 0 and exits 0, or names the first
 * mismatch and aborts the job. "--quick" tests one datatype per kind and
 * size instead of all of them.
 */
#include <mpi.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SI, UI, FL, BO, BY };

typedef struct {
    MPI_Datatype dt;
    const char *name;
    int kind;
    int size;
} type_t;

typedef struct {
    MPI_Op op;
    const char *name;
} op_t;

static int world_rank;
static long checks;

static void fail(const char *what, const char *comm, const char *type,
                 const char *op, int count, int extra)
{
    fprintf(
        stderr,
        "colls: MISMATCH rank %d: %s on %s, type %s, op %s, count %d (%d)\n",
        world_rank, what, comm, type, op, count, extra);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Element i of rank r: small values so that no sum or product of up to
 * 8 ranks overflows the narrowest type or rounds a float. */
static void fill(void *buf, const type_t *t, int count, int r, int salt)
{
    for (int i = 0; i < count; i++) {
        int v = (r * 7 + i * 3 + salt) % 5;
        char *p = (char *)buf + (size_t)i * (size_t)t->size;
        switch (t->kind) {
        case SI:
            v -= 2; /* -2..2 */
            if (t->size == 1) {
                int8_t x = (int8_t)v;
                memcpy(p, &x, 1);
            } else if (t->size == 2) {
                int16_t x = (int16_t)v;
                memcpy(p, &x, 2);
            } else if (t->size == 4) {
                int32_t x = v;
                memcpy(p, &x, 4);
            } else {
                int64_t x = v;
                memcpy(p, &x, 8);
            }
            break;
        case UI:
        case BY:
            v = (r * 5 + i * 3 + salt) % 4; /* 0..3 */
            if (t->kind == BY)
                v = (r * 37 + i * 11 + salt) & 0xff;
            if (t->size == 1) {
                uint8_t x = (uint8_t)v;
                memcpy(p, &x, 1);
            } else if (t->size == 2) {
                uint16_t x = (uint16_t)v;
                memcpy(p, &x, 2);
            } else if (t->size == 4) {
                uint32_t x = (uint32_t)v;
                memcpy(p, &x, 4);
            } else {
                uint64_t x = (uint64_t)v;
                memcpy(p, &x, 8);
            }
            break;
        case FL:
            if (t->size == 4) {
                float x = (float)(v - 2);
                memcpy(p, &x, 4);
            } else {
                double x = (double)(v - 2);
                memcpy(p, &x, 8);
            }
            break;
        case BO: {
            bool x = (r + i + salt) % 3 == 0;
            memcpy(p, &x, 1);
            break;
        }
        }
    }
}

/* MPI's rules: which ops apply to which kinds of types. */
static int op_applies(const op_t *o, const type_t *t)
{
    MPI_Op op = o->op;
    int arith =
        op == MPI_SUM || op == MPI_PROD || op == MPI_MIN || op == MPI_MAX;
    int logic = op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR;
    int bits = op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR;
    switch (t->kind) {
    case SI:
    case UI:
        return 1;
    case FL:
        return arith;
    case BO:
        return logic;
    case BY:
        return bits;
    }
    return 0;
}

static void check_allreduce(MPI_Comm comm, const char *cname, const type_t *t,
                            const op_t *o, int count, int in_place)
{
    int r;
    size_t bytes = (size_t)count * (size_t)t->size + 1;
    char *in = malloc(bytes), *out = malloc(bytes), *ref = malloc(bytes);

    MPI_Comm_rank(comm, &r);
    fill(in, t, count, r, count);
    memset(out, 0x5a, bytes);
    memset(ref, 0x5a, bytes);
    PMPI_Allreduce(in, ref, count, t->dt, o->op, comm);
    if (in_place) {
        memcpy(out, in, bytes - 1);
        MPI_Allreduce(MPI_IN_PLACE, out, count, t->dt, o->op, comm);
    } else {
        MPI_Allreduce(in, out, count, t->dt, o->op, comm);
    }
    if (memcmp(out, ref, bytes) != 0)
        fail(in_place ? "allreduce in place" : "allreduce", cname, t->name,
             o->name, count, 0);
    checks++;
    free(in);
    free(out);
    free(ref);
}

static void check_reduce(MPI_Comm comm, const char *cname, const type_t *t,
                         const op_t *o, int count, int root, int in_place)
{
    int r;
    size_t bytes = (size_t)count * (size_t)t->size + 1;
    char *in = malloc(bytes), *out = malloc(bytes), *ref = malloc(bytes);

    MPI_Comm_rank(comm, &r);
    fill(in, t, count, r, count + 1);
    memset(out, 0x5a, bytes);
    memset(ref, 0x5a, bytes);
    PMPI_Reduce(in, ref, count, t->dt, o->op, root, comm);
    if (in_place && r == root) {
        memcpy(out, in, bytes - 1);
        MPI_Reduce(MPI_IN_PLACE, out, count, t->dt, o->op, root, comm);
    } else {
        MPI_Reduce(in, out, count, t->dt, o->op, root, comm);
    }
    /* Non-roots' recvbuf must be left alone. */
    if (memcmp(out, ref, bytes) != 0)
        fail(in_place ? "reduce in place" : "reduce", cname, t->name, o->name,
             count, root);
    checks++;
    free(in);
    free(out);
    free(ref);
}

static void check_bcast(MPI_Comm comm, const char *cname, MPI_Datatype dt,
                        const char *tname, int size, int count, int root)
{
    int r;
    size_t bytes = (size_t)count * (size_t)size;
    unsigned char *buf = malloc(bytes + 1), *ref = malloc(bytes + 1);

    MPI_Comm_rank(comm, &r);
    for (size_t i = 0; i < bytes; i++) {
        ref[i] = (unsigned char)(i * 131 + 7 + (size_t)count);
        buf[i] = r == root ? ref[i] : (unsigned char)(0xa5 ^ r);
    }
    buf[bytes] = ref[bytes] = 0x3c; /* past the end: untouched */
    MPI_Bcast(buf, count, dt, root, comm);
    if (memcmp(buf, ref, bytes + 1) != 0)
        fail("bcast", cname, tname, "-", count, root);
    checks++;
    free(buf);
    free(ref);
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int per = 1;
    if (*dt != MPI_INT)
        per = 2; /* the contiguous pair of ints below */
    for (int i = 0; i < *len * per; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

/* Calls that must pass through: a reduction on a derived datatype (with a
 * user op, since MPI's predefined ops need predefined types), a
 * user-defined op. A broadcast of a derived datatype (offloaded: the
 * bytes of its signature). Then one MINLOC. */
static void check_passthrough(MPI_Comm comm, const char *cname)
{
    int r, n;
    int in[8], out[8], ref[8];
    MPI_Datatype pair;
    MPI_Op op;
    struct {
        int v, i;
    } a, b;

    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < 8; i++)
        in[i] = r * 10 + i;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Op_create(user_sum, 1, &op);
    PMPI_Allreduce(in, ref, 4, pair, op, comm);
    MPI_Allreduce(in, out, 4, pair, op, comm);
    if (memcmp(out, ref, sizeof(out)) != 0)
        fail("allreduce derived type", cname, "contiguous(2,int)", "user", 4,
             0);
    PMPI_Allreduce(in, ref, 8, MPI_INT, op, comm);
    MPI_Allreduce(in, out, 8, MPI_INT, op, comm);
    if (memcmp(out, ref, sizeof(out)) != 0)
        fail("allreduce user op", cname, "int", "user_sum", 8, 0);
    for (int i = 0; i < 8; i++)
        out[i] = r == n - 1 ? in[i] : -1;
    MPI_Bcast(out, 4, pair, n - 1, comm);
    for (int i = 0; i < 8; i++)
        if (out[i] != (n - 1) * 10 + i)
            fail("bcast derived type", cname, "contiguous(2,int)", "-", 4, i);
    MPI_Op_free(&op);
    MPI_Type_free(&pair);
    a.v = (r * 3) % n;
    a.i = r;
    MPI_Allreduce(&a, &b, 1, MPI_2INT, MPI_MINLOC, comm);
    if (b.v != 0 || b.i != 0)
        fail("allreduce minloc", cname, "2int", "minloc", 1, b.i);
    checks += 4;
}

static void run_comm(MPI_Comm comm, const char *cname, const type_t *types,
                     int ntypes, const op_t *ops, int nops)
{
    static const int counts[] = {1, 7, 3000};
    int n, r;

    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    for (int t = 0; t < ntypes; t++) {
        for (int o = 0; o < nops; o++) {
            if (!op_applies(&ops[o], &types[t]))
                continue;
            check_allreduce(comm, cname, &types[t], &ops[o], 7, 0);
            check_allreduce(comm, cname, &types[t], &ops[o], 7, 1);
        }
        for (int c = 0; c < 3; c++)
            check_allreduce(comm, cname, &types[t],
                            types[t].kind == BO   ? &ops[5]
                            : types[t].kind == BY ? &ops[8]
                                                  : &ops[0],
                            counts[c], c == 1);
        check_reduce(comm, cname, &types[t],
                     types[t].kind == BO   ? &ops[4]
                     : types[t].kind == BY ? &ops[9]
                                           : &ops[3],
                     5, n - 1, 0);
        check_reduce(comm, cname, &types[t],
                     types[t].kind == BO   ? &ops[6]
                     : types[t].kind == BY ? &ops[7]
                                           : &ops[0],
                     3000, 0, 1);
        check_bcast(comm, cname, types[t].dt, types[t].name, types[t].size, 7,
                    1 % n);
    }
    /* Count 0 (allowed with any buffers), broadcast of bytes and chars of
     * odd lengths, a long broadcast, barriers. */
    {
        int dummy = 42;
        MPI_Allreduce(MPI_IN_PLACE, &dummy, 0, MPI_INT, MPI_SUM, comm);
        MPI_Reduce(&dummy, &dummy, 0, MPI_INT, MPI_SUM, 0, comm);
        MPI_Bcast(&dummy, 0, MPI_INT, 0, comm);
        if (dummy != 42)
            fail("count 0", cname, "int", "sum", 0, dummy);
        checks++;
    }
    check_bcast(comm, cname, MPI_CHAR, "char", 1, 3, 0);
    check_bcast(comm, cname, MPI_BYTE, "byte", 1, 1, n - 1);
    check_bcast(comm, cname, MPI_SHORT, "short", 2, 5, n - 1);
    check_bcast(comm, cname, MPI_DOUBLE, "double", 8, 20000, 0);
    for (int i = 0; i < 3; i++)
        MPI_Barrier(comm);
    check_passthrough(comm, cname);
}

int main(int argc, char **argv)
{
    const type_t types[] = {
        {MPI_SIGNED_CHAR, "signed char", SI, 1},
        {MPI_UNSIGNED_CHAR, "unsigned char", UI, 1},
        {MPI_SHORT, "short", SI, sizeof(short)},
        {MPI_UNSIGNED_SHORT, "unsigned short", UI, sizeof(short)},
        {MPI_INT, "int", SI, sizeof(int)},
        {MPI_UNSIGNED, "unsigned", UI, sizeof(int)},
        {MPI_LONG, "long", SI, sizeof(long)},
        {MPI_UNSIGNED_LONG, "unsigned long", UI, sizeof(long)},
        {MPI_LONG_LONG, "long long", SI, sizeof(long long)},
        {MPI_UNSIGNED_LONG_LONG, "unsigned long long", UI, sizeof(long long)},
        {MPI_INT8_T, "int8_t", SI, 1},
        {MPI_INT16_T, "int16_t", SI, 2},
        {MPI_INT32_T, "int32_t", SI, 4},
        {MPI_INT64_T, "int64_t", SI, 8},
        {MPI_UINT8_T, "uint8_t", UI, 1},
        {MPI_UINT16_T, "uint16_t", UI, 2},
        {MPI_UINT32_T, "uint32_t", UI, 4},
        {MPI_UINT64_T, "uint64_t", UI, 8},
        {MPI_FLOAT, "float", FL, 4},
        {MPI_DOUBLE, "double", FL, 8},
        {MPI_C_BOOL, "c bool", BO, sizeof(bool)},
        {MPI_BYTE, "byte", BY, 1},
    };
    const op_t ops[] = {
        {MPI_SUM, "sum"},   {MPI_PROD, "prod"}, {MPI_MIN, "min"},
        {MPI_MAX, "max"},   {MPI_LAND, "land"}, {MPI_LOR, "lor"},
        {MPI_LXOR, "lxor"}, {MPI_BAND, "band"}, {MPI_BOR, "bor"},
        {MPI_BXOR, "bxor"},
    };
    const type_t *types_p = types;
    int ntypes = sizeof(types) / sizeof(types[0]);
    const int nops = sizeof(ops) / sizeof(ops[0]);
    MPI_Comm dup, half;
    int n;
    char hname[32];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc > 1 && strcmp(argv[1], "--quick") == 0) {
        /* For MPIs that busy-poll on shared cores: one type per kind and
         * size class (int8 .. int64, unsigned, float, double, bool,
         * byte). */
        static const int pick[] = {10, 12, 13, 14, 17, 18, 19, 20, 21};
        static type_t quick[sizeof(pick) / sizeof(pick[0])];
        for (size_t i = 0; i < sizeof(pick) / sizeof(pick[0]); i++)
            quick[i] = types[pick[i]];
        types_p = quick;
        ntypes = (int)(sizeof(pick) / sizeof(pick[0]));
    }
    run_comm(MPI_COMM_WORLD, "world", types_p, ntypes, ops, nops);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    run_comm(dup, "dup", types_p, ntypes, ops, nops);
    /* Halves of sizes ceil(n/2) and floor(n/2), keys reversed. */
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, -world_rank, &half);
    snprintf(hname, sizeof(hname), "split half %d", world_rank % 2);
    run_comm(half, hname, types_p, ntypes, ops, nops);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    /* The world still works after its children are gone. */
    check_allreduce(MPI_COMM_WORLD, "world", &types[4], &ops[0], 7, 1);
    {
        long total = 0;
        PMPI_Reduce(&checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (world_rank == 0)
            printf("colls: ok %ld checks on %d ranks\n", total, n);
    }
    MPI_Finalize();
    return 0;
}
