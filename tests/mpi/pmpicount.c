/*
 * pmpicount: proves that an offloaded collective makes no MPI call of the
 * layer's own. The program defines the PMPI_ functions the layer uses
 * (its collectives, communicator queries and attributes, error handling):
 * an executable's definitions come first in the dynamic linker's search,
 * so the preloaded layer's PMPI_ calls land here, are counted while the
 * program has "armed" the counter, and go on to the MPI library's
 * function (dlsym RTLD_NEXT).
 *
 * After one untimed call of each collective on each communicator (where
 * the layer sets up the communicator's state collectively, with PMPI_
 * calls), it runs ITERS rounds of MPI_Allreduce (in place and not, 1, 1000
 * and 20000 doubles), MPI_Reduce (roots rotating, in place at the root),
 * MPI_Bcast (odd byte counts) and MPI_Barrier on MPI_COMM_WORLD, a dup and
 * a split in halves, armed, and checks every value (against PMPI_, called
 * unarmed). Prints "pmpicount: rank R pmpi_calls N (first PMPI_X)" and
 * "pmpicount: ok" at rank 0 when every rank counted none; with --expect
 * (INCOLL_MPI_AGREE=1, the per-call agreement) it wants at least one call
 * per collective instead, to show that the counter sees them.
 */
#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITERS 20
#define BIG 20000

static int armed;
static long calls;
static const char *first;

#define REAL(name)                                                             \
    static __typeof__(&name) real;                                             \
    if (real == NULL)                                                          \
        real = (__typeof__(&name))dlsym(RTLD_NEXT, #name);                     \
    if (armed) {                                                               \
        calls++;                                                               \
        if (first == NULL)                                                     \
            first = #name;                                                     \
    }

int PMPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o,
                   MPI_Comm c)
{
    REAL(PMPI_Allreduce);
    return real(s, r, n, t, o, c);
}

int PMPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o,
                int root, MPI_Comm c)
{
    REAL(PMPI_Reduce);
    return real(s, r, n, t, o, root, c);
}

int PMPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c)
{
    REAL(PMPI_Bcast);
    return real(b, n, t, root, c);
}

int PMPI_Barrier(MPI_Comm c)
{
    REAL(PMPI_Barrier);
    return real(c);
}

int PMPI_Comm_get_attr(MPI_Comm c, int k, void *v, int *f)
{
    REAL(PMPI_Comm_get_attr);
    return real(c, k, v, f);
}

int PMPI_Comm_set_attr(MPI_Comm c, int k, void *v)
{
    REAL(PMPI_Comm_set_attr);
    return real(c, k, v);
}

int PMPI_Comm_rank(MPI_Comm c, int *r)
{
    REAL(PMPI_Comm_rank);
    return real(c, r);
}

int PMPI_Comm_size(MPI_Comm c, int *s)
{
    REAL(PMPI_Comm_size);
    return real(c, s);
}

int PMPI_Comm_compare(MPI_Comm a, MPI_Comm b, int *r)
{
    REAL(PMPI_Comm_compare);
    return real(a, b, r);
}

int PMPI_Comm_test_inter(MPI_Comm c, int *f)
{
    REAL(PMPI_Comm_test_inter);
    return real(c, f);
}

int PMPI_Comm_get_name(MPI_Comm c, char *n, int *l)
{
    REAL(PMPI_Comm_get_name);
    return real(c, n, l);
}

int PMPI_Comm_call_errhandler(MPI_Comm c, int e)
{
    REAL(PMPI_Comm_call_errhandler);
    return real(c, e);
}

int PMPI_Type_size(MPI_Datatype t, int *s)
{
    REAL(PMPI_Type_size);
    return real(t, s);
}

int PMPI_Initialized(int *f)
{
    REAL(PMPI_Initialized);
    return real(f);
}

int PMPI_Finalized(int *f)
{
    REAL(PMPI_Finalized);
    return real(f);
}

