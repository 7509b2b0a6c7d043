/* test_conv_small.c: the direct AVX-512 kernels for few-channel convolutions (conv_small_avx512.c),
 * called directly and through the dispatcher, forward, input gradient and weight (+ bias)
 * gradient against a float64 loop: N in {1, 3, 64}, C in {1, 2, 3}, O in {8, 32}, H = W in {5,
 * 20, 28, 40} (W = 5: a 16-lane vector spans four rows; W = 40: a row spans three vectors and
 * the forward walks the 38 output rows in two chunks, 26 and 12), 3x3
 * with and without bias, plus other kernel sizes, C = 4 and an empty batch; on 1 and 2 threads,
 * bitwise-equal reruns. Run with MS_GEMM_ISA=avx512 in a child, skipped where the CPU lacks
 * AVX-512; the avx2 and generic children check that the dispatcher keeps these shapes off the
 * kernels there. Each element must be within 1e-5 of the size of the terms that made it (as
 * test_conv_kernels.c). The streamed forward (outputs over 32 MB): conv1 at batch 390 here, and
 * test_conv_kernels.c's 1100x1100 one-channel case for planes staged in pieces (whose input
 * gradient, its scratch over 1 MB, takes the GEMM-shaped path). */
#define _GNU_SOURCE
#include "kernels/cpu/conv_small.h"
#include "test.h"
#include "test_isa.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float rnd(void) { /* xorshift64: uniform in [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((double)(rng_state >> 11) / 4503599627370496.0 - 1.0);
}

/* A case's tensors and its float64 reference (r*) with the sizes of their terms (m*). */
typedef struct {
  ms_k_conv2d_geom g;
  int bias;
  int64_t nx, nw, no;
  float *x, *w, *b, *gout;
  double *rout, *mout, *rgw, *mgw, *rgb, *mgb, *rgx, *mgx;
} conv_case;

static void case_init(conv_case *t, int64_t n, int64_t c, int64_t hw, int64_t o, int64_t k, int bias) {
  memset(t, 0, sizeof *t);
  t->g = (ms_k_conv2d_geom){n, c, hw, hw, o, k, k, hw - k + 1, hw - k + 1, 1, 1, 0, 0, 1, 1, 1};
  t->bias = bias;
  const ms_k_conv2d_geom *g = &t->g;
  t->nx = n * c * hw * hw, t->nw = o * c * k * k, t->no = n * o * g->oh * g->ow;
  t->x = malloc(sizeof(float) * (t->nx + 1)), t->w = malloc(sizeof(float) * (t->nw + 1));
  t->b = malloc(sizeof(float) * (o + 1)), t->gout = malloc(sizeof(float) * (t->no + 1));
  t->rout = calloc(t->no + 1, 8), t->mout = calloc(t->no + 1, 8), t->rgw = calloc(t->nw + 1, 8);
  t->mgw = calloc(t->nw + 1, 8), t->rgb = calloc(o + 1, 8), t->mgb = calloc(o + 1, 8);
  t->rgx = calloc(t->nx + 1, 8), t->mgx = calloc(t->nx + 1, 8);
  for (int64_t i = 0; i < t->nx; i++) t->x[i] = rnd();
  for (int64_t i = 0; i < t->nw; i++) t->w[i] = rnd();
  for (int64_t i = 0; i < o; i++) t->b[i] = rnd();
  for (int64_t i = 0; i < t->no; i++) t->gout[i] = rnd();
  for (int64_t s = 0; s < n; s++)
    for (int64_t oc = 0; oc < o; oc++)
      for (int64_t y = 0; y < g->oh; y++)
        for (int64_t z = 0; z < g->ow; z++) {
          int64_t oi = ((s * o + oc) * g->oh + y) * g->ow + z;
          double go = t->gout[oi];
          if (bias) t->rout[oi] = t->b[oc], t->mout[oi] = fabs(t->b[oc]);
          t->rgb[oc] += go, t->mgb[oc] += fabs(go);
          for (int64_t ci = 0; ci < c; ci++)
            for (int64_t i = 0; i < k; i++)
              for (int64_t j = 0; j < k; j++) {
                int64_t xi = ((s * c + ci) * hw + y + i) * hw + z + j;
                double xv = t->x[xi];
                int64_t wi = ((oc * c + ci) * k + i) * k + j;
                t->rout[oi] += xv * t->w[wi], t->mout[oi] += fabs(xv * t->w[wi]);
                t->rgw[wi] += go * xv, t->mgw[wi] += fabs(go * xv);
                t->rgx[xi] += go * t->w[wi], t->mgx[xi] += fabs(go * t->w[wi]);
              }
        }
}

