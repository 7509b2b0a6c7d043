/* cuda_ops.h (engine-internal): the device side of the engine's ops, called by the native op
 * files (native/copy.c, native/elementwise.c, native/matmul.c, ...) and random.c at their
 * device-dispatch points once every rule (dtype, shape, broadcasting) is settled. Without CUDA, cuda_absent.c answers these
 * with an error (no CUDA tensor can exist there, so they are never reached). */
#ifndef MS_CUDA_OPS_H
#define MS_CUDA_OPS_H

#include "kernels/kernels.h"
#include "moonshard/tensor_core.h"

/* dst = src converted, both on one CUDA device and of dst's shape (src may be broadcast). */
ms_status ms_cuda_copy_same_shape(ms_tensor *dst, ms_tensor *src);
/* out = a op b, all of out's shape (a and b broadcast) in compute dtype cd; out is cd or bool.
 * An operand on the CPU is a broadcast number (a plain number or a 0-dim tensor): read once. */
ms_status ms_cuda_binary(ms_k_binop op, ms_dtype cd, ms_tensor *out, ms_tensor *a, ms_tensor *b);
ms_status ms_cuda_unary(ms_k_unop op, ms_dtype cd, ms_tensor *out, ms_tensor *a);
/* out = clamp(a, lo, hi) (either bound NULL) in compute dtype cd, a of out's shape. */
ms_status ms_cuda_clamp(ms_dtype cd, ms_tensor *out, ms_tensor *a, const double *lo, const double *hi);
/* out = cond ? a : b, all of out's shape in compute dtype cd (cond bool); a CPU a or b is a
 * broadcast number, as in ms_cuda_binary. */
ms_status ms_cuda_where(ms_dtype cd, ms_tensor *out, ms_tensor *cond, ms_tensor *a, ms_tensor *b);
/* Reduces the last dim of `in` (compute dtype, on a CUDA device) into out (contiguous, one
 * element per row of in's other dims), with ms_k_reduce_row's semantics; mean divides by the row
 * length; indices (may be NULL) receives max/min positions. */
ms_status ms_cuda_reduce(ms_k_redop op, bool mean, ms_tensor *in, ms_tensor *out, ms_tensor *indices);
/* var/std (op RMOMENTS; root: std) or the p-norm (op RPOWSUM) of the last dim of `in` (float32 or
 * float64, on a CUDA device) into out, with native/reduce.c's finishing rules. */
ms_status ms_cuda_reduce_stat(ms_k_redop op, double p, int64_t correction, bool root, ms_tensor *in, ms_tensor *out);

/* ---- NN ops (engine/src/cuda/cuda_nn.c): the CPU kernels' arguments, with
 * contiguous tensors on one CUDA device in place of pointers ---- */

#endif
