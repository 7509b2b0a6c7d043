/* nn_native.h (engine-internal): the native nn ops (the .c files of engine/src/nn), below
 * autograd. Each checks its arguments (errors name the op and the argument), computes its
 * forward or backward and knows nothing of graphs: no node, no grad mode. The public ops of
 * nn_ops.h and nn_conv.h (engine/src/autograd/grad_<file>.c) call them and record the graph.
 *
 * Ownership, as everywhere in the engine: arguments are borrowed; returned tensors, and tensors
 * written to out-parameters, are new references the caller releases. A forward returns, as
 * out-parameters, what its backward reads (masks, indices, statistics, log-probabilities).
 * Backwards take `need[i]` (whether input i's gradient is wanted) and write grads[i] (NULL
 * where not needed). 16-bit floats: softmax, the activations, embedding and layer_norm take them on the
 * CPU (their kernels widen rows, compute in float32 and round once; statistics and layer_norm's
 * parameter gradients are float32); the other ops' public faces widen before they get here. */
#ifndef MS_NN_NATIVE_H
#define MS_NN_NATIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernel_table.h"
#include "moonshard/nn_types.h"
#include "moonshard/tensor_core.h"

/* ---- activation.c: the activations of op_list.h (GELU exact or tanh, SiLU, ...) ---------------- */
ms_tensor *native_activation(ms_activation_op act, ms_tensor *x);
ms_tensor *native_activation_backward(ms_activation_op act, ms_tensor *x, ms_tensor *grad_output);

/* ---- softmax.c: softmax (log = false) or log_softmax over dim (negative counts from the end) - */
ms_tensor *native_softmax(ms_tensor *x, int dim, bool log);
/* y: the forward's output. */
ms_tensor *native_softmax_backward(ms_tensor *y, ms_tensor *grad_output, int dim, bool log);

/* ---- dropout.c ------------------------------------------------------------------------------- */
/* In training with 0 < p: *mask = the uint8 mask drawn, *scale = 1 / (1 - p); otherwise x itself
 * (retained) and *mask = NULL. */
ms_tensor *native_dropout(ms_tensor *x, double p, bool training, ms_tensor **mask, double *scale);
/* The gradient in dtype dt; may_overwrite_grad: the result may be written over grad_output's
 * buffer (which nothing else can see: the caller has checked). */
ms_tensor *native_dropout_backward(ms_tensor *grad_output, ms_tensor *mask, double scale, ms_dtype dt,
                                   bool may_overwrite_grad);

/* ---- embedding.c ----------------------------------------------------------------------------- */
/* *saved_indices = the indices as a contiguous int64 tensor (what the backward reads). */
ms_tensor *native_embedding(ms_tensor *indices, ms_tensor *weight, int64_t padding_idx, int64_t index_base,
                            ms_tensor **saved_indices);
/* The weight's gradient (weight_shape, dtype dt): rows summed over repeated indices, none into
 * padding_idx. */
ms_tensor *native_embedding_backward(ms_tensor *indices, ms_tensor *grad_output, const int64_t weight_shape[2],
                                     ms_dtype dt, int64_t padding_idx, int64_t index_base);

/* ---- linear.c -------------------------------------------------------------------------------- */
/* Whether x, w, b run a native 16-bit GEMM (else 16-bit operands must be widened). */
bool native_linear_half(ms_tensor *x, ms_tensor *w, ms_tensor *b);
ms_tensor *native_linear(ms_tensor *x, ms_tensor *w, ms_tensor *b);
/* grads: input, weight, bias. */
ms_status native_linear_backward(ms_tensor *x, ms_tensor *w, ms_tensor *grad_output, const bool need[3],
                                 ms_tensor *grads[3]);

/* ---- conv.c ---------------------------------------------------------------------------------- */
/* Whether x, w, b run a native 16-bit convolution (else 16-bit operands must be widened). */
bool native_conv2d_half(const ms_tensor *x, const ms_tensor *w, const ms_tensor *b, int64_t groups);
ms_tensor *native_conv2d(ms_tensor *x, ms_tensor *w, ms_tensor *b, const int64_t stride[2],
                         const int64_t padding[2], const int64_t dilation[2], int64_t groups);
/* x, w: the forward's input and weight; grads: input, weight, bias. */
ms_status native_conv2d_backward(ms_tensor *x, ms_tensor *w, ms_tensor *grad_output, const int64_t stride[2],
                                 const int64_t padding[2], const int64_t dilation[2], int64_t groups,
                                 const bool need[3], ms_tensor *grads[3]);

/* ---- pool.c: *g receives the checked geometry the backward reads ----------------------------- */
/* Whether a 16-bit x has a native kernel for max (`max`) or average pooling; false for other
 * dtypes. grad_pool.c widens the 16-bit cases without one. */
bool native_pool2d_half(const ms_tensor *x, bool max);
/* *indices is made only when want_indices or on CUDA (whose kernel always writes them); else NULL. */
ms_status native_max_pool2d(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                            const int64_t padding[2], const int64_t dilation[2], bool ceil_mode,
                            bool want_indices, ms_tensor **values, ms_tensor **indices, ms_k_pool2d_geom *g);
/* in_shape: the input's (N, C, H, W); the gradient in dtype dt on the indices' device. */
ms_tensor *native_max_pool2d_backward(const ms_k_pool2d_geom *g, const int64_t in_shape[4], ms_tensor *indices,
                                      ms_tensor *grad_output, ms_dtype dt);
