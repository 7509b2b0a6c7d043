/* test_gemm_bf16.c: ms_k_gemm_bf16 against ms_k_sgemm on the same bfloat16 values widened to
 * float (the products are exact in float, so only the order of the sums may differ), over odd
 * and even K, M and N off the tiles, shapes that cross every cache block, every transpose and
 * strided operand (through strides), row-, column-major and strided C, alpha/beta (beta 0 over
 * NaN), 1 and 2 threads. A and B lie in buffers padded with NaN, so a packer that reads past K
 * (an odd K's pad) or past a tile's edge turns the result into NaN. The AVX-512 BF16 kernel runs
 * in one forked child (skipped where the CPU lacks it), the portable one in another. The bfloat16-C
 * form (ms_k_gemm_bf16_rounded) must give the float form's bits, rounded. */
#define _GNU_SOURCE
#include "kernels/kernels.h"
#include "test.h"
#include "test_isa.h"

#include <stdint.h>
#include <stdlib.h>

#define SENTINEL 12345.0f
#define BF16_NAN 0x7FC0

/* A rows x cols bf16 matrix at h[i * rs + j * cs], and the same values widened in f. Layout 0
 * row-major, 1 column-major (3 elements of padding per line, one line more), 2 both strides
 * non-unit; everything outside the matrix is NaN. */
typedef struct {
  uint16_t *h;
  float *f;
  int64_t len, rs, cs;
} bview;

static bview make_bview(int64_t rows, int64_t cols, int layout) {
  bview v;
  if (layout == 0) v.rs = cols + 3, v.cs = 1;
  else if (layout == 1) v.rs = 1, v.cs = rows + 3;
  else v.rs = 2 * cols + 3, v.cs = 2;
  v.len = layout == 1 ? (cols + 1) * v.cs : (rows + 1) * v.rs;
  v.h = malloc(v.len * sizeof *v.h);
  v.f = malloc(v.len * sizeof *v.f);
  for (int64_t x = 0; x < v.len; x++) v.h[x] = BF16_NAN;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) v.h[i * v.rs + j * v.cs] = ms_k_f32_to_bf16((float)ms_test_uniform());
  for (int64_t x = 0; x < v.len; x++) v.f[x] = ms_k_bf16_to_f32(v.h[x]);
  return v;
}

/* C: float, SENTINEL outside the matrix so that stray writes show; the same layouts. */
typedef struct {
  float *ours, *ref;
  int64_t len, rs, cs;
} cview;

static cview make_cview(int64_t rows, int64_t cols, int layout, int nan_inside) {
  cview v;
  if (layout == 0) v.rs = cols + 3, v.cs = 1;
  else if (layout == 1) v.rs = 1, v.cs = rows + 3;
  else v.rs = 2 * cols + 3, v.cs = 2;
  v.len = layout == 1 ? (cols + 1) * v.cs : (rows + 1) * v.rs;
  v.ours = malloc(v.len * sizeof(float));
  v.ref = malloc(v.len * sizeof(float));
  for (int64_t x = 0; x < v.len; x++) v.ours[x] = SENTINEL;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      v.ours[i * v.rs + j * v.cs] = nan_inside ? NAN : (float)ms_test_uniform();
  for (int64_t x = 0; x < v.len; x++) v.ref[x] = v.ours[x];
  return v;
}

typedef struct {
  int64_t M, N, K;
  int la, lb, lc;
  float alpha, beta;
} gemm_case;

/* |got - ref| within the two sums' rounding: each is at most (K + 2) roundings of the sum of
 * |terms| away from the exact value. */
static int close_enough(const gemm_case *g, const bview *A, const bview *B, float c0, int64_t i,
                        int64_t j, float got, float ref) {
  double mag = g->beta == 0.0f ? 0.0 : fabs((double)g->beta * c0);
  for (int64_t k = 0; k < g->K; k++)
    mag += fabs((double)g->alpha * A->f[i * A->rs + k * A->cs] * B->f[k * B->rs + j * B->cs]);
  double bound = (2.0 * g->K + 8.0) * 0x1p-24 * mag + 1e-30;
  if (fabs((double)got - ref) <= bound) return 1;
  fprintf(stderr, "  C[%lld,%lld] = %.9g, sgemm %.9g (bound %g)\n", (long long)i, (long long)j,
          got, ref, bound);
  return 0;
}

