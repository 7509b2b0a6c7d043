/* conv_small_avx512.c: direct AVX-512 forward and weight gradient for convolutions with a few
 * input channels, unit stride and no padding (the seed's conv1: 1 -> 32 channels, 3x3, 28x28 ->
 * 26x26). There K = C*KH*KW is 9: the GEMM-shaped paths spend as much on packing and on copying
 * wide rows as on the products, and ran at 12-28% of peak. Here the products read x and gout in
 * place and write out directly:
 * - forward: one output row chunk (up to 32 columns: two zmm, the second masked) for 8 output
 *   channels; per tap two masked loads of x and 8 broadcast weights, 16 FMAs;
 * - weight gradient: a tile of 3 output channels by 9 taps (27 zmm sums) over all the member's
 *   (sample, output row) pairs, 16 columns at a time; lanes are reduced once at the end.
 * Masked lanes read nothing (no access past a row or the tensor) and add zeros. Built with the
 * AVX-512 flags; called only where ms_k_conv_small_avx512_ok (conv_small.h) says so.
 *
 * Letters as conv_gemm.c: K = C*KH*KW taps, P = OH*OW; tap k = (c, i, j). */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/conv_small.h"
#include "kernels/cpu/gemm_ukr.h"

enum { OB = MS_CONV_SMALL_OB, WOB = 3, WKT = 9, MAX_TEAM = 256 };

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The low n of 16 lanes (n may be <= 0 or >= 16). */
static inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* ---- forward ---------------------------------------------------------------------------------- */

typedef struct fwd_job {
  const ms_k_conv2d_geom *g;
  const float *x, *wp, *b; /* wp: the weight as [O / 8][K][8], a block's 8 channels per tap */
  float *out;
  int64_t K, P, blocks;
} fwd_job;

/* Columns [q0, q0 + 16*NV) (masks m0, m1) of output row oh for the 8 channels of weight block wp,
 * bias (NULL: none) and output plane out (channel r at out + r*P). KH, KW and NV are constants
 * where inlined with them, so the tap loops unroll. */
static ALWAYS_INLINE void fwd_chunk(const fwd_job *j, const float *xs, const float *wp, const float *bias,
                                    float *out, int64_t oh, int64_t q0, __mmask16 m0, __mmask16 m1, int kh,
                                    int kw, int nv) {
  const ms_k_conv2d_geom *g = j->g;
  __m512 a0[OB], a1[OB];
#pragma GCC unroll 8
  for (int r = 0; r < OB; r++) a0[r] = a1[r] = _mm512_setzero_ps();
  for (int64_t c = 0; c < g->c; c++)
    for (int i = 0; i < kh; i++) {
      const float *xr = xs + (c * g->h + oh + i) * g->w + q0;
      for (int jj = 0; jj < kw; jj++, wp += OB) {
        __m512 v0 = _mm512_maskz_loadu_ps(m0, xr + jj);
        __m512 v1 = nv > 1 ? _mm512_maskz_loadu_ps(m1, xr + jj + 16) : v0;
#pragma GCC unroll 8
        for (int r = 0; r < OB; r++) {
          __m512 wr = _mm512_set1_ps(wp[r]);
          a0[r] = _mm512_fmadd_ps(wr, v0, a0[r]);
          if (nv > 1) a1[r] = _mm512_fmadd_ps(wr, v1, a1[r]);
        }
      }
    }
  /* The bias after the products, as conv_ukr_avx2.c (see its comment: the rounding the float32
   * FSDP-equals-one-process tests were written against). */
  float *o = out + oh * g->ow + q0;
#pragma GCC unroll 8
  for (int r = 0; r < OB; r++) {
    if (bias) {
      __m512 br = _mm512_set1_ps(bias[r]);
      a0[r] = _mm512_add_ps(a0[r], br), a1[r] = _mm512_add_ps(a1[r], br);
    }
    _mm512_mask_storeu_ps(o + r * j->P, m0, a0[r]);
    if (nv > 1) _mm512_mask_storeu_ps(o + r * j->P + 16, m1, a1[r]);
  }
}

