/*
 * envcheck: libincoll_mpi leaves the application's environment alone. The
 * INCOLL_ variables before MPI_Init and after it (and after collectives
 * on the fabric) must be the same names with the same values: the layer
 * hands libincoll what it knows (identity, a manager adopted from
 * fabric.env, the progress thread) through incoll_init_params. Then an
 * MPI_Allreduce and an MPI_Iallreduce are checked against closed forms.
 * Prints "envcheck: ok N variables" at rank 0, or names the difference
 * and aborts.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* The INCOLL_ entries of environ, copied. */
static int snapshot(char ***out_p)
{
    int n = 0;
    char **out;

    for (char **e = environ; *e; e++)
        n += strncmp(*e, "INCOLL_", 7) == 0;
    out = calloc((size_t)n + 1, sizeof(char *));
    n = 0;
    for (char **e = environ; out && *e; e++)
        if (strncmp(*e, "INCOLL_", 7) == 0)
            out[n++] = strdup(*e);
    *out_p = out;
    return n;
}

static int has(char **list, const char *entry)
{
    for (; *list; list++)
        if (strcmp(*list, entry) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    char **before, **after;
    int nb = snapshot(&before), na, rank, size, bad = 0;
    long v, sum = 0;
    MPI_Request r;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    v = rank + 1;
    MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (sum != (long)size * (size + 1) / 2)
        bad = 1;
    MPI_Iallreduce(&v, &sum, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (sum != size)
        bad = 1;
    na = snapshot(&after);
    for (int i = 0; i < nb; i++)
        if (!has(after, before[i])) {
            fprintf(stderr, "envcheck: rank %d: '%s' changed or removed\n",
                    rank, before[i]);
            bad = 1;
        }
    for (int i = 0; i < na; i++)
        if (!has(before, after[i])) {
            fprintf(stderr, "envcheck: rank %d: '%s' added\n", rank, after[i]);
            bad = 1;
        }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) {
        if (rank == 0)
            fprintf(stderr, "envcheck: the environment changed or a result "
                            "is wrong\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
        printf("envcheck: ok %d variables\n", nb);
    MPI_Finalize();
    return 0;
}
