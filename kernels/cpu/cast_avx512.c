/* cast_avx512.c: bfloat16 <-> float32 runs, 16 elements a step (cast_half.h), through
 * bf16_avx512.h's lanes: the scalar ms_k_f32_to_bf16's bits on every AVX-512 CPU. */
#include "kernels/cpu/bf16_avx512.h"
#include "kernels/cpu/cast_half.h"

int64_t ms_k_bf16_to_f32_avx512(int64_t n, float *dst, const uint16_t *src) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, ms_k_bf16_widen16(_mm256_loadu_si256((const __m256i *)(src + i))));
  return i;
}

int64_t ms_k_f32_to_bf16_avx512(int64_t n, uint16_t *dst, const float *src) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(dst + i), ms_k_bf16_round16(_mm512_loadu_ps(src + i)));
  return i;
}
