/* cast_avx2.c: bfloat16 <-> float32 runs, 8 elements a step, for CPUs with AVX2 but not AVX-512
 * (cast_half.h), through bf16_avx2.h's lanes, so every ISA gives the scalar ms_k_f32_to_bf16's
 * bits. Without it such CPUs converted one element at a time: a bfloat16 max_pool2d over conv2's
 * output (MS_GEMM_ISA=avx2 on Zen 5, one thread) took 4.0 ms; with it, 0.9 (0.54 with the
 * AVX-512 loops). */
#include "kernels/cpu/bf16_avx2.h"
#include "kernels/cpu/cast_half.h"

int64_t ms_k_bf16_to_f32_avx2(int64_t n, float *dst, const uint16_t *src) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, ms_k_bf16_widen8(_mm_loadu_si128((const __m128i *)(src + i))));
  return i;
}

int64_t ms_k_f32_to_bf16_avx2(int64_t n, uint16_t *dst, const float *src) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + i), ms_k_bf16_round8(_mm256_loadu_ps(src + i)));
  return i;
}
