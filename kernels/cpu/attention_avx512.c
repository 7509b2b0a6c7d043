/* attention_avx512.c: the exponentials of attention's score rows and their sum, and the rows'
 * maximum, 16 at a time: the polynomial of attention.c's exp_sum_f32 (Cephes' expf) in AVX-512,
 * where the portable loops' 4 lanes left these passes as costly as the block products. */
#include <immintrin.h>
#include <math.h>

#include "attention_avx512.h"

/* exp(x - shift) of 16 lanes (0 below -87 and for -inf) */
static __m512 exp16(__m512 v, __m512 sh) {
  const __m512 lo = _mm512_set1_ps(-87.0f), log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(-0.693359375f), ln2_lo = _mm512_set1_ps(2.12194440e-4f);
  const __m512 c0 = _mm512_set1_ps(1.9875691500e-4f), c1 = _mm512_set1_ps(1.3981999507e-3f),
               c2 = _mm512_set1_ps(8.3334519073e-3f), c3 = _mm512_set1_ps(4.1665795894e-2f),
               c4 = _mm512_set1_ps(1.6666665459e-1f), c5 = _mm512_set1_ps(5.0000001201e-1f),
               one = _mm512_set1_ps(1.0f);
  __m512 x = _mm512_sub_ps(v, sh);
  __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ); /* below -87 (and -inf): 0 */
  __m512 xc = _mm512_max_ps(x, lo);
  __m512 fn = _mm512_roundscale_ps(_mm512_mul_ps(xc, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(fn, ln2_lo, _mm512_fmadd_ps(fn, ln2_hi, xc));
  __m512 p = _mm512_fmadd_ps(c0, r, c1);
  p = _mm512_fmadd_ps(p, r, c2);
  p = _mm512_fmadd_ps(p, r, c3);
  p = _mm512_fmadd_ps(p, r, c4);
  p = _mm512_fmadd_ps(p, r, c5);
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, one));
  __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fn), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(keep, p, _mm512_castsi512_ps(bits));
}

float ms_k_attention_exp_sum_avx512(float *row, int64_t n, float shift) {
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  int64_t t = 0;
  for (; t + 16 <= n; t += 16) {
    __m512 e = exp16(_mm512_loadu_ps(row + t), sh);
    _mm512_storeu_ps(row + t, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (t < n) { /* the tail's missing lanes load -inf, whose exponential is 0 */
    __mmask16 m = (__mmask16)((1u << (n - t)) - 1);
    __m512 e = exp16(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, row + t), sh);
    _mm512_mask_storeu_ps(row + t, m, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

float ms_k_attention_max_avx512(const float *row, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 mx = ninf;
  int64_t t = 0;
  for (; t + 16 <= n; t += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(row + t));
  if (t < n) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(ninf, (__mmask16)((1u << (n - t)) - 1), row + t));
  return _mm512_reduce_max_ps(mx);
}
