/* sgemm_bench.c: how fast is ms_k_sgemm/ms_k_dgemm on this machine? Measures the core's FP32 FMA
 * peak with a register-only loop, then GEMM GFLOP/s on square sizes with 1 and 2 threads, as a
 * share of that peak and, when libopenblas.so.0 can be loaded, next to OpenBLAS; and the bf16
 * GEMM (ms_k_gemm_bf16) at n = 1024 against twice the FP32 peak. See README.md.
 * `sgemm_bench --peak` prints only the peaks (FMA and a streaming copy) as bench/run.sh's lines. */
#define _GNU_SOURCE
#include "kernels/kernels.h"

#include <dlfcn.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- peak: independent FMA chains that never touch memory ----------------------------------- */

#define PEAK_ITERS 20000000L
/* Chains >= FMA latency x FMA ports on every current x86 core (8-10), plus two operands, fit in
 * the register file: 16 ymm for AVX2, 32 zmm for AVX-512. */
#define AVX2_CHAINS 12
#define AVX512_CHAINS 24
#define SCALAR_CHAINS 12

__attribute__((target("avx2,fma"))) static double fma_loop_avx2(void) {
  enum { PEAK_CHAINS = AVX2_CHAINS };
  __m256 acc[PEAK_CHAINS], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
#pragma GCC unroll 32
  for (int i = 0; i < PEAK_CHAINS; i++) acc[i] = _mm256_set1_ps((float)i);
  for (long it = 0; it < PEAK_ITERS; it++) {
#pragma GCC unroll 32
    for (int i = 0; i < PEAK_CHAINS; i++) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  __m256 s = _mm256_setzero_ps(); /* every loop fully unrolled: acc stays in registers */
#pragma GCC unroll 32
  for (int i = 0; i < PEAK_CHAINS; i++) s = _mm256_add_ps(s, acc[i]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) static double fma_loop_avx512(void) {
  enum { PEAK_CHAINS = AVX512_CHAINS };
  __m512 acc[PEAK_CHAINS], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
#pragma GCC unroll 32
  for (int i = 0; i < PEAK_CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < PEAK_ITERS; it++) {
#pragma GCC unroll 32
    for (int i = 0; i < PEAK_CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  __m512 s = _mm512_setzero_ps();
#pragma GCC unroll 32
  for (int i = 0; i < PEAK_CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

static double fma_loop_scalar(void) {
  enum { PEAK_CHAINS = SCALAR_CHAINS };
  float acc[PEAK_CHAINS];
  for (int i = 0; i < PEAK_CHAINS; i++) acc[i] = (float)i;
  for (long it = 0; it < PEAK_ITERS / 8; it++) {
    for (int i = 0; i < PEAK_CHAINS; i++) acc[i] = acc[i] * 0.999999f + 1e-7f;
  }
  float s = 0;
  for (int i = 0; i < PEAK_CHAINS; i++) s += acc[i];
  return s;
}

typedef struct {
  const char *isa;
  double sink;
} peak_job;

static void peak_member(void *ctx, int t, int nt) {
  (void)t, (void)nt;
  peak_job *j = ctx;
  double s = strcmp(j->isa, "avx512") == 0 ? fma_loop_avx512()
             : strcmp(j->isa, "avx2") == 0 ? fma_loop_avx2()
                                            : fma_loop_scalar();
  if (s == 42.0) j->sink = s; /* the result is "used" */
}

/* FP32 GFLOP/s of `threads` cores running the FMA loop at once, best of `reps` runs (more of them
 * find a quiet moment on a shared machine). */
static double measure_peak(const char *isa, int threads, int reps) {
  int wide = strcmp(isa, "avx512") == 0, avx2 = strcmp(isa, "avx2") == 0;
  double lanes = wide ? 16 : avx2 ? 8 : 1;
  double chains = wide ? AVX512_CHAINS : avx2 ? AVX2_CHAINS : SCALAR_CHAINS;
  double iters = wide || avx2 ? PEAK_ITERS : PEAK_ITERS / 8;
  peak_job job = {isa, 0};
  double best = 0;
  for (int rep = 0; rep < reps; rep++) {
    double t0 = now();
    ms_k_parallel_team(threads, peak_member, &job);
    double g = threads * iters * chains * lanes * 2 / (now() - t0) / 1e9;
    if (g > best) best = g;
  }
  return best;
}

/* ---- memory bandwidth: each thread memcpy's its own buffers, far larger than the caches ---------- */

#define COPY_BYTES ((size_t)64 << 20) /* per thread and buffer: several times any L3 */

typedef struct {
  char *src[2], *dst[2];
} copy_job;

static void copy_member(void *ctx, int t, int nt) {
  (void)nt;
  copy_job *j = ctx;
  memcpy(j->dst[t], j->src[t], COPY_BYTES);
}

/* GB/s of `threads` threads copying at once, counting bytes read plus bytes written (as STREAM's
 * copy does), best of 5 after a pass that faults the pages in. */
static double measure_copy(int threads) {
  copy_job job;
  for (int t = 0; t < threads; t++) {
    job.src[t] = aligned_alloc(64, COPY_BYTES), job.dst[t] = aligned_alloc(64, COPY_BYTES);
    memset(job.src[t], t + 1, COPY_BYTES), memset(job.dst[t], 0, COPY_BYTES);
  }
  double best = 0;
  for (int rep = 0; rep < 6; rep++) {
    double t0 = now();
    ms_k_parallel_team(threads, copy_member, &job);
    double g = threads * 2.0 * COPY_BYTES / (now() - t0) / 1e9;
    if (rep > 0 && g > best) best = g;
  }
  for (int t = 0; t < threads; t++) free(job.src[t]), free(job.dst[t]);
  return best;
}

/* bench/run.sh's peak part: "BENCH peak <id> key=value ..." lines, see bench/README.md. */
static int print_peaks(void) {
  const char *isa = ms_k_gemm_isa();
  for (int t = 1; t <= 2; t++)
    printf("BENCH peak fma/t%d gflops=%.1f isa=%s\n", t, measure_peak(isa, t, 8), isa);
  for (int t = 1; t <= 2; t++) printf("BENCH peak copy/t%d gbs=%.2f\n", t, measure_copy(t));
  return 0;
}

/* ---- GEMM timing ----------------------------------------------------------------------------- */

typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);
typedef void (*cblas_dgemm_fn)(int, int, int, int, int, int, double, const double *, int,
                               const double *, int, double, double *, int);
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 };

static struct {
  cblas_sgemm_fn sgemm;
  cblas_dgemm_fn dgemm;
  void (*set_threads)(int);
} ob;

static void load_openblas(void) {
  void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  ob.sgemm = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm");
  ob.dgemm = (cblas_dgemm_fn)dlsym(h, "cblas_dgemm");
  *(void **)&ob.set_threads = dlsym(h, "openblas_set_num_threads");
  if (!ob.sgemm || !ob.dgemm || !ob.set_threads) ob.sgemm = NULL;
}

typedef struct {
  int n, dp, openblas, bf16; /* bf16: a and b bfloat16, c float */
  void *a, *b, *c;
} gemm_job;

static void run_once(const gemm_job *j) {
  int n = j->n;
  if (j->bf16)
    ms_k_gemm_bf16(n, n, n, 1.0f, j->a, n, 1, j->b, n, 1, 0.0f, j->c, n, 1);
  else if (j->openblas && j->dp)
    ob.dgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, n, n, n, 1.0, j->a, n, j->b, n, 0.0,
             j->c, n);
  else if (j->openblas)
    ob.sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, n, n, n, 1.0f, j->a, n, j->b, n,
             0.0f, j->c, n);
  else if (j->dp)
    ms_k_dgemm(n, n, n, 1.0, j->a, n, 1, j->b, n, 1, 0.0, j->c, n, 1);
  else
    ms_k_sgemm(n, n, n, 1.0f, j->a, n, 1, j->b, n, 1, 0.0f, j->c, n, 1);
}

/* Best-of GFLOP/s: enough repetitions for ~0.4 s (at least 3), after one warm-up call. */
static double time_gemm(const gemm_job *j) {
  double flops = 2.0 * j->n * j->n * j->n, best = 1e30, total = 0;
  run_once(j);
  for (int rep = 0; rep < 3 || (total < 0.4 && rep < 200); rep++) {
    double t0 = now();
    run_once(j);
    double dt = now() - t0;
    total += dt;
    if (dt < best) best = dt;
  }
  return flops / best / 1e9;
}

static void *filled(size_t count, size_t es) {
  void *p = aligned_alloc(64, (count * es + 63) / 64 * 64);
  for (size_t i = 0; i < count; i++) {
    double v = (double)((i * 7919) % 1000) / 1000.0 - 0.5;
    if (es == sizeof(uint16_t)) ((uint16_t *)p)[i] = ms_k_f32_to_bf16((float)v);
    else if (es == sizeof(float)) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
  }
  return p;
}

static void bench_size(const char *name, int n, int dp, int threads, double peak) {
  size_t es = dp ? sizeof(double) : sizeof(float);
  gemm_job j = {.n = n, .dp = dp, .a = filled((size_t)n * n, es), .b = filled((size_t)n * n, es),
                .c = filled((size_t)n * n, es)};
  ms_k_set_num_threads(threads);
  double ours = time_gemm(&j);
  printf("%s n=%d threads=%d ours %.1f GFLOP/s %.1f%% of peak", name, n, threads, ours,
         100.0 * ours / peak);
  if (ob.sgemm) {
    ob.set_threads(threads);
    j.openblas = 1;
    double theirs = time_gemm(&j);
    printf(" | openblas %.1f GFLOP/s | ours/openblas %.2f", theirs, ours / theirs);
    usleep(200000); /* let OpenBLAS's spinning threads go to sleep before we measure again */
  }
  printf("\n");
  fflush(stdout);
  free(j.a), free(j.b), free(j.c);
}

/* vdpbf16ps does two multiply-adds per float lane at the FMA's rate: its peak is twice FP32's. */
static void bench_bf16(int n, int threads, double peak) {
  if (!ms_k_gemm_bf16_available()) {
    printf("bf16gemm n=%d threads=%d skipped: no AVX-512 BF16 (gemm isa %s)\n", n, threads,
           ms_k_gemm_isa());
    return;
  }
  gemm_job j = {.n = n, .bf16 = 1, .a = filled((size_t)n * n, sizeof(uint16_t)),
                .b = filled((size_t)n * n, sizeof(uint16_t)),
                .c = filled((size_t)n * n, sizeof(float))};
  ms_k_set_num_threads(threads);
  double ours = time_gemm(&j);
  printf("bf16gemm n=%d threads=%d ours %.1f GFLOP/s %.1f%% of bf16 peak\n", n, threads, ours,
         100.0 * ours / (2 * peak));
  fflush(stdout);
  free(j.a), free(j.b), free(j.c);
}

int main(int argc, char **argv) {
  int sizes[16] = {256, 512, 1024, 1536, 2048}, nsizes = 5;
  if (argc == 2 && strcmp(argv[1], "--peak") == 0) return print_peaks();
  if (argc > 1) { /* sgemm_bench [n ...]: only these sizes */
    nsizes = 0;
    for (int i = 1; i < argc && nsizes < 16; i++) sizes[nsizes++] = atoi(argv[i]);
  }
  const char *isa = ms_k_gemm_isa();
  load_openblas();
  printf("gemm isa %s, %d threads by default, openblas %s\n", isa, ms_k_default_num_threads(),
         ob.sgemm ? "loaded" : "not found (libopenblas.so.0)");
  double peak[3] = {0};
  for (int t = 1; t <= 2; t++) {
    peak[t] = measure_peak(isa, t, 3);
    printf("peak fp32 fma isa=%s threads=%d %.1f GFLOP/s\n", isa, t, peak[t]);
  }
  for (int s = 0; s < nsizes; s++)
    for (int t = 1; t <= 2; t++) bench_size("sgemm", sizes[s], 0, t, peak[t]);
  for (int t = 1; t <= 2; t++) bench_size("dgemm", 1024, 1, t, peak[t] / 2);
  for (int t = 1; t <= 2; t++) bench_bf16(1024, t, peak[t]);
  return 0;
}
