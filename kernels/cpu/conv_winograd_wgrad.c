/* conv_winograd_wgrad.c: the float32 weight (and bias) gradient of a 3x3 stride-1 convolution by
 * Winograd F(3x3, 2x2): 16 GEMMs M[xi] (O x C) = sum over tiles of U[xi][o][t] V[xi][c][t], U
 * gout's transformed 2x2 tiles and V x's transformed 4x4 tiles, then gw[o][c] = G^T M[o][c] G.
 * 2.25x fewer multiplications than the direct sum, and the contraction runs over all tiles of
 * all samples, so the GEMMs run on the SGEMM micro-kernel. The transforms are the price: on
 * conv2 (64 x 32 channels) they take about as long as the GEMMs, and with few channels longer
 * than the direct path (ms_k_conv2d_wino_wgrad_ok says where it pays).
 *
 * Blocking: each thread takes a range of tile groups (conv_winograd_wgrad.h), transforms a block
 * of them straight into packed panels (A: gout's O channels in rows of mr, B: x's C channels in
 * columns of nr; L2-sized), accumulates the 16 GEMMs into its own M (beta = 1), and the members'
 * M's are summed in member order before the inverse transform: the same bits for the same team. */
#include <string.h>

#include "kernels/cpu/conv_winograd_wgrad.h"
#include "kernels/cpu/gemm_ukr.h" /* ms_k_thread_buffer */
#include "kernels/cpu/line_feed.h"

/* Blocks of at most MS_K_WINO_KC tiles: for conv2 (O 64, C 32) the panels take 16 * (66 + 32) *
 * 48 floats = 301 KB, and M 16 * 66 * 32 = 135 KB: together they stay in L2 (512 KB). */
enum { MAX_TEAM = 256 };

typedef struct ww_job {
  const ms_k_conv2d_geom *g;
  const float *x, *gout;
  ms_k_sgemm_tile t;
  int64_t th, tw, gx, groups; /* tile rows, tiles per row, groups per tile row, groups in all */
  int64_t rows, cols;         /* M[xi]: O and C rounded up to the panel widths */
  bool bias;
  float *part[MAX_TEAM]; /* per-member M[16][rows][cols], then the bias by tile lane [8][rows + 8] */
  int team;
  _Atomic int failed;
} ww_job;

bool ms_k_conv2d_wino_wgrad_ok(const ms_k_conv2d_geom *g) {
  bool shape = g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
               g->groups == 1 && g->ph >= 0 && g->ph <= 2 && g->pw >= 0 && g->pw <= 2;
  /* the transforms cost per tile in proportion to O + C, the GEMMs save in proportion to O * C:
   * measured (1 thread, batch 32-64, 26x26) even at 32 x 32, 1.35x at conv2's 64 x 32, 8x slower
   * at conv1's 32 x 1 */
  return shape && g->c >= 16 && g->o >= 16 && g->c * g->o >= 2048;
}

/* Group q: sample, tile row, first tile, tile count (toff left to the block). */
static ms_k_wino_group group_at(const ww_job *j, int64_t q) {
  int64_t r = q / j->gx;
  ms_k_wino_group gr = {r / j->th, r % j->th, q % j->gx * 8, 0, 0};
  gr.nv = j->tw - gr.tx0 < 8 ? (int)(j->tw - gr.tx0) : 8;
  return gr;
}

/* The block of groups from q on: as many as fit; returns the group after it. */
static int64_t block_at(const ww_job *j, int64_t q, int64_t qe, ms_k_wino_block *b) {
  b->ng = 0, b->kc = 0;
  for (; q < qe && b->ng < MS_K_WINO_GROUPS; q++) {
    ms_k_wino_group gr = group_at(j, q);
    if (b->kc + gr.nv > MS_K_WINO_KC) break;
    gr.toff = b->kc, b->kc += gr.nv;
    b->gr[b->ng++] = gr;
  }
  return q;
}

/* Rows [r0, r1) of every channel plane of sample n. */
static void feed_rows(ms_k_line_feed *f, const float *t, int64_t n, int64_t chans, int64_t rows, int64_t cols,
                      int64_t r0, int64_t r1) {
  r0 = r0 < 0 ? 0 : r0, r1 = r1 > rows ? rows : r1;
  for (int64_t c = 0; c < chans && r0 < r1; c++)
    ms_k_feed_add(f, t + ((n * chans + c) * rows + r0) * cols, sizeof(float) * (size_t)((r1 - r0) * cols));
}

/* The rows block b will read of every channel plane of gout and x (line_feed.h), spread over
 * the GEMM calls of one block (`calls`). */
static void feed_plan(const ww_job *j, const ms_k_wino_block *b, int64_t calls, ms_k_line_feed *f) {
  const ms_k_conv2d_geom *g = j->g;
  ms_k_feed_reset(f);
  for (int q = 0, e; q < b->ng; q = e + 1) {
    for (e = q; e + 1 < b->ng && b->gr[e + 1].n == b->gr[q].n;) e++;
    int64_t n = b->gr[q].n, ty0 = b->gr[q].ty, ty1 = b->gr[e].ty;
    feed_rows(f, j->gout, n, g->o, g->oh, g->ow, 2 * ty0, 2 * ty1 + 2);
    feed_rows(f, j->x, n, g->c, g->h, g->w, 2 * ty0 - g->ph, 2 * ty1 - g->ph + 4);
  }
  ms_k_feed_pace(f, calls);
}

