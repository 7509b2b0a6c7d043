/* cuda_ops.h (engine-internal): the device side of the engine's ops, called by the shared op
 * files (tensor_copy.c, ops_elementwise.c, ops_matmul.c) at their device-dispatch points once
 * every rule (dtype, shape, broadcasting) is settled. Without CUDA, cuda_absent.c answers these
 * with an error (no CUDA tensor can exist there, so they are never reached). */
#ifndef MS_CUDA_OPS_H
#define MS_CUDA_OPS_H

#include "kernels/kernels.h"
#include "moonshard/tensor.h"

/* dst = src converted, both on one CUDA device and of dst's shape (src may be broadcast). */
ms_status ms_cuda_copy_same_shape(ms_tensor *dst, ms_tensor *src);
/* Every element of t (on a CUDA device) = value, converted as ms_k_fill does. */
ms_status ms_cuda_fill(ms_tensor *t, double value);
/* out = a op b, all of out's shape (a and b broadcast) in compute dtype cd; out is cd or bool.
 * An operand on the CPU is a broadcast number (a plain number or a 0-dim tensor): read once. */
ms_status ms_cuda_binary(ms_k_binop op, ms_dtype cd, ms_tensor *out, ms_tensor *a, ms_tensor *b);
ms_status ms_cuda_unary(ms_k_unop op, ms_dtype cd, ms_tensor *out, ms_tensor *a);
/* Reduces the last dim of `in` (compute dtype, on a CUDA device) into out (contiguous, one
 * element per row of in's other dims), with ms_k_reduce_row's semantics; mean divides by the row
 * length; indices (may be NULL) receives max/min positions. */
ms_status ms_cuda_reduce(ms_k_redop op, bool mean, ms_tensor *in, ms_tensor *out, ms_tensor *indices);
/* c = alpha * a @ b + beta * c for 2-D float32/float64 operands on one device (cuBLAS); any
 * strides (a matrix with neither unit row nor unit column stride is copied first). */
ms_status ms_cuda_gemm(double alpha, ms_tensor *a, ms_tensor *b, double beta, ms_tensor *c);

/* dst = src between two devices (src already broadcast to dst's shape; dtypes may differ):
 * converted on src's device, then one contiguous copy (engine/src/tensor_device.c). */
ms_status ms_tensor_copy_across(ms_tensor *dst, ms_tensor *src);

#endif
