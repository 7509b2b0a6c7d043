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
 * F32 and F64, contiguous device buffers; the other NN kernels are slots of kernel_table.h ---- */
/* A convolution's bias over its (n, c, hw) output: y[n, c, :] += b[c]; and the bias gradient,
 * gb[c] = sum over n and hw of g[n, c, :], one block per channel (float32 sums in double). dt: F32
 * or F64. */
int ms_kc_channel_bias_add(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, void *y, const void *b,
                           void *stream);
int ms_kc_channel_sum(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, const void *g, void *gb,
                      void *stream);


#ifdef __cplusplus
}
#endif

#endif
