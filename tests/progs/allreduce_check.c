/*
 * allreduce_check: an incoll program that checks incoll_allreduce element
 * by element. Run it under `incoll run`; it uses only the public API.
 *
 *   allreduce_check [--sizes 1,7,1000] [--dtype float32,int32|all]
 *                   [--op sum,max|all] [--iters N] [--inplace]
 *                   [--min-seconds S] [--algo auto|inc|rd|ring|rabenseifner]
 *                   [--check-all] [--seed N] [--verbose]
 *
 * Every rank fills its input with values that are a function of (rank,
 * index, iteration, case), chosen so that the exact result is known:
 * small integers for sums (exact in every type, float16 and bfloat16
 * included), +-1 and one 2 per element for products, anything in range for
 * min/max, sparse zeros for the logical ops, single bits for the bitwise
 * ones. Each rank computes the expected result of all ranks itself and
 * compares its share of the elements bitwise (every element with
 * --check-all); then it allreduces a hash of its whole result with MIN and
 * MAX to check that every rank holds the same bits, so every element is
 * checked.
 *
 * Exit status: 0 all correct, 1 wrong result, 2 usage, 3 an operation timed
 * out (INCOLL_ERR_TIMEOUT), 4 any other incoll error.
 */
#include "incoll.h"
#include "common/clock.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { EXIT_WRONG = 1, EXIT_USAGE = 2, EXIT_TIMEOUT = 3, EXIT_ERROR = 4 };

#define MAX_SIZES 64

static const char *const dtype_names[INCOLL_DTYPE_COUNT] = {
    "int8",   "int16",  "int32",   "int64",    "uint8",   "uint16",
    "uint32", "uint64", "float16", "bfloat16", "float32", "float64",
};
static const char *const op_names[INCOLL_OP_COUNT] = {
    "sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor",
};
static const char *const algo_names[INCOLL_ALGO_COUNT] = {
    "auto", "inc", "rd", "ring", "rabenseifner",
};

typedef struct {
    int rank, size;
    incoll_comm_h comm;
    incoll_algo_t algo; /* used for every allreduce, checks included */
    int inplace, verbose, check_all;
    uint64_t seed; /* --seed: other inputs, same shapes */
    uint64_t checked;
} check_t;

static int is_float(incoll_dtype_t dt)
{
    return dt == INCOLL_FLOAT16 || dt == INCOLL_BFLOAT16 ||
           dt == INCOLL_FLOAT32 || dt == INCOLL_FLOAT64;
}

static int is_unsigned(incoll_dtype_t dt)
{
    return dt >= INCOLL_UINT8 && dt <= INCOLL_UINT64;
}

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Largest magnitude for which every integer, and every partial sum of the
 * fold, is exact in dt. */
static int64_t exact_limit(incoll_dtype_t dt)
{
    switch (dt) {
    case INCOLL_INT8:
        return 127;
    case INCOLL_UINT8:
        return 255;
    case INCOLL_BFLOAT16:
        return 256;
    case INCOLL_FLOAT16:
        return 2048;
    case INCOLL_INT16:
        return 32767;
    case INCOLL_UINT16:
        return 65535;
    default:
        return (int64_t)1 << 24;
    }
}

/*
 * The input of rank at index idx in iteration iter of case cs, as the
 * 64-bit pattern of an int64 (signed and float types) or of a uint64
 * (unsigned types, and the bitwise ops on any type).
 */
