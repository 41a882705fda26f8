/*
 * recover_check: an incoll program for the failure tests
 * (tests/test_recovery.c). It runs a loop of allreduces (SUM of int64) on
 * the world, sleeping between them, and checks every result element by
 * element. A call that fails is counted and the loop goes on (a
 * communicator whose recovery failed fails every later call at once).
 * With --coll it runs another collective instead (int64 elements, count
 * per rank, roots rotating), or "mix": all eight in turn.
 *
 *   recover_check [--iters N] [--count C] [--sleep-ms S] [--jitter-ms J]
 *                 [--seed N] [--inplace] [--progress P] [--coll NAME]
 *                 [--nonblocking K] [--late R:I:MS]
 *
 * Rank r sleeps S ms plus a pseudo-random 0..J ms (from seed, rank and
 * iteration) after each call, so members reach their calls at different
 * times. It prints one line per wrong or failed call, then
 * "summary ok=A wrong=W errors=E offloaded=0|1"; with --progress, also
 * "progress iter I" every P iterations (for a test to time a fault).
 * With --nonblocking K the calls are incoll_iallreduce, K outstanding at a
 * time, waited for in order. With --late R:I:MS rank R prints "late iter
 * I" and waits MS ms before its call of iteration I, answering the
 * library meanwhile (so it hears of a failure before it calls), for a
 * test to fail an AN while the others wait for it.
 *
 * Exit status: 0 all correct, 1 a wrong result returned as success,
 * 2 usage, 4 no wrong result but some calls failed.
 */
#include "incoll.h"

#include "host/counters.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Rank r's input element k at iteration it: distinct per iteration, so a
 * result of another operation is always wrong. */
static int64_t input(int r, int it, size_t k)
{
    return (int64_t)r * 1000003 + (int64_t)it * 7919 + (int64_t)k;
}

static const char *const coll_names[] = {"allreduce", "reduce",        "bcast",
                                         "barrier",   "allgather",     "gather",
                                         "scatter",   "reduce_scatter"};

/* The sum over the members of element k of their inputs. */
static int64_t sum_of(int size, int it, size_t k)
{
    int64_t want = 0;
    for (int r = 0; r < size; r++)
        want += input(r, it, k);
    return want;
}

/*
 * Collective c (an index of coll_names) of iteration it: runs it with
 * inputs from input() and checks what this rank got. Returns the status;
 * *bad_p is the first wrong element (or count * size when all are right),
 * *got_p and *want_p its values.
 */
static incoll_status_t run_coll(incoll_comm_h world, int c, int rank, int size,
                                int it, size_t count, int64_t *in, int64_t *out,
                                size_t *bad_p, int64_t *got_p, int64_t *want_p)
{
    size_t all = count * (size_t)size, n = 0, bytes = count * sizeof(int64_t);
    int root = it % size;
    incoll_status_t st;

    for (size_t k = 0; k < all; k++) {
        in[k] = input(rank, it, k);
        out[k] = -1;
    }
    switch (c) {
    case 1:
        st = incoll_reduce(world, in, out, count, INCOLL_INT64, INCOLL_OP_SUM,
                           root);
        n = rank == root ? count : 0;
        break;
    case 2:
        for (size_t k = 0; k < count; k++)
            out[k] = rank == root ? input(root, it, k) : -1;
        st = incoll_bcast(world, out, bytes, root);
        n = count;
        break;
    case 3:
        st = incoll_barrier(world);
        break;
    case 4:
        st = incoll_allgather(world, in, out, bytes);
        n = all;
        break;
    case 5:
        st = incoll_gather(world, in, out, bytes, root);
        n = rank == root ? all : 0;
        break;
    case 6:
        /* The root's vector: block j holds what rank j gets. */
        for (int j = 0; j < size; j++)
            for (size_t k = 0; k < count; k++)
                in[(size_t)j * count + k] = input(j, it, k);
        st = incoll_scatter(world, in, out, bytes, root);
        n = count;
        break;
    default:
        st = incoll_reduce_scatter(world, in, out, count, INCOLL_INT64,
                                   INCOLL_OP_SUM);
        n = count;
        break;
    }
    *bad_p = all;
    for (size_t k = 0; st == INCOLL_OK && k < n; k++) {
        int64_t want;
        switch (c) {
        case 1:
            want = sum_of(size, it, k);
            break;
        case 2:
            want = input(root, it, k);
            break;
        case 4:
        case 5:
            want = input((int)(k / count), it, k % count);
            break;
        case 6:
            want = input(rank, it, k);
            break;
        default:
            want = sum_of(size, it, (size_t)rank * count + k);
            break;
        }
        if (out[k] != want) {
            *bad_p = k;
            *got_p = out[k];
            *want_p = want;
            break;
        }
    }
    return st;
}

