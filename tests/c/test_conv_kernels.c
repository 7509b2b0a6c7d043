/* test_conv_kernels.c: the float32 convolution kernels (ms_k_conv2d_forward / _backward: the wide
 * unit-stride path, the direct AVX2 weight gradient, the implicit GEMM) against a naive
 * double-precision loop, over odd shapes: padding, strides, dilation, channel counts and sizes
 * that are multiples of nothing, batch 0, 1 and more than the threads, with and without bias,
 * on 1 and 2 threads, for every GEMM ISA this CPU runs (each in a forked child, as test_gemm). */
#define _GNU_SOURCE
#include "kernels/kernels.h"
#include "test.h"
#include "test_isa.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng_state = 88172645463325252ull;
static float rnd(void) { /* xorshift64: uniform in [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((double)(rng_state >> 11) / 4503599627370496.0 - 1.0);
}

typedef struct {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw;
  int bias;
} shape;

static const shape SHAPES[] = {
    {3, 1, 28, 28, 32, 3, 3, 1, 1, 0, 0, 1, 1, 1},  /* the seed's conv1 */
    {2, 32, 26, 26, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1}, /* the seed's conv2 */
    {9, 3, 7, 9, 5, 3, 2, 1, 1, 0, 0, 1, 1, 1},     /* more samples than items per thread */
    {2, 5, 8, 11, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1},    /* padding */
    {2, 5, 8, 11, 7, 3, 3, 1, 1, 2, 1, 1, 1, 0},    /* padding, uneven */
    {2, 4, 9, 10, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1},    /* stride 2 */
    {2, 3, 9, 9, 4, 3, 3, 1, 2, 0, 0, 1, 1, 1},     /* column stride only */
    {2, 3, 9, 9, 4, 3, 3, 2, 1, 0, 0, 1, 1, 1},     /* row stride only */
    {2, 3, 12, 13, 10, 3, 3, 1, 1, 2, 2, 2, 2, 1},  /* dilation */
    {1, 2, 10, 9, 3, 3, 3, 1, 1, 1, 2, 2, 1, 0},    /* dilation and padding, each uneven */
    {1, 7, 17, 19, 13, 5, 4, 1, 1, 0, 0, 1, 1, 0},  /* batch 1, a 5x4 kernel */
    {4, 1, 13, 30, 33, 3, 3, 1, 1, 0, 0, 1, 1, 1},  /* one channel, odd output count */
    {2, 6, 5, 7, 9, 1, 1, 1, 1, 0, 0, 1, 1, 1},     /* 1x1 */
    {1, 2, 5, 5, 3, 3, 3, 1, 1, 3, 3, 1, 1, 1},     /* padding past the kernel: older paths */
    {3, 4, 7, 5, 6, 3, 3, 1, 1, 2, 2, 1, 1, 1},     /* padding = the kernel: rows share borders */
    {2, 3, 9, 8, 5, 3, 3, 1, 1, 4, 4, 2, 2, 0},     /* the same, dilated */
    {2, 3, 6, 7, 5, 2, 4, 1, 1, 1, 2, 1, 1, 1},     /* even kernel, border shared on one side */
    {0, 3, 6, 6, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1},     /* empty batch */
    {1, 1, 1100, 1100, 8, 3, 3, 1, 1, 0, 0, 1, 1, 1}, /* output over 32 MB: streamed */
};

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* Whether every element of got is within a relative 1e-5 of want, scaled by the size of the
 * terms that made it (mag), so that cancellation does not make the check arbitrary. */
static void check_all(const char *what, const shape *s, const float *got, const double *want, const double *mag,
                      int64_t len) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < len; i++)
    if (!(fabs(got[i] - want[i]) <= 1e-5 * (mag[i] + 1.0))) bad++, first = first < 0 ? i : first;
  CHECK(bad == 0);
  if (bad)
    fprintf(stderr, "  %s of (n %ld c %ld %ldx%ld o %ld k %ldx%ld s %ld,%ld p %ld,%ld d %ld,%ld): %ld bad, "
            "first [%ld] %.9g vs %.9g\n", what, (long)s->n, (long)s->c, (long)s->h, (long)s->w, (long)s->o,
            (long)s->kh, (long)s->kw, (long)s->sh, (long)s->sw, (long)s->ph, (long)s->pw, (long)s->dh,
            (long)s->dw, (long)bad, (long)first, got[first], want[first]);
}

