/* nn_ops.c: the kernels of the NN layers: softmax and log_softmax (fused max/sum/write per row),
 * GELU and SiLU, dropout's masked scale, the negative log likelihood fused with the softmax
 * gradient (cross entropy), embedding gathers, layer and batch normalization. Work is split over
 * rows, positions or channels on the thread pool; each split writes disjoint outputs, so results
 * do not depend on the thread count. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/layer_norm_fast.h"
#include "kernels/kernel_table.h"

/* Every kernel's arguments in one shape, so one range function per kernel fits the pool. */
typedef struct nn_job {
  int64_t N, C, inner;      /* rows (or batch), row length (or channels), trailing size */
  const void *a, *b;        /* main input; second input (gradient, or bias) */
  const void *weight;       /* per-class or per-feature weight (may be NULL) */
  const void *stat0, *stat1; /* saved mean and inverse std */
  void *out, *out2, *out3;
  const uint8_t *mask;
  const int64_t *target;
  int64_t base, ignore_index, gs;
  double s0, s1, s2;
  int flag, backward;
  ms_k_dtype dt;        /* 16-bit paths: the tensors' dtype (bfloat16 or float16) */
  atomic_int *failed;   /* 16-bit paths: set when a work buffer could not be allocated */
} nn_job;

/* Layer norm's jobs handed to the vector rows (layer_norm_fast.h): false where none may run. The
 * forward job holds the bias in b and the statistics' outputs in out2 and out3; the backward's
 * holds the gradient in b, the statistics in stat0 and stat1, gw and gb in out2 and out3. */
static bool ln_fast_rows(const nn_job *j, int64_t begin, int64_t end, bool bf16) {
  ms_k_ln_args a = {.C = j->C, .bf16 = bf16, .x = j->a, .w = j->weight, .b = j->b, .eps = j->s0,
                    .y = j->out, .mean_out = j->out2, .rstd_out = j->out3};
  return ms_k_layer_norm_rows_fast(&a, begin, end);
}

static ms_k_ln_args ln_backward_args(const nn_job *j, bool bf16) {
  ms_k_ln_args a = {.M = j->N, .C = j->C, .bf16 = bf16, .x = j->a, .g = j->b, .w = j->weight,
                    .mean = j->stat0, .rstd = j->stat1, .gx = j->out, .gw = j->out2, .gb = j->out3};
  return a;
}

static bool ln_fast_backward_rows(const nn_job *j, int64_t begin, int64_t end, bool bf16) {
  ms_k_ln_args a = ln_backward_args(j, bf16);
  return ms_k_layer_norm_backward_rows_fast(&a, begin, end);
}

static bool ln_fast_param_cols(const nn_job *j, int64_t begin, int64_t end, bool bf16) {
  ms_k_ln_args a = ln_backward_args(j, bf16);
  return ms_k_layer_norm_param_cols_fast(&a, begin, end);
}

#define T float
#define UINT_T uint32_t
#define SFX(name) name##_f32
#define EXP expf
#define LOG logf
#define ERF erff
#define TANH tanhf
#define FAST_ACTIVATION ms_k_activation_f32_fast /* activation_f32.h: GELU(tanh), SiLU */
#define FAST_ACTIVATION_BACKWARD ms_k_activation_backward_f32_fast
#define FAST_LAYER_NORM(fn, j, begin, end) fn(j, begin, end, false) /* ln_fast_* above */
#include "kernels/cpu/nn_ops_body.h"
#undef FAST_ACTIVATION
#undef FAST_ACTIVATION_BACKWARD
#undef FAST_LAYER_NORM
#undef T
#undef UINT_T
#undef SFX
#undef EXP
#undef LOG
#undef ERF
#undef TANH

#define T double
#define UINT_T uint64_t
#define SFX(name) name##_f64
#define EXP exp
#define LOG log
#define ERF erf
#define TANH tanh
#define FAST_ACTIVATION(act, x, y, n) false /* float64 keeps libm's accuracy */
#define FAST_ACTIVATION_BACKWARD(act, x, g, gx, n) false
#define FAST_LAYER_NORM(fn, j, begin, end) false /* float64 keeps the scalar rows */
#include "kernels/cpu/nn_ops_body.h"
#undef FAST_ACTIVATION
#undef FAST_ACTIVATION_BACKWARD
#undef FAST_LAYER_NORM
#undef T
#undef UINT_T
#undef SFX
#undef EXP
#undef LOG
#undef ERF
#undef TANH

