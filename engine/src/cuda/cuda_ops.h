/* cuda_ops.h (engine-internal): the device side of the engine's ops, called by the native op
 * files (native/copy.c, native/elementwise.c, native/matmul.c, ...) and random.c at their
 * device-dispatch points once every rule (dtype, shape, broadcasting) is settled. Without CUDA, cuda_absent.c answers these
 * with an error (no CUDA tensor can exist there, so they are never reached). */
#ifndef MS_CUDA_OPS_H
#define MS_CUDA_OPS_H

#include "kernels/kernels.h"
#include "moonshard/tensor_core.h"

/* c = alpha * a @ b + beta * c for 2-D float32/float64/bfloat16/float16 operands on one device
 * (cuBLAS; 16-bit ones through cublasGemmEx with float32 accumulation, rounded once into c); any
 * strides (a matrix with neither unit row nor unit column stride is copied first). */
ms_status ms_cuda_gemm(double alpha, ms_tensor *a, ms_tensor *b, double beta, ms_tensor *c);

/* ---- NN ops and optimizer steps (engine/src/cuda/cuda_nn.c): the CPU kernels' arguments, with
 * contiguous tensors on one CUDA device in place of pointers ---- */
ms_status ms_cuda_softmax(ms_tensor *x, ms_tensor *y, int64_t outer, int64_t C, int64_t inner, int log);
ms_status ms_cuda_softmax_backward(ms_tensor *y, ms_tensor *g, ms_tensor *gx, int64_t outer, int64_t C,
                                   int64_t inner, int log);
/* mask (uint8) = the Philox bernoulli draws of ms_k_philox_bernoulli with one probability keep. */
ms_status ms_cuda_bernoulli_mask(ms_tensor *mask, uint64_t seed, uint64_t offset, double keep);
ms_status ms_cuda_masked_scale(ms_tensor *x, ms_tensor *mask, double scale, ms_tensor *y);
/* The random fills of engine/src/random.c: out contiguous on a CUDA device, of the compute dtype
 * (uniform and normal: float32 or float64; randint: int64; bernoulli: uint8, p contiguous float64
 * probabilities of out's shape on out's device), gets the values ms_k_philox_* gives on the CPU
 * for the same (seed, offset) (see kernels/kernels_cuda.h for normal's last bits). */
ms_status ms_cuda_philox_uniform(ms_tensor *out, uint64_t seed, uint64_t offset, double low, double high);
ms_status ms_cuda_philox_normal(ms_tensor *out, uint64_t seed, uint64_t offset, double mean, double std);
ms_status ms_cuda_philox_randint(ms_tensor *out, uint64_t seed, uint64_t offset, int64_t low, int64_t high);
ms_status ms_cuda_philox_bernoulli(ms_tensor *out, uint64_t seed, uint64_t offset, ms_tensor *p);
/* a->target and a->weight point into device tensors. */
ms_status ms_cuda_nll_rows(const ms_k_nll_args *a, ms_tensor *logp, ms_tensor *nll, ms_tensor *wt,
                           ms_tensor *smooth);
/* out (0-dim, nll's dtype) = the reduced loss of the terms; sw (0-dim float64) = sum(wt). */
ms_status ms_cuda_nll_reduce(ms_tensor *nll, ms_tensor *wt, ms_tensor *smooth, double s, int64_t C, bool mean,
                             ms_tensor *out, ms_tensor *sw);
ms_status ms_cuda_nll_backward(const ms_k_nll_args *a, ms_tensor *logp, ms_tensor *g, int64_t gs,
                               double nll_scale, double smooth_scale, double smoothing, ms_tensor *gx);
ms_status ms_cuda_max_pool2d(const ms_k_pool2d_geom *g, ms_tensor *x, ms_tensor *out, ms_tensor *indices);
ms_status ms_cuda_max_pool2d_backward(const ms_k_pool2d_geom *g, ms_tensor *gout, ms_tensor *indices,
                                      ms_tensor *gx);
