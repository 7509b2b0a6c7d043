/* pool_avx2.c: 2x2 stride-2 float32 max pooling rows in AVX2 (built with -mavx2 -mfma, called by
 * pool.c only when the CPU has them): eight windows per step forward, four backward, with the
 * scalar code's selection rules and index arithmetic. */
#include <immintrin.h>

#include "kernels/cpu/pool_avx2.h"

/* Even and odd elements of 16 consecutive floats, each in order. */
static inline void deinterleave(const float *p, __m256 *even, __m256 *odd) {
  __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
  /* per 128-bit half: [v0 0 2 | v1 0 2], so the 64-bit quarters come out as 0 2 1 3 */
  __m256d e = _mm256_castps_pd(_mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)));
  __m256d o = _mm256_castps_pd(_mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(e, _MM_SHUFFLE(3, 1, 2, 0)));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(o, _MM_SHUFFLE(3, 1, 2, 0)));
}

/* x wins over the current m when greater or NaN (a NaN m is then kept: nothing is greater). */
static inline __m256 wins(__m256 x, __m256 m) {
  return _mm256_or_ps(_mm256_cmp_ps(x, m, _CMP_GT_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

int64_t ms_k_max2x2_row_avx2(const float *r0, const float *r1, int64_t ow_count, float *o,
                             int64_t *ix, int64_t base, int64_t w) {
  const __m256i off1 = _mm256_set1_epi32(1), offw = _mm256_set1_epi32((int)w),
                offw1 = _mm256_set1_epi32((int)w + 1);
  const __m256i step = _mm256_setr_epi64x(0, 2, 4, 6);
  int64_t ow = 0;
  for (; ow + 8 <= ow_count; ow += 8) {
    __m256 a, b, c, d;
    deinterleave(r0 + 2 * ow, &a, &b);
    deinterleave(r1 + 2 * ow, &c, &d);
    __m256 tb = wins(b, a), m = _mm256_blendv_ps(a, b, tb);
    __m256 tc = wins(c, m);
    m = _mm256_blendv_ps(m, c, tc);
    __m256 td = wins(d, m);
    _mm256_storeu_ps(o + ow, _mm256_blendv_ps(m, d, td));
    if (!ix) continue;
    /* the winner's offset in the plane from r0's window start: 0, 1, w or w + 1 */
    __m256 tf = _mm256_and_ps(tb, _mm256_castsi256_ps(off1));
    tf = _mm256_blendv_ps(tf, _mm256_castsi256_ps(offw), tc);
    __m256i t = _mm256_castps_si256(_mm256_blendv_ps(tf, _mm256_castsi256_ps(offw1), td));
    __m256i start = _mm256_add_epi64(_mm256_set1_epi64x(base + 2 * ow), step);
    __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(t));
    __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(t, 1));
    _mm256_storeu_si256((__m256i *)(ix + ow), _mm256_add_epi64(lo, start));
    _mm256_storeu_si256((__m256i *)(ix + ow + 4),
                        _mm256_add_epi64(hi, _mm256_add_epi64(start, _mm256_set1_epi64x(8))));
  }
  return ow;
}

int64_t ms_k_max2x2_backward_row_avx2(float *r0, float *r1, const float *g, const int64_t *at,
                                      int64_t ow_count, int64_t base, int64_t w, int *bad) {
  const __m256i one = _mm256_set1_epi64x(1), wv = _mm256_set1_epi64x(w),
                w1 = _mm256_set1_epi64x(w + 1), step = _mm256_setr_epi64x(0, 2, 4, 6);
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  __m256i invalid = _mm256_setzero_si256();
  int64_t ow = 0;
  for (; ow + 4 <= ow_count; ow += 4) {
    __m256i start = _mm256_add_epi64(_mm256_set1_epi64x(base + 2 * ow), step);
    __m256i t = _mm256_sub_epi64(_mm256_loadu_si256((const __m256i *)(at + ow)), start);
    __m256i m0 = _mm256_cmpeq_epi64(t, _mm256_setzero_si256()), m1 = _mm256_cmpeq_epi64(t, one);
    __m256i m2 = _mm256_cmpeq_epi64(t, wv), m3 = _mm256_cmpeq_epi64(t, w1);
    __m256i any = _mm256_or_si256(_mm256_or_si256(m0, m1), _mm256_or_si256(m2, m3));
    invalid = _mm256_or_si256(invalid, _mm256_xor_si256(any, _mm256_set1_epi64x(-1)));
    /* each 64-bit mask covers two float lanes: take the low half of one, the high of the other */
    __m256 g4 = _mm256_castps128_ps256(_mm_loadu_ps(g + ow));
    /* -0 becomes +0, as the scatter's 0 + g */
    __m256 v = _mm256_add_ps(_mm256_setzero_ps(), _mm256_permutevar8x32_ps(g4, dup));
    __m256 top = _mm256_castsi256_ps(_mm256_blend_epi32(m0, m1, 0xAA));
    __m256 bottom = _mm256_castsi256_ps(_mm256_blend_epi32(m2, m3, 0xAA));
    _mm256_storeu_ps(r0 + 2 * ow, _mm256_and_ps(top, v));
    _mm256_storeu_ps(r1 + 2 * ow, _mm256_and_ps(bottom, v));
  }
  *bad |= !_mm256_testz_si256(invalid, invalid);
  return ow;
}
