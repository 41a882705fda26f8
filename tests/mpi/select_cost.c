/*
 * select_cost: what a call costs whose collective the selection table
 * gives to the MPI library's own, measured in instructions under
 * callgrind (docs/tuning.md, "What the decision costs"). After one
 * untimed call (where the layer sets the communicator up), cost_loop()
 * makes ITERS calls of COLL (bcast or allgather) of BYTES bytes on
 * MPI_COMM_WORLD; the result of the last is checked. Run it the same way
 * with the layer preloaded and without, under
 *
 *   valgrind --tool=callgrind --toggle-collect=cost_loop
 *
 * and the difference of the Ir inside cost_loop, over ITERS, is what the
 * layer adds to a call; callgrind_annotate --inclusive=yes splits it by
 * function (the layer's MPI_Bcast less the PMPI_Bcast it calls).
 *
 *   select_cost [bcast|allgather] [BYTES] [ITERS]   (bcast 1024 1000)
 *
 * Prints "select_cost: ok COLL BYTES ITERS" at rank 0.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

/* The calls measured: nothing else inside, so that callgrind's count
 * between its entry and exit is theirs. */
static __attribute__((noinline)) void
cost_loop(int allgather, char *send, char *recv, int bytes, int iters)
{
    for (int i = 0; i < iters; i++) {
        if (allgather)
            MPI_Allgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE,
                          MPI_COMM_WORLD);
        else
            MPI_Bcast(recv, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    const char *coll = argc > 1 ? argv[1] : "bcast";
    int bytes = argc > 2 ? atoi(argv[2]) : 1024;
    int iters = argc > 3 ? atoi(argv[3]) : 1000;
    int allgather = strcmp(coll, "allgather") == 0;
    char *send, *recv;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if ((!allgather && strcmp(coll, "bcast") != 0) || bytes < 1 || iters < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: select_cost [bcast|allgather] [BYTES] "
                            "[ITERS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    send = malloc((size_t)bytes);
    recv = malloc((size_t)bytes * (size_t)size);
    if (send == NULL || recv == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < bytes; i++)
        send[i] = (char)(rank * 7 + i);
    memcpy(recv, send, (size_t)bytes);
    /* the first call, outside cost_loop (the layer sets the communicator
     * up there) */
    if (allgather)
        MPI_Allgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE,
                      MPI_COMM_WORLD);
    else
        MPI_Bcast(recv, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    cost_loop(allgather, send, recv, bytes, iters);
    for (int r = 0; r < (allgather ? size : 1); r++)
        for (int i = 0; i < bytes; i++)
            if (recv[(size_t)r * (size_t)bytes + (size_t)i] !=
                (char)(r * 7 + i)) {
                fprintf(stderr,
                        "select_cost: rank %d: WRONG %s block %d byte %d\n",
                        rank, coll, r, i);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
    if (rank == 0)
        printf("select_cost: ok %s %d %d\n", coll, bytes, iters);
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
