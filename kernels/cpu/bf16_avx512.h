/* bf16_avx512.h: private to the files built with the AVX-512 flags. bfloat16 <-> float32 on 16
 * lanes, bit for bit as the scalar ms_k_bf16_to_f32 and ms_k_f32_to_bf16 (round to nearest even,
 * NaNs kept quiet, subnormals kept): the rounding runs in integer lanes rather than with
 * AVX512_BF16's vcvtneps2bf16, so every AVX-512 CPU gives the same bits. cast_avx512.c converts
 * runs with these; layer norm and the activations load and store bfloat16 through them. */
#ifndef MS_BF16_AVX512_H
#define MS_BF16_AVX512_H

#include <immintrin.h>

#include "kernels/cpu/lanes_avx512.h"

static inline __m512 ms_k_bf16_widen16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m256i ms_k_bf16_round16(__m512 v) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  __m512i bits = _mm512_castps_si512(v);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, abs_mask), inf);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(half, lsb)), 16);
  __m512i quieted = _mm512_or_si512(_mm512_srli_epi32(bits, 16), quiet);
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quieted));
}

/* lanes_avx512.h's ms_k_load16 and ms_k_store16 for bfloat16 memory: widened on load, rounded
 * on store. */
static inline __m512 ms_k_load16_bf16(const uint16_t *p, int64_t n) {
  __m256i h = n >= 16 ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(ms_k_lanes16(n), p);
  return ms_k_bf16_widen16(h);
}

static inline void ms_k_store16_bf16(uint16_t *p, __m512 v, int64_t n) {
  if (n >= 16) _mm256_storeu_si256((__m256i *)p, ms_k_bf16_round16(v));
  else _mm256_mask_storeu_epi16(p, ms_k_lanes16(n), ms_k_bf16_round16(v));
}

#endif