static void member(void *ctx, int t, int nt) {
  ww_job *j = ctx;
  const int mr = j->t.mr, nr = j->t.nr;
  const float one = 1.0f;
  const int64_t mlen = 16 * j->rows * j->cols;
  if (t == 0) j->team = nt;
  float *m = ms_k_thread_buffer(MS_K_BUF_WGRAD_M, (size_t)(mlen + 8 * (j->rows + 8)) * sizeof(float));
  ms_k_wino_panels p = {mr, nr, j->rows, j->cols, 0, NULL, NULL};
  p.a = ms_k_thread_buffer(MS_K_BUF_WGRAD_A, (size_t)(16 * (j->rows * MS_K_WINO_KC + 8)) * sizeof(float));
  p.b = ms_k_thread_buffer(MS_K_BUF_WGRAD_B, (size_t)(16 * j->cols * MS_K_WINO_KC) * sizeof(float));
  j->part[t] = m;
  if (!m || !p.a || !p.b) {
    j->failed = 1;
    return;
  }
  memset(m, 0, (size_t)(mlen + 8 * (j->rows + 8)) * sizeof(float));
  int64_t q = j->groups / nt, rem = j->groups % nt;
  int64_t qb = t * q + (t < rem ? t : rem), qe = qb + q + (t < rem ? 1 : 0);
  ms_k_wino_block b, next;
  ms_k_line_feed *feed = ms_k_thread_buffer(MS_K_BUF_WGRAD_FEED, sizeof(ms_k_line_feed));
  const int64_t calls = 16 * (j->rows / mr) * (j->cols / nr);
  for (int64_t q0 = block_at(j, qb, qe, &b), q1; b.ng > 0; b = next, q0 = q1) {
    q1 = block_at(j, q0, qe, &next); /* none (ng 0) past the member's range */
    if (feed) feed_plan(j, &next, calls, feed);
    p.xs_a = j->rows * b.kc + 8;
    ms_k_wino_wgrad_pack(j->g, j->x, j->gout, &b, &p, j->bias ? m + mlen : NULL);
    /* per point: each A panel against B's few panels, which stay in L1 */
    for (int xi = 0; xi < 16; xi++) {
      const float *a = p.a + xi * p.xs_a, *bb = p.b + xi * j->cols * b.kc;
      float *mx = m + xi * j->rows * j->cols;
      for (int64_t o0 = 0; o0 < j->rows; o0 += mr)
        for (int64_t c0 = 0; c0 < j->cols; c0 += nr) {
          if (feed) ms_k_feed_some(feed); /* the next block's rows, while the FMAs run */
          j->t.ukr(b.kc, &one, a + o0 * b.kc, bb + c0 * b.kc, &one, mx + o0 * j->cols + c0, j->cols, 1);
        }
    }
  }
}

/* gw[o][c] (3x3) = (DG)^T M (DG): G of F(2x2, 3x3) with its last row negated (D), undoing the
 * sign the gout transform leaves out. m is row-major 4x4. */
static void inverse(const float m[16], float *gw) {
  float q[3][4];
  for (int b = 0; b < 4; b++) {
    float s = 0.5f * (m[4 + b] + m[8 + b]);
    q[0][b] = m[b] + s, q[1][b] = 0.5f * (m[4 + b] - m[8 + b]), q[2][b] = s - m[12 + b];
  }
  for (int i = 0; i < 3; i++) {
    float s = 0.5f * (q[i][1] + q[i][2]);
    gw[i * 3] = q[i][0] + s, gw[i * 3 + 1] = 0.5f * (q[i][1] - q[i][2]), gw[i * 3 + 2] = s - q[i][3];
  }
}

int ms_k_conv2d_weight_grad_wino(const ms_k_conv2d_geom *g, const float *x, const float *gout, float *gw,
                                 float *gb) {
  ww_job j;
  memset(&j, 0, sizeof j);
  j.g = g, j.x = x, j.gout = gout, j.bias = gb != NULL;
  j.th = (g->oh + 1) / 2, j.tw = (g->ow + 1) / 2, j.gx = (j.tw + 7) / 8;
  j.groups = g->n * j.th * j.gx;
  j.t = ms_k_sgemm_tile_for_rows(g->o); /* the GEMMs' rows are gout's channels */
  j.rows = (g->o + j.t.mr - 1) / j.t.mr * j.t.mr, j.cols = (g->c + j.t.nr - 1) / j.t.nr * j.t.nr;
  /* a member per ~4 MFLOP of (Winograd) work at least, so small layers stay on one thread */
  int64_t flops = 2 * 16 * j.rows * j.cols * g->n * j.th * j.tw, nt = ms_k_get_num_threads();
  if (nt > flops / (4 << 20)) nt = flops / (4 << 20);
  if (nt > j.groups) nt = j.groups;
  if (nt > MAX_TEAM) nt = MAX_TEAM;
  if (nt < 1) nt = 1;
  ms_k_parallel_team((int)nt, member, &j);
  if (j.failed) return -1;
  /* members' sums in member order, then the inverse transform */
  const int64_t mlen = 16 * j.rows * j.cols;
  for (int64_t o = 0; o < g->o; o++)
    for (int64_t c = 0; c < g->c; c++) {
      float m[16];
      for (int xi = 0; xi < 16; xi++) {
        float s = 0.0f;
        for (int t = 0; t < j.team; t++) s += j.part[t][(xi * j.rows + o) * j.cols + c];
        m[xi] = s;
      }
      inverse(m, gw + (o * g->c + c) * 9);
    }
  if (gb)
    for (int64_t o = 0; o < g->o; o++) {
      float s = 0.0f;
      for (int t = 0; t < j.team; t++)
        for (int l = 0; l < 8; l++) s += j.part[t][mlen + l * (j.rows + 8) + o];
      gb[o] = s;
    }
  return 0;
}
