/* conv_internal.h (engine-internal): argument checks that conv.c and pool.c share. */
#ifndef MS_CONV_INTERNAL_H
#define MS_CONV_INTERNAL_H

#include "moonshard/checked.h"
#include "moonshard/tensor_core.h"

/* MS_OK when x is a readable 4-D float32/float64 tensor; else an error naming op and arg
 * ("conv2d: input must be 4-D (N, C, H, W), got (64, 784)"). */
ms_status nn_check_4d(const char *op, const char *arg, const ms_tensor *x);
/* The same for ops with a CUDA kernel: x may be on any device. */
ms_status nn_check_4d_any(const char *op, const char *arg, const ms_tensor *x);
/* The same, bfloat16 admitted too: for the ops with a native bfloat16 CPU path (conv2d,
 * max_pool2d). */
ms_status nn_check_4d_float_or_bf16_any(const char *op, const char *arg, const ms_tensor *x);
/* MS_OK when each of the pair is >= min; else "op: arg must be >= min, got (a, b)". */
ms_status nn_check_pair(const char *op, const char *arg, const int64_t v[2], int64_t min);
/* Checks a sliding window's geometry on both spatial axes: the padded input size in + 2 * pad
 * and the dilated kernel dil * (k - 1) + 1 must each fit (at most MS_MAX_NUMEL), so the output
 * size arithmetic after it cannot overflow. Else "op: padding (..) is too large for input size
 * (..)" or "op: <k_arg> (..) with dilation (..) spans too many elements". */
ms_status nn_check_window(const char *op, const char *k_arg, const int64_t in[2], const int64_t k[2],
                             const int64_t pad[2], const int64_t dil[2], int64_t padded[2], int64_t extent[2]);

#endif