static void case_free(conv_case *t) {
  free(t->x), free(t->w), free(t->b), free(t->gout);
  free(t->rout), free(t->mout), free(t->rgw), free(t->mgw), free(t->rgb), free(t->mgb);
  free(t->rgx), free(t->mgx);
}

static void check_all(const char *what, const conv_case *t, int threads, const float *got, const double *want,
                      const double *mag, int64_t len) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < len; i++)
    if (!(fabs(got[i] - want[i]) <= 1e-5 * (mag[i] + 1.0))) bad++, first = first < 0 ? i : first;
  CHECK(bad == 0);
  if (bad)
    fprintf(stderr, "  %s of (n %ld c %ld %ldx%ld o %ld k %ldx%ld bias %d, %d threads): %ld bad, first [%ld] %.9g vs %.9g\n",
            what, (long)t->g.n, (long)t->g.c, (long)t->g.h, (long)t->g.w, (long)t->g.o, (long)t->g.kh,
            (long)t->g.kw, t->bias, threads, (long)bad, (long)first, got[first], want[first]);
}

/* One case through the kernels (direct: called by name; else through ms_k_conv2d_forward /
 * _backward), twice, the second run bitwise equal to the first. */
static void run_case(const conv_case *t, int threads, int direct) {
  const ms_k_conv2d_geom *g = &t->g;
  const float *b = t->bias ? t->b : NULL;
  float *out[2], *gw[2], *gb[2], *gx[2];
  for (int r = 0; r < 2; r++) {
    out[r] = malloc(sizeof(float) * (t->no + 1)), gw[r] = malloc(sizeof(float) * (t->nw + 1));
    gb[r] = malloc(sizeof(float) * (g->o + 1)), gx[r] = malloc(sizeof(float) * (t->nx + 1));
    for (int64_t i = 0; i <= t->nx; i++) gx[r][i] = NAN;
    /* NaN-filled: anything left unwritten, or written past the end, shows */
    for (int64_t i = 0; i <= t->no; i++) out[r][i] = NAN;
    for (int64_t i = 0; i <= t->nw; i++) gw[r][i] = NAN;
    for (int64_t i = 0; i <= g->o; i++) gb[r][i] = NAN;
    float *gbr = t->bias ? gb[r] : NULL;
    if (direct) {
      CHECK(ms_k_conv2d_forward_small_avx512(g, t->x, t->w, b, out[r]) == 0);
      CHECK(ms_k_conv2d_weight_grad_small_avx512(g, t->x, t->gout, gw[r], gbr) == 0);
      CHECK(ms_k_conv2d_input_grad_small_avx512(g, t->w, t->gout, gx[r]) == 0);
    } else {
      CHECK(ms_k_conv2d_forward(MS_K_F32, g, t->x, t->w, b, out[r]) == 0);
      CHECK(ms_k_conv2d_backward(MS_K_F32, g, t->x, t->w, t->gout, gx[r], gw[r], gbr) == 0);
    }
  }
  check_all("input grad", t, threads, gx[0], t->rgx, t->mgx, t->nx);
  CHECK(isnan(gx[0][t->nx]));
  CHECK(memcmp(gx[0], gx[1], sizeof(float) * (size_t)t->nx) == 0);
  check_all("forward", t, threads, out[0], t->rout, t->mout, t->no);
  check_all("weight grad", t, threads, gw[0], t->rgw, t->mgw, t->nw);
  if (t->bias) check_all("bias grad", t, threads, gb[0], t->rgb, t->mgb, g->o);
  CHECK(isnan(out[0][t->no]) && isnan(gw[0][t->nw]) && (t->bias || isnan(gb[0][0])) && isnan(gb[0][g->o]));
  CHECK(memcmp(out[0], out[1], sizeof(float) * (size_t)t->no) == 0);
  CHECK(memcmp(gw[0], gw[1], sizeof(float) * (size_t)t->nw) == 0);
  CHECK(memcmp(gb[0], gb[1], sizeof(float) * (size_t)g->o) == 0);
  for (int r = 0; r < 2; r++) free(out[r]), free(gw[r]), free(gb[r]), free(gx[r]);
}

