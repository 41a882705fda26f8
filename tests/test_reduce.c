/*
 * Unit tests for the datatypes and the reduction kernels: every valid
 * (op, dtype) against a reference written here from the definitions, every
 * kernel variant the CPU has against the scalar loops bit for bit, edge
 * values, in-place reduction, and the float16/bfloat16 conversions.
 */
#include "test.h"

#include "common/dtype.h"
#include "common/log.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

/* Defined in src/common/reduce.c; not yet declared in common/dtype.h. */

/* The variants src/common/reduce.c compiles on this architecture (its
 * REDUCE_X86 test): a name missing here would never be tried. Each has a
 * test of its own (reduce_variant_*), which says SKIP when the CPU lacks
 * the instructions. */
#if defined(__x86_64__) || defined(__i386__)
static const char *const all_impls[] = {"avx512", "avx2", "sse2", "scalar"};
#else
static const char *const all_impls[] = {"vec128", "scalar"};
#endif
#define NIMPLS (int)(sizeof(all_impls) / sizeof(all_impls[0]))

/* ------------------------------------------------------------------------
 * Helpers: a fixed-seed generator, and element access through a canonical
 * 64-bit form so one reference serves every integer width. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static int is_int(incoll_dtype_t dt)
{
    return dt <= INCOLL_UINT64;
}
static int is_signed_int(incoll_dtype_t dt)
{
    return dt <= INCOLL_INT64;
}
static int int_bits(incoll_dtype_t dt)
{
    return (int)incoll_dtype_size(dt) * 8;
}

/* Reads element i as a sign- or zero-extended 64-bit value. */
static uint64_t get_int(incoll_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case INCOLL_INT8:
        return (uint64_t)(int64_t)((const int8_t *)buf)[i];
    case INCOLL_INT16:
        return (uint64_t)(int64_t)((const int16_t *)buf)[i];
    case INCOLL_INT32:
        return (uint64_t)(int64_t)((const int32_t *)buf)[i];
    case INCOLL_INT64:
        return (uint64_t)((const int64_t *)buf)[i];
    case INCOLL_UINT8:
        return ((const uint8_t *)buf)[i];
    case INCOLL_UINT16:
        return ((const uint16_t *)buf)[i];
    case INCOLL_UINT32:
        return ((const uint32_t *)buf)[i];
    default:
        return ((const uint64_t *)buf)[i];
    }
}

/* Truncates v to the width of dt and extends it back to canonical form. */
static uint64_t canon_int(incoll_dtype_t dt, uint64_t v)
{
    int bits = int_bits(dt);
    if (bits == 64)
        return v;
    v &= (1ull << bits) - 1;
    if (is_signed_int(dt) && (v >> (bits - 1)))
        v |= ~0ull << bits;
    return v;
}

static void put_int(incoll_dtype_t dt, void *buf, size_t i, uint64_t v)
{
    size_t sz = incoll_dtype_size(dt);
    /* Little-endian: the low bytes of v are the element. */
    memcpy((char *)buf + i * sz, &v, sz);
}

static float get_f(incoll_dtype_t dt, const void *buf, size_t i)
{
    if (dt == INCOLL_FLOAT16)
        return dtype_half_to_float(((const uint16_t *)buf)[i]);
    if (dt == INCOLL_BFLOAT16)
        return dtype_bf16_to_float(((const uint16_t *)buf)[i]);
    return ((const float *)buf)[i];
}

/* The reference semantics, straight from the definitions in dtype.h. */
static uint64_t ref_int(incoll_dtype_t dt, incoll_op_t op, uint64_t a,
                        uint64_t b)
{
    int sgn = is_signed_int(dt);
    int less = sgn ? (int64_t)b < (int64_t)a : b < a;
    int more = sgn ? (int64_t)b > (int64_t)a : b > a;
    switch (op) {
    case INCOLL_OP_SUM:
        return canon_int(dt, a + b);
    case INCOLL_OP_PROD:
        return canon_int(dt, a * b);
    case INCOLL_OP_MIN:
        return less ? b : a;
    case INCOLL_OP_MAX:
        return more ? b : a;
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
    default:
        return a ^ b;
    }
}

static float ref_f32(incoll_op_t op, float a, float b)
{
    switch (op) {
    case INCOLL_OP_SUM:
        return a + b;
    case INCOLL_OP_PROD:
        return a * b;
    case INCOLL_OP_MIN:
        return b < a ? b : a;
    case INCOLL_OP_MAX:
        return b > a ? b : a;
    case INCOLL_OP_LAND:
        return (a != 0.0f && b != 0.0f) ? 1.0f : 0.0f;
    case INCOLL_OP_LOR:
        return (a != 0.0f || b != 0.0f) ? 1.0f : 0.0f;
    default:
        return ((a != 0.0f) != (b != 0.0f)) ? 1.0f : 0.0f;
    }
}

static double ref_f64(incoll_op_t op, double a, double b)
{
    switch (op) {
    case INCOLL_OP_SUM:
        return a + b;
    case INCOLL_OP_PROD:
        return a * b;
    case INCOLL_OP_MIN:
        return b < a ? b : a;
    case INCOLL_OP_MAX:
        return b > a ? b : a;
    case INCOLL_OP_LAND:
        return (a != 0.0 && b != 0.0) ? 1.0 : 0.0;
    case INCOLL_OP_LOR:
        return (a != 0.0 || b != 0.0) ? 1.0 : 0.0;
    default:
        return ((a != 0.0) != (b != 0.0)) ? 1.0 : 0.0;
    }
}

/* Reference reduction: nsrc == 1 copies; otherwise a left fold, with
 * 16-bit floats widened, folded in float and rounded once. */
