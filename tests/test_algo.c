/*
 * Unit tests of the host-based allreduce schedules (src/core/algo.c).
 *
 * A small interpreter runs the schedules of all ranks in memory, step by
 * step in lock-step rounds: in round i every rank's send is captured from
 * its working buffer first, then every receive is matched with the peer's
 * send of the same round (same peer pair, same block) and applied. A send
 * nobody receives, a receive nobody sends, a block mismatch or schedules of
 * different lengths fail the test. Then the results are checked: exact for
 * integers (each rank's contribution counted exactly once), bitwise
 * identical on every rank and close to a reference for floating types.
 */
#include "test.h"

#include "common/dtype.h"
#include "core/algo.h"

#include <math.h>
#include <stdint.h>

static const algo_kind_t kinds[] = {ALGO_RD, ALGO_RING, ALGO_RABENSEIFNER};

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct {
    int size;
    algo_kind_t kind;
    size_t count;
    incoll_dtype_t dtype;
    incoll_op_t op;
    size_t dsize;
    int nsteps;
    algo_step_t **steps; /* per rank */
    uint8_t **work;      /* per rank, count * dsize */
    uint8_t **msg;       /* per rank: the block it sends this round */
    uint8_t *tmp;
    int nonempty_steps; /* steps with a send, over all ranks */
} interp_t;

static void interp_free(interp_t *it)
{
    for (int r = 0; r < it->size; r++) {
        if (it->steps)
            free(it->steps[r]);
        if (it->work)
            free(it->work[r]);
        if (it->msg)
            free(it->msg[r]);
    }
    free(it->steps);
    free(it->work);
    free(it->msg);
    free(it->tmp);
}

/* Applies a received block as the engine does: reduce_n's dst may alias
 * only src[0], so a left-operand block is folded into a temporary first. */
static void apply_block(const interp_t *it, uint8_t *dst, const uint8_t *in,
                        const algo_step_t *st)
{
    size_t bytes = st->recv_count * it->dsize;
    if (!st->recv_reduce) {
        memcpy(dst, in, bytes);
    } else if (st->recv_left) {
        const void *src[2] = {in, dst};
        reduce_n(it->op, it->dtype, it->tmp, src, 2, st->recv_count);
        memcpy(dst, it->tmp, bytes);
    } else {
        const void *src[2] = {dst, in};
        reduce_n(it->op, it->dtype, dst, src, 2, st->recv_count);
    }
}

static int ranges_overlap(size_t a, size_t na, size_t b, size_t nb)
{
    return na && nb && a < b + nb && b < a + na;
}

/*
 * Builds every rank's schedule, checks their structure, runs them on the
 * inputs init(rank, i) and leaves the results in it->work. Returns 0, or -1
 * after printing what is wrong.
 */
