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

/* ---- NN ops (kernels/cuda/nn_ops.cu): the CPU bodies' formulas (kernels/cpu/nn_ops_body.h),
 * F32 and F64, contiguous device buffers; sums in double as on the CPU ---- */
int ms_kc_softmax(ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner, const void *x, void *y,
                  int log, void *stream);
int ms_kc_softmax_backward(ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner, const void *y,
                           const void *g, void *gx, int log, void *stream);
int ms_kc_masked_scale(ms_k_dtype dt, int64_t n, const void *x, const uint8_t *mask, double scale,
                       void *y, void *stream);
/* A convolution's bias over its (n, c, hw) output: y[n, c, :] += b[c]; and the bias gradient,
 * gb[c] = sum over n and hw of g[n, c, :], one block per channel (float32 sums in double). dt: F32
 * or F64. */
int ms_kc_channel_bias_add(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, void *y, const void *b,
                           void *stream);
int ms_kc_channel_sum(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, const void *g, void *gb,
                      void *stream);


/* a->target and a->weight are device pointers here. A target that is neither ignore_index nor a
 * class gives a NaN term (weight 0) and is reported in *bad. */
int ms_kc_nll_rows(ms_k_dtype dt, const ms_k_nll_args *a, const void *logp, void *nll, void *wt,
                   void *smooth, ms_k_bad_value *bad, void *stream);
/* The reduced loss of nll_rows' terms in one block: out[0] = ((1 - s) sum(nll) + s / C sum(smooth))
 * (divided by sum(wt) when mean), summed in double; *sw receives sum(wt). smooth may be NULL. */
int ms_kc_nll_reduce(ms_k_dtype dt, int64_t n, const void *nll, const void *wt, const void *smooth,
                     double s, int64_t C, int mean, void *out, double *sw, void *stream);
int ms_kc_nll_backward(ms_k_dtype dt, const ms_k_nll_args *a, const void *logp, const void *g,
                       int64_t gs, double nll_scale, double smooth_scale, double smoothing, void *gx,
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

/* ---- pooling (kernels/cuda/pool.cu): ms_k_max_pool2d_*'s semantics ---- */
int ms_kc_max_pool2d_forward(ms_k_dtype dt, const ms_k_pool2d_geom *g, const void *x, void *out,
                             int64_t *indices, void *stream);
int ms_kc_max_pool2d_backward(ms_k_dtype dt, const ms_k_pool2d_geom *g, const void *gout,
                              const int64_t *indices, void *gx, void *stream);
/* ms_k_avg_pool2d_*'s semantics; the six window arrays of win are device pointers. The
 * backward gathers (no atomics): the CPU's order and rounding. */
int ms_kc_avg_pool2d_forward(ms_k_dtype dt, const ms_k_pool2d_geom *g, const ms_k_pool_windows *win,
                             const void *x, void *out, void *stream);
int ms_kc_avg_pool2d_backward(ms_k_dtype dt, const ms_k_pool2d_geom *g, const ms_k_pool_windows *win,
                              const void *gout, void *gx, void *stream);

/* ---- activations (kernels/cuda/activation.cu): ms_k_activation*'s semantics ---- */
int ms_kc_activation(ms_k_act act, ms_k_dtype dt, int64_t n, const void *x, void *y, void *stream);
int ms_kc_activation_backward(ms_k_act act, ms_k_dtype dt, int64_t n, const void *x, const void *g,
                              void *gx, void *stream);

/* ---- embedding (kernels/cuda/embedding.cu): ms_k_embedding*'s semantics (idx on the device,
 * already checked); the backward is deterministic (one thread per column, indices in order) ---- */
int ms_kc_embedding(ms_k_dtype dt, int64_t n, int64_t D, const int64_t *idx, int64_t base,
                    const void *w, void *out, void *stream);
int ms_kc_embedding_backward(ms_k_dtype dt, int64_t n, int64_t D, const int64_t *idx, int64_t base,
                             int64_t padding_idx, const void *g, void *gw, void *stream);

/* ---- normalization (kernels/cuda/norm.cu): ms_k_layer_norm* and ms_k_batch_norm*'s semantics,
 * sums in double (in a tree per row or channel, so the last bits may differ from the CPU's) ---- */
int ms_kc_layer_norm(ms_k_dtype dt, int64_t M, int64_t N, const void *x, const void *w,
                     const void *b, double eps, void *y, void *mean, void *rstd, void *stream);
int ms_kc_layer_norm_backward(ms_k_dtype dt, int64_t M, int64_t N, const void *x, const void *g,
                              const void *mean, const void *rstd, const void *w, void *gx, void *gw,
                              void *gb, void *stream);
int ms_kc_batch_norm_stats(ms_k_dtype dt, int64_t N, int64_t C, int64_t inner, const void *x,
                           void *mean, void *var, void *stream);
int ms_kc_batch_norm_apply(ms_k_dtype dt, int64_t N, int64_t C, int64_t inner, const void *x,
                           const void *mean, const void *invstd, const void *w, const void *b,
                           void *y, void *stream);
int ms_kc_batch_norm_backward(ms_k_dtype dt, int64_t N, int64_t C, int64_t inner, const void *x,
                              const void *g, const void *mean, const void *invstd, const void *w,
                              int training, void *gx, void *gw, void *gb, void *stream);

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
