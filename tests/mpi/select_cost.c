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
#include "coll_loop.h"

/* The calls measured: nothing else inside, so that callgrind's count
 * between its entry and exit is theirs. */
static __attribute__((noinline)) void cost_loop(const coll_loop_t *l)
{
    for (int i = 0; i < l->iters; i++)
        coll_loop_call(l);
}

int main(int argc, char **argv)
{
    coll_loop_t l;

    MPI_Init(&argc, &argv);
    coll_loop_setup(&l, "select_cost", "[bcast|allgather] [BYTES] [ITERS]",
                    argc, argv, 1000);
    /* the first call, outside cost_loop (the layer sets the communicator
     * up there) */
    coll_loop_call(&l);
    cost_loop(&l);
    coll_loop_check(&l);
    coll_loop_done(&l);
    MPI_Finalize();
    return 0;
}
