/*
 * cost_check: the cost of one-packet operations, counted by libincoll
 * (host_counters_read), for tests/test_small_cost.c. Every rank runs
 * iters allreduces of one int64 (sum), then iters broadcasts of 8 bytes
 * (root rotating), each checked, and prints per kind
 *
 *   cost rank=R kind=K ops=N tx=T rx=X wake=W resent=E
 *
 * tx and rx: datagrams its context's socket sent and received over the
 * N operations, wake: its returns from blocking waits, resent: its
 * engine's retransmissions. Then "summary ok=A wrong=W" and "all
 * correct" when every result was right. Exit status 0 all correct, 1
 * otherwise.
 *
 *   cost_check [--iters N]
 */
#include "incoll.h"

#include "host/counters.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void report(incoll_comm_h comm, int rank, const char *kind, int ops,
                   const host_counters_t *a)
{
    host_counters_t b;
    host_counters_read(comm, &b);
    printf("cost rank=%d kind=%s ops=%d tx=%" PRIu64 " rx=%" PRIu64
           " wake=%" PRIu64 " resent=%" PRIu64 "\n",
           rank, kind, ops, b.tx_packets - a->tx_packets,
           b.rx_packets - a->rx_packets, b.wakeups - a->wakeups,
           b.eng_retransmits - a->eng_retransmits);
}

int main(int argc, char **argv)
{
    int iters = 200, rank, size, ok = 0, wrong = 0;
    incoll_ctx_h ctx;
    incoll_comm_h world;
    host_counters_t c0;

    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
    if (incoll_init(&ctx) != INCOLL_OK ||
        incoll_comm_world(ctx, &world) != INCOLL_OK) {
        fprintf(stderr, "cost_check: incoll_init failed\n");
        return 1;
    }
    incoll_comm_rank(world, &rank);
    incoll_comm_size(world, &size);
    {
        /* Warm up (group set up, first round trips), then count. */
        int64_t x = 1, y = 0;
        for (int i = 0; i < 10; i++)
            incoll_allreduce(world, &x, &y, 1, INCOLL_INT64, INCOLL_OP_SUM);
    }
    host_counters_read(world, &c0);
    for (int it = 0; it < iters; it++) {
        int64_t x = rank + it, y = 0;
        int64_t want = (int64_t)size * (size - 1) / 2 + (int64_t)size * it;
        if (incoll_allreduce(world, &x, &y, 1, INCOLL_INT64, INCOLL_OP_SUM) ==
                INCOLL_OK &&
            y == want)
            ok++;
        else
            wrong++;
    }
    report(world, rank, "allreduce", iters, &c0);
    host_counters_read(world, &c0);
    for (int it = 0; it < iters; it++) {
        uint8_t b[8];
        int root = it % size, good = 1;
        for (int i = 0; i < 8; i++)
            b[i] = rank == root ? (uint8_t)(it * 3 + i) : 0xEE;
        if (incoll_bcast(world, b, sizeof(b), root) != INCOLL_OK)
            good = 0;
        for (int i = 0; i < 8 && good; i++)
            good = b[i] == (uint8_t)(it * 3 + i);
        ok += good;
        wrong += !good;
    }
    /* The last broadcasts' rounds and early returns end first. */
    incoll_barrier(world);
    report(world, rank, "bcast", iters, &c0);
    printf("summary ok=%d wrong=%d\n", ok, wrong);
    if (wrong == 0)
        printf("all correct\n");
    incoll_comm_destroy(world);
    incoll_finalize(ctx);
    return wrong == 0 ? 0 : 1;
}
