/* gemm_bf16_avx512.c: the bfloat16 GEMM's micro-kernel and panel packers for AVX-512 BF16 (built
 * with -mavx512bf16 besides the AVX-512 flags, called only when ms_k_gemm_bf16_available()).
 * The driver is gemm.c's, as for float; only the element pairs are new here (gemm_ukr.h). */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/bf16_zip.h"
#include "kernels/cpu/gemm_transpose8.h"
#include "kernels/cpu/gemm_ukr.h"
#include "kernels/cpu/lanes_avx512.h"

enum { MR = MS_BGEMM_AVX512_MR, NR = MS_BGEMM_AVX512_NR };

/* ---- the 12 x 32 micro-kernel ---------------------------------------------------------------- */

/* Strided C (neither stride 1 after the driver's transpose): rare, so plain scalar code. */
static void store_tile_strided(const float *t, float alpha, float beta, float *c, int64_t rsc,
                               int64_t csc) {
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) {
      float *cij = c + i * rsc + j * csc;
      *cij = beta == 0.0f ? alpha * t[i * NR + j] : alpha * t[i * NR + j] + beta * *cij;
    }
}

/* The float kernel's loop (gemm_ukr_body.h) with vdpbf16ps for the FMAs: per pair, two B vectors
 * of 16 columns x 2 values and one broadcast word of A per row. The broadcast is a plain 32-bit
 * load (memcpy), which the compiler folds into vpbroadcastd or the instruction's {1to16}. */
void ms_k_bgemm_ukr_avx512(int64_t kp, const float *alpha_p, const uint16_t *a, const uint16_t *b,
                           const float *beta_p, float *c, int64_t rsc, int64_t csc) {
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    c0[i] = _mm512_setzero_ps();
    c1[i] = _mm512_setzero_ps();
    /* C is needed only at the end; start its lines on their way now. */
    _mm_prefetch((const char *)(c + i * rsc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * rsc + (NR - 1) * csc), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < kp; p++) {
    __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + NR);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      uint32_t w;
      memcpy(&w, a + 2 * i, sizeof w);
      __m512bh ai = (__m512bh)_mm512_set1_epi32((int)w);
      c0[i] = _mm512_dpbf16_ps(c0[i], ai, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], ai, b1);
    }
    a += 2 * MR;
    b += 2 * NR;
  }
  const float alpha = *alpha_p, beta = *beta_p;
  if (csc != 1) {
    float t[MR * NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      _mm512_storeu_ps(t + i * NR, c0[i]);
      _mm512_storeu_ps(t + i * NR + 16, c1[i]);
    }
    store_tile_strided(t, alpha, beta, c, rsc, csc);
    return;
  }
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    float *ci = c + i * rsc;
    if (beta == 0.0f) {
      _mm512_storeu_ps(ci, _mm512_mul_ps(va, c0[i]));
      _mm512_storeu_ps(ci + 16, _mm512_mul_ps(va, c1[i]));
    } else {
      _mm512_storeu_ps(ci, _mm512_fmadd_ps(va, c0[i], _mm512_mul_ps(vb, _mm512_loadu_ps(ci))));
      _mm512_storeu_ps(ci + 16,
                       _mm512_fmadd_ps(va, c1[i], _mm512_mul_ps(vb, _mm512_loadu_ps(ci + 16))));
    }
  }
}

/* ---- packing ----------------------------------------------------------------------------------
 * A's rows and B's columns are packed alike: `lanes` of them (MR or NR, the first `valid` real,
 * the rest zero), ls apart, each read along k with stride ks; pair p of lane l goes to the 32-bit
 * word d[2 * (p * lanes + l)]. Two layouts have vector code: k contiguous in each lane (row-major
 * A, a transposed B such as nn.Linear's weight) and the lanes contiguous (row-major B, a
 * transposed A). */

/* Pairs p0.. onwards, one value at a time; an odd k's last high half is zero. */
static void pack_pairs_tail(int lanes, int64_t k, int64_t valid, const uint16_t *s, int64_t ls,
                            int64_t ks, int64_t p0, uint16_t *d) {
  for (int64_t p = p0; 2 * p < k; p++)
    for (int l = 0; l < lanes; l++) {
      const uint16_t *x = s + l * ls + 2 * p * ks;
      d[2 * (p * lanes + l)] = l < valid ? x[0] : 0;
      d[2 * (p * lanes + l) + 1] = l < valid && 2 * p + 1 < k ? x[ks] : 0;
    }
}

