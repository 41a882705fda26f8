/*
 * ankill: an aggregation node dies under a running MPI program, and every
 * rank still gets MPI's answer for every call. Each round runs
 * MPI_Allreduce (in place and not), MPI_Reduce (root rotating),
 * MPI_Bcast and MPI_Barrier on MPI_COMM_WORLD and on a split into halves
 * (keys reversed), at 2 and at 3000 elements, and checks every value
 * against its closed form (nothing else runs on the network meanwhile).
 * After round KILL_AT, rank 0 runs INCOLL_TEST_KILL_CMD (which kills an
 * AN); the program does not wait for the failure to be noticed.
 *
 * With MPI_ERRORS_ARE_FATAL (MPI's default) a failure the layer cannot
 * hide ends the job with the layer's message. Prints "ankill: ok R
 * rounds" at rank 0.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 30
#define KILL_AT 8
#define N 3000

static long in[N], out[N];

static void bad(const char *what, const char *name, int round, int rank, int i,
                long got, long want)
{
    fprintf(stderr,
            "ankill: WRONG %s on %s at round %d, rank %d: element %d is %ld, "
            "want %ld\n",
            what, name, round, rank, i, got, want);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Element i of member m's input in round t. */
static long val(int m, int i, int t)
{
    return (long)((m * 37 + i * 11 + t * 5) % 1009) - 500;
}

static void round_on(MPI_Comm comm, const char *name, int t)
{
    static const int counts[] = {2, N};
    int r, n, root;

    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    root = t % n;
    for (int k = 0; k < 2; k++) {
        int cnt = counts[k];
        for (int i = 0; i < cnt; i++)
            in[i] = val(r, i, t);
        MPI_Allreduce(in, out, cnt, MPI_LONG, MPI_SUM, comm);
        for (int i = 0; i < cnt; i++) {
            long want = 0;
            for (int m = 0; m < n; m++)
                want += val(m, i, t);
            if (out[i] != want)
                bad("MPI_Allreduce", name, t, r, i, out[i], want);
        }
        memcpy(out, in, (size_t)cnt * sizeof(long));
        MPI_Allreduce(MPI_IN_PLACE, out, cnt, MPI_LONG, MPI_MAX, comm);
        for (int i = 0; i < cnt; i++) {
            long want = val(0, i, t);
            for (int m = 1; m < n; m++)
                if (val(m, i, t) > want)
                    want = val(m, i, t);
            if (out[i] != want)
                bad("MPI_Allreduce in place", name, t, r, i, out[i], want);
        }
        memset(out, 0, (size_t)cnt * sizeof(long));
        MPI_Reduce(in, out, cnt, MPI_LONG, MPI_MIN, root, comm);
        for (int i = 0; r == root && i < cnt; i++) {
            long want = val(0, i, t);
            for (int m = 1; m < n; m++)
                if (val(m, i, t) < want)
                    want = val(m, i, t);
            if (out[i] != want)
                bad("MPI_Reduce", name, t, r, i, out[i], want);
        }
        for (int i = 0; i < cnt; i++)
            out[i] = r == root ? val(root, i, t) * 3 : -1;
        MPI_Bcast(out, cnt, MPI_LONG, root, comm);
        for (int i = 0; i < cnt; i++)
            if (out[i] != val(root, i, t) * 3)
                bad("MPI_Bcast", name, t, r, i, out[i], val(root, i, t) * 3);
    }
    MPI_Barrier(comm);
}

int main(int argc, char **argv)
{
    MPI_Comm half;
    int rank, size;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
    for (int t = 0; t < ROUNDS; t++) {
        round_on(MPI_COMM_WORLD, "MPI_COMM_WORLD", t);
        round_on(half, "split", t);
        if (t == KILL_AT && rank == 0) {
            const char *cmd = getenv("INCOLL_TEST_KILL_CMD");
            if (cmd && *cmd) {
                int rc = system(cmd);
                if (rc != 0)
                    fprintf(stderr, "ankill: '%s' exited %d\n", cmd, rc);
                else
                    fprintf(stderr, "ankill: ran '%s' after round %d\n", cmd,
                            t);
            }
        }
    }
    MPI_Comm_free(&half);
    if (rank == 0)
        printf("ankill: ok %d rounds\n", ROUNDS);
    MPI_Finalize();
    return 0;
}
