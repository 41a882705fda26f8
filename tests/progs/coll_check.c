/*
 * coll_check: an incoll program that checks reduce, bcast, barrier,
 * allgather, gather, scatter and reduce_scatter through the public API
 * (the default path: in the network when the group can, else on the
 * hosts) and through every host-based algorithm of each (host_coll_run),
 * alternating them on one communicator. Run it under `incoll run`.
 *
 *   coll_check [--sizes 0,1,7,70000] [--colls bcast,reduce,...] [--verbose]
 *
 * For each collective, size (bytes per rank, or int64/int32 elements for
 * the reductions), root (0, the last rank, the middle one), in place or
 * not, and algorithm, every rank fills its input from (rank, index, case),
 * runs the collective and compares what it got with what it computes
 * itself, and checks that its send buffer is untouched. First, bad
 * arguments (the same on every rank) must fail at once with
 * INCOLL_ERR_INVALID_ARG. Exit status: 0 all correct ("all correct" on rank
 * 0), 1 wrong result, 2 usage, 3 timeout, 4 any other incoll error.
 */
#include "incoll.h"

#include "host/colls.h"
#include "host/req.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_WRONG = 1, EXIT_USAGE = 2, EXIT_TIMEOUT = 3, EXIT_ERROR = 4 };

static int rank, size, verbose;
static unsigned iter;

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint8_t bval(int r, size_t i)
{
    return (uint8_t)mix64(((uint64_t)r << 40) ^ ((uint64_t)iter << 48) ^ i);
}

static int64_t ival(int r, size_t i)
{
    return (int64_t)(mix64(((uint64_t)r << 40) ^ ((uint64_t)iter << 48) ^ i ^
                           0x77) >>
                     8) -
           (1ll << 54);
}

static int fail_status(incoll_status_t st, const char *what)
{
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, incoll_status_string(st));
    return st == INCOLL_ERR_TIMEOUT ? EXIT_TIMEOUT : EXIT_ERROR;
}

