/* test_optim.c: the fused optimizer steps from C: state tensors counted as optimizer memory, a
 * hand-computed SGD/Adadelta update, float32 agreeing with float64 over the parallel and staged
 * paths, results independent of the thread count, and the errors on bad tensors. (Numerics
 * against PyTorch are in tests/lua/test_optim.lua.) */
#define _POSIX_C_SOURCE 200809L /* setenv and fork in test_isa.h */
#include <stdlib.h>

#include "kernels/kernels.h"
#include "moonshard/moonshard.h"
#include "test.h"
#include "test_isa.h"

static ms_tensor *filled(int64_t n, ms_dtype dt, double (*f)(int64_t)) {
  ms_tensor *t = ms_tensor_new_empty(1, &n, dt);
  for (int64_t i = 0; i < n; i++) ms_tensor_set_flat(t, i, f(i));
  return t;
}

static double wave(int64_t i) { return sin(0.37 * (double)i) * 2; }
static double wave2(int64_t i) { return cos(0.11 * (double)i + 1); }

static void test_state_memory(void) {
  int64_t shape[2] = {3, 5};
  ms_tensor *p = ms_tensor_new_zeros(2, shape, MS_FLOAT64);
  int64_t before = ms_memory_stats_get().by_category[MS_MEM_OPTIMIZER];
  ms_tensor *s = ms_optim_state_new(p, 0.25);
  CHECK(s && s->ndim == 2 && s->shape[0] == 3 && s->shape[1] == 5 && s->dtype == MS_FLOAT64);
  CHECK(ms_tensor_is_contiguous(s));
  CHECK(ms_tensor_get_flat(s, 14) == 0.25);
  CHECK(ms_memory_stats_get().by_category[MS_MEM_OPTIMIZER] - before == 15 * 8);
  ms_tensor_release(s);
  CHECK(ms_memory_stats_get().by_category[MS_MEM_OPTIMIZER] == before);
  ms_tensor_release(p);
}

/* Two steps of SGD with Nesterov momentum and weight decay on one element, by hand. */
static void test_sgd_by_hand(void) {
  int64_t one = 1;
  ms_tensor *p = ms_tensor_new_full(1, &one, MS_FLOAT64, 1.0);
  ms_tensor *g = ms_tensor_new_full(1, &one, MS_FLOAT64, 0.5);
  ms_tensor *buf = ms_optim_state_new(p, 0);
  ms_sgd_options o = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.2, .nesterov = true};
  CHECK(ms_optim_sgd_step(p, g, buf, true, &o) == MS_OK);
  double d = 0.5 + 0.2 * 1.0, b = d, x = 1.0 - 0.1 * (d + 0.9 * b);
  CHECK_NEAR(ms_tensor_get_flat(p, 0), x, 1e-15);
  CHECK(ms_optim_sgd_step(p, g, buf, false, &o) == MS_OK);
  d = 0.5 + 0.2 * x, b = 0.9 * b + d, x = x - 0.1 * (d + 0.9 * b);
  CHECK_NEAR(ms_tensor_get_flat(p, 0), x, 1e-15);
  CHECK_NEAR(ms_tensor_get_flat(buf, 0), b, 1e-15);
  ms_tensor_release(p), ms_tensor_release(g), ms_tensor_release(buf);
}

/* Three Adam (amsgrad) steps on n elements of dtype dt with `threads` threads; returns param. */
static ms_tensor *adam_run(int64_t n, ms_dtype dt, int threads) {
  ms_k_set_num_threads(threads);
  ms_tensor *p = filled(n, dt, wave), *g = filled(n, dt, wave2);
  ms_tensor *m = ms_optim_state_new(p, 0), *v = ms_optim_state_new(p, 0);
  ms_tensor *vmax = ms_optim_state_new(p, 0);
  ms_adam_options o = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                       .weight_decay = 0.1, .amsgrad = true, .decoupled = true};
  for (o.step = 1; o.step <= 3; o.step++) CHECK(ms_optim_adam_step(p, g, m, v, vmax, &o) == MS_OK);
  ms_tensor_release(g), ms_tensor_release(m), ms_tensor_release(v), ms_tensor_release(vmax);
  return p;
}

