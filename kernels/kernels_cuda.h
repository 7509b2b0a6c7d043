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
 * F32 and F64, contiguous device buffers; sums in double as on the CPU; the other NN kernels are
 * slots of kernel_table.h ---- */
int ms_kc_masked_scale(ms_k_dtype dt, int64_t n, const void *x, const uint8_t *mask, double scale,
                       void *y, void *stream);
/* A convolution's bias over its (n, c, hw) output: y[n, c, :] += b[c]; and the bias gradient,
 * gb[c] = sum over n and hw of g[n, c, :], one block per channel (float32 sums in double). dt: F32
 * or F64. */
int ms_kc_channel_bias_add(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, void *y, const void *b,
                           void *stream);
int ms_kc_channel_sum(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, const void *g, void *gb,
                      void *stream);

/* ---- random fills (kernels/cuda/random.cu): the ms_k_philox_* fills of kernels.h, element for
 * element, for the same (seed, offset); contiguous device buffers. Bitwise the CPU's values except
 * normal's, whose log/sin/cos are libdevice's (float64 may differ in the last bits; float32,
 * rounded from double, almost never does) ---- */
/* dt MS_K_F32 (low and high rounded to float first, as the CPU's f32 fill takes them) or MS_K_F64. */
int ms_kc_philox_uniform(ms_k_dtype dt, uint64_t seed, uint64_t offset, int64_t n, void *out,
                         double low, double high, void *stream);
int ms_kc_philox_normal(ms_k_dtype dt, uint64_t seed, uint64_t offset, int64_t n, void *out,
                        double mean, double std, void *stream);
int ms_kc_philox_randint_i64(uint64_t seed, uint64_t offset, int64_t n, int64_t *out, int64_t low,
                             int64_t high, void *stream);
/* One probability p for all (dropout's mask): a seed gives the same mask on either device. */
int ms_kc_philox_bernoulli(uint64_t seed, uint64_t offset, int64_t n, double p, uint8_t *out,
                           void *stream);
/* out[i] = 1 with probability p[i * ps] (p: device float64 values in [0, 1]). */
int ms_kc_philox_bernoulli_p(uint64_t seed, uint64_t offset, int64_t n, const double *p, int64_t ps,
                             uint8_t *out, void *stream);

/* ---- fused optimizer steps (kernels/cuda/optim.cu): kernels/cpu/optim.c's formulas, in double,
 * rounded once per stored value ---- */
int ms_kc_adadelta_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *square_avg,
                        void *acc_delta, const ms_k_adadelta_hp *hp, void *stream);
int ms_kc_sgd_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *momentum_buffer,
                   const ms_k_sgd_hp *hp, void *stream);
int ms_kc_adam_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *exp_avg,
                    void *exp_avg_sq, void *max_exp_avg_sq, const ms_k_adam_hp *hp, void *stream);
int ms_kc_adagrad_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *state_sum,
                       const ms_k_adagrad_hp *hp, void *stream);
int ms_kc_rmsprop_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *square_avg,
                       void *grad_avg, void *momentum_buffer, const ms_k_rmsprop_hp *hp, void *stream);

#ifdef __cplusplus
}
#endif

#endif
