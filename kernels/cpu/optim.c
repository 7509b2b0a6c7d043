/* optim.c: the fused optimizer updates. Each optimizer is one loop over double arrays (its
 * "block" function); a shared driver splits the elements over the pool and, for float32, widens
 * a small block of every array into stack buffers, runs the loop and narrows the results back,
 * so each formula is written once and float32 rounds once per stored value. Where the CPU has
 * AVX2, the float32 steps of Adadelta, Adam/AdamW and SGD run a vector loop instead (its "vec"
 * function, optim_*_body.h): the same double formula without the staging copies, bit for bit;
 * the staged loop does the tail. The list steps (PyTorch's foreach) run the same functions over
 * the running count of many tensors in one parallel pass. */
#include <math.h>

#include "kernels/kernel_table.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/optim_avx2.h"

/* Arrays of one update: param, grad, then up to three state arrays. */
enum { ARR_PARAM, ARR_GRAD, ARR_COUNT = 5 };
/* Elements per float32 staging block: 5 arrays of doubles stay within 10 KiB of stack. */
#define STAGE 256
/* Below this many elements a step stays on the calling thread. */
#define OPTIM_GRAIN 16384

typedef void (*block_fn)(const void *hp, int64_t n, double *const *a);
/* The float32 vector loop: updates the first n rounded down to whole vectors and returns that
 * count (run_f32 does the rest). */
typedef int64_t (*vec_fn)(const void *hp, int64_t n, float *const *a);

typedef struct {
  block_fn fn;
  vec_fn vec; /* NULL: float32 runs staged throughout */
  const void *hp;
  ms_k_dtype dt;
  void *arr[ARR_COUNT]; /* NULL for unused state */
} optim_job;

static void run_f32(const optim_job *j, int64_t begin, int64_t end) {
  double stage[ARR_COUNT][STAGE];
  double *a[ARR_COUNT];
  for (int64_t b = begin; b < end; b += STAGE) {
    int64_t m = end - b < STAGE ? end - b : STAGE;
    for (int k = 0; k < ARR_COUNT; k++) {
      a[k] = j->arr[k] ? stage[k] : NULL;
      if (!j->arr[k]) continue;
      const float *src = (const float *)j->arr[k] + b;
      for (int64_t i = 0; i < m; i++) stage[k][i] = src[i];
    }
    j->fn(j->hp, m, a);
    for (int k = 0; k < ARR_COUNT; k++) {
      if (k == ARR_GRAD || !j->arr[k]) continue;
      float *dst = (float *)j->arr[k] + b;
      for (int64_t i = 0; i < m; i++) dst[i] = (float)stage[k][i];
    }
  }
}

static void run_range(void *ctx, int64_t begin, int64_t end) {
  const optim_job *j = ctx;
  if (j->dt == MS_K_F32) {
    if (j->vec) {
      float *a[ARR_COUNT];
      for (int k = 0; k < ARR_COUNT; k++) a[k] = j->arr[k] ? (float *)j->arr[k] + begin : NULL;
      begin += j->vec(j->hp, end - begin, a);
    }
    run_f32(j, begin, end);
    return;
  }
  double *a[ARR_COUNT];
  for (int k = 0; k < ARR_COUNT; k++) a[k] = j->arr[k] ? (double *)j->arr[k] + begin : NULL;
  j->fn(j->hp, end - begin, a);
}

/* vec may be NULL; it runs only on float32 where the CPU has AVX2. */
static void run(block_fn fn, vec_fn vec, const void *hp, ms_k_dtype dt, int64_t n, void *param,
                const void *grad, void *s0, void *s1, void *s2) {
  if (n <= 0) return;
  if (dt != MS_K_F32 || !ms_k_cpu_avx2()) vec = NULL;
  /* the grad is cast to void * only to share the array table; it is never written */
  optim_job j = {fn, vec, hp, dt, {param, (void *)grad, s0, s1, s2}};
  ms_k_parallel_for(n, OPTIM_GRAIN, run_range, &j);
}

