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
 * engine's retransmissions, and (allreduce and bcast lines) hostrx=H:
 * of rx, those the communicator's host-based engine took (the last
 * acknowledgements of the host-based exchanges of incoll_init and the
 * communicator's set-up, which may come after the first operations
 * here), early=Y: of rx, the broadcast data of the next loop that came
 * (one-way, or ahead of its round) while this rank still waited in this
 * one, which its engine kept (host_engine_counters' early), and
 * us_per_op=U, the loop's microseconds per operation. Then
 * "summary ok=A wrong=W" and "all correct" when every result was right.
 * Exit status 0 all correct, 1 otherwise.
 *
 * --reduce: instead, iters barriers (kind=barrier), then iters reduces
 * of one int64 (sum) to rank 0, each followed by a barrier as OSU's
 * loop does (kind=reduce counts both), the root's sums checked, then
 * the same with gathers of 8 bytes per rank (kind=gather; up to 64
 * ranks), the root's vectors checked. Their
 * lines also carry sent=S, the non-root's calls after whose return its
 * socket had sent more than before the call (its contribution left
 * from the calling thread, not later from the communicator's thread),
 * and wake_all=A, the wake-ups of all the process's threads.
 *
 *   cost_check [--iters N] [--reduce]
 */
#include "incoll.h"

#include "host/counters.h"
#include "host/host.h"

#include "core/p2p_engine.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void report_sent(incoll_comm_h comm, int rank, const char *kind, int ops,
                        const host_counters_t *a, int sent)
{
    host_counters_t b;
    host_counters_read(comm, &b);
    printf("cost rank=%d kind=%s ops=%d tx=%" PRIu64 " rx=%" PRIu64
           " wake=%" PRIu64 " resent=%" PRIu64,
           rank, kind, ops, b.tx_packets - a->tx_packets,
           b.rx_packets - a->rx_packets, b.wakeups - a->wakeups,
           b.eng_retransmits - a->eng_retransmits);
    if (sent >= 0)
        printf(" sent=%d wake_all=%" PRIu64, sent,
               b.wakeups_all - a->wakeups_all);
    printf("\n");
}

/* Datagrams comm's host-based engines took so far. */
static uint64_t host_rx(incoll_comm_h comm)
{
    uint64_t n = 0;
    const p2p_engine_t *e[2] = {comm->p2p.eng, comm->p2p.retired};
    for (int i = 0; i < 2; i++) {
        const p2p_engine_counters_t *k;
        if (e[i] == NULL)
            continue;
        k = p2p_engine_counters(e[i]);
        n += k->acks_received + k->data_received + k->duplicates + k->stale +
             k->early + k->refused + k->dropped + k->after_finalize;
    }
    return n;
}

/* A line with the datagrams of the host-based engine since hostrx0. */
/* Broadcast data comm's engine kept before its operation started. */
static uint64_t eng_early(incoll_comm_h comm)
{
    return comm->eng ? host_engine_counters(comm->eng)->early : 0;
}

static void report(incoll_comm_h comm, int rank, const char *kind, int ops,
                   const host_counters_t *a, uint64_t hostrx0, uint64_t early0,
                   uint64_t t0)
{
    report_sent(comm, rank, kind, ops, a, -1);
    printf("cost rank=%d kind=%s hostrx=%" PRIu64 " early=%" PRIu64
           " us_per_op=%.1f\n",
           rank, kind, host_rx(comm) - hostrx0, eng_early(comm) - early0,
           (double)(host_now_ns() - t0) / 1e3 / (ops ? ops : 1));
}

/* The --reduce loops; returns the wrong results. */
static int reduce_loop(incoll_comm_h world, int rank, int size, int iters)
{
    host_counters_t c0, t0, t1;
    int wrong = 0, sent = 0;

    /* The operations of every member end before each count. */
    incoll_barrier(world);
    host_counters_read(world, &c0);
    for (int it = 0; it < iters; it++)
        wrong += incoll_barrier(world) != INCOLL_OK;
    report_sent(world, rank, "barrier", iters, &c0, 0);
    host_counters_read(world, &c0);
    for (int it = 0; it < iters; it++) {
        int64_t x = rank + it, y = 0;
        int64_t want = (int64_t)size * (size - 1) / 2 + (int64_t)size * it;
        incoll_status_t st;
        host_counters_read(world, &t0);
        st = incoll_reduce(world, &x, &y, 1, INCOLL_INT64, INCOLL_OP_SUM, 0);
        host_counters_read(world, &t1);
        sent += t1.tx_packets > t0.tx_packets;
        x = -1; /* the input is the caller's again */
        if (st != INCOLL_OK || (rank == 0 && y != want))
            wrong++;
        wrong += incoll_barrier(world) != INCOLL_OK;
    }
    report_sent(world, rank, "reduce", iters, &c0, sent);
    sent = 0;
    host_counters_read(world, &c0);
    for (int it = 0; it < iters; it++) {
        uint8_t blk[8], all[8 * 64];
        incoll_status_t st;
        for (int i = 0; i < 8; i++)
            blk[i] = (uint8_t)(rank * 8 + i + it);
        host_counters_read(world, &t0);
        st = incoll_gather(world, blk, rank == 0 ? all : NULL, sizeof(blk), 0);
        host_counters_read(world, &t1);
        sent += t1.tx_packets > t0.tx_packets;
        memset(blk, 0xEE, sizeof(blk));
        if (st != INCOLL_OK)
            wrong++;
        for (int r = 0; rank == 0 && st == INCOLL_OK && r < size && r < 64; r++)
            for (int i = 0; i < 8; i++)
                if (all[r * 8 + i] != (uint8_t)(r * 8 + i + it)) {
                    wrong++;
                    r = size;
                    break;
                }
        wrong += incoll_barrier(world) != INCOLL_OK;
    }
    report_sent(world, rank, "gather", iters, &c0, sent);
    return wrong;
}

int main(int argc, char **argv)
{
    int iters = 200, rank, size, ok = 0, wrong = 0, reduce = 0;
    incoll_ctx_h ctx;
    incoll_comm_h world;
    host_counters_t c0;
    uint64_t h0, e0, t0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reduce") == 0)
            reduce = 1;
    }
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
    if (reduce) {
        wrong = reduce_loop(world, rank, size, iters);
        ok = 3 * iters - wrong;
        goto out;
    }
    host_counters_read(world, &c0);
    h0 = host_rx(world);
    e0 = eng_early(world);
    t0 = host_now_ns();
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
    report(world, rank, "allreduce", iters, &c0, h0, e0, t0);
    host_counters_read(world, &c0);
    h0 = host_rx(world);
    e0 = eng_early(world);
    t0 = host_now_ns();
    t0 = host_now_ns();
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
    report(world, rank, "bcast", iters, &c0, h0, e0, t0);
out:
    printf("summary ok=%d wrong=%d\n", ok, wrong);
    if (wrong == 0)
        printf("all correct\n");
    incoll_comm_destroy(world);
    incoll_finalize(ctx);
    return wrong == 0 ? 0 : 1;
}
