/* table.c: the CUDA kernel table (built only with CUDA). Each slot names the CUDA body of its
 * row (ms_k_cuda_<name>, in the .cu file of its family). */
#include <cuda_runtime.h>

#include "kernels/cuda/lib_error.h"
#include "kernels/kernel_table.h"

/* cudaError_t codes, or a library's failure (cuBLAS, cuDNN) described on this thread. */
static const char *cuda_error_string(int err) {
  if (err == MS_K_ERR_NO_MEMORY) return "out of memory for a kernel's work buffers";
  return err == MS_KCU_ERR_DETAIL ? ms_kcu_detail() : cudaGetErrorString((cudaError_t)err);
}

#define MS_K_X_CUDA_SLOT(name, params) .name = ms_k_cuda_##name,
const ms_k_table ms_k_cuda_table = {
    .device = "CUDA",
    .error_string = cuda_error_string,
    MS_K_KERNELS(MS_K_X_CUDA_SLOT)
};
