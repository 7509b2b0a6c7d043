/* test_layer_norm_vec.c: ms_k_layer_norm and its backward in float32 and bfloat16, once per
 * MS_GEMM_ISA (generic: nn_ops_body.h's scalar rows; avx2 and avx512: layer_norm_body.h's vector
 * rows), against a float64 reference on the same inputs: row lengths around the vector widths
 * (1 to 33, 47, 770: every tail of 8 and 16 lanes), rows with mean 1e4 and std ~1e-3 (a float32
 * sum of x would lose the statistics there), with and without weight and bias. bfloat16 must give
 * the float32 kernel's results on the widened inputs rounded once, bit for bit; and every result
 * must be the same bits on 1, 2 and 3 threads (splits that start rows and columns off the lanes).
 * gw and gb are the scalar loops' sums bit for bit on every ISA. */
#define _POSIX_C_SOURCE 200809L /* setenv and fork in test_isa.h */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "test.h"
#include "test_isa.h"

/* One case's tensors: inputs, the kernel's outputs, and the float64 reference's. */
typedef struct ln_case {
  int64_t M, C;
  float *x, *g, *w, *b; /* w and b NULL without affine */
  double eps;
  float *y, *mean, *rstd, *gx, *gw, *gb;
  double *ry, *rmean, *rstd_ref, *rgx, *rgw, *rgb;
  double gx_scale; /* max rstd |g w|: gx's terms, which cancel to far less on short rows */
  double *sgw, *sgb; /* nn_ops_body.h's scalar column sums, operation for operation */
} ln_case;

static void *zalloc(int64_t n, size_t size) { return calloc((size_t)(n > 0 ? n : 1), size); }

/* x uniform in [-2, 2) around offset 0.5 (kind 0), or mean 1e4 with 1e4 + k 2^-10, k in -3..2 in
 * pairs k, -k (kind 1: the mean is exactly 1e4, std ~1.7e-3), or 1e4 + uniform(-2e-3, 2e-3)
 * rounded to float32 (kind 2: the mean is not a float32). */
static void fill_x(float *x, int64_t M, int64_t C, int kind) {
  for (int64_t r = 0; r < M; r++)
    for (int64_t c = 0; c < C; c++) {
      float *v = x + r * C + c;
      if (kind == 0) *v = (float)(0.5 + 2 * ms_test_uniform());
      else if (kind == 2) *v = (float)(1e4 + 2e-3 * ms_test_uniform());
      else if (c % 2 == 1 && c + 1 <= C) *v = (float)(2e4 - v[-1]); /* the pair's -k: exact */
      else *v = (float)(1e4 + (double)((int)(3 * ms_test_uniform() + 3) - 3) / 1024.0);
    }
  if (kind == 1 && C % 2 == 1) /* an odd row's last element pairs with none: put it at the mean */
    for (int64_t r = 0; r < M; r++) x[r * C + C - 1] = 1e4f;
}

static ln_case make_case(int64_t M, int64_t C, int kind, int affine) {
  ln_case t = {.M = M, .C = C, .eps = kind ? 1e-12 : 1e-5};
  int64_t n = M * C;
  t.x = zalloc(n, sizeof(float)), t.g = zalloc(n, sizeof(float));
  fill_x(t.x, M, C, kind);
  for (int64_t i = 0; i < n; i++) t.g[i] = (float)ms_test_uniform();
  if (affine) {
    t.w = zalloc(C, sizeof(float)), t.b = zalloc(C, sizeof(float));
    for (int64_t c = 0; c < C; c++) t.w[c] = (float)(1 + 0.5 * ms_test_uniform()), t.b[c] = (float)ms_test_uniform();
  }
  t.y = zalloc(n, sizeof(float)), t.gx = zalloc(n, sizeof(float));
  t.mean = zalloc(M, sizeof(float)), t.rstd = zalloc(M, sizeof(float));
  t.gw = zalloc(C, sizeof(float)), t.gb = zalloc(C, sizeof(float));
  t.ry = zalloc(n, sizeof(double)), t.rgx = zalloc(n, sizeof(double));
  t.rmean = zalloc(M, sizeof(double)), t.rstd_ref = zalloc(M, sizeof(double));
  t.rgw = zalloc(C, sizeof(double)), t.rgb = zalloc(C, sizeof(double));
  t.sgw = zalloc(C, sizeof(double)), t.sgb = zalloc(C, sizeof(double));
  return t;
}

static void free_case(ln_case *t) {
  void *p[] = {t->x, t->g, t->w, t->b, t->y, t->mean, t->rstd, t->gx, t->gw, t->gb,
               t->ry, t->rmean, t->rstd_ref, t->rgx, t->rgw, t->rgb, t->sgw, t->sgb};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) free(p[i]);
}

/* The float64 reference. The output and the backward normalise around the kernel's float32
 * mean and rstd (the saved statistics both use), so rounding the mean to float32 (up to half an
 * ulp of 1e4: a third of kind 2's std) is not counted as an error; the statistics themselves are
 * checked against the exact ones. */
