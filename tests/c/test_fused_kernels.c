/* test_fused_kernels.c: the CPU's fused slots (docs/fusion.md) give the bits of the calls they
 * replaced. dropout (mask drawn and applied in one pass) against philox_bernoulli then
 * masked_scale: every mask byte and every output, float32, float64 and bfloat16, at sizes around
 * the Philox block (4), the AVX2 generator's 8 blocks and the kernel's chunk (4096), at offsets,
 * on 1 and 4 threads. nll_loss against nll_rows then nll_reduce, with weights and ignored
 * positions. relu_backward against its definition. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_table.h"
#include "moonshard/runtime.h"
#include "test.h"

static const ms_k_exec cpu = {0};

/* One case: fused and two-pass outputs and masks of n elements of dt equal byte for byte. */
static void check_case(ms_k_dtype dt, int64_t n, uint64_t seed, uint64_t offset, double p) {
  size_t es = ms_k_dtype_size(dt), bytes = (size_t)n * es + 1;
  char *in = malloc(bytes), *y1 = malloc(bytes), *y2 = malloc(bytes);
  uint8_t *m1 = malloc((size_t)n + 1), *m2 = malloc((size_t)n + 1);
  for (size_t i = 0; i < bytes; i++) in[i] = (char)(i * 37 + 11); /* any bits: NaNs and infs too */
  double keep = 1 - p, scale = p == 1 ? 0 : 1 / (1 - p);
  CHECK(ms_k_cpu_table.philox_bernoulli(&cpu, seed, offset, n, keep, m1) == 0);
  CHECK(ms_k_cpu_table.masked_scale(&cpu, dt, n, in, m1, scale, y1) == 0);
  CHECK(ms_k_cpu_table.dropout(&cpu, dt, seed, offset, n, keep, in, scale, m2, y2) == 0);
  CHECK(memcmp(m1, m2, (size_t)n) == 0);
  CHECK(memcmp(y1, y2, (size_t)n * es) == 0);
  free(in), free(y1), free(y2), free(m1), free(m2);
}

static void test_same_bits(void) {
  const int64_t sizes[] = {1, 3, 4, 5, 31, 32, 33, 4095, 4096, 4097, 3 * 4096 + 7, 100003};
  const ms_k_dtype dts[] = {MS_K_F32, MS_K_F64, MS_K_BF16};
  const double ps[] = {0.25, 0.5, 0.9};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      check_case(dts[d], sizes[s], 42 + s, (uint64_t)s * 1000003u, ps[s % 3]);
}

/* The mask keeps about 1 - p of the elements and y is x * scale exactly where kept (not a test
 * of equality with itself: a fused kernel that ignored the mask or the offset fails here). */
static void test_values(void) {
  enum { N = 20000 };
  static float x[N], y[N];
  static uint8_t m[N], m0[N];
  for (int i = 0; i < N; i++) x[i] = (float)(i % 97) - 48.5f;
  CHECK(ms_k_cpu_table.dropout(&cpu, MS_K_F32, 7, 0, N, 0.75, x, 1 / 0.75, m, y) == 0);
  int kept = 0, ok = 1;
  for (int i = 0; i < N; i++) {
    kept += m[i];
    ok &= m[i] ? y[i] == x[i] * (float)(1 / 0.75) : y[i] == 0;
  }
  CHECK(ok);
  CHECK(kept > N * 0.73 && kept < N * 0.77);
  /* another offset draws another mask */
  CHECK(ms_k_cpu_table.dropout(&cpu, MS_K_F32, 7, 12345, N, 0.75, x, 1 / 0.75, m0, y) == 0);
  CHECK(memcmp(m, m0, N) != 0);
}

