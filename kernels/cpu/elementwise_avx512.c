/* elementwise_avx512.c: AVX-512 bodies of elementwise.c's loops that the compiler does not
 * vectorise itself (built with the AVX-512 flags; called only where ms_k_cpu_avx512 says).
 * relu on bfloat16 bits, 32 a step: GCC left the bit loop scalar, and a bfloat16 relu over
 * conv2's output (2.36 M elements, one thread) took 0.39 ms against float32's 0.25 on twice the
 * bytes; this loop takes 0.094. */
#include <immintrin.h>

#include "kernels/cpu/elementwise_avx512.h"

int64_t ms_k_relu_bf16_avx512(int64_t n, uint16_t *out, const uint16_t *x) {
  const __m512i abs_mask = _mm512_set1_epi16(0x7fff), inf = _mm512_set1_epi16(0x7f80);
  const __m512i one = _mm512_set1_epi16(1), quiet = _mm512_set1_epi16(0x40);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512i b = _mm512_loadu_si512(x + i);
    /* as elementwise.c's relu_bf16: a NaN comes back quiet, b in [1, inf] (positive) stays,
     * everything else (zeros, negatives) becomes +0 */
    __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(b, abs_mask), inf);
    __mmask32 keep = _mm512_cmplt_epu16_mask(_mm512_sub_epi16(b, one), inf);
    __m512i r = _mm512_maskz_mov_epi16(keep, b);
    _mm512_storeu_si512(out + i, _mm512_mask_mov_epi16(r, nan, _mm512_or_si512(b, quiet)));
  }
  return i;
}
