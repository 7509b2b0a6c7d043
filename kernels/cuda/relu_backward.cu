// relu_backward.cu: relu's gradient in one launch (the general path is a comparison, then a
// where: two launches and a bool tensor), gx = y > 0 ? g : 0, the kept element's bits copied
// (an infinite gradient stays; a NaN y drops it), as kernels/cpu/elementwise.c's
// ms_k_relu_backward. Four floating dtypes (lowp.cuh).
#include "lowp.cuh"

using namespace mskc;

namespace {

template <typename S>
__global__ void relu_backward_kernel(int64_t n, const S *y, const S *g, S *gx) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    S gi = g[i], zero{}; // zero{}: +0 in every dtype
    gx[i] = ld(y[i]) > 0 ? gi : zero;
  }
}

template <typename S>
int launch_relu_backward(cudaStream_t s, int64_t n, const void *y, const void *g, void *gx) {
  relu_backward_kernel<S><<<blocks_for(n), kThreads, 0, s>>>(n, (const S *)y, (const S *)g, (S *)gx);
  return launch_status();
}

} // namespace

extern "C" int ms_k_cuda_relu_backward(const ms_k_exec *x, ms_k_dtype dt, int64_t n, const void *y, const void *g,
                                       void *gx) {
  if (n <= 0) return 0;
  return MSKC_BY_DTYPE(dt, launch_relu_backward, (cudaStream_t)x->stream, n, y, g, gx);
}
