/* test_optim_vec.c: the vector float32 Adam/AdamW and SGD steps (kernels/cpu/optim_*_body.h) give
 * the staged path's bits: on random arrays of every length 1..1000 and a few longer ones, random
 * hyperparameters over every flag (amsgrad, maximize, decoupled weight decay; momentum, nesterov,
 * dampening, init_buffer), gradients with NaN and infinities. The staged path's result is the
 * float64 step on widened copies, narrowed: run_f32 stages float32 through the same loop. Each
 * ISA's loop is called directly, and the dispatched step runs once per MS_GEMM_ISA (generic:
 * the staged path itself) with 1 and 2 threads. */
#define _POSIX_C_SOURCE 200809L /* setenv and fork in test_isa.h */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/optim_avx2.h"
#include "kernels/kernels.h"
#include "test.h"
#include "test_isa.h"

enum { NARR = 5 }; /* param, grad, up to three state arrays */
static const int64_t LONG_LENS[] = {8195, 70003}; /* 8k+3; several pool ranges with 2 threads */
enum { SHORT_MAX = 1000, NLONG = sizeof LONG_LENS / sizeof *LONG_LENS };

static uint64_t rng = 0x9E3779B97F4A7C15u;
static double uniform(double lo, double hi) { /* xorshift64* */
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  return lo + (hi - lo) * (double)((rng * 0x2545F4914F6CDD1Du) >> 11) / 9007199254740992.0;
}
static double log_uniform(double lo, double hi) { return exp(uniform(log(lo), log(hi))); }

/* A gradient: 1% each NaN, +inf, -inf */
static float grad_value(void) {
  double u = uniform(0, 1);
  return u < 0.01 ? NAN : u < 0.02 ? INFINITY : u < 0.03 ? -INFINITY : (float)uniform(-1, 1);
}

/* One optimizer's step on NARR arrays (NULL where unused), so the checks below serve both. */
typedef void (*apply_fn)(ms_k_dtype dt, int64_t n, void *const *a, const void *hp);
/* An ISA's vector loop called directly; returns the count it updated. */
typedef int64_t (*direct_fn)(int64_t n, float *const *a, const void *hp);

typedef struct {
  int64_t n;
  int used[NARR];
  float *in[NARR], *got[NARR], *want[NARR];
} arrays;

/* in: random values (lo[k], hi[k]); got and want: copies of in. */
static void arrays_init(arrays *t, int64_t n, const int *used, const double *lo, const double *hi) {
  t->n = n;
  for (int k = 0; k < NARR; k++) {
    t->used[k] = used[k];
    t->in[k] = t->got[k] = t->want[k] = NULL;
    if (!used[k]) continue;
    t->in[k] = malloc(3 * sizeof(float) * (size_t)n);
    t->got[k] = t->in[k] + n, t->want[k] = t->in[k] + 2 * n;
    for (int64_t i = 0; i < n; i++) t->in[k][i] = k == 1 ? grad_value() : (float)uniform(lo[k], hi[k]);
    memcpy(t->got[k], t->in[k], sizeof(float) * (size_t)n);
    memcpy(t->want[k], t->in[k], sizeof(float) * (size_t)n);
  }
}

static void arrays_free(arrays *t) {
  for (int k = 0; k < NARR; k++) free(t->in[k]);
}

/* want[k][0, upto) := the staged path's result: the float64 step on widened copies, narrowed. */
static void staged_reference(arrays *t, int64_t upto, apply_fn apply, const void *hp) {
  double *wide[NARR] = {0};
  void *a[NARR] = {0};
  for (int k = 0; k < NARR; k++) {
    if (!t->used[k]) continue;
    a[k] = wide[k] = malloc(sizeof(double) * (size_t)(upto + 1));
    for (int64_t i = 0; i < upto; i++) wide[k][i] = t->in[k][i];
  }
  apply(MS_K_F64, upto, a, hp);
  for (int k = 0; k < NARR; k++) {
    if (!t->used[k]) continue;
    for (int64_t i = 0; i < upto; i++) t->want[k][i] = (float)wide[k][i];
    free(wide[k]);
  }
}