/* Every output row of one (sample, channel block), in chunks of 32 columns (the last masked). */
static ALWAYS_INLINE void fwd_item(const fwd_job *j, int64_t item, int kh, int kw) {
  const ms_k_conv2d_geom *g = j->g;
  int64_t n = item / j->blocks, o0 = item % j->blocks * OB;
  const float *xs = j->x + n * g->c * g->h * g->w, *wp = j->wp + o0 * j->K, *bias = j->b ? j->b + o0 : NULL;
  float *out = j->out + (n * g->o + o0) * j->P;
  for (int64_t oh = 0; oh < g->oh; oh++)
    for (int64_t q0 = 0; q0 < g->ow; q0 += 32) {
      int64_t left = g->ow - q0;
      if (left > 16) fwd_chunk(j, xs, wp, bias, out, oh, q0, lanes(left), lanes(left - 16), kh, kw, 2);
      else fwd_chunk(j, xs, wp, bias, out, oh, q0, lanes(left), 0, kh, kw, 1);
    }
}

static void fwd_range(void *ctx, int64_t begin, int64_t end) {
  const fwd_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  bool k33 = g->kh == 3 && g->kw == 3; /* the seed's kernel, unrolled */
  for (int64_t it = begin; it < end; it++) {
    if (k33) fwd_item(j, it, 3, 3);
    else fwd_item(j, it, (int)g->kh, (int)g->kw);
  }
}

int ms_k_conv2d_forward_small_avx512(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *b,
                                     float *out) {
  fwd_job j = {.g = g, .x = x, .b = b, .out = out};
  j.K = g->c * g->kh * g->kw, j.P = g->oh * g->ow, j.blocks = g->o / OB;
  /* the weight per block of 8 channels, tap by tap: a tap's 8 broadcasts read one 32-byte run */
  float *wp = ms_k_thread_buffer(MS_K_BUF_CONV_W, sizeof(float) * (size_t)(g->o * j.K));
  if (!wp) return -1;
  for (int64_t o = 0; o < g->o; o++)
    for (int64_t k = 0; k < j.K; k++) wp[(o / OB * j.K + k) * OB + o % OB] = w[o * j.K + k];
  j.wp = wp;
  /* items of about 1 MFLOP at least; each output element is written by one item alone, so the
   * result does not depend on the threads */
  int64_t flops = 2 * j.K * OB * j.P, want = 1 << 20;
  ms_k_parallel_for(g->n * j.blocks, flops >= want ? 1 : want / (flops + 1) + 1, fwd_range, &j);
  return 0;
}

/* ---- weight (and bias) gradient ------------------------------------------------------------- */

typedef struct wg_job {
  const ms_k_conv2d_geom *g;
  const float *x, *gout;
  int64_t K, P;
  int64_t toff[5 * 5 * 4]; /* tap k reads x at a row's start + toff[k] */
  bool bias;
  float *part[MAX_TEAM]; /* per-member sums: gW^T (K x O), then the bias's O values */
  int team;
  _Atomic int failed;
} wg_job;

/* res[r * WKT + t] = sum over samples [nb, ne), output rows and columns of gout channel o0 + r
 * times x at tap tk[t], for r < OB_ channels (a constant where inlined). */
static ALWAYS_INLINE void wg_tile(const wg_job *j, int64_t nb, int64_t ne, int64_t o0, const int64_t *tk,
                                  int ob, float *res) {
  const ms_k_conv2d_geom *g = j->g;
  __m512 acc[WOB][WKT];
#pragma GCC unroll 3
  for (int r = 0; r < ob; r++)
#pragma GCC unroll 9
    for (int t = 0; t < WKT; t++) acc[r][t] = _mm512_setzero_ps();
  for (int64_t n = nb; n < ne; n++) {
    const float *xs = j->x + n * g->c * g->h * g->w, *gs = j->gout + (n * g->o + o0) * j->P;
    for (int64_t oh = 0; oh < g->oh; oh++) {
      const float *xr = xs + oh * g->w, *gr = gs + oh * g->ow;
      for (int64_t q0 = 0; q0 < g->ow; q0 += 16) {
        __mmask16 m = lanes(g->ow - q0);
        __m512 gv[WOB];
#pragma GCC unroll 3
        for (int r = 0; r < ob; r++) gv[r] = _mm512_maskz_loadu_ps(m, gr + r * j->P + q0);
#pragma GCC unroll 9
        for (int t = 0; t < WKT; t++) {
          __m512 v = _mm512_maskz_loadu_ps(m, xr + tk[t] + q0);
#pragma GCC unroll 3
          for (int r = 0; r < ob; r++) acc[r][t] = _mm512_fmadd_ps(gv[r], v, acc[r][t]);
        }
      }
    }
  }
#pragma GCC unroll 3
  for (int r = 0; r < ob; r++)
#pragma GCC unroll 9
    for (int t = 0; t < WKT; t++) res[r * WKT + t] = _mm512_reduce_add_ps(acc[r][t]);
}

