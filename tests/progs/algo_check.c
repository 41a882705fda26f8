/*
 * algo_check: an incoll program that checks every allreduce algorithm,
 * host-based and in-network, on the same communicator, alternating them so
 * that consecutive operations use different algorithms (a rank still
 * finishing one while a peer starts the next is part of the test). Run it
 * under `incoll run`; it uses only the public API.
 *
 *   algo_check [--algos rd,ring,rabenseifner,inc] [--sizes 1,7,1000]
 *              [--iters N] [--bench BYTES] [--verbose]
 *
 * Check mode (default): for each size, each case (int64 sum, int32 max,
 * uint8 bor, float64 sum of small integers, float64 prod of +-1, float32
 * sum of arbitrary values) and each algorithm, every rank fills its input
 * from (rank, index, case), runs incoll_allreduce_algo (in place every
 * other time) and compares with the exact result it computes itself
 * (within a rounding bound for the arbitrary float32 values), checks that
 * its send buffer is untouched, and then that every rank holds the same
 * bits (MIN and MAX of a hash of the result). The default sizes include
 * 1, size - 1, size, size + 1 and counts that need many packets.
 *
 * Bench mode (--bench BYTES): float32 sums of BYTES, each algorithm in
 * turn for --iters rounds (default 20) after a warm-up; rank 0 prints one
 * line per algorithm: bytes, avg/min/max microseconds, MB/s (bytes / avg).
 *
 * Exit status: 0 all correct, 1 wrong result, 2 usage, 3 an operation timed
 * out, 4 any other incoll error.
 */
#include "incoll.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { EXIT_WRONG = 1, EXIT_USAGE = 2, EXIT_TIMEOUT = 3, EXIT_ERROR = 4 };

#define MAX_LIST 64

static const char *const algo_names[INCOLL_ALGO_COUNT] = {
    "auto", "inc", "rd", "ring", "rabenseifner",
};

typedef enum {
    CASE_I64_SUM,
    CASE_I32_MAX,
    CASE_U8_BOR,
    CASE_F64_SUM_INT,
    CASE_F64_PROD,
    CASE_F32_SUM,
    CASE_COUNT
} case_t;

static const char *const case_names[CASE_COUNT] = {
    "int64 sum",   "int32 max",    "uint8 bor",
    "float64 sum", "float64 prod", "float32 sum",
};

typedef struct {
    int rank, size;
    incoll_comm_h comm;
    int verbose;
    uint64_t checked;
} check_t;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint64_t h3(int rank, size_t i, int c)
{
    return mix(((uint64_t)rank << 40) ^ ((uint64_t)c << 32) ^ (uint64_t)i);
}

static incoll_dtype_t case_dtype(case_t c)
{
    static const incoll_dtype_t d[CASE_COUNT] = {
        INCOLL_INT64,   INCOLL_INT32,   INCOLL_UINT8,
        INCOLL_FLOAT64, INCOLL_FLOAT64, INCOLL_FLOAT32,
    };
    return d[c];
}

static incoll_op_t case_op(case_t c)
{
    static const incoll_op_t o[CASE_COUNT] = {
        INCOLL_OP_SUM, INCOLL_OP_MAX,  INCOLL_OP_BOR,
        INCOLL_OP_SUM, INCOLL_OP_PROD, INCOLL_OP_SUM,
    };
    return o[c];
}

/* Rank's input element i of case c, written into elem. */
static void input(case_t c, int rank, size_t i, void *elem)
{
    uint64_t h = h3(rank, i, (int)c);
    switch (c) {
    case CASE_I64_SUM: {
        int64_t v = (int64_t)(h >> 24) - ((int64_t)1 << 39);
        memcpy(elem, &v, 8);
        break;
    }
    case CASE_I32_MAX: {
        int32_t v = (int32_t)(uint32_t)h;
        memcpy(elem, &v, 4);
        break;
    }
    case CASE_U8_BOR: {
        uint8_t v = (uint8_t)(1u << ((unsigned)(rank + (int)i) % 8));
        memcpy(elem, &v, 1);
        break;
    }
    case CASE_F64_SUM_INT: {
        double v = (double)((int64_t)(h % 2001) - 1000);
        memcpy(elem, &v, 8);
        break;
    }
    case CASE_F64_PROD: {
        double v = (h >> 7) % 5 == 0 ? -1.0 : 1.0;
        memcpy(elem, &v, 8);
        break;
    }
    default: {
        float v = (float)((double)(h >> 11) * 0x1.0p-53 - 0.5) * 3.0f;
        memcpy(elem, &v, 4);
        break;
    }
    }
}

