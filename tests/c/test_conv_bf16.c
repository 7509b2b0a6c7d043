/* test_conv_bf16.c: the bfloat16 conv2d (kernels/cpu/conv_bf16.c) against the float32 one
 * (ms_k_conv2d_forward / ms_k_conv2d_backward) on the same bf16 values widened: the products
 * are exact in float32 and only the order of the sums differs, so every bf16 result must lie
 * within one bf16 ulp of the float32 reference (plus a sliver for the float32 sums' order).
 * Shapes: the seed's conv1 and conv2, an odd K, stride 2, padding 1, dilation, 1x1, a 2x3 kernel,
 * O off the 12-row tile, rows wider than 32; batch 1 and 3; with and without bias; 1 and 2 threads; each pass forced
 * through the GEMM, forced through widening, and as chosen. A NaN in one sample must stay in
 * that sample, and 2 threads must give the same bits twice. Skipped (success) without AVX-512
 * BF16. */
#include "kernels/kernels.h"
#include "kernels/cpu/conv_bf16.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint16_t *rand_bf16(int64_t n) {
  uint16_t *h = malloc((size_t)n * sizeof *h);
  for (int64_t i = 0; i < n; i++) h[i] = ms_k_f32_to_bf16((float)ms_test_uniform());
  return h;
}

static float *widen(int64_t n, const uint16_t *h) {
  float *f = malloc((size_t)(n + 1) * sizeof *f);
  for (int64_t i = 0; i < n; i++) f[i] = ms_k_bf16_to_f32(h[i]);
  return f;
}

/* One bf16 ulp at |v| (the spacing of bf16 numbers there; subnormal floor). */
static double bf16_ulp(double v) {
  int e;
  frexp(fabs(v) > 1e-30 ? fabs(v) : 1e-30, &e);
  return ldexp(1.0, e - 8);
}

/* ours (bf16) against ref (float32): within one bf16 ulp of ref plus 2^-20 of the tensor's
 * largest |ref| (the float32 sums' order); a NaN reference wants a NaN. Returns the failures. */
static int compare(const char *what, int64_t n, const uint16_t *ours, const float *ref) {
  double big = 0;
  for (int64_t i = 0; i < n; i++)
    if (isfinite(ref[i]) && fabs(ref[i]) > big) big = fabs(ref[i]);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double o = ms_k_bf16_to_f32(ours[i]), r = ref[i];
    int ok = isnan(r) ? isnan(o) : fabs(o - r) <= bf16_ulp(r) + ldexp(big, -20);
    if (!ok && bad++ < 3)
      fprintf(stderr, "  %s[%lld] = %.9g, float32 reference %.9g\n", what, (long long)i, o, r);
  }
  return bad;
}

typedef struct {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw;
} shape;

