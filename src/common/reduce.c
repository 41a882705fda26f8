/*
 * Reduction kernels: dst = ((src[0] op src[1]) op src[2]) ... per element.
 *
 * One kernel per (op, dtype) and per variant. The variants are the same
 * macro-generated loops compiled for different vector widths with GCC's
 * generic vector extensions:
 *
 *   scalar   plain per-element loops (reduce_n_scalar, and the reference the
 *            tests compare against);
 *   sse2     16-byte vectors, the x86-64 baseline ("vec128" elsewhere);
 *            float16 goes through the scalar loops here, for want of F16C;
 *   avx2     32-byte vectors, target("avx2,f16c");
 *   avx512   64-byte vectors, target("avx512f,avx512bw,avx512dq,avx512vl").
 *
 * reduce_n() picks the widest variant the CPU supports once, when the
 * library is loaded. Vectorizing runs across elements only: every element
 * is still folded in source index order, so every variant gives the same
 * bits as the scalar loops (NaN payloads aside, see below).
 *
 * Blocking: the sources are folded into dst up to three at a time
 * (VEC_PASS), BLOCK_BYTES of dst at a time, so the partial result stays in
 * L1 while each source is streamed through once. For an 8 KiB packet from
 * 8 children that is 3 passes of 3, 3 and 1 sources of 4 KiB per block.
 *
 * Semantics, identical in every variant:
 *   integers      wrap around (computed in unsigned arithmetic);
 *   min, max      min(a, b) = (b < a) ? b : a, max(a, b) = (b > a) ? b : a,
 *                 where a is the running result and b the next source. So
 *                 a NaN already in the result stays, a NaN in a later source
 *                 is skipped, and min(-0.0, +0.0) keeps the earlier one.
 *                 This is exactly x86's minps/maxps with operands (b, a);
 *   land/lor/lxor nonzero is true (-0.0 is false, NaN is true); the result
 *                 is 0 or 1 (0.0 or 1.0 for floating types);
 *   float16/bfloat16 are widened to float, folded in float, and rounded to
 *                 nearest even once at the end;
 *   nsrc == 1     copies src[0] unchanged, whatever the op.
 * When two NaNs meet in a sum or product, which payload survives is up to
 * the hardware and the compiler's operand order: the result is NaN in every
 * variant, but its payload is not specified.
 */
#include "common/dtype.h"
#include "common/log.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define REDUCE_X86 1
#endif

/* Elements of dst kept hot in L1 while the sources stream through. */
#define BLOCK_BYTES 4096

typedef void (*kernel_fn_t)(void *dst, const void *const *src, int nsrc,
                            size_t count);

/* ------------------------------------------------------------------------
 * Per-element operations, shared by the scalar kernels and by the vector
 * kernels' tails. AT is the arithmetic type: unsigned and at least as wide
 * as int, so that sums and products wrap instead of overflowing (uint16_t
 * would promote to int, and 65535 * 65535 overflows int).
 */
#define INT_ELEM_OPS(tn, T, AT)                                                \
    static inline T sop_sum_##tn(T a, T b)                                     \
    {                                                                          \
        return (T)((AT)a + (AT)b);                                             \
    }                                                                          \
    static inline T sop_prod_##tn(T a, T b)                                    \
    {                                                                          \
        return (T)((AT)a * (AT)b);                                             \
    }                                                                          \
    static inline T sop_min_##tn(T a, T b)                                     \
    {                                                                          \
        return b < a ? b : a;                                                  \
    }                                                                          \
    static inline T sop_max_##tn(T a, T b)                                     \
    {                                                                          \
        return b > a ? b : a;                                                  \
    }                                                                          \
    static inline T sop_land_##tn(T a, T b)                                    \
    {                                                                          \
        return (T)(a != 0 && b != 0);                                          \
    }                                                                          \
    static inline T sop_lor_##tn(T a, T b)                                     \
    {                                                                          \
        return (T)(a != 0 || b != 0);                                          \
    }                                                                          \
    static inline T sop_lxor_##tn(T a, T b)                                    \
    {                                                                          \
        return (T)((a != 0) != (b != 0));                                      \
    }                                                                          \
    static inline T sop_band_##tn(T a, T b)                                    \
    {                                                                          \
        return (T)(a & b);                                                     \
    }                                                                          \
    static inline T sop_bor_##tn(T a, T b)                                     \
    {                                                                          \
        return (T)(a | b);                                                     \
    }                                                                          \
    static inline T sop_bxor_##tn(T a, T b)                                    \
    {                                                                          \
        return (T)(a ^ b);                                                     \
    }