static int run_case(const gemm_case *g) {
  int64_t M = g->M, N = g->N, K = g->K;
  bview A = make_bview(M, K, g->la), B = make_bview(K, N, g->lb);
  cview C = make_cview(M, N, g->lc, g->beta == 0.0f);
  float *c0 = malloc(C.len * sizeof(float));
  for (int64_t x = 0; x < C.len; x++) c0[x] = C.ours[x];
  ms_k_gemm_bf16(M, N, K, g->alpha, A.h, A.rs, A.cs, B.h, B.rs, B.cs, g->beta, C.ours, C.rs, C.cs);
  ms_k_sgemm(M, N, K, g->alpha, A.f, A.rs, A.cs, B.f, B.rs, B.cs, g->beta, C.ref, C.rs, C.cs);
  int ok = 1;
  for (int64_t i = 0; i < M && ok; i++)
    for (int64_t j = 0; j < N && ok; j++) {
      int64_t x = i * C.rs + j * C.cs;
      ok = close_enough(g, &A, &B, c0[x], i, j, C.ours[x], C.ref[x]);
    }
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) C.ours[i * C.rs + j * C.cs] = SENTINEL;
  for (int64_t x = 0; x < C.len && ok; x++)
    if (C.ours[x] != SENTINEL) {
      fprintf(stderr, "  padding at %lld overwritten\n", (long long)x);
      ok = 0;
    }
  if (!ok)
    fprintf(stderr, "  failed: M=%lld N=%lld K=%lld A layout %d B layout %d C layout %d alpha=%g "
                    "beta=%g threads=%d isa=%s\n", (long long)M, (long long)N, (long long)K, g->la,
            g->lb, g->lc, g->alpha, g->beta, ms_k_get_num_threads(), ms_k_gemm_isa());
  free(A.h), free(A.f), free(B.h), free(B.f), free(C.ours), free(C.ref), free(c0);
  return ok;
}

static const int64_t shapes[][3] = {
    {1, 1, 1},    {1, 1, 2},    {1, 1, 7},    {2, 3, 4},     {7, 7, 7},    {12, 32, 2},
    {12, 32, 16}, {13, 33, 17}, {11, 31, 15}, {33, 1, 33},   {1, 33, 241}, {17, 33, 65},
    {100, 3, 2},  {3, 100, 3},  {0, 5, 5},    {5, 0, 5},     {5, 5, 0},    {25, 65, 200},
    /* The tile's MC edge (240) and one past; the 8-pair transposes' tails (k 16 and 17 pairs) */
    {240, 33, 9}, {241, 33, 9}, {24, 64, 33}, {24, 64, 34},
    /* Several KC blocks with an odd last one, on one row block (B packed per micro-panel) and on
     * several (the team's shared B panel); N past NC. */
    {64, 40, 1101}, {64, 128, 777}, {300, 200, 513}, {7, 4200, 21},
};
static const float alphabeta[][2] = {{1.0f, 0.0f}, {0.5f, -1.5f}, {-2.0f, 1.0f}, {0.0f, 0.5f}};

static void test_shapes(void) {
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t work = shapes[s][0] * shapes[s][1] * shapes[s][2];
    for (int la = 0; la < 3; la++)
      for (int lb = 0; lb < 3; lb++)
        for (int lc = 0; lc < 3; lc++)
          for (int ab = 0; ab < 4; ab++) {
            /* Large shapes: one alpha/beta pair per layout combination, rotating through all. */
            if (work > 100000 && ab != (la * 9 + lb * 3 + lc) % 4) continue;
            gemm_case g = {shapes[s][0], shapes[s][1], shapes[s][2], la, lb, lc,
                           alphabeta[ab][0], alphabeta[ab][1]};
            CHECK(run_case(&g));
          }
  }
}

/* alpha == 0 and K == 0 follow BLAS: A and B are not read, so NaNs in them do not reach C. */
static void test_alpha_zero(void) {
  uint16_t A[6] = {BF16_NAN, BF16_NAN, BF16_NAN, BF16_NAN, BF16_NAN, BF16_NAN}, B[6];
  for (int i = 0; i < 6; i++) B[i] = BF16_NAN;
  float C[4] = {1, 2, 3, 4};
  ms_k_gemm_bf16(2, 2, 3, 0.0f, A, 3, 1, B, 2, 1, 2.0f, C, 2, 1);
  CHECK(C[0] == 2 && C[1] == 4 && C[2] == 6 && C[3] == 8);
  float Cz[4] = {NAN, NAN, NAN, NAN};
  ms_k_gemm_bf16(2, 2, 0, 1.0f, A, 1, 1, B, 1, 1, 0.0f, Cz, 2, 1);
  CHECK(Cz[0] == 0 && Cz[1] == 0 && Cz[2] == 0 && Cz[3] == 0);
}

