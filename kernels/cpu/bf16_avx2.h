/* bf16_avx2.h: private to the files built with the AVX2 flags. bfloat16 <-> float32 on 8 lanes
 * with bf16_avx512.h's integer rounding, so every ISA gives the scalar ms_k_f32_to_bf16's bits.
 * cast_avx2.c converts runs with these; the layer norm rows load and store bfloat16 through them. */
#ifndef MS_BF16_AVX2_H
#define MS_BF16_AVX2_H

#include <immintrin.h>

static inline __m256 ms_k_bf16_widen8(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __m128i ms_k_bf16_round8(__m256 v) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
  __m256i bits = _mm256_castps_si256(v);
  /* |bits| is below 2^31, so the signed compare orders it as unsigned would */
  __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, abs_mask), inf);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(half, lsb)), 16);
  __m256i quieted = _mm256_or_si256(_mm256_srli_epi32(bits, 16), quiet);
  __m256i r = _mm256_blendv_epi8(rounded, quieted, nan);
  /* every lane is below 2^16: the saturating pack keeps it; it packs within 128-bit halves, so
   * quarters 0 and 2 hold the eight results */
  __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  return _mm256_castsi256_si128(packed);
}

#endif