#define FLOAT_ELEM_OPS(tn, T)                                                  \
    static inline T sop_sum_##tn(T a, T b)                                     \
    {                                                                          \
        return a + b;                                                          \
    }                                                                          \
    static inline T sop_prod_##tn(T a, T b)                                    \
    {                                                                          \
        return a * b;                                                          \
    }                                                                          \
    static inline T sop_min_##tn(T a, T b)                                     \
    {                                                                          \
        return b < a ? b : a;                                                  \
    }                                                                          \
    static inline T sop_max_##tn(T a, T b)                                     \
    {                                                                          \
        return b > a ? b : a;                                                  \
    }                                                                          \
    static inline T sop_land_##tn(T a, T b)                                    \
    {                                                                          \
        return (a != 0 && b != 0) ? (T)1 : (T)0;                               \
    }                                                                          \
    static inline T sop_lor_##tn(T a, T b)                                     \
    {                                                                          \
        return (a != 0 || b != 0) ? (T)1 : (T)0;                               \
    }                                                                          \
    static inline T sop_lxor_##tn(T a, T b)                                    \
    {                                                                          \
        return ((a != 0) != (b != 0)) ? (T)1 : (T)0;                           \
    }

INT_ELEM_OPS(i8, int8_t, uint32_t)
INT_ELEM_OPS(i16, int16_t, uint32_t)
INT_ELEM_OPS(i32, int32_t, uint32_t)
INT_ELEM_OPS(i64, int64_t, uint64_t)
INT_ELEM_OPS(u8, uint8_t, uint32_t)
INT_ELEM_OPS(u16, uint16_t, uint32_t)
INT_ELEM_OPS(u32, uint32_t, uint32_t)
INT_ELEM_OPS(u64, uint64_t, uint64_t)
FLOAT_ELEM_OPS(f32, float)
FLOAT_ELEM_OPS(f64, double)

/* X-macro lists: (op) and (type name, C type, bits type, arithmetic type). */
/* clang-format off */
#define INT_OPS(X, ...)                                                        \
    X(sum, __VA_ARGS__) X(prod, __VA_ARGS__) X(min, __VA_ARGS__)               \
    X(max, __VA_ARGS__) X(land, __VA_ARGS__) X(lor, __VA_ARGS__)               \
    X(lxor, __VA_ARGS__) X(band, __VA_ARGS__) X(bor, __VA_ARGS__)              \
    X(bxor, __VA_ARGS__)
#define FLOAT_OPS(X, ...)                                                      \
    X(sum, __VA_ARGS__) X(prod, __VA_ARGS__) X(min, __VA_ARGS__)               \
    X(max, __VA_ARGS__) X(land, __VA_ARGS__) X(lor, __VA_ARGS__)               \
    X(lxor, __VA_ARGS__)