static int interp_run(interp_t *it, int size, algo_kind_t kind, size_t count,
                      incoll_dtype_t dtype, incoll_op_t op,
                      void (*init)(int rank, size_t i, void *elem,
                                   incoll_dtype_t))
{
    int max = algo_max_steps(kind, size);

    memset(it, 0, sizeof(*it));
    it->size = size;
    it->kind = kind;
    it->count = count;
    it->dtype = dtype;
    it->op = op;
    it->dsize = incoll_dtype_size(dtype);
    it->steps = calloc((size_t)size, sizeof(*it->steps));
    it->work = calloc((size_t)size, sizeof(*it->work));
    it->msg = calloc((size_t)size, sizeof(*it->msg));
    it->tmp = malloc(count * it->dsize + 1);
    if (!it->steps || !it->work || !it->msg || !it->tmp)
        return -1;
    it->nsteps = -2;
    for (int r = 0; r < size; r++) {
        int n;
        it->steps[r] = calloc((size_t)max, sizeof(algo_step_t));
        it->work[r] = malloc(count * it->dsize + 1);
        it->msg[r] = malloc(count * it->dsize + 1);
        if (!it->steps[r] || !it->work[r] || !it->msg[r])
            return -1;
        for (size_t i = 0; i < count; i++)
            init(r, i, it->work[r] + i * it->dsize, dtype);
        n = algo_schedule(kind, r, size, count, it->steps[r], max);
        if (n < 0 || n > max) {
            fprintf(stderr,
                    "    %s size %d count %zu rank %d: schedule "
                    "returned %d (max %d)\n",
                    algo_name(kind), size, count, r, n, max);
            return -1;
        }
        if (it->nsteps != -2 && n != it->nsteps) {
            fprintf(stderr,
                    "    %s size %d count %zu: rank %d has %d steps, "
                    "rank 0 has %d\n",
                    algo_name(kind), size, count, r, n, it->nsteps);
            return -1;
        }
        it->nsteps = n;
    }
    for (int s = 0; s < it->nsteps; s++) {
        /* Structure: every send matched by the peer's receive and back. */
        for (int r = 0; r < size; r++) {
            const algo_step_t *st = &it->steps[r][s];
            if (st->send_peer >= 0) {
                const algo_step_t *pt;
                if (st->send_peer >= size || st->send_peer == r ||
                    st->send_count == 0 ||
                    st->send_off + st->send_count > count) {
                    fprintf(stderr,
                            "    %s size %d count %zu rank %d step "
                            "%d: bad send (peer %d, %zu+%zu)\n",
                            algo_name(kind), size, count, r, s, st->send_peer,
                            st->send_off, st->send_count);
                    return -1;
                }
                pt = &it->steps[st->send_peer][s];
                if (pt->recv_peer != r || pt->recv_count != st->send_count) {
                    fprintf(stderr,
                            "    %s size %d count %zu step %d: rank %d "
                            "sends %zu elements to %d, which receives %zu "
                            "from %d (deadlock or mismatch)\n",
                            algo_name(kind), size, count, s, r, st->send_count,
                            st->send_peer, pt->recv_count, pt->recv_peer);
                    return -1;
                }
                if (pt->recv_off != st->send_off) {
                    fprintf(stderr,
                            "    %s size %d count %zu step %d: rank %d "
                            "sends block at %zu, rank %d receives it at %zu\n",
                            algo_name(kind), size, count, s, r, st->send_off,
                            st->send_peer, pt->recv_off);
                    return -1;
                }
                it->nonempty_steps++;
            } else if (st->send_count != 0 && st->send_peer != -1) {
                return -1;
            }
            if (st->recv_peer >= 0) {
                const algo_step_t *pt;
                if (st->recv_peer >= size || st->recv_peer == r ||
                    st->recv_count == 0 ||
                    st->recv_off + st->recv_count > count) {
                    fprintf(stderr,
                            "    %s size %d count %zu rank %d step "
                            "%d: bad receive (peer %d, %zu+%zu)\n",
                            algo_name(kind), size, count, r, s, st->recv_peer,
                            st->recv_off, st->recv_count);
                    return -1;
                }
                pt = &it->steps[st->recv_peer][s];
                if (pt->send_peer != r) {
                    fprintf(stderr,
                            "    %s size %d count %zu step %d: rank %d "
                            "waits for %d, which sends to %d (deadlock)\n",
                            algo_name(kind), size, count, s, r, st->recv_peer,
                            pt->send_peer);
                    return -1;
                }
                if (!st->recv_reduce &&
                    ranges_overlap(st->recv_off, st->recv_count, st->send_off,
                                   st->send_peer >= 0 ? st->send_count : 0)) {
                    fprintf(stderr,
                            "    %s size %d count %zu rank %d step %d: "
                            "copy block overlaps the send block\n",
                            algo_name(kind), size, count, r, s);
                    return -1;
                }
                if (st->recv_reduce && st->recv_peer != st->send_peer &&
                    kind != ALGO_RING && st->send_peer >= 0) {
                    /* Only the ring sends and receives to different peers. */
                    fprintf(stderr,
                            "    %s rank %d step %d: reduce from %d "
                            "but send to %d\n",
                            algo_name(kind), r, s, st->recv_peer,
                            st->send_peer);
                    return -1;
                }
            }
        }
        /* Execution: capture all sends, then apply all receives. */
        for (int r = 0; r < size; r++) {
            const algo_step_t *st = &it->steps[r][s];
            if (st->send_peer >= 0)
                memcpy(it->msg[r], it->work[r] + st->send_off * it->dsize,
                       st->send_count * it->dsize);
        }
        for (int r = 0; r < size; r++) {
            const algo_step_t *st = &it->steps[r][s];
            if (st->recv_peer >= 0)
                apply_block(it, it->work[r] + st->recv_off * it->dsize,
                            it->msg[st->recv_peer], st);
        }
    }
    return 0;
}

/* ---- inputs ---- */

static void init_bits(int rank, size_t i, void *elem, incoll_dtype_t dt)
{
    /* Rank r contributes bit r (rotated by the element index): the sum has
     * every bit of the ranks exactly once. */
    int64_t v = (int64_t)1 << ((rank + (int)(i % 7)) % 62);
    (void)dt;
    memcpy(elem, &v, sizeof(v));
}

static void init_hash(int rank, size_t i, void *elem, incoll_dtype_t dt)
{
    uint64_t v = mix64(((uint64_t)rank << 32) ^ i);
    (void)dt;
    memcpy(elem, &v, sizeof(v));
}

static double float_val(int rank, size_t i)
{
    uint64_t h = mix64(((uint64_t)rank << 32) ^ i ^ 0x5555);
    return ((double)(h >> 11) * 0x1.0p-53 - 0.5) * 1000.0;
}

