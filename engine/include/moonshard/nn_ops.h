/* nn_ops.h: the functional NN layers (torch.nn.functional's): activations, softmax, dropout,
 * linear, embedding, normalization and losses, each differentiable. They compute in float32 or
 * float64 (the input's dtype; every tensor argument must share it) and return new references,
 * or NULL with an error.
 *
 * Dims are 0-based here (negative counts from the end). Class targets and embedding indices are
 * positions, and the Lua face reads them 1-based (class 1..C, as Torch7's ClassNLLCriterion):
 * rather than copying the index tensor to subtract 1, it passes `index_base` = 1 and the kernels
 * subtract it on the fly. C callers pass 0. ignore_index is compared with the raw target value,
 * before the base is subtracted (so the default -100 means the same from C and from Lua). */
#ifndef MOONSHARD_NN_OPS_H
#define MOONSHARD_NN_OPS_H

#include <stdbool.h>

#include "moonshard/export.h"
#include "moonshard/nn_types.h"
#include "moonshard/tensor.h"

/* Softmax over dim (0-based, negative from the end); new reference. */
MS_API ms_tensor *ms_softmax(ms_tensor *x, int dim);
/* log(softmax(x)) over dim, computed stably; new reference. */
MS_API ms_tensor *ms_log_softmax(ms_tensor *x, int dim);
/* approximate_tanh: GELU's tanh approximation (PyTorch's approximate='tanh'). */
MS_API ms_tensor *ms_gelu(ms_tensor *x, bool approximate_tanh);
MS_API ms_tensor *ms_silu(ms_tensor *x);
/* Any activation of op_list.h's table (ms_gelu and ms_silu are two of them). */
MS_API ms_tensor *ms_activation(ms_activation_op op, ms_tensor *x);
/* Zeroes each element with probability p (Philox stream, so the seed fixes the mask) and scales
 * the rest by 1 / (1 - p). p == 0 or !training returns x itself (retained). */
MS_API ms_tensor *ms_dropout(ms_tensor *x, double p, bool training);

/* softmax(q k^T scale + mask) v with dropout on the weights, as torch.nn.functional's:
 * q (..., L, E), k (..., S, E), v (..., S, Ev) with equal batch dims -> (..., L, Ev); options as
 * ms_sdpa_options (NULL: none). Never holds an L x S matrix per head. */
MS_API ms_tensor *ms_scaled_dot_product_attention(ms_tensor *q, ms_tensor *k, ms_tensor *v,
                                                  const ms_sdpa_options *options);

/* x (..., in) @ w^T + b, w (out, in), b (out) or NULL. */
MS_API ms_tensor *ms_linear(ms_tensor *x, ms_tensor *w, ms_tensor *b);
/* weight rows at `indices` (int64, any shape): result (indices shape..., D). padding_idx is a
 * 0-based row that receives no gradient, or -1 for none. */
MS_API ms_tensor *ms_embedding(ms_tensor *indices, ms_tensor *weight, int64_t padding_idx,
                               int64_t index_base);

/* Normalizes over the last `nshape` dims, which must equal normalized_shape; w and b (of that
 * shape) may be NULL. */
MS_API ms_tensor *ms_layer_norm(ms_tensor *x, int nshape, const int64_t *normalized_shape, ms_tensor *w,
                                ms_tensor *b, double eps);
/* x (N, C, ...). Training normalizes with the batch statistics and, when the running tensors are
 * given, updates them in place: running = (1 - momentum) running + momentum batch, with the
 * unbiased batch variance (as PyTorch). Evaluation uses the running statistics (required). */
MS_API ms_tensor *ms_batch_norm(ms_tensor *x, ms_tensor *running_mean, ms_tensor *running_var,
                                ms_tensor *w, ms_tensor *b, bool training, double momentum, double eps);

/* input (N, C) or (N, C, d1, ...) of log-probabilities, or (C) with a 0-dim target; target
 * int64 (N) or (N, d1, ...). weight (C) or NULL. Mean divides by the sum of the weights of the
 * targets not ignored. */
MS_API ms_tensor *ms_nll_loss(ms_tensor *input, ms_tensor *target, ms_tensor *weight, int64_t ignore_index,
                              ms_reduction reduction, int64_t index_base);
/* log_softmax over dim 1 (dim 0 for a 1-D input) fused with nll_loss, and PyTorch's label
 * smoothing: (1 - s) nll + s / C * (-sum_c w_c logp_c). */
MS_API ms_tensor *ms_cross_entropy(ms_tensor *input, ms_tensor *target, ms_tensor *weight,
                                   int64_t ignore_index, ms_reduction reduction, double label_smoothing,
                                   int64_t index_base);
/* (a - b)^2, broadcasting a with b. */
MS_API ms_tensor *ms_mse_loss(ms_tensor *a, ms_tensor *b, ms_reduction reduction);

#endif
