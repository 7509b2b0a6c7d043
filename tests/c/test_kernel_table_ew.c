/* test_kernel_table_ew.c: the CPU table's elementwise and reduce slots (kernels/kernel_table.h)
 * honour what their rows promise, called the way the engine calls every device: a broadcast
 * number as a NULL operand with its value in an ms_k_scalar (the CUDA engine sends those), and
 * the rows' rules for empty rows, int64 results and var/std/norm. */
#include <math.h>
#include <string.h>

#include "kernels/kernel_table.h"
#include "test.h"

static const ms_k_exec cpu = {0};

/* A 1-D geometry of n elements over nops contiguous operands of element size es. */
static ms_k_geom line(int nops, int64_t n, void *const *data, const size_t *es) {
  ms_k_geom g = {.nops = nops, .ndim = 1, .shape = {n}};
  for (int k = 0; k < nops; k++) g.data[k] = data[k], g.elsize[k] = es[k], g.strides[k][0] = 1;
  return g;
}

/* A number operand (data NULL) gives what the same value as a stride-0 operand gives, in each
 * compute dtype; int64 beyond 2^53 shows that it is not read through a double. */
static void test_binary_number_operand(void) {
  int64_t big = (1LL << 53) + 1, xi[5] = {1, 2, 3, 4, 5}, oi[5], ri[5];
  ms_k_scalar sbig = {(double)big, big}, unused = {0, 0};
  ms_k_geom g = line(3, 5, (void *[]){oi, xi, NULL}, (size_t[]){8, 8, 8});
  CHECK(ms_k_cpu_table.binary(&cpu, &g, MS_K_ADD, MS_K_I64, &unused, &sbig) == 0);
  ms_k_geom h = line(3, 5, (void *[]){ri, xi, &big}, (size_t[]){8, 8, 8});
  h.strides[2][0] = 0;
  CHECK(ms_k_cpu_table.binary(&cpu, &h, MS_K_ADD, MS_K_I64, NULL, NULL) == 0);
  CHECK(memcmp(oi, ri, sizeof oi) == 0 && oi[4] == big + 5);

  /* the number first, in float32 (rounded once to float, as CUDA's scalar_as does) */
  float xf[3] = {1, 2, 3}, of[3];
  ms_k_scalar third = {1.0 / 3, 0};
  g = line(3, 3, (void *[]){of, NULL, xf}, (size_t[]){4, 4, 4});
  CHECK(ms_k_cpu_table.binary(&cpu, &g, MS_K_SUB, MS_K_F32, &third, &unused) == 0);
  CHECK(of[0] == (float)(1.0 / 3) - 1.0f && of[2] == (float)(1.0 / 3) - 3.0f);

  /* a comparison writes bool */
  double xd[3] = {1, 2, 3};
  uint8_t ob[3];
  ms_k_scalar two = {2, 2};
  g = line(3, 3, (void *[]){ob, xd, NULL}, (size_t[]){1, 8, 8});
  CHECK(ms_k_cpu_table.binary(&cpu, &g, MS_K_GE, MS_K_F64, &unused, &two) == 0);
  CHECK(ob[0] == 0 && ob[1] == 1 && ob[2] == 1);
}

static void test_where_number_operands(void) {
  uint8_t cond[4] = {1, 0, 1, 0};
  int64_t a[4] = {10, 20, 30, 40}, out[4], big = (1LL << 60) + 3;
  ms_k_scalar sb = {(double)big, big}, unused = {0, 0};
  ms_k_geom g = line(4, 4, (void *[]){out, cond, a, NULL}, (size_t[]){8, 1, 8, 8});
  CHECK(ms_k_cpu_table.where(&cpu, &g, MS_K_I64, &unused, &sb) == 0);
  CHECK(out[0] == 10 && out[1] == big && out[2] == 30 && out[3] == big);
  double o2[4];
  ms_k_scalar sa = {-1.5, -1}, sd = {2.5, 2};
  g = line(4, 4, (void *[]){o2, cond, NULL, NULL}, (size_t[]){8, 1, 8, 8});
  CHECK(ms_k_cpu_table.where(&cpu, &g, MS_K_F64, &sa, &sd) == 0);
  CHECK(o2[0] == -1.5 && o2[1] == 2.5 && o2[2] == -1.5 && o2[3] == 2.5);
}

/* rows rows of n contiguous elements. */
static ms_k_rows rows_of(int64_t rows, int64_t n) {
  return (ms_k_rows){.ndim = 1, .shape = {rows}, .strides = {n}, .rows = rows, .n = n, .stride = 1};
}

