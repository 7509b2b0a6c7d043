/* layer_norm_avx512.c: layer_norm_body.h on AVX-512 vectors (16 float32 lanes, 8 float64): the
 * vector words it is written in, row tails by masked loads and stores. */
#include "kernels/cpu/bf16_avx512.h"
#include "kernels/cpu/lanes_avx512.h"
#include "kernels/cpu/layer_norm_fast.h"

#define W 16
typedef __m512 vf;
typedef __m512d vd;

/* The low n lanes (all from n = W on) of p, the other lanes 0; masks only in the tail. */
static inline vf vf_load(const float *p, int64_t n) { return ms_k_load16(p, n); }
static inline vf vf_load_bf16(const uint16_t *p, int64_t n) { return ms_k_load16_bf16(p, n); }
static inline void vf_store(float *p, vf v, int64_t n) { ms_k_store16(p, v, n); }
static inline void vf_store_bf16(uint16_t *p, vf v, int64_t n) { ms_k_store16_bf16(p, v, n); }
static inline vf vf_set1(float s) { return _mm512_set1_ps(s); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   /* a b + c */
static inline vf vf_fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } /* c - a b */

/* The low and the high half of v's lanes, widened. */
static inline vd vd_lo(vf v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
static inline vd vd_hi(vf v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
static inline vd vd_set1(double s) { return _mm512_set1_pd(s); }
static inline vd vd_add(vd a, vd b) { return _mm512_add_pd(a, b); }
static inline vd vd_sub(vd a, vd b) { return _mm512_sub_pd(a, b); }
static inline vd vd_mul(vd a, vd b) { return _mm512_mul_pd(a, b); }
static inline vd vd_fma(vd a, vd b, vd c) { return _mm512_fmadd_pd(a, b, c); }
static inline vd vd_load(const double *p) { return _mm512_loadu_pd(p); }
static inline void vd_store(double *p, vd v) { _mm512_storeu_pd(p, v); }
/* v with its lanes from n on zeroed. */
static inline vd vd_keep(vd v, int64_t n) { return _mm512_maskz_mov_pd((__mmask8)ms_k_lanes16(n), v); }
static inline double vd_sum(vd v) { return _mm512_reduce_add_pd(v); }

#define SFX(name) name##_avx512
#include "kernels/cpu/layer_norm_body.h"
#undef SFX
