// dropout.cu: dropout's kernels: the masked scale (the backward, and any caller holding a mask)
// and the forward in one pass, which draws each Philox block's four mask bytes as random.cu's
// bernoulli fill does (ms_k_philox_bernoulli's layout) and writes y from them at once: one launch
// and no mask read back, the same bits as the two kernels. Four floating dtypes (lowp.cuh).
#include "lowp.cuh"

using namespace mskc;

namespace {

// y = mask ? x * scale : 0, in the compute type, rounded once (a dropped inf or NaN gives 0)
template <typename S>
__device__ inline void scale_one(const S *x, uint8_t m, acc_t<S> scale, S *y) {
  using A = acc_t<S>;
  *y = st<S>(m ? ld(*(x)) * scale : (A)0);
}

template <typename S>
__global__ void masked_scale_kernel(int64_t n, const S *x, const uint8_t *m, acc_t<S> scale, S *y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    scale_one(x + i, m[i], scale, y + i);
}

template <typename S>
int launch_masked_scale(cudaStream_t s, int64_t n, const void *x, const uint8_t *m, double scale, void *y) {
  using A = acc_t<S>;
  masked_scale_kernel<S><<<blocks_for(n), kThreads, 0, s>>>(n, (const S *)x, m, (A)scale, (S *)y);
  return launch_status();
}

// One thread per Philox block: element i is lane i % 4 of block offset + i / 4. Under a CUDA
// graph's capture rng_base (device memory) holds {seed, base offset}, written before each replay.
template <typename S>
__global__ void dropout_kernel(uint64_t seed, uint64_t offset, const uint64_t *rng_base, int64_t n, double keep,
                               const S *x, acc_t<S> scale, uint8_t *m, S *y) {
  if (rng_base) seed = rng_base[0], offset += rng_base[1];
  int64_t blocks = (n + 3) / 4;
  for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < blocks; b += (int64_t)gridDim.x * blockDim.x) {
    uint32_t w[4];
    philox(seed, offset + (uint64_t)b, w);
    int64_t first = b * 4, count = n - first < 4 ? n - first : 4;
    for (int k = 0; k < count; k++) {
      uint8_t keep_it = (double)w[k] * 0x1p-32 < keep; // random.cu's bernoulli, bit for bit
      m[first + k] = keep_it;
      scale_one(x + first + k, keep_it, scale, y + first + k);
    }
  }
}

template <typename S>
int launch_dropout(const ms_k_exec *ex, uint64_t seed, uint64_t offset, int64_t n, double keep, const void *x,
                   double scale, uint8_t *m, void *y) {
  using A = acc_t<S>;
  dropout_kernel<S><<<blocks_for((n + 3) / 4), kThreads, 0, (cudaStream_t)ex->stream>>>(
      seed, offset, ex->rng_base, n, keep, (const S *)x, (A)scale, m, (S *)y);
  return launch_status();
}

} // namespace

extern "C" int ms_k_cuda_masked_scale(const ms_k_exec *x, ms_k_dtype dt, int64_t n, const void *in,
                                      const uint8_t *mask, double scale, void *y) {
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  return MSKC_BY_DTYPE(dt, launch_masked_scale, s, n, in, mask, scale, y);
}

extern "C" int ms_k_cuda_dropout(const ms_k_exec *x, ms_k_dtype dt, uint64_t seed, uint64_t offset, int64_t n,
                                 double keep, const void *in, double scale, uint8_t *mask, void *y) {
  if (n <= 0) return 0;
  return MSKC_BY_DTYPE(dt, launch_dropout, x, seed, offset, n, keep, in, scale, mask, y);
}