static void ref_reduce(incoll_op_t op, incoll_dtype_t dt, void *dst,
                       const void *const *src, int nsrc, size_t count)
{
    size_t sz = incoll_dtype_size(dt);
    for (size_t i = 0; i < count; i++) {
        if (nsrc == 1) {
            memcpy((char *)dst + i * sz, (const char *)src[0] + i * sz, sz);
        } else if (is_int(dt)) {
            uint64_t acc = get_int(dt, src[0], i);
            for (int k = 1; k < nsrc; k++)
                acc = ref_int(dt, op, acc, get_int(dt, src[k], i));
            put_int(dt, dst, i, acc);
        } else if (dt == INCOLL_FLOAT64) {
            double acc = ((const double *)src[0])[i];
            for (int k = 1; k < nsrc; k++)
                acc = ref_f64(op, acc, ((const double *)src[k])[i]);
            ((double *)dst)[i] = acc;
        } else {
            float acc = get_f(dt, src[0], i);
            for (int k = 1; k < nsrc; k++)
                acc = ref_f32(op, acc, get_f(dt, src[k], i));
            if (dt == INCOLL_FLOAT16)
                ((uint16_t *)dst)[i] = dtype_float_to_half(acc);
            else if (dt == INCOLL_BFLOAT16)
                ((uint16_t *)dst)[i] = dtype_float_to_bf16(acc);
            else
                ((float *)dst)[i] = acc;
        }
    }
}

static int is_nan_elem(incoll_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case INCOLL_FLOAT16: {
        uint16_t h = ((const uint16_t *)buf)[i];
        return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    }
    case INCOLL_BFLOAT16: {
        uint16_t b = ((const uint16_t *)buf)[i];
        return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
    }
    case INCOLL_FLOAT32:
        return isnan(((const float *)buf)[i]);
    case INCOLL_FLOAT64:
        return isnan(((const double *)buf)[i]);
    default:
        return 0;
    }
}

/* Index of the first element that differs, or count if none does. Equal
 * means the same bits; two NaNs are equal whatever their payloads, which
 * the kernels do not specify. */
static size_t first_diff(incoll_dtype_t dt, const void *a, const void *b,
                         size_t count)
{
    size_t sz = incoll_dtype_size(dt);
    for (size_t i = 0; i < count; i++) {
        if (memcmp((const char *)a + i * sz, (const char *)b + i * sz, sz) == 0)
            continue;
        if (is_nan_elem(dt, a, i) && is_nan_elem(dt, b, i))
            continue;
        return i;
    }
    return count;
}

static uint64_t elem_bits(incoll_dtype_t dt, const void *buf, size_t i)
{
    uint64_t v = 0;
    size_t sz = incoll_dtype_size(dt);
    memcpy(&v, (const char *)buf + i * sz, sz);
    return v;
}

/* Random element: a mix of small values, zeros, extremes and raw bits, so
 * that wrap-around, logical ops and comparisons all see interesting input.
 * NaNs only when nan_ok. */
static void fill_random(incoll_dtype_t dt, void *buf, size_t count, int nan_ok)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t r = rnd(), pick = r & 15;
        r >>= 4;
        if (is_int(dt)) {
            uint64_t v;
            int bits = int_bits(dt);
            if (pick < 3)
                v = (r % 5) - 2; /* -2..2 */
            else if (pick < 5) {
                uint64_t top = 1ull << (bits - 1);
                uint64_t ext[4] = {top, top - 1, top + 1, ~0ull};
                v = ext[r & 3];
            } else
                v = r;
            put_int(dt, buf, i, canon_int(dt, v));
        } else if (dt == INCOLL_FLOAT64) {
            double v;
            if (pick < 2)
                v = (r & 1) ? -0.0 : 0.0;
            else if (pick < 4) {
                memcpy(&v, &r, sizeof(v));
                if (!isfinite(v))
                    v = 1e300;
            } else if (pick == 4)
                v = (r & 1) ? 4.9e-324 * (double)(r % 1000) : -1e-310;
            else if (pick == 5 && nan_ok)
                v = (r & 1) ? NAN : ((r & 2) ? INFINITY : -INFINITY);
            else
                v = ((double)(r % 2000001) - 1000000.0) / 131072.0;
            ((double *)buf)[i] = v;
        } else if (dt == INCOLL_FLOAT32) {
            float v;
            uint32_t u = (uint32_t)r;
            if (pick < 2)
                v = (r & 1) ? -0.0f : 0.0f;
            else if (pick < 4) {
                memcpy(&v, &u, sizeof(v));
                if (!isfinite(v))
                    v = 3e38f;
            } else if (pick == 4)
                v = (r & 1) ? 1e-40f : -3e-42f;
            else if (pick == 5 && nan_ok)
                v = (r & 1) ? NAN : ((r & 2) ? INFINITY : -INFINITY);
            else
                v = (float)((int)(r % 20001) - 10000) / 1024.0f;
            ((float *)buf)[i] = v;
        } else {
            /* 16-bit floats: raw bits, with NaN patterns replaced unless
             * wanted, and a good share of small values and zeros. */
            uint16_t h = (uint16_t)r;
            uint16_t expmask = dt == INCOLL_FLOAT16 ? 0x7c00 : 0x7f80;
            if (pick < 2)
                h = (r & 0x10000) ? 0x8000 : 0;
            else if (pick < 8) {
                float f = (float)((int)(r % 2001) - 1000) / 128.0f;
                h = dt == INCOLL_FLOAT16 ? dtype_float_to_half(f)
                                         : dtype_float_to_bf16(f);
            } else if ((h & expmask) == expmask && !(nan_ok && pick == 8))
                h &= (uint16_t)~0x4000; /* exponent no longer all ones */
            ((uint16_t *)buf)[i] = h;
        }
    }
}

/* Bytes allocated for one buffer: count elements plus a canary tail. */
#define CANARY 64
static const unsigned char canary_byte = 0xa5;

typedef void (*reduce_fn_t)(incoll_op_t, incoll_dtype_t, void *,
                            const void *const *, int, size_t);

/*
 * Runs fn on nsrc random sources of count elements, out of place and in
 * place, and compares with the reference (or, if vs_scalar, with
 * reduce_n_scalar bit for bit). Checks that nothing past dst[count] was
 * written. Returns TEST_PASSED or TEST_FAILED with a message.
 */
