// random.cu: the Philox fills of kernels/cpu/philox.c on the GPU (uniform, normal, randint,
// bernoulli, dropout's mask): the same counter layout and the same transforms, so a seed gives
// the same numbers on either device. One thread per Philox block, as one CPU loop turn is.
#include "common.cuh"

using namespace mskc;

namespace {

__device__ inline uint64_t word64(const uint32_t w[4], int k) {
  return (uint64_t)w[2 * k] | (uint64_t)w[2 * k + 1] << 32;
}
__device__ inline float unit_f32(uint32_t x) { return (float)(x >> 8) * 0x1p-24f; }
__device__ inline double unit_f64(uint64_t x) { return (double)(x >> 11) * 0x1p-53; }

// The arithmetic below spells out its roundings (__fmul_rn and friends) because nvcc would
// otherwise fuse a * b + c into one FMA, which rounds once where the CPU rounds twice.

struct uniform_f32 {
  float *out, low, high;
  __device__ void operator()(const uint32_t w[4], int64_t first, int count) const {
    for (int k = 0; k < count; k++) {
      float v = __fadd_rn(low, __fmul_rn(__fsub_rn(high, low), unit_f32(w[k])));
      out[first + k] = v < high ? v : nextafterf(high, low);
    }
  }
};

struct uniform_f64 {
  double *out, low, high;
  __device__ void operator()(const uint32_t w[4], int64_t first, int count) const {
    for (int k = 0; k < count; k++) {
      double v = __dadd_rn(low, __dmul_rn(__dsub_rn(high, low), unit_f64(word64(w, k))));
      out[first + k] = v < high ? v : nextafter(high, low);
    }
  }
};

// Box-Muller as the CPU's, in double; log, sin and cos are libdevice's, within an ulp or two of
// glibc's, so float64 normals may differ from the CPU's in their last bits.
__device__ inline void box_muller(double u1, double u2, double z[2]) {
  double r = sqrt(-2.0 * log(u1)), t = __dmul_rn(6.283185307179586476925286766559, u2);
  z[0] = __dmul_rn(r, cos(t));
  z[1] = __dmul_rn(r, sin(t));
}

struct normal_f32 {
  float *out;
  double mean, std;
  __device__ void operator()(const uint32_t w[4], int64_t first, int count) const {
    double z[4];
    box_muller(((double)w[0] + 1.0) * 0x1p-32, (double)w[1] * 0x1p-32, z);
    box_muller(((double)w[2] + 1.0) * 0x1p-32, (double)w[3] * 0x1p-32, z + 2);
    for (int k = 0; k < count; k++) out[first + k] = (float)__dadd_rn(mean, __dmul_rn(std, z[k]));
  }
};

struct normal_f64 {
  double *out, mean, std;
  __device__ void operator()(const uint32_t w[4], int64_t first, int count) const {
    double z[2];
    box_muller(1.0 - unit_f64(word64(w, 0)), unit_f64(word64(w, 1)), z);
    for (int k = 0; k < count; k++) out[first + k] = __dadd_rn(mean, __dmul_rn(std, z[k]));
  }
};

struct randint_i64 {
  int64_t *out, low;
  uint64_t range;
  __device__ void operator()(const uint32_t w[4], int64_t first, int count) const {
    for (int k = 0; k < count; k++)
      out[first + k] = (int64_t)((uint64_t)low + __umul64hi(word64(w, k), range));
  }
};

// p NULL: one p0 for all (dropout's keep probability, passed by value); otherwise p[i * ps].
struct bernoulli {
  const double *p;
  double p0;
  int64_t ps;
  uint8_t *out;
  __device__ void operator()(const uint32_t w[4], int64_t first, int count) const {
    for (int k = 0; k < count; k++) {
      int64_t i = first + k;
      out[i] = (double)w[k] * 0x1p-32 < (p ? p[i * ps] : p0);
    }
  }
};

// Element i reads lane i % L of block offset + i / L, as kernels/cpu/philox.c's fill_blocks.
// base (kernel_table.h's rng_base, inside a CUDA graph): the seed and the replay's first block
// are read when the kernel runs, so every replay of a captured fill draws fresh numbers.
template <int L, typename F>
__global__ void fill_kernel(const uint64_t *base, uint64_t seed, uint64_t offset, int64_t n, F f) {
  if (base) seed = base[0], offset += base[1];
  int64_t blocks = (n + L - 1) / L;
  for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < blocks; b += (int64_t)gridDim.x * blockDim.x) {
    uint32_t w[4];
    philox(seed, offset + (uint64_t)b, w);
    int64_t first = b * L, left = n - first;
    f(w, first, left < L ? (int)left : L);
  }
}

template <int L, typename F>
int launch_fill(const ms_k_exec *x, uint64_t seed, uint64_t offset, int64_t n, F f) {
  if (n <= 0) return 0;
  fill_kernel<L><<<blocks_for((n + L - 1) / L), kThreads, 0, (cudaStream_t)x->stream>>>(x->rng_base, seed, offset, n, f);
  return launch_status();
}

template <typename T>
__global__ void constant_kernel(int64_t n, T v, T *out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = v;
}

// low >= high: every element is low, as on the CPU (the caller has still reserved the blocks).
template <typename T>
int launch_constant(int64_t n, T v, T *out, void *stream) {
  if (n <= 0) return 0;
  constant_kernel<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(n, v, out);
  return launch_status();
}

}  // namespace

extern "C" int ms_k_cuda_philox_uniform(const ms_k_exec *x, ms_k_dtype dt, uint64_t seed, uint64_t offset,
                                        int64_t n, void *out, double low, double high) {
  void *stream = x->stream;
  if (dt == MS_K_F64) {
    if (!(low < high)) return launch_constant(n, low, (double *)out, stream);
    return launch_fill<2>(x, seed, offset, n, uniform_f64{(double *)out, low, high});
  }
  float lo = (float)low, hi = (float)high; /* the CPU's f32 fill takes float bounds */
  if (!(lo < hi)) return launch_constant(n, lo, (float *)out, stream);
  return launch_fill<4>(x, seed, offset, n, uniform_f32{(float *)out, lo, hi});
}

extern "C" int ms_k_cuda_philox_normal(const ms_k_exec *x, ms_k_dtype dt, uint64_t seed, uint64_t offset,
                                       int64_t n, void *out, double mean, double std) {
  if (dt == MS_K_F64) return launch_fill<2>(x, seed, offset, n, normal_f64{(double *)out, mean, std});
  return launch_fill<4>(x, seed, offset, n, normal_f32{(float *)out, mean, std});
}

extern "C" int ms_k_cuda_philox_randint(const ms_k_exec *x, uint64_t seed, uint64_t offset, int64_t n,
                                        int64_t *out, int64_t low, int64_t high) {
  randint_i64 f{out, low, (uint64_t)high - (uint64_t)low};
  return launch_fill<2>(x, seed, offset, n, f);
}

extern "C" int ms_k_cuda_philox_bernoulli(const ms_k_exec *x, uint64_t seed, uint64_t offset, int64_t n,
                                          double p, uint8_t *out) {
  return launch_fill<4>(x, seed, offset, n, bernoulli{nullptr, p, 0, out});
}

extern "C" int ms_k_cuda_philox_bernoulli_p(const ms_k_exec *x, uint64_t seed, uint64_t offset, int64_t n,
                                            const double *p, int64_t ps, uint8_t *out) {
  return launch_fill<4>(x, seed, offset, n, bernoulli{p, 0.0, ps, out});
}
