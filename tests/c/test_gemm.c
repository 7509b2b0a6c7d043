/* test_gemm.c: ms_k_sgemm and ms_k_dgemm against a naive double-precision loop, over shapes from
 * 0 and 1 up to ones that cross every cache block, all transpose combinations (through strides),
 * row-, column-major and fully strided C, alpha/beta (beta 0 over NaN), 1, 2 and 3 threads, and
 * every micro-kernel this CPU can run: each ISA is tested in a forked child with MS_GEMM_ISA
 * set. */
#define _GNU_SOURCE
#include "kernels/kernels.h"
#include "test.h"
#include "test_isa.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define SENTINEL 12345.0

/* A dense matrix view inside a padded buffer; (i, j) lives at buf[i * rs + j * cs]. */
typedef struct {
  double *buf;
  int64_t len, rs, cs;
} view;

/* rows x cols; layout 0 row-major, 1 column-major (both with 3 elements of padding per line),
 * 2 both strides non-unit. Padding holds SENTINEL so stray writes show. */
static view make_view(int64_t rows, int64_t cols, int layout) {
  view v;
  if (layout == 0) { v.rs = cols + 3; v.cs = 1; }
  else if (layout == 1) { v.rs = 1; v.cs = rows + 3; }
  else { v.rs = 2 * cols + 3; v.cs = 2; }
  v.len = layout == 1 ? (cols ? cols : 1) * v.cs : (rows ? rows : 1) * v.rs;
  v.buf = malloc(v.len * sizeof(double));
  for (int64_t x = 0; x < v.len; x++) v.buf[x] = SENTINEL;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) v.buf[i * v.rs + j * v.cs] = ms_test_uniform();
  return v;
}

typedef struct {
  int64_t M, N, K;
  int ta, tb, layout_c;
  double alpha, beta;
} gemm_case;

/* Runs one case in float (dp = 0) or double (dp = 1); returns 1 when every element of C is within
 * a rounding bound of the reference and no padding was touched. */
static int run_case(const gemm_case *g, int dp) {
  int64_t M = g->M, N = g->N, K = g->K;
  view A = make_view(M, K, g->ta), B = make_view(K, N, g->tb), C = make_view(M, N, g->layout_c);
  size_t cells = M > 0 && N > 0 ? (size_t)(M * N) : 1;
  double *ref = malloc(cells * sizeof(double)), *bound = malloc(cells * sizeof(double));
  if (g->beta == 0.0)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) C.buf[i * C.rs + j * C.cs] = NAN;
  float *fa = malloc(A.len * sizeof(float)), *fb = malloc(B.len * sizeof(float));
  float *fc = malloc(C.len * sizeof(float));
  /* The float run's reference uses the float-rounded inputs, so only the product is compared. */
  for (int64_t x = 0; x < A.len; x++) if (!dp) A.buf[x] = fa[x] = (float)A.buf[x];
  for (int64_t x = 0; x < B.len; x++) if (!dp) B.buf[x] = fb[x] = (float)B.buf[x];
  for (int64_t x = 0; x < C.len; x++) if (!dp) C.buf[x] = fc[x] = (float)C.buf[x];
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0, sa = 0;
      for (int64_t k = 0; k < K; k++) {
        double p = A.buf[i * A.rs + k * A.cs] * B.buf[k * B.rs + j * B.cs];
        s += p;
        sa += fabs(p);
      }
      double c = C.buf[i * C.rs + j * C.cs];
      ref[i * N + j] = g->alpha * s + (g->beta == 0.0 ? 0.0 : g->beta * c);
      double eps = dp ? 1.2e-16 : 6.0e-8;
      double mag = fabs(g->alpha) * sa + (g->beta == 0.0 ? 0.0 : fabs(g->beta * c));
      bound[i * N + j] = (2.0 * K + 4.0) * eps * mag + 1e-300;
    }
  if (dp)
    ms_k_dgemm(M, N, K, g->alpha, A.buf, A.rs, A.cs, B.buf, B.rs, B.cs, g->beta, C.buf, C.rs, C.cs);
  else
    ms_k_sgemm(M, N, K, (float)g->alpha, fa, A.rs, A.cs, fb, B.rs, B.cs, (float)g->beta, fc, C.rs,
               C.cs);
  int ok = 1;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      int64_t x = i * C.rs + j * C.cs;
      double got = dp ? C.buf[x] : fc[x];
      if (ok && !(fabs(got - ref[i * N + j]) <= bound[i * N + j])) {
        fprintf(stderr, "  C[%lld,%lld] = %.9g, expected %.9g (bound %g)\n", (long long)i,
                (long long)j, got, ref[i * N + j], bound[i * N + j]);
        ok = 0;
      }
      C.buf[x] = fc[x] = (float)SENTINEL; /* so that the scan below sees only the padding */
    }
  for (int64_t x = 0; x < C.len; x++)
    if ((dp ? C.buf[x] : fc[x]) != SENTINEL) {
      fprintf(stderr, "  padding at %lld overwritten\n", (long long)x);
      ok = 0;
      break;
    }
  if (!ok)
    fprintf(stderr, "  failed: %s M=%lld N=%lld K=%lld ta=%d tb=%d C layout %d alpha=%g beta=%g "
                    "threads=%d isa=%s\n", dp ? "dgemm" : "sgemm", (long long)M, (long long)N,
            (long long)K, g->ta, g->tb, g->layout_c, g->alpha, g->beta, ms_k_get_num_threads(),
            ms_k_gemm_isa());
  free(A.buf), free(B.buf), free(C.buf), free(ref), free(bound), free(fa), free(fb), free(fc);
  return ok;
}