static void reference(ln_case *t) {
  int64_t M = t->M, C = t->C;
  for (int64_t c = 0; c < C; c++) t->rgw[c] = 0, t->rgb[c] = 0, t->sgw[c] = 0, t->sgb[c] = 0;
  t->gx_scale = 0;
  for (int64_t r = 0; r < M; r++) {
    const float *x = t->x + r * C, *g = t->g + r * C;
    double s = 0, ss = 0, m1 = 0, m2 = 0;
    for (int64_t c = 0; c < C; c++) s += x[c];
    double mu = s / (double)C;
    for (int64_t c = 0; c < C; c++) ss += (x[c] - mu) * (x[c] - mu);
    t->rmean[r] = mu, t->rstd_ref[r] = 1 / sqrt(ss / (double)C + t->eps);
    double m = t->mean[r], rs = t->rstd[r];
    for (int64_t c = 0; c < C; c++) {
      double xh = (x[c] - m) * rs, gh = t->w ? (double)g[c] * t->w[c] : g[c];
      t->ry[r * C + c] = xh * (t->w ? t->w[c] : 1) + (t->b ? t->b[c] : 0);
      m1 += gh, m2 += gh * xh;
      t->gx_scale = fmax(t->gx_scale, rs * fabs(gh));
      t->rgw[c] += g[c] * xh, t->rgb[c] += g[c];
      t->sgw[c] += (double)g[c] * (x[c] - t->mean[r]) * t->rstd[r], t->sgb[c] += g[c];
    }
    m1 /= (double)C, m2 /= (double)C;
    for (int64_t c = 0; c < C; c++) {
      double xh = (x[c] - m) * rs, gh = t->w ? (double)g[c] * t->w[c] : g[c];
      t->rgx[r * C + c] = rs * (gh - m1 - xh * m2);
    }
  }
}

/* max |got - want| over max |want| or scale, whichever is larger (0 when all are 0). */
static double rel_err(const float *got, const double *want, int64_t n, double scale) {
  double d = 0, s = scale;
  for (int64_t i = 0; i < n; i++) {
    d = fmax(d, fabs(got[i] - want[i]));
    s = fmax(s, fabs(want[i]));
  }
  return s > 0 ? d / s : d;
}

/* The parameter gradients are the scalar loops' bits on every ISA (float16 still runs those);
 * call after reference(). */
static void check_scalar_sums(const ln_case *t, const char *what) {
  int64_t bad = 0;
  for (int64_t c = 0; c < t->C; c++) bad += t->gw[c] != (float)t->sgw[c], bad += t->gb[c] != (float)t->sgb[c];
  if (bad) fprintf(stderr, "%s (M %lld, C %lld): %lld of gw, gb differ from the scalar sums\n", what,
                   (long long)t->M, (long long)t->C, (long long)bad);
  CHECK(bad == 0);
}

static int run_kernels(ln_case *t, ms_k_dtype dt, const void *x, const void *g, void *y, void *gx) {
  int err = ms_k_layer_norm(dt, t->M, t->C, x, t->w, t->b, t->eps, y, t->mean, t->rstd);
  return err ? err : ms_k_layer_norm_backward(dt, t->M, t->C, x, g, t->mean, t->rstd, t->w, gx, t->gw, t->gb);
}

static void check_float32(ln_case *t, const char *what) {
  CHECK(run_kernels(t, MS_K_F32, t->x, t->g, t->y, t->gx) == 0);
  reference(t);
  int64_t n = t->M * t->C;
  /* float32 arithmetic on O(1) values: a few ulps; gx against the size of its terms */
  double e[6] = {rel_err(t->y, t->ry, n, 0), rel_err(t->mean, t->rmean, t->M, 0),
                 rel_err(t->rstd, t->rstd_ref, t->M, 0), rel_err(t->gx, t->rgx, n, t->gx_scale),
                 rel_err(t->gw, t->rgw, t->C, 0), rel_err(t->gb, t->rgb, t->C, 0)};
  const char *names[6] = {"y", "mean", "rstd", "gx", "gw", "gb"};
  check_scalar_sums(t, what);
  for (int i = 0; i < 6; i++) {
    if (e[i] > 2e-5) fprintf(stderr, "%s (M %lld, C %lld): %s off by %g\n", what, (long long)t->M, (long long)t->C,
                             names[i], e[i]);
    CHECK(e[i] <= 2e-5);
  }
}

/* bfloat16 inputs: the float32 kernels on the widened values, y and gx rounded once, are the
 * bfloat16 kernels' results bit for bit (mean, rstd, gw and gb are float32 in both). */
