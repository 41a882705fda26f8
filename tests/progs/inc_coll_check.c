/*
 * inc_coll_check: checks the in-network reduce, broadcast, barrier, allgather,
 * gather, scatter and reduce_scatter (src/host/inc_coll.h) value by
 * value. Run it under `incoll run` on a
 * fabric; it calls the library's internal entry points, so it links the
 * static library.
 *
 *   inc_coll_check [--sizes 1,7,1000] [--iters N]
 *
 * For every size and every root (0, the last rank, the middle one) it runs
 * a barrier, a broadcast of bytes that are a function of (root, size,
 * iteration) and an int64 sum reduce whose exact result every rank can
 * compute, and checks: every rank holds the broadcast bytes; a non-root
 * sent no payload for it (its engine's counters); the root holds the
 * reduced sum and no other rank's buffer was written; an allgather (in
 * place for the second root) and a gather to the root give the ranks'
 * blocks in rank order, and a rank sends its block once plus a piece
 * descriptor per packet (when it resent nothing); a scatter from the root
 * (in place at the root for the second root) and an int64 sum
 * reduce_scatter give each rank exactly its block, a scatter's non-roots
 * sending descriptors only. Each collective must
 * run in the network (INCOLL_ERR_UNSUPPORTED is an error here).
 *
 * Exit status: 0 all correct, 1 wrong result, 2 usage, 3 timeout, 4 any
 * other error.
 */
#include "incoll.h"

#include "common/wire.h"
#include "core/host_engine.h"
#include "host/host.h"
#include "host/inc_coll.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_WRONG = 1, EXIT_USAGE = 2, EXIT_TIMEOUT = 3, EXIT_ERROR = 4 };

#define MAX_SIZES 32

static int rank_g;

static int fail_status(const char *what, incoll_status_t st)
{
    fprintf(stderr, "inc_coll_check: rank %d: %s: %s\n", rank_g, what,
            incoll_status_string(st));
    return st == INCOLL_ERR_TIMEOUT ? EXIT_TIMEOUT : EXIT_ERROR;
}

static uint8_t byte_of(int root, size_t size, int iter, size_t i)
{
    uint64_t x = ((uint64_t)root * 1000003u + size * 7919u + (uint64_t)iter) ^
                 (i * 0x9e3779b97f4a7c15ull);
    x ^= x >> 29;
    return (uint8_t)(x * 0xbf58476d1ce4e5b9ull >> 56);
}

static int64_t elem_of(int rank, size_t i, int iter)
{
    return (int64_t)((rank + 1) * 1000 + (int64_t)(i % 977) - 400) *
           (iter % 2 ? -1 : 1);
}

static uint8_t blk_of(int rank, size_t n, int iter, size_t i)
{
    return (uint8_t)(rank * 37 + (int)(i % 251) * 3 + (int)n + iter * 11);
}