#define NATIVE_TYPES(X, ...)                                                   \
    INT_OPS(X, __VA_ARGS__, i8, int8_t, uint8_t, uint8_t)                      \
    INT_OPS(X, __VA_ARGS__, i16, int16_t, uint16_t, uint16_t)                  \
    INT_OPS(X, __VA_ARGS__, i32, int32_t, uint32_t, uint32_t)                  \
    INT_OPS(X, __VA_ARGS__, i64, int64_t, uint64_t, uint64_t)                  \
    INT_OPS(X, __VA_ARGS__, u8, uint8_t, uint8_t, uint8_t)                     \
    INT_OPS(X, __VA_ARGS__, u16, uint16_t, uint16_t, uint16_t)                 \
    INT_OPS(X, __VA_ARGS__, u32, uint32_t, uint32_t, uint32_t)                 \
    INT_OPS(X, __VA_ARGS__, u64, uint64_t, uint64_t, uint64_t)                 \
    FLOAT_OPS(X, __VA_ARGS__, f32, float, uint32_t, float)                     \
    FLOAT_OPS(X, __VA_ARGS__, f64, double, uint64_t, double)
/* clang-format on */

/* ------------------------------------------------------------------------
 * Scalar kernels: the obvious loops, element by element. */
#define SCALAR_KERNEL(op, pfx, tn, T, UT, AT)                                  \
    static void scalar_##op##_##tn(void *dst, const void *const *src,          \
                                   int nsrc, size_t n)                         \
    {                                                                          \
        T *d = dst;                                                            \
        for (size_t i = 0; i < n; i++) {                                       \
            T acc = ((const T *)src[0])[i];                                    \
            for (int k = 1; k < nsrc; k++)                                     \
                acc = sop_##op##_##tn(acc, ((const T *)src[k])[i]);            \
            d[i] = acc;                                                        \
        }                                                                      \
    }

#define SCALAR_KERNEL16(op, pfx, tn, TOF, FROMF)                               \
    static void scalar_##op##_##tn(void *dst, const void *const *src,          \
                                   int nsrc, size_t n)                         \
    {                                                                          \
        uint16_t *d = dst;                                                     \
        for (size_t i = 0; i < n; i++) {                                       \
            float acc = TOF(((const uint16_t *)src[0])[i]);                    \
            for (int k = 1; k < nsrc; k++)                                     \
                acc = sop_##op##_f32(acc, TOF(((const uint16_t *)src[k])[i])); \
            d[i] = FROMF(acc);                                                 \
        }                                                                      \
    }

NATIVE_TYPES(SCALAR_KERNEL, scalar)
FLOAT_OPS(SCALAR_KERNEL16, scalar, f16, dtype_half_to_float,
          dtype_float_to_half)
FLOAT_OPS(SCALAR_KERNEL16, scalar, bf16, dtype_bf16_to_float,
          dtype_float_to_bf16)

/* ------------------------------------------------------------------------
 * Vector operations on GCC generic vectors. Inside a kernel, vec_t holds
 * elements of the dtype, uvec_t the same bits as unsigned integers, avec_t
 * is the type arithmetic is done in (uvec_t for integers, so it wraps), and
 * vzero/vone are splats of 0 and 1. A comparison yields -1 (all ones) or 0
 * per lane, which VSEL uses as a bit mask.
 */
#define VSEL(m, x, y)                                                          \
    ((vec_t)(((uvec_t)(x) & (uvec_t)(m)) | ((uvec_t)(y) & ~(uvec_t)(m))))
#define VOP_sum(a, b) ((vec_t)((avec_t)(a) + (avec_t)(b)))
#define VOP_prod(a, b) ((vec_t)((avec_t)(a) * (avec_t)(b)))
#define VOP_min(a, b) VSEL((b) < (a), b, a)
#define VOP_max(a, b) VSEL((b) > (a), b, a)
#define VOP_land(a, b)                                                         \
    ((vec_t)((uvec_t)(((a) != vzero) & ((b) != vzero)) & (uvec_t)vone))
#define VOP_lor(a, b)                                                          \
    ((vec_t)((uvec_t)(((a) != vzero) | ((b) != vzero)) & (uvec_t)vone))
#define VOP_lxor(a, b)                                                         \
    ((vec_t)((uvec_t)(((a) != vzero) ^ ((b) != vzero)) & (uvec_t)vone))
#define VOP_band(a, b) ((a) & (b))
#define VOP_bor(a, b) ((a) | (b))
#define VOP_bxor(a, b) ((a) ^ (b))

