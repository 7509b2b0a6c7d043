/* lanes_avx512.h: private to kernels/cpu, for the files built with the AVX-512 flags. The masks of
 * the low n of 16 (float32) or 32 (16-bit) lanes, which every masked row tail needs. */
#ifndef MS_LANES_AVX512_H
#define MS_LANES_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* The low n of 16 lanes (n clamped to [0, 16]). */
static inline __mmask16 ms_k_lanes16(int64_t n) {
  return n <= 0 ? 0 : n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
}

/* The low n of 32 lanes (n clamped to [0, 32]). */
static inline __mmask32 ms_k_lanes32(int64_t n) {
  return n <= 0 ? 0 : n >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << n) - 1);
}

#endif
