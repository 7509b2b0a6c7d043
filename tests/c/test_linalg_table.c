/* test_linalg_table.c: the CPU table's linalg slots (kernels/cpu/gemm_slot.c, the conv2d bodies
 * of kernels/cpu/conv.c) do what the engine's CPU branch did before them: float32 bit for bit
 * the packed GEMM's, bfloat16 with a float32 C the bf16 GEMM's (with a bfloat16 C, those sums rounded
 * once), integers exact and wrapping on
 * strided (transposed) operands, conv2d the algorithm choice's; a pairing no CPU kernel serves
 * is refused with a nonzero return, never computed wrongly. */
#include <stdlib.h>

#include "kernels/kernel_table.h"
#include "test.h"

static const ms_k_exec cpu = {0};

static void test_f32_same_as_sgemm(void) {
  enum { M = 37, N = 29, K = 41 };
  float a[K * M], b[K * N], c1[M * N], c2[M * N];
  for (int i = 0; i < K * M; i++) a[i] = (float)ms_test_uniform();
  for (int i = 0; i < K * N; i++) b[i] = (float)ms_test_uniform();
  for (int i = 0; i < M * N; i++) c1[i] = c2[i] = (float)ms_test_uniform();
  /* a is stored K x M and read transposed (strides 1, M) */
  ms_k_sgemm(M, N, K, 0.5f, a, 1, M, b, N, 1, 2.0f, c1, N, 1);
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_F32, MS_K_F32, M, N, K, 0.5, a, 1, M, b, N, 1, 2.0, c2, N, 1, NULL) == 0);
  CHECK(memcmp(c1, c2, sizeof c1) == 0);
}

static void test_bf16_into_f32(void) {
  enum { M = 9, N = 17, K = 33 };
  uint16_t a[M * K], b[K * N];
  float c1[M * N], c2[M * N];
  for (int i = 0; i < M * K; i++) a[i] = ms_k_f32_to_bf16((float)ms_test_uniform());
  for (int i = 0; i < K * N; i++) b[i] = ms_k_f32_to_bf16((float)ms_test_uniform());
  ms_k_gemm_bf16(M, N, K, 1.0f, a, K, 1, b, N, 1, 0.0f, c1, N, 1);
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_BF16, MS_K_F32, M, N, K, 1.0, a, K, 1, b, N, 1, 0.0, c2, N, 1, NULL) == 0);
  CHECK(memcmp(c1, c2, sizeof c1) == 0);
}

/* A bfloat16 C: the float32 sums of ms_k_gemm_bf16, each rounded once (ms_k_f32_to_bf16). */
static void test_bf16_into_bf16(void) {
  enum { M = 9, N = 17, K = 33 };
  uint16_t a[M * K], b[K * N], c2[M * N];
  float c1[M * N];
  for (int i = 0; i < M * K; i++) a[i] = ms_k_f32_to_bf16((float)ms_test_uniform());
  for (int i = 0; i < K * N; i++) b[i] = ms_k_f32_to_bf16((float)ms_test_uniform());
  ms_k_gemm_bf16(M, N, K, 1.0f, a, K, 1, b, N, 1, 0.0f, c1, N, 1);
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_BF16, MS_K_BF16, M, N, K, 1.0, a, K, 1, b, N, 1, 0.0, c2, N, 1, NULL) == 0);
  int same = 1;
  for (int i = 0; i < M * N; i++) same &= c2[i] == ms_k_f32_to_bf16(c1[i]);
  CHECK(same);
}

