/* gemm_avx2.c: the AVX2 + FMA GEMM micro-kernels (built with -mavx2 -mfma, called only when the
 * CPU has both). Each keeps an MR x NR tile of C in 2*MR ymm accumulators: per step of k it loads
 * one row of the packed B panel (two vectors) and broadcasts MR values of the packed A panel.
 * gemm_avx512.c is this file with 512-bit types (sed s/256/512/): keep the two in step. */
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

void ms_k_sgemm_ukr_avx2(int64_t k, const float *alpha_p, const float *a, const float *b,
                         const float *beta_p, float *c, int64_t rsc, int64_t csc) {
  enum { MR = MS_SGEMM_AVX2_MR, NR = MS_SGEMM_AVX2_NR };
  _Static_assert(NR == 2 * sizeof(__m256) / sizeof(float), "NR is two vectors");
  __m256 c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    c0[i] = _mm256_setzero_ps();
    c1[i] = _mm256_setzero_ps();
    /* C is needed only at the end; start its lines on their way now. */
    _mm_prefetch((const char *)(c + i * rsc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * rsc + (NR - 1) * csc), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < k; p++) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + NR / 2);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      __m256 ai = _mm256_set1_ps(a[i]);
      c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
    }
    a += MR;
    b += NR;
  }
  const float alpha = *alpha_p, beta = *beta_p;
  if (csc != 1) {
    float t[MR * NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      _mm256_storeu_ps(t + i * NR, c0[i]);
      _mm256_storeu_ps(t + i * NR + NR / 2, c1[i]);
    }
    store_tile_f32(t, MR, NR, alpha, beta, c, rsc, csc);
    return;
  }
  __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    float *ci = c + i * rsc;
    if (beta == 0.0f) {
      _mm256_storeu_ps(ci, _mm256_mul_ps(va, c0[i]));
      _mm256_storeu_ps(ci + NR / 2, _mm256_mul_ps(va, c1[i]));
    } else {
      _mm256_storeu_ps(ci, _mm256_fmadd_ps(va, c0[i], _mm256_mul_ps(vb, _mm256_loadu_ps(ci))));
      _mm256_storeu_ps(ci + NR / 2,
                       _mm256_fmadd_ps(va, c1[i], _mm256_mul_ps(vb, _mm256_loadu_ps(ci + NR / 2))));
    }
  }
}

void ms_k_dgemm_ukr_avx2(int64_t k, const double *alpha_p, const double *a, const double *b,
                         const double *beta_p, double *c, int64_t rsc, int64_t csc) {
  enum { MR = MS_DGEMM_AVX2_MR, NR = MS_DGEMM_AVX2_NR };
  _Static_assert(NR == 2 * sizeof(__m256d) / sizeof(double), "NR is two vectors");
  __m256d c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    c0[i] = _mm256_setzero_pd();
    c1[i] = _mm256_setzero_pd();
    _mm_prefetch((const char *)(c + i * rsc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * rsc + (NR - 1) * csc), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < k; p++) {
    __m256d b0 = _mm256_load_pd(b), b1 = _mm256_load_pd(b + NR / 2);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      __m256d ai = _mm256_set1_pd(a[i]);
      c0[i] = _mm256_fmadd_pd(ai, b0, c0[i]);
      c1[i] = _mm256_fmadd_pd(ai, b1, c1[i]);
    }
    a += MR;
    b += NR;
  }
  const double alpha = *alpha_p, beta = *beta_p;
  if (csc != 1) {
    double t[MR * NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      _mm256_storeu_pd(t + i * NR, c0[i]);
      _mm256_storeu_pd(t + i * NR + NR / 2, c1[i]);
    }
    store_tile_f64(t, MR, NR, alpha, beta, c, rsc, csc);
    return;
  }
  __m256d va = _mm256_set1_pd(alpha), vb = _mm256_set1_pd(beta);
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    double *ci = c + i * rsc;
    if (beta == 0.0) {
      _mm256_storeu_pd(ci, _mm256_mul_pd(va, c0[i]));
      _mm256_storeu_pd(ci + NR / 2, _mm256_mul_pd(va, c1[i]));
    } else {
      _mm256_storeu_pd(ci, _mm256_fmadd_pd(va, c0[i], _mm256_mul_pd(vb, _mm256_loadu_pd(ci))));
      _mm256_storeu_pd(ci + NR / 2,
                       _mm256_fmadd_pd(va, c1[i], _mm256_mul_pd(vb, _mm256_loadu_pd(ci + NR / 2))));
    }
  }
}
