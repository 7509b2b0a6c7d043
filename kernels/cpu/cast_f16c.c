/* cast_f16c.c: float16 <-> float32 runs, 8 elements a step, with F16C's vcvtph2ps / vcvtps2ph
 * (cast_half.h; present on every CPU with AVX2). The hardware rounds to nearest even and keeps
 * subnormals, as the scalar ms_k_f32_to_f16 does; NaNs differ (it keeps payloads and quiets
 * signalling NaNs, the scalar code makes every NaN the quiet 0x7e00 one way and keeps the
 * pattern the other), so NaN lanes are redone in integers: the result is the scalar one, bit for
 * bit. Without these, float16 mixed precision converted one element at a time and trained 3x
 * slower than float32 (12,800 samples on 2 ranks: 13.3 s against 4.2; with them 4.7 s). */
#include <immintrin.h>

#include "kernels/cpu/cast_half.h"

int64_t ms_k_f16_to_f32_f16c(int64_t n, float *dst, const uint16_t *src) {
  const __m256i exp_mask = _mm256_set1_epi32(0x7c00), man_mask = _mm256_set1_epi32(0x3ff);
  const __m256i sign_mask = _mm256_set1_epi32(0x8000), inf32 = _mm256_set1_epi32(0x7f800000);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
    __m256 f = _mm256_cvtph_ps(h);
    __m256i w = _mm256_cvtepu16_epi32(h), man = _mm256_and_si256(w, man_mask);
    __m256i nan = _mm256_andnot_si256(_mm256_cmpeq_epi32(man, _mm256_setzero_si256()),
                                      _mm256_cmpeq_epi32(_mm256_and_si256(w, exp_mask), exp_mask));
    __m256i kept = _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, sign_mask), 16), inf32),
                                   _mm256_slli_epi32(man, 13)); /* sign, all-ones exponent, payload as is */
    _mm256_storeu_si256((__m256i *)(dst + i), _mm256_blendv_epi8(_mm256_castps_si256(f), kept, nan));
  }
  return i;
}

int64_t ms_k_f32_to_f16_f16c(int64_t n, uint16_t *dst, const float *src) {
  const __m256i sign_mask = _mm256_set1_epi32(0x8000), quiet = _mm256_set1_epi32(0x7e00);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(src + i);
    __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    __m256i fix = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 16), sign_mask), quiet);
    /* to 16-bit lanes: the fixes are below 2^16, the masks 0 or -1 */
    __m128i fix16 = _mm_packus_epi32(_mm256_castsi256_si128(fix), _mm256_extracti128_si256(fix, 1));
    __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
    _mm_storeu_si128((__m128i *)(dst + i), _mm_blendv_epi8(h, fix16, nan16));
  }
  return i;
}