/* got == want bit for bit in every array (the grad too: it is never written), except that a NaN
 * matches any NaN: which sign and payload a NaN carries is the compiler's choice in the staged
 * path (GCC folds -lr * -g into lr * g, and may flip a NaN's sign doing so). */
static int arrays_same(const arrays *t) {
  for (int k = 0; k < NARR; k++) {
    if (!t->used[k]) continue;
    for (int64_t i = 0; i < t->n; i++) {
      float a = t->got[k][i], b = t->want[k][i];
      if (isnan(a) ? !isnan(b) : memcmp(&a, &b, sizeof a) != 0) return 0;
    }
  }
  return 1;
}

static int64_t length_of(int c) { return c < SHORT_MAX ? c + 1 : LONG_LENS[c - SHORT_MAX]; }

/* ---- the optimizers: random hyperparameters, their arrays, and their steps ---- */

/* case c's Adam hyperparameters: c's low bits walk amsgrad x maximize x decoupled */
static ms_k_adam_hp adam_hp(int c) {
  return (ms_k_adam_hp){.lr = log_uniform(1e-4, 1), .beta1 = uniform(0.5, 0.99),
                        .beta2 = uniform(0.9, 0.9999), .eps = log_uniform(1e-10, 1e-3),
                        .weight_decay = c % 3 == 0 ? 0 : uniform(0, 0.2),
                        .step = (double)(int)uniform(1, 1000), .amsgrad = c & 1,
                        .maximize = c >> 1 & 1, .decoupled = c >> 2 & 1};
}

static void adam_arrays(arrays *t, int64_t n, const ms_k_adam_hp *hp) {
  /* exp_avg_sq and max_exp_avg_sq overlap, so the max goes either way */
  const int used[NARR] = {1, 1, 1, 1, hp->amsgrad};
  const double lo[NARR] = {-2, -1, -0.1, 0, 0}, hi[NARR] = {2, 1, 0.1, 0.01, 0.02};
  arrays_init(t, n, used, lo, hi);
}

static void adam_apply(ms_k_dtype dt, int64_t n, void *const *a, const void *hp) {
  ms_k_adam_step(dt, n, a[0], a[1], a[2], a[3], a[4], hp);
}

/* The per-step scalars as ms_k_adam_step computes them. */
static int64_t adam_direct(int64_t n, float *const *a, const void *hpv, int avx512) {
  const ms_k_adam_hp *hp = hpv;
  double step_size = hp->lr / (1 - pow(hp->beta1, hp->step)), bc2 = sqrt(1 - pow(hp->beta2, hp->step));
  return (avx512 ? ms_k_adam_f32_avx512 : ms_k_adam_f32_avx2)(hp, step_size, bc2, n, a[0], a[1], a[2],
                                                                a[3], a[4]);
}
static int64_t adam_avx2(int64_t n, float *const *a, const void *hp) { return adam_direct(n, a, hp, 0); }
static int64_t adam_avx512(int64_t n, float *const *a, const void *hp) { return adam_direct(n, a, hp, 1); }

/* case c's SGD hyperparameters: c's low bits walk momentum x nesterov x maximize x init_buffer */
static ms_k_sgd_hp sgd_hp(int c) {
  return (ms_k_sgd_hp){.lr = log_uniform(1e-4, 1), .momentum = c & 1 ? uniform(0.1, 0.99) : 0,
                       .dampening = c % 3 == 0 ? 0 : uniform(0, 0.5),
                       .weight_decay = c % 5 == 0 ? 0 : uniform(0, 0.2), .nesterov = c >> 1 & 1,
                       .maximize = c >> 2 & 1, .init_buffer = c >> 3 & 1};
}

static void sgd_arrays(arrays *t, int64_t n, const ms_k_sgd_hp *hp) {
  const int used[NARR] = {1, 1, hp->momentum != 0, 0, 0};
  const double lo[NARR] = {-2, -1, -0.5, 0, 0}, hi[NARR] = {2, 1, 0.5, 0, 0};
  arrays_init(t, n, used, lo, hi);
}

static void sgd_apply(ms_k_dtype dt, int64_t n, void *const *a, const void *hp) {
  ms_k_sgd_step(dt, n, a[0], a[1], a[2], hp);
}