static void run_shape(int64_t n, int64_t c, int64_t hw, int64_t o, int64_t k, int bias) {
  conv_case t;
  case_init(&t, n, c, hw, o, k, bias);
  CHECK(ms_k_conv_small_avx512_ok(&t.g));
  for (int threads = 1; threads <= 2; threads++) {
    ms_k_set_num_threads(threads);
    run_case(&t, threads, 1);
  }
  run_case(&t, 2, 0); /* the dispatcher takes the same path */
  case_free(&t);
}

static void run_avx512(const char *isa) {
  (void)isa;
  if (strcmp(ms_k_gemm_isa(), "avx512") != 0) {
    printf("skipped: this CPU lacks AVX-512 (the GEMM runs %s)\n", ms_k_gemm_isa());
    return;
  }
  static const int64_t NS[] = {1, 3, 64}, CS[] = {1, 2, 3}, OS[] = {8, 32}, HWS[] = {5, 20, 28, 40};
  for (int ni = 0; ni < 3; ni++)
    for (int ci = 0; ci < 3; ci++)
      for (int oi = 0; oi < 2; oi++)
        for (int hi = 0; hi < 4; hi++)
          for (int bias = 0; bias <= 1; bias++) run_shape(NS[ni], CS[ci], HWS[hi], OS[oi], 3, bias);
  run_shape(3, 4, 12, 16, 3, 1);  /* 4 channels: 36 taps, a short last tap block */
  run_shape(2, 2, 9, 8, 5, 1);    /* 5x5: 50 taps */
  run_shape(2, 1, 7, 16, 1, 1);   /* 1x1, 16 channels: a last gradient block of one channel */
  run_shape(5, 3, 17, 8, 2, 0);   /* even kernel, odd output width */
  run_shape(0, 1, 28, 32, 3, 1);  /* empty batch: zero gradients */
  run_shape(390, 1, 28, 32, 3, 1); /* an output over 32 MB: streamed, planes staged whole */
  /* shapes the kernels leave to the older paths */
  ms_k_conv2d_geom g = {2, 1, 28, 28, 12, 3, 3, 26, 26, 1, 1, 0, 0, 1, 1, 1};
  CHECK(!ms_k_conv_small_avx512_ok(&g)); /* O not a multiple of 8 */
  g.o = 32, g.ph = 1, g.oh = g.ow = 28;
  CHECK(!ms_k_conv_small_avx512_ok(&g)); /* padding */
  g.ph = 0, g.c = 5, g.oh = g.ow = 26;
  CHECK(!ms_k_conv_small_avx512_ok(&g)); /* too many channels */
}

/* Other ISAs keep the older paths for every shape. */
static void run_other(const char *isa) {
  (void)isa;
  ms_k_conv2d_geom g = {64, 1, 28, 28, 32, 3, 3, 26, 26, 1, 1, 0, 0, 1, 1, 1};
  CHECK(!ms_k_conv_small_avx512_ok(&g));
}

int main(void) {
  ms_test_isa_in_child("avx512", run_avx512);
  ms_test_isa_in_child("avx2", run_other);
  ms_test_isa_in_child("generic", run_other);
  return ms_test_finish();
}
