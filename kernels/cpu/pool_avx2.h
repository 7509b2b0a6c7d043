/* pool_avx2.h: private to kernels/cpu. The AVX2 rows of 2x2 stride-2 float32 max pooling that
 * pool.c hands its common case to; each does a multiple of its vector width of the windows in a
 * row pair and returns how many, pool.c's scalar loop finishing the row. */
#ifndef MS_POOL_AVX2_H
#define MS_POOL_AVX2_H

#include <stdint.h>

/* Input rows r0, r1 (row 2 oh and 2 oh + 1 of a plane, base = the flat index of r0[0] in it):
 * o[ow] = the window's max in PyTorch's scan order (a later value wins when greater or NaN) and,
 * when ix is not NULL, ix[ow] = its flat index. */
int64_t ms_k_max2x2_row_avx2(const float *r0, const float *r1, int64_t ow_count, float *o,
                             int64_t *ix, int64_t base, int64_t w);

/* The backward of one output row: each window's four cells of r0, r1 get 0.0f + g[ow] at the
 * index at[ow] and zeros elsewhere; *bad becomes nonzero when an index is outside its window. */
int64_t ms_k_max2x2_backward_row_avx2(float *r0, float *r1, const float *g, const int64_t *at,
                                      int64_t ow_count, int64_t base, int64_t w, int *bad);

#endif
