// embedding.cu: the gather of weight rows by index, and its gradient. The backward gives each
// thread one column of the weight gradient and walks the indices in order, as the CPU does: no
// float atomics, so repeated indices sum in a fixed order and the result is deterministic (and
// the same bits as the CPU's). A 16-bit weight (lowp.cuh) is gathered as it is, and its gradient
// summed into the float32 gw the engine gives (rounded by it once), as kernels/cpu/nn_ops_half.h.
#include "lowp.cuh"

using namespace mskc;

template <typename S>
__global__ void embedding_kernel(int64_t total, int64_t D, const int64_t *idx, int64_t base, const S *w, S *out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = w[(idx[i / D] - base) * D + i % D];
}

template <typename S>
__global__ void embedding_backward_kernel(int64_t n, int64_t D, const int64_t *idx, int64_t base, int64_t padding_idx,
                                          const S *g, acc_t<S> *gw) {
  for (int64_t d = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; d < D; d += (int64_t)gridDim.x * blockDim.x)
    for (int64_t r = 0; r < n; r++) {
      int64_t k = idx[r] - base;
      if (k != padding_idx) gw[k * D + d] += ld(g[r * D + d]); // the padding row gets no gradient
    }
}

extern "C" int ms_k_cuda_embedding(const ms_k_exec *ex, ms_k_dtype dt, int64_t n, int64_t D,
                                   const int64_t *idx, int64_t base, const void *w, void *out) {
  int64_t total = n * D;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S,
                    embedding_kernel<S><<<blocks_for(total), kThreads, 0, s>>>(total, D, idx, base, (const S *)w,
                                                                               (S *)out));
  return launch_status();
}

// gw: dt's accumulation type (float32 for a 16-bit dt), zeroed by the engine.
extern "C" int ms_k_cuda_embedding_backward(const ms_k_exec *ex, ms_k_dtype dt, int64_t n, int64_t D,
                                            const int64_t *idx, int64_t base, int64_t padding_idx,
                                            const void *g, void *gw) {
  if (n == 0 || D == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S,
                    embedding_backward_kernel<S><<<blocks_for(D), kThreads, 0, s>>>(n, D, idx, base, padding_idx,
                                                                                    (const S *)g, (acc_t<S> *)gw));
  return launch_status();
}
