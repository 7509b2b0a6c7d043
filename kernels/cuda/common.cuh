// common.cuh: what the CUDA kernels share: the grid-stride launch shape, strided offsets from a
// linear index, and element loads/stores with ms_k_cast's conversion rules (kernels/cpu/cast.c).
#ifndef MS_KC_COMMON_CUH
#define MS_KC_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels_cuda.h"

namespace mskc {

constexpr int kThreads = 256;

// Blocks for n elements with a grid-stride loop: enough to fill the GPU, never more than n needs.
inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

// Element offsets of linear (row-major) index i in operands 0..nops-1. One dim (every contiguous
// tensor after the engine merges dims) needs no division: the common case takes no 64-bit one.
template <int NOPS>
__device__ inline void offsets(const ms_k_geom &g, int64_t i, int64_t *off) {
  if (g.ndim == 1) {
    for (int k = 0; k < NOPS; k++) off[k] = i * g.strides[k][0];
    return;
  }
  for (int k = 0; k < NOPS; k++) off[k] = 0;
  for (int d = g.ndim - 1; d >= 0; d--) {
    int64_t size = g.shape[d], idx = i % size;
    i /= size;
    for (int k = 0; k < NOPS; k++) off[k] += idx * g.strides[k][d];
  }
}

// Philox 4x32-10 (random.cu's fills, attention's dropout) exactly as ms_k_philox4x32_10: block number `block` is the counter
// {low word, high word, 0, 0} under the key {low word, high word of seed}.
__device__ inline void philox(uint64_t seed, uint64_t block, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    if (r > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    c0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    c1 = (uint32_t)p1;
    c2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c3 = (uint32_t)p0;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

__host__ __device__ inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

__host__ __device__ inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

__device__ inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {
      float f = (float)man * 0x1p-24f;
      memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

__device__ inline uint16_t f32_to_f16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
  float a = fabsf(f);
  if (isnan(f)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;
  if (a < 0x1p-14f) return sign | (uint16_t)lrintf(a * 0x1p24f);
  uint32_t abits = bits & 0x7fffffffu;
  uint32_t r = abits + 0xfffu + ((abits >> 13) & 1u);
  return sign | (uint16_t)((r >> 13) - (112u << 10));
}

// A 16-bit float of dtype t (MS_K_BF16 or MS_K_F16) as float32 (exact), and a float32 rounded
// once to t (to nearest even, a NaN quiet): ms_k_cast's rules, so 16-bit results have the CPU's
// bits.
__device__ inline float half_to_f32(uint16_t h, ms_k_dtype t) {
  return t == MS_K_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}
__device__ inline uint16_t f32_to_half(float f, ms_k_dtype t) {
  return t == MS_K_BF16 ? f32_to_bf16(f) : f32_to_f16(f);
}

// bfloat16 and float16 elements for templates over the element type (reduce.cu): they read as
// their float32 value.
struct bf16_el {
  uint16_t bits;
  __device__ operator double() const { return bf16_to_f32(bits); }
};
struct f16_el {
  uint16_t bits;
  __device__ operator double() const { return f16_to_f32(bits); }
};

__device__ inline bool is_floating(ms_k_dtype t) { return t <= MS_K_F16; }

__device__ inline double load_f(const char *p, ms_k_dtype t) {
  switch (t) {
  case MS_K_F32: return *(const float *)p;
  case MS_K_F64: return *(const double *)p;
  case MS_K_BF16: return bf16_to_f32(*(const uint16_t *)p);
  case MS_K_F16: return f16_to_f32(*(const uint16_t *)p);
  case MS_K_I64: return (double)*(const int64_t *)p;
  case MS_K_I32: return *(const int32_t *)p;
  case MS_K_U8: return *(const uint8_t *)p;
  case MS_K_BOOL: return *(const uint8_t *)p != 0;
  }
  return 0;
}

__device__ inline int64_t load_i(const char *p, ms_k_dtype t) {
  switch (t) {
  case MS_K_I64: return *(const int64_t *)p;
  case MS_K_I32: return *(const int32_t *)p;
  case MS_K_U8: return *(const uint8_t *)p;
  case MS_K_BOOL: return *(const uint8_t *)p != 0;
  default: return 0;
  }
}

__device__ inline void store_i(char *p, ms_k_dtype t, int64_t v) {
  switch (t) {
  case MS_K_I64: *(int64_t *)p = v; break;
  case MS_K_I32: *(int32_t *)p = (int32_t)(uint32_t)v; break;
  case MS_K_U8: *(uint8_t *)p = (uint8_t)v; break;
  case MS_K_BOOL: *(uint8_t *)p = v != 0; break;
  default: break;
  }
}

__device__ inline int64_t f_to_i64(double v) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)v;
}

__device__ inline void store_f(char *p, ms_k_dtype t, double v) {
  switch (t) {
  case MS_K_F32: *(float *)p = (float)v; break;
  case MS_K_F64: *(double *)p = v; break;
  case MS_K_BF16: *(uint16_t *)p = f32_to_bf16((float)v); break;
  case MS_K_F16: *(uint16_t *)p = f32_to_f16((float)v); break;
  case MS_K_BOOL: *(uint8_t *)p = v != 0; break;
  default: store_i(p, t, f_to_i64(v)); break;
  }
}

__host__ __device__ inline int elsize(ms_k_dtype t) {
  return t == MS_K_F64 || t == MS_K_I64 ? 8 : t == MS_K_F32 || t == MS_K_I32 ? 4 : t <= MS_K_F16 ? 2 : 1;
}

inline int launch_status() { return (int)cudaGetLastError(); }

// The sum of every thread's v over a block of kThreads threads, returned to all of them (every
// thread of the block must call it: it synchronises).
__device__ inline double block_sum(double v) {
  __shared__ double part[kThreads];
  __syncthreads(); // a previous call's readers are done with part
  part[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  return part[0];
}

} // namespace mskc

#endif
