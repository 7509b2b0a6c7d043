/* conv_winograd_wgrad_avx2.c: the input transforms of the Winograd weight gradient
 * (conv_winograd_wgrad.c), straight into the packed panels the SGEMM micro-kernel reads, whose
 * rows are tiles with their channels side by side. So the transforms run with one channel per
 * lane: a group's input rows (up to 8 tiles of one tile row, for up to 8 channels) are loaded
 * along the rows and turned channel-minor by 8 x 8 transpositions, once per pixel (a quarter or
 * less of the transformed values), and each tile's 16 points are then a vector store each.
 * Built with -mavx2 -mfma.
 *
 * Transforms (F(2x2, 3x3)'s matrices, used transposed): x's 4x4 tile d becomes B^T d B, gout's
 * 2x2 tile z becomes A z A^T with A's last row negated (the driver's inverse transform undoes
 * the sign), so that no lane needs a negation:
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]    A = [1 0; 1 1; 1 -1; 0 1]. */
#include <immintrin.h>

#include "kernels/cpu/conv_winograd_wgrad.h"

/* A group's row segment: columns c0 .. c0 + 23, of which those before 0 and from `end` on read
 * as zeros; inside: the first 16 need no mask (the last 8 are always masked, so that nothing
 * past the tensor is touched). */
typedef struct seg {
  int64_t c0;
  bool inside;
  __m256i m[3]; /* lane masks of the loads at c0 + 0, 8, 16 */
} seg;

static seg seg_make(int64_t c0, int64_t end) {
  seg s;
  s.c0 = c0;
  s.inside = c0 >= 0 && c0 + 16 <= end;
  __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int k = 0; k < 3; k++) {
    __m256i col = _mm256_add_epi32(lane, _mm256_set1_epi32((int)(c0 + 8 * k)));
    __m256i ge0 = _mm256_cmpgt_epi32(col, _mm256_set1_epi32(-1));
    __m256i lt = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)end), col);
    s.m[k] = _mm256_and_si256(ge0, lt);
  }
  return s;
}

/* Columns c0 + 8k .. c0 + 8k + 7 of row r. Masked lanes read nothing: the address may lie
 * before or past the row (and the tensor) without a fault. */
static inline __m256 seg_load(const float *r, const seg *s, int k) {
  const float *p = (const float *)((uintptr_t)r + (uintptr_t)((s->c0 + 8 * k) * (int64_t)sizeof(float)));
  return s->inside && k < 2 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, s->m[k]);
}