/* ---- multi-tensor steps: one parallel pass over the elements of every tensor of a list ---- */
typedef struct {
  block_fn fn;
  vec_fn vec;
  const void *hp;
  ms_k_dtype dt;
  const ms_k_tensor_list *l;
  int64_t first[MS_K_LIST_MAX + 1]; /* where tensor i starts in the list's running count */
} list_job;

/* The part of [begin, end) (of the running count) in each tensor, as run_range runs it on that
 * tensor alone: elementwise updates do not care where a range is cut. */
static void run_list_range(void *ctx, int64_t begin, int64_t end) {
  const list_job *lj = ctx;
  for (int t = 0; t < lj->l->count; t++) {
    int64_t lo = begin > lj->first[t] ? begin : lj->first[t];
    int64_t hi = end < lj->first[t + 1] ? end : lj->first[t + 1];
    if (lo >= hi) continue;
    optim_job j = {lj->fn, lj->vec, lj->hp, lj->dt, {NULL}};
    for (int a = 0; a < ARR_COUNT; a++) j.arr[a] = lj->l->arr[a][t];
    run_range(&j, lo - lj->first[t], hi - lj->first[t]);
  }
}

/* arrays the options leave unused are NULL in l (the engine's duty), as run's s0..s2 are */
static void run_list(block_fn fn, vec_fn vec, const void *hp, ms_k_dtype dt,
                     const ms_k_tensor_list *l) {
  list_job lj = {fn, vec, hp, dt, l, {0}};
  if (dt != MS_K_F32 || !ms_k_cpu_avx2()) lj.vec = NULL;
  for (int t = 0; t < l->count; t++) lj.first[t + 1] = lj.first[t] + (l->n[t] > 0 ? l->n[t] : 0);
  if (lj.first[l->count] > 0) ms_k_parallel_for(lj.first[l->count], OPTIM_GRAIN, run_list_range, &lj);
}

/* The gradient as the update sees it: negated to maximize, plus L2 weight decay. */
static inline double effective_grad(double g, double p, int maximize, double weight_decay) {
  if (maximize) g = -g;
  return weight_decay != 0 ? g + weight_decay * p : g;
}

/* torch.maximum: NaN propagates from either side. */
static inline double max_nan(double a, double b) { return a != a || a > b ? a : b; }

/* ---- SGD: a[2] momentum buffer -------------------------------------------------------------- */
/* with_buffer is a constant at each call site, so both loops vectorise. */
static inline void sgd_loop(const ms_k_sgd_hp *hpv, int64_t n, double *const *a,
                            const int with_buffer) {
  const ms_k_sgd_hp h = *hpv; /* a local copy: stores to the arrays cannot alias it */
  double *p = a[0], *buf = a[2];
  const double *g = a[1];
  for (int64_t i = 0; i < n; i++) {
    double d = effective_grad(g[i], p[i], h.maximize, h.weight_decay);
    if (with_buffer) {
      buf[i] = h.init_buffer ? d : buf[i] * h.momentum + (1 - h.dampening) * d;
      d = h.nesterov ? d + h.momentum * buf[i] : buf[i];
    }
    p[i] += -h.lr * d;
  }
}

static void sgd_block(const void *hpv, int64_t n, double *const *a) {
  if (a[2]) sgd_loop(hpv, n, a, 1);
  else sgd_loop(hpv, n, a, 0);
}

static int64_t sgd_vec(const void *hp, int64_t n, float *const *a) {
  return (ms_k_cpu_avx512() ? ms_k_sgd_f32_avx512 : ms_k_sgd_f32_avx2)(hp, n, a[0], a[1], a[2]);
}

void ms_k_sgd_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *momentum_buffer,
                   const ms_k_sgd_hp *hp) {
  run(sgd_block, sgd_vec, hp, dt, n, param, grad, momentum_buffer, NULL, NULL);
}

/* ---- Adam / AdamW: a[2] exp_avg, a[3] exp_avg_sq, a[4] max_exp_avg_sq ------------------------ */
typedef struct {
  const ms_k_adam_hp *hp;
  double step_size, bias_correction2_sqrt; /* per step, computed once as PyTorch does in Python */
} adam_ctx;