/* k contiguous (ks == 1): lane l's pair p is already the word at s + l * ls + 2p, so packing is a
 * transpose of 32-bit words, 8 lanes x 8 pairs at a time (the float packers' 8 x 8). */
static void pack_k_contiguous(int lanes, int64_t k, int64_t valid, const uint16_t *s, int64_t ls,
                              uint16_t *d) {
  int64_t p = 0;
  for (; 2 * (p + 8) <= k; p += 8)
    for (int g = 0; g < lanes; g += 8) {
      __m256 r[8];
      for (int l = 0; l < 8; l++)
        r[l] = g + l < valid ? _mm256_castsi256_ps(_mm256_loadu_si256(
                                   (const __m256i_u *)(s + (g + l) * ls + 2 * p)))
                             : _mm256_setzero_ps();
      ms_k_transpose8(r);
      __mmask8 m = lanes - g >= 8 ? 0xFF : (__mmask8)((1u << (lanes - g)) - 1);
      for (int j = 0; j < 8; j++)
        _mm256_mask_storeu_epi32(d + 2 * ((p + j) * lanes + g), m, _mm256_castps_si256(r[j]));
    }
  pack_pairs_tail(lanes, k, valid, s, ls, 1, p, d);
}

/* Lanes contiguous (ls == 1): pair p is the lanes of line 2p interleaved with those of line
 * 2p + 1 (zero past an odd k). Lines may be far apart (row-major B: a row is N long), so with
 * full panels the next panel's part of each line is requested here: the caller packs panels
 * left to right. */
static void pack_lanes_contiguous(int lanes, int64_t k, int64_t valid, const uint16_t *s,
                                  int64_t ks, uint16_t *d) {
  const __m512i lo_idx = _mm512_load_si512(ms_bf16_zip_idx[0]), hi_idx = _mm512_load_si512(ms_bf16_zip_idx[1]);
  const __mmask32 in = ms_k_lanes32(valid);
  const __mmask32 out_lo = ms_k_lanes32(2 * lanes), out_hi = ms_k_lanes32(2 * lanes - 32);
  for (int64_t p = 0; 2 * p < k; p++) {
    const uint16_t *x0 = s + 2 * p * ks, *x1 = x0 + ks;
    int odd_end = 2 * p + 1 == k;
    if (valid == lanes) {
      _mm_prefetch((const char *)(x0 + lanes), _MM_HINT_T0);
      _mm_prefetch((const char *)(x0 + 2 * lanes - 1), _MM_HINT_T0);
      if (!odd_end) _mm_prefetch((const char *)(x1 + lanes), _MM_HINT_T0);
      if (!odd_end) _mm_prefetch((const char *)(x1 + 2 * lanes - 1), _MM_HINT_T0);
    }
    __m512i x = _mm512_maskz_loadu_epi16(in, x0);
    __m512i y = odd_end ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi16(in, x1);
    uint16_t *o = d + 2 * p * lanes;
    _mm512_mask_storeu_epi16(o, out_lo, _mm512_permutex2var_epi16(x, lo_idx, y));
    if (lanes > 16)
      _mm512_mask_storeu_epi16(o + 32, out_hi, _mm512_permutex2var_epi16(x, hi_idx, y));
  }
}

/* The shared dispatch: 1 when packed, 0 for strides without a vector path. */
static int pack_pairs(int lanes, int64_t k, int64_t valid, const uint16_t *s, int64_t ls,
                      int64_t ks, uint16_t *d) {
  if (ks == 1 && ls != 1) pack_k_contiguous(lanes, k, valid, s, ls, d);
  else if (ls == 1) pack_lanes_contiguous(lanes, k, valid, s, ks, d);
  else return 0;
  return 1;
}

int ms_k_bpack_a_avx512(int64_t k, int64_t mm, const uint16_t *a, int64_t rs, int64_t cs,
                        uint16_t *d) {
  return pack_pairs(MR, k, mm, a, rs, cs, d);
}

int ms_k_bpack_b_avx512(int64_t k, int64_t nn, const uint16_t *b, int64_t rs, int64_t cs,
                        uint16_t *d) {
  return pack_pairs(NR, k, nn, b, cs, rs, d);
}