static void init_float(int rank, size_t i, void *elem, incoll_dtype_t dt)
{
    double d = float_val(rank, i);
    if (dt == INCOLL_FLOAT32) {
        float f = (float)d;
        memcpy(elem, &f, sizeof(f));
    } else {
        memcpy(elem, &d, sizeof(d));
    }
}

/* Products of values near 1, so they neither overflow nor vanish. */
static void init_prod(int rank, size_t i, void *elem, incoll_dtype_t dt)
{
    double d = 1.0 + float_val(rank, i) / 10000.0;
    memcpy(elem, &d, sizeof(d));
}

static void init_int32(int rank, size_t i, void *elem, incoll_dtype_t dt)
{
    int32_t v =
        (int32_t)(mix64(((uint64_t)rank << 32) ^ i) & 0x7fffffff) - (1 << 30);
    memcpy(elem, &v, sizeof(v));
}

/* ---- checks ---- */

static int check_all_equal(const interp_t *it, const char *what)
{
    for (int r = 1; r < it->size; r++)
        if (memcmp(it->work[r], it->work[0], it->count * it->dsize) != 0) {
            fprintf(stderr,
                    "    %s %s size %d count %zu: rank %d differs "
                    "from rank 0\n",
                    algo_name(it->kind), what, it->size, it->count, r);
            return -1;
        }
    return 0;
}

static int run_int_sum(algo_kind_t kind, int size, size_t count)
{
    interp_t it;
    int ret = -1;

    /* Exact bit-per-rank sums while the ranks fit in 62 bits. */
    if (size <= 62) {
        if (interp_run(&it, size, kind, count, INCOLL_INT64, INCOLL_OP_SUM,
                       init_bits) != 0)
            goto out;
        for (int r = 0; r < size; r++)
            for (size_t i = 0; i < count; i++) {
                int64_t got, want = 0;
                for (int q = 0; q < size; q++)
                    want += (int64_t)1 << ((q + (int)(i % 7)) % 62);
                memcpy(&got, it.work[r] + i * 8, 8);
                if (got != want) {
                    fprintf(stderr,
                            "    %s int64 sum size %d count %zu rank "
                            "%d elem %zu: got %#llx want %#llx\n",
                            algo_name(kind), size, count, r, i,
                            (unsigned long long)got, (unsigned long long)want);
                    goto out;
                }
            }
        interp_free(&it);
    }
    /* Hashed values: a missing or doubled contribution changes the sum. */
    if (interp_run(&it, size, kind, count, INCOLL_UINT64, INCOLL_OP_SUM,
                   init_hash) != 0)
        goto out;
    for (size_t i = 0; i < count; i++) {
        uint64_t want = 0;
        for (int q = 0; q < size; q++)
            want += mix64(((uint64_t)q << 32) ^ i);
        for (int r = 0; r < size; r++) {
            uint64_t got;
            memcpy(&got, it.work[r] + i * 8, 8);
            if (got != want) {
                fprintf(stderr,
                        "    %s uint64 sum size %d count %zu rank %d "
                        "elem %zu: wrong\n",
                        algo_name(kind), size, count, r, i);
                goto out;
            }
        }
    }
    ret = 0;
out:
    interp_free(&it);
    return ret;
}

static int run_float(algo_kind_t kind, int size, size_t count,
                     incoll_dtype_t dtype, incoll_op_t op)
{
    interp_t it;
    int ret = -1;

    if (interp_run(&it, size, kind, count, dtype, op,
                   op == INCOLL_OP_PROD ? init_prod : init_float) != 0)
        goto out;
    if (check_all_equal(&it, incoll_dtype_name(dtype)) != 0)
        goto out;
    for (size_t i = 0; i < count; i++) {
        double want = op == INCOLL_OP_PROD ? 1.0 : 0.0, got, tol;
        for (int q = 0; q < size; q++) {
            double v = op == INCOLL_OP_PROD ? 1.0 + float_val(q, i) / 10000.0
                                            : float_val(q, i);
            if (dtype == INCOLL_FLOAT32)
                v = (float)v;
            if (op == INCOLL_OP_PROD)
                want *= v;
            else if (op == INCOLL_OP_MAX)
                want = q == 0 || v > want ? v : want;
            else
                want += v;
        }
        if (dtype == INCOLL_FLOAT32) {
            float f;
            memcpy(&f, it.work[0] + i * 4, 4);
            got = f;
            tol = op == INCOLL_OP_MAX ? 0 : 1e-5 * 500.0 * size;
        } else {
            memcpy(&got, it.work[0] + i * 8, 8);
            tol = op == INCOLL_OP_MAX ? 0 : 1e-12 * 500.0 * size;
        }
        if (op == INCOLL_OP_PROD)
            tol = (dtype == INCOLL_FLOAT32 ? 1e-6 : 1e-14) * size * 4;
        if (fabs(got - want) > tol) {
            fprintf(stderr,
                    "    %s %s %s size %d count %zu elem %zu: got %.17g "
                    "want %.17g\n",
                    algo_name(kind), incoll_dtype_name(dtype),
                    incoll_op_name(op), size, count, i, got, want);
            goto out;
        }
    }
    ret = 0;
out:
    interp_free(&it);
    return ret;
}