ms_tensor *native_avg_pool2d(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                             const int64_t padding[2], bool ceil_mode, bool count_include_pad,
                             ms_k_pool2d_geom *g);
ms_tensor *native_adaptive_avg_pool2d(ms_tensor *x, int64_t out_h, int64_t out_w, ms_k_pool2d_geom *g);
/* Both average pools: adaptive selects the windows' kind. */
ms_tensor *native_avg_pool2d_backward(const ms_k_pool2d_geom *g, const int64_t in_shape[4], bool adaptive,
                                      bool count_include_pad, ms_tensor *grad_output, ms_dtype dt);

/* ---- normalization.c ------------------------------------------------------------------------- */
/* What a normalization's backward reads (new references; weight NULL when absent). */
typedef struct native_norm_saved {
  ms_tensor *x, *weight; /* contiguous */
  ms_tensor *mean, *invstd;
} native_norm_saved;
void native_norm_saved_release(native_norm_saved *s);

ms_tensor *native_layer_norm(ms_tensor *x, int nshape, const int64_t *normalized_shape, ms_tensor *w,
                             ms_tensor *b, double eps, native_norm_saved *saved);
/* grads: input, weight, bias. */
ms_status native_layer_norm_backward(const native_norm_saved *s, int nshape, ms_tensor *grad_output,
                                     const bool need[3], ms_tensor *grads[3]);
/* Whether a 16-bit x has native batch norm kernels (CUDA's: float32 parameters, statistics and
 * parameter gradients); the CPU's 16-bit case is widened by grad_normalization.c. */
bool native_batch_norm_half(const ms_tensor *x);
/* Updates running_mean and running_var in training, as PyTorch (a 16-bit x may have 16-bit or
 * float32 parameters and statistics). */
ms_tensor *native_batch_norm(ms_tensor *x, ms_tensor *running_mean, ms_tensor *running_var, ms_tensor *w,
                             ms_tensor *b, bool training, double momentum, double eps, native_norm_saved *saved);
ms_status native_batch_norm_backward(const native_norm_saved *s, bool training, ms_tensor *grad_output,
                                     const bool need[3], ms_tensor *grads[3]);

/* ---- loss.c ---------------------------------------------------------------------------------- */
/* What nll_loss's and cross_entropy's backward reads (tensors: new references, NULL when absent). */
typedef struct native_nll_saved {
  ms_tensor *target, *weight; /* contiguous */
  ms_tensor *logp;            /* cross_entropy: the log-probabilities */
  ms_tensor *weight_sum;      /* a GPU mean: the 0-dim float64 sum its gradient is divided by */
  int64_t N, C, inner, ignore_index, base;
  ms_reduction reduction;
  double nll_scale, smooth_scale, smoothing; /* what a reduced loss's scalar gradient is scaled by */
} native_nll_saved;
void native_nll_saved_release(native_nll_saved *s);

ms_tensor *native_nll_loss(ms_tensor *input, ms_tensor *target, ms_tensor *weight, int64_t ignore_index,
                           ms_reduction reduction, int64_t index_base, native_nll_saved *saved);
ms_tensor *native_cross_entropy(ms_tensor *input, ms_tensor *target, ms_tensor *weight, int64_t ignore_index,
                                ms_reduction reduction, double label_smoothing, int64_t index_base,
                                native_nll_saved *saved);
/* Both losses: the input's gradient, of (in_ndim, in_shape) and dtype dt. */
ms_tensor *native_nll_backward(const native_nll_saved *s, ms_tensor *grad_output, int in_ndim,
                               const int64_t *in_shape, ms_dtype dt);
ms_tensor *native_mse_loss(ms_tensor *a, ms_tensor *b, ms_reduction reduction);
/* The gradients of a and b at the broadcast shape (the caller reduces them to each input's). */
ms_status native_mse_loss_backward(ms_tensor *a, ms_tensor *b, ms_reduction reduction, ms_tensor *grad_output,
                                   const bool need[2], ms_tensor *grads[2]);

/* ---- attention.c: scaled_dot_product_attention (PyTorch's), forward and backward ------------- */
/* What the backward reads: q, k, v and the mask as the kernel saw them (contiguous), the output,
 * each row's logsumexp, and the geometry (with dropout's Philox range). */
typedef struct native_attention_saved {
  ms_tensor *q, *k, *v, *mask, *out, *lse;
  ms_k_attn_geom g;
} native_attention_saved;
void native_attention_saved_release(native_attention_saved *s);
/* Whether 16-bit q, k, v (and mask) run a native 16-bit attention (else they are widened). */
bool native_attention_half(const ms_tensor *q, const ms_tensor *k, const ms_tensor *v, const ms_tensor *mask);
/* q (..., L, E), k (..., S, E), v (..., S, Ev) of one float dtype and device -> (..., L, Ev). */
ms_tensor *native_attention(ms_tensor *q, ms_tensor *k, ms_tensor *v, const ms_sdpa_options *o,
                            native_attention_saved *saved);
/* grads: query, key, value (all three computed: one pass gives them together). */
ms_status native_attention_backward(const native_attention_saved *s, ms_tensor *grad_output, ms_tensor *grads[3]);

#endif
