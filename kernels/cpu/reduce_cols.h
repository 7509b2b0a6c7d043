/* reduce_cols.h: private to kernels/cpu. Sums over a dim that is outer to a contiguous block of
 * kept elements (Linear's bias gradient: the sum over the batch of a (M, N) gradient). */
#ifndef MS_REDUCE_COLS_H
#define MS_REDUCE_COLS_H

#include <stdbool.h>

#include "kernels/kernel_table.h"

/* reduce_rows' RSUM (mean: divided by n) of every row of g when the kept dims end in a contiguous
 * block of at least a few elements, the reduced dim outside it: whole contiguous runs are added
 * into a float64 accumulator row, then stored in out_dt, rounding once. dt F32, F64, BF16 or F16.
 * Returns false, doing nothing, when g is not so shaped (the caller walks the rows instead). */
bool ms_k_reduce_cols(const ms_k_rows *g, ms_k_dtype dt, const void *src, int mean, void *out,
                      ms_k_dtype out_dt);

#endif
