/* conv_bf16_avx512.c: the vector pieces of conv_bf16.c's forward (built with AVX-512 BF16's flags,
 * called only when ms_k_gemm_bf16_available()): packing a 32-column panel of the column matrix
 * straight from the input, and rounding the float32 sums (plus bias) to bf16. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/bf16_zip.h"
#include "kernels/cpu/conv_bf16.h"
#include "kernels/cpu/conv_geom.h"
#include "kernels/cpu/lanes_avx512.h"

void ms_k_bconv_pack_panel_avx512(int64_t k, const uint16_t *base, const int64_t *off,
                                  const uint16_t *end, uint16_t *d) {
  const __m512i lo_idx = _mm512_load_si512(ms_bf16_zip_idx[0]), hi_idx = _mm512_load_si512(ms_bf16_zip_idx[1]);
  for (int64_t p = 0; 2 * p < k; p++) {
    const uint16_t *x0 = base + off[2 * p];
    __m512i x = _mm512_maskz_loadu_epi16(ms_k_lanes32(end - x0), x0);
    __m512i y = _mm512_setzero_si512();
    if (2 * p + 1 < k) {
      const uint16_t *x1 = base + off[2 * p + 1];
      y = _mm512_maskz_loadu_epi16(ms_k_lanes32(end - x1), x1);
    }
    _mm512_store_si512(d + 64 * p, _mm512_permutex2var_epi16(x, lo_idx, y));
    _mm512_store_si512(d + 64 * p + 32, _mm512_permutex2var_epi16(x, hi_idx, y));
  }
}

/* cast_avx512.c's rounding (nearest even, NaNs kept quiet, subnormals kept) of src + bias. */
void ms_k_bconv_round_avx512(int64_t rows, int64_t n, const float *src, int64_t lds, float bias,
                             uint16_t *dst, int64_t ldd) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  const __m512 vb = _mm512_set1_ps(bias);
  for (int64_t r = 0; r < rows; r++, src += lds, dst += ldd)
    for (int64_t i = 0; i < n; i += 16) {
      __mmask16 m = ms_k_lanes16(n - i);
      __m512i bits = _mm512_castps_si512(_mm512_add_ps(_mm512_maskz_loadu_ps(m, src + i), vb));
      __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, abs_mask), inf);
      __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
      __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(half, lsb)), 16);
      __m512i quieted = _mm512_or_si512(_mm512_srli_epi32(bits, 16), quiet);
      _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quieted)));
    }
}

/* An 8 x 32 tile of C = A B (overwritten, row stride rsc) over kp pairs: the bf16 GEMM's 12 x 32
 * micro-kernel cut to 8 rows, for O a multiple of 8 and not of 12 (conv2's 64 channels computed
 * 72 rows on the 12-row tile). a: per pair, 8 words (row i's pair); b: per pair, 32 words. */
void ms_k_bconv_ukr8_avx512(int64_t kp, const uint16_t *a, const uint16_t *b, float *c, int64_t rsc) {
  __m512 c0[8], c1[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; p++) {
    __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 32);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
      uint32_t w;
      memcpy(&w, a + 2 * i, sizeof w);
      __m512bh ai = (__m512bh)_mm512_set1_epi32((int)w);
      c0[i] = _mm512_dpbf16_ps(c0[i], ai, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], ai, b1);
    }
    a += 16;
    b += 64;
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    _mm512_storeu_ps(c + i * rsc, c0[i]);
    _mm512_storeu_ps(c + i * rsc + 16, c1[i]);
  }
}

/* conv_bf16.c's im2col for sw == 1: each output row's run is one masked load and one full store
 * per 32 columns, padding included (masked-off lanes neither load nor fault); runs are written
 * in order, so what a store spills past its run the next one overwrites, and col needs 32
 * elements of slack at the end. The scalar runs cost a fifth of a conv2 weight-grad sample. */
void ms_k_bconv_im2col_avx512(const ms_k_conv2d_geom *g, const uint16_t *xs, uint16_t *col) {
  const int64_t C = g->c, H = g->h, W = g->w, KH = g->kh, KW = g->kw, OH = g->oh, OW = g->ow;
  const int64_t sh = g->sh, ph = g->ph, pw = g->pw, dh = g->dh, dw = g->dw;
  uint16_t *dst = col;
  for (int64_t c = 0; c < C; c++)
    for (int64_t i = 0; i < KH; i++)
      for (int64_t j = 0; j < KW; j++) {
        int64_t lo, hi;
        ms_k_conv_valid_range(j * dw - pw, 1, W, OW, &lo, &hi);
        for (int64_t oh = 0; oh < OH; oh++, dst += OW) {
          int64_t ih = oh * sh - ph + i * dh;
          int inside = ih >= 0 && ih < H;
          /* element q of the run is xs[row + q + j*dw - pw]; uintptr_t keeps the base legal */
          uintptr_t src = (uintptr_t)(xs + (inside ? (c * H + ih) * W : 0)) + (uintptr_t)((j * dw - pw) * 2);
          for (int64_t q0 = 0; q0 < OW; q0 += 32) {
            __mmask32 ld = inside ? ms_k_lanes32(hi - q0) & ~ms_k_lanes32(lo - q0) : 0;
            __m512i v = _mm512_maskz_loadu_epi16(ld, (const void *)(src + (uintptr_t)(q0 * 2)));
            _mm512_storeu_si512(dst + q0, v); /* the next run overwrites the spill */
          }
        }
      }
}

static inline __mmask16 lanes16(int64_t lo, int64_t hi) { /* lanes [lo, hi) of 16 */
  return ms_k_lanes16(hi) & (__mmask16)~ms_k_lanes16(lo);
}

/* One sample's input gradient from its column gradient (K, P) float32, for unit stride: each
 * 16-column piece of a gx row sums its KH x KW contributions in registers, in the (i, j) order
 * col2im adds them, and is rounded to bf16 once (cast_avx512.c's rounding). A scalar col2im
 * read and wrote gx once per contribution and took as long as the GEMM. */
void ms_k_bconv_col2im_s1_avx512(const ms_k_conv2d_geom *g, const float *col, uint16_t *gx) {
  const int64_t C = g->c, H = g->h, W = g->w, KH = g->kh, KW = g->kw, OH = g->oh, OW = g->ow;
  const int64_t ph = g->ph, pw = g->pw, dh = g->dh, dw = g->dw, P = OH * OW;
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  for (int64_t c = 0; c < C; c++)
    for (int64_t ih = 0; ih < H; ih++)
      for (int64_t w0 = 0; w0 < W; w0 += 16) {
        const int64_t nl = W - w0 < 16 ? W - w0 : 16;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < KH; i++) {
          int64_t oh = ih + ph - i * dh;
          if (oh < 0 || oh >= OH) continue;
          for (int64_t j = 0; j < KW; j++) {
            int64_t off = j * dw - pw; /* gx column w takes output column w - off */
            __mmask16 m = lanes16(off - w0, nl < OW + off - w0 ? nl : OW + off - w0);
            if (!m) continue;
            uintptr_t src = (uintptr_t)(col + ((c * KH + i) * KW + j) * P + oh * OW) +
                            (uintptr_t)((w0 - off) * (int64_t)sizeof(float));
            acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, (const void *)src));
          }
        }
        __m512i bits = _mm512_castps_si512(acc);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, abs_mask), inf);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
        __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(half, lsb)), 16);
        __m512i quieted = _mm512_or_si512(_mm512_srli_epi32(bits, 16), quiet);
        _mm256_mask_storeu_epi16(gx + (c * H + ih) * W + w0, lanes16(0, nl),
                                 _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quieted)));
      }
}