/* Unaligned vector loads and stores; memcpy compiles to one move. */
#define VLOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define VSTORE(p, v) memcpy((p), &(v), sizeof(v))

#define VEC_TYPES(VB, T, UT, AT)                                               \
    typedef T vec_t __attribute__((vector_size(VB)));                          \
    typedef UT uvec_t __attribute__((vector_size(VB), unused));                \
    typedef AT avec_t __attribute__((vector_size(VB), unused));                \
    const vec_t vzero = {0};                                                   \
    const vec_t vone = vzero + 1;                                              \
    (void)vone

/*
 * One pass over a block: d[j] = ((a[j] op b[j]) op c[j]) op e[j] for
 * j < len, with the first nb of b, c, e used (nb = 1..3). a may be d. The
 * vector part goes VL lanes at a time, the tail one element at a time.
 * Folding up to three sources per pass keeps the left-to-right order of
 * the fold (the same bits as one source a pass) while the loads of several
 * sources are in flight together: one pass over 4 KiB of one source at a
 * time leaves the memory system idle between short streams.
 */
#define VEC_PASS(op, tn, T, d, a, b, c, e, nb, len)                            \
    do {                                                                       \
        T *d_ = (d);                                                           \
        const T *a_ = (a), *b_ = (b), *c_ = (c), *e_ = (e);                    \
        size_t j_ = 0, n_ = (len), nv_ = n_ - n_ % VL;                         \
        if ((nb) == 3) {                                                       \
            for (; j_ < nv_; j_ += VL) {                                       \
                vec_t va_, vb_, vc_, ve_;                                      \
                VLOAD(va_, a_ + j_);                                           \
                VLOAD(vb_, b_ + j_);                                           \
                VLOAD(vc_, c_ + j_);                                           \
                VLOAD(ve_, e_ + j_);                                           \
                va_ = VOP_##op(va_, vb_);                                      \
                va_ = VOP_##op(va_, vc_);                                      \
                va_ = VOP_##op(va_, ve_);                                      \
                VSTORE(d_ + j_, va_);                                          \
            }                                                                  \
            for (; j_ < n_; j_++)                                              \
                d_[j_] = sop_##op##_##tn(                                      \
                    sop_##op##_##tn(sop_##op##_##tn(a_[j_], b_[j_]), c_[j_]),  \
                    e_[j_]);                                                   \
        } else if ((nb) == 2) {                                                \
            for (; j_ < nv_; j_ += VL) {                                       \
                vec_t va_, vb_, vc_;                                           \
                VLOAD(va_, a_ + j_);                                           \
                VLOAD(vb_, b_ + j_);                                           \
                VLOAD(vc_, c_ + j_);                                           \
                va_ = VOP_##op(va_, vb_);                                      \
                va_ = VOP_##op(va_, vc_);                                      \
                VSTORE(d_ + j_, va_);                                          \
            }                                                                  \
            for (; j_ < n_; j_++)                                              \
                d_[j_] =                                                       \
                    sop_##op##_##tn(sop_##op##_##tn(a_[j_], b_[j_]), c_[j_]);  \
        } else {                                                               \
            for (; j_ < nv_; j_ += VL) {                                       \
                vec_t va_, vb_;                                                \
                VLOAD(va_, a_ + j_);                                           \
                VLOAD(vb_, b_ + j_);                                           \
                va_ = VOP_##op(va_, vb_);                                      \
                VSTORE(d_ + j_, va_);                                          \
            }                                                                  \
            for (; j_ < n_; j_++)                                              \
                d_[j_] = sop_##op##_##tn(a_[j_], b_[j_]);                      \
        }                                                                      \
    } while (0)