static void test_dtypes_and_threads(void) {
  int64_t n = 100003; /* several pool ranges and a ragged float32 staging block */
  int saved = ms_k_get_num_threads();
  ms_tensor *a = adam_run(n, MS_FLOAT64, 1), *b = adam_run(n, MS_FLOAT64, 4);
  ms_tensor *c = adam_run(n, MS_FLOAT32, 3);
  double worst_threads = 0, worst_f32 = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = ms_tensor_get_flat(a, i);
    worst_threads = fmax(worst_threads, fabs(x - ms_tensor_get_flat(b, i)));
    worst_f32 = fmax(worst_f32, fabs(x - ms_tensor_get_flat(c, i)) / fmax(fabs(x), 1e-3));
  }
  CHECK(worst_threads == 0);
  CHECK(worst_f32 < 1e-5);
  ms_tensor_release(a), ms_tensor_release(b), ms_tensor_release(c);
  ms_k_set_num_threads(saved);
}

static void test_errors(void) {
  int64_t n = 4, n5 = 5, shape[2] = {2, 2};
  ms_tensor *p = ms_tensor_new_zeros(1, &n, MS_FLOAT32);
  ms_tensor *g5 = ms_tensor_new_zeros(1, &n5, MS_FLOAT32);
  ms_tensor *g64 = ms_tensor_new_zeros(1, &n, MS_FLOAT64);
  ms_tensor *s = ms_optim_state_new(p, 0);
  ms_adadelta_options o = {.lr = 1, .rho = 0.9, .eps = 1e-6};
  CHECK(ms_optim_adadelta_step(p, g5, s, s, &o) == MS_ERR_ARG);
  CHECK_ERROR_HAS("adadelta_step: grad must have the parameter's shape (4,), got (5,)");
  CHECK(ms_optim_adadelta_step(p, g64, s, s, &o) == MS_ERR_ARG);
  CHECK_ERROR_HAS("grad must have the parameter's dtype float32 (or bfloat16 or float16), got float64");
  CHECK(ms_optim_adadelta_step(p, p, NULL, s, &o) == MS_ERR_ARG);
  CHECK_ERROR_HAS("square_avg is required");
  ms_tensor *m = ms_tensor_new_zeros(2, shape, MS_FLOAT32), *mt = ms_tensor_transpose(m, 0, 1);
  ms_rmsprop_options ro = {.lr = 0.1, .alpha = 0.9, .eps = 1e-8};
  CHECK(ms_optim_rmsprop_step(mt, mt, mt, NULL, NULL, &ro) == MS_ERR_ARG);
  CHECK_ERROR_HAS("rmsprop_step: param must be contiguous");
  ms_storage_release_data(p->storage); /* as FSDP frees an unsharded parameter */
  CHECK(ms_optim_adadelta_step(p, p, s, s, &o) != MS_OK);
  ms_tensor_release(p), ms_tensor_release(g5), ms_tensor_release(g64), ms_tensor_release(s);
  ms_tensor_release(m), ms_tensor_release(mt);
}

/* The float32 Adadelta step (vectorised where the CPU allows) is the double formula rounded
 * once per stored value, bit for bit: lengths with vector tails, maximize, weight decay, 1 and 2
 * threads; on each ISA's loop (a child process per ISA: tests/c/test_isa.h). */
