/* kernels_cuda.h: what the CUDA kernel library shares inside itself, beyond the table's slots
 * (kernels/kernel_table.h): the convolution's bias kernels that the cuDNN bodies launch. Internal
 * to kernels/cuda/: the engine calls CUDA kernels only through the table. Each returns 0 or the
 * cudaError_t of its launch; stream is a cudaStream_t passed as void *. */
#ifndef MS_KERNELS_CUDA_H
#define MS_KERNELS_CUDA_H

#include <stdint.h>

#include "kernels/kernel_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- kernels/cuda/nn_ops.cu ---- */
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