int main(int argc, char **argv)
{
    int iters = 10, inplace = 0, progress = 0, rank, size, coll = 0;
    long sleep = 0, jitter = 0;
    size_t count = 100;
    uint64_t seed = 1;
    int nok = 0, nwrong = 0, nerr = 0;
    incoll_ctx_h ctx;
    incoll_comm_h world;
    incoll_status_t status;
    int64_t *in, *out;
    int nb = 0, late_rank = -1, late_iter = -1;
    long late_ms = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--inplace") == 0) {
            inplace = 1;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "recover_check: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--iters") == 0)
            iters = atoi(v);
        else if (strcmp(a, "--count") == 0)
            count = (size_t)strtoull(v, NULL, 10);
        else if (strcmp(a, "--sleep-ms") == 0)
            sleep = atol(v);
        else if (strcmp(a, "--jitter-ms") == 0)
            jitter = atol(v);
        else if (strcmp(a, "--progress") == 0)
            progress = atoi(v);
        else if (strcmp(a, "--seed") == 0)
            seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--coll") == 0) {
            coll = -1;
            for (int c = 0; c < 8; c++)
                if (strcmp(v, coll_names[c]) == 0)
                    coll = c;
            if (strcmp(v, "mix") == 0)
                coll = 8;
            if (coll < 0) {
                fprintf(stderr, "recover_check: unknown collective %s\n", v);
                return 2;
            }
        } else if (strcmp(a, "--nonblocking") == 0) {
            nb = atoi(v);
        } else if (strcmp(a, "--late") == 0) {
            if (sscanf(v, "%d:%d:%ld", &late_rank, &late_iter, &late_ms) != 3) {
                fprintf(stderr, "recover_check: --late wants R:I:MS\n");
                return 2;
            }
        } else {
            fprintf(stderr, "recover_check: unknown option %s\n", a);
            return 2;
        }
    }
    if (iters < 1 || count < 1) {
        fprintf(stderr, "recover_check: --iters and --count must be >= 1\n");
        return 2;
    }
    status = incoll_init(&ctx);
    if (status != INCOLL_OK) {
        fprintf(stderr, "recover_check: init: %s\n",
                incoll_status_string(status));
        return 4;
    }
    incoll_comm_world(ctx, &world);
    incoll_comm_rank(world, &rank);
    incoll_comm_size(world, &size);
    in = malloc(count * (size_t)size * sizeof(*in));
    out = malloc(count * (size_t)size * sizeof(*out));
    if (in == NULL || out == NULL)
        return 4;
    if (nb > 0) {
        /* K requests outstanding; each result checked after its wait. */
        int64_t *bufs = malloc((size_t)nb * count * 2 * sizeof(int64_t));
        incoll_req_h *reqs = malloc((size_t)nb * sizeof(*reqs));
        if (bufs == NULL || reqs == NULL)
            return 4;
        for (int it0 = 0; it0 < iters; it0 += nb) {
            int k = it0 + nb <= iters ? nb : iters - it0;
            for (int j = 0; j < k; j++) {
                int64_t *bi = bufs + (size_t)j * count * 2, *bo = bi + count;
                for (size_t e = 0; e < count; e++)
                    bi[e] = input(rank, it0 + j, e);
                status = incoll_iallreduce(world, bi, bo, count, INCOLL_INT64,
                                           INCOLL_OP_SUM, &reqs[j]);
                if (status != INCOLL_OK)
                    reqs[j] = NULL;
            }
            for (int j = 0; j < k; j++) {
                int64_t *bo = bufs + (size_t)j * count * 2 + count;
                size_t bad = count;
                status = reqs[j] ? incoll_req_wait(reqs[j]) : INCOLL_ERR_IO;
                if (status != INCOLL_OK) {
                    printf("error iter %d: %s\n", it0 + j,
                           incoll_status_string(status));
                    nerr++;
                    continue;
                }
                for (size_t e = 0; e < count && bad == count; e++) {
                    int64_t want = 0;
                    for (int r = 0; r < size; r++)
                        want += input(r, it0 + j, e);
                    if (bo[e] != want)
                        bad = e;
                }
                if (bad < count) {
                    printf("WRONG iter %d element %zu\n", it0 + j, bad);
                    nwrong++;
                } else {
                    nok++;
                }
            }
            if (progress > 0 && it0 % progress < nb)
                printf("progress iter %d\n", it0);
            fflush(stdout);
        }
        free(bufs);
        free(reqs);
        iters = 0; /* the loop below has nothing left to do */
    }
    for (int it = 0; it < iters; it++) {
        int64_t *res = inplace ? in : out;
        size_t bad = count;
        int c = coll == 8 ? it % 8 : coll;
        if (rank == late_rank && it == late_iter) {
            struct timespec t0, t1;
            printf("late iter %d\n", it);
            fflush(stdout);
            clock_gettime(CLOCK_MONOTONIC, &t0);
            do {
                host_counters_progress(world, 10000000ull);
                clock_gettime(CLOCK_MONOTONIC, &t1);
            } while ((t1.tv_sec - t0.tv_sec) * 1000L +
                         (t1.tv_nsec - t0.tv_nsec) / 1000000L <
                     late_ms);
        }
        if (c > 0) {
            int64_t got = 0, want = 0;
            status = run_coll(world, c, rank, size, it, count, in, out, &bad,
                              &got, &want);
            if (status != INCOLL_OK) {
                printf("error iter %d (%s): %s\n", it, coll_names[c],
                       incoll_status_string(status));
                nerr++;
            } else if (bad < count * (size_t)size) {
                printf("WRONG iter %d (%s) element %zu: got %lld want %lld\n",
                       it, coll_names[c], bad, (long long)got, (long long)want);
                nwrong++;
            } else {
                nok++;
            }
            goto next;
        }
        for (size_t k = 0; k < count; k++)
            in[k] = input(rank, it, k);
        status = incoll_allreduce(world, inplace ? INCOLL_IN_PLACE : in, res,
                                  count, INCOLL_INT64, INCOLL_OP_SUM);
        if (status != INCOLL_OK) {
            printf("error iter %d: %s\n", it, incoll_status_string(status));
            nerr++;
        } else {
            for (size_t k = 0; k < count && bad == count; k++) {
                int64_t want = 0;
                for (int r = 0; r < size; r++)
                    want += input(r, it, k);
                if (res[k] != want)
                    bad = k;
            }
            if (bad < count) {
                int64_t want = 0;
                for (int r = 0; r < size; r++)
                    want += input(r, it, bad);
                printf("WRONG iter %d element %zu: got %lld want %lld\n", it,
                       bad, (long long)res[bad], (long long)want);
                nwrong++;
            } else {
                nok++;
            }
        }
    next:
        if (progress > 0 && it % progress == 0)
            printf("progress iter %d\n", it);
        fflush(stdout);
        if (it + 1 < iters) {
            long j = jitter > 0 ? (long)(mix(seed ^ mix((uint64_t)rank << 32 |
                                                        (uint64_t)it)) %
                                         (uint64_t)(jitter + 1))
                                : 0;
            sleep_ms(sleep + j);
        }
    }
    printf("summary ok=%d wrong=%d errors=%d offloaded=%d\n", nok, nwrong, nerr,
           incoll_comm_offloaded(world, NULL));
    fflush(stdout);
    free(in);
    free(out);
    incoll_finalize(ctx);
    return nwrong ? 1 : nerr ? 4 : 0;
}