static int run_int_max(algo_kind_t kind, int size, size_t count)
{
    interp_t it;
    int ret = -1;
    if (interp_run(&it, size, kind, count, INCOLL_INT32, INCOLL_OP_MAX,
                   init_int32) != 0)
        goto out;
    for (size_t i = 0; i < count; i++) {
        int32_t want = INT32_MIN;
        for (int q = 0; q < size; q++) {
            int32_t v;
            init_int32(q, i, &v, INCOLL_INT32);
            if (v > want)
                want = v;
        }
        for (int r = 0; r < size; r++) {
            int32_t got;
            memcpy(&got, it.work[r] + i * 4, 4);
            if (got != want) {
                fprintf(stderr,
                        "    %s int32 max size %d count %zu rank %d "
                        "elem %zu: %d != %d\n",
                        algo_name(kind), size, count, r, i, got, want);
                goto out;
            }
        }
    }
    ret = 0;
out:
    interp_free(&it);
    return ret;
}

static int counts_for(int size, size_t *counts)
{
    size_t c[] = {1,
                  2,
                  7,
                  (size_t)size > 1 ? (size_t)size - 1 : 3,
                  (size_t)size,
                  (size_t)size + 1,
                  (size_t)2 * size + 3,
                  1000,
                  1001};
    memcpy(counts, c, sizeof(c));
    return (int)(sizeof(c) / sizeof(c[0]));
}

static int sizes_for(int *sizes)
{
    int n = 0;
    for (int s = 1; s <= 33; s++)
        sizes[n++] = s;
    sizes[n++] = 64;
    sizes[n++] = 100;
    return n;
}

TEST(algo_names, TEST_UNIT)
{
    CHECK(strcmp(algo_name(ALGO_RD), "rd") == 0);
    CHECK(strcmp(algo_name(ALGO_RING), "ring") == 0);
    CHECK(strcmp(algo_name(ALGO_RABENSEIFNER), "rabenseifner") == 0);
    CHECK(strcmp(algo_name(ALGO_INC), "inc") == 0);
    CHECK_EQ_INT(algo_parse("ring"), ALGO_RING);
    CHECK_EQ_INT(algo_parse("rd"), ALGO_RD);
    CHECK_EQ_INT(algo_parse("rabenseifner"), ALGO_RABENSEIFNER);
    CHECK_EQ_INT(algo_parse("bogus"), -1);
    CHECK_EQ_INT(algo_parse(NULL), -1);
    /* Short vectors: recursive doubling; long: Rabenseifner on a power of
     * two, the ring otherwise. */
    CHECK_EQ_INT(algo_pick(8, 16, 4), ALGO_RD);
    CHECK_EQ_INT(algo_pick(100, 50, 8), ALGO_RD);
    CHECK_EQ_INT(algo_pick(8, 1 << 20, 4), ALGO_RABENSEIFNER);
    CHECK_EQ_INT(algo_pick(6, 1 << 20, 4), ALGO_RING);
    CHECK_EQ_INT(algo_pick(2, 1 << 20, 4), ALGO_RD);
    return TEST_PASSED;
}

