/*
 * nb_check: an incoll program that checks nonblocking and persistent
 * collectives (incoll_iX, incoll_X_init, incoll_req_*). Run it under
 * `incoll run`.
 *
 *   nb_check [--iters N] [--threads] [--verbose]
 *
 * Every rank fills its inputs from (rank, index, case) and compares each
 * result with what it computes itself:
 *   1. many allreduces outstanding on the world, of several sizes, waited
 *      for in order, in reverse order, through test loops and freed before
 *      completion (their results checked after a later wait: requests of
 *      one communicator complete in order);
 *   2. requests on three communicators interleaved, started in a
 *      different order on odd and even ranks;
 *   3. the other collectives' nonblocking forms, and a blocking allreduce
 *      behind outstanding requests;
 *   4. a persistent allreduce started N times (default 1000) and a
 *      persistent bcast, each result checked;
 *   5. with --threads, two threads at once running collectives on two
 *      communicators.
 * Exit status: 0 all correct ("all correct" on rank 0), 1 wrong result,
 * 2 usage, 3 timeout, 4 any other incoll error.
 */
#include "incoll.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { EXIT_WRONG = 1, EXIT_USAGE = 2, EXIT_TIMEOUT = 3, EXIT_ERROR = 4 };

static int rank, size, verbose;

static void phase(const char *what)
{
    struct timespec ts;
    if (!verbose || rank != 0)
        return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("%ld.%03ld %s done\n", (long)ts.tv_sec, ts.tv_nsec / 1000000, what);
    fflush(stdout);
}

static int fail_status(incoll_status_t st, const char *what)
{
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, incoll_status_string(st));
    return st == INCOLL_ERR_TIMEOUT ? EXIT_TIMEOUT : EXIT_ERROR;
}

/* Rank r's element i of case k in a communicator of n ranks, and the sum
 * over the ranks of such a communicator. */
static int64_t val(int r, size_t i, int k)
{
    return (int64_t)(r + 1) * (int64_t)(i % 1000 + 1) + 7 * k - 3 * r;
}

static int64_t sum(int n, size_t i, int k)
{
    int64_t s = 0;
    for (int r = 0; r < n; r++)
        s += val(r, i, k);
    return s;
}

static void fill(int64_t *v, size_t n, int r, int k)
{
    for (size_t i = 0; i < n; i++)
        v[i] = val(r, i, k);
}

static int check_sum(const int64_t *v, size_t n, int nr, int k,
                     const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i] != sum(nr, i, k)) {
            fprintf(
                stderr, "rank %d: %s case %d: element %zu is %lld, want %lld\n",
                rank, what, k, i, (long long)v[i], (long long)sum(nr, i, k));
            return EXIT_WRONG;
        }
    }
    return 0;
}

#define NREQ 12

/* 1. Many outstanding on one communicator, every completion order. */
static int many(incoll_comm_h comm, int nr, int mode)
{
    static const size_t sizes[NREQ] = {1, 7,     300, 5000, 1,     70000,
                                       2, 12345, 64,  999,  40000, 3};
    int64_t *in[NREQ], *out[NREQ];
    incoll_req_h req[NREQ];
    incoll_status_t st;
    int ret = 0, myr;

    incoll_comm_rank(comm, &myr);
    for (int j = 0; j < NREQ; j++) {
        in[j] = malloc(sizes[j] * sizeof(int64_t));
        out[j] = malloc(sizes[j] * sizeof(int64_t));
        if (!in[j] || !out[j])
            return EXIT_ERROR;
        fill(in[j], sizes[j], myr, 100 * mode + j);
        /* Every third one in place. */
        if (j % 3 == 2)
            memcpy(out[j], in[j], sizes[j] * sizeof(int64_t));
        st = incoll_iallreduce(comm, j % 3 == 2 ? INCOLL_IN_PLACE : in[j],
                               out[j], sizes[j], INCOLL_INT64, INCOLL_OP_SUM,
                               &req[j]);
        if (st != INCOLL_OK)
            return fail_status(st, "iallreduce");
    }
    if (mode == 0) { /* in order */
        for (int j = 0; j < NREQ; j++)
            if ((st = incoll_req_wait(req[j])) != INCOLL_OK)
                return fail_status(st, "wait in order");
    } else if (mode == 1) { /* reverse */
        for (int j = NREQ - 1; j >= 0; j--)
            if ((st = incoll_req_wait(req[j])) != INCOLL_OK)
                return fail_status(st, "wait reverse");
    } else if (mode == 2) { /* test loops, any order */
        int left = NREQ, done[NREQ] = {0};
        while (left > 0) {
            for (int j = NREQ - 1; j >= 0; j--) {
                int d;
                if (done[j])
                    continue;
                st = incoll_req_test(req[j], &d);
                if (d && st != INCOLL_OK)
                    return fail_status(st, "test");
                if (!d && st != INCOLL_OK)
                    return fail_status(st, "test (running)");
                if (d) {
                    done[j] = 1;
                    left--;
                }
            }
        }
    } else { /* free the first ones, wait for the last */
        for (int j = 0; j < NREQ - 1; j++)
            if ((st = incoll_req_free(req[j])) != INCOLL_OK)
                return fail_status(st, "free");
        if ((st = incoll_req_wait(req[NREQ - 1])) != INCOLL_OK)
            return fail_status(st, "wait after free");
    }
    for (int j = 0; j < NREQ && !ret; j++)
        ret = check_sum(out[j], sizes[j], nr, 100 * mode + j, "many");
    for (int j = 0; j < NREQ; j++) {
        free(in[j]);
        free(out[j]);
    }
    return ret;
}

