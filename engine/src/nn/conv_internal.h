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
/* The same, bfloat16 and float16 admitted too: for a 16-bit x that has a native path (the
 * caller decides: conv2d and max_pool2d in bfloat16 on the CPU, every 16-bit pool and conv on
 * CUDA). */
ms_status nn_check_4d_float_or_half_any(const char *op, const char *arg, const ms_tensor *x);
/* MS_OK when each of the pair is >= min; else "op: arg must be >= min, got (a, b)". */
ms_status nn_check_pair(const char *op, const char *arg, const int64_t v[2], int64_t min);
/* Checks a sliding window's geometry on both spatial axes: the padded input size in + 2 * pad
 * and the dilated kernel dil * (k - 1) + 1 must each fit (at most MS_MAX_NUMEL), so the output
 * size arithmetic after it cannot overflow. Else "op: padding (..) is too large for input size
 * (..)" or "op: <k_arg> (..) with dilation (..) spans too many elements". */
ms_status nn_check_window(const char *op, const char *k_arg, const int64_t in[2], const int64_t k[2],
                             const int64_t pad[2], const int64_t dil[2], int64_t padded[2], int64_t extent[2]);

#endif