static uint64_t payload_sent(incoll_comm_h comm)
{
    const host_engine_counters_t *c = host_engine_counters(comm->eng);
    return c->bytes_sent - c->packets_sent * WIRE_HDR_LEN;
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES] = {1, 7, 1000, 65536};
    int nsizes = 4, iters = 1, rank, size;
    size_t maxsz = 0;
    incoll_ctx_h ctx;
    incoll_comm_h comm;
    incoll_status_t st;
    uint8_t *buf, *blk, *all;
    int64_t *in, *out;
    long cases = 0;

    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--sizes") == 0 && a + 1 < argc) {
            char *p = argv[++a];
            nsizes = 0;
            while (*p && nsizes < MAX_SIZES) {
                sizes[nsizes++] = strtoull(p, &p, 10);
                if (*p == ',')
                    p++;
                else if (*p) {
                    fprintf(stderr, "inc_coll_check: bad --sizes\n");
                    return EXIT_USAGE;
                }
            }
        } else if (strcmp(argv[a], "--iters") == 0 && a + 1 < argc) {
            iters = atoi(argv[++a]);
        } else {
            fprintf(stderr,
                    "usage: inc_coll_check [--sizes a,b,c] [--iters N]\n");
            return EXIT_USAGE;
        }
    }
    for (int s = 0; s < nsizes; s++)
        if (sizes[s] > maxsz)
            maxsz = sizes[s];
    st = incoll_init(&ctx);
    if (st != INCOLL_OK)
        return fail_status("incoll_init", st);
    incoll_comm_world(ctx, &comm);
    incoll_comm_rank(comm, &rank);
    incoll_comm_size(comm, &size);
    rank_g = rank;
    if (!host_inc_coll_usable(comm, HOST_COLL_BCAST, INCOLL_OP_SUM,
                              INCOLL_UINT8) ||
        !host_inc_coll_usable(comm, HOST_COLL_REDUCE, INCOLL_OP_SUM,
                              INCOLL_INT64) ||
        !host_inc_coll_usable(comm, HOST_COLL_BARRIER, INCOLL_OP_SUM,
                              INCOLL_UINT8)) {
        fprintf(stderr, "inc_coll_check: rank %d: no fabric group\n", rank);
        return EXIT_ERROR;
    }
    blk = malloc(maxsz + 1);
    all = malloc(maxsz * (size_t)size + 1);
    buf = malloc(maxsz + 1);
    in = malloc((maxsz + 1) * 8);
    out = malloc((maxsz + 1) * 8);
    if (!buf || !in || !out || !blk || !all)
        return fail_status("malloc", INCOLL_ERR_NO_MEMORY);

    for (int it = 0; it < iters; it++) {
        for (int s = 0; s < nsizes; s++) {
            size_t n = sizes[s];
            int roots[3] = {0, size - 1, size / 2};
            for (int k = 0; k < 3; k++) {
                int root = roots[k];
                uint64_t before;
                st = host_inc_barrier(comm);
                if (st != INCOLL_OK)
                    return fail_status("barrier", st);
                /* Broadcast. */
                for (size_t i = 0; i < n; i++)
                    buf[i] = rank == root ? byte_of(root, n, it, i) : 0xEE;
                buf[n] = 0x77;
                before = payload_sent(comm);
                st = host_inc_bcast(comm, buf, n, root);
                if (st != INCOLL_OK)
                    return fail_status("bcast", st);
                for (size_t i = 0; i < n; i++) {
                    if (buf[i] != byte_of(root, n, it, i)) {
                        fprintf(
                            stderr,
                            "inc_coll_check: rank %d: bcast of %zu from %d: "
                            "byte %zu is %u, want %u\n",
                            rank, n, root, i, buf[i], byte_of(root, n, it, i));
                        return EXIT_WRONG;
                    }
                }
                if (buf[n] != 0x77) {
                    fprintf(stderr,
                            "inc_coll_check: rank %d: bcast wrote past "
                            "the end\n",
                            rank);
                    return EXIT_WRONG;
                }
                if (rank != root && payload_sent(comm) != before) {
                    fprintf(stderr,
                            "inc_coll_check: rank %d: bcast: a non-root sent "
                            "%llu payload bytes\n",
                            rank,
                            (unsigned long long)(payload_sent(comm) - before));
                    return EXIT_WRONG;
                }
                /* Reduce (int64 sum: exact). */
                for (size_t i = 0; i < n; i++) {
                    in[i] = elem_of(rank, i, it);
                    out[i] = 0x5151515151515151ll;
                }
                st = host_inc_reduce(comm, in, out, n, INCOLL_INT64,
                                     INCOLL_OP_SUM, root);
                if (st != INCOLL_OK)
                    return fail_status("reduce", st);
                for (size_t i = 0; i < n; i++) {
                    int64_t want = 0;
                    if (rank != root) {
                        if (out[i] != 0x5151515151515151ll) {
                            fprintf(
                                stderr,
                                "inc_coll_check: rank %d: reduce to %d wrote "
                                "a non-root's buffer\n",
                                rank, root);
                            return EXIT_WRONG;
                        }
                        continue;
                    }
                    for (int r = 0; r < size; r++)
                        want += elem_of(r, i, it);
                    if (out[i] != want) {
                        fprintf(
                            stderr,
                            "inc_coll_check: rank %d: reduce of %zu: element "
                            "%zu is %lld, want %lld\n",
                            rank, n, i, (long long)out[i], (long long)want);
                        return EXIT_WRONG;
                    }
                }
                /* Allgather (in place for k == 1), then gather to root. */
                for (int g = 0; g < 2; g++) {
                    const host_engine_counters_t *ec =
                        host_engine_counters(comm->eng);
                    uint64_t rex = ec->retransmits + ec->fast_retransmits,
                             pk = ec->packets_sent, cp = ec->copies;
                    const void *src = blk;
                    size_t tot = n * (size_t)size;
                    before = payload_sent(comm);
                    memset(all, 0xEE, tot + 1);
                    for (size_t i = 0; i < n; i++)
                        blk[i] = blk_of(rank, n, it, i);
                    if (g == 0 && k == 1) {
                        memcpy(all + n * (size_t)rank, blk, n);
                        src = all + n * (size_t)rank;
                    }
                    st = g == 0 ? host_inc_allgather(comm, src, all, n)
                                : host_inc_gather(comm, src, all, n, root);
                    if (st != INCOLL_OK)
                        return fail_status(g ? "gather" : "allgather", st);
                    for (size_t i = 0; i < tot + 1; i++) {
                        uint8_t want = i == tot ? 0xEE
                                       : g == 0 || rank == root
                                           ? blk_of((int)(i / n), n, it, i % n)
                                           : 0xEE;
                        if (all[i] != want) {
                            fprintf(stderr,
                                    "inc_coll_check: rank %d: %s of %zu (root "
                                    "%d): byte %zu is %u, want %u\n",
                                    rank, g ? "gather" : "allgather", n, root,
                                    i, all[i], want);
                            return EXIT_WRONG;
                        }
                    }
                    if (n > 0 &&
                        ec->retransmits + ec->fast_retransmits == rex &&
                        (payload_sent(comm) - before < n ||
                         payload_sent(comm) - before >
                             n * (1 + ec->copies - cp) +
                                 8 * (ec->packets_sent - pk))) {
                        fprintf(
                            stderr,
                            "inc_coll_check: rank %d: %s of %zu: sent %llu "
                            "payload bytes in %llu packets\n",
                            rank, g ? "gather" : "allgather", n,
                            (unsigned long long)(payload_sent(comm) - before),
                            (unsigned long long)(ec->packets_sent - pk));
                        return EXIT_WRONG;
                    }
                }
                /* Scatter: the root's vector is all[], blocks of n. */
                {
                    size_t tot = n * (size_t)size;
                    const host_engine_counters_t *ec =
                        host_engine_counters(comm->eng);
                    uint64_t pk = ec->packets_sent;
                    void *dst = buf;
                    for (size_t i = 0; i < tot; i++)
                        all[i] = blk_of((int)(i / (n ? n : 1)), n, it + 7,
                                        i % (n ? n : 1));
                    memset(buf, 0xEE, n + 1);
                    if (k == 1 && rank == root)
                        dst = all + n * (size_t)rank; /* in place */
                    before = payload_sent(comm);
                    st = host_inc_scatter(comm, rank == root ? all : NULL, dst,
                                          n, root);
                    if (st != INCOLL_OK)
                        return fail_status("scatter", st);
                    for (size_t i = 0; i < n; i++) {
                        uint8_t got = ((uint8_t *)dst)[i];
                        if (got != blk_of(rank, n, it + 7, i)) {
                            fprintf(
                                stderr,
                                "inc_coll_check: rank %d: scatter of %zu from "
                                "%d: byte %zu is %u\n",
                                rank, n, root, i, got);
                            return EXIT_WRONG;
                        }
                    }
                    if (dst == buf && buf[n] != 0xEE) {
                        fprintf(stderr,
                                "inc_coll_check: rank %d: scatter wrote "
                                "past the block\n",
                                rank);
                        return EXIT_WRONG;
                    }
                    if (rank != root && payload_sent(comm) - before !=
                                            8 * (ec->packets_sent - pk)) {
                        fprintf(stderr,
                                "inc_coll_check: rank %d: scatter: a non-root "
                                "sent more than descriptors\n",
                                rank);
                        return EXIT_WRONG;
                    }
                }
                /* Reduce_scatter (int64 sum), n elements per rank. */
                if (n * (size_t)size <= maxsz) {
                    size_t tot = n * (size_t)size;
                    for (size_t i = 0; i < tot; i++)
                        in[i] = elem_of(rank, i, it);
                    for (size_t i = 0; i <= n; i++)
                        out[i] = 0x5151515151515151ll;
                    st = host_inc_reduce_scatter(comm, in, out, n, INCOLL_INT64,
                                                 INCOLL_OP_SUM);
                    if (st != INCOLL_OK)
                        return fail_status("reduce_scatter", st);
                    for (size_t i = 0; i < n; i++) {
                        int64_t want = 0;
                        for (int r = 0; r < size; r++)
                            want += elem_of(r, n * (size_t)rank + i, it);
                        if (out[i] != want) {
                            fprintf(
                                stderr,
                                "inc_coll_check: rank %d: reduce_scatter of "
                                "%zu: element %zu is %lld, want %lld\n",
                                rank, n, i, (long long)out[i], (long long)want);
                            return EXIT_WRONG;
                        }
                    }
                    if (out[n] != 0x5151515151515151ll) {
                        fprintf(stderr,
                                "inc_coll_check: rank %d: reduce_scatter "
                                "wrote past the block\n",
                                rank);
                        return EXIT_WRONG;
                    }
                    cases++;
                }
                cases += 6;
            }
        }
    }
    st = host_inc_barrier(comm);
    if (st != INCOLL_OK)
        return fail_status("barrier", st);
    if (rank == 0)
        printf("inc_coll_check: %d ranks, %ld cases: ok\n", size, cases);
    free(buf);
    free(blk);
    free(all);
    free(in);
    free(out);
    st = incoll_finalize(ctx);
    if (st != INCOLL_OK)
        return fail_status("incoll_finalize", st);
    return 0;
}