/* 2. Three communicators interleaved, in different orders by parity. */
static int interleaved(incoll_comm_h world, incoll_comm_h half,
                       incoll_comm_h dup)
{
    enum { N = 3000, R = 4 };
    incoll_comm_h comms[3] = {world, half, dup};
    int64_t *in = malloc(3 * R * N * sizeof(int64_t));
    int64_t *out = malloc(3 * R * N * sizeof(int64_t));
    incoll_req_h req[3][R];
    int nr[3], ret = 0;
    incoll_status_t st;

    if (!in || !out)
        return EXIT_ERROR;
    for (int c = 0; c < 3; c++)
        incoll_comm_size(comms[c], &nr[c]);
    for (int round = 0; round < R; round++) {
        for (int cc = 0; cc < 3; cc++) {
            int c = rank % 2 ? 2 - cc : cc;
            int myr;
            int64_t *i_ = in + ((size_t)c * R + round) * N;
            int64_t *o_ = out + ((size_t)c * R + round) * N;
            incoll_comm_rank(comms[c], &myr);
            fill(i_, N, myr, 10 * c + round);
            st = incoll_iallreduce(comms[c], i_, o_, N, INCOLL_INT64,
                                   INCOLL_OP_SUM, &req[c][round]);
            if (st != INCOLL_OK)
                return fail_status(st, "iallreduce (interleaved)");
        }
    }
    /* Wait for them communicator by communicator, odd ranks backwards. */
    for (int cc = 0; cc < 3; cc++) {
        int c = rank % 2 ? cc : 2 - cc;
        for (int round = 0; round < R; round++)
            if ((st = incoll_req_wait(req[c][round])) != INCOLL_OK)
                return fail_status(st, "wait (interleaved)");
    }
    for (int c = 0; c < 3 && !ret; c++)
        for (int round = 0; round < R && !ret; round++)
            ret = check_sum(out + ((size_t)c * R + round) * N, N, nr[c],
                            10 * c + round, "interleaved");
    free(in);
    free(out);
    return ret;
}

/* 3. The other collectives' nonblocking forms and a blocking call behind
 * outstanding requests. */