#define VEC_KERNEL(op, pfx, ATTR, VB, tn, T, UT, AT)                           \
    ATTR static void pfx##_##op##_##tn(void *dst, const void *const *src,      \
                                       int nsrc, size_t n)                     \
    {                                                                          \
        VEC_TYPES(VB, T, UT, AT);                                              \
        enum { VL = VB / sizeof(T), BLOCK = BLOCK_BYTES / sizeof(T) };         \
        T *d = dst;                                                            \
        for (size_t base = 0; base < n; base += BLOCK) {                       \
            size_t len = n - base < BLOCK ? n - base : BLOCK;                  \
            T *db = d + base;                                                  \
            const T *acc = (const T *)src[0] + base;                           \
            for (int k = 1; k < nsrc;) {                                       \
                int nb = nsrc - k < 3 ? nsrc - k : 3;                          \
                const T *s_[3];                                                \
                for (int i = 0; i < 3; i++)                                    \
                    s_[i] = (const T *)src[k + (i < nb ? i : nb - 1)] + base;  \
                VEC_PASS(op, tn, T, db, acc, s_[0], s_[1], s_[2], nb, len);    \
                acc = db;                                                      \
                k += nb;                                                       \
            }                                                                  \
        }                                                                      \
    }

/*
 * float16 and bfloat16: each block is folded in a float buffer. Source k is
 * widened and folded into acc (source 0 widened on the way in, the last
 * source's result rounded straight into dst), so nsrc == 2 never touches
 * acc. One step covers 2 * VL elements, that is one full vector of 16-bit
 * values: WIDEN(v0, v1, p) loads them from p into two float vectors;
 * NARROW(p, v0, v1) rounds both to nearest even and stores them at p.
 * Within a step the float lanes may hold the elements in any order, as long
 * as WIDEN and NARROW agree: the ops are element-wise.
 */
#define VEC_KERNEL16(op, pfx, ATTR, VB, tn, WIDEN, NARROW, TOF, FROMF)         \
    ATTR static void pfx##_##op##_##tn(void *dst, const void *const *src,      \
                                       int nsrc, size_t n)                     \
    {                                                                          \
        VEC_TYPES(VB, float, uint32_t, float);                                 \
        enum {                                                                 \
            VL = VB / sizeof(float),                                           \
            STEP = 2 * VL,                                                     \
            BLOCK = BLOCK_BYTES / sizeof(float)                                \
        };                                                                     \
        float acc[BLOCK] __attribute__((aligned(64)));                         \
        uint16_t *d = dst;                                                     \
        for (size_t base = 0; base < n; base += BLOCK) {                       \
            size_t len = n - base < BLOCK ? n - base : BLOCK;                  \
            size_t nv = len - len % STEP;                                      \
            uint16_t *db = d + base;                                           \
            for (int k = 1; k < nsrc; k++) {                                   \
                const uint16_t *s0 = (const uint16_t *)src[0] + base;          \
                const uint16_t *s = (const uint16_t *)src[k] + base;           \
                int first = k == 1, last = k == nsrc - 1;                      \
                size_t j = 0;                                                  \
                for (; j < nv; j += STEP) {                                    \
                    vec_t a0, a1, b0, b1;                                      \
                    if (first) {                                               \
                        WIDEN(a0, a1, s0 + j);                                 \
                    } else {                                                   \
                        VLOAD(a0, acc + j);                                    \
                        VLOAD(a1, acc + j + VL);                               \
                    }                                                          \
                    WIDEN(b0, b1, s + j);                                      \
                    a0 = VOP_##op(a0, b0);                                     \
                    a1 = VOP_##op(a1, b1);                                     \
                    if (last) {                                                \
                        NARROW(db + j, a0, a1);                                \
                    } else {                                                   \
                        VSTORE(acc + j, a0);                                   \
                        VSTORE(acc + j + VL, a1);                              \
                    }                                                          \
                }                                                              \
                for (; j < len; j++) {                                         \
                    float a = first ? TOF(s0[j]) : acc[j];                     \
                    a = sop_##op##_f32(a, TOF(s[j]));                          \
                    if (last)                                                  \
                        db[j] = FROMF(a);                                      \
                    else                                                       \
                        acc[j] = a;                                            \
                }                                                              \
            }                                                                  \
        }                                                                      \
    }

