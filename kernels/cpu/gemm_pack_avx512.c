/* gemm_pack_avx512.c: AVX-512 packing of one float32 micro-panel for the 12 x 32 AVX-512 SGEMM
 * kernel (built with -mavx512f/bw/dq/vl, called only when the CPU has them). Measured on Zen 5
 * (1024^3, one thread): with the scalar packers, packing took ~12% of the SGEMM's time, the
 * micro-kernel itself running at ~97% of the FMA peak; masked 512-bit loads and stores pack a
 * contiguous row or column in one instruction, and transposed operands go through 8 x 8 register
 * transposes as on AVX2. */
#include <immintrin.h>

#include "kernels/cpu/gemm_transpose8.h"
#include "kernels/cpu/gemm_ukr.h"
#include "kernels/cpu/lanes_avx512.h"

enum { MR = MS_SGEMM_AVX512_MR, NR = MS_SGEMM_AVX512_NR };

/* Rows of A contiguous (cs == 1): 8 columns at a time, rows 0-7 and 8-11 transposed apart. */
static void pack_a_rows(int64_t k, int64_t mm, const float *a, int64_t rs, float *d) {
  int64_t q = 0;
  for (; q + 8 <= k; q += 8) {
    __m256 lo[8], hi[8];
    for (int i = 0; i < 8; i++) {
      lo[i] = i < mm ? _mm256_loadu_ps(a + i * rs + q) : _mm256_setzero_ps();
      hi[i] = i < 4 && 8 + i < mm ? _mm256_loadu_ps(a + (8 + i) * rs + q) : _mm256_setzero_ps();
    }
    ms_k_transpose8(lo);
    ms_k_transpose8(hi);
    for (int j = 0; j < 8; j++) { /* MR = 12 values of column q + j: 8 + 4 */
      float *o = d + (q + j) * MR;
      _mm256_storeu_ps(o, lo[j]);
      _mm_storeu_ps(o + 8, _mm256_castps256_ps128(hi[j]));
    }
  }
  for (; q < k; q++)
    for (int i = 0; i < MR; i++) d[q * MR + i] = i < mm ? a[i * rs + q] : 0.0f;
}

/* Columns of A contiguous (rs == 1): each column of the panel is one masked load and store. */
static void pack_a_cols(int64_t k, int64_t mm, const float *a, int64_t cs, float *d) {
  const __mmask16 m = ms_k_lanes16(mm), all = ms_k_lanes16(MR);
  for (int64_t q = 0; q < k; q++) _mm512_mask_storeu_ps(d + q * MR, all, _mm512_maskz_loadu_ps(m, a + q * cs));
}

int ms_k_spack_a_avx512(int64_t k, int64_t mm, const float *a, int64_t rs, int64_t cs, float *d) {
  if (cs == 1 && rs != 1) pack_a_rows(k, mm, a, rs, d);
  else if (rs == 1) pack_a_cols(k, mm, a, cs, d);
  else return 0;
  return 1;
}

/* Rows of B contiguous (cs == 1): two (masked) loads per row. The rows may be far apart (9216
 * floats in fc1), so the next micro-panel's lines are requested here, as on AVX2: the caller
 * packs panels left to right. */
static void pack_b_rows(int64_t k, int64_t nn, const float *b, int64_t rs, float *d) {
  if (nn == NR) {
    for (int64_t q = 0; q < k; q++) {
      _mm_prefetch((const char *)(b + q * rs + NR), _MM_HINT_T0);
      _mm_prefetch((const char *)(b + q * rs + 2 * NR - 1), _MM_HINT_T0);
      _mm512_store_ps(d + q * NR, _mm512_loadu_ps(b + q * rs));
      _mm512_store_ps(d + q * NR + 16, _mm512_loadu_ps(b + q * rs + 16));
    }
    return;
  }
  const __mmask16 m0 = ms_k_lanes16(nn), m1 = ms_k_lanes16(nn - 16);
  for (int64_t q = 0; q < k; q++) {
    _mm512_store_ps(d + q * NR, _mm512_maskz_loadu_ps(m0, b + q * rs));
    _mm512_store_ps(d + q * NR + 16, _mm512_maskz_loadu_ps(m1, b + q * rs + 16));
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

int ms_k_spack_b_avx512(int64_t k, int64_t nn, const float *b, int64_t rs, int64_t cs, float *d) {
  if (cs == 1) pack_b_rows(k, nn, b, rs, d);
  else if (rs == 1) pack_b_cols(k, nn, b, cs, d);
  else return 0;
  return 1;
}