/* r[i][j] -> r[j][i]. */
static inline void transpose8(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* pix[k * 8 + col] = the 8 channels' pixel at column c0 + 8k + col of the row (row offset `row`
 * in each channel's plane, planes `plane` floats apart), for k < nk; channels from `valid` on,
 * and a row outside the planes (row < 0), read as zeros. */
static void pixels(const float *chan0, int64_t plane, int64_t row, int valid, const seg *s, int nk,
                   __m256 *pix) {
  for (int k = 0; k < nk; k++) {
    __m256 *r = pix + k * 8;
    for (int i = 0; i < 8; i++)
      r[i] = row >= 0 && i < valid ? seg_load(chan0 + i * plane + row, s, k) : _mm256_setzero_ps();
    transpose8(r);
  }
}

/* The first w lanes of v to d, nothing past them; with spill, all 8 lanes (the ones past w land
 * where a later store puts its own). */
static inline void store_lanes(float *d, __m256 v, int w, bool spill) {
  if (w == 8 || spill) {
    _mm256_storeu_ps(d, v);
    return;
  }
  __m128 h = _mm256_castps256_ps128(v);
  if (w >= 4) _mm_storeu_ps(d, h), h = _mm256_extractf128_ps(v, 1), d += 4, w -= 4;
  if (w >= 2) _mm_storel_pi((__m64 *)d, h), h = _mm_movehl_ps(h, h), d += 2, w -= 2;
  if (w) _mm_store_ss(d, h);
}

/* Out-channel group o0 (w channels) of one group of tiles, to d[xi * xs + t * pw]; the tiles'
 * sums go to bias[t * bs + 0 .. 7] (lanes past w add zeros). */
static void gout_group(const ms_k_conv2d_geom *g, const float *chan0, const ms_k_wino_group *gr, const seg *s,
                       int valid, int w, bool spill, float *d, int64_t xs, int pw, float *bias, int64_t bs) {
  __m256 p0[16], p1[16];
  int64_t plane = g->oh * g->ow, r0 = 2 * gr->ty;
  pixels(chan0, plane, r0 * g->ow, valid, s, 2, p0);
  pixels(chan0, plane, r0 + 1 < g->oh ? (r0 + 1) * g->ow : -1, valid, s, 2, p1);
  for (int t = 0; t < gr->nv; t++) {
    __m256 z00 = p0[2 * t], z01 = p0[2 * t + 1], z10 = p1[2 * t], z11 = p1[2 * t + 1];
    __m256 a[4] = {z00, _mm256_add_ps(z00, z01), _mm256_sub_ps(z00, z01), z01};
    __m256 b[4] = {z10, _mm256_add_ps(z10, z11), _mm256_sub_ps(z10, z11), z11};
    float *dt = d + t * pw;
    for (int j = 0; j < 4; j++) {
      __m256 sum = _mm256_add_ps(a[j], b[j]);
      store_lanes(dt + (0 + j) * xs, a[j], w, spill);
      store_lanes(dt + (4 + j) * xs, sum, w, spill);
      store_lanes(dt + (8 + j) * xs, _mm256_sub_ps(a[j], b[j]), w, spill);
      store_lanes(dt + (12 + j) * xs, b[j], w, spill);
      if (j == 1 && bias) _mm256_storeu_ps(bias + t * bs, _mm256_add_ps(_mm256_loadu_ps(bias + t * bs), sum));
    }
  }
}

/* B^T along a row of 4 taps. */
static inline void bt4(__m256 d0, __m256 d1, __m256 d2, __m256 d3, __m256 e[4]) {
  e[0] = _mm256_sub_ps(d0, d2), e[1] = _mm256_add_ps(d1, d2), e[2] = _mm256_sub_ps(d2, d1),
  e[3] = _mm256_sub_ps(d1, d3);
}

/* In-channel group c0 (w channels) of one group of tiles, to d[xi * xs + t * pw]. */
static void x_group(const ms_k_conv2d_geom *g, const float *chan0, const ms_k_wino_group *gr, const seg *s,
                    int valid, int w, float *d, int64_t xs, int pw) {
  __m256 p[4][24];
  int64_t plane = g->h * g->w;
  /* the last 8 columns are needed only past 7 tiles */
  int nk = 2 * gr->nv + 2 > 16 ? 3 : 2;
  for (int r = 0; r < 4; r++) {
    int64_t ih = 2 * gr->ty - g->ph + r;
    pixels(chan0, plane, ih >= 0 && ih < g->h ? ih * g->w : -1, valid, s, nk, p[r]);
  }
  for (int t = 0; t < gr->nv; t++) {
    __m256 e[4][4];
    for (int r = 0; r < 4; r++) bt4(p[r][2 * t], p[r][2 * t + 1], p[r][2 * t + 2], p[r][2 * t + 3], e[r]);
    float *dt = d + t * pw;
    for (int j = 0; j < 4; j++) {
      store_lanes(dt + (0 + j) * xs, _mm256_sub_ps(e[0][j], e[2][j]), w, false);
      store_lanes(dt + (4 + j) * xs, _mm256_add_ps(e[1][j], e[2][j]), w, false);
      store_lanes(dt + (8 + j) * xs, _mm256_sub_ps(e[2][j], e[1][j]), w, false);
      store_lanes(dt + (12 + j) * xs, _mm256_sub_ps(e[1][j], e[3][j]), w, false);
    }
  }
}

/* The rows a block reads of each plane: one run [r0, r1) per sample it touches. */
typedef struct runs {
  int nr;
  int64_t n[MS_K_WINO_GROUPS], r0[MS_K_WINO_GROUPS], r1[MS_K_WINO_GROUPS];
} runs;

static runs runs_make(const ms_k_wino_block *b, int64_t rows, int64_t top, int64_t span) {
  runs r = {0};
  for (int q = 0, e; q < b->ng; q = e + 1) {
    for (e = q; e + 1 < b->ng && b->gr[e + 1].n == b->gr[q].n;) e++;
    int64_t r0 = 2 * b->gr[q].ty - top, r1 = 2 * b->gr[e].ty - top + span;
    r.n[r.nr] = b->gr[q].n, r.r0[r.nr] = r0 < 0 ? 0 : r0, r.r1[r.nr++] = r1 > rows ? rows : r1;
  }
  return r;
}

/* Channels [c0, c1)'s rows of the block into the cache ahead of use: the transforms read a few
 * rows of many planes, more streams than the hardware prefetchers follow. */
static void prefetch_runs(const runs *r, const float *t, int64_t chans, int64_t c0, int64_t c1, int64_t rows,
                          int64_t cols) {
  for (int64_t ch = c0; ch < c1 && ch < chans; ch++)
    for (int i = 0; i < r->nr; i++) {
      const float *p = t + (r->n[i] * chans + ch) * rows * cols;
      const char *a = (const char *)(p + r->r0[i] * cols), *e = (const char *)(p + r->r1[i] * cols);
      for (; a < e; a += 64) _mm_prefetch(a, _MM_HINT_T0);
    }
}

void ms_k_wino_wgrad_pack(const ms_k_conv2d_geom *g, const float *x, const float *gout,
                          const ms_k_wino_block *b, const ms_k_wino_panels *p, float *bias) {
  seg sx[MS_K_WINO_GROUPS], sg[MS_K_WINO_GROUPS];
  for (int q = 0; q < b->ng; q++) {
    const ms_k_wino_group *gr = &b->gr[q];
    /* x: tile l reads columns c0 + 2l .. c0 + 2l + 3; gout: 2tx .. 2tx + 1; zeros past the
     * row (padding, ragged tiles) and past the group's last tile (so that empty lanes stay
     * finite and add nothing to the bias) */
    int64_t cx = 2 * gr->tx0 - g->pw, cg = 2 * gr->tx0;
    sx[q] = seg_make(cx, cx + 2 * gr->nv + 2 < g->w ? cx + 2 * gr->nv + 2 : g->w);
    sg[q] = seg_make(cg, cg + 2 * gr->nv < g->ow ? cg + 2 * gr->nv : g->ow);
  }
  const int64_t kc = b->kc, plane_o = g->oh * g->ow, plane_c = g->h * g->w;
  const int mr = p->mr, nr = p->nr;
  runs rg = runs_make(b, g->oh, 0, 2), rx = runs_make(b, g->h, g->ph, 4);
  /* channels outermost (up to 8 at a time, never straddling two panels; in: the place in the
   * panel), so that consecutive groups read on along the same planes */
  prefetch_runs(&rg, gout, g->o, 0, 8, g->oh, g->ow);
  for (int64_t o0 = 0, w; o0 < p->rows; o0 += w) {
    int64_t in = o0 % mr;
    w = mr - in < 8 ? mr - in : 8;
    int valid = (int)(g->o - o0 < w ? g->o - o0 : w);
    prefetch_runs(&rg, gout, g->o, o0 + 8, o0 + 8 + w, g->oh, g->ow);
    for (int q = 0; q < b->ng; q++) {
      const ms_k_wino_group *gr = &b->gr[q];
      /* a panel narrower than a vector spills into the next tile's place or the next panel's
       * (both written after this), or past the point's panels (room left by the caller) */
      gout_group(g, gout + (gr->n * g->o + o0) * plane_o, gr, &sg[q], valid, (int)w, in == 0 && w < 8,
                 p->a + (o0 - in) * kc + gr->toff * mr + in, p->xs_a, mr, bias ? bias + o0 : NULL,
                 p->rows + 8);
    }
  }
  prefetch_runs(&rx, x, g->c, 0, 8, g->h, g->w);
  for (int64_t c0 = 0, w; c0 < p->cols; c0 += w) {
    int64_t in = c0 % nr;
    w = nr - in < 8 ? nr - in : 8;
    int valid = (int)(g->c - c0 < w ? g->c - c0 : w);
    prefetch_runs(&rx, x, g->c, c0 + 8, c0 + 8 + w, g->h, g->w);
    for (int q = 0; q < b->ng; q++) {
      const ms_k_wino_group *gr = &b->gr[q];
      x_group(g, x + (gr->n * g->c + c0) * plane_c, gr, &sx[q], valid, (int)w,
              p->b + (c0 - in) * kc + gr->toff * nr + in, p->cols * kc, nr);
    }
  }
}