static uint64_t gen(incoll_dtype_t dt, incoll_op_t op, int size, uint64_t cs,
                    int rank, size_t idx, int iter)
{
    uint64_t h = splitmix(cs ^ ((uint64_t)idx * 0xd1342543de82ef95ull) ^
                          ((uint64_t)rank << 40) ^ ((uint64_t)iter << 52));
    int bits = (int)incoll_dtype_size(dt) * 8;
    int64_t k = 1 + (int64_t)(h >> 60) % 3; /* 1..3: a "true" value */

    switch (op) {
    case INCOLL_OP_SUM: {
        int64_t amp = exact_limit(dt) / size;
        if (amp > 3)
            amp = 3;
        if (is_unsigned(dt))
            return h % (uint64_t)(amp + 1);
        return (uint64_t)((int64_t)(h % (uint64_t)(2 * amp + 1)) - amp);
    }
    case INCOLL_OP_PROD: {
        int64_t v = (idx + (size_t)iter) % (size_t)size == (size_t)rank ? 2 : 1;
        if (!is_unsigned(dt) && (h & 3) == 0)
            v = -v;
        return (uint64_t)v;
    }
    case INCOLL_OP_MIN:
    case INCOLL_OP_MAX:
        if (dt == INCOLL_INT64 || dt == INCOLL_UINT64)
            return h;
        if (is_unsigned(dt) || (!is_float(dt) && bits <= 32)) {
            uint64_t span = (uint64_t)1 << bits;
            uint64_t v = h % span;
            if (is_unsigned(dt))
                return v;
            return (uint64_t)((int64_t)v - (int64_t)(span / 2));
        } else {
            int64_t lim =
                dt == INCOLL_FLOAT64 ? ((int64_t)1 << 53) : exact_limit(dt);
            return (uint64_t)((int64_t)(h % (uint64_t)(2 * lim + 1)) - lim);
        }
    case INCOLL_OP_LAND:
        return h % (uint64_t)(2 * size) == 0 ? 0 : (uint64_t)k;
    case INCOLL_OP_LOR:
        return h % (uint64_t)(2 * size) == 0 ? (uint64_t)k : 0;
    case INCOLL_OP_LXOR:
        return (h & 1) ? (uint64_t)k : 0;
    case INCOLL_OP_BAND:
        return ~((uint64_t)1 << (h % (uint64_t)bits));
    case INCOLL_OP_BOR:
        return (uint64_t)1 << (h % (uint64_t)bits);
    case INCOLL_OP_BXOR:
        return h;
    default:
        return 0;
    }
}

/* Folds b into a under op, in the domain gen() uses for dt. */
static uint64_t fold(incoll_dtype_t dt, incoll_op_t op, uint64_t a, uint64_t b)
{
    int64_t sa = (int64_t)a, sb = (int64_t)b;

    switch (op) {
    case INCOLL_OP_SUM:
        return (uint64_t)(sa + sb);
    case INCOLL_OP_PROD:
        return (uint64_t)(sa * sb);
    case INCOLL_OP_MIN:
        if (is_unsigned(dt))
            return a < b ? a : b;
        return sa < sb ? a : b;
    case INCOLL_OP_MAX:
        if (is_unsigned(dt))
            return a > b ? a : b;
        return sa > sb ? a : b;
    case INCOLL_OP_LAND:
        return a != 0 && b != 0;
    case INCOLL_OP_LOR:
        return a != 0 || b != 0;
    case INCOLL_OP_LXOR:
        return (a != 0) != (b != 0);
    case INCOLL_OP_BAND:
        return a & b;
    case INCOLL_OP_BOR:
        return a | b;
    case INCOLL_OP_BXOR:
        return a ^ b;
    default:
        return 0;
    }
}

/* An integer of magnitude <= 2048 as IEEE binary16 (exact). */
static uint16_t int_to_half(int64_t v)
{
    uint16_t sign = v < 0 ? 0x8000 : 0;
    uint64_t a = v < 0 ? (uint64_t)-v : (uint64_t)v;
    int e = 0;
    uint64_t mant;

    if (a == 0)
        return sign;
    while ((a >> (e + 1)) != 0)
        e++;
    mant = e <= 10 ? (a << (10 - e)) : (a >> (e - 10));
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) |
                      (uint16_t)(mant & 0x3ff));
}

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    double m = h & 0x3ff, v;
    if (e == 0)
        v = m / 16777216.0;
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else {
        v = (1024 + m);
        for (int i = 25; i > e; i--)
            v /= 2;
        for (int i = 25; i < e; i++)
            v *= 2;
    }
    return (h & 0x8000) ? -v : v;
}

/* Stores gen()'s value v as element i of buf in dt's representation. */
static void put(incoll_dtype_t dt, void *buf, size_t i, uint64_t v)
{
    size_t sz = incoll_dtype_size(dt);
    uint8_t *p = (uint8_t *)buf + i * sz;

    switch (dt) {
    case INCOLL_FLOAT32: {
        float f = (float)(int64_t)v;
        memcpy(p, &f, 4);
        break;
    }
    case INCOLL_FLOAT64: {
        double d = (double)(int64_t)v;
        memcpy(p, &d, 8);
        break;
    }
    case INCOLL_FLOAT16: {
        uint16_t h = int_to_half((int64_t)v);
        memcpy(p, &h, 2);
        break;
    }
    case INCOLL_BFLOAT16: {
        float f = (float)(int64_t)v;
        uint32_t u;
        uint16_t b;
        memcpy(&u, &f, 4);
        b = (uint16_t)(u >> 16);
        memcpy(p, &b, 2);
        break;
    }
    default: /* integers, little-endian: the low bytes */
        for (size_t k = 0; k < sz; k++)
            p[k] = (uint8_t)(v >> (8 * k));
        break;
    }
}