/* amsgrad is a constant at each call site, so each variant is a loop without branches that the
 * compiler vectorises (a conditional store would stop it). */
static inline void adam_loop(const adam_ctx *c, int64_t n, double *const *a, const int amsgrad) {
  const ms_k_adam_hp h = *c->hp; /* local copies: stores to the arrays cannot alias them */
  const double step_size = c->step_size, bc2_sqrt = c->bias_correction2_sqrt;
  double *p = a[0], *m = a[2], *v = a[3], *vmax = a[4];
  const double *g = a[1];
  /* AdamW decays the parameter (a multiply by exactly 1 otherwise); Adam adds L2 to the grad */
  const double decay = h.decoupled ? 1 - h.lr * h.weight_decay : 1;
  const double l2 = h.decoupled ? 0 : h.weight_decay;
  for (int64_t i = 0; i < n; i++) {
    double gi = effective_grad(g[i], p[i], h.maximize, l2);
    p[i] *= decay;
    m[i] = m[i] * h.beta1 + (1 - h.beta1) * gi;
    v[i] = v[i] * h.beta2 + (1 - h.beta2) * gi * gi;
    double vv = v[i];
    if (amsgrad) vv = vmax[i] = max_nan(vmax[i], v[i]);
    double denom = sqrt(vv) / bc2_sqrt + h.eps;
    p[i] += -step_size * m[i] / denom;
  }
}

static void adam_block(const void *ctxv, int64_t n, double *const *a) {
  if (a[4]) adam_loop(ctxv, n, a, 1);
  else adam_loop(ctxv, n, a, 0);
}

static int64_t adam_vec(const void *ctxv, int64_t n, float *const *a) {
  const adam_ctx *c = ctxv;
  return (ms_k_cpu_avx512() ? ms_k_adam_f32_avx512 : ms_k_adam_f32_avx2)(
      c->hp, c->step_size, c->bias_correction2_sqrt, n, a[0], a[1], a[2], a[3], a[4]);
}

/* The per-step numbers, computed once as PyTorch does in Python. */
static adam_ctx adam_ctx_of(const ms_k_adam_hp *hp) {
  adam_ctx c = {hp, hp->lr / (1 - pow(hp->beta1, hp->step)), sqrt(1 - pow(hp->beta2, hp->step))};
  return c;
}

void ms_k_adam_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *exp_avg,
                    void *exp_avg_sq, void *max_exp_avg_sq, const ms_k_adam_hp *hp) {
  adam_ctx c = adam_ctx_of(hp);
  run(adam_block, adam_vec, &c, dt, n, param, grad, exp_avg, exp_avg_sq,
      hp->amsgrad ? max_exp_avg_sq : NULL);
}

/* ---- Adadelta: a[2] square_avg, a[3] acc_delta ------------------------------------------------ */
static void adadelta_block(const void *hpv, int64_t n, double *const *a) {
  const ms_k_adadelta_hp h = *(const ms_k_adadelta_hp *)hpv, *hp = &h; /* unaliased copy */
  double *p = a[0], *sq = a[2], *acc = a[3];
  const double *g = a[1];
  for (int64_t i = 0; i < n; i++) {
    double gi = effective_grad(g[i], p[i], hp->maximize, hp->weight_decay);
    sq[i] = sq[i] * hp->rho + (1 - hp->rho) * gi * gi;
    double std = sqrt(sq[i] + hp->eps);
    double delta = sqrt(acc[i] + hp->eps) / std * gi;
    acc[i] = acc[i] * hp->rho + (1 - hp->rho) * delta * delta;
    p[i] += -hp->lr * delta;
  }
}

static int64_t adadelta_vec(const void *hp, int64_t n, float *const *a) {
  return (ms_k_cpu_avx512() ? ms_k_adadelta_f32_avx512 : ms_k_adadelta_f32_avx2)(hp, n, a[0], a[1],
                                                                                  a[2], a[3]);
}

