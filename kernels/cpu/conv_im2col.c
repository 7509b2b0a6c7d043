/* conv_im2col.c: 2-D convolution as im2col + GEMM (its backward GEMM + col2im), float32 or
 * float64, any groups: what conv.c sends the shapes to that the float32 groups-1 kernels do not
 * take (float64, grouped).
 * Each sample is unfolded into a (C*KH*KW, OH*OW) column matrix (one per thread, reused), so a
 * sample's whole convolution is one GEMM per group; samples are spread over the pool.
 *
 * Letters: N batch, C input channels, O output channels, (H, W) input, (OH, OW) output,
 * (KH, KW) kernel, P = OH*OW output pixels, K = C/groups*KH*KW (one group's column rows). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/conv_geom.h"
#include "kernels/cpu/conv_im2col.h"

static size_t elsize(ms_k_dtype dt) { return dt == MS_K_F64 ? 8 : 4; }

/* C = alpha * A * B + beta * C in dt; matrices given as (pointer, row stride, column stride). */
static void gemm(ms_k_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t rsA,
                 int64_t csA, const void *B, int64_t rsB, int64_t csB, double beta, void *C,
                 int64_t rsC) {
  if (dt == MS_K_F64)
    ms_k_dgemm(M, N, K, 1.0, A, rsA, csA, B, rsB, csB, beta, C, rsC, 1);
  else
    ms_k_sgemm(M, N, K, 1.0f, A, rsA, csA, B, rsB, csB, (float)beta, C, rsC, 1);
}

/* col (C*KH*KW, P) from one sample xs (C, H, W); padding reads as zero. */
static void im2col(ms_k_dtype dt, const ms_k_conv2d_geom *g, const char *xs, char *col) {
  size_t es = elsize(dt);
  int64_t P = g->oh * g->ow;
  for (int64_t c = 0; c < g->c; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        char *row = col + (size_t)(((c * g->kh + i) * g->kw + j) * P) * es;
        int64_t lo, hi;
        ms_k_conv_valid_range(j * g->dw - g->pw, g->sw, g->w, g->ow, &lo, &hi);
        for (int64_t oh = 0; oh < g->oh; oh++) {
          char *dst = row + (size_t)(oh * g->ow) * es;
          int64_t ih = oh * g->sh - g->ph + i * g->dh;
          if (ih < 0 || ih >= g->h || lo == hi) {
            memset(dst, 0, (size_t)g->ow * es);
            continue;
          }
          memset(dst, 0, (size_t)lo * es);
          const char *src = xs + (size_t)((c * g->h + ih) * g->w + lo * g->sw + j * g->dw - g->pw) * es;
          ms_k_cast(hi - lo, dst + (size_t)lo * es, dt, 1, src, dt, g->sw);
          memset(dst + (size_t)hi * es, 0, (size_t)(g->ow - hi) * es);
        }
      }
}

/* ---- the per-sample work, shared by forward and backward ---------------------------------- */

typedef struct conv_job {
  ms_k_dtype dt;
  const ms_k_conv2d_geom *g;
  const char *x, *w, *b, *gout;
  char *out, *gx, *gw;
  double *gb;          /* bias gradient accumulated in double, per thread (nthreads * O) */
  char **gw_part;      /* per-thread weight gradients (slot 0 is gw itself) */
  int team;            /* members that ran */
  _Atomic int failed;
} conv_job;

static void forward_sample(conv_job *j, int64_t s, char *col) {
  const ms_k_conv2d_geom *g = j->g;
  size_t es = elsize(j->dt);
  int64_t P = g->oh * g->ow, og = g->o / g->groups, cg = g->c / g->groups, K = cg * g->kh * g->kw;
  const char *xs = j->x + (size_t)(s * g->c * g->h * g->w) * es;
  char *os = j->out + (size_t)(s * g->o * P) * es;
  if (!ms_k_conv_is_pointwise(g)) im2col(j->dt, g, xs, col);
  const char *cols = ms_k_conv_is_pointwise(g) ? xs : col;
  if (j->b) /* start from the bias so the GEMM adds into it */
    for (int64_t o = 0; o < g->o; o++) ms_k_cast(P, os + (size_t)(o * P) * es, j->dt, 1, j->b + o * es, j->dt, 0);
  for (int64_t gr = 0; gr < g->groups; gr++)
    gemm(j->dt, og, P, K, j->w + (size_t)(gr * og * K) * es, K, 1, cols + (size_t)(gr * K * P) * es, P, 1,
         j->b ? 1.0 : 0.0, os + (size_t)(gr * og * P) * es, P);
}