/*
 * bfloat16 in generic vector code, without cross-lane shuffles: a 32-bit
 * lane holds element 2i in its low half and 2i + 1 in its high half
 * (little-endian), so v0 = lane << 16 widens the even elements and
 * v1 = lane & 0xffff0000 the odd ones. Narrowing rounds to nearest even on
 * the top half and keeps NaNs NaN, exactly as dtype_float_to_bf16() does,
 * then puts the halves back.
 */
#define BF16_WIDEN(v0, v1, p)                                                  \
    do {                                                                       \
        uvec_t w_;                                                             \
        VLOAD(w_, (p));                                                        \
        (v0) = (vec_t)(w_ << 16);                                              \
        (v1) = (vec_t)(w_ & 0xffff0000u);                                      \
    } while (0)
/* r = the float bits u rounded to bfloat16 in the top half (the low half
 * is left over). */
#define BF16_ROUND(r, u)                                                       \
    do {                                                                       \
        typedef int32_t i_t_ __attribute__((vector_size(sizeof(uvec_t))));     \
        uvec_t nan_ = (uvec_t)((i_t_)((u)&0x7fffffffu) > 0x7f800000);          \
        uvec_t up_ = (u) + 0x7fffu + (((u) >> 16) & 1u);                       \
        (r) = (up_ & ~nan_) | (((u) | 0x400000u) & nan_);                      \
    } while (0)
#define BF16_NARROW(p, v0, v1)                                                 \
    do {                                                                       \
        uvec_t u0_ = (uvec_t)(v0), u1_ = (uvec_t)(v1), e_, o_, w_;             \
        BF16_ROUND(e_, u0_);                                                   \
        BF16_ROUND(o_, u1_);                                                   \
        w_ = (o_ & 0xffff0000u) | (e_ >> 16);                                  \
        VSTORE((p), w_);                                                       \
    } while (0)

/* The kernels of one vector variant, and its dispatch table. */
#define VEC_VARIANT(pfx, ATTR, VB)                                             \
    NATIVE_TYPES(VEC_KERNEL, pfx, ATTR, VB)                                    \
    FLOAT_OPS(VEC_KERNEL16, pfx, ATTR, VB, bf16, BF16_WIDEN, BF16_NARROW,      \
              dtype_bf16_to_float, dtype_float_to_bf16)

#define ROW_INT(pfx, op)                                                       \
    [INCOLL_INT8] = pfx##_##op##_i8, [INCOLL_INT16] = pfx##_##op##_i16,        \
    [INCOLL_INT32] = pfx##_##op##_i32, [INCOLL_INT64] = pfx##_##op##_i64,      \
    [INCOLL_UINT8] = pfx##_##op##_u8, [INCOLL_UINT16] = pfx##_##op##_u16,      \
    [INCOLL_UINT32] = pfx##_##op##_u32, [INCOLL_UINT64] = pfx##_##op##_u64
#define ROW_FLOAT(pfx, f16pfx, op)                                             \
    [INCOLL_FLOAT16] = f16pfx##_##op##_f16,                                    \
    [INCOLL_BFLOAT16] = pfx##_##op##_bf16,                                     \
    [INCOLL_FLOAT32] = pfx##_##op##_f32, [INCOLL_FLOAT64] = pfx##_##op##_f64
/* f16pfx names the variant whose float16 kernels this table uses: the
 * generic variant has no portable half conversion and borrows scalar's. */
