/* conv_bf16.c: conv2d on bfloat16 tensors (groups = 1), FSDP's mixed precision, where conv.c
 * chooses the bf16 GEMM for a pass (it may widen to float32 instead): bf16 operands multiplied on
 * vdpbf16ps (twice the float32 FMA rate) with float32 sums, each result rounded to bf16 once.
 * The forward has its own driver around
 * the bf16 micro-kernels (panels packed straight from x); the input grad is ms_k_gemm_bf16's
 * W^T gout then a fold in registers; the weight grad is im2col then ms_k_gemm_bf16 into
 * per-thread float32 partials. Samples are spread over the pool; results do not depend on
 * timing, only on the thread count (the weight grad's partials).
 *
 * Letters: N batch, C input channels, O output channels, (H, W) input, (OH, OW) output,
 * (KH, KW) kernel, P = OH*OW output pixels, K = C*KH*KW column rows. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/conv_bf16.h"
#include "kernels/cpu/conv_geom.h"
#include "kernels/cpu/gemm_ukr.h" /* ms_k_thread_buffer */

static int64_t col_k(const ms_k_conv2d_geom *g) { return g->c * g->kh * g->kw; }

/* ---- geometry -------------------------------------------------------------------------------- */

/* d[0, n) = s[0, n): fixed 16-element moves, the last one overlapping, since the general loop
 * and memcpy spent as long on these 20-odd element runs as the GEMM on the whole sample. */
static inline void copy_run(int64_t n, uint16_t *restrict d, const uint16_t *restrict s) {
  if (n < 16) {
    for (int64_t q = 0; q < n; q++) d[q] = s[q];
    return;
  }
  int64_t q = 0;
  for (; q + 16 <= n; q += 16) memcpy(d + q, s + q, 32);
  if (q < n) memcpy(d + n - 16, s + n - 16, 32);
}

/* col (K, P) bf16 from one sample xs (C, H, W); padding reads as zero. The geometry is copied
 * to locals so the compiler keeps it in registers across the stores. */
static void im2col(const ms_k_conv2d_geom *g, const uint16_t *xs, uint16_t *col) {
  const int64_t C = g->c, H = g->h, W = g->w, KH = g->kh, KW = g->kw, OH = g->oh, OW = g->ow;
  const int64_t sh = g->sh, sw = g->sw, ph = g->ph, pw = g->pw, dh = g->dh, dw = g->dw;
  uint16_t *row = col;
  for (int64_t c = 0; c < C; c++)
    for (int64_t i = 0; i < KH; i++) {
      int64_t rlo, rhi; /* the output rows whose input row lies inside */
      ms_k_conv_valid_range(i * dh - ph, sh, H, OH, &rlo, &rhi);
      for (int64_t j = 0; j < KW; j++, row += OH * OW) {
        int64_t lo, hi;
        ms_k_conv_valid_range(j * dw - pw, sw, W, OW, &lo, &hi);
        if (lo == hi) rlo = rhi = 0;
        memset(row, 0, (size_t)(rlo * OW) * sizeof *row);
        memset(row + rhi * OW, 0, (size_t)((OH - rhi) * OW) * sizeof *row);
        const uint16_t *src = xs + (c * H + rlo * sh - ph + i * dh) * W + lo * sw + j * dw - pw;
        uint16_t *dst = row + rlo * OW;
        for (int64_t oh = rlo; oh < rhi; oh++, src += sh * W, dst += OW) {
          for (int64_t q = 0; q < lo; q++) dst[q] = 0;
          if (sw == 1) copy_run(hi - lo, dst + lo, src);
          else
            for (int64_t q = 0; q < hi - lo; q++) dst[lo + q] = src[q * sw];
          for (int64_t q = hi; q < OW; q++) dst[q] = 0;
        }
      }
    }
}

/* Columns [p0, p0 + n) of the column matrix (K rows, ld apart) from one sample; the same
 * values as im2col's, for the fused forward's panels that stay in L1/L2. */