static void test_adadelta_f32_exact(const char *isa) {
  (void)isa;
  const int64_t lens[] = {1, 3, 4, 7, 8, 15, 17, 33, 70001}; /* tails of 4- and 8-lane loops */
  for (int v = 0; v < 4; v++) {
    ms_k_adadelta_hp hp = {.lr = 0.7, .rho = 0.9, .eps = 1e-6, .weight_decay = v & 1 ? 0.01 : 0,
                           .maximize = v >> 1};
    for (size_t L = 0; L < sizeof lens / sizeof *lens; L++) {
      int64_t n = lens[L];
      float *p = malloc(4 * sizeof(float) * (size_t)n), *g = p + n, *sq = g + n, *acc = sq + n;
      for (int64_t i = 0; i < n; i++)
        p[i] = (float)wave(i), g[i] = (float)wave2(i), sq[i] = (float)(wave(i + 3) * wave(i + 3)),
        acc[i] = (float)(0.01 * wave2(i + 5) * wave2(i + 5));
      float *want = malloc(3 * sizeof(float) * (size_t)n);
      for (int64_t i = 0; i < n; i++) {
        double gi = hp.maximize ? -(double)g[i] : (double)g[i];
        if (hp.weight_decay != 0) gi = gi + hp.weight_decay * p[i];
        double s2 = sq[i] * hp.rho + (1 - hp.rho) * gi * gi;
        double delta = sqrt(acc[i] + hp.eps) / sqrt(s2 + hp.eps) * gi;
        double a2 = acc[i] * hp.rho + (1 - hp.rho) * delta * delta;
        want[i] = (float)(p[i] + -hp.lr * delta);
        want[n + i] = (float)s2, want[2 * n + i] = (float)a2;
      }
      ms_k_set_num_threads(1 + (int)(L & 1));
      ms_k_adadelta_step(MS_K_F32, n, p, g, sq, acc, &hp);
      CHECK(memcmp(p, want, sizeof(float) * (size_t)n) == 0);
      CHECK(memcmp(sq, want + n, sizeof(float) * (size_t)n) == 0);
      CHECK(memcmp(acc, want + 2 * n, sizeof(float) * (size_t)n) == 0);
      free(p), free(want);
    }
  }
  ms_k_set_num_threads(1);
}

/* A 16-bit grad (FSDP's keep_low_precision_grads) is widened for the update: the parameter ends
 * bit for bit where the same grad widened by hand takes it. */
static void test_low_precision_grad(void) {
  int64_t n = 1001;
  ms_dtype halves[] = {MS_BFLOAT16, MS_FLOAT16};
  for (int h = 0; h < 2; h++) {
    ms_tensor *p16 = filled(n, MS_FLOAT32, wave), *p32 = filled(n, MS_FLOAT32, wave);
    ms_tensor *g32 = filled(n, MS_FLOAT32, wave2), *g16 = ms_tensor_to_dtype(g32, halves[h]);
    ms_tensor *gw = ms_tensor_to_dtype(g16, MS_FLOAT32);
    ms_tensor *m[2] = {ms_optim_state_new(p16, 0), ms_optim_state_new(p32, 0)};
    ms_tensor *v[2] = {ms_optim_state_new(p16, 0), ms_optim_state_new(p32, 0)};
    ms_adam_options o = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1, .decoupled = true};
    for (o.step = 1; o.step <= 2; o.step++) {
      CHECK(ms_optim_adam_step(p16, g16, m[0], v[0], NULL, &o) == MS_OK);
      CHECK(ms_optim_adam_step(p32, gw, m[1], v[1], NULL, &o) == MS_OK);
    }
    int same = 1;
    for (int64_t i = 0; i < n; i++) same &= ms_tensor_get_flat(p16, i) == ms_tensor_get_flat(p32, i);
    CHECK(same);
    ms_tensor_release(p16), ms_tensor_release(p32), ms_tensor_release(g32), ms_tensor_release(g16);
    ms_tensor_release(gw);
    for (int k = 0; k < 2; k++) ms_tensor_release(m[k]), ms_tensor_release(v[k]);
  }
}

int main(void) {
  test_low_precision_grad();
  test_state_memory();
  test_sgd_by_hand();
  test_dtypes_and_threads();
  test_errors();
  ms_test_isa_in_child("generic", test_adadelta_f32_exact);
  ms_test_isa_in_child("avx2", test_adadelta_f32_exact);   /* falls back where the CPU lacks it */
  ms_test_isa_in_child("avx512", test_adadelta_f32_exact); /* likewise */
  return ms_test_finish();
}