#define KERNEL_TABLE(pfx, f16pfx)                                              \
    static const kernel_fn_t                                                   \
        pfx##_table[INCOLL_OP_COUNT][INCOLL_DTYPE_COUNT] = {                   \
            [INCOLL_OP_SUM] = {ROW_INT(pfx, sum),                              \
                               ROW_FLOAT(pfx, f16pfx, sum)},                   \
            [INCOLL_OP_PROD] = {ROW_INT(pfx, prod),                            \
                                ROW_FLOAT(pfx, f16pfx, prod)},                 \
            [INCOLL_OP_MIN] = {ROW_INT(pfx, min),                              \
                               ROW_FLOAT(pfx, f16pfx, min)},                   \
            [INCOLL_OP_MAX] = {ROW_INT(pfx, max),                              \
                               ROW_FLOAT(pfx, f16pfx, max)},                   \
            [INCOLL_OP_LAND] = {ROW_INT(pfx, land),                            \
                                ROW_FLOAT(pfx, f16pfx, land)},                 \
            [INCOLL_OP_LOR] = {ROW_INT(pfx, lor),                              \
                               ROW_FLOAT(pfx, f16pfx, lor)},                   \
            [INCOLL_OP_LXOR] = {ROW_INT(pfx, lxor),                            \
                                ROW_FLOAT(pfx, f16pfx, lxor)},                 \
            [INCOLL_OP_BAND] = {ROW_INT(pfx, band)},                           \
            [INCOLL_OP_BOR] = {ROW_INT(pfx, bor)},                             \
            [INCOLL_OP_BXOR] = {ROW_INT(pfx, bxor)},                           \
    }

KERNEL_TABLE(scalar, scalar);

/* The generic variant: 16-byte vectors, SSE2 on x86-64, NEON on arm64. */
#define ATTR_GENERIC
VEC_VARIANT(vec128, ATTR_GENERIC, 16)
KERNEL_TABLE(vec128, scalar);

#ifdef REDUCE_X86
/* float16 with F16C (AVX2 machines) and AVX-512F: both convert with
 * round-to-nearest-even and quiet NaNs like dtype_float_to_half(). */
#define F16_WIDEN_256(v0, v1, p)                                               \
    do {                                                                       \
        const __m128i *q_ = (const __m128i *)(p);                              \
        (v0) = (vec_t)_mm256_cvtph_ps(_mm_loadu_si128(q_));                    \
        (v1) = (vec_t)_mm256_cvtph_ps(_mm_loadu_si128(q_ + 1));                \
    } while (0)
#define F16_NARROW_256(p, v0, v1)                                              \
    do {                                                                       \
        __m128i *q_ = (__m128i *)(p);                                          \
        _mm_storeu_si128(q_, _mm256_cvtps_ph((__m256)(v0), F16_RNE));          \
        _mm_storeu_si128(q_ + 1, _mm256_cvtps_ph((__m256)(v1), F16_RNE));      \
    } while (0)
#define F16_WIDEN_512(v0, v1, p)                                               \
    do {                                                                       \
        const __m256i *q_ = (const __m256i *)(p);                              \
        (v0) = (vec_t)_mm512_cvtph_ps(_mm256_loadu_si256(q_));                 \
        (v1) = (vec_t)_mm512_cvtph_ps(_mm256_loadu_si256(q_ + 1));             \
    } while (0)
#define F16_NARROW_512(p, v0, v1)                                              \
    do {                                                                       \
        __m256i *q_ = (__m256i *)(p);                                          \
        _mm256_storeu_si256(q_, _mm512_cvtps_ph((__m512)(v0), F16_RNE));       \
        _mm256_storeu_si256(q_ + 1, _mm512_cvtps_ph((__m512)(v1), F16_RNE));   \
    } while (0)
/* Round to nearest even, whatever MXCSR says. */
#define F16_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

#define ATTR_AVX2 __attribute__((target("avx2,f16c")))
VEC_VARIANT(avx2, ATTR_AVX2, 32)
FLOAT_OPS(VEC_KERNEL16, avx2, ATTR_AVX2, 32, f16, F16_WIDEN_256, F16_NARROW_256,
          dtype_half_to_float, dtype_float_to_half)
KERNEL_TABLE(avx2, avx2);

#define ATTR_AVX512                                                            \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c")))
VEC_VARIANT(avx512, ATTR_AVX512, 64)
FLOAT_OPS(VEC_KERNEL16, avx512, ATTR_AVX512, 64, f16, F16_WIDEN_512,
          F16_NARROW_512, dtype_half_to_float, dtype_float_to_half)
