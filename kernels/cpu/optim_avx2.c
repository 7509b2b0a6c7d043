/* optim_avx2.c: the float32 Adadelta step in AVX2 (built with -mavx2 -mfma, called by optim.c only
 * when the CPU has them). The same double formula as optim.c's adadelta_block, operation for
 * operation (no FMA: -std=c11 keeps GCC from contracting), four elements per vector, widened on
 * load and rounded once on store: bit for bit the staged path, without its copies. */
#include <immintrin.h>

#include "kernels/cpu/optim_avx2.h"

int64_t ms_k_adadelta_f32_avx2(const ms_k_adadelta_hp *hp, int64_t n, float *p, const float *g,
                               float *sq, float *acc) {
  const __m256d rho = _mm256_set1_pd(hp->rho), one_m_rho = _mm256_set1_pd(1 - hp->rho);
  const __m256d eps = _mm256_set1_pd(hp->eps), neg_lr = _mm256_set1_pd(-hp->lr);
  const __m256d wd = _mm256_set1_pd(hp->weight_decay), sign = _mm256_set1_pd(-0.0);
  const int maximize = hp->maximize, decay = hp->weight_decay != 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d pi = _mm256_cvtps_pd(_mm_loadu_ps(p + i)), gi = _mm256_cvtps_pd(_mm_loadu_ps(g + i));
    __m256d si = _mm256_cvtps_pd(_mm_loadu_ps(sq + i)), ai = _mm256_cvtps_pd(_mm_loadu_ps(acc + i));
    if (maximize) gi = _mm256_xor_pd(gi, sign);
    if (decay) gi = _mm256_add_pd(gi, _mm256_mul_pd(wd, pi));
    si = _mm256_add_pd(_mm256_mul_pd(si, rho), _mm256_mul_pd(_mm256_mul_pd(one_m_rho, gi), gi));
    __m256d std = _mm256_sqrt_pd(_mm256_add_pd(si, eps));
    __m256d delta = _mm256_mul_pd(_mm256_div_pd(_mm256_sqrt_pd(_mm256_add_pd(ai, eps)), std), gi);
    __m256d dd = _mm256_mul_pd(_mm256_mul_pd(one_m_rho, delta), delta);
    ai = _mm256_add_pd(_mm256_mul_pd(ai, rho), dd);
    pi = _mm256_add_pd(pi, _mm256_mul_pd(neg_lr, delta));
    _mm_storeu_ps(sq + i, _mm256_cvtpd_ps(si));
    _mm_storeu_ps(acc + i, _mm256_cvtpd_ps(ai));
    _mm_storeu_ps(p + i, _mm256_cvtpd_ps(pi));
  }
  return i;
}