static int check_case(reduce_fn_t fn, const char *fname, incoll_op_t op,
                      incoll_dtype_t dt, int nsrc, size_t count, int vs_scalar)
{
    size_t sz = incoll_dtype_size(dt), bytes = count * sz;
    unsigned char *bufs[8], *orig[8], *dst, *want, *inplace;
    const void *src[8];
    int ret = TEST_FAILED;
    size_t bad;

    for (int k = 0; k < nsrc; k++) {
        bufs[k] = malloc(bytes + 1);
        orig[k] = malloc(bytes + 1);
        fill_random(dt, bufs[k], count, !vs_scalar);
        memcpy(orig[k], bufs[k], bytes);
        src[k] = bufs[k];
    }
    dst = malloc(bytes + CANARY);
    want = malloc(bytes + 1);
    inplace = malloc(bytes + CANARY);
    memset(dst, canary_byte, bytes + CANARY);

    if (vs_scalar)
        reduce_n_scalar(op, dt, want, src, nsrc, count);
    else
        ref_reduce(op, dt, want, src, nsrc, count);

    fn(op, dt, dst, src, nsrc, count);
    bad = first_diff(dt, dst, want, count);
    if (bad < count) {
        fprintf(stderr,
                "    %s %s %s nsrc %d count %zu: element %zu is 0x%llx, "
                "want 0x%llx\n",
                fname, incoll_op_name(op), incoll_dtype_name(dt), nsrc, count,
                bad, (unsigned long long)elem_bits(dt, dst, bad),
                (unsigned long long)elem_bits(dt, want, bad));
        goto out;
    }
    for (size_t i = bytes; i < bytes + CANARY; i++) {
        if (dst[i] != canary_byte) {
            fprintf(
                stderr, "    %s %s %s nsrc %d count %zu: wrote past the end\n",
                fname, incoll_op_name(op), incoll_dtype_name(dt), nsrc, count);
            goto out;
        }
    }

    /* In place: dst is src[0]. */
    memcpy(inplace, bufs[0], bytes);
    memset(inplace + bytes, canary_byte, CANARY);
    src[0] = inplace;
    fn(op, dt, inplace, src, nsrc, count);
    src[0] = bufs[0];
    bad = first_diff(dt, inplace, want, count);
    if (bad < count || inplace[bytes] != canary_byte) {
        fprintf(stderr,
                "    %s %s %s nsrc %d count %zu in place: element %zu\n", fname,
                incoll_op_name(op), incoll_dtype_name(dt), nsrc, count, bad);
        goto out;
    }
    /* The sources are input only. */
    for (int k = 1; k < nsrc; k++) {
        if (memcmp(orig[k], bufs[k], bytes) != 0) {
            fprintf(stderr, "    %s modified source %d\n", fname, k);
            goto out;
        }
    }
    ret = TEST_PASSED;
out:
    for (int k = 0; k < nsrc; k++) {
        free(bufs[k]);
        free(orig[k]);
    }
    free(dst);
    free(want);
    free(inplace);
    return ret;
}

/* Every valid op of dt against the reference, through reduce_n and
 * reduce_n_scalar. 100003 elements spans many kernel blocks with a tail. */
static int check_dtype_against_ref(incoll_dtype_t dt)
{
    static const size_t counts[] = {0, 1, 7, 33, 1000};
    static const int nsrcs[] = {1, 2, 3, 8};

    for (int op = 0; op < INCOLL_OP_COUNT; op++) {
        if (!incoll_op_valid((incoll_op_t)op, dt))
            continue;
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            for (size_t s = 0; s < sizeof(nsrcs) / sizeof(nsrcs[0]); s++) {
                if (check_case(reduce_n, "reduce_n", (incoll_op_t)op, dt,
                               nsrcs[s], counts[c], 0) != TEST_PASSED)
                    return TEST_FAILED;
                if (check_case(reduce_n_scalar, "reduce_n_scalar",
                               (incoll_op_t)op, dt, nsrcs[s], counts[c],
                               0) != TEST_PASSED)
                    return TEST_FAILED;
            }
        }
        if (check_case(reduce_n, "reduce_n", (incoll_op_t)op, dt, 3, 100003,
                       0) != TEST_PASSED)
            return TEST_FAILED;
    }
    return TEST_PASSED;
}

#define REF_TEST(name, dt)                                                     \
    TEST(reduce_ref_##name, TEST_UNIT)                                         \
    {                                                                          \
        return check_dtype_against_ref(dt);                                    \
    }

REF_TEST(int8, INCOLL_INT8)
REF_TEST(int16, INCOLL_INT16)
REF_TEST(int32, INCOLL_INT32)
REF_TEST(int64, INCOLL_INT64)
REF_TEST(uint8, INCOLL_UINT8)
REF_TEST(uint16, INCOLL_UINT16)
REF_TEST(uint32, INCOLL_UINT32)
REF_TEST(uint64, INCOLL_UINT64)
REF_TEST(float16, INCOLL_FLOAT16)
REF_TEST(bfloat16, INCOLL_BFLOAT16)
REF_TEST(float32, INCOLL_FLOAT32)
REF_TEST(float64, INCOLL_FLOAT64)

/* The selected variant, bit for bit against reduce_n_scalar, on lengths
 * around the vector widths and the block size. Run by reduce_variant_*. */
static int variant_matches_scalar(const char *name)
{
    static const size_t counts[] = {1, 15, 16, 17, 63, 65, 1025, 4099};
    static const int nsrcs[] = {2, 3, 8};

    for (int dt = 0; dt < INCOLL_DTYPE_COUNT; dt++) {
        for (int op = 0; op < INCOLL_OP_COUNT; op++) {
            if (!incoll_op_valid((incoll_op_t)op, (incoll_dtype_t)dt))
                continue;
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                int s = (int)((c + (size_t)op) % 3);
                if (check_case(reduce_n, name, (incoll_op_t)op,
                               (incoll_dtype_t)dt, nsrcs[s], counts[c],
                               1) != TEST_PASSED)
                    return TEST_FAILED;
            }
        }
    }
    return TEST_PASSED;
}

