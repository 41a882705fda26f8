/*
 * gathers: MPI_Reduce, MPI_Bcast, MPI_Barrier, MPI_Allgather, MPI_Gather,
 * MPI_Scatter, MPI_Reduce_scatter_block and MPI_Reduce_scatter through
 * libincoll_mpi, each result compared byte for byte with what the PMPI_
 * call gives on the same input in the same run, on MPI_COMM_WORLD, a dup
 * of it and a split into odd-sized halves (keys reversed, so rank order
 * differs from the world's); every root of small communicators, in place
 * and not, counts 0, 1, 7, a multi-packet one under 64 KiB and one of over a
 * megabyte in all (the gathers leave the allreduce for the hosts' algorithms
 * there). MPI_Reduce_scatter with unequal counts must pass through and
 * still be right. The members that may return early (a reduce's and a
 * gather's non-roots, a bcast's and a scatter's root; INCOLL_EARLY_MAX)
 * overwrite their buffers right after the call, and the results must
 * still be those PMPI_ computed from the inputs before.
 *
 * Prints "gathers: ok N checks" at rank 0 and exits 0, or names the first
 * mismatch and aborts the job.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int world_rank;
static long checks;

static void fail(const char *what, const char *comm, int count, int root,
                 int in_place)
{
    fprintf(stderr,
            "gathers: MISMATCH rank %d: %s on %s, count %d, root %d%s\n",
            world_rank, what, comm, count, root, in_place ? ", in place" : "");
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int val(int r, int i, int salt)
{
    return (r * 131 + i * 7 + salt * 17) % 1000 - 500;
}

static void same(const void *a, const void *b, size_t len, const char *what,
                 const char *comm, int count, int root, int in_place)
{
    checks++;
    if (len && memcmp(a, b, len) != 0)
        fail(what, comm, count, root, in_place);
}

/* MPICH 4's own MPI_Reduce crashes (memcpy from an invalid address) in
 * place at a root other than 0 with a few thousand ints, also without the
 * layer, so such calls would crash where the layer passes them to MPI
 * (communicators it does not offload): those run not in place there. */
static int inplace_reduce_ok(MPI_Comm comm, int root, int n)
{
#ifdef MPICH
    return root == 0 || n < 1000;
#else
    (void)comm;
    (void)root;
    (void)n;
    return 1;
#endif
}