/* The member's sums for channels [o0, o0 + ob) and taps [k0, k0 + WKT) into acc (gW^T); a tap
 * block short of WKT repeats its last tap, whose sums are dropped. */
static void wg_block(const wg_job *j, int64_t nb, int64_t ne, int64_t o0, int ob, int64_t k0, float *acc) {
  int64_t tk[WKT], kn = j->K - k0 < WKT ? j->K - k0 : WKT;
  for (int t = 0; t < WKT; t++) tk[t] = j->toff[k0 + (t < kn ? t : kn - 1)];
  float res[WOB * WKT];
  if (ob == 3) wg_tile(j, nb, ne, o0, tk, 3, res);
  else if (ob == 2) wg_tile(j, nb, ne, o0, tk, 2, res);
  else wg_tile(j, nb, ne, o0, tk, 1, res);
  for (int r = 0; r < ob; r++)
    for (int64_t t = 0; t < kn; t++) acc[(k0 + t) * j->g->o + o0 + r] = res[r * WKT + t];
}

/* The bias's sums over samples [nb, ne): each gout plane summed 16 lanes at a time, in order. */
static void wg_bias(const wg_job *j, int64_t nb, int64_t ne, float *acc) {
  for (int64_t o = 0; o < j->g->o; o++) {
    __m512 s = _mm512_setzero_ps();
    for (int64_t n = nb; n < ne; n++) {
      const float *gs = j->gout + (n * j->g->o + o) * j->P;
      for (int64_t p = 0; p < j->P; p += 16) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(lanes(j->P - p), gs + p));
    }
    acc[o] = _mm512_reduce_add_ps(s);
  }
}

static void wg_member(void *ctx, int t, int nt) {
  wg_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  size_t n_acc = (size_t)((j->K + 1) * g->o);
  if (t == 0) j->team = nt;
  float *acc = ms_k_thread_buffer(MS_K_BUF_CONV_T, n_acc * sizeof(float));
  j->part[t] = acc;
  if (!acc) {
    j->failed = 1;
    return;
  }
  int64_t q = g->n / nt, r = g->n % nt;
  int64_t nb = t * q + (t < r ? t : r), ne = nb + q + (t < r ? 1 : 0);
  for (int64_t o0 = 0; o0 < g->o; o0 += WOB)
    for (int64_t k0 = 0; k0 < j->K; k0 += WKT)
      wg_block(j, nb, ne, o0, (int)(g->o - o0 < WOB ? g->o - o0 : WOB), k0, acc);
  if (j->bias) wg_bias(j, nb, ne, acc + j->K * g->o);
}

int ms_k_conv2d_weight_grad_small_avx512(const ms_k_conv2d_geom *g, const float *x, const float *gout, float *gw,
                                         float *gb) {
  wg_job j;
  memset(&j, 0, sizeof j);
  j.g = g, j.x = x, j.gout = gout, j.bias = gb != NULL;
  j.K = g->c * g->kh * g->kw, j.P = g->oh * g->ow;
  for (int64_t c = 0, k = 0; c < g->c; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t jj = 0; jj < g->kw; jj++, k++) j.toff[k] = (c * g->h + i) * g->w + jj;
  /* a member per sample at most, and per ~4 MFLOP of work at least */
  int64_t flops = 2 * j.K * g->o * j.P * g->n, nt = ms_k_get_num_threads();
  if (nt > flops / (4 << 20)) nt = flops / (4 << 20);
  if (nt > g->n) nt = g->n;
  if (nt > MAX_TEAM) nt = MAX_TEAM;
  if (nt < 1) nt = 1;
  ms_k_parallel_team((int)nt, wg_member, &j);
  if (j.failed) return -1;
  /* members' sums in member order: the same result for the same team size */
  for (int64_t o = 0; o < g->o; o++)
    for (int64_t k = 0; k <= j.K; k++) {
      if (k == j.K && !gb) break;
      float s = 0.0f;
      for (int m = 0; m < j.team; m++) s += j.part[m][k * g->o + o];
      if (k < j.K) gw[o * j.K + k] = s;
      else gb[o] = s;
    }
  return 0;
}