TEST(algo_schedule_edges, TEST_UNIT)
{
    algo_step_t st[64];
    /* One rank or nothing to reduce: no steps. */
    for (int k = 0; k < 3; k++) {
        CHECK_EQ_INT(algo_schedule(kinds[k], 0, 1, 100, st, 64), 0);
        CHECK_EQ_INT(algo_schedule(kinds[k], 3, 8, 0, st, 64), 0);
        CHECK(algo_max_steps(kinds[k], 1) >= 1);
        /* Bad arguments. */
        CHECK_EQ_INT(algo_schedule(kinds[k], 8, 8, 10, st, 64), -1);
        CHECK_EQ_INT(algo_schedule(kinds[k], -1, 8, 10, st, 64), -1);
        CHECK_EQ_INT(algo_schedule(kinds[k], 0, 8, 10, st, 1), -1);
    }
    CHECK_EQ_INT(algo_schedule(ALGO_INC, 0, 8, 10, st, 64), -1);
    /* Step counts: RD log2(p) (+2 when p is not a power of two), ring
     * 2(p-1), Rabenseifner 2 log2(p) (+2). */
    CHECK_EQ_INT(algo_schedule(ALGO_RD, 0, 8, 10, st, 64), 3);
    CHECK_EQ_INT(algo_schedule(ALGO_RD, 0, 6, 10, st, 64), 4);
    CHECK_EQ_INT(algo_schedule(ALGO_RING, 2, 6, 10, st, 64), 10);
    CHECK_EQ_INT(algo_schedule(ALGO_RABENSEIFNER, 1, 8, 10, st, 64), 6);
    CHECK_EQ_INT(algo_schedule(ALGO_RABENSEIFNER, 1, 5, 10, st, 64), 6);
    /* RD with 3 ranks: rank 0 folds into rank 1, waits, gets the result. */
    CHECK_EQ_INT(algo_schedule(ALGO_RD, 0, 3, 10, st, 64), 3);
    CHECK_EQ_INT(st[0].send_peer, 1);
    CHECK_EQ_INT(st[0].recv_peer, -1);
    CHECK_EQ_INT(st[1].send_peer, -1);
    CHECK_EQ_INT(st[1].recv_peer, -1);
    CHECK_EQ_INT(st[2].recv_peer, 1);
    CHECK_EQ_INT(st[2].recv_reduce, 0);
    CHECK_EQ_INT(algo_schedule(ALGO_RD, 1, 3, 10, st, 64), 3);
    CHECK_EQ_INT(st[0].recv_peer, 0);
    CHECK_EQ_INT(st[0].recv_reduce, 1);
    CHECK_EQ_INT(st[0].recv_left, 1);
    CHECK_EQ_INT(st[1].send_peer, 2);
    CHECK_EQ_INT(st[1].recv_left, 0);
    CHECK_EQ_INT(st[2].send_peer, 0);
    /* Ring with fewer elements than ranks: empty blocks are not sent. */
    CHECK_EQ_INT(algo_schedule(ALGO_RING, 0, 4, 2, st, 64), 6);
    {
        int sends = 0;
        for (int i = 0; i < 6; i++) {
            if (st[i].send_peer >= 0)
                sends++;
            CHECK(st[i].send_peer < 0 || st[i].send_count > 0);
            CHECK(st[i].recv_peer < 0 || st[i].recv_count > 0);
        }
        CHECK(sends < 6);
    }
    return TEST_PASSED;
}

TEST(algo_int_sum_exact, TEST_UNIT)
{
    int sizes[64], ns = sizes_for(sizes);
    for (int k = 0; k < 3; k++)
        for (int si = 0; si < ns; si++) {
            size_t counts[16];
            int nc = counts_for(sizes[si], counts);
            for (int ci = 0; ci < nc; ci++)
                CHECK_MSG(run_int_sum(kinds[k], sizes[si], counts[ci]) == 0,
                          "%s size %d count %zu", algo_name(kinds[k]),
                          sizes[si], counts[ci]);
        }
    return TEST_PASSED;
}

TEST(algo_float_identical, TEST_UNIT)
{
    int sizes[64], ns = sizes_for(sizes);
    static const incoll_dtype_t dts[] = {INCOLL_FLOAT32, INCOLL_FLOAT64};
    for (int k = 0; k < 3; k++)
        for (int si = 0; si < ns; si++) {
            size_t counts[16];
            int nc = counts_for(sizes[si], counts);
            for (int ci = 0; ci < nc; ci++)
                for (int d = 0; d < 2; d++)
                    CHECK_MSG(run_float(kinds[k], sizes[si], counts[ci], dts[d],
                                        INCOLL_OP_SUM) == 0,
                              "%s size %d count %zu", algo_name(kinds[k]),
                              sizes[si], counts[ci]);
        }
    return TEST_PASSED;
}

TEST(algo_max_prod, TEST_UNIT)
{
    int sizes[] = {2, 3, 5, 8, 13, 16, 31, 33, 64, 100};
    for (int k = 0; k < 3; k++)
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
            size_t counts[16];
            int nc = counts_for(sizes[si], counts);
            for (int ci = 0; ci < nc; ci++) {
                CHECK(run_int_max(kinds[k], sizes[si], counts[ci]) == 0);
                CHECK(run_float(kinds[k], sizes[si], counts[ci], INCOLL_FLOAT64,
                                INCOLL_OP_PROD) == 0);
                CHECK(run_float(kinds[k], sizes[si], counts[ci], INCOLL_FLOAT32,
                                INCOLL_OP_MAX) == 0);
            }
        }
    return TEST_PASSED;
}

/* Signed zeros and NaNs make max and sum order-sensitive: whatever comes
 * out, every rank must hold the same bits. */
static void init_tricky(int rank, size_t i, void *elem, incoll_dtype_t dt)
{
    double d;
    switch ((rank * 7 + (int)i) % 5) {
    case 0:
        d = 0.0;
        break;
    case 1:
        d = -0.0;
        break;
    case 2:
        d = rank % 3 == 0 ? NAN : 1.0;
        break;
    case 3:
        d = -(double)rank;
        break;
    default:
        d = 1e300 * (rank % 2 ? 1 : -1);
        break;
    }
    memcpy(elem, &d, sizeof(d));
}