/* About this many elements per task: enough to amortise a dispatch. */
#define NN_GRAIN_ELEMS 32768

static int64_t grain_for(int64_t per_item) {
  return per_item >= NN_GRAIN_ELEMS ? 1 : NN_GRAIN_ELEMS / (per_item > 0 ? per_item : 1);
}

typedef void (*nn_range_fn)(const nn_job *j, int64_t begin, int64_t end);
typedef struct nn_task {
  const nn_job *job;
  nn_range_fn fn;
} nn_task;

static void run_range(void *ctx, int64_t begin, int64_t end) {
  const nn_task *t = ctx;
  t->fn(t->job, begin, end);
}

/* Runs the float or double body over [0, n) in parallel. */
static void run(ms_k_dtype dt, nn_range_fn f32, nn_range_fn f64, int64_t n, int64_t per_item,
                const nn_job *j) {
  nn_task t = {j, dt == MS_K_F64 ? f64 : f32};
  ms_k_parallel_for(n, grain_for(per_item), run_range, &t);
}

#include "kernels/cpu/nn_ops_half.h"

int ms_k_softmax(ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner, const void *x, void *y,
                 int log) {
  atomic_int failed = 0;
  nn_job j = {.C = C, .inner = inner, .a = x, .out = y, .flag = log, .dt = dt, .failed = &failed};
  if (is_half(dt)) run_half(softmax_rows_half, outer * inner, C, &j);
  else run(dt, softmax_rows_f32, softmax_rows_f64, outer * inner, C, &j);
  return atomic_load(&failed) ? MS_K_ERR_NO_MEMORY : 0;
}

int ms_k_softmax_backward(ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner, const void *y,
                          const void *g, void *gx, int log) {
  atomic_int failed = 0;
  nn_job j = {.C = C, .inner = inner, .a = y, .b = g, .out = gx, .flag = log, .backward = 1, .dt = dt,
              .failed = &failed};
  if (is_half(dt)) run_half(softmax_rows_half, outer * inner, C, &j);
  else run(dt, softmax_rows_f32, softmax_rows_f64, outer * inner, C, &j);
  return atomic_load(&failed) ? MS_K_ERR_NO_MEMORY : 0;
}

void ms_k_activation(ms_k_act act, ms_k_dtype dt, int64_t n, const void *x, void *y) {
  nn_job j = {.a = x, .out = y, .flag = (int)act, .dt = dt};
  if (is_half(dt)) run_half(activation_range_half, n, 1, &j);
  else run(dt, activation_range_f32, activation_range_f64, n, 1, &j);
}

void ms_k_activation_backward(ms_k_act act, ms_k_dtype dt, int64_t n, const void *x, const void *g,
                              void *gx) {
  nn_job j = {.a = x, .b = g, .out = gx, .flag = (int)act, .backward = 1, .dt = dt};
  if (is_half(dt)) run_half(activation_range_half, n, 1, &j);
  else run(dt, activation_backward_range_f32, activation_backward_range_f64, n, 1, &j);
}

/* bfloat16: the float32 body over blocks widened on the stack, each result rounded once: the
 * values a widened float32 dropout would give, without a float32 copy of the tensor. */
enum { BF16_BLOCK = 512 };

static void masked_scale_range_bf16(const nn_job *j, int64_t begin, int64_t end) {
  float xb[BF16_BLOCK], yb[BF16_BLOCK];
  for (int64_t i = begin; i < end; i += BF16_BLOCK) {
    int64_t len = end - i < BF16_BLOCK ? end - i : BF16_BLOCK;
    ms_k_cast(len, xb, MS_K_F32, 1, (const uint16_t *)j->a + i, MS_K_BF16, 1);
    nn_job block = {.a = xb, .mask = j->mask + i, .s0 = j->s0, .out = yb};
    masked_scale_range_f32(&block, 0, len);
    ms_k_cast(len, (uint16_t *)j->out + i, MS_K_BF16, 1, yb, MS_K_F32, 1);
  }
}

