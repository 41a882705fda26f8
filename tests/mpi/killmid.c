/*
 * killmid: the fabric dies while the program runs, and every answer is
 * still right. Each iteration runs an allreduce (in place and not), a
 * reduce, a broadcast and a barrier on MPI_COMM_WORLD and on a dup, and
 * checks them against PMPI_. After iteration KILL_AT, rank 0 runs the
 * command in INCOLL_TEST_KILL_CMD (which stops the aggregation nodes);
 * the next offloaded call on each communicator fails on the fabric.
 * There is no manager to recover, so with INCOLL_MPI_AGREE=1 the ranks
 * agree on the failure and redo the call with MPI; by default the layer
 * raises the error through the communicator's error handler: MPI's
 * default, MPI_ERRORS_ARE_FATAL, ends the job; with --errors-return the
 * program sets MPI_ERRORS_RETURN, and each rank prints the error it got
 * ("killmid: rank R: error returned: STRING") and stops calling.
 *
 * Prints "killmid: ok N iterations" at rank 0, or names the mismatch and
 * aborts the job.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITERS 12
#define KILL_AT 4
#define N 1000

/* Returns on an error returned by an MPI call (--errors-return). */
#define CALL(x)                                                                \
    do {                                                                       \
        int e_ = (x);                                                          \
        if (e_ != MPI_SUCCESS)                                                 \
            return e_;                                                         \
    } while (0)

static int check(MPI_Comm comm, const char *name, int iter)
{
    static double in[N], out[N], ref[N];
    static long lin[N], lout[N], lref[N];
    int r, n;

    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < N; i++) {
        in[i] = (double)((r + i + iter) % 7) - 3.0;
        lin[i] = (long)r * 1000 + i + iter;
    }
    PMPI_Allreduce(in, ref, N, MPI_DOUBLE, MPI_SUM, comm);
    CALL(MPI_Allreduce(in, out, N, MPI_DOUBLE, MPI_SUM, comm));
    if (memcmp(out, ref, sizeof(out)) != 0)
        goto bad;
    memcpy(lout, lin, sizeof(lout));
    PMPI_Allreduce(lin, lref, N, MPI_LONG, MPI_MAX, comm);
    CALL(MPI_Allreduce(MPI_IN_PLACE, lout, N, MPI_LONG, MPI_MAX, comm));
    if (memcmp(lout, lref, sizeof(lout)) != 0)
        goto bad;
    memset(lout, 0, sizeof(lout));
    memset(lref, 0, sizeof(lref));
    PMPI_Reduce(lin, lref, N, MPI_LONG, MPI_SUM, n - 1, comm);
    CALL(MPI_Reduce(lin, lout, N, MPI_LONG, MPI_SUM, n - 1, comm));
    if (memcmp(lout, lref, sizeof(lout)) != 0)
        goto bad;
    memcpy(lout, lin, sizeof(lout));
    CALL(MPI_Bcast(lout, N, MPI_LONG, 0, comm));
    for (int i = 0; i < N; i++)
        if (lout[i] != i + iter)
            goto bad;
    CALL(MPI_Barrier(comm));
    return MPI_SUCCESS;
bad:
    fprintf(stderr, "killmid: MISMATCH on %s at iteration %d, rank %d\n", name,
            iter, r);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return MPI_ERR_OTHER;
}

int main(int argc, char **argv)
{
    MPI_Comm dup;
    int rank, err = MPI_SUCCESS;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 1 && strcmp(argv[1], "--errors-return") == 0)
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int iter = 0; iter < ITERS; iter++) {
        err = check(MPI_COMM_WORLD, "world", iter);
        if (err == MPI_SUCCESS)
            err = check(dup, "dup", iter);
        if (err != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(err, text, &len);
            printf("killmid: rank %d: error returned: %s\n", rank, text);
            break;
        }
        if (iter == KILL_AT) {
            const char *cmd = getenv("INCOLL_TEST_KILL_CMD");
            if (rank == 0 && cmd && *cmd) {
                int rc = system(cmd);
                if (rc != 0)
                    fprintf(stderr, "killmid: '%s' exited %d\n", cmd, rc);
            }
            PMPI_Barrier(MPI_COMM_WORLD);
        }
    }
    MPI_Comm_free(&dup);
    if (rank == 0 && err == MPI_SUCCESS)
        printf("killmid: ok %d iterations\n", ITERS);
    MPI_Finalize();
    return 0;
}