/* Runs collective c once with algorithm algo; returns 0 or an exit code. */
static int one(incoll_comm_h comm, algo_coll_t c, int algo, size_t n, int root,
               int in_place)
{
    int is_root = rank == root;
    size_t all = (size_t)size * n,
           es = c == ALGO_COLL_REDUCE || c == ALGO_COLL_REDUCE_SCATTER ? 8 : 1;
    uint8_t *send = malloc(all * es + 8), *recv = malloc(all * es + 8),
            *copy = malloc(all * es + 8);
    host_coll_args_t a = {c, send, recv, n, INCOLL_INT64, INCOLL_OP_SUM, root};
    incoll_status_t st = INCOLL_OK;
    char what[160];
    int bad = 0;
    size_t sendlen = 0;

    iter++;
    snprintf(what, sizeof(what), "%s/%s n=%zu root=%d%s", algo_coll_name(c),
             algo < 0 ? "auto" : algo_calgo_info((algo_calgo_t)algo)->name, n,
             root, in_place ? " in place" : "");
    memset(recv, 0xee, all * es + 8);
    switch (c) {
    case ALGO_COLL_BCAST:
        for (size_t i = 0; i < n; i++)
            recv[i] = is_root ? bval(root, i) : 0;
        a.sendbuf = recv;
        break;
    case ALGO_COLL_REDUCE: {
        int64_t *s = (int64_t *)(in_place && is_root ? recv : send);
        for (size_t i = 0; i < n; i++)
            s[i] = ival(rank, i);
        a.sendbuf = s;
        sendlen = in_place && is_root ? 0 : n * 8;
        break;
    }
    case ALGO_COLL_BARRIER:
        break;
    case ALGO_COLL_ALLGATHER:
        if (in_place) {
            for (size_t i = 0; i < n; i++)
                recv[(size_t)rank * n + i] = bval(rank, i);
            a.sendbuf = recv + (size_t)rank * n;
        } else {
            for (size_t i = 0; i < n; i++)
                send[i] = bval(rank, i);
            sendlen = n;
        }
        break;
    case ALGO_COLL_GATHER:
        if (in_place && is_root) {
            for (size_t i = 0; i < n; i++)
                recv[(size_t)rank * n + i] = bval(rank, i);
            a.sendbuf = recv + (size_t)rank * n;
        } else {
            for (size_t i = 0; i < n; i++)
                send[i] = bval(rank, i);
            sendlen = n;
        }
        break;
    case ALGO_COLL_SCATTER:
        for (int q = 0; is_root && q < size; q++)
            for (size_t i = 0; i < n; i++)
                send[(size_t)q * n + i] = bval(q, i);
        if (in_place && is_root)
            a.recvbuf = send + (size_t)root * n;
        sendlen = is_root ? all : 0;
        break;
    default: {
        int64_t *s = (int64_t *)(in_place ? recv : send);
        for (size_t i = 0; i < all; i++)
            s[i] = ival(rank, i);
        a.sendbuf = s;
        sendlen = in_place ? 0 : all * 8;
    }
    }
    memcpy(copy, send, sendlen);
    if (algo == HOST_CALGO_AUTO) {
        /* The public functions, with INCOLL_IN_PLACE where it applies. */
        const void *sb = in_place ? INCOLL_IN_PLACE : a.sendbuf;
        switch (c) {
        case ALGO_COLL_BCAST:
            st = incoll_bcast(comm, recv, n, root);
            break;
        case ALGO_COLL_REDUCE:
            st = incoll_reduce(
                comm, in_place && is_root ? INCOLL_IN_PLACE : a.sendbuf, recv,
                n, INCOLL_INT64, INCOLL_OP_SUM, root);
            break;
        case ALGO_COLL_BARRIER:
            st = incoll_barrier(comm);
            break;
        case ALGO_COLL_ALLGATHER:
            st = incoll_allgather(comm, sb, recv, n);
            break;
        case ALGO_COLL_GATHER:
            st = incoll_gather(
                comm, in_place && is_root ? INCOLL_IN_PLACE : a.sendbuf, recv,
                n, root);
            break;
        case ALGO_COLL_SCATTER:
            st = incoll_scatter(
                comm, send,
                in_place && is_root ? (void *)INCOLL_IN_PLACE : recv, n, root);
            break;
        default:
            st = incoll_reduce_scatter(comm, sb, recv, n, INCOLL_INT64,
                                       INCOLL_OP_SUM);
        }
    } else {
        /* host_coll_run() is the implementation under the public
         * functions, without their queue: a public call that returned
         * early (INCOLL_EARLY_MAX) must have completed first. */
        host_req_drain(comm);
        st = host_coll_run(comm, algo, &a);
    }
    if (st != INCOLL_OK) {
        free(send);
        free(recv);
        free(copy);
        return fail_status(st, what);
    }
    if (memcmp(copy, send, sendlen) != 0 &&
        !(c == ALGO_COLL_SCATTER && in_place)) {
        fprintf(stderr, "rank %d: %s: send buffer changed\n", rank, what);
        bad = 1;
    }
    switch (c) {
    case ALGO_COLL_BCAST:
        for (size_t i = 0; i < n && !bad; i++)
            bad = recv[i] != bval(root, i);
        break;
    case ALGO_COLL_REDUCE:
        for (size_t i = 0; i < n && is_root && !bad; i++) {
            int64_t want = 0, got;
            for (int q = 0; q < size; q++)
                want += ival(q, i);
            memcpy(&got, recv + i * 8, 8);
            bad = got != want;
        }
        break;
    case ALGO_COLL_ALLGATHER:
        for (size_t i = 0; i < all && !bad; i++)
            bad = recv[i] != bval((int)(i / n), i % n);
        break;
    case ALGO_COLL_GATHER:
        for (size_t i = 0; i < all && is_root && !bad; i++)
            bad = recv[i] != bval((int)(i / n), i % n);
        break;
    case ALGO_COLL_SCATTER: {
        const uint8_t *r = in_place && is_root ? send + (size_t)root * n : recv;
        for (size_t i = 0; i < n && !bad; i++)
            bad = r[i] != bval(rank, i);
        break;
    }
    case ALGO_COLL_REDUCE_SCATTER:
        for (size_t i = 0; i < n && !bad; i++) {
            int64_t want = 0, got;
            for (int q = 0; q < size; q++)
                want += ival(q, (size_t)rank * n + i);
            memcpy(&got, recv + i * 8, 8);
            bad = got != want;
        }
        break;
    default:
        break;
    }
    free(send);
    free(recv);
    free(copy);
    if (bad) {
        fprintf(stderr, "rank %d: %s: wrong result\n", rank, what);
        return EXIT_WRONG;
    }
    if (verbose && rank == 0)
        printf("ok %s\n", what);
    return 0;
}

