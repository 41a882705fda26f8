/*
 * A program as a user writes it: the public header alone, the calls of the
 * README's example. tests/test_build_tree.c builds it with the README's
 * `cc` line against build/lib (the shared libincoll) and with pkg-config
 * against a `make install` tree, and runs it under `incoll run` on a
 * loopback fabric.
 *
 * Rank r contributes r + 1 + (i mod 7) to element i of a float32 vector of
 * 10000 elements (several packets), summed in place; every sum is a small
 * integer, exact in any order. Prints "app: ok N ranks, offloaded" at
 * rank 0 when every element of every rank is right and the world
 * communicator runs in the network; otherwise names the first wrong element
 * or the reason and exits 1.
 */
#include <incoll.h>

#include <stdio.h>
#include <stdlib.h>

#define COUNT 10000

int main(void)
{
    static float buf[COUNT];
    incoll_ctx_h ctx;
    incoll_comm_h world;
    incoll_status_t status;
    const char *why = NULL;
    int rank, size, bad = 0;

    status = incoll_init(&ctx);
    if (status != INCOLL_OK) {
        fprintf(stderr, "app: incoll_init: %s\n", incoll_status_string(status));
        return 1;
    }
    incoll_comm_world(ctx, &world);
    incoll_comm_rank(world, &rank);
    incoll_comm_size(world, &size);
    for (int i = 0; i < COUNT; i++)
        buf[i] = (float)(rank + 1 + i % 7);
    status = incoll_allreduce(world, INCOLL_IN_PLACE, buf, COUNT,
                              INCOLL_FLOAT32, INCOLL_OP_SUM);
    if (status != INCOLL_OK) {
        fprintf(stderr, "app: rank %d: incoll_allreduce: %s\n", rank,
                incoll_status_string(status));
        bad = 1;
    }
    for (int i = 0; !bad && i < COUNT; i++) {
        /* sum over r of (r + 1 + i % 7) */
        float want = (float)(size * (size + 1) / 2 + size * (i % 7));
        if (buf[i] != want) {
            fprintf(stderr, "app: rank %d: element %d is %g, want %g\n", rank,
                    i, (double)buf[i], (double)want);
            bad = 1;
        }
    }
    if (!bad && !incoll_comm_offloaded(world, &why)) {
        fprintf(stderr, "app: rank %d: the world is not offloaded: %s\n", rank,
                why ? why : "no reason given");
        bad = 1;
    }
    if (!bad && rank == 0)
        printf("app: ok %d ranks, offloaded\n", size);
    incoll_finalize(ctx);
    return bad;
}
