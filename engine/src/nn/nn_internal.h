/* nn_internal.h (engine-internal): the checks and conversions that the NN ops share
 * (engine/src/nn/nn_util.c). */
#ifndef MS_NN_INTERNAL_H
#define MS_NN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "moonshard/tensor_core.h"
#include "native/native.h"

/* The kernels' name for a float dtype (the enums share their order). */
static inline ms_k_dtype nn_kdtype(ms_dtype dt) { return (ms_k_dtype)dt; }

/* MS_OK when t is a readable float32/float64 tensor; else "op: arg must be float32 or float64". */
ms_status nn_check_float(const char *op, const char *arg, const ms_tensor *t);
/* The same for ops with a CUDA kernel: t may be on any device. */
ms_status nn_check_float_any(const char *op, const char *arg, const ms_tensor *t);
/* nn_check_float_any with bfloat16 accepted too, for ops whose native bfloat16 path reaches
 * the check (linear, conv2d); their other 16-bit cases are widened before it. */
ms_status nn_check_float_or_bf16_any(const char *op, const char *arg, const ms_tensor *t);
/* nn_check_float_any with bfloat16 and float16 accepted, for ops whose kernels take 16-bit
 * floats on every device (softmax, the activations, embedding, layer_norm; float32 arithmetic,
 * one rounding per stored value) and for the 16-bit cases that pool.c and conv.c admit. */
ms_status nn_check_float_or_half_any(const char *op, const char *arg, const ms_tensor *t);
/* The dtype a 16-bit op keeps statistics and parameters in: float32 for 16-bit dt (PyTorch's
 * rule), else dt itself. */
ms_dtype nn_stat_dtype(ms_dtype dt);
/* An optional parameter (NULL passes): dtype dt and, when n >= 0, shape (n). */
ms_status nn_check_param(const char *op, const char *arg, const ms_tensor *t, ms_dtype dt, int64_t n);
/* MS_OK when t is a readable int64 tensor. */
ms_status nn_check_index_tensor(const char *op, const char *arg, const ms_tensor *t);
/* Both, for ops with a CUDA kernel: any device, but all the n tensors (NULLs skipped) on one. */
ms_status nn_check_param_any(const char *op, const char *arg, const ms_tensor *t, ms_dtype dt, int64_t n);
ms_status nn_check_index_tensor_any(const char *op, const char *arg, const ms_tensor *t);
/* t's shape seen as (outer, size, inner) around dim. */
void nn_split(const ms_tensor *t, int dim, int64_t *outer, int64_t *size, int64_t *inner);
/* t as a contiguous tensor of dtype dt (new reference; t itself retained when it already is);
 * nothing recorded. */
ms_tensor *nn_contiguous(ms_tensor *t, ms_dtype dt);
/* y = softmax (log: log_softmax) of x, both contiguous (outer, C, inner) blocks on one device,
 * through that device's kernel; op names the caller in errors (softmax, cross_entropy). */
ms_status nn_softmax_rows(const char *op, ms_tensor *x, ms_tensor *y, int64_t outer, int64_t C, int64_t inner,
                             bool log);
/* Releases the n tensors (NULLs allowed) and sets them to NULL. */
void nn_release_all(int n, ms_tensor **ts);

#endif