static void check_bf16(ln_case *t) {
  int64_t n = t->M * t->C;
  uint16_t *xh = zalloc(n, 2), *gh = zalloc(n, 2), *yh = zalloc(n, 2), *gxh = zalloc(n, 2);
  for (int64_t i = 0; i < n; i++) {
    xh[i] = ms_k_f32_to_bf16(t->x[i]), gh[i] = ms_k_f32_to_bf16(t->g[i]);
    t->x[i] = ms_k_bf16_to_f32(xh[i]), t->g[i] = ms_k_bf16_to_f32(gh[i]);
  }
  CHECK(run_kernels(t, MS_K_F32, t->x, t->g, t->y, t->gx) == 0);
  float *stats = zalloc(2 * t->M + 2 * t->C, sizeof(float));
  memcpy(stats, t->mean, (size_t)t->M * sizeof(float)), memcpy(stats + t->M, t->rstd, (size_t)t->M * sizeof(float));
  memcpy(stats + 2 * t->M, t->gw, (size_t)t->C * sizeof(float));
  memcpy(stats + 2 * t->M + t->C, t->gb, (size_t)t->C * sizeof(float));
  CHECK(run_kernels(t, MS_K_BF16, xh, gh, yh, gxh) == 0);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += yh[i] != ms_k_f32_to_bf16(t->y[i]), bad += gxh[i] != ms_k_f32_to_bf16(t->gx[i]);
  bad += memcmp(stats, t->mean, (size_t)t->M * sizeof(float)) != 0;
  bad += memcmp(stats + t->M, t->rstd, (size_t)t->M * sizeof(float)) != 0;
  bad += memcmp(stats + 2 * t->M, t->gw, (size_t)t->C * sizeof(float)) != 0;
  bad += memcmp(stats + 2 * t->M + t->C, t->gb, (size_t)t->C * sizeof(float)) != 0;
  if (bad) fprintf(stderr, "bfloat16 (M %lld, C %lld): %lld values differ from float32's rounded\n", (long long)t->M,
                   (long long)t->C, (long long)bad);
  CHECK(bad == 0);
  free(stats), free(xh), free(gh), free(yh), free(gxh);
}

/* Every output's bits on 2 and 3 threads are those of 1 thread, in float32 and bfloat16. */
static void check_threads(int64_t M, int64_t C) {
  ln_case t = make_case(M, C, 0, 1);
  int64_t n = M * C, nout = 2 * n + 2 * M + 2 * C;
  float *first = zalloc(nout, sizeof(float));
  uint16_t *xh = zalloc(n, 2), *gh = zalloc(n, 2), *yh = zalloc(n, 2), *gxh = zalloc(n, 2);
  for (int64_t i = 0; i < n; i++) xh[i] = ms_k_f32_to_bf16(t.x[i]), gh[i] = ms_k_f32_to_bf16(t.g[i]);
  int before = ms_k_get_num_threads();
  for (int bf16 = 0; bf16 <= 1; bf16++)
    for (int threads = 1; threads <= 3; threads++) {
      ms_k_set_num_threads(threads);
      if (bf16) CHECK(run_kernels(&t, MS_K_BF16, xh, gh, yh, gxh) == 0);
      else CHECK(run_kernels(&t, MS_K_F32, t.x, t.g, t.y, t.gx) == 0);
      if (!bf16 && threads == 1) {
        reference(&t);
        check_scalar_sums(&t, "float32, many rows");
      }
      if (bf16) /* the 16-bit outputs go into the float slots' bits */
        for (int64_t i = 0; i < n; i++) t.y[i] = (float)yh[i], t.gx[i] = (float)gxh[i];
      float *parts[] = {t.y, t.gx, t.mean, t.rstd, t.gw, t.gb};
      int64_t lens[] = {n, n, M, M, C, C}, at = 0;
      int same = 1;
      for (int k = 0; k < 6; k++) {
        if (threads == 1) memcpy(first + at, parts[k], (size_t)lens[k] * sizeof(float));
        else same &= memcmp(first + at, parts[k], (size_t)lens[k] * sizeof(float)) == 0;
        at += lens[k];
      }
      if (!same) fprintf(stderr, "%s (M %lld, C %lld): %d threads differ from 1\n", bf16 ? "bfloat16" : "float32",
                         (long long)M, (long long)C, threads);
      CHECK(same);
    }
  ms_k_set_num_threads(before);
  free(first), free(xh), free(gh), free(yh), free(gxh);
  free_case(&t);
}

static const int64_t LENS[] = {1, 2, 3, 5, 7, 8, 9, 12, 15, 16, 17, 23, 24, 31, 32, 33, 47, 770};

static void run_all(const char *isa) {
  char what[64];
  for (size_t i = 0; i < sizeof LENS / sizeof *LENS; i++)
    for (int kind = 0; kind <= 2; kind++)
      for (int affine = 0; affine <= 1; affine++) {
        if (kind && LENS[i] < 8) continue; /* a handful of +-2^-10 steps has no std to speak of */
        snprintf(what, sizeof what, "%s float32 kind %d%s", isa, kind, affine ? " affine" : "");
        ln_case t = make_case(5, LENS[i], kind, affine);
        check_float32(&t, what);
        check_bf16(&t);
        free_case(&t);
      }
  check_threads(2500, 33); /* rows split off 16 (32768 elements a task) */
  check_threads(100, 770); /* columns split at 327 and 654 */
}

int main(void) {
  ms_test_isa_in_child("generic", run_all);
  ms_test_isa_in_child("avx2", run_all);   /* falls back where the CPU lacks it */
  ms_test_isa_in_child("avx512", run_all); /* likewise */
  return ms_test_finish();
}
