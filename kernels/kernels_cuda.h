/* kernels_cuda.h: the CUDA bodies of the kernels (kernels/cuda/, one .cu per family), C-callable. They take
 * device pointers, element counts and element strides like their CPU counterparts in
 * kernels.h, plus the stream to queue on (a cudaStream_t passed as void *, NULL: the default
 * stream). Elementwise kernels take the whole strided geometry at once (one launch per op,
 * never one per row). Each returns 0 or the cudaError_t of its launch. */
#ifndef MS_KERNELS_CUDA_H
#define MS_KERNELS_CUDA_H

#include <stdint.h>

#include "kernels/kernel_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- conversions (kernels/cuda/cast.cu) ---- */
/* dst (operand 0) = src (operand 1) converted as ms_k_cast does, bit for bit. */
int ms_kc_cast(const ms_k_geom *g, void *dst, ms_k_dtype dt, const void *src, ms_k_dtype st,
               void *stream);

/* ---- elementwise (kernels/cuda/elementwise.cu): ms_k_binary / ms_k_unary's semantics ---- */
/* out (operand 0) = a (1) op b (2); a NULL a or b reads the scalar sa or sb instead. */
int ms_kc_binary(ms_k_binop op, ms_k_dtype dt, const ms_k_geom *g, void *out, const void *a,
                 const ms_k_scalar *sa, const void *b, const ms_k_scalar *sb, void *stream);
int ms_kc_unary(ms_k_unop op, ms_k_dtype dt, const ms_k_geom *g, void *out, const void *a,
                void *stream);
/* out (0) = a (1) clamped to [lo, hi] (either NULL: no bound), as ms_k_clamp. */
int ms_kc_clamp(ms_k_dtype dt, const ms_k_geom *g, void *out, const void *a, const double *lo,
                const double *hi, void *stream);
/* out (0) = cond (1, bool) ? a (2) : b (3); a NULL a or b reads the scalar sa or sb. */
int ms_kc_where(ms_k_dtype dt, const ms_k_geom *g, void *out, const uint8_t *cond, const void *a,
                const ms_k_scalar *sa, const void *b, const ms_k_scalar *sb, void *stream);

/* ---- reductions (kernels/cuda/reduce.cu): ms_k_reduce_row's semantics for every row ---- */
/* Rows of n elements `stride` apart; row r starts at the offset its index has in the outer
 * geometry (ndim dims, row-major). One block per row. */
typedef struct ms_kc_rows {
  int ndim;
  int64_t shape[MS_K_MAX_DIMS];
  int64_t strides[MS_K_MAX_DIMS];
  int64_t rows, n, stride;
} ms_kc_rows;
/* op is RSUM, RPROD, RMAX, RMIN, RARGMAX or RARGMIN over dt (F32, F64, I64); out[r] (contiguous,
 * dtype out_dt) gets the row's value (divided by n when mean), or its index for the arg ops;
 * indices (may be NULL) the 0-based position of max/min. Floating sums accumulate in double,
 * int64 ones wrap; max/min propagate NaN, the first extreme (or NaN) wins. */
int ms_kc_reduce_rows(ms_k_redop op, ms_k_dtype dt, const ms_kc_rows *g, const void *src, int mean,
                      void *out, ms_k_dtype out_dt, int64_t *indices, void *stream);
/* var / std (op RMOMENTS: the sum of squared deviations over n - correction, NaN when that is
 * not positive; root: its square root) and p-norms (op RPOWSUM: ms_k_reduce_row's terms, then
 * the p-th root; p = INFINITY: max |x|, NaN propagating) of every row, dt F32 or F64. */
typedef struct ms_kc_stat {
  ms_k_redop op;
  double p, correction;
  int root;
} ms_kc_stat;
int ms_kc_reduce_stat_rows(const ms_kc_stat *st, ms_k_dtype dt, const ms_kc_rows *g, const void *src,
                           void *out, ms_k_dtype out_dt, void *stream);

/* ---- NN ops (kernels/cuda/nn_ops.cu): the CPU bodies' formulas (kernels/cpu/nn_ops_body.h),
 * F32 and F64, contiguous device buffers; the other NN kernels are slots of kernel_table.h ---- */
/* A convolution's bias over its (n, c, hw) output: y[n, c, :] += b[c]; and the bias gradient,
 * gb[c] = sum over n and hw of g[n, c, :], one block per channel (float32 sums in double). dt: F32
 * or F64. */
int ms_kc_channel_bias_add(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, void *y, const void *b,
                           void *stream);
int ms_kc_channel_sum(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, const void *g, void *gb,
                      void *stream);


#ifdef __cplusplus
}
#endif

#endif