TEST(algo_order_sensitive_identical, TEST_UNIT)
{
    int sizes[] = {2, 3, 6, 7, 12, 17};
    static const incoll_op_t ops[] = {INCOLL_OP_MAX, INCOLL_OP_MIN,
                                      INCOLL_OP_SUM};
    for (int k = 0; k < 3; k++)
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
            for (int o = 0; o < 3; o++) {
                interp_t it;
                int ok = interp_run(&it, sizes[si], kinds[k], 50,
                                    INCOLL_FLOAT64, ops[o], init_tricky) == 0 &&
                         check_all_equal(&it, incoll_op_name(ops[o])) == 0;
                interp_free(&it);
                CHECK_MSG(ok, "%s size %d op %s", algo_name(kinds[k]),
                          sizes[si], incoll_op_name(ops[o]));
            }
    return TEST_PASSED;
}

/* The ring moves each element 2(p-1)/p times the vector, recursive
 * doubling log2(p) times, Rabenseifner about twice: check the volume so a
 * schedule that sends whole vectors where it should send blocks fails. */
TEST(algo_volume, TEST_UNIT)
{
    size_t count = 1200;
    for (int k = 0; k < 3; k++) {
        int size = 8, max = algo_max_steps(kinds[k], size);
        algo_step_t *st = calloc((size_t)max, sizeof(*st));
        size_t sent = 0;
        int n;
        CHECK(st != NULL);
        n = algo_schedule(kinds[k], 3, size, count, st, max);
        for (int i = 0; i < n; i++)
            if (st[i].send_peer >= 0)
                sent += st[i].send_count;
        free(st);
        if (kinds[k] == ALGO_RD)
            CHECK_EQ_INT(sent, 3 * count);
        else
            CHECK_EQ_INT(sent, 2 * count * 7 / 8);
    }
    return TEST_PASSED;
}

/* ---- the other collectives (algo_coll_schedule) ---- */

/*
 * Runs algorithm id over size ranks with root in lock-step rounds as above
 * on uint64 elements (count per block), after laying out each rank's
 * working buffer as algo.h says, and checks each rank's result against a
 * reference: every rank's data where it belongs, sums exact. Returns 0 or
 * -1 after printing what is wrong.
 */
static uint64_t cval(int rank, size_t i)
{
    return mix64(((uint64_t)rank << 40) ^ i ^ 0x5151);
}

