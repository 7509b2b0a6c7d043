/* test_pool_kernels.c: the 2x2 stride-2 float32 max pooling rows at kernel level, once per ISA
 * (the AVX2 rows, the portable loop). Forward: values and indices equal the
 * general float64 loop's for rows of 1 to 40 windows (the vector steps and every masked or
 * scalar tail), odd widths and heights, ties (the first in scan order wins), NaNs (they win)
 * and -0. Backward, where the Lua tests cannot reach: indices that are not in their window (not
 * made by the forward) must still be scattered like the general loop, -0 gradients land as +0
 * like the scatter's 0 + g, and input rows and columns no window covers come out zero. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "test.h"
#include "test_isa.h"

enum { H = 7, W = 21, OH = 3, OW = 10 }; /* odd H and W: a row and a column outside all windows */

/* gx from scratch: zeros, then each gradient added at its index. */
static void scatter(const float *go, const int64_t *at, float *gx) {
  for (int i = 0; i < H * W; i++) gx[i] = 0.0f;
  for (int o = 0; o < OH * OW; o++) gx[at[o]] += go[o];
}

static int run(const int64_t *at, const float *go) {
  ms_k_pool2d_geom g = {1, H, W, OH, OW, 2, 2, 2, 2, 0, 0, 1, 1};
  float got[H * W], want[H * W];
  for (int i = 0; i < H * W; i++) got[i] = 99.0f; /* every cell must be written */
  ms_k_max_pool2d_backward(MS_K_F32, &g, go, at, got);
  scatter(go, at, want);
  return memcmp(got, want, sizeof got) == 0;
}

static void backward_cases(void) {
  int64_t at[OH * OW];
  float go[OH * OW];
  for (int oh = 0; oh < OH; oh++)
    for (int ow = 0; ow < OW; ow++) {
      int o = oh * OW + ow, tap = (o * 7) % 4;
      at[o] = (2 * oh + tap / 2) * W + 2 * ow + tap % 2;
      go[o] = (float)(o - 11) * 0.25f;
    }
  go[3] = -0.0f;
  CHECK(run(at, go)); /* the forward's kind of indices */
  at[5] = 0;           /* outside its window (the vector part of row 0) */
  CHECK(run(at, go));
  at[5] = at[4];       /* two outputs on one cell: the gradients add */
  CHECK(run(at, go));
  at[OW - 1] = H * W - 1; /* the scalar tail of row 0, pointing at the uncovered corner */
  CHECK(run(at, go));
}

/* One plane of h x w through the float32 rows and through the float64 loop: the same values
 * (a maximum is one of its inputs) and the same indices, nothing written past the outputs. */
static void forward_case(int64_t h, int64_t w, uint32_t seed) {
  int64_t oh = h / 2, ow = w / 2, n = h * w, no = oh * ow;
  ms_k_pool2d_geom g = {1, h, w, oh, ow, 2, 2, 2, 2, 0, 0, 1, 1};
  float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)(no + 1));
  double *xd = malloc(sizeof(double) * (size_t)n), *yd = malloc(sizeof(double) * (size_t)no);
  int64_t *ix = malloc(sizeof(int64_t) * (size_t)(no + 1)), *ixd = malloc(sizeof(int64_t) * (size_t)no);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)(seed >> 24) / 16.0f - 8.0f; /* few distinct values: ties in most windows */
  }
  if (n > 5) x[5] = NAN, x[n - 1] = -0.0f, x[n / 2] = INFINITY;
  for (int64_t i = 0; i < n; i++) xd[i] = x[i];
  y[no] = 12345.0f, ix[no] = 12345;
  CHECK(ms_k_max_pool2d_forward(MS_K_F32, &g, x, y, ix) == 0);
  CHECK(ms_k_max_pool2d_forward(MS_K_F64, &g, xd, yd, ixd) == 0);
  int64_t bad = 0;
  for (int64_t o = 0; o < no; o++)
    if (ix[o] != ixd[o] || !(y[o] == (float)yd[o] || (isnan(y[o]) && isnan(yd[o])))) bad++;
  CHECK(bad == 0 && y[no] == 12345.0f && ix[no] == 12345);
  if (bad) fprintf(stderr, "  forward %ldx%ld: %ld windows differ\n", (long)h, (long)w, (long)bad);
  /* values only (no indices: evaluation) */
  CHECK(ms_k_max_pool2d_forward(MS_K_F32, &g, x, y, NULL) == 0);
  for (int64_t o = 0; o < no; o++) bad += !(y[o] == (float)yd[o] || (isnan(y[o]) && isnan(yd[o])));
  CHECK(bad == 0);
  free(x), free(y), free(xd), free(yd), free(ix), free(ixd);
}

static void run_isa(const char *isa) {
  (void)isa;
  for (int64_t w = 2; w <= 81; w++) forward_case(5, w, (uint32_t)w);
  forward_case(24, 24, 7); /* the seed's conv2 planes */
  backward_cases();
}

int main(void) {
  ms_test_isa_in_child("avx2", run_isa);
  ms_test_isa_in_child("generic", run_isa);
  return ms_test_finish();
}