KERNEL_TABLE(avx512, avx512);
#endif

/* ------------------------------------------------------------------------
 * Variant selection. */
typedef struct {
    const char *name;
    const kernel_fn_t (*table)[INCOLL_DTYPE_COUNT];
    int (*supported)(void);
} impl_t;

static int always(void)
{
    return 1;
}

#ifdef REDUCE_X86
static int have_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}

static int have_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && have_avx2();
}
#endif

/* Best first. */
static const impl_t impls[] = {
#ifdef REDUCE_X86
    {"avx512", avx512_table, have_avx512},
    {"avx2", avx2_table, have_avx2},
    {"sse2", vec128_table, always},
#else
    {"vec128", vec128_table, always},
#endif
    {"scalar", scalar_table, always},
};
#define NIMPLS (sizeof(impls) / sizeof(impls[0]))

/* Set once at load time (and by reduce_select_impl() in tests and
 * benchmarks), read-only afterwards. */
static const impl_t *impl_current;

static const impl_t *impl_best(void)
{
    for (size_t i = 0; i < NIMPLS; i++)
        if (impls[i].supported())
            return &impls[i];
    return &impls[NIMPLS - 1];
}

__attribute__((constructor)) static void reduce_init(void)
{
    impl_current = impl_best();
}

/*
 * Forces the variant reduce_n() uses: "avx512", "avx2", "sse2", "scalar",
 * or NULL for the best one the CPU supports. Returns 0, or -1 (and changes
 * nothing) if the name is unknown or the CPU lacks it. Not thread-safe: for
 * tests and benchmarks, before any reduction runs (declared in
 * common/dtype.h).
 */
int reduce_select_impl(const char *name)
{
    if (name == NULL) {
        impl_current = impl_best();
        return 0;
    }
    for (size_t i = 0; i < NIMPLS; i++) {
        if (strcmp(name, impls[i].name) == 0) {
            if (!impls[i].supported())
                return -1;
            impl_current = &impls[i];
            return 0;
        }
    }
    return -1;
}

const char *reduce_impl_name(void)
{
    if (impl_current == NULL)
        reduce_init();
    return impl_current->name;
}

/* Kept out of line so the hot path stays small. */
__attribute__((noinline, cold)) static void bad_args(incoll_op_t op,
                                                     incoll_dtype_t dtype)
{
    incoll_error("reduce: op %s (%d) does not apply to dtype %s (%d); dst "
                 "left untouched",
                 incoll_op_name(op), (int)op, incoll_dtype_name(dtype),
                 (int)dtype);
}

static void reduce_with(const kernel_fn_t (*table)[INCOLL_DTYPE_COUNT],
                        incoll_op_t op, incoll_dtype_t dtype, void *dst,
                        const void *const *src, int nsrc, size_t count)
{
    kernel_fn_t fn;

    if ((unsigned)op >= INCOLL_OP_COUNT ||
        (unsigned)dtype >= INCOLL_DTYPE_COUNT ||
        (fn = table[op][dtype]) == NULL) {
        bad_args(op, dtype);
        return;
    }
    if (nsrc < 1 || count == 0)
        return;
    if (nsrc == 1) {
        if (dst != src[0])
            memcpy(dst, src[0], count * incoll_dtype_size(dtype));
        return;
    }
    fn(dst, src, nsrc, count);
}

void reduce_n(incoll_op_t op, incoll_dtype_t dtype, void *dst,
              const void *const *src, int nsrc, size_t count)
{
    if (impl_current == NULL)
        reduce_init();
    reduce_with(impl_current->table, op, dtype, dst, src, nsrc, count);
}

void reduce_n_scalar(incoll_op_t op, incoll_dtype_t dtype, void *dst,
                     const void *const *src, int nsrc, size_t count)
{
    reduce_with(scalar_table, op, dtype, dst, src, nsrc, count);
}
