/* conv_internal.h (engine-internal): argument checks that conv.c and pool.c share. */
#ifndef MS_CONV_INTERNAL_H
#define MS_CONV_INTERNAL_H

#include "moonshard/tensor.h"

/* MS_OK when x is a readable 4-D float32/float64 tensor; else an error naming op and arg
 * ("conv2d: input must be 4-D (N, C, H, W), got (64, 784)"). */
ms_status ms_nn_check_4d(const char *op, const char *arg, const ms_tensor *x);
/* The same for ops with a CUDA kernel: x may be on any device. */
ms_status ms_nn_check_4d_any(const char *op, const char *arg, const ms_tensor *x);
/* The same, bfloat16 admitted too: for the ops with a native bfloat16 CPU path (conv2d,
 * max_pool2d). */
ms_status ms_nn_check_4d_float_or_bf16_any(const char *op, const char *arg, const ms_tensor *x);
/* MS_OK when each of the pair is >= min; else "op: arg must be >= min, got (a, b)". */
ms_status ms_nn_check_pair(const char *op, const char *arg, const int64_t v[2], int64_t min);

#endif