static int others(incoll_comm_h comm)
{
    enum { B = 1000 };
    uint8_t *bc = malloc(B), *ag = malloc((size_t)size * B), *mine = malloc(B);
    int64_t red[64], redin[64], ar[64], arin[64];
    incoll_req_h r[5];
    incoll_status_t st;
    int root = size - 1;

    if (!bc || !ag || !mine)
        return EXIT_ERROR;
    for (int i = 0; i < B; i++) {
        bc[i] = rank == root ? (uint8_t)(i * 7 + 1) : 0;
        mine[i] = (uint8_t)(rank * 31 + i);
    }
    fill(redin, 64, rank, 501);
    fill(arin, 64, rank, 502);
    fill(ar, 64, rank, 0);
    /* An allreduce on the engine ahead of collectives run by the thread. */
    if ((st = incoll_iallreduce(comm, arin, ar, 7, INCOLL_INT64, INCOLL_OP_SUM,
                                &r[4])) != INCOLL_OK ||
        (st = incoll_ibcast(comm, bc, B, root, &r[0])) != INCOLL_OK ||
        (st = incoll_ireduce(comm, redin, red, 64, INCOLL_INT64, INCOLL_OP_SUM,
                             0, &r[1])) != INCOLL_OK ||
        (st = incoll_ibarrier(comm, &r[2])) != INCOLL_OK ||
        (st = incoll_iallgather(comm, mine, ag, B, &r[3])) != INCOLL_OK)
        return fail_status(st, "start of the other collectives");
    if (getenv("NB_SPIN")) {
        for (int j = 4; j >= 0; j--) {
            int d = 0;
            while (!d)
                if ((st = incoll_req_test(r[j], &d)) != INCOLL_OK)
                    return fail_status(st, "spin test");
        }
        for (int j = 0; j < 5; j++)
            incoll_iallreduce(comm, arin, ar, 7, INCOLL_INT64, INCOLL_OP_SUM,
                              &r[j]);
    }
    /* Blocking, behind four outstanding requests. */
    if ((st = incoll_allreduce(comm, arin, ar, 64, INCOLL_INT64,
                               INCOLL_OP_SUM)) != INCOLL_OK)
        return fail_status(st, "blocking allreduce behind requests");
    for (int j = 0; j < 5; j++) {
        int d = 0;
        /* All complete before the blocking call returned. */
        st = incoll_req_test(r[j], &d);
        if (!d || st != INCOLL_OK) {
            fprintf(stderr,
                    "rank %d: request %d %s after a later blocking "
                    "call: %s\n",
                    rank, j, d ? "failed" : "not done",
                    incoll_status_string(st));
            return EXIT_WRONG;
        }
    }
    if (check_sum(ar, 64, size, 502, "blocking"))
        return EXIT_WRONG;
    if (rank == 0 && check_sum(red, 64, size, 501, "ireduce"))
        return EXIT_WRONG;
    for (int i = 0; i < B; i++) {
        if (bc[i] != (uint8_t)(i * 7 + 1)) {
            fprintf(stderr, "rank %d: ibcast byte %d wrong\n", rank, i);
            return EXIT_WRONG;
        }
        for (int q = 0; q < size; q++)
            if (ag[(size_t)q * B + i] != (uint8_t)(q * 31 + i)) {
                fprintf(stderr, "rank %d: iallgather block %d byte %d wrong\n",
                        rank, q, i);
                return EXIT_WRONG;
            }
    }
    free(bc);
    free(ag);
    free(mine);
    return 0;
}

/* 4. Persistent requests started iters times. */
static int persistent(incoll_comm_h comm, int iters)
{
    enum { N = 513 };
    int64_t in[N] = {0}, out[N];
    uint8_t buf[300];
    incoll_req_h ar, bc;
    incoll_status_t st;
    int myr, nr;

    incoll_comm_rank(comm, &myr);
    incoll_comm_size(comm, &nr);

    if ((st = incoll_allreduce_init(comm, in, out, N, INCOLL_INT64,
                                    INCOLL_OP_SUM, &ar)) != INCOLL_OK ||
        (st = incoll_bcast_init(comm, buf, sizeof(buf), 0, &bc)) != INCOLL_OK)
        return fail_status(st, "init");
    /* Inactive: test says done at once. */
    {
        int d = 0;
        if (incoll_req_test(ar, &d) != INCOLL_OK || !d) {
            fprintf(stderr, "rank %d: an inactive request is not done\n", rank);
            return EXIT_WRONG;
        }
    }
    for (int it = 0; it < iters; it++) {
        fill(in, N, myr, it);
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = myr == 0 ? (uint8_t)(it + i) : 0;
        if ((st = incoll_req_start(ar)) != INCOLL_OK)
            return fail_status(st, "start");
        if (it % 10 == 0 && (st = incoll_req_start(bc)) != INCOLL_OK)
            return fail_status(st, "start bcast");
        if (it % 2) {
            int d = 0;
            /* Computing between tests (not spinning): on an oversubscribed
             * machine a spinning test starves the request thread. */
            while (!d) {
                struct timespec pause = {0, 20000};
                if ((st = incoll_req_test(ar, &d)) != INCOLL_OK)
                    return fail_status(st, "test persistent");
                if (!d)
                    nanosleep(&pause, NULL);
            }
        } else if ((st = incoll_req_wait(ar)) != INCOLL_OK) {
            return fail_status(st, "wait persistent");
        }
        if (check_sum(out, N, nr, it, "persistent"))
            return EXIT_WRONG;
        if (it % 10 == 0) {
            if ((st = incoll_req_wait(bc)) != INCOLL_OK)
                return fail_status(st, "wait bcast");
            for (size_t i = 0; i < sizeof(buf); i++)
                if (buf[i] != (uint8_t)(it + i)) {
                    fprintf(stderr, "rank %d: persistent bcast %d wrong\n",
                            rank, it);
                    return EXIT_WRONG;
                }
        }
    }
    if (incoll_req_free(ar) != INCOLL_OK || incoll_req_free(bc) != INCOLL_OK)
        return EXIT_ERROR;
    return 0;
}