/* Formats element i of buf for a message. */
static void show(incoll_dtype_t dt, const void *buf, size_t i, char *out,
                 size_t len)
{
    size_t sz = incoll_dtype_size(dt);
    const uint8_t *p = (const uint8_t *)buf + i * sz;
    uint64_t u = 0;

    for (size_t k = 0; k < sz; k++)
        u |= (uint64_t)p[k] << (8 * k);
    switch (dt) {
    case INCOLL_FLOAT32: {
        float f;
        memcpy(&f, p, 4);
        snprintf(out, len, "%.9g (0x%08llx)", f, (unsigned long long)u);
        break;
    }
    case INCOLL_FLOAT64: {
        double d;
        memcpy(&d, p, 8);
        snprintf(out, len, "%.17g (0x%016llx)", d, (unsigned long long)u);
        break;
    }
    case INCOLL_FLOAT16:
        snprintf(out, len, "%g (0x%04llx)", half_to_double((uint16_t)u),
                 (unsigned long long)u);
        break;
    case INCOLL_BFLOAT16: {
        uint32_t w = (uint32_t)u << 16;
        float f;
        memcpy(&f, &w, 4);
        snprintf(out, len, "%g (0x%04llx)", f, (unsigned long long)u);
        break;
    }
    default:
        if (is_unsigned(dt)) {
            snprintf(out, len, "%llu", (unsigned long long)u);
        } else {
            int shift = 64 - (int)sz * 8;
            int64_t s = (int64_t)(u << shift) >> shift;
            snprintf(out, len, "%lld", (long long)s);
        }
        break;
    }
}

static uint64_t fnv1a(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int status_exit(incoll_status_t status)
{
    return status == INCOLL_ERR_TIMEOUT ? EXIT_TIMEOUT : EXIT_ERROR;
}

/* Runs one (dtype, op, count) case for one iteration. Returns 0 or an exit
 * status. */
static int run_case(check_t *c, incoll_dtype_t dt, incoll_op_t op, size_t count,
                    int iter, int case_no, void *sendbuf, void *recvbuf)
{
    uint64_t cs = splitmix(((uint64_t)dt << 8) | (uint64_t)op) ^
                  ((uint64_t)count << 20) ^ splitmix(c->seed);
    size_t sz = incoll_dtype_size(dt);
    uint8_t want[8];
    uint64_t hash, lo, hi;
    incoll_status_t status;
    char got_s[64], want_s[64];
    void *in = c->inplace ? recvbuf : sendbuf;

    for (size_t i = 0; i < count; i++)
        put(dt, in, i, gen(dt, op, c->size, cs, c->rank, i, iter));
    if (!c->inplace)
        memset(recvbuf, 0xa5, count * sz);
    status = incoll_allreduce_algo(c->comm, c->algo,
                                   c->inplace ? INCOLL_IN_PLACE : sendbuf,
                                   recvbuf, count, dt, op);
    if (status != INCOLL_OK) {
        fprintf(stderr,
                "allreduce_check: rank %d: case %d (%s %s count=%zu iter=%d): "
                "incoll_allreduce: %s (status %d)\n",
                c->rank, case_no, dtype_names[dt], op_names[op], count, iter,
                incoll_status_string(status), (int)status);
        return status_exit(status);
    }
    /* Computing an element's expected value costs one gen() per rank, so
     * by default each rank checks every size-th element (its share) and
     * the hash check below proves that the other ranks hold the same bits:
     * together they check every element once. --check-all: every rank
     * checks everything. */
    for (size_t i = c->check_all ? 0 : (size_t)c->rank; i < count;
         i += c->check_all ? 1 : (size_t)c->size) {
        uint64_t v = gen(dt, op, c->size, cs, 0, i, iter);
        for (int r = 1; r < c->size; r++)
            v = fold(dt, op, v, gen(dt, op, c->size, cs, r, i, iter));
        put(dt, want, 0, v);
        if (memcmp(want, (uint8_t *)recvbuf + i * sz, sz) != 0) {
            show(dt, recvbuf, i, got_s, sizeof(got_s));
            show(dt, want, 0, want_s, sizeof(want_s));
            fprintf(stderr,
                    "allreduce_check: rank %d: case %d (%s %s count=%zu "
                    "iter=%d%s): element %zu: got %s, want %s\n",
                    c->rank, case_no, dtype_names[dt], op_names[op], count,
                    iter, c->inplace ? " inplace" : "", i, got_s, want_s);
            return EXIT_WRONG;
        }
        c->checked++;
    }

    /* Every rank must hold the same bits: compare hashes through the
     * fabric itself, with MIN and MAX. */
    hash = fnv1a(recvbuf, count * sz);
    lo = hi = hash;
    status = incoll_allreduce_algo(c->comm, c->algo, INCOLL_IN_PLACE, &lo, 1,
                                   INCOLL_UINT64, INCOLL_OP_MIN);
    if (status == INCOLL_OK)
        status = incoll_allreduce_algo(c->comm, c->algo, INCOLL_IN_PLACE, &hi,
                                       1, INCOLL_UINT64, INCOLL_OP_MAX);
    if (status != INCOLL_OK) {
        fprintf(stderr,
                "allreduce_check: rank %d: case %d: hash allreduce: %s "
                "(status %d)\n",
                c->rank, case_no, incoll_status_string(status), (int)status);
        return status_exit(status);
    }
    if (lo != hash || hi != hash) {
        fprintf(stderr,
                "allreduce_check: rank %d: case %d (%s %s count=%zu iter=%d): "
                "results differ between ranks (hash %016llx, min %016llx, max "
                "%016llx)\n",
                c->rank, case_no, dtype_names[dt], op_names[op], count, iter,
                (unsigned long long)hash, (unsigned long long)lo,
                (unsigned long long)hi);
        return EXIT_WRONG;
    }
    if (c->verbose && c->rank == 0)
        printf("allreduce_check: case %d %s %s count=%zu iter=%d ok\n", case_no,
               dtype_names[dt], op_names[op], count, iter);
    return 0;
}

/* Parses a comma list of names (or "all") into a mask. */
static int parse_names(const char *arg, const char *const *names, int n,
                       unsigned *mask)
{
    char buf[512], *save = NULL;
    *mask = 0;
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        if (strcmp(t, "all") == 0) {
            *mask = (1u << n) - 1;
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (strcmp(t, names[i]) == 0) {
                *mask |= 1u << i;
                found = 1;
            }
        }
        if (!found) {
            fprintf(stderr, "allreduce_check: unknown name '%s'\n", t);
            return -1;
        }
    }
    return *mask ? 0 : -1;
}