static int64_t sgd_avx2(int64_t n, float *const *a, const void *hp) {
  return ms_k_sgd_f32_avx2(hp, n, a[0], a[1], a[2]);
}
static int64_t sgd_avx512(int64_t n, float *const *a, const void *hp) {
  return ms_k_sgd_f32_avx512(hp, n, a[0], a[1], a[2]);
}

/* ---- the checks ---- */

/* An ISA's loop updates n rounded down to its lanes, as the staged path would, and leaves the
 * rest as it was. Returns the number of cases that differed. */
static int check_direct(arrays *t, const void *hp, apply_fn apply, direct_fn direct, int64_t lanes) {
  int64_t done = direct(t->n, t->got, hp);
  staged_reference(t, done, apply, hp);
  return done != t->n / lanes * lanes || !arrays_same(t);
}

/* The dispatched float32 step (the vector loop and the staged tail, over the pool) against the
 * staged reference. */
static int check_dispatch(arrays *t, const void *hp, apply_fn apply, int threads) {
  void *a[NARR];
  for (int k = 0; k < NARR; k++) a[k] = t->got[k];
  ms_k_set_num_threads(threads);
  apply(MS_K_F32, t->n, a, hp);
  staged_reference(t, t->n, apply, hp);
  return !arrays_same(t);
}

/* Every case of both optimizers through one check; -1 as lanes: the dispatched step. */
static void run_cases(direct_fn adam, direct_fn sgd, int64_t lanes) {
  int bad_adam = 0, bad_sgd = 0;
  for (int c = 0; c < SHORT_MAX + NLONG; c++) {
    int64_t n = length_of(c);
    arrays t;
    ms_k_adam_hp ah = adam_hp(c);
    adam_arrays(&t, n, &ah);
    bad_adam += lanes < 0 ? check_dispatch(&t, &ah, adam_apply, 1 + (c & 1))
                          : check_direct(&t, &ah, adam_apply, adam, lanes);
    arrays_free(&t);
    ms_k_sgd_hp sh = sgd_hp(c);
    sgd_arrays(&t, n, &sh);
    bad_sgd += lanes < 0 ? check_dispatch(&t, &sh, sgd_apply, 1 + (c >> 1 & 1))
                         : check_direct(&t, &sh, sgd_apply, sgd, lanes);
    arrays_free(&t);
  }
  if (bad_adam || bad_sgd)
    fprintf(stderr, "lanes %lld: %d Adam and %d SGD cases differ\n", (long long)lanes, bad_adam, bad_sgd);
  CHECK(bad_adam == 0);
  CHECK(bad_sgd == 0);
  ms_k_set_num_threads(1);
}

static void dispatched(const char *isa) {
  (void)isa;
  run_cases(NULL, NULL, -1);
}

/* A NaN in max_exp_avg_sq stays (torch.maximum propagates it from either side), and one in
 * exp_avg_sq wins: the vector max agrees with the staged one. */
static void test_amsgrad_nan(direct_fn adam, int64_t lanes) {
  ms_k_adam_hp hp = adam_hp(1);
  arrays t;
  adam_arrays(&t, 64, &hp);
  for (int64_t i = 0; i < 64; i += 3) t.in[4][i] = t.got[4][i] = NAN;
  for (int64_t i = 1; i < 64; i += 5) t.in[3][i] = t.got[3][i] = NAN;
  CHECK(check_direct(&t, &hp, adam_apply, adam, lanes) == 0);
  CHECK(isnan(t.got[4][0]) && isnan(t.got[4][1]) && isnan(t.got[0][0]));
  arrays_free(&t);
}

int main(void) {
  /* the children first: the ISA is detected once per process, and a child inherits the parent's */
  ms_test_isa_in_child("generic", dispatched);
  ms_test_isa_in_child("avx2", dispatched);   /* falls back where the CPU lacks it */
  ms_test_isa_in_child("avx512", dispatched); /* likewise */
  if (ms_k_cpu_avx2()) {
    run_cases(adam_avx2, sgd_avx2, 4);
    test_amsgrad_nan(adam_avx2, 4);
  }
  if (ms_k_cpu_avx512()) {
    run_cases(adam_avx512, sgd_avx512, 8);
    test_amsgrad_nan(adam_avx512, 8);
  }
  return ms_test_finish();
}
