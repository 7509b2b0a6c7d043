/* gemm_pack_avx2.c: AVX2 packing of one float32 micro-panel for the 6 x 16 AVX2 SGEMM kernel
 * (built with -mavx2 -mfma, called only when the CPU has both). Transposed operands are packed
 * with 8 x 8 register transposes instead of one scalar per element: in the fc1 products of the
 * seed net (K = 9216) packing, not the kernel, took most of the time. */
#include <immintrin.h>

#include "kernels/cpu/gemm_transpose8.h"
#include "kernels/cpu/gemm_ukr.h"

enum { MR = MS_SGEMM_AVX2_MR, NR = MS_SGEMM_AVX2_NR };

/* Lanes [0, n) on: a mask for maskload, which never touches the lanes that are off. */
static inline __m256i lanes(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)), idx);
}

/* Rows of A contiguous (cs == 1): 8 columns of the mm rows at a time, transposed. */
static void pack_a_rows(int64_t k, int64_t mm, const float *a, int64_t rs, float *d) {
  int64_t q = 0;
  for (; q + 8 <= k; q += 8) {
    __m256 r[8];
    for (int i = 0; i < 8; i++)
      r[i] = i < mm ? _mm256_loadu_ps(a + i * rs + q) : _mm256_setzero_ps();
    ms_k_transpose8(r);
    for (int j = 0; j < 8; j++) { /* MR = 6 values of column q + j: 4 + 2 */
      float *o = d + (q + j) * MR;
      _mm_storeu_ps(o, _mm256_castps256_ps128(r[j]));
      _mm_storel_pi((__m64 *)(o + 4), _mm256_extractf128_ps(r[j], 1));
    }
  }
  for (; q < k; q++)
    for (int i = 0; i < MR; i++) d[q * MR + i] = i < mm ? a[i * rs + q] : 0.0f;
}

/* Columns of A contiguous (rs == 1): each column of the panel is one masked load. */
static void pack_a_cols(int64_t k, int64_t mm, const float *a, int64_t cs, float *d) {
  const __m256i m = lanes(mm);
  for (int64_t q = 0; q < k; q++) {
    __m256 v = _mm256_maskload_ps(a + q * cs, m);
    _mm_storeu_ps(d + q * MR, _mm256_castps256_ps128(v));
    _mm_storel_pi((__m64 *)(d + q * MR + 4), _mm256_extractf128_ps(v, 1));
  }
}

int ms_k_spack_a_avx2(int64_t k, int64_t mm, const float *a, int64_t rs, int64_t cs, float *d) {
  if (cs == 1 && rs != 1) pack_a_rows(k, mm, a, rs, d);
  else if (rs == 1) pack_a_cols(k, mm, a, cs, d);
  else return 0;
  return 1;
}

/* Rows of B contiguous (cs == 1): two (masked) loads per row. The rows are far apart (9216
 * floats in fc1), k streams of 64 bytes that the hardware prefetchers do not follow, so the
 * next micro-panel's lines are requested here: the caller packs panels left to right. */
static void pack_b_rows(int64_t k, int64_t nn, const float *b, int64_t rs, float *d) {
  if (nn == NR) {
    for (int64_t q = 0; q < k; q++) {
      _mm_prefetch((const char *)(b + q * rs + NR), _MM_HINT_T0);
      _mm_prefetch((const char *)(b + q * rs + 2 * NR - 1), _MM_HINT_T0);
      _mm256_store_ps(d + q * NR, _mm256_loadu_ps(b + q * rs));
      _mm256_store_ps(d + q * NR + 8, _mm256_loadu_ps(b + q * rs + 8));
    }
    return;
  }
  const __m256i m0 = lanes(nn), m1 = lanes(nn - 8);
  for (int64_t q = 0; q < k; q++) {
    _mm256_store_ps(d + q * NR, _mm256_maskload_ps(b + q * rs, m0));
    _mm256_store_ps(d + q * NR + 8, _mm256_maskload_ps(b + q * rs + 8, m1));
  }
}

/* Columns of B contiguous (rs == 1, B is a transposed view): 8 x 8 blocks transposed. */
static void pack_b_cols(int64_t k, int64_t nn, const float *b, int64_t cs, float *d) {
  int64_t q = 0;
  for (; q + 8 <= k; q += 8)
    for (int g = 0; g < NR; g += 8) {
      __m256 r[8];
      for (int c = 0; c < 8; c++)
        r[c] = g + c < nn ? _mm256_loadu_ps(b + (g + c) * cs + q) : _mm256_setzero_ps();
      ms_k_transpose8(r);
      for (int j = 0; j < 8; j++) _mm256_store_ps(d + (q + j) * NR + g, r[j]);
    }
  for (; q < k; q++)
    for (int c = 0; c < NR; c++) d[q * NR + c] = c < nn ? b[c * cs + q] : 0.0f;
}

int ms_k_spack_b_avx2(int64_t k, int64_t nn, const float *b, int64_t rs, int64_t cs, float *d) {
  if (cs == 1) pack_b_rows(k, nn, b, rs, d);
  else if (rs == 1) pack_b_cols(k, nn, b, cs, d);
  else return 0;
  return 1;
}
