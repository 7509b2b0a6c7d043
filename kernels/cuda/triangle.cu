// triangle.cu: tril / triu in place (triangle_zero) with the CPU's rule (kernels/cpu/triangle.c):
// one thread per element, which writes zero bytes where its column is on the zeroed side of the
// diagonal and leaves the element alone elsewhere.
#include "common.cuh"

using namespace mskc;

template <typename T>
__global__ void triangle_zero_kernel(int64_t total, int64_t rows, int64_t cols, int upper, int64_t diagonal,
                                     T *data) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    int64_t j = e % cols, i = (e / cols) % rows;
    int64_t off = j - i; // |i|, |j| < 2^62: no overflow
    if (upper ? off < diagonal : off > diagonal) data[e] = T(0);
  }
}

extern "C" int ms_k_cuda_triangle_zero(const ms_k_exec *x, int64_t batch, int64_t rows, int64_t cols, int upper,
                                       int64_t diagonal, size_t elsize, void *data) {
  int64_t total = batch * rows * cols; // the tensor's element count: the engine checked it
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  unsigned blocks = blocks_for(total);
  // zero bytes by the element's size: 0 in every dtype (floats, bfloat16, integers, bool)
  if (elsize == 8) triangle_zero_kernel<uint64_t><<<blocks, kThreads, 0, s>>>(total, rows, cols, upper, diagonal, (uint64_t *)data);
  else if (elsize == 4) triangle_zero_kernel<uint32_t><<<blocks, kThreads, 0, s>>>(total, rows, cols, upper, diagonal, (uint32_t *)data);
  else if (elsize == 2) triangle_zero_kernel<uint16_t><<<blocks, kThreads, 0, s>>>(total, rows, cols, upper, diagonal, (uint16_t *)data);
  else triangle_zero_kernel<uint8_t><<<blocks, kThreads, 0, s>>>(total, rows, cols, upper, diagonal, (uint8_t *)data);
  return launch_status();
}
