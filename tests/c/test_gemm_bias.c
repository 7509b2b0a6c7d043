/* test_gemm_bias.c: the gemm slot's bias (ms_k_gemm_bias: Linear's bias added as the GEMM stores
 * C) gives the bits of the path it replaced, C filled with the bias and then a beta-1 GEMM: float32,
 * float64 and bfloat16 (float32 C), on every micro-kernel this CPU runs (a forked child per
 * MS_GEMM_ISA), with partial tiles, several K blocks, the one-row-block (jit) and the shared-panel
 * drivers, a transposed A, a column-major C (the bias then runs along the kernels' rows) and K = 0.
 * A bias with beta != 0, or on integers, is refused. */
#define _POSIX_C_SOURCE 200809L /* setenv, fork (test_isa.h) */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_table.h"
#include "test.h"
#include "test_isa.h"

static const ms_k_exec cpu = {0};

typedef struct shape {
  int64_t M, N, K;
  int a_transposed, c_col_major;
} shape;

static const shape SHAPES[] = {
    {5, 7, 3, 0, 0},     {5, 7, 3, 1, 1},      {64, 128, 300, 0, 0}, {64, 128, 800, 1, 0},
    {300, 70, 500, 0, 0}, {300, 70, 500, 0, 1}, {17, 33, 0, 0, 0},    {1, 1, 1, 0, 0},
};

/* One shape in dtype dt: the slot with a bias equals the fill-then-beta-1 reference byte for byte. */
static void check_shape(ms_k_dtype dt, const shape *s) {
  size_t es = ms_k_dtype_size(dt), ces = dt == MS_K_F64 ? 8 : 4;
  int64_t M = s->M, N = s->N, K = s->K;
  char *a = malloc((size_t)(M * K) * es + 8), *b = malloc((size_t)(K * N) * es + 8), *bias = malloc((size_t)N * es);
  char *c1 = malloc((size_t)(M * N) * ces), *c2 = malloc((size_t)(M * N) * ces);
  for (int64_t i = 0; i < M * K; i++) ms_k_fill(1, a + i * es, dt, 1, ms_test_uniform() - 0.5);
  for (int64_t i = 0; i < K * N; i++) ms_k_fill(1, b + i * es, dt, 1, ms_test_uniform() - 0.5);
  for (int64_t j = 0; j < N; j++) ms_k_fill(1, bias + j * es, dt, 1, 4 * ms_test_uniform() - 2);
  memset(c2, 0xff, (size_t)(M * N) * ces); /* NaNs: the slot must not read C */
  int64_t rsa = s->a_transposed ? 1 : K, csa = s->a_transposed ? M : 1;
  int64_t rsc = s->c_col_major ? 1 : N, csc = s->c_col_major ? M : 1;
  ms_k_dtype cdt = dt == MS_K_F64 ? MS_K_F64 : MS_K_F32;
  /* the reference: each row of C starts as the bias, then C += 0.5 A B */
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) ms_k_cast(1, c1 + (i * rsc + j * csc) * ces, cdt, 1, bias + j * es, dt, 1);
  if (dt == MS_K_F32)
    ms_k_sgemm(M, N, K, 0.5f, (float *)a, rsa, csa, (float *)b, N, 1, 1.0f, (float *)c1, rsc, csc);
  else if (dt == MS_K_F64)
    ms_k_dgemm(M, N, K, 0.5, (double *)a, rsa, csa, (double *)b, N, 1, 1.0, (double *)c1, rsc, csc);
  else
    ms_k_gemm_bf16(M, N, K, 0.5f, (uint16_t *)a, rsa, csa, (uint16_t *)b, N, 1, 1.0f, (float *)c1, rsc, csc);
  CHECK(ms_k_cpu_table.gemm(&cpu, dt, cdt, M, N, K, 0.5, a, rsa, csa, b, N, 1, 0.0, c2, rsc, csc, bias) == 0);
  CHECK(memcmp(c1, c2, (size_t)(M * N) * ces) == 0);
  if (memcmp(c1, c2, (size_t)(M * N) * ces) != 0)
    printf("  dtype %d, %lld x %lld x %lld, a_t %d, c_col %d differ\n", (int)dt, (long long)M, (long long)N,
           (long long)K, s->a_transposed, s->c_col_major);
  free(a), free(b), free(bias), free(c1), free(c2);
}

static void run_all(const char *isa) {
  (void)isa;
  const ms_k_dtype dts[] = {MS_K_F32, MS_K_F64, MS_K_BF16};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t k = 0; k < sizeof SHAPES / sizeof SHAPES[0]; k++) check_shape(dts[d], &SHAPES[k]);
}

/* The bias is the column's, not a constant: y[i][j] = bias[j] for a zero A. */
static void test_bias_per_column(void) {
  float a[2 * 3] = {0}, b[3 * 4] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, bias[4] = {1, -2, 3.5f, 0}, c[2 * 4];
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_F32, MS_K_F32, 2, 4, 3, 1.0, a, 3, 1, b, 4, 1, 0.0, c, 4, 1, bias) == 0);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) CHECK(c[i * 4 + j] == bias[j]);
}

static void test_refused(void) {
  float f[4] = {1, 2, 3, 4}, c[4];
  int64_t i64[4] = {1, 2, 3, 4}, ci[4];
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_F32, MS_K_F32, 2, 2, 2, 1.0, f, 2, 1, f, 2, 1, 1.0, c, 2, 1, f) != 0);
  CHECK(ms_k_cpu_table.gemm(&cpu, MS_K_I64, MS_K_I64, 2, 2, 2, 1.0, i64, 2, 1, i64, 2, 1, 0.0, ci, 2, 1, i64) != 0);
}

int main(void) {
  /* before any GEMM of this process: the ISA is chosen once, and the children inherit it */
  ms_test_isa_in_child("generic", run_all);
#if (defined(__x86_64__) || defined(__i386__)) && !defined(MS_NO_X86_KERNELS)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ms_test_isa_in_child("avx2", run_all);
  else printf("avx2: not supported by this CPU, skipped\n");
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    ms_test_isa_in_child("avx512", run_all);
  else printf("avx512: not supported by this CPU, skipped\n");
#endif
  test_bias_per_column();
  test_refused();
  return ms_test_finish();
}
