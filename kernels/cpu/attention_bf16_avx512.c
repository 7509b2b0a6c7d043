/* attention_bf16_avx512.c: the rounding of attention's float blocks of weights (P, dS) to
 * bfloat16 operands with AVX512_BF16's vcvtneps2bf16, one instruction per 16 values where the
 * integer-lane rounding of cast_avx512.c took eight: the blocks are rounded as often as they are
 * multiplied. Round to nearest even as ms_k_f32_to_bf16, except that subnormals become zero, which
 * the vdpbf16ps products they feed would make of them anyway. */
#include <immintrin.h>

#include "attention_bf16_avx512.h"

void ms_k_attention_round_bf16(int64_t rows, int64_t n, const float *src, int64_t ss, uint16_t *dst, int64_t ds) {
  const __mmask16 tail = (__mmask16)((1u << (n % 16)) - 1);
  for (int64_t r = 0; r < rows; r++) {
    const float *s = src + r * ss;
    uint16_t *d = dst + r * ds;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256((__m256i *)(d + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + i)));
    if (tail)
      _mm256_mask_storeu_epi16(d + i, tail, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(tail, s + i)));
  }
}