/* ms_k_gemm_bf16_rounded: a bfloat16 C (row-, column-major or strided, SENTINEL16 around it)
 * holds the bits of ms_k_gemm_bf16 (ms_k_gemm_bias with a bias) into a row-major float C, each
 * rounded by ms_k_f32_to_bf16; beta 0 never reads C (NaN there). */
#define SENTINEL16 0x1234
static int run_rounded(int64_t M, int64_t N, int64_t K, int lc, float alpha, float beta, int with_bias) {
  bview A = make_bview(M, K, 0), B = make_bview(K, N, 1), C = make_bview(M, N, lc);
  uint16_t *bias = malloc((size_t)(N + 1) * sizeof *bias);
  float *ref = malloc((size_t)(M * N + 1) * sizeof *ref);
  for (int64_t j = 0; j < N; j++) bias[j] = ms_k_f32_to_bf16((float)(4 * ms_test_uniform() - 2));
  for (int64_t x = 0; x < C.len; x++) C.h[x] = SENTINEL16;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      float v = beta == 0.0f ? NAN : (float)ms_test_uniform();
      C.h[i * C.rs + j * C.cs] = ms_k_f32_to_bf16(v);
      ref[i * N + j] = ms_k_bf16_to_f32(C.h[i * C.rs + j * C.cs]);
    }
  if (with_bias)
    ms_k_gemm_bias(MS_K_BF16, M, N, K, alpha, A.h, A.rs, A.cs, B.h, B.rs, B.cs, ref, N, 1, bias);
  else
    ms_k_gemm_bf16(M, N, K, alpha, A.h, A.rs, A.cs, B.h, B.rs, B.cs, beta, ref, N, 1);
  int ok = ms_k_gemm_bf16_rounded(M, N, K, alpha, A.h, A.rs, A.cs, B.h, B.rs, B.cs, beta, C.h, C.rs, C.cs,
                                  with_bias ? bias : NULL);
  for (int64_t i = 0; i < M && ok; i++)
    for (int64_t j = 0; j < N && ok; j++) {
      uint16_t got = C.h[i * C.rs + j * C.cs], want = ms_k_f32_to_bf16(ref[i * N + j]);
      if (got != want) {
        fprintf(stderr, "  C[%lld,%lld] = 0x%04x, want 0x%04x\n", (long long)i, (long long)j, got, want);
        ok = 0;
      }
      C.h[i * C.rs + j * C.cs] = SENTINEL16;
    }
  for (int64_t x = 0; x < C.len && ok; x++)
    if (C.h[x] != SENTINEL16) {
      fprintf(stderr, "  padding at %lld overwritten\n", (long long)x);
      ok = 0;
    }
  if (!ok)
    fprintf(stderr, "  rounded failed: M=%lld N=%lld K=%lld C layout %d alpha=%g beta=%g bias %d threads=%d\n",
            (long long)M, (long long)N, (long long)K, lc, alpha, beta, with_bias, ms_k_get_num_threads());
  free(A.h), free(A.f), free(B.h), free(B.f), free(C.h), free(C.f), free(bias), free(ref);
  return ok;
}

static void test_rounded(void) {
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int lc = 0; lc < 3; lc++)
      for (int ab = 0; ab < 4; ab++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
          if (with_bias && alphabeta[ab][1] != 0.0f) continue; /* a bias comes with beta 0 */
          CHECK(run_rounded(shapes[s][0], shapes[s][1], shapes[s][2], lc, alphabeta[ab][0], alphabeta[ab][1],
                            with_bias));
        }
}

static void run_all(const char *isa) {
  CHECK(strcmp(ms_k_gemm_isa(), isa) == 0);
  CHECK(ms_k_gemm_bf16_available() == (strcmp(isa, "avx512") == 0));
  test_alpha_zero();
  for (int t = 1; t <= 2; t++) {
    ms_k_set_num_threads(t);
    test_shapes();
    test_rounded();
  }
}

int main(void) {
  ms_test_isa_in_child("generic", run_all); /* the portable pair kernel and packers */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(MS_NO_X86_KERNELS) /* the x86 bodies are built */
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bf16"))
    ms_test_isa_in_child("avx512", run_all);
  else printf("avx512_bf16: not supported by this CPU, skipped\n");
#endif
  return ms_test_finish();
}