static void fail(const char *what, const char *comm, int iter, int rank)
{
    fprintf(stderr, "pmpicount: MISMATCH in %s on %s at round %d, rank %d\n",
            what, comm, iter, rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static double in[BIG], out[BIG], ref[BIG];
static unsigned char bytes[BIG], bref[BIG];

/* One round on comm; armed around the calls under test only. */
static void round_on(MPI_Comm comm, const char *name, int iter, int arm)
{
    static const int counts[] = {1, 1000, BIG};
    int r, n, root;

    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    root = iter % n;
    for (int k = 0; k < 3; k++) {
        int cnt = counts[k];
        size_t len = (size_t)cnt * sizeof(double);
        for (int i = 0; i < cnt; i++)
            in[i] = (double)((r * 7 + i + iter) % 11) - 5.0;
        PMPI_Allreduce(in, ref, cnt, MPI_DOUBLE, MPI_SUM, comm);
        armed = arm;
        MPI_Allreduce(in, out, cnt, MPI_DOUBLE, MPI_SUM, comm);
        armed = 0;
        if (memcmp(out, ref, len) != 0)
            fail("MPI_Allreduce", name, iter, r);
        memcpy(out, in, len);
        armed = arm;
        MPI_Allreduce(MPI_IN_PLACE, out, cnt, MPI_DOUBLE, MPI_SUM, comm);
        armed = 0;
        if (memcmp(out, ref, len) != 0)
            fail("MPI_Allreduce in place", name, iter, r);
        memcpy(out, in, len);
        armed = arm;
        MPI_Reduce(r == root ? MPI_IN_PLACE : in, out, cnt, MPI_DOUBLE, MPI_SUM,
                   root, comm);
        armed = 0;
        if (r == root && memcmp(out, ref, len) != 0)
            fail("MPI_Reduce", name, iter, r);
        if (r != root && memcmp(out, in, len) != 0)
            fail("MPI_Reduce (a non-root's buffer)", name, iter, r);
        for (int i = 0; i < cnt; i++)
            bytes[i] = (unsigned char)(r == root ? (i * 13 + iter) : 0xa5);
        for (int i = 0; i < cnt; i++)
            bref[i] = (unsigned char)(i * 13 + iter);
        armed = arm;
        MPI_Bcast(bytes, cnt - (cnt > 1), MPI_BYTE, root, comm);
        armed = 0;
        if (memcmp(bytes, bref, (size_t)(cnt - (cnt > 1))) != 0)
            fail("MPI_Bcast", name, iter, r);
    }
    armed = arm;
    MPI_Barrier(comm);
    armed = 0;
}

int main(int argc, char **argv)
{
    MPI_Comm comms[3];
    const char *names[3] = {"MPI_COMM_WORLD", "dup", "split"};
    int rank, size, expect = argc > 1 && strcmp(argv[1], "--expect") == 0;
    long total = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2, rank, &comms[2]);
    /* The first call on each communicator sets up its state. */
    for (int c = 0; c < 3; c++)
        round_on(comms[c], names[c], 0, 0);
    for (int iter = 1; iter <= ITERS; iter++)
        for (int c = 0; c < 3; c++)
            round_on(comms[c], names[c], iter, 1);
    printf("pmpicount: rank %d pmpi_calls %ld (first %s)\n", rank, calls,
           first ? first : "none");
    fflush(stdout);
    PMPI_Allreduce(&calls, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_free(&comms[1]);
    MPI_Comm_free(&comms[2]);
    if (rank == 0) {
        if (expect ? total > 0 : total == 0)
            printf("pmpicount: ok (%ld calls of the layer's own counted)\n",
                   total);
        else
            printf("pmpicount: FAILED: %ld PMPI_ calls of the layer's own "
                   "while offloaded collectives ran\n",
                   total);
    }
    MPI_Finalize();
    return 0;
}