static int parse_list(const char *s, size_t *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        char *end;
        out[n++] = strtoull(s, &end, 10);
        if (end == s)
            return -1;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv)
{
    size_t sizes[32] = {0, 1, 7, 1000, 70001};
    int nsizes = 5, ret = 0;
    int want[ALGO_COLL_NCOLLS];
    incoll_ctx_h ctx;
    incoll_comm_h comm;
    incoll_status_t st;

    for (int c = 0; c < ALGO_COLL_NCOLLS; c++)
        want[c] = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            nsizes = parse_list(argv[++i], sizes, 32);
            if (nsizes <= 0)
                return EXIT_USAGE;
        } else if (strcmp(argv[i], "--colls") == 0 && i + 1 < argc) {
            char *list = strdup(argv[++i]), *save = NULL;
            for (int c = 0; c < ALGO_COLL_NCOLLS; c++)
                want[c] = 0;
            for (char *t = strtok_r(list, ",", &save); t;
                 t = strtok_r(NULL, ",", &save)) {
                int c = algo_coll_parse(t);
                if (c < 0) {
                    fprintf(stderr, "coll_check: unknown collective %s\n", t);
                    return EXIT_USAGE;
                }
                want[c] = 1;
            }
            free(list);
        } else if (strcmp(argv[i], "--verbose") == 0) {
            verbose = 1;
        } else {
            fprintf(stderr, "usage: coll_check [--sizes LIST] [--colls LIST] "
                            "[--verbose]\n");
            return EXIT_USAGE;
        }
    }
    if ((st = incoll_init(&ctx)) != INCOLL_OK)
        return fail_status(st, "init");
    incoll_comm_world(ctx, &comm);
    incoll_comm_rank(comm, &rank);
    incoll_comm_size(comm, &size);
    /* Bad arguments, the same on every rank: a clear error at once on
     * every rank (the ranks agree on it: a refusal on some ranks only
     * fails the others' calls with INCOLL_ERR_MISMATCH). */
    {
        uint8_t buf[64];
        int64_t v[130];
        struct {
            incoll_status_t got;
            const char *what;
        } bad[] = {
            {incoll_bcast(comm, buf, 8, size), "bcast root out of range"},
            {incoll_bcast(comm, buf, 8, -1), "bcast negative root"},
            {incoll_bcast(NULL, buf, 8, 0), "bcast null comm"},
            {incoll_bcast(comm, NULL, 8, 0), "bcast null buffer"},
            {incoll_reduce(comm, v, v + 4, 1, INCOLL_FLOAT32, INCOLL_OP_BAND,
                           0),
             "reduce BAND on float32"},
            {incoll_reduce(comm, v, v + 4, 1, INCOLL_DTYPE_COUNT, INCOLL_OP_SUM,
                           0),
             "reduce unknown dtype"},
            {incoll_allgather(comm, NULL, buf, 1), "allgather null sendbuf"},
            {incoll_allgather(comm, buf + 1, buf, 2), "allgather overlapping"},
            {incoll_scatter(comm, buf, buf, 1, size + 3),
             "scatter root out of range"},
            {incoll_reduce_scatter(comm, (uint8_t *)v + 4, v, 1, INCOLL_INT64,
                                   INCOLL_OP_SUM),
             "reduce_scatter overlapping"},
            {incoll_barrier(NULL), "barrier null comm"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
            if (bad[i].got != INCOLL_ERR_INVALID_ARG) {
                fprintf(stderr, "rank %d: %s: %s, want invalid argument\n",
                        rank, bad[i].what, incoll_status_string(bad[i].got));
                ret = EXIT_WRONG;
            }
    }
    for (int c = 0; c < ALGO_COLL_NCOLLS && ret == 0; c++) {
        int rooted = c == ALGO_COLL_BCAST || c == ALGO_COLL_REDUCE ||
                     c == ALGO_COLL_GATHER || c == ALGO_COLL_SCATTER;
        int roots[3] = {0, size - 1, size / 2};
        if (!want[c])
            continue;
        for (int si = 0; si < nsizes && ret == 0; si++) {
            size_t n = sizes[si];
            if (c == ALGO_COLL_BARRIER && si > 0)
                break;
            if (c == ALGO_COLL_REDUCE || c == ALGO_COLL_REDUCE_SCATTER)
                n = (n + 7) / 8; /* int64 elements */
            for (int ri = 0; ri < (rooted ? 3 : 1) && ret == 0; ri++)
                for (int ip = 0; ip < 2 && ret == 0; ip++)
                    for (int algo = HOST_CALGO_AUTO;
                         algo < CALGO_COUNT && ret == 0; algo++) {
                        if (algo >= 0 &&
                            (algo_calgo_info((algo_calgo_t)algo)->coll !=
                                 (algo_coll_t)c ||
                             !algo_calgo_fits((algo_calgo_t)algo, size)))
                            continue;
                        if (c == ALGO_COLL_BCAST && ip)
                            continue; /* bcast is always in place */
                        ret = one(comm, (algo_coll_t)c, algo, n, roots[ri], ip);
                    }
        }
    }
    if (ret == 0 && (st = incoll_barrier(comm)) != INCOLL_OK)
        ret = fail_status(st, "final barrier");
    if (ret == 0 && rank == 0)
        printf("coll_check: %u operations on %d ranks: all correct\n", iter,
               size);
    incoll_finalize(ctx);
    return ret;
}