static void test_reduce_rows(void) {
  /* int64 sums stay int64 (a double would lose the +1), written as out_dt */
  int64_t src[4] = {1LL << 53, 1, 7, -2}, sum[2];
  ms_k_rows g = rows_of(2, 2);
  CHECK(ms_k_cpu_table.reduce_rows(&cpu, &g, MS_K_RSUM, MS_K_I64, src, 0, sum, MS_K_I64, NULL) == 0);
  CHECK(sum[0] == (1LL << 53) + 1 && sum[1] == 5);
  /* argmax: positions; max with indices */
  double d[6] = {1, 5, 5, -1, NAN, 2}, v[2];
  int64_t at[2], idx[2];
  g = rows_of(2, 3);
  CHECK(ms_k_cpu_table.reduce_rows(&cpu, &g, MS_K_RARGMAX, MS_K_F64, d, 0, at, MS_K_I64, NULL) == 0);
  CHECK(at[0] == 1 && at[1] == 1);
  CHECK(ms_k_cpu_table.reduce_rows(&cpu, &g, MS_K_RMAX, MS_K_F64, d, 0, v, MS_K_F64, idx) == 0);
  CHECK(v[0] == 5 && isnan(v[1]) && idx[0] == 1 && idx[1] == 1);
  /* mean divides by n, into a narrower out dtype */
  float m[2];
  CHECK(ms_k_cpu_table.reduce_rows(&cpu, &g, MS_K_RSUM, MS_K_F64, (double[]){1, 2, 4, 0, 0, 1}, 1, m, MS_K_F32, NULL) == 0);
  CHECK(m[0] == (float)(7.0 / 3) && m[1] == (float)(1.0 / 3));
  /* empty rows: sum 0, prod 1, mean NaN */
  double e[3];
  g = rows_of(3, 0);
  CHECK(ms_k_cpu_table.reduce_rows(&cpu, &g, MS_K_RSUM, MS_K_F64, d, 0, e, MS_K_F64, NULL) == 0);
  CHECK(e[0] == 0 && e[2] == 0);
  CHECK(ms_k_cpu_table.reduce_rows(&cpu, &g, MS_K_RPROD, MS_K_F64, d, 0, e, MS_K_F64, NULL) == 0);
  CHECK(e[0] == 1 && e[2] == 1);
  int64_t ep[3];
  CHECK(ms_k_cpu_table.reduce_rows(&cpu, &g, MS_K_RPROD, MS_K_I64, src, 0, ep, MS_K_I64, NULL) == 0);
  CHECK(ep[0] == 1 && ep[2] == 1);
  CHECK(ms_k_cpu_table.reduce_rows(&cpu, &g, MS_K_RSUM, MS_K_F64, d, 1, e, MS_K_F64, NULL) == 0);
  CHECK(isnan(e[0]) && isnan(e[2]));
}

static void test_reduce_stat_rows(void) {
  double x[4] = {1, 2, 3, 6}, out[1];
  ms_k_rows g = rows_of(1, 4);
  ms_k_stat var = {MS_K_RMOMENTS, 0, 1, 0}, std0 = {MS_K_RMOMENTS, 0, 0, 1}, too_few = {MS_K_RMOMENTS, 0, 4, 0};
  CHECK(ms_k_cpu_table.reduce_stat_rows(&cpu, &g, &var, MS_K_F64, x, out, MS_K_F64) == 0);
  CHECK_NEAR(out[0], 14.0 / 3, 1e-12);
  CHECK(ms_k_cpu_table.reduce_stat_rows(&cpu, &g, &std0, MS_K_F64, x, out, MS_K_F64) == 0);
  CHECK_NEAR(out[0], sqrt(3.5), 1e-12);
  CHECK(ms_k_cpu_table.reduce_stat_rows(&cpu, &g, &too_few, MS_K_F64, x, out, MS_K_F64) == 0);
  CHECK(isnan(out[0]));
  ms_k_stat l2 = {MS_K_RPOWSUM, 2, 0, 0}, l3 = {MS_K_RPOWSUM, 3, 0, 0}, linf = {MS_K_RPOWSUM, INFINITY, 0, 0};
  CHECK(ms_k_cpu_table.reduce_stat_rows(&cpu, &g, &l2, MS_K_F64, x, out, MS_K_F64) == 0);
  CHECK_NEAR(out[0], sqrt(50.0), 1e-12);
  CHECK(ms_k_cpu_table.reduce_stat_rows(&cpu, &g, &l3, MS_K_F64, x, out, MS_K_F64) == 0);
  CHECK_NEAR(out[0], pow(252.0, 1.0 / 3), 1e-12);
  CHECK(ms_k_cpu_table.reduce_stat_rows(&cpu, &g, &linf, MS_K_F64, x, out, MS_K_F64) == 0);
  CHECK(out[0] == 6);
}

int main(void) {
  test_binary_number_operand();
  test_where_number_operands();
  test_reduce_rows();
  test_reduce_stat_rows();
  return ms_test_finish();
}
