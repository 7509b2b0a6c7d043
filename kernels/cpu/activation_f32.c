/* activation_f32.c: the portable build of activation_f32_body.h and the choice of ISA (AVX-512, AVX2, else
 * the baseline's SSE2). */
#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/cpu_isa.h"

#define SFX(name) name##_portable
#include "kernels/cpu/activation_f32_body.h"
#undef SFX

bool ms_k_activation_f32_fast(ms_k_act act, const float *x, float *y, int64_t n) {
  if (ms_k_cpu_avx512()) return ms_k_activation_f32_avx512(act, x, y, n);
  if (ms_k_cpu_avx2()) return ms_k_activation_f32_avx2(act, x, y, n);
  return ms_k_activation_f32_portable(act, x, y, n);
}

bool ms_k_activation_backward_f32_fast(ms_k_act act, const float *x, const float *g, float *gx, int64_t n) {
  if (ms_k_cpu_avx512()) return ms_k_activation_backward_f32_avx512(act, x, g, gx, n);
  if (ms_k_cpu_avx2()) return ms_k_activation_backward_f32_avx2(act, x, g, gx, n);
  return ms_k_activation_backward_f32_portable(act, x, g, gx, n);
}

bool ms_k_activation_bf16_fast(ms_k_act act, const uint16_t *x, uint16_t *y, int64_t n) {
  return ms_k_cpu_avx512() && ms_k_activation_bf16_avx512(act, x, y, n);
}

bool ms_k_activation_backward_bf16_fast(ms_k_act act, const uint16_t *x, const uint16_t *g, uint16_t *gx, int64_t n) {
  return ms_k_cpu_avx512() && ms_k_activation_backward_bf16_avx512(act, x, g, gx, n);
}