static void im2col_cols(const ms_k_conv2d_geom *g, const uint16_t *xs, int64_t p0, int64_t n,
                        uint16_t *col, int64_t ld) {
  const int64_t C = g->c, H = g->h, W = g->w, KH = g->kh, KW = g->kw, OW = g->ow;
  const int64_t sh = g->sh, sw = g->sw, ph = g->ph, pw = g->pw, dh = g->dh, dw = g->dw;
  const int64_t oh0 = p0 / OW, oh1 = (p0 + n - 1) / OW;
  uint16_t *row = col;
  for (int64_t c = 0; c < C; c++)
    for (int64_t i = 0; i < KH; i++)
      for (int64_t j = 0; j < KW; j++, row += ld) {
        int64_t lo, hi;
        ms_k_conv_valid_range(j * dw - pw, sw, W, OW, &lo, &hi);
        for (int64_t oh = oh0; oh <= oh1; oh++) {
          int64_t a = oh == oh0 ? p0 - oh * OW : 0, b = oh == oh1 ? p0 + n - oh * OW : OW;
          uint16_t *dst = row + oh * OW - p0; /* dst[ow] for ow in [a, b) */
          int64_t ih = oh * sh - ph + i * dh;
          int64_t l = lo > a ? lo : a, h = hi < b ? hi : b;
          if (ih < 0 || ih >= H || l >= h) {
            for (int64_t q = a; q < b; q++) dst[q] = 0;
            continue;
          }
          for (int64_t q = a; q < l; q++) dst[q] = 0;
          const uint16_t *src = xs + (c * H + ih) * W + l * sw + j * dw - pw;
          if (sw == 1) copy_run(h - l, dst + l, src);
          else
            for (int64_t q = 0; q < h - l; q++) dst[l + q] = src[q * sw];
          for (int64_t q = h; q < b; q++) dst[q] = 0;
        }
      }
}

static void round_out(int64_t n, uint16_t *dst, const float *src) {
  ms_k_cast(n, dst, MS_K_BF16, 1, src, MS_K_F32, 1);
}