void ms_k_masked_scale(ms_k_dtype dt, int64_t n, const void *x, const uint8_t *mask, double scale,
                       void *y) {
  nn_job j = {.a = x, .mask = mask, .s0 = scale, .out = y};
  if (dt == MS_K_BF16) {
    nn_task t = {&j, masked_scale_range_bf16};
    ms_k_parallel_for(n, grain_for(1), run_range, &t);
    return;
  }
  run(dt, masked_scale_range_f32, masked_scale_range_f64, n, 1, &j);
}

int ms_k_cpu_masked_scale(const ms_k_exec *x, ms_k_dtype dt, int64_t n, const void *in,
                          const uint8_t *mask, double scale, void *y) {
  (void)x;
  ms_k_masked_scale(dt, n, in, mask, scale, y);
  return 0;
}

static nn_job nll_job(const ms_k_nll_args *a) {
  nn_job j = {.N = a->N, .C = a->C, .inner = a->inner, .target = a->target, .base = a->base,
              .ignore_index = a->ignore_index, .weight = a->weight};
  return j;
}

void ms_k_nll_rows(ms_k_dtype dt, const ms_k_nll_args *a, const void *logp, void *nll, void *wt,
                   void *smooth) {
  nn_job j = nll_job(a);
  j.a = logp, j.out = nll, j.out2 = wt, j.out3 = smooth;
  run(dt, nll_rows_f32, nll_rows_f64, a->N * a->inner, smooth ? a->C : 1, &j);
}

void ms_k_nll_backward(ms_k_dtype dt, const ms_k_nll_args *a, const void *logp, const void *g,
                       int64_t gs, double nll_scale, double smooth_scale, double smoothing, void *gx) {
  nn_job j = nll_job(a);
  j.a = logp, j.b = g, j.gs = gs, j.s0 = nll_scale, j.s1 = smooth_scale, j.s2 = smoothing, j.out = gx;
  run(dt, nll_backward_rows_f32, nll_backward_rows_f64, a->N * a->inner, a->C, &j);
}

void ms_k_embedding(ms_k_dtype dt, int64_t n, int64_t D, const int64_t *idx, int64_t base,
                    const void *w, void *out) {
  nn_job j = {.C = D, .target = idx, .base = base, .a = w, .out = out};
  if (is_half(dt)) run_half(embedding_rows_half, n, D, &j);
  else run(dt, embedding_rows_f32, embedding_rows_f64, n, D, &j);
}

void ms_k_embedding_backward(ms_k_dtype dt, int64_t n, int64_t D, const int64_t *idx, int64_t base,
                             int64_t padding_idx, const void *g, void *gw) {
  nn_job j = {.N = n, .C = D, .target = idx, .base = base, .ignore_index = padding_idx, .b = g,
              .out = gw, .dt = dt};
  if (is_half(dt)) run_half(embedding_backward_cols_half, D, n, &j);
  else run(dt, embedding_backward_cols_f32, embedding_backward_cols_f64, D, n, &j);
}

int ms_k_layer_norm(ms_k_dtype dt, int64_t M, int64_t N, const void *x, const void *w,
                    const void *b, double eps, void *y, void *mean, void *rstd) {
  atomic_int failed = 0;
  nn_job j = {.C = N, .a = x, .weight = w, .b = b, .s0 = eps, .out = y, .out2 = mean, .out3 = rstd,
              .dt = dt, .failed = &failed};
  if (is_half(dt)) run_half(layer_norm_rows_half, M, N, &j);
  else run(dt, layer_norm_rows_f32, layer_norm_rows_f64, M, N, &j);
  return atomic_load(&failed) ? MS_K_ERR_NO_MEMORY : 0;
}

int ms_k_layer_norm_backward(ms_k_dtype dt, int64_t M, int64_t N, const void *x, const void *g,
                             const void *mean, const void *rstd, const void *w, void *gx, void *gw,
                             void *gb) {
  atomic_int failed = 0;
  nn_job j = {.N = M, .C = N, .a = x, .b = g, .stat0 = mean, .stat1 = rstd, .weight = w,
              .out = gx, .out2 = gw, .out3 = gb, .dt = dt, .failed = &failed};
  if (is_half(dt)) {
    if (gx) run_half(layer_norm_backward_rows_half, M, N, &j);
    if (gw || gb) run_half(layer_norm_param_cols_half, N, M, &j);
  } else {
    if (gx) run(dt, layer_norm_backward_rows_f32, layer_norm_backward_rows_f64, M, N, &j);
    if (gw || gb) run(dt, layer_norm_param_cols_f32, layer_norm_param_cols_f64, N, M, &j);
  }
  return atomic_load(&failed) ? MS_K_ERR_NO_MEMORY : 0;
}

