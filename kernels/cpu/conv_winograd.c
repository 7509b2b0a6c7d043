/* conv_winograd.c: when the Winograd F(2x2, 3x3) path serves a float32 convolution, and its setup:
 * the weight transformed once per call (U = G g G^T, straight into the packed A-panel layout of the
 * SGEMM micro-kernel) and the tile blocks handed to the thread pool. The per-block work (input
 * transform, 16 GEMMs over channels, inverse transform) is in conv_winograd_tiles.c, its transforms
 * in conv_winograd_avx2.c and conv_winograd_avx512.c.
 * Each output of F(2,3) costs 16 / 4 = 4 multiply-adds per channel pair instead of 9 (2.25x fewer);
 * the transforms' entries are 0, +-1 and +-1/2, so float32 rounding stays at a few ulps. */
#include <string.h>

#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/cpu_isa.h"

/* Below these channel counts (source and output) the transforms cost more than the products they
 * save (the seed's conv1, C = 1, stays on the direct path). Measured against conv_wide.c at batch
 * 16 on 26x26, 1 thread (time of wide / Winograd): 16 -> 16 0.9-1.1, 16 -> 32 and 32 -> 16
 * 1.0-1.3, 32 -> 32 1.25-1.4, 32 -> 64 1.4-1.55, 8 -> 8 0.55-0.7. */
#define WINO_MIN_CS 16
#define WINO_MIN_O 16
#define WINO_MIN_PAIRS 512 /* CS * O */

static bool channels_ok(int64_t cs, int64_t o) {
  return cs >= WINO_MIN_CS && o >= WINO_MIN_O && cs * o >= WINO_MIN_PAIRS;
}

static bool geom_ok(const ms_k_conv2d_geom *g) {
  return g->groups == 1 && g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
         g->ph >= 0 && g->ph <= 2 && g->pw >= 0 && g->pw <= 2;
}

bool ms_k_conv2d_winograd_forward_ok(const ms_k_conv2d_geom *g) {
  return ms_k_cpu_avx2() && geom_ok(g) && channels_ok(g->c, g->o);
}

bool ms_k_conv2d_winograd_input_grad_ok(const ms_k_conv2d_geom *g) {
  return ms_k_cpu_avx2() && geom_ok(g) && channels_ok(g->o, g->c);
}

/* U for one (output, source) channel pair from its 3x3 kernel k (row stride ks, column step kc:
 * negative steps read it flipped): u[xi * ustride] for xi = 4a + b, U = G k G^T with
 * G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. */
static void transform_kernel(const float *k, int64_t ks, int64_t kc, float *u, int64_t ustride) {
  float gk[4][3];
  for (int j = 0; j < 3; j++) {
    float k0 = k[j * kc], k1 = k[ks + j * kc], k2 = k[2 * ks + j * kc];
    gk[0][j] = k0, gk[1][j] = 0.5f * (k0 + k2) + 0.5f * k1, gk[2][j] = 0.5f * (k0 + k2) - 0.5f * k1, gk[3][j] = k2;
  }
  for (int a = 0; a < 4; a++) {
    float r0 = gk[a][0], r1 = gk[a][1], r2 = gk[a][2];
    float *ua = u + 4 * a * ustride;
    ua[0] = r0, ua[ustride] = 0.5f * (r0 + r2) + 0.5f * r1, ua[2 * ustride] = 0.5f * (r0 + r2) - 0.5f * r1;
    ua[3 * ustride] = r2;
  }
}

/* j->u from the kernels: the one of (output o, source c) starts at w + o * so + c * sc, its rows
 * ks apart and its columns kc apart. Rows past O in the last panel are zero. */
static int transform_weight(ms_k_wino_job *j, const float *w, int64_t so, int64_t sc, int64_t ks, int64_t kc) {
  const int mr = j->t.mr;
  int64_t per_xi = j->opad * j->cs;
  float *u = ms_k_thread_buffer(MS_K_BUF_CONV_W, sizeof(float) * (size_t)(16 * per_xi));
  if (!u) return -1;
  memset(u, 0, sizeof(float) * (size_t)(16 * per_xi));
  for (int64_t o = 0; o < j->o; o++)
    for (int64_t c = 0; c < j->cs; c++)
      transform_kernel(w + o * so + c * sc, ks, kc, u + (o / mr) * mr * j->cs + c * mr + o % mr, per_xi);
  j->u = u;
  return 0;
}

/* Sizes, the tile grid and the block length. */
static void job_init(ms_k_wino_job *j) {
  j->t = ms_k_sgemm_tile_for_rows(j->o); /* the GEMMs' rows are the output channels */
  j->opad = (j->o + j->t.mr - 1) / j->t.mr * j->t.mr;
  j->tiles_h = (j->oh + 1) / 2, j->tiles_w = (j->ow + 1) / 2;
  j->tiles = j->n * j->tiles_h * j->tiles_w;
  /* A block's transformed input (16 x CS x TB floats) stays within 64-128 KB, in L2 beside U
   * (the seed's conv2: 32 tiles forward and input grad; 64 measured no faster). */
  int64_t nr = j->t.nr, tb = 1024 / (j->cs > 0 ? j->cs : 1) / nr * nr;
  if (tb < 2 * nr) tb = 2 * nr;
  if (tb > MS_WINO_TB_MAX / nr * nr) tb = MS_WINO_TB_MAX / nr * nr;
  j->tb = tb;
  /* A line more than the panels: at a multiple of 4 KB, the 16 stores of a tile group's V (one
   * per xi) would all fall in one L1 set. */
  j->vstride = j->cs * j->tb + 16;
}

static int run(ms_k_wino_job *j) {
  int64_t per = j->tiles_h * j->tiles_w, blocks = (per + j->tb - 1) / j->tb;
  /* the AVX-512 transforms fill the 32-wide panels of the AVX-512 tile two vectors at a time */
  bool wide = ms_k_cpu_avx512() && j->t.nr % 16 == 0;
  ms_k_parallel_for(j->n * blocks, 1, wide ? ms_k_wino_blocks_avx512 : ms_k_wino_blocks_avx2, j);
  return j->failed ? -1 : 0;
}

int ms_k_conv2d_forward_winograd(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *b,
                                 float *out) {
  ms_k_wino_job j = {.src = x, .n = g->n, .cs = g->c, .hs = g->h, .ws = g->w, .pt = g->ph, .pl = g->pw,
                     .o = g->o, .oh = g->oh, .ow = g->ow, .bias = b, .out = out};
  job_init(&j);
  if (j.tiles == 0) return 0;
  if (transform_weight(&j, w, g->c * 9, 9, 3, 1) != 0) return -1;
  return run(&j);
}

int ms_k_conv2d_input_grad_winograd(const ms_k_conv2d_geom *g, const float *w, const float *gout, float *gx) {
  /* gx[c, y, x] = sum over (o, i, jj) of w[o, c, 2-i, 2-jj] * gpad[o, y+i, x+jj], gout sitting at
   * (2 - PH, 2 - PW) in gpad: output channel c reads source channel o's kernel flipped. */
  ms_k_wino_job j = {.src = gout, .n = g->n, .cs = g->o, .hs = g->oh, .ws = g->ow, .pt = 2 - g->ph,
                     .pl = 2 - g->pw, .o = g->c, .oh = g->h, .ow = g->w, .bias = NULL, .out = gx};
  job_init(&j);
  if (j.tiles == 0) return 0;
  if (transform_weight(&j, w + 8, 9, g->c * 9, -3, -1) != 0) return -1;
  return run(&j);
}
