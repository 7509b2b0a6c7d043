/* test_conv_winograd.c: the Winograd F(2x2, 3x3) convolution (conv_winograd.c), called directly
 * so every shape takes it, forward and input gradient against a float64 direct loop: the seed's
 * conv2 at several batch sizes, ragged tiles (odd and tiny inputs, 1x1 and one-column outputs, rows
 * of tiles that split the 4- and 16-tile vectors), padding 0, 1, 2 (uneven too), with and without
 * bias, channel counts that are multiples of nothing, on 1 and 2 threads, bitwise-equal repeats;
 * and that the dispatcher keeps it off generic code and C = 1.
 * Error bound: max |err| / max |ref| <= 1e-5 per output (F(2,3)'s transforms are exact up to
 * rounding with entries 0, +-1, +-1/2), and each element within 1e-5 of the size of its terms. */
#define _GNU_SOURCE
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/cpu_isa.h"
#include "test.h"
#include "test_isa.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float rnd(void) { /* xorshift64: uniform in [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((double)(rng_state >> 11) / 4503599627370496.0 - 1.0);
}

typedef struct {
  int64_t n, c, h, w, o, ph, pw;
  int bias;
} shape;

static const shape SHAPES[] = {
    {1, 32, 26, 26, 64, 0, 0, 1},  /* the seed's conv2 */
    {2, 32, 26, 26, 64, 0, 0, 0},
    {9, 32, 26, 26, 64, 0, 0, 1},  /* more samples than threads, each in its own blocks */
    {3, 3, 5, 7, 5, 0, 0, 1},      /* ragged tiles: a 3x5 output */
    {2, 4, 3, 3, 6, 0, 0, 1},      /* a 1x1 output */
    {2, 4, 4, 4, 6, 0, 0, 0},      /* a 2x2 output: one tile */
    {2, 17, 9, 11, 33, 1, 1, 1},   /* padding 1, channels that are multiples of nothing */
    {3, 17, 8, 7, 33, 2, 2, 0},    /* padding 2 */
    {2, 5, 6, 9, 7, 2, 1, 1},      /* padding uneven */
    {2, 5, 7, 6, 3, 0, 2, 0},      /* padding only on columns */
    {1, 6, 3, 4, 5, 2, 2, 1},      /* input smaller than a patch, padded */
    {5, 16, 13, 15, 32, 1, 0, 1},  /* the fewest channels dispatched here */
    {2, 5, 9, 3, 7, 1, 0, 1},      /* a one-column output: each tile's top-left two floats on */
    {2, 19, 20, 36, 21, 1, 1, 1},  /* 18 tiles a row: quads across row ends, 16-tile groups */
};

typedef struct {
  ms_k_conv2d_geom g;
  float *x, *w, *b, *gout;
  double *rout, *mout, *rgx, *mgx; /* reference values and the sizes of their terms */
  int64_t nx, nw, no;
} problem;

static void problem_init(problem *p, const shape *s) {
  ms_k_conv2d_geom g = {s->n, s->c, s->h, s->w, s->o, 3, 3, 0, 0, 1, 1, s->ph, s->pw, 1, 1, 1};
  g.oh = s->h + 2 * s->ph - 2, g.ow = s->w + 2 * s->pw - 2;
  p->g = g;
  p->nx = g.n * g.c * g.h * g.w, p->nw = g.o * g.c * 9, p->no = g.n * g.o * g.oh * g.ow;
  p->x = malloc(sizeof(float) * (p->nx + 1)), p->w = malloc(sizeof(float) * (p->nw + 1));
  p->b = s->bias ? malloc(sizeof(float) * g.o) : NULL, p->gout = malloc(sizeof(float) * (p->no + 1));
  p->rout = calloc(p->no + 1, 8), p->mout = calloc(p->no + 1, 8);
  p->rgx = calloc(p->nx + 1, 8), p->mgx = calloc(p->nx + 1, 8);
  for (int64_t i = 0; i < p->nx; i++) p->x[i] = rnd();
  for (int64_t i = 0; i < p->nw; i++) p->w[i] = rnd();
  for (int64_t i = 0; s->bias && i < g.o; i++) p->b[i] = rnd();
  for (int64_t i = 0; i < p->no; i++) p->gout[i] = rnd();
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t o = 0; o < g.o; o++)
      for (int64_t y = 0; y < g.oh; y++)
        for (int64_t z = 0; z < g.ow; z++) {
          int64_t oi = ((n * g.o + o) * g.oh + y) * g.ow + z;
          if (p->b) p->rout[oi] = p->b[o], p->mout[oi] = fabs(p->b[o]);
          for (int64_t c = 0; c < g.c; c++)
            for (int64_t i = 0; i < 3; i++)
              for (int64_t j = 0; j < 3; j++) {
                int64_t ih = y - g.ph + i, iw = z - g.pw + j;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                int64_t xi = ((n * g.c + c) * g.h + ih) * g.w + iw, wi = ((o * g.c + c) * 3 + i) * 3 + j;
                double xw = (double)p->x[xi] * p->w[wi], gw = (double)p->gout[oi] * p->w[wi];
                p->rout[oi] += xw, p->mout[oi] += fabs(xw);
                p->rgx[xi] += gw, p->mgx[xi] += fabs(gw);
              }
        }
}