void ms_k_batch_norm_stats(ms_k_dtype dt, int64_t N, int64_t C, int64_t inner, const void *x,
                           void *mean, void *var) {
  nn_job j = {.N = N, .C = C, .inner = inner, .a = x, .out2 = mean, .out3 = var};
  run(dt, batch_norm_stats_channels_f32, batch_norm_stats_channels_f64, C, N * inner, &j);
}

void ms_k_batch_norm_apply(ms_k_dtype dt, int64_t N, int64_t C, int64_t inner, const void *x,
                           const void *mean, const void *invstd, const void *w, const void *b,
                           void *y) {
  nn_job j = {.N = N, .C = C, .inner = inner, .a = x, .stat0 = mean, .stat1 = invstd, .weight = w,
              .b = b, .out = y};
  run(dt, batch_norm_apply_channels_f32, batch_norm_apply_channels_f64, C, N * inner, &j);
}

void ms_k_batch_norm_backward(ms_k_dtype dt, int64_t N, int64_t C, int64_t inner, const void *x,
                              const void *g, const void *mean, const void *invstd, const void *w,
                              int training, void *gx, void *gw, void *gb) {
  nn_job j = {.N = N, .C = C, .inner = inner, .a = x, .b = g, .stat0 = mean, .stat1 = invstd,
              .weight = w, .flag = training, .out = gx, .out2 = gw, .out3 = gb};
  run(dt, batch_norm_backward_channels_f32, batch_norm_backward_channels_f64, C, N * inner, &j);
}

/* ---- the CPU's slots of the kernel table (kernel_table.h): the kernels above, called as the
 * engine called them before the table; none can fail ---- */

int ms_k_cpu_softmax(const ms_k_exec *x, ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner,
                     const void *in, void *y, int log) {
  (void)x;
  return ms_k_softmax(dt, outer, C, inner, in, y, log);
}

int ms_k_cpu_softmax_backward(const ms_k_exec *x, ms_k_dtype dt, int64_t outer, int64_t C,
                              int64_t inner, const void *y, const void *g, void *gx, int log) {
  (void)x;
  return ms_k_softmax_backward(dt, outer, C, inner, y, g, gx, log);
}

/* The engine checked every target on the host first (reading them costs the CPU nothing), so
 * there is no bad value to report here. */
int ms_k_cpu_nll_rows(const ms_k_exec *x, ms_k_dtype dt, const ms_k_nll_args *a, const void *logp,
                      void *nll, void *wt, void *smooth) {
  (void)x;
  ms_k_nll_rows(dt, a, logp, nll, wt, smooth);
  return 0;
}

static double sum_of(ms_k_dtype dt, int64_t n, const void *v) {
  if (n == 0 || !v) return 0;
  ms_k_reduce_result r;
  ms_k_reduce_row(MS_K_RSUM, dt, n, v, 1, 0, &r);
  return r.f;
}

/* The mean multiplies by 1 / sum(wt), the factor the backward scales by on the CPU. */
int ms_k_cpu_nll_reduce(const ms_k_exec *x, ms_k_dtype dt, int64_t n, const void *nll,
                        const void *wt, const void *smooth, double s, int64_t C, int mean,
                        void *out, double *sw) {
  (void)x;
  double sn = sum_of(dt, n, nll), w = sum_of(dt, n, wt), ss = sum_of(dt, n, smooth);
  double k = mean ? 1 / w : 1;
  double v = (1 - s) * sn * k + s / (double)C * ss * k;
  if (dt == MS_K_F64) *(double *)out = v;
  else *(float *)out = (float)v;
  *sw = w;
  return 0;
}

