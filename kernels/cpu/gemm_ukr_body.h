/* gemm_ukr_body.h: private to kernels/cpu. The one body of the x86 GEMM micro-kernels, written
 * once for any vector width: gemm_avx2.c and gemm_avx512.c each define the names below and
 * include it. Each kernel keeps an MR x NR tile of C in 2*MR vector accumulators: per step of k
 * it loads one row of the packed B panel (two vectors) and broadcasts MR values of packed A.
 *
 * The including file defines: UKR_VEC(op) (the intrinsic prefix: _mm256_##op), UKR_VF / UKR_VD
 * (the float and double vector types), UKR_SGEMM / UKR_DGEMM (the function names; UKR_DGEMM may
 * be left undefined) and UKR_SGEMM_MR, _NR, UKR_DGEMM_MR, _NR (the tile sizes from gemm_ukr.h). */
#include <immintrin.h>

#include "kernels/cpu/gemm_ukr.h"

/* Strided C (neither stride 1 after the driver's transpose): rare, so plain scalar code. */
static void store_tile_f32(const float *t, int mr, int nr, float alpha, float beta, float *c,
                           int64_t rsc, int64_t csc) {
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) {
      float *cij = c + i * rsc + j * csc;
      *cij = beta == 0.0f ? alpha * t[i * nr + j] : alpha * t[i * nr + j] + beta * *cij;
    }
}

void UKR_SGEMM(int64_t k, const float *alpha_p, const float *a, const float *b, const float *beta_p,
               float *c, int64_t rsc, int64_t csc) {
  enum { MR = UKR_SGEMM_MR, NR = UKR_SGEMM_NR };
  _Static_assert(NR == 2 * sizeof(UKR_VF) / sizeof(float), "NR is two vectors");
  UKR_VF c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    c0[i] = UKR_VEC(setzero_ps)();
    c1[i] = UKR_VEC(setzero_ps)();
    /* C is needed only at the end; start its lines on their way now. */
    _mm_prefetch((const char *)(c + i * rsc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * rsc + (NR - 1) * csc), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < k; p++) {
    UKR_VF b0 = UKR_VEC(load_ps)(b), b1 = UKR_VEC(load_ps)(b + NR / 2);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      UKR_VF ai = UKR_VEC(set1_ps)(a[i]);
      c0[i] = UKR_VEC(fmadd_ps)(ai, b0, c0[i]);
      c1[i] = UKR_VEC(fmadd_ps)(ai, b1, c1[i]);
    }
    a += MR;
    b += NR;
  }
  const float alpha = *alpha_p, beta = *beta_p;
  if (csc != 1) {
    float t[MR * NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      UKR_VEC(storeu_ps)(t + i * NR, c0[i]);
      UKR_VEC(storeu_ps)(t + i * NR + NR / 2, c1[i]);
    }
    store_tile_f32(t, MR, NR, alpha, beta, c, rsc, csc);
    return;
  }
  UKR_VF va = UKR_VEC(set1_ps)(alpha), vb = UKR_VEC(set1_ps)(beta);
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    float *ci = c + i * rsc;
    if (beta == 0.0f) {
      UKR_VEC(storeu_ps)(ci, UKR_VEC(mul_ps)(va, c0[i]));
      UKR_VEC(storeu_ps)(ci + NR / 2, UKR_VEC(mul_ps)(va, c1[i]));
    } else {
      UKR_VEC(storeu_ps)(ci, UKR_VEC(fmadd_ps)(va, c0[i], UKR_VEC(mul_ps)(vb, UKR_VEC(loadu_ps)(ci))));
      UKR_VEC(storeu_ps)(ci + NR / 2,
                       UKR_VEC(fmadd_ps)(va, c1[i], UKR_VEC(mul_ps)(vb, UKR_VEC(loadu_ps)(ci + NR / 2))));
    }
  }
}

#ifdef UKR_DGEMM /* an extra float tile may come without a double one */
static void store_tile_f64(const double *t, int mr, int nr, double alpha, double beta, double *c,
                           int64_t rsc, int64_t csc) {
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) {
      double *cij = c + i * rsc + j * csc;
      *cij = beta == 0.0 ? alpha * t[i * nr + j] : alpha * t[i * nr + j] + beta * *cij;
    }
}

void UKR_DGEMM(int64_t k, const double *alpha_p, const double *a, const double *b,
               const double *beta_p, double *c, int64_t rsc, int64_t csc) {
  enum { MR = UKR_DGEMM_MR, NR = UKR_DGEMM_NR };
  _Static_assert(NR == 2 * sizeof(UKR_VD) / sizeof(double), "NR is two vectors");
  UKR_VD c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    c0[i] = UKR_VEC(setzero_pd)();
    c1[i] = UKR_VEC(setzero_pd)();
    _mm_prefetch((const char *)(c + i * rsc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * rsc + (NR - 1) * csc), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < k; p++) {
    UKR_VD b0 = UKR_VEC(load_pd)(b), b1 = UKR_VEC(load_pd)(b + NR / 2);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      UKR_VD ai = UKR_VEC(set1_pd)(a[i]);
      c0[i] = UKR_VEC(fmadd_pd)(ai, b0, c0[i]);
      c1[i] = UKR_VEC(fmadd_pd)(ai, b1, c1[i]);
    }
    a += MR;
    b += NR;
  }
  const double alpha = *alpha_p, beta = *beta_p;
  if (csc != 1) {
    double t[MR * NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      UKR_VEC(storeu_pd)(t + i * NR, c0[i]);
      UKR_VEC(storeu_pd)(t + i * NR + NR / 2, c1[i]);
    }
    store_tile_f64(t, MR, NR, alpha, beta, c, rsc, csc);
    return;
  }
  UKR_VD va = UKR_VEC(set1_pd)(alpha), vb = UKR_VEC(set1_pd)(beta);
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    double *ci = c + i * rsc;
    if (beta == 0.0) {
      UKR_VEC(storeu_pd)(ci, UKR_VEC(mul_pd)(va, c0[i]));
      UKR_VEC(storeu_pd)(ci + NR / 2, UKR_VEC(mul_pd)(va, c1[i]));
    } else {
      UKR_VEC(storeu_pd)(ci, UKR_VEC(fmadd_pd)(va, c0[i], UKR_VEC(mul_pd)(vb, UKR_VEC(loadu_pd)(ci))));
      UKR_VEC(storeu_pd)(ci + NR / 2,
                       UKR_VEC(fmadd_pd)(va, c1[i], UKR_VEC(mul_pd)(vb, UKR_VEC(loadu_pd)(ci + NR / 2))));
    }
  }
}
#endif
