/*
 * hier_check: an incoll program for the node and socket levels (run under
 * `incoll run --ppn K`, rank r on host r/K). Public API, and host_counters_read
 * (src/host/counters.h) for --kill.
 *
 *   hier_check [--ppn K] [--count N] [--iters N] [--kill RANK:ITER]
 *
 *  1. float32 sums of pseudo-random inputs on the world: every rank must
 *     hold the same bits (MIN and MAX of a hash of the result agree), the
 *     sum must be within rounding of the sum in double, and rank 0 prints
 *     the hash ("hier_check: hash H") so that two runs can be compared:
 *     the order of the reduction is fixed.
 *  2. A split into ranks with r % K < 2 (2 of each host's K ranks) and the
 *     others, each with its own leader per host: exact int64 sums and
 *     maxima against the reference, on the part and on the world in turn.
 *  3. --iters allreduces on the world; with --kill, rank RANK kills itself
 *     (SIGKILL) before iteration ITER: the others must get an error, which
 *     they report ("hier_check: rank R: error ...") and exit 5. Before
 *     iteration ITER every rank prints the datagrams its socket sent in
 *     the iterations before ("hier_check: rank R: tx T in ITER
 *     iterations", host_counters_read): a leader whose members sent its
 *     packets on its socket (INCOLL_HIER_SHARED) sent fewer than ITER.
 *
 * Exit status: 0 ok, 1 wrong result, 2 usage, 5 an incoll error.
 */
#include "incoll.h"

#include "host/counters.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { EXIT_WRONG = 1, EXIT_USAGE = 2, EXIT_ERROR = 5 };

static int rank_g;
static double t0;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fail_status(const char *what, incoll_status_t status)
{
    printf("hier_check: rank %d: error in %s after %.1f s: %s\n", rank_g, what,
           now_s() - t0, incoll_status_string(status));
    fflush(stdout);
    exit(EXIT_ERROR);
}

#define CALL(what, expr)                                                       \
    do {                                                                       \
        incoll_status_t st_ = (expr);                                          \
        if (st_ != INCOLL_OK)                                                  \
            fail_status(what, st_);                                            \
    } while (0)