static float bf(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The share of an m x n product a 12 x 32 tile grid computes usefully. */
static double tile_use(int64_t m, int64_t n) {
  return (double)(m * n) / (double)(((m + 11) / 12 * 12) * ((n + 31) / 32 * 32));
}

/* ---- the per-sample passes ------------------------------------------------------------------- */

typedef struct bconv_job {
  const ms_k_conv2d_geom *g;
  const uint16_t *x, *w, *b, *gout;
  uint16_t *out, *gx;
  const uint16_t *apack; /* forward: W in mr-row panels */
  int mr;                /* 8 or 12 */
  const int64_t *roff;   /* forward, wide: each column-matrix row's offset in a sample */
  float **gw_part, **gb_part; /* weight grad: per member, (O, K) or transposed (K, O); bias (O) */
  bool gw_t;                  /* the weight partials are (K, O) */
  int team;
  _Atomic int failed;
} bconv_job;

/* The forward's own driver: W packed once into 8- or 12-row panels (apack), then per sample and
 * per chunk of columns the column matrix is unfolded into L1/L2-sized rows (or, wide, not at
 * all), packed into 32-column panels and multiplied tile by tile into acc (rows and columns
 * padded to whole tiles). ms_k_gemm_bf16 on a whole-sample column matrix spent a third of its
 * time writing that matrix through to L2 and reading it back to pack it. */
enum { MR = MS_BGEMM_AVX512_MR, NR = MS_BGEMM_AVX512_NR };

static int64_t fwd_chunk(int64_t K, int64_t P) { /* columns per chunk: ~48 KB of rows, whole panels */
  int64_t cw = 49152 / (2 * K) / NR * NR;
  if (cw < NR) cw = NR;
  if (cw > 512) cw = 512;
  int64_t pp = (P + NR - 1) / NR * NR;
  return cw < pp ? cw : pp;
}

/* Unit stride: the column matrix's row (c, i, j) is the (padded) input itself from
 * c*H*W + i*dh*W + j*dw on, if the output is computed "wide", OH rows of W columns whose last
 * W - OW are discarded (the conv_wide.c idea), so panels are packed straight from x with no
 * unfolding at all; 8% more products at conv2 (26 for 24 columns), far less memory traffic. */
static bool fwd_wide(const ms_k_conv2d_geom *g) { return g->sh == 1 && g->sw == 1; }

/* With padding the wide path runs on a zero-padded copy of each sample (Hp x Wp planes). conv2
 * b64 padded 1 (26 x 26 out), 1 thread: the chunked im2col path 8.3 ms, this 5.2, widened 6.0. */
static int64_t padded_h(const ms_k_conv2d_geom *g) { return g->h + 2 * g->ph; }
static int64_t padded_w(const ms_k_conv2d_geom *g) { return g->w + 2 * g->pw; }

static void forward_wide_range(void *ctx, int64_t begin, int64_t end) {
  bconv_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  const int64_t K = col_k(g), pk = (K + 1) / 2, X = g->c * g->h * g->w, P = g->oh * g->ow;
  const int64_t Hp = padded_h(g), Wp = padded_w(g), Xp = g->c * Hp * Wp;
  const bool padded = g->ph != 0 || g->pw != 0;
  const int64_t PW = (g->oh - 1) * Wp + g->ow; /* wide columns needed */
  const int mr = j->mr;
  const int64_t MP = (g->o + mr - 1) / mr * mr, PPW = (PW + NR - 1) / NR * NR;
  uint16_t *bpack = ms_k_thread_buffer(MS_K_BUF_BCONV_COL, (size_t)(2 * pk * NR) * sizeof *bpack);
  float *acc = ms_k_thread_buffer(MS_K_BUF_BCONV_F32, (size_t)(MP * PPW + 16) * sizeof *acc);
  uint16_t *xp = padded ? ms_k_thread_buffer(MS_K_BUF_BCONV_GW, (size_t)(Xp + 32) * sizeof *xp) : NULL;
  if (!bpack || !acc || (padded && !xp)) {
    j->failed = 1;
    return;
  }
  const uint16_t *xend = padded ? xp + Xp : j->x + g->n * X;
  const float one = 1.0f, zero = 0.0f;
  for (int64_t s = begin; s < end; s++) {
    const uint16_t *xs = j->x + s * X;
    if (padded) {
      memset(xp, 0, (size_t)Xp * sizeof *xp);
      for (int64_t r = 0; r < g->c * g->h; r++)
        memcpy(xp + ((r / g->h) * Hp + g->ph + r % g->h) * Wp + g->pw, xs + r * g->w, (size_t)g->w * sizeof *xp);
      xs = xp;
    }
    for (int64_t q = 0; q < PW; q += NR) {
      ms_k_bconv_pack_panel_avx512(K, xs + q, j->roff, xend, bpack);
      if (mr == 8)
        for (int64_t i = 0; i < MP; i += 8)
          ms_k_bconv_ukr8_avx512(pk, j->apack + 2 * pk * i, bpack, acc + i * PPW + q, PPW);
      else
        for (int64_t i = 0; i < MP; i += MR)
          ms_k_bgemm_ukr_avx512(pk, &one, j->apack + 2 * pk * i, bpack, &zero, acc + i * PPW + q, PPW, 1);
    }
    uint16_t *os = j->out + s * g->o * P;
    for (int64_t o = 0; o < g->o; o++)
      ms_k_bconv_round_avx512(g->oh, g->ow, acc + o * PPW, Wp, j->b ? bf(j->b[o]) : 0.0f, os + o * P, g->ow);
  }
}

static void forward_range(void *ctx, int64_t begin, int64_t end) {
  bconv_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  const int64_t P = g->oh * g->ow, K = col_k(g), pk = (K + 1) / 2;
  const int64_t MP = (g->o + MR - 1) / MR * MR, PP = (P + NR - 1) / NR * NR, CW = fwd_chunk(K, P);
  uint16_t *col = ms_k_thread_buffer(MS_K_BUF_BCONV_COL, (size_t)(K * CW + 2 * pk * CW + 64) * sizeof *col);
  float *acc = ms_k_thread_buffer(MS_K_BUF_BCONV_F32, (size_t)(MP * PP + 16) * sizeof *acc);
  if (!col || !acc) {
    j->failed = 1;
    return;
  }
  uint16_t *bpack = col + K * CW + 32 - (K * CW) % 32; /* 64-byte aligned panels after the rows */
  const float one = 1.0f, zero = 0.0f;
  for (int64_t s = begin; s < end; s++) {
    const uint16_t *xs = j->x + s * g->c * g->h * g->w;
    for (int64_t p0 = 0; p0 < P; p0 += CW) {
      int64_t n = P - p0 < CW ? P - p0 : CW;
      im2col_cols(g, xs, p0, n, col, CW);
      for (int64_t q = 0; q < n; q += NR)
        ms_k_bpack_b_avx512(K, n - q < NR ? n - q : NR, col + q, CW, 1, bpack + 2 * pk * q);
      for (int64_t q = 0; q < n; q += NR)
        for (int64_t i = 0; i < MP; i += MR)
          ms_k_bgemm_ukr_avx512(pk, &one, j->apack + 2 * pk * i, bpack + 2 * pk * q, &zero,
                                acc + i * PP + p0 + q, PP, 1);
    }
    uint16_t *os = j->out + s * g->o * P;
    for (int64_t o = 0; o < g->o; o++) {
      float *r = acc + o * PP;
      if (j->b) {
        float v = bf(j->b[o]);
        for (int64_t p = 0; p < P; p++) r[p] += v;
      }
      round_out(P, os + o * P, r);
    }
  }
}

static void input_grad_range(void *ctx, int64_t begin, int64_t end) {
  bconv_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  int64_t P = g->oh * g->ow, K = col_k(g), X = g->c * g->h * g->w;
  bool pw = ms_k_conv_is_pointwise(g);
  float *gcol = ms_k_thread_buffer(MS_K_BUF_BCONV_F32, (size_t)(K * P + 16) * sizeof *gcol);
  float *gxf = pw ? gcol : ms_k_thread_buffer(MS_K_BUF_BCONV_GW, (size_t)(X + 16) * sizeof *gxf);
  if (!gcol || !gxf) {
    j->failed = 1;
    return;
  }
  for (int64_t s = begin; s < end; s++) {
    ms_k_gemm_bf16(K, P, g->o, 1.0f, j->w, 1, K, j->gout + s * g->o * P, P, 1, 0.0f, gcol, P, 1);
    if (!pw && g->sh == 1 && g->sw == 1) {
      ms_k_bconv_col2im_s1_avx512(g, gcol, j->gx + s * X);
      continue;
    }
    if (!pw) {
      memset(gxf, 0, (size_t)X * sizeof *gxf);
      ms_k_conv_col2im(MS_K_F32, g, gcol, gxf);
    }
    round_out(X, j->gx + s * X, gxf);
  }
}

/* Bias sums of one sample's gout (O, P) into gb, sixteen lanes per row so it vectorises. */
static void bias_sums(int64_t O, int64_t P, const uint16_t *gs, float *gb) {
  for (int64_t o = 0; o < O; o++) {
    float lane[16] = {0};
    const uint16_t *r = gs + o * P;
    int64_t p = 0;
    for (; p + 16 <= P; p += 16)
      for (int l = 0; l < 16; l++) lane[l] += bf(r[p + l]);
    float t = 0;
    for (; p < P; p++) t += bf(r[p]);
    for (int l = 0; l < 16; l++) t += lane[l];
    gb[o] += t;
  }
}

/* Member t of the team sums the weight (and bias) gradient of a contiguous piece of the batch
 * into its own float32 partials; the caller adds them in member order. */
static void weight_grad_member(void *ctx, int t, int nt) {
  bconv_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  int64_t P = g->oh * g->ow, K = col_k(g);
  int64_t q = g->n / nt, r = g->n % nt;
  int64_t begin = t * q + (t < r ? t : r), end = begin + q + (t < r ? 1 : 0);
  if (t == 0) j->team = nt;
  bool pw = ms_k_conv_is_pointwise(g);
  bool want_w = j->gw_part != NULL;
  uint16_t *col = pw || !want_w ? NULL : ms_k_thread_buffer(MS_K_BUF_BCONV_COL, (size_t)(K * P + 32) * sizeof *col);
  float *gw = want_w ? ms_k_thread_buffer(MS_K_BUF_BCONV_GW, (size_t)(g->o * K + 16) * sizeof *gw) : NULL;
  float *gb = j->gb_part ? ms_k_thread_buffer(MS_K_BUF_BCONV_GB, (size_t)(g->o + 16) * sizeof *gb) : NULL;
  if ((want_w && ((!pw && !col) || !gw)) || (j->gb_part && !gb)) {
    j->failed = 1;
    return;
  }
  if (gw) memset(gw, 0, (size_t)(g->o * K) * sizeof *gw), j->gw_part[t] = gw;
  if (gb) memset(gb, 0, (size_t)g->o * sizeof *gb), j->gb_part[t] = gb;
  for (int64_t s = begin; s < end; s++) {
    const uint16_t *gs = j->gout + s * g->o * P;
    if (gw) {
      const uint16_t *xs = j->x + s * g->c * g->h * g->w;
      if (!pw && g->sw == 1) ms_k_bconv_im2col_avx512(g, xs, col);
      else if (!pw) im2col(g, xs, col);
      const uint16_t *cs = pw ? xs : col;
      if (j->gw_t) /* gw^T (K, O) += col (K, P) gout^T (P, O) */
        ms_k_gemm_bf16(K, g->o, P, 1.0f, cs, P, 1, gs, 1, P, 1.0f, gw, g->o, 1);
      else /* gw (O, K) += gout (O, P) col^T (P, K) */
        ms_k_gemm_bf16(g->o, K, P, 1.0f, gs, P, 1, cs, 1, P, 1.0f, gw, K, 1);
    }
    if (gb) bias_sums(g->o, P, gs, gb);
  }
}

/* ---- entry points ---------------------------------------------------------------------------- */

int ms_k_conv2d_bf16_forward_gemm(const ms_k_conv2d_geom *g, const uint16_t *x, const uint16_t *w,
                                  const uint16_t *b, uint16_t *out) {
  if (g->n == 0) return 0;
  bool wide = fwd_wide(g);
  /* the 8-row tile where it fits O exactly and the 12-row one would not (wide path only) */
  const int mr = wide && g->o % 8 == 0 && g->o % MR != 0 ? 8 : MR;
  const int64_t K = col_k(g), pk = (K + 1) / 2, MP = (g->o + mr - 1) / mr * mr;
  uint16_t *apack = aligned_alloc(64, (size_t)((MP * 2 * pk * sizeof *apack + 63) / 64 * 64));
  if (!apack) return -1;
  for (int64_t i = 0; i < MP; i += mr) {
    uint16_t *d = apack + 2 * pk * i;
    if (mr == MR) ms_k_bpack_a_avx512(K, g->o - i < MR ? g->o - i : MR, w + i * K, K, 1, d);
    else /* pair p of row l at word p * mr + l; an odd K's last high half is zero */
      for (int64_t p = 0; p < pk; p++)
        for (int l = 0; l < mr; l++)
          for (int h = 0; h < 2; h++)
            d[2 * (p * mr + l) + h] = i + l < g->o && 2 * p + h < K ? w[(i + l) * K + 2 * p + h] : 0;
  }
  int64_t *roff = wide ? malloc((size_t)K * sizeof *roff) : NULL;
  if (wide && !roff) return free(apack), -1;
  for (int64_t c = 0, r = 0; wide && c < g->c; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t jj = 0; jj < g->kw; jj++) roff[r++] = (c * padded_h(g) + i * g->dh) * padded_w(g) + jj * g->dw;
  bconv_job j = {.g = g, .x = x, .w = w, .b = b, .out = out, .apack = apack, .roff = roff, .mr = mr};
  ms_k_parallel_for(g->n, 1, wide ? forward_wide_range : forward_range, &j);
  free(apack), free(roff);
  return j.failed ? -1 : 0;
}

int ms_k_conv2d_bf16_input_grad_gemm(const ms_k_conv2d_geom *g, const uint16_t *w, const uint16_t *gout,
                                     uint16_t *gx) {
  bconv_job j = {.g = g, .w = w, .gout = gout, .gx = gx};
  ms_k_parallel_for(g->n, 1, input_grad_range, &j);
  return j.failed ? -1 : 0;
}

int ms_k_conv2d_bf16_weight_grad_gemm(const ms_k_conv2d_geom *g, const uint16_t *x, const uint16_t *gout,
                                      uint16_t *gw, uint16_t *gb) {
  int64_t K = col_k(g), wn = g->o * K;
  int nt = ms_k_get_num_threads();
  if (nt > g->n) nt = (int)g->n;
  if (nt < 1) nt = 1;
  bconv_job j = {.g = g, .x = x, .gout = gout, .gw_t = tile_use(K, g->o) > tile_use(g->o, K)};
  j.gw_part = gw ? calloc((size_t)nt, sizeof *j.gw_part) : NULL;
  j.gb_part = gb ? calloc((size_t)nt, sizeof *j.gb_part) : NULL;
  int rc = -1;
  if ((!gw || j.gw_part) && (!gb || j.gb_part)) {
    if (g->n > 0) ms_k_parallel_team(nt, weight_grad_member, &j);
    if (!j.failed && g->n == 0) { /* no samples: zero gradients */
      if (gw) memset(gw, 0, (size_t)wn * sizeof *gw);
      if (gb) memset(gb, 0, (size_t)g->o * sizeof *gb);
      rc = 0;
    } else if (!j.failed) {
      /* The other members' partials into member 0's, in order: the same sums for a thread count. */
      for (int t = 1; t < j.team; t++) {
        for (int64_t e = 0; gw && e < wn; e++) j.gw_part[0][e] += j.gw_part[t][e];
        for (int64_t o = 0; gb && o < g->o; o++) j.gb_part[0][o] += j.gb_part[t][o];
      }
      if (gw && !j.gw_t) round_out(wn, gw, j.gw_part[0]);
      if (gw && j.gw_t)
        for (int64_t o = 0; o < g->o; o++)
          ms_k_cast(K, gw + o * K, MS_K_BF16, 1, j.gw_part[0] + o, MS_K_F32, g->o);
      if (gb) round_out(g->o, gb, j.gb_part[0]);
      rc = 0;
    }
  }
  free(j.gw_part), free(j.gb_part);
  return rc;
}