static ms_k_conv2d_geom geom(const shape *s) {
  ms_k_conv2d_geom g = {.n = s->n, .c = s->c, .h = s->h, .w = s->w, .o = s->o, .kh = s->kh,
                        .kw = s->kw, .sh = s->sh, .sw = s->sw, .ph = s->ph, .pw = s->pw,
                        .dh = s->dh, .dw = s->dw, .groups = 1};
  g.oh = (g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  return g;
}

/* Every pass of one shape in the current mode and thread count; nan_sample >= 0 puts a NaN in
 * that sample's first input element. */
static void run_case(const shape *s, int bias, int nan_sample) {
  ms_k_conv2d_geom g = geom(s);
  int64_t xn = g.n * g.c * g.h * g.w, wn = g.o * g.c * g.kh * g.kw, yn = g.n * g.o * g.oh * g.ow;
  uint16_t *x = rand_bf16(xn), *w = rand_bf16(wn), *b = rand_bf16(g.o), *gy = rand_bf16(yn);
  if (nan_sample >= 0) x[nan_sample * g.c * g.h * g.w] = 0x7FC0;
  float *xf = widen(xn, x), *wf = widen(wn, w), *bf = widen(g.o, b), *gyf = widen(yn, gy);
  float *yr = malloc((size_t)yn * sizeof *yr), *gxr = malloc((size_t)xn * sizeof *gxr);
  float *gwr = malloc((size_t)wn * sizeof *gwr), *gbr = malloc((size_t)g.o * sizeof *gbr);
  uint16_t *y = malloc((size_t)yn * sizeof *y), *gx = malloc((size_t)xn * sizeof *gx);
  uint16_t *gw = malloc((size_t)wn * sizeof *gw), *gb = malloc((size_t)g.o * sizeof *gb);
  CHECK(ms_k_conv2d_forward(MS_K_F32, &g, xf, wf, bias ? bf : NULL, yr) == 0);
  CHECK(ms_k_conv2d_backward(MS_K_F32, &g, xf, wf, gyf, gxr, gwr, gbr) == 0);
  CHECK(ms_k_conv2d_forward(MS_K_BF16, &g, x, w, bias ? b : NULL, y) == 0);
  int bad = 0;
  if (nan_sample >= 0) { /* the other samples match; the NaN's sample has NaNs (the float
                          * reference's Winograd tiles spread it further, so no more is compared) */
    int64_t Y = g.o * g.oh * g.ow, nans = 0;
    for (int64_t n = 0; n < g.n; n++)
      if (n != nan_sample) bad += compare("y (NaN elsewhere)", Y, y + n * Y, yr + n * Y);
    for (int64_t e = 0; e < Y; e++) nans += isnan(ms_k_bf16_to_f32(y[nan_sample * Y + e]));
    CHECK(nans > 0);
    goto done;
  }
  bad += compare("y", yn, y, yr);
  /* each backward alone, as autograd asks when one input wants a gradient, then all at once */
  CHECK(ms_k_conv2d_backward(MS_K_BF16, &g, x, w, gy, gx, NULL, NULL) == 0);
  bad += compare("gx", xn, gx, gxr);
  CHECK(ms_k_conv2d_backward(MS_K_BF16, &g, x, w, gy, NULL, gw, bias ? gb : NULL) == 0);
  bad += compare("gw", wn, gw, gwr);
  if (bias) bad += compare("gb", g.o, gb, gbr);
  memset(gx, 0xFF, (size_t)xn * sizeof *gx), memset(gw, 0xFF, (size_t)wn * sizeof *gw);
  CHECK(ms_k_conv2d_backward(MS_K_BF16, &g, x, w, gy, gx, gw, gb) == 0);
  bad += compare("gx (all)", xn, gx, gxr) + compare("gw (all)", wn, gw, gwr) + compare("gb (all)", g.o, gb, gbr);
  if (ms_k_get_num_threads() > 1) { /* the same bits again */
    uint16_t *gw2 = malloc((size_t)wn * sizeof *gw2), *y2 = malloc((size_t)yn * sizeof *y2);
    CHECK(ms_k_conv2d_backward(MS_K_BF16, &g, x, w, gy, NULL, gw2, NULL) == 0);
    CHECK(ms_k_conv2d_forward(MS_K_BF16, &g, x, w, bias ? b : NULL, y2) == 0);
    CHECK(memcmp(gw, gw2, (size_t)wn * sizeof *gw) == 0);
    CHECK(memcmp(y, y2, (size_t)yn * sizeof *y) == 0);
    free(gw2), free(y2);
  }
done:
  if (bad)
    fprintf(stderr, "  failed: n=%lld c=%lld %lldx%lld o=%lld k=%lldx%lld s=%lld,%lld p=%lld,%lld "
            "d=%lld,%lld bias=%d threads=%d\n", (long long)s->n, (long long)s->c, (long long)s->h,
            (long long)s->w, (long long)s->o, (long long)s->kh, (long long)s->kw, (long long)s->sh,
            (long long)s->sw, (long long)s->ph, (long long)s->pw, (long long)s->dh, (long long)s->dw,
            bias, ms_k_get_num_threads());
  CHECK(bad == 0);
  free(x), free(w), free(b), free(gy), free(xf), free(wf), free(bf), free(gyf);
  free(yr), free(gxr), free(gwr), free(gbr), free(y), free(gx), free(gw), free(gb);
}

int main(void) {
  if (!ms_k_gemm_bf16_available()) {
    printf("avx512_bf16: not supported by this CPU, skipped\n");
    return 0;
  }
  /* n c h w o kh kw sh sw ph pw dh dw */
  const shape shapes[] = {
      {3, 1, 28, 28, 32, 3, 3, 1, 1, 0, 0, 1, 1},  /* conv1 */
      {3, 32, 26, 26, 64, 3, 3, 1, 1, 0, 0, 1, 1}, /* conv2 */
      {3, 3, 9, 7, 5, 3, 3, 1, 1, 0, 0, 1, 1},     /* odd K = 27 */
      {3, 4, 11, 10, 6, 3, 3, 2, 2, 0, 0, 1, 1},   /* stride 2 */
      {3, 3, 9, 9, 5, 3, 3, 2, 2, 1, 1, 1, 1},     /* stride 2, padding 1 */
      {3, 5, 8, 9, 13, 3, 3, 1, 1, 1, 1, 1, 1},    /* padding 1, O = 13 */
      {3, 5, 8, 9, 16, 3, 3, 1, 1, 1, 2, 1, 1},    /* padding (1, 2), O = 16 (8-row tile) */
      {3, 2, 10, 11, 3, 3, 3, 1, 1, 2, 2, 2, 2},   /* dilation 2 */
      {3, 8, 5, 6, 4, 1, 1, 1, 1, 0, 0, 1, 1},     /* 1x1 */
      {3, 6, 9, 12, 7, 2, 3, 2, 1, 1, 0, 1, 1},    /* 2x3 kernel, mixed stride and padding */
      {3, 40, 7, 7, 50, 3, 3, 1, 1, 1, 1, 1, 1},   /* K = 360, 40 + 10 columns */
      {3, 2, 5, 70, 3, 3, 3, 1, 1, 1, 1, 1, 1},    /* rows of 70 columns: runs over 32 */
  };
  const ms_k_bconv_mode modes[] = {MS_K_BCONV_GEMM, MS_K_BCONV_WIDEN, MS_K_BCONV_AUTO};
  for (int m = 0; m < 3; m++) {
    ms_k_conv2d_bf16_set_mode(modes[m]);
    for (int t = 1; t <= 2; t++) {
      ms_k_set_num_threads(t);
      for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int n = 1; n <= 3; n += 2)
          for (int bias = 0; bias <= 1; bias++) {
            shape s = shapes[i];
            s.n = n;
            run_case(&s, bias, -1);
          }
      /* a NaN in the middle sample stays there (the wide forward reads past a sample's end) */
      run_case(&shapes[1], 1, 1);
      run_case(&shapes[0], 0, 1);
    }
  }
  ms_k_conv2d_bf16_set_mode(MS_K_BCONV_AUTO);
  return ms_test_finish();
}