/* A value of (rank, index) in [-1, 1), the same in every run. */
static float input(int rank, size_t i)
{
    uint64_t x = ((uint64_t)rank << 40) ^ (uint64_t)i ^ 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static uint64_t hash_bytes(const void *p, size_t len)
{
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static int check_floats(incoll_comm_h world, int size, size_t count)
{
    float *v = malloc(count * sizeof(float));
    uint64_t h[2];
    int bad = 0;

    for (size_t i = 0; i < count; i++)
        v[i] = input(rank_g, i);
    CALL("float32 sum", incoll_allreduce(world, INCOLL_IN_PLACE, v, count,
                                         INCOLL_FLOAT32, INCOLL_OP_SUM));
    for (size_t i = 0; i < count && !bad; i++) {
        double ref = 0;
        for (int r = 0; r < size; r++)
            ref += input(r, i);
        if (fabs(v[i] - ref) > 1e-4 * size) {
            printf("hier_check: rank %d: float sum [%zu] = %.9g, want %.9g\n",
                   rank_g, i, v[i], ref);
            bad = 1;
        }
    }
    h[0] = h[1] = hash_bytes(v, count * sizeof(float));
    CALL("hash min", incoll_allreduce(world, INCOLL_IN_PLACE, &h[0], 1,
                                      INCOLL_UINT64, INCOLL_OP_MIN));
    CALL("hash max", incoll_allreduce(world, INCOLL_IN_PLACE, &h[1], 1,
                                      INCOLL_UINT64, INCOLL_OP_MAX));
    if (h[0] != h[1]) {
        printf("hier_check: rank %d: ranks hold different bits\n", rank_g);
        bad = 1;
    }
    if (rank_g == 0)
        printf("hier_check: hash %016llx\n", (unsigned long long)h[0]);
    free(v);
    return bad;
}

/* Exact int64 sum and max over comm, whose members are world ranks
 * r with part(r) == color. */
static int check_part(incoll_comm_h comm, int size, int ppn, int color,
                      size_t count, int round)
{
    int64_t *s = malloc(count * sizeof(int64_t));
    int64_t *m = malloc(count * sizeof(int64_t));
    int bad = 0;

    for (size_t i = 0; i < count; i++) {
        s[i] = (int64_t)(rank_g + 1) * (int64_t)(i + 1 + round);
        m[i] = (int64_t)((rank_g * 7919 + (int)i * 31 + round) % 1000);
    }
    CALL("int64 sum", incoll_allreduce(comm, INCOLL_IN_PLACE, s, count,
                                       INCOLL_INT64, INCOLL_OP_SUM));
    CALL("int64 max", incoll_allreduce(comm, INCOLL_IN_PLACE, m, count,
                                       INCOLL_INT64, INCOLL_OP_MAX));
    for (size_t i = 0; i < count && !bad; i++) {
        int64_t rs = 0, rm = INT64_MIN;
        for (int r = 0; r < size; r++) {
            int64_t mv = (int64_t)((r * 7919 + (int)i * 31 + round) % 1000);
            if (color >= 0 && ((r % ppn) < 2 ? 0 : 1) != color)
                continue;
            rs += (int64_t)(r + 1) * (int64_t)(i + 1 + round);
            rm = mv > rm ? mv : rm;
        }
        if (s[i] != rs || m[i] != rm) {
            printf("hier_check: rank %d: part %d [%zu]: sum %lld max %lld, "
                   "want %lld %lld\n",
                   rank_g, color, i, (long long)s[i], (long long)m[i],
                   (long long)rs, (long long)rm);
            bad = 1;
        }
    }
    free(s);
    free(m);
    return bad;
}

int main(int argc, char **argv)
{
    incoll_ctx_h ctx;
    incoll_comm_h world, part;
    host_counters_t c0;
    int size, ppn = 1, iters = 0, kill_rank = -1, kill_iter = -1, bad = 0;
    size_t count = 100000;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--ppn") == 0 && v)
            ppn = atoi(v);
        else if (strcmp(a, "--count") == 0 && v)
            count = (size_t)strtoull(v, NULL, 10);
        else if (strcmp(a, "--iters") == 0 && v)
            iters = atoi(v);
        else if (strcmp(a, "--kill") == 0 && v &&
                 sscanf(v, "%d:%d", &kill_rank, &kill_iter) == 2)
            ;
        else {
            fprintf(stderr, "usage: hier_check [--ppn K] [--count N] "
                            "[--iters N] [--kill RANK:ITER]\n");
            return EXIT_USAGE;
        }
        i++;
    }
    if (ppn < 1 || count < 1)
        return EXIT_USAGE;
    t0 = now_s();
    CALL("init", incoll_init(&ctx));
    incoll_comm_world(ctx, &world);
    incoll_comm_rank(world, &rank_g);
    incoll_comm_size(world, &size);

    bad |= check_floats(world, size, count);
    CALL("split",
         incoll_comm_split(world, (rank_g % ppn) < 2 ? 0 : 1, rank_g, &part));
    for (int round = 0; round < 2 && !bad; round++) {
        bad |= check_part(part, size, ppn, (rank_g % ppn) < 2 ? 0 : 1,
                          count / 4 + 1, round);
        bad |= check_part(world, size, ppn, -1, 7, round);
    }
    host_counters_read(world, &c0);
    for (int it = 0; it < iters && !bad; it++) {
        int32_t v = 1;
        if (it == kill_iter) {
            host_counters_t c1;
            host_counters_read(world, &c1);
            printf("hier_check: rank %d: tx %llu in %d iterations\n", rank_g,
                   (unsigned long long)(c1.tx_packets - c0.tx_packets), it);
            fflush(stdout);
        }
        if (it == kill_iter && rank_g == kill_rank)
            raise(SIGKILL);
        CALL("iteration", incoll_allreduce(world, INCOLL_IN_PLACE, &v, 1,
                                           INCOLL_INT32, INCOLL_OP_SUM));
        if (v != size) {
            printf("hier_check: rank %d: iteration %d: %d, want %d\n", rank_g,
                   it, v, size);
            bad = 1;
        }
    }
    incoll_comm_destroy(part);
    incoll_finalize(ctx);
    if (bad)
        return EXIT_WRONG;
    if (rank_g == 0)
        printf("hier_check: ok\n");
    return 0;
}