static int parse_sizes(const char *arg, size_t *sizes, int *n)
{
    char buf[512], *save = NULL, *end;
    *n = 0;
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        unsigned long long v = strtoull(t, &end, 10);
        if (*end || *n == MAX_SIZES || v > (1ull << 28)) {
            fprintf(stderr, "allreduce_check: bad size '%s'\n", t);
            return -1;
        }
        sizes[(*n)++] = (size_t)v;
    }
    return *n ? 0 : -1;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: allreduce_check [--sizes N,N,...] [--dtype LIST|all] "
            "[--op LIST|all]\n"
            "                       [--iters N] [--inplace] [--min-seconds S] "
            "[--verbose]\n"
            "                       [--algo auto|inc|rd|ring|rabenseifner] "
            "[--check-all]\n"
            "                       [--seed N]\n");
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES] = {1, 7, 1000, 65536};
    int nsizes = 4, iters = 1, ret = 0, case_no = 0, ncases = 0, rounds = 0;
    unsigned dmask = 1u << INCOLL_FLOAT32, omask = 1u << INCOLL_OP_SUM;
    double min_seconds = 0, t0;
    size_t maxbytes = 0;
    void *sendbuf = NULL, *recvbuf = NULL;
    incoll_ctx_h ctx;
    incoll_status_t status;
    check_t c = {0};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--inplace") == 0) {
            c.inplace = 1;
        } else if (strcmp(a, "--verbose") == 0) {
            c.verbose = 1;
        } else if (strcmp(a, "--check-all") == 0) {
            c.check_all = 1;
        } else if (v && strcmp(a, "--sizes") == 0) {
            if (parse_sizes(v, sizes, &nsizes) != 0)
                return EXIT_USAGE;
            i++;
        } else if (v && strcmp(a, "--dtype") == 0) {
            if (parse_names(v, dtype_names, INCOLL_DTYPE_COUNT, &dmask) != 0)
                return EXIT_USAGE;
            i++;
        } else if (v && strcmp(a, "--op") == 0) {
            if (parse_names(v, op_names, INCOLL_OP_COUNT, &omask) != 0)
                return EXIT_USAGE;
            i++;
        } else if (v && strcmp(a, "--algo") == 0) {
            unsigned m;
            if (parse_names(v, algo_names, INCOLL_ALGO_COUNT, &m) != 0 ||
                (m & (m - 1)) != 0) {
                fprintf(stderr, "allreduce_check: --algo takes one of auto, "
                                "inc, rd, ring, rabenseifner\n");
                return EXIT_USAGE;
            }
            c.algo = (incoll_algo_t)__builtin_ctz(m);
            i++;
        } else if (v && strcmp(a, "--seed") == 0) {
            c.seed = strtoull(v, NULL, 0);
            i++;
        } else if (v && strcmp(a, "--iters") == 0) {
            iters = atoi(v);
            i++;
        } else if (v && strcmp(a, "--min-seconds") == 0) {
            min_seconds = atof(v);
            i++;
        } else {
            usage();
            return EXIT_USAGE;
        }
    }
    if (iters < 1) {
        usage();
        return EXIT_USAGE;
    }
    for (int s = 0; s < nsizes; s++)
        if (sizes[s] * 8 > maxbytes)
            maxbytes = sizes[s] * 8;

    status = incoll_init(&ctx);
    if (status != INCOLL_OK) {
        fprintf(stderr, "allreduce_check: incoll_init: %s (status %d)\n",
                incoll_status_string(status), (int)status);
        return status_exit(status);
    }
    incoll_comm_world(ctx, &c.comm);
    incoll_comm_rank(c.comm, &c.rank);
    incoll_comm_size(c.comm, &c.size);
    sendbuf = malloc(maxbytes ? maxbytes : 1);
    recvbuf = malloc(maxbytes ? maxbytes : 1);
    if (sendbuf == NULL || recvbuf == NULL) {
        fprintf(stderr, "allreduce_check: rank %d: out of memory\n", c.rank);
        ret = EXIT_ERROR;
        goto out;
    }

    t0 = now_s();
    for (;;) {
        uint64_t more;
        case_no = 0;
        for (int dt = 0; dt < INCOLL_DTYPE_COUNT && ret == 0; dt++) {
            if (!(dmask & (1u << dt)))
                continue;
            for (int op = 0; op < INCOLL_OP_COUNT && ret == 0; op++) {
                if (!(omask & (1u << op)) ||
                    !incoll_op_valid((incoll_op_t)op, (incoll_dtype_t)dt))
                    continue;
                for (int s = 0; s < nsizes && ret == 0; s++) {
                    case_no++;
                    for (int it = 0; it < iters && ret == 0; it++)
                        ret = run_case(&c, (incoll_dtype_t)dt, (incoll_op_t)op,
                                       sizes[s], it + rounds * iters, case_no,
                                       sendbuf, recvbuf);
                }
            }
        }
        rounds++;
        ncases = case_no;
        if (ret != 0 || min_seconds <= 0)
            break;
        /* Go around again while any rank wants more time: ranks must agree,
         * and the fabric is how they agree. */
        more = now_s() - t0 < min_seconds;
        status = incoll_allreduce_algo(c.comm, c.algo, INCOLL_IN_PLACE, &more,
                                       1, INCOLL_UINT64, INCOLL_OP_MAX);
        if (status != INCOLL_OK) {
            fprintf(stderr,
                    "allreduce_check: rank %d: round allreduce: %s "
                    "(status %d)\n",
                    c.rank, incoll_status_string(status), (int)status);
            ret = status_exit(status);
            break;
        }
        if (!more)
            break;
    }
    if (ret == 0 && c.rank == 0)
        printf("allreduce_check: %d ranks, %d cases, %d round%s of %d iters, "
               "%llu elements checked by rank 0%s, algo %s, %.2f s: ok\n",
               c.size, ncases, rounds, rounds == 1 ? "" : "s", iters,
               (unsigned long long)c.checked, c.inplace ? " (in place)" : "",
               algo_names[c.algo], now_s() - t0);
out:
    free(sendbuf);
    free(recvbuf);
    status = incoll_finalize(ctx);
    if (status != INCOLL_OK && ret == 0) {
        fprintf(stderr, "allreduce_check: rank %d: incoll_finalize: %s\n",
                c.rank, incoll_status_string(status));
        ret = EXIT_ERROR;
    }
    return ret;
}
