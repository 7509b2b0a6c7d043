/* test_conv_winograd_wgrad.c: the Winograd F(3x3, 2x2) weight and bias gradient
 * (kernels/cpu/conv_winograd_wgrad.c) against a float64 loop, called directly, over the seed's
 * conv2 at several batch sizes, conv1, ragged and tiny inputs, padding 0..2 (also uneven),
 * channel counts that are multiples of nothing, 1 and 2 threads; repeats are bitwise equal; and
 * the dispatch: ms_k_conv2d_backward takes it where AVX2 runs, the old paths under
 * MS_GEMM_ISA=generic, both right. Error bound: max |err| / max |ref| <= 2e-6 per tensor (the
 * transforms add a few roundings per term; sums over thousands of tiles stay near 1e-7..1e-6). */
#define _GNU_SOURCE
#include "kernels/cpu/conv_winograd_wgrad.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/kernels.h"
#include "test.h"
#include "test_isa.h"

#include <stdint.h>
#include <stdlib.h>

#define REL_BOUND 2e-6

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float rnd(void) { /* xorshift64: uniform in [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((double)(rng_state >> 11) / 4503599627370496.0 - 1.0);
}

typedef struct {
  int64_t n, c, h, w, o, ph, pw;
} shape;

static const shape SHAPES[] = {
    {1, 32, 26, 26, 64, 0, 0},  /* the seed's conv2, batch 1 */
    {2, 32, 26, 26, 64, 0, 0},  /* ... 2 */
    {9, 32, 26, 26, 64, 0, 0},  /* ... 9: blocks span samples */
    {64, 32, 26, 26, 64, 0, 0}, /* ... 64: the training batch */
    {3, 1, 28, 28, 32, 0, 0},   /* the seed's conv1 */
    {2, 3, 5, 7, 5, 0, 0},      /* ragged: 3x5 output, odd tiles */
    {3, 4, 3, 3, 6, 0, 0},      /* one output pixel */
    {2, 5, 4, 4, 7, 0, 0},      /* 2x2 output: one tile */
    {2, 3, 5, 7, 5, 1, 1},      /* padding 1 */
    {2, 3, 5, 7, 5, 2, 2},      /* padding 2 */
    {2, 6, 9, 11, 9, 2, 1},     /* padding uneven */
    {2, 6, 9, 11, 9, 0, 2},     /* padding on one side only */
    {2, 17, 13, 21, 33, 1, 0},  /* channels multiples of nothing, groups of 8 + 3 tiles */
    {1, 9, 40, 40, 10, 1, 1},   /* rows of 20 tiles: groups 8 + 8 + 4, blocks split rows */
    {0, 4, 6, 6, 5, 0, 0},      /* empty batch */
};

typedef struct {
  ms_k_conv2d_geom g;
  float *x, *gout;
  double *rgw, *rgb;
} problem;

static problem make(const shape *s) {
  problem p;
  ms_k_conv2d_geom g = {s->n, s->c, s->h, s->w, s->o, 3, 3, s->h + 2 * s->ph - 2, s->w + 2 * s->pw - 2, 1, 1,
                        s->ph, s->pw, 1, 1, 1};
  p.g = g;
  int64_t nx = g.n * g.c * g.h * g.w, no = g.n * g.o * g.oh * g.ow;
  p.x = malloc(sizeof(float) * (nx + 1)), p.gout = malloc(sizeof(float) * (no + 1));
  p.rgw = calloc(g.o * g.c * 9 + 1, sizeof(double)), p.rgb = calloc(g.o + 1, sizeof(double));
  for (int64_t i = 0; i < nx; i++) p.x[i] = rnd();
  for (int64_t i = 0; i < no; i++) p.gout[i] = rnd();
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t o = 0; o < g.o; o++)
      for (int64_t y = 0; y < g.oh; y++)
        for (int64_t z = 0; z < g.ow; z++) {
          double go = p.gout[((n * g.o + o) * g.oh + y) * g.ow + z];
          p.rgb[o] += go;
          for (int64_t c = 0; c < g.c; c++)
            for (int64_t i = 0; i < 3; i++)
              for (int64_t j = 0; j < 3; j++) {
                int64_t ih = y - g.ph + i, iw = z - g.pw + j;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                p.rgw[((o * g.c + c) * 3 + i) * 3 + j] += go * p.x[((n * g.c + c) * g.h + ih) * g.w + iw];
              }
        }
  return p;
}

static void drop(problem *p) { free(p->x), free(p->gout), free(p->rgw), free(p->rgb); }

/* max |got - want| / max |want| (an all-zero want must come back exactly zero). */
static double rel_err(const float *got, const double *want, int64_t len) {
  double e = 0.0, m = 0.0;
  for (int64_t i = 0; i < len; i++) {
    double d = fabs(got[i] - want[i]);
    e = d > e || isnan(d) ? d : e, m = fabs(want[i]) > m ? fabs(want[i]) : m;
  }
  return m > 0.0 ? e / m : e;
}