TEST(reduce_impl_select, TEST_UNIT)
{
    const char *best = reduce_impl_name();
    int known = 0;
    CHECK(best != NULL);
    for (int i = 0; i < NIMPLS; i++)
        known |= strcmp(best, all_impls[i]) == 0;
    CHECK_MSG(known, "unknown impl %s", best);
    CHECK_EQ_INT(reduce_select_impl("bogus"), -1);
    CHECK(strcmp(reduce_impl_name(), best) == 0);
    CHECK_EQ_INT(reduce_select_impl("scalar"), 0);
    CHECK(strcmp(reduce_impl_name(), "scalar") == 0);
    CHECK_EQ_INT(reduce_select_impl(NULL), 0);
    CHECK(strcmp(reduce_impl_name(), best) == 0);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------------
 * Edge values, through the selected variant (reduce_variant_* selects each
 * in turn). Each case runs on a 67-element vector (vector body and scalar
 * tail in every variant) with the same pair in every lane. */
#define EDGE_N 67

static int edge_case(int line, incoll_op_t op, incoll_dtype_t dt, uint64_t a,
                     uint64_t b, uint64_t want)
{
    size_t sz = incoll_dtype_size(dt);
    unsigned char sa[EDGE_N * 8], sb[EDGE_N * 8], d[EDGE_N * 8];
    const void *src[2] = {sa, sb};

    for (size_t i = 0; i < EDGE_N; i++) {
        memcpy(sa + i * sz, &a, sz);
        memcpy(sb + i * sz, &b, sz);
    }
    memset(d, 0x5a, sizeof(d));
    reduce_n(op, dt, d, src, 2, EDGE_N);
    for (size_t i = 0; i < EDGE_N; i++) {
        uint64_t got = elem_bits(dt, d, i);
        int ok = got == want;
        if (!ok && is_nan_elem(dt, &want, 0) && is_nan_elem(dt, d, i))
            ok = 1;
        if (!ok) {
            fprintf(stderr,
                    "    line %d: %s %s (0x%llx, 0x%llx) via %s, element "
                    "%zu: got 0x%llx, want 0x%llx\n",
                    line, incoll_op_name(op), incoll_dtype_name(dt),
                    (unsigned long long)a, (unsigned long long)b,
                    reduce_impl_name(), i, (unsigned long long)got,
                    (unsigned long long)want);
            return 0;
        }
    }
    return 1;
}

#define EDGE(op, dt, a, b, want)                                               \
    CHECK(edge_case(__LINE__, INCOLL_OP_##op, dt, (uint64_t)(a),               \
                    (uint64_t)(b), (uint64_t)(want)))

static uint64_t f32b(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static uint64_t f64b(double f)
{
    uint64_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static int int_edges(void)
{
    /* Wrap-around at both ends; the arguments are bit patterns of the
     * element type. */
    EDGE(SUM, INCOLL_INT8, 0x7f, 0x01, 0x80);  /* 127 + 1 = -128 */
    EDGE(SUM, INCOLL_INT8, 0x80, 0xff, 0x7f);  /* -128 + -1 = 127 */
    EDGE(PROD, INCOLL_INT8, 0x80, 0xff, 0x80); /* -128 * -1 = -128 */
    EDGE(PROD, INCOLL_INT8, 16, 16, 0);
    EDGE(MIN, INCOLL_INT8, 0x7f, 0x80, 0x80);
    EDGE(MAX, INCOLL_INT8, 0x80, 0x7f, 0x7f);
    EDGE(MAX, INCOLL_UINT8, 0x7f, 0x80, 0x80); /* unsigned compare */
    EDGE(SUM, INCOLL_UINT8, 0xff, 0x01, 0x00);
    EDGE(PROD, INCOLL_UINT8, 0xff, 0xff, 0x01);
    EDGE(SUM, INCOLL_INT16, 0x7fff, 1, 0x8000);
    EDGE(PROD, INCOLL_INT16, 0x8000, 0xffff, 0x8000);
    EDGE(MIN, INCOLL_INT16, 0x8000, 0x7fff, 0x8000);
    EDGE(PROD, INCOLL_UINT16, 0xffff, 0xffff, 0x0001); /* no int overflow */
    EDGE(MAX, INCOLL_UINT16, 0x8000, 0x7fff, 0x8000);
    EDGE(SUM, INCOLL_INT32, INT32_MAX, 1, 0x80000000u);
    EDGE(SUM, INCOLL_INT32, 0x80000000u, 0xffffffffu, INT32_MAX);
    EDGE(PROD, INCOLL_INT32, 0x80000000u, 0xffffffffu, 0x80000000u);
    EDGE(PROD, INCOLL_INT32, 65536, 65536, 0);
    EDGE(MIN, INCOLL_INT32, 0xffffffffu, 0, 0xffffffffu); /* -1 < 0 */
    EDGE(MAX, INCOLL_UINT32, 0x80000000u, 1, 0x80000000u);
    EDGE(MIN, INCOLL_UINT32, 0x80000000u, 0x7fffffffu, 0x7fffffffu);
    EDGE(SUM, INCOLL_UINT32, UINT32_MAX, 1, 0);
    EDGE(PROD, INCOLL_UINT32, UINT32_MAX, UINT32_MAX, 1);
    EDGE(SUM, INCOLL_INT64, INT64_MAX, 1, (uint64_t)INT64_MIN);
    EDGE(PROD, INCOLL_INT64, (uint64_t)INT64_MIN, (uint64_t)-1,
         (uint64_t)INT64_MIN);
    EDGE(PROD, INCOLL_INT64, 0x100000000ull, 0x100000000ull, 0);
    EDGE(PROD, INCOLL_INT64, 0x123456789ull, 0x987654321ull,
         0x123456789ull * 0x987654321ull);
    EDGE(MIN, INCOLL_INT64, (uint64_t)INT64_MIN, INT64_MAX,
         (uint64_t)INT64_MIN);
    EDGE(MAX, INCOLL_UINT64, 0, UINT64_MAX, UINT64_MAX);
    EDGE(MIN, INCOLL_UINT64, 0x8000000000000000ull, 1, 1);
    EDGE(SUM, INCOLL_UINT64, UINT64_MAX, 1, 0);
    EDGE(PROD, INCOLL_UINT64, UINT64_MAX, UINT64_MAX, 1);

    /* Logical ops give 0 or 1, never the operands' bits. */
    EDGE(LAND, INCOLL_INT32, 2, 4, 1);
    EDGE(LAND, INCOLL_INT32, 2, 0, 0);
    EDGE(LOR, INCOLL_INT8, 0, 0, 0);
    EDGE(LOR, INCOLL_INT8, 0, 0x80, 1);
    EDGE(LXOR, INCOLL_UINT16, 5, 7, 0);
    EDGE(LXOR, INCOLL_INT64, 0, (uint64_t)-1, 1);
    EDGE(LAND, INCOLL_UINT64, 0x8000000000000000ull, 0x100000000ull, 1);
    EDGE(BAND, INCOLL_UINT8, 0xf0, 0x3c, 0x30);
    EDGE(BOR, INCOLL_INT16, 0x8001, 0x0100, 0x8101);
    EDGE(BXOR, INCOLL_UINT64, 0xff00ff00ff00ff00ull, 0x0ff00ff00ff00ff0ull,
         0xf0f0f0f0f0f0f0f0ull);
    return TEST_PASSED;
}

static int float_edges(void)
{
    const incoll_dtype_t f32 = INCOLL_FLOAT32, f64 = INCOLL_FLOAT64;
    const uint64_t nan32 = f32b(NAN), nan64 = f64b(NAN);

    /* Signed zeros: -0 + -0 = -0, -0 + +0 = +0, and min/max keep the
     * running result when the two compare equal. */
    EDGE(SUM, f32, f32b(-0.0f), f32b(-0.0f), f32b(-0.0f));
    EDGE(SUM, f32, f32b(-0.0f), f32b(0.0f), f32b(0.0f));
    EDGE(PROD, f32, f32b(-0.0f), f32b(5.0f), f32b(-0.0f));
    EDGE(MIN, f32, f32b(-0.0f), f32b(0.0f), f32b(-0.0f));
    EDGE(MIN, f32, f32b(0.0f), f32b(-0.0f), f32b(0.0f));
    EDGE(MAX, f64, f64b(0.0), f64b(-0.0), f64b(0.0));
    EDGE(MAX, f64, f64b(-0.0), f64b(0.0), f64b(-0.0));
    /* Infinities and NaN. */
    EDGE(SUM, f32, f32b(INFINITY), f32b(1.0f), f32b(INFINITY));
    EDGE(SUM, f32, f32b(INFINITY), f32b(-INFINITY), nan32);
    EDGE(PROD, f64, f64b(INFINITY), f64b(0.0), nan64);
    EDGE(SUM, f32, f32b(FLT_MAX), f32b(FLT_MAX), f32b(INFINITY));
    EDGE(MIN, f32, f32b(-INFINITY), f32b(-FLT_MAX), f32b(-INFINITY));
    EDGE(MAX, f64, f64b(-INFINITY), f64b(INFINITY), f64b(INFINITY));
    /* min(a, b) = b < a ? b : a: a NaN result stays, a NaN source is
     * skipped. */
    EDGE(MIN, f32, nan32, f32b(1.0f), nan32);
    EDGE(MIN, f32, f32b(1.0f), nan32, f32b(1.0f));
    EDGE(MAX, f64, nan64, f64b(1.0), nan64);
    EDGE(MAX, f64, f64b(1.0), nan64, f64b(1.0));
    /* Logical: -0.0 is false, NaN and inf are true, result 0.0 or 1.0. */
    EDGE(LAND, f32, f32b(-0.0f), f32b(1.0f), f32b(0.0f));
    EDGE(LAND, f32, nan32, f32b(2.5f), f32b(1.0f));
    EDGE(LOR, f32, f32b(-0.0f), f32b(0.0f), f32b(0.0f));
    EDGE(LOR, f64, f64b(-0.0), f64b(1e-320), f64b(1.0));
    EDGE(LXOR, f64, f64b(INFINITY), f64b(-2.0), f64b(0.0));
    EDGE(LXOR, f32, f32b(0.0f), f32b(-3.0f), f32b(1.0f));
    /* Subnormals are not flushed. */
    EDGE(SUM, f32, f32b(1e-45f), f32b(1e-45f), f32b(2.8e-45f));
    EDGE(SUM, f64, f64b(4.9e-324), f64b(4.9e-324), f64b(9.9e-324));

    /* float16: subnormals, overflow, signed zero, NaN, logical results. */
    EDGE(SUM, INCOLL_FLOAT16, 0x0001, 0x0001, 0x0002);
    EDGE(SUM, INCOLL_FLOAT16, 0x03ff, 0x0001, 0x0400); /* into the normals */
    EDGE(SUM, INCOLL_FLOAT16, 0x8000, 0x8000, 0x8000);
    EDGE(SUM, INCOLL_FLOAT16, 0x7bff, 0x5000, 0x7c00);  /* 65504 + 32 = inf */
    EDGE(SUM, INCOLL_FLOAT16, 0x7bff, 0x4b80, 0x7bff);  /* 65504 + 15 */
    EDGE(SUM, INCOLL_FLOAT16, 0x7c00, 0xfc00, 0x7e00);  /* inf - inf: NaN */
    EDGE(PROD, INCOLL_FLOAT16, 0x0200, 0x3800, 0x0100); /* subnormal * 0.5 */
    EDGE(MIN, INCOLL_FLOAT16, 0x7e00, 0x3c00, 0x7e00);
    EDGE(MIN, INCOLL_FLOAT16, 0x3c00, 0x7e00, 0x3c00);
    EDGE(MAX, INCOLL_FLOAT16, 0xfc00, 0x0001, 0x0001);
    EDGE(LAND, INCOLL_FLOAT16, 0x8000, 0x3c00, 0x0000);
    EDGE(LOR, INCOLL_FLOAT16, 0x0001, 0x0000, 0x3c00);
    EDGE(LXOR, INCOLL_FLOAT16, 0x7e00, 0x0000, 0x3c00);
    /* bfloat16. */
    EDGE(SUM, INCOLL_BFLOAT16, 0x3f80, 0x3f80, 0x4000);
    EDGE(SUM, INCOLL_BFLOAT16, 0x7f7f, 0x7f7f, 0x7f80); /* overflow to inf */
    EDGE(SUM, INCOLL_BFLOAT16, 0x0001, 0x0001, 0x0002); /* subnormal */
    EDGE(PROD, INCOLL_BFLOAT16, 0x8000, 0x3f80, 0x8000);
    EDGE(MAX, INCOLL_BFLOAT16, 0x7fc0, 0x3f80, 0x7fc0);
    EDGE(LAND, INCOLL_BFLOAT16, 0x4000, 0xc000, 0x3f80);
    return TEST_PASSED;
}

/* One test per kernel variant: against the scalar loops bit for bit, then
 * the edge values. A variant whose instructions this CPU lacks is a SKIP
 * naming it, not a silent pass. */
static int check_variant(const char *name)
{
    const char *best = reduce_impl_name();
    int ret;

    if (reduce_select_impl(name) != 0)
        return test_skip("this CPU lacks the %s kernels (reduce_n uses %s "
                         "here)",
                         name, best);
    CHECK(strcmp(reduce_impl_name(), name) == 0);
    ret = variant_matches_scalar(name);
    if (ret == TEST_PASSED)
        ret = int_edges();
    if (ret == TEST_PASSED)
        ret = float_edges();
    reduce_select_impl(NULL);
    return ret;
}

#define VARIANT_TEST(name)                                                     \
    TEST(reduce_variant_##name, TEST_UNIT)                                     \
    {                                                                          \
        return check_variant(#name);                                           \
    }

#if defined(__x86_64__) || defined(__i386__)
VARIANT_TEST(avx512)
VARIANT_TEST(avx2)
VARIANT_TEST(sse2)
#else
VARIANT_TEST(vec128)
#endif
VARIANT_TEST(scalar)

/* Fold order: sources are combined left to right, and 16-bit floats are
 * rounded once at the end, not after each source. */
static int fold3(incoll_op_t op, incoll_dtype_t dt, const void *a,
                 const void *b, const void *c, void *out)
{
    /* 40 elements: the same triple in every lane, vector body and tail. */
    unsigned char s[3][40 * 8], d[40 * 8];
    const void *src[3] = {s[0], s[1], s[2]};
    const void *in[3] = {a, b, c};
    size_t sz = incoll_dtype_size(dt);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 40; i++)
            memcpy(s[k] + (size_t)i * sz, in[k], sz);
    reduce_n(op, dt, d, src, 3, 40);
    for (int i = 1; i < 40; i++)
        if (memcmp(d, d + (size_t)i * sz, sz) != 0)
            return -1;
    memcpy(out, d, sz);
    return 0;
}

TEST(reduce_fold_order, TEST_UNIT)
{
    float big = 1e8f, one = 1.0f, mbig = -1e8f, f;
    uint16_t h, h1 = 0x3c00, heps = 0x1000; /* 1.0 and 2^-11 */
    uint16_t b1 = 0x3f80, beps = 0x3b80;    /* 1.0 and 2^-8 */

    /* (1e8 + 1) - 1e8 = 0 in float; (1e8 - 1e8) + 1 = 1. */
    CHECK(fold3(INCOLL_OP_SUM, INCOLL_FLOAT32, &big, &one, &mbig, &f) == 0);
    CHECK(f == 0.0f);
    CHECK(fold3(INCOLL_OP_SUM, INCOLL_FLOAT32, &big, &mbig, &one, &f) == 0);
    CHECK(f == 1.0f);
    /* 1 + 2^-11 + 2^-11 = 1 + 2^-10 exactly in float: 0x3c01. Rounding
     * after each step would give 1.0 (each tie goes to even). Same for
     * bfloat16 with 1 + 2^-8 + 2^-8. */
    CHECK(fold3(INCOLL_OP_SUM, INCOLL_FLOAT16, &h1, &heps, &heps, &h) == 0);
    CHECK_EQ_INT(h, 0x3c01);
    CHECK(fold3(INCOLL_OP_SUM, INCOLL_BFLOAT16, &b1, &beps, &beps, &h) == 0);
    CHECK_EQ_INT(h, 0x3f81);
    return TEST_PASSED;
}

TEST(reduce_nsrc1_and_count0, TEST_UNIT)
{
    int32_t a[5] = {5, -7, 0, INT32_MIN, 3}, d[5] = {9, 9, 9, 9, 9};
    const void *src[1] = {a};
    uint16_t nanh[3] = {0x7d01, 0xfc00, 0x0001}, hd[3];
    const void *hsrc[1] = {nanh};

    /* nsrc 1 is a copy whatever the op: LAND does not turn 5 into 1. */
    reduce_n(INCOLL_OP_LAND, INCOLL_INT32, d, src, 1, 5);
    CHECK(memcmp(a, d, sizeof(a)) == 0);
    reduce_n(INCOLL_OP_SUM, INCOLL_INT32, a, src, 1, 5); /* in place */
    CHECK_EQ_INT(a[0], 5);
    CHECK_EQ_INT(a[3], INT32_MIN);
    /* A signalling-NaN half copies through untouched. */
    reduce_n(INCOLL_OP_MAX, INCOLL_FLOAT16, hd, hsrc, 1, 3);
    CHECK(memcmp(hd, nanh, sizeof(hd)) == 0);
    /* count 0 touches nothing. */
    memset(d, 0x11, sizeof(d));
    reduce_n(INCOLL_OP_SUM, INCOLL_INT32, d, src, 1, 0);
    reduce_n_scalar(INCOLL_OP_SUM, INCOLL_INT32, d, src, 1, 0);
    CHECK_EQ_INT(d[0], 0x11111111);
    return TEST_PASSED;
}

/* An op that does not apply to the dtype (or values off the end of the
 * enums) leaves dst untouched instead of reducing garbage. */
TEST(reduce_invalid_args, TEST_UNIT)
{
    float a[4] = {1, 2, 3, 4}, d[4] = {9, 9, 9, 9};
    const void *src[2] = {a, a};

    log_level_current = -1; /* the error line is expected: keep it quiet */
    reduce_n(INCOLL_OP_BAND, INCOLL_FLOAT32, d, src, 2, 4);
    reduce_n_scalar(INCOLL_OP_BXOR, INCOLL_FLOAT64, d, src, 2, 2);
    reduce_n((incoll_op_t)99, INCOLL_FLOAT32, d, src, 2, 4);
    reduce_n(INCOLL_OP_SUM, (incoll_dtype_t)99, d, src, 2, 4);
    for (int i = 0; i < 4; i++)
        CHECK(d[i] == 9.0f);
    reduce_n(INCOLL_OP_SUM, INCOLL_FLOAT32, d, src, 2, 4);
    CHECK(d[0] == 2.0f && d[3] == 8.0f);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------------
 * Types, ops, names. */
TEST(reduce_op_valid_table, TEST_UNIT)
{
    for (int op = 0; op < INCOLL_OP_COUNT; op++) {
        for (int dt = 0; dt < INCOLL_DTYPE_COUNT; dt++) {
            int bitwise = op == INCOLL_OP_BAND || op == INCOLL_OP_BOR ||
                          op == INCOLL_OP_BXOR;
            int want = bitwise ? is_int((incoll_dtype_t)dt) : 1;
            CHECK_MSG(incoll_op_valid((incoll_op_t)op, (incoll_dtype_t)dt) ==
                          want,
                      "op %d dtype %d", op, dt);
        }
    }
    CHECK_EQ_INT(incoll_op_valid(INCOLL_OP_BAND, INCOLL_FLOAT32), 0);
    CHECK_EQ_INT(incoll_op_valid(INCOLL_OP_BXOR, INCOLL_BFLOAT16), 0);
    CHECK_EQ_INT(incoll_op_valid(INCOLL_OP_SUM, INCOLL_FLOAT16), 1);
    CHECK_EQ_INT(incoll_op_valid(INCOLL_OP_LXOR, INCOLL_FLOAT64), 1);
    CHECK_EQ_INT(incoll_op_valid(INCOLL_OP_BOR, INCOLL_UINT64), 1);
    CHECK_EQ_INT(incoll_op_valid((incoll_op_t)99, INCOLL_INT32), 0);
    CHECK_EQ_INT(incoll_op_valid(INCOLL_OP_COUNT, INCOLL_INT32), 0);
    CHECK_EQ_INT(incoll_op_valid((incoll_op_t)-1, INCOLL_INT32), 0);
    CHECK_EQ_INT(incoll_op_valid(INCOLL_OP_SUM, INCOLL_DTYPE_COUNT), 0);
    CHECK_EQ_INT(incoll_op_valid(INCOLL_OP_SUM, (incoll_dtype_t)-3), 0);
    return TEST_PASSED;
}

TEST(reduce_dtype_names, TEST_UNIT)
{
    static const char *const dnames[] = {
        "int8",   "int16",  "int32",   "int64",    "uint8",   "uint16",
        "uint32", "uint64", "float16", "bfloat16", "float32", "float64"};
    static const size_t sizes[] = {1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8};
    static const char *const onames[] = {"sum", "prod", "min",  "max", "land",
                                         "lor", "lxor", "band", "bor", "bxor"};

    for (int dt = 0; dt < INCOLL_DTYPE_COUNT; dt++) {
        CHECK(strcmp(incoll_dtype_name((incoll_dtype_t)dt), dnames[dt]) == 0);
        CHECK_EQ_INT(incoll_dtype_size((incoll_dtype_t)dt), sizes[dt]);
        CHECK_EQ_INT(dtype_parse(dnames[dt]), dt);
    }
    for (int op = 0; op < INCOLL_OP_COUNT; op++) {
        CHECK(strcmp(incoll_op_name((incoll_op_t)op), onames[op]) == 0);
        CHECK_EQ_INT(op_parse(onames[op]), op);
    }
    CHECK_EQ_INT(incoll_dtype_size(INCOLL_DTYPE_COUNT), 0);
    CHECK_EQ_INT(incoll_dtype_size((incoll_dtype_t)-1), 0);
    CHECK(incoll_dtype_name((incoll_dtype_t)42) != NULL);
    CHECK(incoll_op_name((incoll_op_t)42) != NULL);
    CHECK_EQ_INT(dtype_parse("float"), INCOLL_FLOAT32);
    CHECK_EQ_INT(dtype_parse("double"), INCOLL_FLOAT64);
    CHECK_EQ_INT(dtype_parse("half"), INCOLL_FLOAT16);
    CHECK_EQ_INT(dtype_parse("int"), -1);
    CHECK_EQ_INT(dtype_parse("float3"), -1);
    CHECK_EQ_INT(dtype_parse(""), -1);
    CHECK_EQ_INT(dtype_parse(NULL), -1);
    CHECK_EQ_INT(op_parse("add"), -1);
    CHECK_EQ_INT(op_parse("SUM"), -1);
    CHECK_EQ_INT(op_parse(NULL), -1);
    return TEST_PASSED;
}

/* ------------------------------------------------------------------------
 * Conversions. */

/* Reference float -> half, from the definition: the half nearest to f,
 * ties to the even encoding, with the value past 65504 (encoding 0x7c00)
 * taken as 65536 so that overflow rounds the way IEEE 754 says. Positive
 * finite f only. */
static uint16_t ref_to_half(float f)
{
    unsigned lo = 0, hi = 0x7c00; /* value(lo) <= f < value(hi) */
    double dlo, dhi, d = f;
    if (d >= 65536.0)
        return 0x7c00;
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if ((double)dtype_half_to_float((uint16_t)mid) <= d)
            lo = mid;
        else
            hi = mid;
    }
    dlo = dtype_half_to_float((uint16_t)lo);
    dhi = hi == 0x7c00 ? 65536.0 : (double)dtype_half_to_float((uint16_t)hi);
    if (d - dlo < dhi - d)
        return (uint16_t)lo;
    if (d - dlo > dhi - d)
        return (uint16_t)hi;
    return (uint16_t)((lo & 1) ? hi : lo);
}

TEST(reduce_half_conversion, TEST_UNIT)
{
    /* Every half survives a round trip; NaNs stay NaN. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = dtype_half_to_float((uint16_t)h);
        int hnan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (hnan) {
            uint16_t back = dtype_float_to_half(f);
            CHECK_MSG(isnan(f), "0x%04x", h);
            CHECK_MSG((back & 0x7c00) == 0x7c00 && (back & 0x3ff), "0x%04x", h);
            CHECK_EQ_INT(back, h | 0x200); /* quieted, payload kept */
        } else {
            CHECK_MSG(dtype_float_to_half(f) == h, "0x%04x -> %g", h, f);
        }
    }
    /* Known values. */
    CHECK(dtype_half_to_float(0x3c00) == 1.0f);
    CHECK(dtype_half_to_float(0xc000) == -2.0f);
    CHECK(dtype_half_to_float(0x7bff) == 65504.0f);
    CHECK(dtype_half_to_float(0x0001) == 0x1p-24f);
    CHECK(dtype_half_to_float(0x03ff) == 1023 * 0x1p-24f);
    CHECK(dtype_half_to_float(0x0400) == 0x1p-14f);
    CHECK(isinf(dtype_half_to_float(0xfc00)) &&
          dtype_half_to_float(0xfc00) < 0);
    CHECK(signbit(dtype_half_to_float(0x8000)));
    CHECK_EQ_INT(dtype_float_to_half(0.0f), 0x0000);
    CHECK_EQ_INT(dtype_float_to_half(-0.0f), 0x8000);
    CHECK_EQ_INT(dtype_float_to_half(INFINITY), 0x7c00);
    CHECK_EQ_INT(dtype_float_to_half(-INFINITY), 0xfc00);
    CHECK_EQ_INT(dtype_float_to_half(65504.0f), 0x7bff);
    CHECK_EQ_INT(dtype_float_to_half(65519.99f), 0x7bff);
    CHECK_EQ_INT(dtype_float_to_half(65520.0f), 0x7c00); /* tie: to inf */
    CHECK_EQ_INT(dtype_float_to_half(-1e6f), 0xfc00);
    CHECK_EQ_INT(dtype_float_to_half(FLT_MAX), 0x7c00);
    /* Ties to even, normal range: 1 + 2^-11 lies between 0x3c00 and 0x3c01. */
    CHECK_EQ_INT(dtype_float_to_half(1.0f + 0x1p-11f), 0x3c00);
    CHECK_EQ_INT(dtype_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);
    CHECK_EQ_INT(dtype_float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    CHECK_EQ_INT(dtype_float_to_half(2047.0f + 0.5f), 0x6800); /* 2048 */
    /* Subnormal range: 2^-25 ties to 0, 3 * 2^-25 ties to 2 * 2^-24. */
    CHECK_EQ_INT(dtype_float_to_half(0x1p-25f), 0x0000);
    CHECK_EQ_INT(dtype_float_to_half(0x1p-25f + 0x1p-40f), 0x0001);
    CHECK_EQ_INT(dtype_float_to_half(3 * 0x1p-25f), 0x0002);
    CHECK_EQ_INT(dtype_float_to_half(5 * 0x1p-25f), 0x0002);
    CHECK_EQ_INT(dtype_float_to_half(-0x1p-24f), 0x8001);
    CHECK_EQ_INT(dtype_float_to_half(1e-10f), 0x0000);
    CHECK_EQ_INT(dtype_float_to_half(-1e-10f), 0x8000);
    CHECK_EQ_INT(dtype_float_to_half(1e-45f), 0x0000); /* float subnormal */
    /* The largest subnormal plus half an ulp ties to the smallest normal. */
    CHECK_EQ_INT(dtype_float_to_half(1023.5f * 0x1p-24f), 0x0400);
    CHECK_EQ_INT(dtype_float_to_half(1022.5f * 0x1p-24f), 0x03fe);
    /* NaN stays NaN. */
    {
        uint16_t n = dtype_float_to_half(NAN);
        CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
        uint32_t snan_bits = 0x7f800001; /* payload only in the low bits */
        float snan;
        memcpy(&snan, &snan_bits, sizeof(snan));
        n = dtype_float_to_half(snan);
        CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
    }
    /* Random floats against the reference nearest-half search. */
    for (int i = 0; i < 20000; i++) {
        uint32_t u = (uint32_t)rnd();
        float f;
        uint16_t got, want;
        if (i & 1) /* concentrate on the half range */
            u = (u & 0x80ffffffu) | ((uint32_t)(0x30 + (u >> 24) % 0x18) << 24);
        memcpy(&f, &u, sizeof(f));
        if (!isfinite(f))
            continue;
        got = dtype_float_to_half(f);
        want = ref_to_half(fabsf(f));
        if (signbit(f))
            want |= 0x8000;
        CHECK_MSG(got == want, "%a (0x%08x): got 0x%04x, want 0x%04x", f, u,
                  got, want);
    }
    return TEST_PASSED;
}

TEST(reduce_bf16_conversion, TEST_UNIT)
{
    for (uint32_t b = 0; b < 0x10000; b++) {
        float f = dtype_bf16_to_float((uint16_t)b);
        uint32_t u;
        memcpy(&u, &f, sizeof(u));
        CHECK_EQ_INT(u, b << 16); /* widening is exact: the top half */
        if ((b & 0x7f80) == 0x7f80 && (b & 0x7f))
            CHECK_EQ_INT(dtype_float_to_bf16(f), b | 0x40);
        else
            CHECK_MSG(dtype_float_to_bf16(f) == b, "0x%04x", b);
    }
#define BF(bits, want)                                                         \
    do {                                                                       \
        uint32_t u_ = (bits);                                                  \
        float f_;                                                              \
        memcpy(&f_, &u_, sizeof(f_));                                          \
        CHECK_EQ_INT(dtype_float_to_bf16(f_), want);                           \
    } while (0)
    BF(0x3f808000u, 0x3f80); /* tie, even below */
    BF(0x3f818000u, 0x3f82); /* tie, odd below: up */
    BF(0x3f808001u, 0x3f81);
    BF(0x3f807fffu, 0x3f80);
    BF(0xbf818000u, 0xbf82); /* sign does not matter */
    BF(0x7f7fffffu, 0x7f80); /* FLT_MAX rounds to inf */
    BF(0x7f7f7fffu, 0x7f7f);
    BF(0x80000000u, 0x8000);
    BF(0x00018000u, 0x0002); /* subnormal, tie to even */
    BF(0x7f800000u, 0x7f80);
    BF(0x7f800001u, 0x7fc0); /* NaN that rounding would turn into inf */
    BF(0xffffffffu, 0xffff);
#undef BF
    return TEST_PASSED;
}