static int coll_run(algo_calgo_t id, int size, int root, size_t count,
                    size_t seg)
{
    const algo_calgo_info_t *info = algo_calgo_info(id);
    size_t wc = algo_coll_work_count(id, size, count);
    int max = algo_coll_max_steps(id, size, count, seg), nsteps = -2, ret = -1;
    algo_step_t **steps = calloc((size_t)size, sizeof(*steps));
    uint64_t **work = calloc((size_t)size, sizeof(*work));
    uint64_t **msg = calloc((size_t)size, sizeof(*msg));
    uint64_t *tmp = malloc((wc + 1) * 8);

    if (!steps || !work || !msg || !tmp)
        goto out;
    for (int r = 0; r < size; r++) {
        int vr = (r - root + size) % size, n;
        steps[r] = calloc((size_t)max, sizeof(algo_step_t));
        work[r] = calloc(wc + 1, 8);
        msg[r] = calloc(wc + 1, 8);
        if (!steps[r] || !work[r] || !msg[r])
            goto out;
        for (size_t i = 0; i < wc; i++)
            work[r][i] = 0xdeadull; /* garbage where nothing is known */
        switch (info->coll) {
        case ALGO_COLL_BCAST:
            for (size_t i = 0; r == root && i < count; i++)
                work[r][i] = cval(root, i);
            break;
        case ALGO_COLL_REDUCE:
            for (size_t i = 0; i < count; i++)
                work[r][i] = cval(r, i);
            break;
        case ALGO_COLL_BARRIER:
            work[r][0] = 1;
            break;
        case ALGO_COLL_ALLGATHER: {
            size_t at = algo_coll_rotated(id) ? 0 : (size_t)r;
            for (size_t i = 0; i < count; i++)
                work[r][at * count + i] = cval(r, i);
            break;
        }
        case ALGO_COLL_GATHER:
            for (size_t i = 0; i < count; i++)
                work[r][(size_t)vr * count + i] = cval(r, i);
            break;
        case ALGO_COLL_SCATTER:
            for (int j = 0; r == root && j < size; j++)
                for (size_t i = 0; i < count; i++)
                    work[r][(size_t)j * count + i] = cval((root + j) % size, i);
            break;
        default:
            for (size_t i = 0; i < wc; i++)
                work[r][i] = cval(r, i);
        }
        n = algo_coll_schedule(id, r, size, root, count, seg, steps[r], max);
        if (n < 0 || n > max || (nsteps != -2 && n != nsteps)) {
            fprintf(stderr,
                    "    %s/%s size %d rank %d: %d steps (max %d, "
                    "others %d)\n",
                    algo_coll_name(info->coll), info->name, size, r, n, max,
                    nsteps);
            goto out;
        }
        nsteps = n;
    }
    for (int i = 0; i < nsteps; i++) {
        for (int r = 0; r < size; r++) {
            const algo_step_t *st = &steps[r][i];
            if (st->send_peer >= 0) {
                if (st->send_count == 0 || st->send_off + st->send_count > wc ||
                    st->send_peer == r)
                    goto bad;
                memcpy(msg[r], work[r] + st->send_off, st->send_count * 8);
            }
        }
        for (int r = 0; r < size; r++) {
            const algo_step_t *st = &steps[r][i], *ps;
            if (st->recv_peer < 0)
                continue;
            ps = &steps[st->recv_peer][i];
            if (ps->send_peer != r || ps->send_count != st->recv_count ||
                st->recv_off + st->recv_count > wc ||
                (!st->recv_reduce && st->send_peer >= 0 &&
                 ranges_overlap(st->send_off, st->send_count, st->recv_off,
                                st->recv_count)))
                goto bad;
            if (!st->recv_reduce) {
                memcpy(work[r] + st->recv_off, msg[st->recv_peer],
                       st->recv_count * 8);
            } else {
                for (size_t k = 0; k < st->recv_count; k++)
                    work[r][st->recv_off + k] += msg[st->recv_peer][k];
            }
        }
        for (int r = 0; r < size; r++) {
            const algo_step_t *st = &steps[r][i];
            if (st->send_peer >= 0 && steps[st->send_peer][i].recv_peer != r)
                goto bad; /* a send nobody receives */
        }
    }
    for (int r = 0; r < size; r++) {
        int vr = (r - root + size) % size;
        for (size_t i = 0;
             i < count || (info->coll == ALGO_COLL_BARRIER && i < 1); i++) {
            uint64_t want = 0, got = 0;
            switch (info->coll) {
            case ALGO_COLL_BCAST:
                want = cval(root, i);
                got = work[r][i];
                break;
            case ALGO_COLL_REDUCE:
                if (r != root)
                    continue;
                for (int q = 0; q < size; q++)
                    want += cval(q, i);
                got = work[r][i];
                break;
            case ALGO_COLL_BARRIER:
                /* Heard from someone in every round (checked by the
                 * matching above); the token came in. */
                want = 1;
                got = size == 1 ? 1 : work[r][1];
                break;
            case ALGO_COLL_ALLGATHER:
                for (int q = 0; q < size; q++) {
                    size_t at = algo_coll_rotated(id)
                                    ? (size_t)((q - r + size) % size)
                                    : (size_t)q;
                    if (work[r][at * count + i] != cval(q, i)) {
                        fprintf(stderr,
                                "    allgather/%s size %d rank %d: "
                                "block of rank %d element %zu wrong\n",
                                info->name, size, r, q, i);
                        goto out;
                    }
                }
                continue;
            case ALGO_COLL_GATHER:
                if (r != root)
                    continue;
                for (int j = 0; j < size; j++)
                    if (work[r][(size_t)j * count + i] !=
                        cval((root + j) % size, i)) {
                        fprintf(stderr,
                                "    gather size %d root %d: block "
                                "%d element %zu wrong\n",
                                size, root, j, i);
                        goto out;
                    }
                continue;
            case ALGO_COLL_SCATTER:
                want = cval(r, i);
                got = work[r][(size_t)vr * count + i];
                break;
            default:
                for (int q = 0; q < size; q++)
                    want += cval(q, (size_t)r * count + i);
                got = work[r][(size_t)r * count + i];
            }
            if (got != want) {
                fprintf(stderr,
                        "    %s/%s size %d root %d count %zu: rank %d "
                        "element %zu wrong\n",
                        algo_coll_name(info->coll), info->name, size, root,
                        count, r, i);
                goto out;
            }
        }
    }
    ret = 0;
    goto out;
bad:
    fprintf(stderr,
            "    %s/%s size %d root %d count %zu: unmatched or bad "
            "step\n",
            algo_coll_name(info->coll), info->name, size, root, count);
out:
    for (int r = 0; r < size; r++) {
        if (steps)
            free(steps[r]);
        if (work)
            free(work[r]);
        if (msg)
            free(msg[r]);
    }
    free(steps);
    free(work);
    free(msg);
    free(tmp);
    return ret;
}

