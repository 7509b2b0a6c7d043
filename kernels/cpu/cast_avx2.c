/* cast_avx2.c: bfloat16 <-> float32 runs, 8 elements a step, for CPUs with AVX2 but not AVX-512
 * (cast_half.h): the same integer rounding as cast_avx512.c, so every ISA gives the scalar
 * ms_k_f32_to_bf16's bits. Without it such CPUs converted one element at a time: a bfloat16
 * max_pool2d over conv2's output (MS_GEMM_ISA=avx2 on Zen 5, one thread) took 4.0 ms; with it,
 * 0.9 (0.54 with the AVX-512 loops). */
#include <immintrin.h>

#include "kernels/cpu/cast_half.h"

int64_t ms_k_bf16_to_f32_avx2(int64_t n, float *dst, const uint16_t *src) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
    _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(h, 16));
  }
  return i;
}

int64_t ms_k_f32_to_bf16_avx2(int64_t n, uint16_t *dst, const float *src) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i bits = _mm256_loadu_si256((const __m256i *)(src + i));
    /* |bits| is below 2^31, so the signed compare orders it as unsigned would */
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, abs_mask), inf);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(half, lsb)), 16);
    __m256i quieted = _mm256_or_si256(_mm256_srli_epi32(bits, 16), quiet);
    __m256i r = _mm256_blendv_epi8(rounded, quieted, nan);
    /* every lane is below 2^16: the saturating pack keeps it; it packs within 128-bit halves,
     * so quarters 0 and 2 hold the eight results */
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(packed));
  }
  return i;
}