static void check_close(const char *what, const problem *p, const float *gw, const float *gb) {
  const ms_k_conv2d_geom *g = &p->g;
  double ew = rel_err(gw, p->rgw, g->o * g->c * 9), eb = gb ? rel_err(gb, p->rgb, g->o) : 0.0;
  CHECK(ew <= REL_BOUND && eb <= REL_BOUND);
  if (!(ew <= REL_BOUND && eb <= REL_BOUND) || getenv("MS_TEST_VERBOSE"))
    fprintf(stderr, "  %s (n %ld c %ld %ldx%ld o %ld p %ld,%ld, %d threads): gw %.3g gb %.3g\n", what,
            (long)g->n, (long)g->c, (long)g->h, (long)g->w, (long)g->o, (long)g->ph, (long)g->pw,
            ms_k_get_num_threads(), ew, eb);
}

/* Direct calls: with and without the bias, NaN-filled outputs (anything unwritten shows), and a
 * repeat that must give the same bits. */
static void test_direct(const problem *p) {
  const ms_k_conv2d_geom *g = &p->g;
  int64_t nw = g->o * g->c * 9;
  float *gw = malloc(sizeof(float) * (nw + 1)), *gb = malloc(sizeof(float) * (g->o + 1));
  float *gw2 = malloc(sizeof(float) * (nw + 1)), *gb2 = malloc(sizeof(float) * (g->o + 1));
  for (int64_t i = 0; i <= nw; i++) gw[i] = gw2[i] = NAN;
  for (int64_t i = 0; i <= g->o; i++) gb[i] = gb2[i] = NAN;
  CHECK(ms_k_conv2d_weight_grad_wino(g, p->x, p->gout, gw, gb) == 0);
  check_close("wino", p, gw, gb);
  CHECK(isnan(gw[nw]) && isnan(gb[g->o])); /* nothing past the end */
  CHECK(ms_k_conv2d_weight_grad_wino(g, p->x, p->gout, gw2, gb2) == 0);
  CHECK(memcmp(gw, gw2, sizeof(float) * nw) == 0 && memcmp(gb, gb2, sizeof(float) * g->o) == 0);
  for (int64_t i = 0; i < nw; i++) gw2[i] = NAN;
  CHECK(ms_k_conv2d_weight_grad_wino(g, p->x, p->gout, gw2, NULL) == 0); /* no bias: the same gw */
  CHECK(memcmp(gw, gw2, sizeof(float) * nw) == 0);
  free(gw), free(gb), free(gw2), free(gb2);
}

/* Through ms_k_conv2d_backward, whichever path the ISA and the shape pick. */
static void test_dispatch(const problem *p) {
  const ms_k_conv2d_geom *g = &p->g;
  int64_t nw = g->o * g->c * 9;
  float *gw = malloc(sizeof(float) * (nw + 1)), *gb = malloc(sizeof(float) * (g->o + 1));
  CHECK(ms_k_conv2d_backward(MS_K_F32, g, p->x, NULL, p->gout, NULL, gw, gb) == 0);
  check_close("dispatch", p, gw, gb);
  free(gw), free(gb);
}

static void run_all(const char *isa) {
  bool avx2 = ms_k_cpu_avx2();
  printf("isa %s: %s\n", isa, avx2 ? "Winograd path and dispatch" : "dispatch only (old paths)");
  for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
    problem p = make(&SHAPES[i]);
    for (int threads = 1; threads <= 2; threads++) {
      ms_k_set_num_threads(threads);
      if (avx2) test_direct(&p);
      test_dispatch(&p);
    }
    drop(&p);
  }
  /* the seed's conv2 (and anything like it) takes the Winograd path where AVX2 runs */
  ms_k_conv2d_geom seed = {64, 32, 26, 26, 64, 3, 3, 24, 24, 1, 1, 0, 0, 1, 1, 1};
  CHECK(ms_k_conv2d_wino_wgrad_ok(&seed));
  ms_k_conv2d_geom strided = seed;
  strided.sh = 2, strided.oh = 12;
  CHECK(!ms_k_conv2d_wino_wgrad_ok(&strided));
  ms_k_conv2d_geom padded = seed;
  padded.ph = 3, padded.oh = 30;
  CHECK(!ms_k_conv2d_wino_wgrad_ok(&padded));
}

int main(void) {
  ms_test_isa_in_child("generic", run_all);
  ms_test_isa_in_child("avx2", run_all);   /* falls back to generic where the CPU lacks it */
  ms_test_isa_in_child("avx512", run_all); /* on the AVX-512 micro-kernel's wider panels */
  return ms_test_finish();
}