void ms_k_adadelta_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *square_avg,
                        void *acc_delta, const ms_k_adadelta_hp *hp) {
  run(adadelta_block, adadelta_vec, hp, dt, n, param, grad, square_avg, acc_delta, NULL);
}

/* ---- Adagrad: a[2] state_sum ------------------------------------------------------------------ */
typedef struct {
  const ms_k_adagrad_hp *hp;
  double clr; /* the decayed learning rate of this step */
} adagrad_ctx;

static void adagrad_block(const void *ctxv, int64_t n, double *const *a) {
  const adagrad_ctx *c = ctxv;
  const ms_k_adagrad_hp h = *c->hp; /* unaliased copies */
  const double clr = c->clr;
  double *p = a[0], *sum = a[2];
  const double *g = a[1];
  for (int64_t i = 0; i < n; i++) {
    double gi = effective_grad(g[i], p[i], h.maximize, h.weight_decay);
    sum[i] += gi * gi;
    p[i] += -clr * gi / (sqrt(sum[i]) + h.eps);
  }
}

void ms_k_adagrad_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *state_sum,
                       const ms_k_adagrad_hp *hp) {
  adagrad_ctx c = {hp, hp->lr / (1 + (hp->step - 1) * hp->lr_decay)};
  run(adagrad_block, NULL, &c, dt, n, param, grad, state_sum, NULL, NULL);
}

/* ---- RMSprop: a[2] square_avg, a[3] grad_avg, a[4] momentum buffer ----------------------------- */
/* centered and momentum are constants at each call site: four branch-free loops. */
static inline void rmsprop_loop(const ms_k_rmsprop_hp *hpv, int64_t n, double *const *a,
                                const int centered, const int momentum) {
  const ms_k_rmsprop_hp h = *hpv; /* unaliased copy */
  double *p = a[0], *sq = a[2], *gavg = a[3], *buf = a[4];
  const double *g = a[1];
  for (int64_t i = 0; i < n; i++) {
    double gi = effective_grad(g[i], p[i], h.maximize, h.weight_decay);
    sq[i] = sq[i] * h.alpha + (1 - h.alpha) * gi * gi;
    double avg;
    if (centered) {
      gavg[i] = gavg[i] * h.alpha + (1 - h.alpha) * gi;
      avg = sqrt(sq[i] - gavg[i] * gavg[i]);
    } else {
      avg = sqrt(sq[i]);
    }
    avg += h.eps;
    if (momentum) {
      buf[i] = buf[i] * h.momentum + gi / avg;
      p[i] += -h.lr * buf[i];
    } else {
      p[i] += -h.lr * gi / avg;
    }
  }
}

static void rmsprop_block(const void *hpv, int64_t n, double *const *a) {
  switch ((a[3] != NULL) * 2 + (a[4] != NULL)) {
  case 0: rmsprop_loop(hpv, n, a, 0, 0); break;
  case 1: rmsprop_loop(hpv, n, a, 0, 1); break;
  case 2: rmsprop_loop(hpv, n, a, 1, 0); break;
  default: rmsprop_loop(hpv, n, a, 1, 1); break;
  }
}

void ms_k_rmsprop_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *square_avg,
                       void *grad_avg, void *momentum_buffer, const ms_k_rmsprop_hp *hp) {
  run(rmsprop_block, NULL, hp, dt, n, param, grad, square_avg, hp->centered ? grad_avg : NULL,
      hp->momentum > 0 ? momentum_buffer : NULL);
}

/* ---- the table's optimizer steps: the steps above (the CPU's bodies cannot fail) ---- */

int ms_k_cpu_adadelta_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param,
                           const void *grad, void *square_avg, void *acc_delta,
                           const ms_k_adadelta_hp *hp) {
  (void)x;
  ms_k_adadelta_step(dt, n, param, grad, square_avg, acc_delta, hp);
  return 0;
}

int ms_k_cpu_sgd_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,
                      void *momentum_buffer, const ms_k_sgd_hp *hp) {
  (void)x;
  ms_k_sgd_step(dt, n, param, grad, momentum_buffer, hp);
  return 0;
}