/* win: the host's window arrays (copied to the device here). */
ms_status ms_cuda_avg_pool2d(const ms_k_pool2d_geom *g, const ms_k_pool_windows *win, ms_tensor *x, ms_tensor *out);
ms_status ms_cuda_avg_pool2d_backward(const ms_k_pool2d_geom *g, const ms_k_pool_windows *win, ms_tensor *gout,
                                      ms_tensor *gx);
/* op: the name errors give (the nn layer's, e.g. "gelu backward") */
ms_status ms_cuda_activation(const char *op, ms_k_act act, ms_tensor *x, ms_tensor *y);
ms_status ms_cuda_activation_backward(const char *op, ms_k_act act, ms_tensor *x, ms_tensor *g, ms_tensor *gx);
/* idx: the checked int64 indices on w's device; gw zeroed by the caller. */
ms_status ms_cuda_embedding(ms_tensor *idx, int64_t base, ms_tensor *w, ms_tensor *out);
ms_status ms_cuda_embedding_backward(ms_tensor *idx, int64_t base, int64_t padding_idx, ms_tensor *g, ms_tensor *gw);
/* w, b, gx, gw, gb may be NULL. */
ms_status ms_cuda_layer_norm(int64_t M, int64_t N, ms_tensor *x, ms_tensor *w, ms_tensor *b, double eps,
                             ms_tensor *y, ms_tensor *mean, ms_tensor *rstd);
ms_status ms_cuda_layer_norm_backward(int64_t M, int64_t N, ms_tensor *x, ms_tensor *g, ms_tensor *mean,
                                      ms_tensor *rstd, ms_tensor *w, ms_tensor *gx, ms_tensor *gw, ms_tensor *gb);
ms_status ms_cuda_batch_norm_stats(int64_t N, int64_t C, int64_t inner, ms_tensor *x, ms_tensor *mean,
                                   ms_tensor *var);
ms_status ms_cuda_batch_norm_apply(int64_t N, int64_t C, int64_t inner, ms_tensor *x, ms_tensor *mean,
                                   ms_tensor *invstd, ms_tensor *w, ms_tensor *b, ms_tensor *y);
ms_status ms_cuda_batch_norm_backward(int64_t N, int64_t C, int64_t inner, ms_tensor *x, ms_tensor *g,
                                      ms_tensor *mean, ms_tensor *invstd, ms_tensor *w, int training, ms_tensor *gx,
                                      ms_tensor *gw, ms_tensor *gb);
/* Optimizer steps: grad contiguous; state tensors the options do not use are NULL. */
ms_status ms_cuda_adadelta_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg,
                                ms_tensor *acc_delta, const ms_k_adadelta_hp *hp);
ms_status ms_cuda_sgd_step(ms_tensor *param, ms_tensor *grad, ms_tensor *momentum_buffer, const ms_k_sgd_hp *hp);
ms_status ms_cuda_adam_step(ms_tensor *param, ms_tensor *grad, ms_tensor *exp_avg, ms_tensor *exp_avg_sq,
                            ms_tensor *max_exp_avg_sq, const ms_k_adam_hp *hp);
ms_status ms_cuda_adagrad_step(ms_tensor *param, ms_tensor *grad, ms_tensor *state_sum, const ms_k_adagrad_hp *hp);
ms_status ms_cuda_rmsprop_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg, ms_tensor *grad_avg,
                               ms_tensor *momentum_buffer, const ms_k_rmsprop_hp *hp);

/* conv2d through cuDNN (engine/src/cuda/cuda_conv.c): contiguous NCHW tensors of one device and
 * dtype; b, gx, gw, gb may be NULL. */
ms_status ms_cuda_conv2d_forward(const ms_k_conv2d_geom *g, ms_tensor *x, ms_tensor *w, ms_tensor *b,
                                 ms_tensor *out);
ms_status ms_cuda_conv2d_backward(const ms_k_conv2d_geom *g, ms_tensor *x, ms_tensor *w, ms_tensor *gout,
                                  ms_tensor *gx, ms_tensor *gw, ms_tensor *gb);

#endif