/* 1 if got (element i of the result) is right. */
static int expect_ok(case_t c, int size, size_t i, const void *got)
{
    uint8_t e[8];
    switch (c) {
    case CASE_I64_SUM: {
        int64_t want = 0, v;
        for (int r = 0; r < size; r++) {
            input(c, r, i, e);
            memcpy(&v, e, 8);
            want += v;
        }
        memcpy(&v, got, 8);
        return v == want;
    }
    case CASE_I32_MAX: {
        int32_t want = INT32_MIN, v;
        for (int r = 0; r < size; r++) {
            input(c, r, i, e);
            memcpy(&v, e, 4);
            want = v > want ? v : want;
        }
        memcpy(&v, got, 4);
        return v == want;
    }
    case CASE_U8_BOR: {
        uint8_t want = 0, v;
        for (int r = 0; r < size; r++) {
            input(c, r, i, e);
            want |= e[0];
        }
        memcpy(&v, got, 1);
        return v == want;
    }
    case CASE_F64_SUM_INT:
    case CASE_F64_PROD: {
        double want = c == CASE_F64_PROD ? 1.0 : 0.0, v;
        for (int r = 0; r < size; r++) {
            input(c, r, i, e);
            memcpy(&v, e, 8);
            want = c == CASE_F64_PROD ? want * v : want + v;
        }
        memcpy(&v, got, 8);
        return v == want;
    }
    default: {
        double want = 0;
        float v;
        for (int r = 0; r < size; r++) {
            input(c, r, i, e);
            memcpy(&v, e, 4);
            want += v;
        }
        memcpy(&v, got, 4);
        /* Each of size - 1 float additions rounds by at most half an ulp
         * of a partial sum bounded by 1.5 * size. */
        return fabs((double)v - want) <= 1.5 * size * size * 0x1.0p-24 + 1e-30;
    }
    }
}

static int status_exit(incoll_status_t st)
{
    return st == INCOLL_ERR_TIMEOUT ? EXIT_TIMEOUT : EXIT_ERROR;
}

/* Every rank holds the same bits: MIN and MAX of a hash agree. */
static int same_everywhere(check_t *ck, incoll_algo_t algo, const void *buf,
                           size_t bytes, int *exit_p)
{
    uint64_t h = 1469598103934665603ull, lo, hi;
    incoll_status_t st;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ ((const uint8_t *)buf)[i]) * 1099511628211ull;
    st = incoll_allreduce_algo(ck->comm, algo, &h, &lo, 1, INCOLL_UINT64,
                               INCOLL_OP_MIN);
    if (st == INCOLL_OK)
        st = incoll_allreduce_algo(ck->comm, algo, &h, &hi, 1, INCOLL_UINT64,
                                   INCOLL_OP_MAX);
    if (st != INCOLL_OK) {
        fprintf(stderr, "algo_check: rank %d: hash check with %s: %s\n",
                ck->rank, algo_names[algo], incoll_status_string(st));
        *exit_p = status_exit(st);
        return 0;
    }
    if (lo != hi) {
        fprintf(stderr,
                "algo_check: rank %d: ranks hold different results "
                "after %s\n",
                ck->rank, algo_names[algo]);
        *exit_p = EXIT_WRONG;
        return 0;
    }
    return 1;
}