/* nll_rows into work buffers, then nll_reduce's sums: one call, the same bits as the two. */
int ms_k_cpu_nll_loss(const ms_k_exec *x, ms_k_dtype dt, const ms_k_nll_args *a, const void *logp,
                      int mean, void *out, double *sw) {
  int64_t n = a->N * a->inner;
  size_t es = ms_k_dtype_size(dt);
  void *nll = malloc((size_t)(n > 0 ? n : 1) * es), *wt = malloc((size_t)(n > 0 ? n : 1) * es);
  int err = nll && wt ? 0 : MS_K_ERR_NO_MEMORY;
  if (!err) ms_k_nll_rows(dt, a, logp, nll, wt, NULL);
  if (!err) err = ms_k_cpu_nll_reduce(x, dt, n, nll, wt, NULL, 0, a->C, mean, out, sw);
  free(nll), free(wt);
  return err;
}

int ms_k_cpu_nll_backward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_nll_args *a,
                          const void *logp, const void *g, int64_t gs, const double *sw,
                          double nll_scale, double smooth_scale, double smoothing, void *gx) {
  (void)x;
  /* g[0] / *sw in float64, rounded to dt once: what a float64 division then a cast gives */
  float g32;
  double g64;
  if (sw && dt == MS_K_F64) g64 = *(const double *)g / *sw, g = &g64;
  else if (sw) g32 = (float)((double)*(const float *)g / *sw), g = &g32;
  ms_k_nll_backward(dt, a, logp, g, gs, nll_scale, smooth_scale, smoothing, gx);
  return 0;
}

int ms_k_cpu_activation(const ms_k_exec *x, ms_k_act act, ms_k_dtype dt, int64_t n,
                        const void *in, void *y) {
  (void)x;
  ms_k_activation(act, dt, n, in, y);
  return 0;
}

int ms_k_cpu_activation_backward(const ms_k_exec *x, ms_k_act act, ms_k_dtype dt, int64_t n,
                                 const void *in, const void *g, void *gx) {
  (void)x;
  ms_k_activation_backward(act, dt, n, in, g, gx);
  return 0;
}

int ms_k_cpu_embedding(const ms_k_exec *x, ms_k_dtype dt, int64_t n, int64_t D,
                       const int64_t *idx, int64_t base, const void *w, void *out) {
  (void)x;
  ms_k_embedding(dt, n, D, idx, base, w, out);
  return 0;
}

int ms_k_cpu_embedding_backward(const ms_k_exec *x, ms_k_dtype dt, int64_t n, int64_t D,
                                const int64_t *idx, int64_t base, int64_t padding_idx,
                                const void *g, void *gw) {
  (void)x;
  ms_k_embedding_backward(dt, n, D, idx, base, padding_idx, g, gw);
  return 0;
}

int ms_k_cpu_layer_norm(const ms_k_exec *x, ms_k_dtype dt, int64_t M, int64_t N, const void *in,
                        const void *w, const void *b, double eps, void *y, void *mean,
                        void *rstd) {
  (void)x;
  return ms_k_layer_norm(dt, M, N, in, w, b, eps, y, mean, rstd);
}

int ms_k_cpu_layer_norm_backward(const ms_k_exec *x, ms_k_dtype dt, int64_t M, int64_t N,
                                 const void *in, const void *g, const void *mean,
                                 const void *rstd, const void *w, void *gx, void *gw, void *gb) {
  (void)x;
  return ms_k_layer_norm_backward(dt, M, N, in, g, mean, rstd, w, gx, gw, gb);
}

int ms_k_cpu_batch_norm_stats(const ms_k_exec *x, ms_k_dtype dt, int64_t N, int64_t C,
                              int64_t inner, const void *in, void *mean, void *var) {
  (void)x;
  ms_k_batch_norm_stats(dt, N, C, inner, in, mean, var);
  return 0;
}

int ms_k_cpu_batch_norm_apply(const ms_k_exec *x, ms_k_dtype dt, int64_t N, int64_t C,
                              int64_t inner, const void *in, const void *mean, const void *invstd,
                              const void *w, const void *b, void *y) {
  (void)x;
  ms_k_batch_norm_apply(dt, N, C, inner, in, mean, invstd, w, b, y);
  return 0;
}

int ms_k_cpu_batch_norm_backward(const ms_k_exec *x, ms_k_dtype dt, int64_t N, int64_t C,
                                 int64_t inner, const void *in, const void *g, const void *mean,
                                 const void *invstd, const void *w, int training, void *gx,
                                 void *gw, void *gb) {
  (void)x;
  ms_k_batch_norm_backward(dt, N, C, inner, in, g, mean, invstd, w, training, gx, gw, gb);
  return 0;
}