/* int64 with a transposed a, alpha 2, beta 3, and products past 2^63 that must wrap. */
static void test_int64_exact_strided(void) {
  enum { M = 3, N = 4, K = 5 };
  int64_t a[K * M], b[K * N], c[M * N], want[M * N];
  for (int i = 0; i < K * M; i++) a[i] = (int64_t)(i * 7919 % 23) - 11 + (i == 4 ? (INT64_C(1) << 40) : 0);
  for (int i = 0; i < K * N; i++) b[i] = (int64_t)(i * 104729 % 19) - 9 + (i == 6 ? (INT64_C(1) << 30) : 0);
  for (int i = 0; i < M * N; i++) c[i] = i - 5;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      uint64_t acc = 0;
      for (int k = 0; k < K; k++) acc += (uint64_t)a[k * M + i] * (uint64_t)b[k * N + j];
      want[i * N + j] = (int64_t)(2 * acc + 3 * (uint64_t)c[i * N + j]);
    }
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_I64, MS_K_I64, M, N, K, 2, a, 1, M, b, N, 1, 3, c, N, 1, NULL) == 0);
  CHECK(memcmp(c, want, sizeof c) == 0);
}

/* int32: each element read and written in its own width (a column-major C). */
static void test_int32_column_major_c(void) {
  int32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {-1, -1, -1, -1};
  /* a @ b = {{19, 22}, {43, 50}}, C stored column-major; beta 0 ignores C's -1s */
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_I32, MS_K_I32, 2, 2, 2, 1, a, 2, 1, b, 2, 1, 0, c, 1, 2, NULL) == 0);
  CHECK(c[0] == 19 && c[1] == 43 && c[2] == 22 && c[3] == 50);
}

static void test_refuses_what_no_cpu_kernel_serves(void) {
  uint16_t a[1] = {0}, b[1] = {0}, c[1] = {0};
  float f[1] = {0};
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_F16, MS_K_F16, 1, 1, 1, 1, a, 1, 1, b, 1, 1, 0, c, 1, 1, NULL) != 0);
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_BF16, MS_K_F16, 1, 1, 1, 1, a, 1, 1, b, 1, 1, 0, c, 1, 1, NULL) != 0);
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_F32, MS_K_F64, 1, 1, 1, 1, f, 1, 1, f, 1, 1, 0, c, 1, 1, NULL) != 0);
}

static void test_conv2d_same_as_kernel(void) {
  ms_k_conv2d_geom g = {.n = 2, .c = 3, .h = 7, .w = 6, .o = 4, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                        .ph = 1, .pw = 1, .dh = 1, .dw = 1, .groups = 1, .oh = 7, .ow = 6};
  enum { NX = 2 * 3 * 7 * 6, NW = 4 * 3 * 3 * 3, NY = 2 * 4 * 7 * 6 };
  float x[NX], w[NW], b[4], y1[NY], y2[NY], gx1[NX], gx2[NX], gw1[NW], gw2[NW], gb1[4], gb2[4];
  for (int i = 0; i < NX; i++) x[i] = (float)ms_test_uniform();
  for (int i = 0; i < NW; i++) w[i] = (float)ms_test_uniform();
  for (int i = 0; i < 4; i++) b[i] = (float)ms_test_uniform();
  CHECK(ms_k_conv2d_forward(MS_K_F32, &g, x, w, b, y1) == 0);
  CHECK(ms_k_cpu_table.conv2d_forward(&cpu, MS_K_F32, &g, x, w, b, y2) == 0);
  CHECK(memcmp(y1, y2, sizeof y1) == 0);
  CHECK(ms_k_conv2d_backward(MS_K_F32, &g, x, w, y1, gx1, gw1, gb1) == 0);
  CHECK(ms_k_cpu_table.conv2d_backward(&cpu, MS_K_F32, &g, x, w, y1, gx2, gw2, gb2) == 0);
  CHECK(memcmp(gx1, gx2, sizeof gx1) == 0 && memcmp(gw1, gw2, sizeof gw1) == 0 && memcmp(gb1, gb2, sizeof gb1) == 0);
}

int main(void) {
  test_f32_same_as_sgemm();
  test_bf16_into_f32();
  test_bf16_into_bf16();
  test_int64_exact_strided();
  test_int32_column_major_c();
  test_refuses_what_no_cpu_kernel_serves();
  test_conv2d_same_as_kernel();
  return ms_test_finish();
}