/* One case, one size, one algorithm. Returns 0 or an exit status. */
static int check_one(check_t *ck, incoll_algo_t algo, case_t c, size_t count,
                     int inplace, uint8_t *send, uint8_t *orig, uint8_t *recv)
{
    incoll_dtype_t dt = case_dtype(c);
    size_t ds = incoll_dtype_size(dt), bytes = count * ds;
    incoll_status_t st;
    int ex = 0;

    for (size_t i = 0; i < count; i++)
        input(c, ck->rank, i, send + i * ds);
    memcpy(orig, send, bytes);
    if (inplace) {
        memcpy(recv, send, bytes);
        st = incoll_allreduce_algo(ck->comm, algo, INCOLL_IN_PLACE, recv, count,
                                   dt, case_op(c));
    } else {
        memset(recv, 0xa5, bytes);
        st = incoll_allreduce_algo(ck->comm, algo, send, recv, count, dt,
                                   case_op(c));
    }
    if (st != INCOLL_OK) {
        fprintf(stderr, "algo_check: rank %d: %s %s count %zu%s: %s\n",
                ck->rank, algo_names[algo], case_names[c], count,
                inplace ? " in place" : "", incoll_status_string(st));
        return status_exit(st);
    }
    if (!inplace && memcmp(send, orig, bytes) != 0) {
        fprintf(stderr,
                "algo_check: rank %d: %s %s count %zu: the send "
                "buffer was modified\n",
                ck->rank, algo_names[algo], case_names[c], count);
        return EXIT_WRONG;
    }
    for (size_t i = 0; i < count; i++)
        if (!expect_ok(c, ck->size, i, recv + i * ds)) {
            fprintf(stderr,
                    "algo_check: rank %d: %s %s count %zu%s: element "
                    "%zu is wrong\n",
                    ck->rank, algo_names[algo], case_names[c], count,
                    inplace ? " in place" : "", i);
            return EXIT_WRONG;
        }
    if (!same_everywhere(ck, algo, recv, bytes, &ex))
        return ex;
    ck->checked += count;
    if (ck->verbose && ck->rank == 0)
        printf("algo_check: %-12s %-12s count %-8zu%s ok\n", algo_names[algo],
               case_names[c], count, inplace ? " in place" : "");
    return 0;
}

static int parse_list(const char *text, long *out, int max)
{
    int n = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end || v < 0 || n == max) {
            free(copy);
            return -1;
        }
        out[n++] = v;
    }
    free(copy);
    return n;
}

static int parse_algos(const char *text, incoll_algo_t *out, int max)
{
    int n = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        int a = -1;
        for (int k = 0; k < INCOLL_ALGO_COUNT; k++)
            if (strcmp(t, algo_names[k]) == 0)
                a = k;
        if (a < 0 || n == max) {
            free(copy);
            return -1;
        }
        out[n++] = (incoll_algo_t)a;
    }
    free(copy);
    return n;
}

static int bench(check_t *ck, const incoll_algo_t *algos, int nalgos,
                 size_t bytes, int iters)
{
    size_t count = bytes / 4 ? bytes / 4 : 1;
    float *s = malloc(count * 4), *r = malloc(count * 4);
    double sum[MAX_LIST] = {0}, mn[MAX_LIST], mx[MAX_LIST] = {0};
    uint32_t token = 0, tok_out;

    if (s == NULL || r == NULL)
        return EXIT_ERROR;
    for (size_t i = 0; i < count; i++)
        s[i] = (float)(i % 7);
    for (int a = 0; a < nalgos; a++)
        mn[a] = 1e300;
    for (int it = -2; it < iters; it++)
        for (int k = 0; k < nalgos; k++) {
            int a = (k + (it < 0 ? 0 : it)) % nalgos;
            incoll_status_t st;
            double t0, t;
            /* Line the ranks up so each operation is timed from a common
             * start, then time it on every rank and keep the slowest. */
            st = incoll_allreduce_algo(ck->comm, INCOLL_ALGO_RD, &token,
                                       &tok_out, 1, INCOLL_UINT32,
                                       INCOLL_OP_SUM);
            t0 = now_us();
            if (st == INCOLL_OK)
                st = incoll_allreduce_algo(ck->comm, algos[a], s, r, count,
                                           INCOLL_FLOAT32, INCOLL_OP_SUM);
            t = now_us() - t0;
            if (st != INCOLL_OK) {
                fprintf(stderr, "algo_check: rank %d: bench %s: %s\n", ck->rank,
                        algo_names[algos[a]], incoll_status_string(st));
                free(s);
                free(r);
                return status_exit(st);
            }
            if (it < 0)
                continue;
            {
                double tmax;
                st = incoll_allreduce_algo(ck->comm, INCOLL_ALGO_RD, &t, &tmax,
                                           1, INCOLL_FLOAT64, INCOLL_OP_MAX);
                if (st != INCOLL_OK)
                    return status_exit(st);
                sum[a] += tmax;
                mn[a] = tmax < mn[a] ? tmax : mn[a];
                mx[a] = tmax > mx[a] ? tmax : mx[a];
            }
        }
    if (ck->rank == 0)
        for (int a = 0; a < nalgos; a++) {
            double avg = sum[a] / iters;
            printf("algo_check bench: %-12s ranks %d bytes %zu avg %.1f us "
                   "min %.1f us max %.1f us %.1f MB/s\n",
                   algo_names[algos[a]], ck->size, count * 4, avg, mn[a], mx[a],
                   (double)(count * 4) / avg);
        }
    free(s);
    free(r);
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: algo_check [--algos rd,ring,rabenseifner,inc] "
                 "[--sizes N,N,...] [--iters N]\n"
                 "                  [--bench BYTES] [--verbose]\n");
}