static const int64_t shapes[][3] = {
    {1, 1, 1},    {1, 1, 7},     {2, 3, 4},     {17, 33, 65},  {6, 16, 256}, {7, 17, 257},
    {13, 1, 300}, {1, 50, 300},  {64, 64, 64},  {100, 3, 2},   {3, 100, 2},  {129, 67, 300},
    {0, 5, 5},    {5, 0, 5},     {5, 5, 0},     {0, 0, 0},     {7, 4200, 20}, {300, 200, 500},
    /* One row block (M <= MC: B packed per micro-panel) across several KC blocks, with column
     * and k tails that the 8 x 8 transposing packers finish in scalar code; MC's edge. */
    {64, 40, 1100}, {9, 23, 17},  {144, 17, 65}, {145, 17, 65}, {1, 7, 9},
    /* AVX-512's MC edge (240), a 12-row and a 32-column tail */
    {241, 33, 9},   {25, 65, 200},
};
static const double alphabeta[][2] = {{1.0, 0.0}, {0.5, -1.5}, {-2.0, 1.0}, {0.0, 0.5}};

static void test_shapes(int dp) {
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t work = shapes[s][0] * shapes[s][1] * shapes[s][2];
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (int lc = 0; lc < 3; lc++)
          for (int ab = 0; ab < 4; ab++) {
            /* Large shapes: one alpha/beta pair per layout combination, rotating through all. */
            if (work > 100000 && ab != (ta * 6 + tb * 3 + lc) % 4) continue;
            gemm_case g = {shapes[s][0], shapes[s][1], shapes[s][2], ta, tb, lc,
                           alphabeta[ab][0], alphabeta[ab][1]};
            CHECK(run_case(&g, dp));
          }
  }
}

/* alpha == 0 and K == 0 follow BLAS: A and B are not read, so NaNs in them do not reach C. */
static void test_alpha_zero(void) {
  float A[6] = {NAN, NAN, NAN, NAN, NAN, NAN}, B[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
  float C[4] = {1, 2, 3, 4};
  ms_k_sgemm(2, 2, 3, 0.0f, A, 3, 1, B, 2, 1, 2.0f, C, 2, 1);
  CHECK(C[0] == 2 && C[1] == 4 && C[2] == 6 && C[3] == 8);
  double Cd[4] = {NAN, NAN, NAN, NAN}, Ad[1] = {1}, Bd[1] = {1};
  ms_k_dgemm(2, 2, 0, 1.0, Ad, 1, 1, Bd, 1, 1, 0.0, Cd, 2, 1);
  CHECK(Cd[0] == 0 && Cd[1] == 0 && Cd[2] == 0 && Cd[3] == 0);
}

/* Two user threads multiplying at once: one gets the pool, the other runs alone; both correct. */
static void *concurrent_worker(void *arg) {
  int *ok = arg;
  for (int r = 0; r < 4; r++) {
    gemm_case g = {150, 140, 130, r & 1, (r >> 1) & 1, r % 3, 1.0, 0.0};
    *ok &= run_case(&g, r & 1);
  }
  return NULL;
}

static void test_concurrent_callers(void) {
  pthread_t th[2];
  int ok[2] = {1, 1};
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, concurrent_worker, &ok[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  CHECK(ok[0] && ok[1]);
}

static void run_all(const char *isa) {
  CHECK(strcmp(ms_k_gemm_isa(), isa) == 0);
  test_alpha_zero();
  int threads[] = {1, 2, 3};
  for (int t = 0; t < 3; t++) {
    ms_k_set_num_threads(threads[t]);
    test_shapes(0);
    test_shapes(1);
  }
  ms_k_set_num_threads(2);
  test_concurrent_callers();
}

int main(void) {
  ms_test_isa_in_child("generic", run_all);
#if (defined(__x86_64__) || defined(__i386__)) && !defined(MS_NO_X86_KERNELS) /* the x86 bodies are built */
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    ms_test_isa_in_child("avx2", run_all);
  else printf("avx2: not supported by this CPU, skipped\n");
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    ms_test_isa_in_child("avx512", run_all);
  else printf("avx512: not supported by this CPU, skipped\n");
#endif
  return ms_test_finish();
}