static void check_comm(MPI_Comm comm, const char *name)
{
    static const int counts[] = {0, 1, 7, 3001, 70001};
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);

    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        int n = counts[ci];
        size_t blk = (size_t)n * sizeof(int), all = blk * (size_t)size;
        int *in = malloc(all + 8), *a = malloc(all + 8), *b = malloc(all + 8);
        int salt = (int)ci;

        for (int root = 0; root < size; root += (size > 3 ? size / 2 : 1)) {
            for (int ip = 0; ip < 2; ip++) {
                /* Reduce */
                for (int i = 0; i < n; i++)
                    in[i] = val(rank, i, salt);
                memcpy(a, in, blk);
                memset(b, 0, blk);
                PMPI_Reduce(in, b, n, MPI_INT, MPI_SUM, root, comm);
                if (ip && rank == root && inplace_reduce_ok(comm, root, n))
                    MPI_Reduce(MPI_IN_PLACE, a, n, MPI_INT, MPI_SUM, root,
                               comm);
                else
                    MPI_Reduce(in, a, n, MPI_INT, MPI_SUM, root, comm);
                /* A non-root's input is its own again once the call
                 * returned (the layer's may return before the root got the
                 * result): the root's result must not change. */
                if (rank != root)
                    memset(in, 0x77, blk);
                if (rank == root)
                    same(a, b, blk, "reduce", name, n, root, ip);
                /* Bcast (in place by nature); the root's buffer is its own
                 * again once the call returned. */
                for (int i = 0; i < n; i++)
                    a[i] = b[i] = rank == root ? val(root, i, salt + 1) : -1;
                PMPI_Bcast(b, n, MPI_INT, root, comm);
                MPI_Bcast(a, n, MPI_INT, root, comm);
                if (rank == root)
                    memset(a, 0x77, blk);
                else
                    same(a, b, blk, "bcast", name, n, root, ip);
                /* Gather */
                for (int i = 0; i < n; i++)
                    in[i] = val(rank, i, salt + 2);
                memset(a, 0x5a, all);
                memset(b, 0x5a, all);
                PMPI_Gather(in, n, MPI_INT, b, n, MPI_INT, root, comm);
                if (ip && rank == root) {
                    memcpy((char *)a + (size_t)rank * blk, in, blk);
                    MPI_Gather(MPI_IN_PLACE, n, MPI_INT, a, n, MPI_INT, root,
                               comm);
                } else {
                    MPI_Gather(in, n, MPI_INT, a, n, MPI_INT, root, comm);
                }
                if (rank != root)
                    memset(in, 0x77, blk);
                if (rank == root)
                    same(a, b, all, "gather", name, n, root, ip);
                /* Scatter */
                for (size_t i = 0; i < (size_t)n * (size_t)size; i++)
                    in[i] = val(rank, (int)i, salt + 3);
                memset(a, 0x5a, blk);
                memset(b, 0x5a, blk);
                PMPI_Scatter(in, n, MPI_INT, b, n, MPI_INT, root, comm);
                if (ip && rank == root) {
                    MPI_Scatter(in, n, MPI_INT, MPI_IN_PLACE, n, MPI_INT, root,
                                comm);
                    memcpy(a, (char *)in + (size_t)root * blk, blk);
                } else {
                    MPI_Scatter(in, n, MPI_INT, a, n, MPI_INT, root, comm);
                }
                if (rank == root)
                    memset(in, 0x77, all);
                same(a, b, blk, "scatter", name, n, root, ip);
            }
            MPI_Barrier(comm);
            checks++;
        }
        for (int ip = 0; ip < 2; ip++) {
            int *counts_v = malloc((size_t)size * sizeof(int));
            /* Allgather */
            for (int i = 0; i < n; i++)
                in[i] = val(rank, i, salt + 4);
            memset(a, 0x5a, all);
            memset(b, 0x5a, all);
            if (ip) {
                memcpy((char *)a + (size_t)rank * blk, in, blk);
                MPI_Allgather(MPI_IN_PLACE, n, MPI_INT, a, n, MPI_INT, comm);
            } else {
                MPI_Allgather(in, n, MPI_INT, a, n, MPI_INT, comm);
            }
            PMPI_Allgather(in, n, MPI_INT, b, n, MPI_INT, comm);
            same(a, b, all, "allgather", name, n, 0, ip);
            /* Reduce_scatter_block */
            for (size_t i = 0; i < (size_t)n * (size_t)size; i++)
                in[i] = val(rank, (int)i, salt + 5);
            memcpy(a, in, all);
            if (ip)
                MPI_Reduce_scatter_block(MPI_IN_PLACE, a, n, MPI_INT, MPI_SUM,
                                         comm);
            else
                MPI_Reduce_scatter_block(in, a, n, MPI_INT, MPI_SUM, comm);
            PMPI_Reduce_scatter_block(in, b, n, MPI_INT, MPI_SUM, comm);
            same(a, b, blk, "reduce_scatter_block", name, n, 0, ip);
            /* Reduce_scatter, equal counts */
            for (int r = 0; r < size; r++)
                counts_v[r] = n;
            memcpy(a, in, all);
            if (ip)
                MPI_Reduce_scatter(MPI_IN_PLACE, a, counts_v, MPI_INT, MPI_MAX,
                                   comm);
            else
                MPI_Reduce_scatter(in, a, counts_v, MPI_INT, MPI_MAX, comm);
            PMPI_Reduce_scatter(in, b, counts_v, MPI_INT, MPI_MAX, comm);
            same(a, b, blk, "reduce_scatter", name, n, 0, ip);
            /* Reduce_scatter, unequal counts: through MPI. */
            if (n > 0 && size > 1) {
                int tot = 0, mine;
                for (int r = 0; r < size; r++)
                    tot += counts_v[r] = r == 0 ? n - 1 : n;
                mine = counts_v[rank];
                MPI_Reduce_scatter(in, a, counts_v, MPI_INT, MPI_SUM, comm);
                PMPI_Reduce_scatter(in, b, counts_v, MPI_INT, MPI_SUM, comm);
                same(a, b, (size_t)mine * sizeof(int), "reduce_scatter unequal",
                     name, tot, 0, 0);
            }
            free(counts_v);
        }
        free(in);
        free(a);
        free(b);
    }
}

int main(int argc, char **argv)
{
    MPI_Comm dup, half;
    int size;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_comm(MPI_COMM_WORLD, "world");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    check_comm(dup, "dup");
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < (size + 1) / 2, -world_rank,
                   &half);
    check_comm(half, "split");
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("gathers: ok %ld checks\n", checks);
    MPI_Finalize();
    return 0;
}