/* nll_loss (one call) = nll_rows + nll_reduce: the loss and the weight sum, bit for bit. */
static void test_nll_loss(void) {
  enum { N = 37, C = 11 };
  static double logp64[N * C], w64[C], nll64[N], wt64[N];
  static float logp32[N * C], w32[C], nll32[N], wt32[N];
  int64_t target[N];
  for (int i = 0; i < N * C; i++) logp64[i] = -0.1 - (double)((i * 7919) % 1000) / 97.0, logp32[i] = (float)logp64[i];
  for (int c = 0; c < C; c++) w64[c] = 0.25 + c / 7.0, w32[c] = (float)w64[c];
  for (int i = 0; i < N; i++) target[i] = i % 5 == 3 ? -100 : 1 + (i * 3) % C; /* 1-based, some ignored */
  for (int weighted = 0; weighted < 2; weighted++)
    for (int mean = 0; mean < 2; mean++) {
      ms_k_nll_args a64 = {N, C, 1, target, 1, -100, weighted ? w64 : NULL};
      ms_k_nll_args a32 = {N, C, 1, target, 1, -100, weighted ? w32 : NULL};
      double o64[2], sw64[2];
      float o32[2];
      double sw32[2];
      CHECK(ms_k_cpu_table.nll_rows(&cpu, MS_K_F64, &a64, logp64, nll64, wt64, NULL) == 0);
      CHECK(ms_k_cpu_table.nll_reduce(&cpu, MS_K_F64, N, nll64, wt64, NULL, 0, C, mean, &o64[0], &sw64[0]) == 0);
      CHECK(ms_k_cpu_table.nll_loss(&cpu, MS_K_F64, &a64, logp64, mean, &o64[1], &sw64[1]) == 0);
      CHECK(memcmp(&o64[0], &o64[1], sizeof o64[0]) == 0 && memcmp(&sw64[0], &sw64[1], sizeof sw64[0]) == 0);
      CHECK(ms_k_cpu_table.nll_rows(&cpu, MS_K_F32, &a32, logp32, nll32, wt32, NULL) == 0);
      CHECK(ms_k_cpu_table.nll_reduce(&cpu, MS_K_F32, N, nll32, wt32, NULL, 0, C, mean, &o32[0], &sw32[0]) == 0);
      CHECK(ms_k_cpu_table.nll_loss(&cpu, MS_K_F32, &a32, logp32, mean, &o32[1], &sw32[1]) == 0);
      CHECK(memcmp(&o32[0], &o32[1], sizeof o32[0]) == 0 && memcmp(&sw32[0], &sw32[1], sizeof sw32[0]) == 0);
      CHECK(o64[1] != 0 && (mean ? sw64[1] < N : 1)); /* not vacuous: terms were summed, some ignored */
    }
}

/* nll_backward's sw: the one incoming gradient divided by *sw in float64, rounded once. */
static void test_nll_backward_sw(void) {
  enum { N = 3, C = 4 };
  float gx[N * C], gx2[N * C], g = 3.0f, g_div = (float)(3.0 / 7.0);
  double sw = 7.0;
  int64_t target[N] = {1, 4, 2};
  ms_k_nll_args a = {N, C, 1, target, 1, -100, NULL};
  CHECK(ms_k_cpu_table.nll_backward(&cpu, MS_K_F32, &a, NULL, &g, 0, &sw, 1, 1, 0, gx) == 0);
  CHECK(ms_k_cpu_table.nll_backward(&cpu, MS_K_F32, &a, NULL, &g_div, 0, NULL, 1, 1, 0, gx2) == 0);
  CHECK(memcmp(gx, gx2, sizeof gx) == 0 && gx[0] == -g_div && gx[1 * C + 3] == -g_div);
}

/* relu_backward: g where y > 0, else +0 (a NaN y drops; an infinite g is kept). */
static void test_relu_backward(void) {
  float y[6] = {1, 0, -1, NAN, 2, 0.5f}, g[6] = {5, 5, 5, 5, INFINITY, -3}, gx[6];
  CHECK(ms_k_cpu_table.relu_backward(&cpu, MS_K_F32, 6, y, g, gx) == 0);
  CHECK(gx[0] == 5 && gx[1] == 0 && gx[2] == 0 && gx[3] == 0 && gx[4] == INFINITY && gx[5] == -3);
}

int main(void) {
  ms_set_num_threads(1);
  test_same_bits();
  ms_set_num_threads(4);
  test_same_bits();
  test_values();
  test_nll_loss();
  test_nll_backward_sw();
  test_relu_backward();
  return ms_test_finish();
}