int ms_k_cpu_adam_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,
                       void *exp_avg, void *exp_avg_sq, void *max_exp_avg_sq,
                       const ms_k_adam_hp *hp) {
  (void)x;
  ms_k_adam_step(dt, n, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, hp);
  return 0;
}

int ms_k_cpu_adagrad_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param,
                          const void *grad, void *state_sum, const ms_k_adagrad_hp *hp) {
  (void)x;
  ms_k_adagrad_step(dt, n, param, grad, state_sum, hp);
  return 0;
}

int ms_k_cpu_rmsprop_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param,
                          const void *grad, void *square_avg, void *grad_avg,
                          void *momentum_buffer, const ms_k_rmsprop_hp *hp) {
  (void)x;
  ms_k_rmsprop_step(dt, n, param, grad, square_avg, grad_avg, momentum_buffer, hp);
  return 0;
}

/* ---- the slots of the list steps (kernel_table.h), derived as the steps above derive them ---- */

void ms_k_sgd_slots(const ms_k_sgd_hp *hp, double s[MS_K_SGD_SLOTS]) {
  s[MS_K_SGD_LR] = hp->lr, s[MS_K_SGD_MOMENTUM] = hp->momentum;
  s[MS_K_SGD_DAMPENING] = hp->dampening, s[MS_K_SGD_WEIGHT_DECAY] = hp->weight_decay;
}

void ms_k_adam_slots(const ms_k_adam_hp *hp, double s[MS_K_ADAM_SLOTS]) {
  adam_ctx c = adam_ctx_of(hp);
  s[MS_K_ADAM_BETA1] = hp->beta1, s[MS_K_ADAM_BETA2] = hp->beta2, s[MS_K_ADAM_EPS] = hp->eps;
  s[MS_K_ADAM_STEP_SIZE] = c.step_size, s[MS_K_ADAM_BC2_SQRT] = c.bias_correction2_sqrt;
  s[MS_K_ADAM_DECAY] = hp->decoupled ? 1 - hp->lr * hp->weight_decay : 1;
  s[MS_K_ADAM_L2] = hp->decoupled ? 0 : hp->weight_decay;
}

void ms_k_adadelta_slots(const ms_k_adadelta_hp *hp, double s[MS_K_ADADELTA_SLOTS]) {
  s[MS_K_ADADELTA_LR] = hp->lr, s[MS_K_ADADELTA_RHO] = hp->rho;
  s[MS_K_ADADELTA_EPS] = hp->eps, s[MS_K_ADADELTA_WEIGHT_DECAY] = hp->weight_decay;
}

/* ---- the table's list steps: the CPU reads hp (its memory is the host's: hp_dev is never set) ---- */

int ms_k_cpu_sgd_step_list(const ms_k_exec *x, ms_k_dtype dt, const ms_k_tensor_list *l,
                           const ms_k_sgd_hp *hp, const double *hp_dev) {
  (void)x, (void)hp_dev;
  run_list(sgd_block, sgd_vec, hp, dt, l);
  return 0;
}

int ms_k_cpu_adam_step_list(const ms_k_exec *x, ms_k_dtype dt, const ms_k_tensor_list *l,
                            const ms_k_adam_hp *hp, const double *hp_dev) {
  (void)x, (void)hp_dev;
  adam_ctx c = adam_ctx_of(hp);
  run_list(adam_block, adam_vec, &c, dt, l);
  return 0;
}

int ms_k_cpu_adadelta_step_list(const ms_k_exec *x, ms_k_dtype dt, const ms_k_tensor_list *l,
                                const ms_k_adadelta_hp *hp, const double *hp_dev) {
  (void)x, (void)hp_dev;
  run_list(adadelta_block, adadelta_vec, hp, dt, l);
  return 0;
}

int ms_k_cpu_write_slots(const ms_k_exec *x, double *dst, const ms_k_slots *s) {
  (void)x;
  for (int k = 0; k < MS_K_MAX_SLOTS; k++) dst[k] = s->v[k];
  return 0;
}