static void problem_free(problem *p) {
  free(p->x), free(p->w), free(p->b), free(p->gout);
  free(p->rout), free(p->mout), free(p->rgx), free(p->mgx);
}

/* got against want: each element within 1e-5 of its terms' size, and max |err| / max |want|. */
static void check_all(const char *what, const shape *s, const float *got, const double *want, const double *mag,
                      int64_t len) {
  int64_t bad = 0, first = -1;
  double emax = 0.0, rmax = 0.0;
  for (int64_t i = 0; i < len; i++) {
    double e = fabs(got[i] - want[i]);
    if (!(e <= 1e-5 * (mag[i] + 1e-3))) bad++, first = first < 0 ? i : first;
    emax = e > emax || e != e ? e : emax;
    rmax = fabs(want[i]) > rmax ? fabs(want[i]) : rmax;
  }
  CHECK(bad == 0);
  CHECK(emax <= 1e-5 * rmax);
  if (bad || !(emax <= 1e-5 * rmax))
    fprintf(stderr, "  %s of (n %ld c %ld %ldx%ld o %ld p %ld,%ld): %ld bad, max err %.3g of %.3g, first [%ld] %.9g vs %.9g\n",
            what, (long)s->n, (long)s->c, (long)s->h, (long)s->w, (long)s->o, (long)s->ph, (long)s->pw, (long)bad,
            emax, rmax, (long)first, first >= 0 ? got[first] : 0.0f, first >= 0 ? want[first] : 0.0);
}

static void test_shape(const shape *s) {
  problem p;
  problem_init(&p, s);
  float *out = malloc(sizeof(float) * (p.no + 1)), *gx = malloc(sizeof(float) * (p.nx + 1));
  float *again = malloc(sizeof(float) * (p.nx > p.no ? p.nx : p.no));
  /* NaN-filled outputs show anything left unwritten, and anything written past the end */
  for (int64_t i = 0; i <= p.no; i++) out[i] = NAN;
  for (int64_t i = 0; i <= p.nx; i++) gx[i] = NAN;
  CHECK(ms_k_conv2d_forward_winograd(&p.g, p.x, p.w, p.b, out) == 0);
  check_all("forward", s, out, p.rout, p.mout, p.no);
  CHECK(ms_k_conv2d_input_grad_winograd(&p.g, p.w, p.gout, gx) == 0);
  check_all("input grad", s, gx, p.rgx, p.mgx, p.nx);
  CHECK(isnan(out[p.no]) && isnan(gx[p.nx]));
  /* the same bits again: no order-dependent sums */
  CHECK(ms_k_conv2d_forward_winograd(&p.g, p.x, p.w, p.b, again) == 0);
  CHECK(memcmp(again, out, sizeof(float) * p.no) == 0);
  CHECK(ms_k_conv2d_input_grad_winograd(&p.g, p.w, p.gout, again) == 0);
  CHECK(memcmp(again, gx, sizeof(float) * p.nx) == 0);
  free(out), free(gx), free(again);
  problem_free(&p);
}