TEST(algo_coll_names, TEST_UNIT)
{
    for (int c = 0; c < ALGO_COLL_NCOLLS; c++)
        CHECK_EQ_INT(algo_coll_parse(algo_coll_name((algo_coll_t)c)), c);
    CHECK_EQ_INT(algo_coll_parse("nope"), -1);
    for (int id = 0; id < CALGO_COUNT; id++) {
        const algo_calgo_info_t *in = algo_calgo_info((algo_calgo_t)id);
        CHECK(in != NULL && in->id == (algo_calgo_t)id && in->desc[0]);
        CHECK_EQ_INT(algo_calgo_parse(in->coll, in->name), id);
    }
    CHECK(algo_calgo_info(CALGO_COUNT) == NULL);
    CHECK_EQ_INT(algo_calgo_parse(ALGO_COLL_BCAST, "ring"), -1);
    /* Powers of two only where the table says so. */
    CHECK(!algo_calgo_fits(CALGO_ALLGATHER_RD, 6));
    CHECK(algo_calgo_fits(CALGO_ALLGATHER_RD, 8));
    {
        algo_step_t st[8];
        CHECK_EQ_INT(algo_coll_schedule(CALGO_RS_HALVING, 0, 6, 0, 4, 0, st, 8),
                     -1);
        CHECK_EQ_INT(
            algo_coll_schedule(CALGO_BCAST_BINOMIAL, 0, 6, 6, 4, 0, st, 8),
            -1); /* root out of range */
        CHECK_EQ_INT(
            algo_coll_schedule(CALGO_BCAST_BINOMIAL, 0, 6, 0, 4, 0, st, 1),
            -1); /* max too small */
    }
    return TEST_PASSED;
}

/* Every algorithm x sizes 1..17 (and 31, 32) x several roots x counts 0, 1,
 * odd, several segments. */
TEST(algo_coll_all, TEST_UNIT)
{
    int sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 17, 31, 32};
    size_t counts[] = {0, 1, 3, 17, 100};
    int runs = 0;
    for (int id = 0; id < CALGO_COUNT; id++)
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
            int size = sizes[si];
            int roots[3] = {0, size - 1, size / 2};
            if (!algo_calgo_fits((algo_calgo_t)id, size))
                continue;
            for (int ri = 0; ri < 3; ri++)
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]);
                     ci++)
                    for (size_t seg = 0; seg <= 7; seg += 7) {
                        CHECK_MSG(coll_run((algo_calgo_t)id, size, roots[ri],
                                           counts[ci], seg) == 0,
                                  "id %d size %d", id, size);
                        runs++;
                    }
        }
    CHECK(runs > 1000);
    return TEST_PASSED;
}

/* The default picks fit the size and switch to pipelines for long vectors. */
TEST(algo_coll_pick, TEST_UNIT)
{
    size_t seg;
    for (int c = 0; c < ALGO_COLL_NCOLLS; c++)
        for (int size = 1; size <= 40; size++)
            for (size_t count = 1; count <= (1u << 22); count *= 8) {
                algo_calgo_t id =
                    algo_coll_pick((algo_coll_t)c, size, count, 8, &seg);
                CHECK(algo_calgo_info(id)->coll == (algo_coll_t)c);
                CHECK(algo_calgo_fits(id, size));
            }
    CHECK_EQ_INT(algo_coll_pick(ALGO_COLL_BCAST, 16, 1 << 20, 1, &seg),
                 CALGO_BCAST_PIPELINE);
    CHECK(seg == ALGO_SEG_BYTES);
    CHECK_EQ_INT(algo_coll_pick(ALGO_COLL_BCAST, 16, 8, 1, &seg),
                 CALGO_BCAST_BINOMIAL);
    CHECK_EQ_INT(algo_coll_pick(ALGO_COLL_REDUCE_SCATTER, 6, 8, 8, &seg),
                 CALGO_RS_RING);
    return TEST_PASSED;
}

/* A barrier's point: no rank leaves before every rank arrived. In the
 * dissemination schedule, what each rank knows (which ranks have arrived)
 * spreads along its receives round by round; at the end every rank must
 * have heard, directly or not, from every other. */
TEST(algo_coll_barrier_complete, TEST_UNIT)
{
    for (int size = 1; size <= 64; size++) {
        int max = algo_coll_max_steps(CALGO_BARRIER_DISSEMINATION, size, 0, 0);
        algo_step_t *st = calloc((size_t)size * (size_t)max, sizeof(*st));
        uint64_t known[64], prev[64];
        int n = 0;
        CHECK(st != NULL);
        for (int r = 0; r < size; r++) {
            n = algo_coll_schedule(CALGO_BARRIER_DISSEMINATION, r, size, 0, 0,
                                   0, st + (size_t)r * (size_t)max, max);
            CHECK(n >= 0);
            known[r] = 1ull << r;
        }
        for (int i = 0; i < n; i++) {
            memcpy(prev, known, sizeof(known));
            for (int r = 0; r < size; r++) {
                const algo_step_t *s = &st[(size_t)r * (size_t)max + (size_t)i];
                if (s->recv_peer >= 0)
                    known[r] |= prev[s->recv_peer];
            }
        }
        for (int r = 0; r < size; r++)
            CHECK_MSG(known[r] == (size == 64 ? ~0ull : (1ull << size) - 1),
                      "size %d rank %d", size, r);
        free(st);
    }
    return TEST_PASSED;
}
