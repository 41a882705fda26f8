/*
 * Datatypes and reduction kernels.
 *
 * reduce_n() is the one reduction entry point used by the aggregation node,
 * the host-based algorithms and the simulator. It folds sources in index
 * order (dst = ((src[0] op src[1]) op src[2]) ...), element by element, so
 * floating-point results depend only on the order of the sources, never on
 * when packets arrived, and are bitwise identical everywhere.
 */
#ifndef INCOLL_DTYPE_H
#define INCOLL_DTYPE_H

#include "incoll.h"

#include <stddef.h>
#include <stdint.h>

/*
 * dst[i] = src[0][i] op src[1][i] op ... op src[nsrc-1][i] for i < count,
 * folded left to right. nsrc >= 1; with nsrc == 1 it is a copy. dst may
 * alias src[0] (and only src[0]). float16/bfloat16 are widened to float,
 * folded in float in the same order, and rounded to nearest-even once.
 * LAND/LOR/LXOR yield 0 or 1 of the element type. The caller has checked
 * incoll_op_valid(op, dtype).
 */
void reduce_n(incoll_op_t op, incoll_dtype_t dtype, void *dst,
              const void *const *src, int nsrc, size_t count);

/* Same as reduce_n() but always through the plain scalar loops; the tests
 * compare the two, and the benchmark reports both. */
void reduce_n_scalar(incoll_op_t op, incoll_dtype_t dtype, void *dst,
                     const void *const *src, int nsrc, size_t count);

/* Name of the kernel variant reduce_n() picked at run time ("avx2",
 * "sse2", "scalar", ...). */
const char *reduce_impl_name(void);
/* Forces a kernel variant by name ("scalar", "sse2", "avx2", "avx512"), or
 * back to the run-time choice with NULL; -1 if this CPU or build lacks it.
 * For tests and `incoll bench kernel --impl`. */
int reduce_select_impl(const char *name);

/* Conversions used by the kernels and the tests. */
float dtype_half_to_float(uint16_t h);
uint16_t dtype_float_to_half(float f);
float dtype_bf16_to_float(uint16_t b);
uint16_t dtype_float_to_bf16(float f);

/* Parses "float32", "int8", ... and "sum", "max", ...; -1 if unknown. */
int dtype_parse(const char *name);
int op_parse(const char *name);

#endif