static void test_shape(const shape *s) {
  ms_k_conv2d_geom g = {s->n, s->c, s->h, s->w, s->o, s->kh, s->kw, 0, 0, s->sh, s->sw, s->ph, s->pw, s->dh,
                        s->dw, 1};
  g.oh = out_size(s->h, s->kh, s->sh, s->ph, s->dh), g.ow = out_size(s->w, s->kw, s->sw, s->pw, s->dw);
  int64_t nx = g.n * g.c * g.h * g.w, nw = g.o * g.c * g.kh * g.kw, no = g.n * g.o * g.oh * g.ow;
  /* +1: no zero-size allocations; NaN-filled outputs show anything left unwritten */
  float *x = malloc(sizeof(float) * (nx + 1)), *w = malloc(sizeof(float) * (nw + 1)), *b = malloc(sizeof(float) * (g.o + 1));
  float *gout = malloc(sizeof(float) * (no + 1)), *out = malloc(sizeof(float) * (no + 1));
  float *gx = malloc(sizeof(float) * (nx + 1)), *gw = malloc(sizeof(float) * (nw + 1)), *gb = malloc(sizeof(float) * (g.o + 1));
  double *rout = calloc(no + 1, 8), *mout = calloc(no + 1, 8), *rgx = calloc(nx + 1, 8), *mgx = calloc(nx + 1, 8);
  double *rgw = calloc(nw + 1, 8), *mgw = calloc(nw + 1, 8), *rgb = calloc(g.o + 1, 8), *mgb = calloc(g.o + 1, 8);
  for (int64_t i = 0; i < nx; i++) x[i] = rnd();
  for (int64_t i = 0; i < nw; i++) w[i] = rnd();
  for (int64_t i = 0; i < g.o; i++) b[i] = rnd();
  for (int64_t i = 0; i < no; i++) gout[i] = rnd();
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t o = 0; o < g.o; o++)
      for (int64_t y = 0; y < g.oh; y++)
        for (int64_t z = 0; z < g.ow; z++) {
          int64_t oi = ((n * g.o + o) * g.oh + y) * g.ow + z;
          if (s->bias) rout[oi] = b[o], mout[oi] = fabs(b[o]), rgb[o] += gout[oi], mgb[o] += fabs(gout[oi]);
          for (int64_t c = 0; c < g.c; c++)
            for (int64_t i = 0; i < g.kh; i++)
              for (int64_t j = 0; j < g.kw; j++) {
                int64_t ih = y * g.sh - g.ph + i * g.dh, iw = z * g.sw - g.pw + j * g.dw;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                int64_t xi = ((n * g.c + c) * g.h + ih) * g.w + iw, wi = ((o * g.c + c) * g.kh + i) * g.kw + j;
                rout[oi] += (double)x[xi] * w[wi], mout[oi] += fabs((double)x[xi] * w[wi]);
                rgx[xi] += (double)gout[oi] * w[wi], mgx[xi] += fabs((double)gout[oi] * w[wi]);
                rgw[wi] += (double)gout[oi] * x[xi], mgw[wi] += fabs((double)gout[oi] * x[xi]);
              }
        }
  for (int64_t i = 0; i <= no; i++) out[i] = NAN;
  for (int64_t i = 0; i <= nx; i++) gx[i] = NAN;
  for (int64_t i = 0; i <= nw; i++) gw[i] = NAN;
  for (int64_t i = 0; i <= g.o; i++) gb[i] = NAN;
  CHECK(ms_k_conv2d_forward(MS_K_F32, &g, x, w, s->bias ? b : NULL, out) == 0);
  check_all("forward", s, out, rout, mout, no);
  CHECK(ms_k_conv2d_backward(MS_K_F32, &g, x, w, gout, gx, gw, s->bias ? gb : NULL) == 0);
  check_all("input grad", s, gx, rgx, mgx, nx);
  check_all("weight grad", s, gw, rgw, mgw, nw);
  if (s->bias) check_all("bias grad", s, gb, rgb, mgb, g.o);
  CHECK(isnan(out[no]) && isnan(gx[nx]) && isnan(gw[nw]) && isnan(gb[g.o])); /* nothing past the end */
  /* the weight gradient alone (the input does not require grad) gives the same */
  for (int64_t i = 0; i < nw; i++) gw[i] = NAN;
  CHECK(ms_k_conv2d_backward(MS_K_F32, &g, x, w, gout, NULL, gw, NULL) == 0);
  check_all("weight grad alone", s, gw, rgw, mgw, nw);
  free(x), free(w), free(b), free(gout), free(out), free(gx), free(gw), free(gb);
  free(rout), free(mout), free(rgx), free(mgx), free(rgw), free(mgw), free(rgb), free(mgb);
}

/* Same thread count, same bits: the kernels' sums have a fixed order. */
static void test_deterministic(void) {
  ms_k_conv2d_geom g = {5, 6, 11, 12, 8, 3, 3, 9, 10, 1, 1, 0, 0, 1, 1, 1};
  int64_t nx = 5 * 6 * 11 * 12, nw = 8 * 6 * 9, no = 5 * 8 * 9 * 10;
  float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw), *gout = malloc(sizeof(float) * no);
  float *r[2][3];
  for (int64_t i = 0; i < nx; i++) x[i] = rnd();
  for (int64_t i = 0; i < nw; i++) w[i] = rnd();
  for (int64_t i = 0; i < no; i++) gout[i] = rnd();
  for (int t = 0; t < 2; t++) {
    r[t][0] = malloc(sizeof(float) * no), r[t][1] = malloc(sizeof(float) * nx), r[t][2] = malloc(sizeof(float) * nw);
    CHECK(ms_k_conv2d_forward(MS_K_F32, &g, x, w, NULL, r[t][0]) == 0);
    CHECK(ms_k_conv2d_backward(MS_K_F32, &g, x, w, gout, r[t][1], r[t][2], NULL) == 0);
  }
  CHECK(memcmp(r[0][0], r[1][0], sizeof(float) * no) == 0);
  CHECK(memcmp(r[0][1], r[1][1], sizeof(float) * nx) == 0);
  CHECK(memcmp(r[0][2], r[1][2], sizeof(float) * nw) == 0);
  for (int t = 0; t < 2; t++) free(r[t][0]), free(r[t][1]), free(r[t][2]);
  free(x), free(w), free(gout);
}

static void run_all(const char *isa) {
  (void)isa;
  for (int threads = 1; threads <= 2; threads++) {
    ms_k_set_num_threads(threads);
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) test_shape(&SHAPES[i]);
    test_deterministic();
  }
}

int main(void) {
  ms_test_isa_in_child("generic", run_all);
  ms_test_isa_in_child("avx2", run_all);   /* falls back to generic where the CPU lacks it */
  ms_test_isa_in_child("avx512", run_all); /* likewise */
  return ms_test_finish();
}
