/*
 * usage_mpi: where an MPI job's collectives ran, as the manager counts it.
 * Runs --net allreduces with MPI_SUM (offloaded by the layer) and --user
 * allreduces with a user-defined op (the layer gives them to MPI's own),
 * checks every result, waits a little over the library's usage period and
 * runs one more MPI_SUM allreduce (whose count sends the report), then
 * holds until the file --hold exists, so that the manager's counts can be
 * read while the job lives.
 *
 * Prints "usage_mpi: ok" at rank 0 and exits 0, or names the first wrong
 * result and aborts the job.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Elementwise maximum: the same as MPI_MAX, but MPI's user-defined op. */
static void my_max(void *in, void *inout, int *len, MPI_Datatype *type)
{
    const int *a = in;
    int *b = inout;
    (void)type;
    for (int i = 0; i < *len; i++)
        if (a[i] > b[i])
            b[i] = a[i];
}

static void check(int ok, const char *what, int i)
{
    if (!ok) {
        fprintf(stderr, "usage_mpi: wrong %s result at call %d\n", what, i);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv)
{
    int rank, size, net = 0, user = 0, v, r;
    const char *hold = NULL;
    MPI_Op op;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--net") == 0)
            net = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--user") == 0)
            user = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--hold") == 0)
            hold = argv[i + 1];
    }
    MPI_Op_create(my_max, 1, &op);
    for (int i = 0; i < net; i++) {
        v = rank + i;
        MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        check(r == size * (size - 1) / 2 + size * i, "MPI_SUM", i);
    }
    for (int i = 0; i < user; i++) {
        v = rank * 3 + i;
        MPI_Allreduce(&v, &r, 1, MPI_INT, op, MPI_COMM_WORLD);
        check(r == (size - 1) * 3 + i, "user-defined op", i);
    }
    usleep(1300 * 1000); /* past INCOLL_USAGE_MS: the next count reports */
    v = 1;
    MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(r == size, "MPI_SUM", net);
    if (hold != NULL && rank == 0)
        for (int i = 0; i < 600 && access(hold, F_OK) != 0; i++)
            usleep(100 * 1000);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Op_free(&op);
    if (rank == 0)
        printf("usage_mpi: ok\n");
    MPI_Finalize();
    return 0;
}