int main(int argc, char **argv)
{
    incoll_ctx_h ctx;
    check_t ck;
    incoll_algo_t algos[MAX_LIST] = {INCOLL_ALGO_RD, INCOLL_ALGO_RING,
                                     INCOLL_ALGO_RABENSEIFNER, INCOLL_ALGO_INC};
    int nalgos = 4, nsizes = 0, iters = 1, ret = 0;
    long sizes[MAX_LIST], bench_bytes = -1;
    size_t maxc = 0;
    uint8_t *send, *orig, *recv;
    incoll_status_t st;

    memset(&ck, 0, sizeof(ck));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--verbose") == 0) {
            ck.verbose = 1;
        } else if (strcmp(a, "--algos") == 0 && v) {
            nalgos = parse_algos(v, algos, MAX_LIST);
            i++;
        } else if (strcmp(a, "--sizes") == 0 && v) {
            nsizes = parse_list(v, sizes, MAX_LIST);
            i++;
        } else if (strcmp(a, "--iters") == 0 && v) {
            iters = atoi(v);
            i++;
        } else if (strcmp(a, "--bench") == 0 && v) {
            bench_bytes = atol(v);
            i++;
        } else if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return EXIT_USAGE;
        }
        if (nalgos <= 0 || nsizes < 0 || iters < 1) {
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    st = incoll_init(&ctx);
    if (st != INCOLL_OK) {
        fprintf(stderr, "algo_check: incoll_init: %s\n",
                incoll_status_string(st));
        return status_exit(st);
    }
    incoll_comm_world(ctx, &ck.comm);
    incoll_comm_rank(ck.comm, &ck.rank);
    incoll_comm_size(ck.comm, &ck.size);

    if (bench_bytes >= 0) {
        ret = bench(&ck, algos, nalgos, (size_t)bench_bytes,
                    iters < 2 ? 20 : iters);
        incoll_finalize(ctx);
        return ret;
    }
    if (nsizes == 0) {
        long def[] = {1,       2,           7,   ck.size > 1 ? ck.size - 1 : 3,
                      ck.size, ck.size + 1, 100, 1000,
                      4099,    100000};
        nsizes = (int)(sizeof(def) / sizeof(def[0]));
        memcpy(sizes, def, sizeof(def));
    }
    for (int i = 0; i < nsizes; i++)
        maxc = (size_t)sizes[i] > maxc ? (size_t)sizes[i] : maxc;
    send = malloc(maxc * 8 + 8);
    orig = malloc(maxc * 8 + 8);
    recv = malloc(maxc * 8 + 8);
    if (send == NULL || orig == NULL || recv == NULL) {
        fprintf(stderr, "algo_check: out of memory\n");
        return EXIT_ERROR;
    }
    for (int it = 0; it < iters && ret == 0; it++)
        for (int si = 0; si < nsizes && ret == 0; si++)
            for (int c = 0; c < CASE_COUNT && ret == 0; c++)
                for (int k = 0; k < nalgos && ret == 0; k++) {
                    /* Rotate the order so every algorithm follows every
                     * other one. */
                    incoll_algo_t a = algos[(k + c + si) % nalgos];
                    ret = check_one(&ck, a, (case_t)c, (size_t)sizes[si],
                                    (k + c + it) % 2, send, orig, recv);
                }
    if (ret == 0 && ck.rank == 0)
        printf("algo_check: %d ranks, %d algorithms, %d sizes, %d cases: all "
               "correct (%llu elements checked)\n",
               ck.size, nalgos, nsizes, CASE_COUNT,
               (unsigned long long)ck.checked);
    free(send);
    free(orig);
    free(recv);
    st = incoll_finalize(ctx);
    if (ret == 0 && st != INCOLL_OK)
        ret = status_exit(st);
    return ret;
}
