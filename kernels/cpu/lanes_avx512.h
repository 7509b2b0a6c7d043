/* lanes_avx512.h: private to kernels/cpu, for the files built with the AVX-512 flags. The masks of
 * the low n of 16 (float32) or 32 (16-bit) lanes, which every masked row tail needs, and loads and
 * stores of the low n float32 lanes. */
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

/* The low n lanes of p (all 16 from n = 16 on), the others 0; and the store of v's low n. Masks
 * only in a tail: a masked store costs several times a plain one on Zen 4 and 5 (measured: the
 * layer norm backward's masked stores took half its time). */
static inline __m512 ms_k_load16(const float *p, int64_t n) {
  return n >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(ms_k_lanes16(n), p);
}

static inline void ms_k_store16(float *p, __m512 v, int64_t n) {
  if (n >= 16) _mm512_storeu_ps(p, v);
  else _mm512_mask_storeu_ps(p, ms_k_lanes16(n), v);
}

#endif
