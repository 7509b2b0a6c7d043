/* cast_avx512.c: bfloat16 <-> float32 runs, 16 elements a step (cast_half.h). The rounding is
 * done in integer lanes rather than with AVX512_BF16's vcvtneps2bf16, so that the result is the
 * scalar ms_k_f32_to_bf16's on every AVX-512 CPU, with or without that extension. */
#include <immintrin.h>

#include "kernels/cpu/cast_half.h"

int64_t ms_k_bf16_to_f32_avx512(int64_t n, float *dst, const uint16_t *src) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(h, 16));
  }
  return i;
}

int64_t ms_k_f32_to_bf16_avx512(int64_t n, uint16_t *dst, const float *src) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i bits = _mm512_loadu_si512(src + i);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, abs_mask), inf);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(half, lsb)), 16);
    __m512i quieted = _mm512_or_si512(_mm512_srli_epi32(bits, 16), quiet);
    _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quieted)));
  }
  return i;
}