static void backward_sample(conv_job *j, int64_t s, char *col, char *gw, double *gb) {
  const ms_k_conv2d_geom *g = j->g;
  size_t es = elsize(j->dt);
  int64_t P = g->oh * g->ow, og = g->o / g->groups, cg = g->c / g->groups, K = cg * g->kh * g->kw;
  const char *xs = j->x ? j->x + (size_t)(s * g->c * g->h * g->w) * es : NULL;
  const char *gs = j->gout + (size_t)(s * g->o * P) * es;
  if (gw) { /* gw_g += gout_g (og, P) * col_g^T (P, K) */
    if (!ms_k_conv_is_pointwise(g)) im2col(j->dt, g, xs, col);
    const char *cols = ms_k_conv_is_pointwise(g) ? xs : col;
    for (int64_t gr = 0; gr < g->groups; gr++)
      gemm(j->dt, og, K, P, gs + (size_t)(gr * og * P) * es, P, 1, cols + (size_t)(gr * K * P) * es, 1, P,
           1.0, gw + (size_t)(gr * og * K) * es, K);
  }
  if (gb)
    for (int64_t o = 0; o < g->o; o++) {
      ms_k_reduce_result r;
      ms_k_reduce_row(MS_K_RSUM, j->dt, P, gs + (size_t)(o * P) * es, 1, 0, &r);
      gb[o] += r.f;
    }
  if (j->gx) { /* col_g (K, P) = w_g^T (K, og) * gout_g (og, P), folded back into gx */
    char *gxs = j->gx + (size_t)(s * g->c * g->h * g->w) * es;
    char *dst = ms_k_conv_is_pointwise(g) ? gxs : col;
    for (int64_t gr = 0; gr < g->groups; gr++)
      gemm(j->dt, K, P, og, j->w + (size_t)(gr * og * K) * es, 1, K, gs + (size_t)(gr * og * P) * es, P, 1,
           0.0, dst + (size_t)(gr * K * P) * es, P);
    if (!ms_k_conv_is_pointwise(g)) {
      memset(gxs, 0, (size_t)(g->c * g->h * g->w) * es);
      ms_k_conv_col2im(j->dt, g, col, gxs);
    }
  }
}

/* Member t of the team takes a contiguous piece of the batch, with its own column buffer and,
 * in backward, its own weight and bias gradient partial sums. */
static void conv_member(conv_job *j, int t, int nt, bool backward) {
  const ms_k_conv2d_geom *g = j->g;
  size_t es = elsize(j->dt);
  int64_t q = g->n / nt, r = g->n % nt;
  int64_t begin = t * q + (t < r ? t : r), end = begin + q + (t < r ? 1 : 0);
  if (t == 0) j->team = nt;
  size_t wnum = (size_t)(g->o * (g->c / g->groups) * g->kh * g->kw);
  char *col = ms_k_conv_is_pointwise(g) ? NULL : malloc((size_t)(g->c * g->kh * g->kw * g->oh * g->ow + 1) * es);
  char *gw = NULL;
  if (backward && j->gw) gw = t == 0 ? j->gw : calloc(wnum + 1, es);
  if (backward && j->gw_part) j->gw_part[t] = gw;
  if ((!col && !ms_k_conv_is_pointwise(g)) || (backward && j->gw && !gw)) {
    j->failed = 1;
    free(col);
    return;
  }
  double *gb = backward && j->gb ? j->gb + t * g->o : NULL;
  for (int64_t s = begin; s < end && !j->failed; s++) {
    if (backward) backward_sample(j, s, col, gw, gb);
    else forward_sample(j, s, col);
  }
  free(col);
}

static void forward_member(void *ctx, int t, int nt) { conv_member(ctx, t, nt, false); }
static void backward_member(void *ctx, int t, int nt) { conv_member(ctx, t, nt, true); }

/* Samples run in parallel when each thread gets at least one; otherwise one thread walks the
 * batch and each GEMM uses the whole pool. */
static int team_size(const ms_k_conv2d_geom *g) {
  int nt = ms_k_get_num_threads();
  return g->n >= nt ? nt : 1;
}

int ms_k_conv2d_forward_im2col(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *x, const void *w,
                               const void *b, void *out) {
  conv_job j = {.dt = dt, .g = g, .x = x, .w = w, .b = b, .out = out};
  if (g->n == 0) return 0;
  ms_k_parallel_team(team_size(g), forward_member, &j);
  return j.failed ? -1 : 0;
}

/* Adds the other members' weight partials into slot 0 (gw) and writes the bias gradient. */
static void reduce_partials(conv_job *j, void *gb) {
  const ms_k_conv2d_geom *g = j->g;
  int64_t wnum = g->o * (g->c / g->groups) * g->kh * g->kw;
  for (int t = 1; t < j->team && j->gw; t++)
    ms_k_binary(MS_K_ADD, j->dt, wnum, j->gw, 1, j->gw, 1, j->gw_part[t], 1);
  for (int64_t o = 0; gb && o < g->o; o++) {
    double sum = 0;
    for (int t = 0; t < j->team; t++) sum += j->gb[t * g->o + o];
    ms_k_fill(1, (char *)gb + o * elsize(j->dt), j->dt, 1, sum);
  }
}

int ms_k_conv2d_backward_im2col(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *x, const void *w,
                                const void *gout, void *gx, void *gw, void *gb) {
  int nt = team_size(g);
  size_t wnum = (size_t)(g->o * (g->c / g->groups) * g->kh * g->kw);
  conv_job j = {.dt = dt, .g = g, .x = x, .w = w, .gout = gout, .gx = gx, .gw = gw};
  if (gw) memset(gw, 0, wnum * elsize(dt));
  j.gw_part = calloc((size_t)nt, sizeof *j.gw_part);
  j.gb = gb ? calloc((size_t)(nt * g->o) + 1, sizeof *j.gb) : NULL;
  int rc = -1;
  if (j.gw_part && (!gb || j.gb)) {
    if (g->n > 0) ms_k_parallel_team(nt, backward_member, &j);
    else j.team = 1;
    if (!j.failed) reduce_partials(&j, gb), rc = 0;
    for (int t = 1; t < nt; t++) free(j.gw_part[t]);
  }
  free(j.gw_part);
  free(j.gb);
  return rc;
}