/* The seed's conv2 through the public kernels (which dispatch here on AVX2) gives the same bits
 * on 1 and 2 threads: blocks never share an output. */
static void test_threads_agree(void) {
  const shape s = {5, 32, 26, 26, 64, 0, 0, 1};
  problem p;
  problem_init(&p, &s);
  float *r[2][2];
  for (int t = 0; t < 2; t++) {
    ms_k_set_num_threads(t + 1);
    r[t][0] = malloc(sizeof(float) * p.no), r[t][1] = malloc(sizeof(float) * p.nx);
    CHECK(ms_k_conv2d_forward(MS_K_F32, &p.g, p.x, p.w, p.b, r[t][0]) == 0);
    CHECK(ms_k_conv2d_backward(MS_K_F32, &p.g, p.x, p.w, p.gout, r[t][1], NULL, NULL) == 0);
  }
  check_all("dispatched forward", &s, r[0][0], p.rout, p.mout, p.no);
  check_all("dispatched input grad", &s, r[0][1], p.rgx, p.mgx, p.nx);
  CHECK(memcmp(r[0][0], r[1][0], sizeof(float) * p.no) == 0);
  CHECK(memcmp(r[0][1], r[1][1], sizeof(float) * p.nx) == 0);
  for (int t = 0; t < 2; t++) free(r[t][0]), free(r[t][1]);
  problem_free(&p);
}

/* Which calls the dispatcher sends here. */
static void test_dispatch(void) {
  ms_k_conv2d_geom conv2 = {64, 32, 26, 26, 64, 3, 3, 24, 24, 1, 1, 0, 0, 1, 1, 1};
  ms_k_conv2d_geom conv1 = {64, 1, 28, 28, 32, 3, 3, 26, 26, 1, 1, 0, 0, 1, 1, 1};
  ms_k_conv2d_geom strided = conv2, dilated = conv2, wide_pad = conv2, five = conv2, grouped = conv2;
  ms_k_conv2d_geom narrow = conv2, small = conv2, mixed = conv2; /* 8 -> 64, 16 -> 16; 16 -> 32 */
  strided.sw = 2, dilated.dh = 2, wide_pad.ph = 3, five.kh = 5, grouped.groups = 2;
  narrow.c = 8, small.c = 16, small.o = 16, mixed.c = 16, mixed.o = 32;
  bool avx2 = ms_k_cpu_avx2();
  CHECK(ms_k_conv2d_winograd_forward_ok(&conv2) == avx2);
  CHECK(ms_k_conv2d_winograd_input_grad_ok(&conv2) == avx2);
  CHECK(!ms_k_conv2d_winograd_forward_ok(&conv1)); /* C = 1: the transforms would not pay */
  CHECK(ms_k_conv2d_winograd_forward_ok(&mixed) == avx2 && ms_k_conv2d_winograd_input_grad_ok(&mixed) == avx2);
  const ms_k_conv2d_geom *no[] = {&strided, &dilated, &wide_pad, &five, &grouped, &narrow, &small};
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
    CHECK(!ms_k_conv2d_winograd_forward_ok(no[i]) && !ms_k_conv2d_winograd_input_grad_ok(no[i]));
}

static void run_all(const char *isa) {
  (void)isa;
  test_dispatch();
  if (!ms_k_cpu_avx2()) return; /* the AVX2 body may not run here; the old paths serve */
  for (int threads = 1; threads <= 2; threads++) {
    ms_k_set_num_threads(threads);
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) test_shape(&SHAPES[i]);
  }
  /* the training batch, once (its float64 reference is the slow part of this test) */
  const shape batch = {64, 32, 26, 26, 64, 0, 0, 1};
  test_shape(&batch);
  test_threads_agree();
}

int main(void) {
  ms_test_isa_in_child("generic", run_all);
  ms_test_isa_in_child("avx2", run_all);   /* skips the direct calls where the CPU lacks AVX2 */
  ms_test_isa_in_child("avx512", run_all); /* the AVX-512 tiles (12 x 32, 8 x 32) where the CPU has them */
  return ms_test_finish();
}
