/*
 * Datatypes and operations: sizes, names, MPI's validity rules, and the
 * float16/bfloat16 conversions used by the reduction kernels (reduce.c).
 */
#include "common/dtype.h"

#include <string.h>

/* One row per dtype, in enum order (the values are part of the wire
 * format, so the table is indexed by them directly). */
static const struct {
    const char *name;
    size_t size;
    int is_int; /* integer types accept the bitwise ops */
} dtype_info[INCOLL_DTYPE_COUNT] = {
    [INCOLL_INT8] = {"int8", 1, 1},
    [INCOLL_INT16] = {"int16", 2, 1},
    [INCOLL_INT32] = {"int32", 4, 1},
    [INCOLL_INT64] = {"int64", 8, 1},
    [INCOLL_UINT8] = {"uint8", 1, 1},
    [INCOLL_UINT16] = {"uint16", 2, 1},
    [INCOLL_UINT32] = {"uint32", 4, 1},
    [INCOLL_UINT64] = {"uint64", 8, 1},
    [INCOLL_FLOAT16] = {"float16", 2, 0},
    [INCOLL_BFLOAT16] = {"bfloat16", 2, 0},
    [INCOLL_FLOAT32] = {"float32", 4, 0},
    [INCOLL_FLOAT64] = {"float64", 8, 0},
};

static const char *const op_names[INCOLL_OP_COUNT] = {
    [INCOLL_OP_SUM] = "sum",   [INCOLL_OP_PROD] = "prod",
    [INCOLL_OP_MIN] = "min",   [INCOLL_OP_MAX] = "max",
    [INCOLL_OP_LAND] = "land", [INCOLL_OP_LOR] = "lor",
    [INCOLL_OP_LXOR] = "lxor", [INCOLL_OP_BAND] = "band",
    [INCOLL_OP_BOR] = "bor",   [INCOLL_OP_BXOR] = "bxor",
};

/* Casting through unsigned also rejects negative values read off the wire. */
static int dtype_ok(incoll_dtype_t dtype)
{
    return (unsigned)dtype < INCOLL_DTYPE_COUNT;
}

static int op_ok(incoll_op_t op)
{
    return (unsigned)op < INCOLL_OP_COUNT;
}

INCOLL_API size_t incoll_dtype_size(incoll_dtype_t dtype)
{
    return dtype_ok(dtype) ? dtype_info[dtype].size : 0;
}

INCOLL_API const char *incoll_dtype_name(incoll_dtype_t dtype)
{
    return dtype_ok(dtype) ? dtype_info[dtype].name : "unknown";
}

INCOLL_API const char *incoll_op_name(incoll_op_t op)
{
    return op_ok(op) ? op_names[op] : "unknown";
}

INCOLL_API int incoll_op_valid(incoll_op_t op, incoll_dtype_t dtype)
{
    if (!op_ok(op) || !dtype_ok(dtype))
        return 0;
    switch (op) {
    case INCOLL_OP_BAND:
    case INCOLL_OP_BOR:
    case INCOLL_OP_BXOR:
        return dtype_info[dtype].is_int;
    default:
        return 1;
    }
}

int dtype_parse(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < INCOLL_DTYPE_COUNT; i++)
        if (strcmp(name, dtype_info[i].name) == 0)
            return i;
    /* The C spellings people type without thinking. */
    if (strcmp(name, "float") == 0)
        return INCOLL_FLOAT32;
    if (strcmp(name, "double") == 0)
        return INCOLL_FLOAT64;
    if (strcmp(name, "half") == 0)
        return INCOLL_FLOAT16;
    return -1;
}

int op_parse(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < INCOLL_OP_COUNT; i++)
        if (strcmp(name, op_names[i]) == 0)
            return i;
    return -1;
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/*
 * Exact: every binary16 value is a float. NaNs come back quiet with their
 * payload in the top mantissa bits, which is what F16C's vcvtph2ps does, so
 * the SIMD kernels and this function agree bit for bit.
 */
float dtype_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) {
        if (mant == 0)
            return bits_float(sign | 0x7f800000u);
        return bits_float(sign | 0x7fc00000u | (mant << 13));
    }
    if (exp == 0) {
        /* Zero or subnormal: mant * 2^-24, exact in float. */
        float f = (float)mant * 0x1p-24f;
        return bits_float(sign | float_bits(f));
    }
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

/*
 * Rounds to nearest, ties to even, including into and out of the subnormal
 * range; values at or above 65520 become infinity. NaNs stay NaN: quiet,
 * payload truncated to the top 10 bits, as F16C's vcvtps2ph does.
 */
uint16_t dtype_float_to_half(float f)
{
    uint32_t x = float_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;

    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u)
            return sign | 0x7c00u;
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) /* 65520 = 65504 + half an ulp: ties to inf */
        return sign | 0x7c00u;
    if (ax >= 0x38800000u) {
        /* Normal half (>= 2^-14): rebias the exponent by 127 - 15, then
         * round at bit 13; a carry into the exponent is still correct. */
        uint32_t m = ax - 0x38000000u;
        m += 0xfffu + ((m >> 13) & 1u);
        return (uint16_t)(sign | (m >> 13));
    }
    {
        /* Subnormal half: round(mant * 2^(exp - 126)) with the implicit
         * bit; below 2^-25 everything rounds to zero. */
        uint32_t exp = ax >> 23;
        uint32_t mant, shift, q, rem, halfway;
        if (exp < 102)
            return sign;
        mant = (ax & 0x7fffffu) | 0x800000u;
        shift = 126 - exp; /* 14..24 */
        q = mant >> shift;
        rem = mant & ((1u << shift) - 1);
        halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
}

float dtype_bf16_to_float(uint16_t b)
{
    return bits_float((uint32_t)b << 16);
}

/* Round to nearest even on the top 16 bits; a NaN is kept NaN by setting the
 * quiet bit, since rounding could otherwise carry its payload into inf. */
uint16_t dtype_float_to_bf16(float f)
{
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
