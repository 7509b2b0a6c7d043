/* conv_ukr_avx2.c: a 4 x 24 SGEMM micro-kernel whose B rows are read in place through a table
 * of offsets (row p is the 24 floats at xs + koff[p]) instead of from a packed panel: with unit
 * stride the rows of a wide column-matrix panel are contiguous slices of the input, so the
 * convolution needs no B packing at all (conv_wide.c). Four rows, not the GEMM's six, because
 * channel counts are multiples of 4 far more often than of 6 (a 6-row tile wastes 11% of 32
 * rows); per step it loads as much (3 vectors, 4 broadcasts for 12 FMAs). Built with -mavx2 -mfma. */
#include <immintrin.h>

#include "kernels/cpu/conv_gemm.h"

void ms_k_conv_ukr_avx2(int64_t k, const float *a, const float *xs, const int64_t *koff, const float *bias,
                        float *c, int64_t ldc) {
  enum { MR = MS_CONV_UKR_MR };
  __m256 c0[MR], c1[MR], c2[MR];
  if (bias) {
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) c0[i] = c1[i] = c2[i] = _mm256_setzero_ps();
  } else {
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
      c0[i] = _mm256_loadu_ps(c + i * ldc);
      c1[i] = _mm256_loadu_ps(c + i * ldc + 8);
      c2[i] = _mm256_loadu_ps(c + i * ldc + 16);
    }
  }
  for (int64_t p = 0; p < k; p++) {
    const float *b = xs + koff[p];
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), b2 = _mm256_loadu_ps(b + 16);
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
      c2[i] = _mm256_fmadd_ps(ai, b2, c2[i]);
    }
    a += MR;
  }
  /* The bias is added after the products, as the GEMM's row of ones was: the same rounding as
   * that path (bit for bit where K is one block), which the float32 FSDP-equals-one-process
   * tests are sensitive to (seeding the sums with it drifted 5 training steps by 1.7e-4). */
  if (bias)
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
      __m256 bi = _mm256_broadcast_ss(bias + i);
      c0[i] = _mm256_add_ps(c0[i], bi), c1[i] = _mm256_add_ps(c1[i], bi), c2[i] = _mm256_add_ps(c2[i], bi);
    }
#pragma GCC unroll 4
  for (int i = 0; i < MR; i++) {
    _mm256_storeu_ps(c + i * ldc, c0[i]);
    _mm256_storeu_ps(c + i * ldc + 8, c1[i]);
    _mm256_storeu_ps(c + i * ldc + 16, c2[i]);
  }
}
