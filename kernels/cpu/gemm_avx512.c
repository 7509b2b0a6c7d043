/* gemm_avx512.c: the AVX-512F GEMM micro-kernels (built with -mavx512f/bw/dq/vl, called only
 * when the CPU has them). gemm_avx2.c with 512-bit types (sed s/256/512/, keep them in step) and
 * 12 rows: 24 zmm accumulators; per step of k, one row of packed B (two vectors) and MR broadcasts
 * of packed A. Not runnable on the development machine (Zen 3): checked under emulation. */
#include "kernels/cpu/gemm_ukr.h"

#include <immintrin.h>

/* Strided C (neither stride 1 after the driver's transpose): rare, so plain scalar code. */
static void store_tile_f32(const float *t, int mr, int nr, float alpha, float beta, float *c,
                           int64_t rsc, int64_t csc) {
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) {
      float *cij = c + i * rsc + j * csc;
      *cij = beta == 0.0f ? alpha * t[i * nr + j] : alpha * t[i * nr + j] + beta * *cij;
    }
}

static void store_tile_f64(const double *t, int mr, int nr, double alpha, double beta, double *c,
                           int64_t rsc, int64_t csc) {
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) {
      double *cij = c + i * rsc + j * csc;
      *cij = beta == 0.0 ? alpha * t[i * nr + j] : alpha * t[i * nr + j] + beta * *cij;
    }
}

void ms_k_sgemm_ukr_avx512(int64_t k, const float *alpha_p, const float *a, const float *b,
                           const float *beta_p, float *c, int64_t rsc, int64_t csc) {
  enum { MR = MS_SGEMM_AVX512_MR, NR = MS_SGEMM_AVX512_NR };
  _Static_assert(NR == 2 * sizeof(__m512) / sizeof(float), "NR is two vectors");
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    c0[i] = _mm512_setzero_ps();
    c1[i] = _mm512_setzero_ps();
    /* C is needed only at the end; start its lines on their way now. */
    _mm_prefetch((const char *)(c + i * rsc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * rsc + (NR - 1) * csc), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < k; p++) {
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + NR / 2);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      __m512 ai = _mm512_set1_ps(a[i]);
      c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
    }
    a += MR;
    b += NR;
  }
  const float alpha = *alpha_p, beta = *beta_p;
  if (csc != 1) {
    float t[MR * NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      _mm512_storeu_ps(t + i * NR, c0[i]);
      _mm512_storeu_ps(t + i * NR + NR / 2, c1[i]);
    }
    store_tile_f32(t, MR, NR, alpha, beta, c, rsc, csc);
    return;
  }
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    float *ci = c + i * rsc;
    if (beta == 0.0f) {
      _mm512_storeu_ps(ci, _mm512_mul_ps(va, c0[i]));
      _mm512_storeu_ps(ci + NR / 2, _mm512_mul_ps(va, c1[i]));
    } else {
      _mm512_storeu_ps(ci, _mm512_fmadd_ps(va, c0[i], _mm512_mul_ps(vb, _mm512_loadu_ps(ci))));
      _mm512_storeu_ps(ci + NR / 2,
                       _mm512_fmadd_ps(va, c1[i], _mm512_mul_ps(vb, _mm512_loadu_ps(ci + NR / 2))));
    }
  }
}

void ms_k_dgemm_ukr_avx512(int64_t k, const double *alpha_p, const double *a, const double *b,
                           const double *beta_p, double *c, int64_t rsc, int64_t csc) {
  enum { MR = MS_DGEMM_AVX512_MR, NR = MS_DGEMM_AVX512_NR };
  _Static_assert(NR == 2 * sizeof(__m512d) / sizeof(double), "NR is two vectors");
  __m512d c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    c0[i] = _mm512_setzero_pd();
    c1[i] = _mm512_setzero_pd();
    _mm_prefetch((const char *)(c + i * rsc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * rsc + (NR - 1) * csc), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < k; p++) {
    __m512d b0 = _mm512_load_pd(b), b1 = _mm512_load_pd(b + NR / 2);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      __m512d ai = _mm512_set1_pd(a[i]);
      c0[i] = _mm512_fmadd_pd(ai, b0, c0[i]);
      c1[i] = _mm512_fmadd_pd(ai, b1, c1[i]);
    }
    a += MR;
    b += NR;
  }
  const double alpha = *alpha_p, beta = *beta_p;
  if (csc != 1) {
    double t[MR * NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      _mm512_storeu_pd(t + i * NR, c0[i]);
      _mm512_storeu_pd(t + i * NR + NR / 2, c1[i]);
    }
    store_tile_f64(t, MR, NR, alpha, beta, c, rsc, csc);
    return;
  }
  __m512d va = _mm512_set1_pd(alpha), vb = _mm512_set1_pd(beta);
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    double *ci = c + i * rsc;
    if (beta == 0.0) {
      _mm512_storeu_pd(ci, _mm512_mul_pd(va, c0[i]));
      _mm512_storeu_pd(ci + NR / 2, _mm512_mul_pd(va, c1[i]));
    } else {
      _mm512_storeu_pd(ci, _mm512_fmadd_pd(va, c0[i], _mm512_mul_pd(vb, _mm512_loadu_pd(ci))));
      _mm512_storeu_pd(ci + NR / 2,
                       _mm512_fmadd_pd(va, c1[i], _mm512_mul_pd(vb, _mm512_loadu_pd(ci + NR / 2))));
    }
  }
}
