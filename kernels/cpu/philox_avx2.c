/* philox_avx2.c: eight Philox 4x32-10 blocks at once in AVX2 registers (built with -mavx2, called
 * by philox.c only when the CPU has it). Bit for bit the scalar ms_k_philox4x32_10: the same
 * products, keys and word order; only the blocks run side by side, one per 32-bit lane. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/philox_x8.h"

/* hi and lo halves of the 32 x 32 -> 64-bit products m * c in each of the 8 lanes. */
static inline void mul_hilo(__m256i c, __m256i m, __m256i *hi, __m256i *lo) {
  __m256i pe = _mm256_mul_epu32(c, m);                         /* lanes 0, 2, 4, 6 */
  __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(c, 32), m);  /* lanes 1, 3, 5, 7 */
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
  *lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}

void ms_k_philox_x8_avx2(uint64_t seed, uint64_t n0, uint32_t out[4][8]) {
  uint32_t lo[8], hi[8];
  for (int i = 0; i < 8; i++) { /* counter n0 + i: its low and high words, carry included */
    uint64_t n = n0 + (uint64_t)i;
    lo[i] = (uint32_t)n;
    hi[i] = (uint32_t)(n >> 32);
  }
  __m256i c0 = _mm256_loadu_si256((const __m256i *)lo);
  __m256i c1 = _mm256_loadu_si256((const __m256i *)hi);
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  const __m256i m0 = _mm256_set1_epi32((int)MS_PHILOX_M0);
  const __m256i m1 = _mm256_set1_epi32((int)MS_PHILOX_M1);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += MS_PHILOX_W0;
      k1 += MS_PHILOX_W1;
    }
    __m256i h0, l0, h1, l1;
    mul_hilo(c0, m0, &h0, &l0);
    mul_hilo(c2, m1, &h1, &l1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(h1, c1), _mm256_set1_epi32((int)k0));
    c1 = l1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(h0, c3), _mm256_set1_epi32((int)k1));
    c3 = l0;
  }
  _mm256_storeu_si256((__m256i *)out[0], c0);
  _mm256_storeu_si256((__m256i *)out[1], c1);
  _mm256_storeu_si256((__m256i *)out[2], c2);
  _mm256_storeu_si256((__m256i *)out[3], c3);
}

void ms_k_bernoulli_x8_avx2(const uint32_t x8[4][8], uint64_t thr, uint8_t out[32]) {
  if (thr > UINT32_MAX) { /* every 32-bit word is below 2^32 */
    memset(out, 1, 32);
    return;
  }
  /* unsigned w < thr as a signed compare of both with the top bit flipped */
  const __m256i flip = _mm256_set1_epi32((int)0x80000000u);
  const __m256i t = _mm256_xor_si256(_mm256_set1_epi32((int)(uint32_t)thr), flip);
  __m256i bytes = _mm256_setzero_si256();
  for (int k = 0; k < 4; k++) { /* word k's answer (0 or -1) lands in byte k of each block's lane */
    __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x8[k]), flip);
    __m256i lt = _mm256_cmpgt_epi32(t, w);
    bytes = _mm256_or_si256(bytes, _mm256_and_si256(lt, _mm256_set1_epi32(1 << (8 * k))));
  }
  _mm256_storeu_si256((__m256i *)out, bytes); /* lane i = bytes 4 i .. 4 i + 3, little-endian */
}
