/* layer_norm_avx2.c: layer_norm_body.h on AVX2 and FMA vectors (8 float32 lanes, 4 float64): the
 * vector words it is written in; a row tail goes through a zero-filled copy on the stack. */
#include <string.h>

#include "kernels/cpu/bf16_avx2.h"
#include "kernels/cpu/layer_norm_fast.h"

#define W 8
typedef __m256 vf;
typedef __m256d vd;

/* The low n lanes (all from n = W on) of p; the other lanes 0. */
static inline vf vf_load(const float *p, int64_t n) {
  if (n >= W) return _mm256_loadu_ps(p);
  float t[W] = {0};
  memcpy(t, p, (size_t)n * sizeof *p);
  return _mm256_loadu_ps(t);
}
static inline vf vf_load_bf16(const uint16_t *p, int64_t n) {
  if (n >= W) return ms_k_bf16_widen8(_mm_loadu_si128((const __m128i *)p));
  uint16_t t[W] = {0};
  memcpy(t, p, (size_t)n * sizeof *p);
  return ms_k_bf16_widen8(_mm_loadu_si128((const __m128i *)t));
}
static inline void vf_store(float *p, vf v, int64_t n) {
  if (n >= W) {
    _mm256_storeu_ps(p, v);
    return;
  }
  float t[W];
  _mm256_storeu_ps(t, v);
  memcpy(p, t, (size_t)n * sizeof *p);
}
static inline void vf_store_bf16(uint16_t *p, vf v, int64_t n) {
  if (n >= W) {
    _mm_storeu_si128((__m128i *)p, ms_k_bf16_round8(v));
    return;
  }
  uint16_t t[W];
  _mm_storeu_si128((__m128i *)t, ms_k_bf16_round8(v));
  memcpy(p, t, (size_t)n * sizeof *p);
}
static inline vf vf_set1(float s) { return _mm256_set1_ps(s); }
static inline vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }   /* a b + c */
static inline vf vf_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); } /* c - a b */

/* The low and the high half of v's lanes, widened. */
static inline vd vd_lo(vf v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
static inline vd vd_hi(vf v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
static inline vd vd_set1(double s) { return _mm256_set1_pd(s); }
static inline vd vd_add(vd a, vd b) { return _mm256_add_pd(a, b); }
static inline vd vd_sub(vd a, vd b) { return _mm256_sub_pd(a, b); }
static inline vd vd_mul(vd a, vd b) { return _mm256_mul_pd(a, b); }
static inline vd vd_fma(vd a, vd b, vd c) { return _mm256_fmadd_pd(a, b, c); }
static inline vd vd_load(const double *p) { return _mm256_loadu_pd(p); }
static inline void vd_store(double *p, vd v) { _mm256_storeu_pd(p, v); }
/* v with its lanes from n on zeroed. */
static inline vd vd_keep(vd v, int64_t n) {
  __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
  return _mm256_and_pd(v, _mm256_castsi256_pd(_mm256_cmpgt_epi64(_mm256_set1_epi64x(n), lane)));
}
static inline double vd_sum(vd v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

#define SFX(name) name##_avx2
#include "kernels/cpu/layer_norm_body.h"
#undef SFX