/* 5. Two threads, two communicators. */
typedef struct {
    incoll_comm_h comm;
    int k;
    int ret;
} thr_t;

static void *thr_main(void *arg)
{
    thr_t *t = arg;
    enum { N = 20000 };
    int64_t *in = malloc(N * sizeof(int64_t)),
            *out = malloc(N * sizeof(int64_t));
    int nr, myr;
    incoll_comm_size(t->comm, &nr);
    incoll_comm_rank(t->comm, &myr);
    for (int it = 0; it < 40 && !t->ret; it++) {
        incoll_status_t st;
        int k = t->k * 1000 + it;
        fill(in, N, myr, k);
        if (it % 2) {
            incoll_req_h r;
            st = incoll_iallreduce(t->comm, in, out, N, INCOLL_INT64,
                                   INCOLL_OP_SUM, &r);
            if (st == INCOLL_OK)
                st = incoll_req_wait(r);
        } else {
            st = incoll_allreduce(t->comm, in, out, N, INCOLL_INT64,
                                  INCOLL_OP_SUM);
        }
        if (st != INCOLL_OK)
            t->ret = fail_status(st, "allreduce in a thread");
        else
            t->ret = check_sum(out, N, nr, k, "thread");
    }
    free(in);
    free(out);
    return NULL;
}

static int threads(incoll_comm_h a, incoll_comm_h b)
{
    thr_t t[2] = {{a, 1, 0}, {b, 2, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, thr_main, &t[i]) != 0)
            return EXIT_ERROR;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    return t[0].ret ? t[0].ret : t[1].ret;
}

int main(int argc, char **argv)
{
    incoll_ctx_h ctx;
    incoll_comm_h world, half, dup;
    incoll_status_t st;
    int iters = 1000, thr = 0, ret = 0;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads"))
            thr = 1;
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else {
            fprintf(stderr, "usage: nb_check [--iters N] [--threads] "
                            "[--verbose]\n");
            return EXIT_USAGE;
        }
    }
    if ((st = incoll_init(&ctx)) != INCOLL_OK)
        return fail_status(st, "init");
    incoll_comm_world(ctx, &world);
    incoll_comm_rank(world, &rank);
    incoll_comm_size(world, &size);
    if ((st = incoll_comm_split(world, rank % 2, rank, &half)) != INCOLL_OK ||
        (st = incoll_comm_split(world, 0, size - rank, &dup)) != INCOLL_OK)
        return fail_status(st, "split");
    for (int mode = 0; mode < 4 && !ret; mode++) {
        ret = many(world, size, mode);
        if (verbose && rank == 0)
            printf("many outstanding, mode %d: %s\n", mode,
                   ret ? "wrong" : "ok");
    }
    phase("many");
    if (!ret) {
        int nh;
        incoll_comm_size(half, &nh);
        ret = many(half, nh, 1);
    }
    phase("many on half");
    if (!ret)
        ret = interleaved(world, half, dup);
    phase("interleaved");
    if (!ret)
        ret = others(world);
    phase("others");
    if (!ret)
        ret = persistent(world, iters);
    phase("persistent");
    if (!ret && thr)
        ret = threads(half, dup);
    phase("threads");
    incoll_comm_destroy(half);
    incoll_comm_destroy(dup);
    incoll_finalize(ctx);
    if (ret == 0 && rank == 0)
        printf("all correct\n");
    return ret;
}
