/* attention.c: scaled dot product attention on the CPU (kernel_table.h's attention rows), tiled
 * with an online softmax so that memory stays O(block) per task, never O(L S) per problem.
 * Forward tasks are (problem, query block); backward tasks are (problem, group of key blocks),
 * each recomputing its scores from q, k and the saved logsumexp: dK and dV rows are the task's
 * own, dQ is summed over the groups in a fixed order, so results do not depend on the threads. */
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "attention_avx512.h"
#include "attention_bf16_avx512.h"
#include "cpu_isa.h"
#include "gemm_ukr.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"

/* Query and key rows per block: a block's scores fit the L2 cache; 72 is a multiple of every
 * micro-kernel's rows (12, 8, 6, 4) and 128 of every one's width (32, 16, 8), so blocks start on
 * whole micro-panels (attention_f32.h). */
enum { BQ = 72, BK = 128 };

typedef struct attn_ctx {
  const ms_k_attn_geom *g;
  const void *q, *k, *v, *mask, *out, *lse, *gout;
  void *delta, *gq, *gk, *gv;
  int64_t groups;     /* the backward's key groups per problem */
  void *dq_parts;     /* NULL, or each group's dQ (nb, groups, L, E) in T, summed into gq */
  atomic_int *failed;  /* a task's scratch could not be had */
} attn_ctx;

/* The element offset of problem b in a tensor of these batch strides (b unravelled over bshape). */
static int64_t attn_batch_offset(const ms_k_attn_geom *g, int64_t b, const int64_t *stride) {
  int64_t off = 0;
  for (int d = g->nbatch - 1; d >= 0; d--) {
    off += (b % g->bshape[d]) * stride[d];
    b /= g->bshape[d];
  }
  return off;
}

/* Key groups per problem in the backward: one task per group accumulates dQ over its keys
 * without a race, so a problem with one group needs no partial sums. Few problems are cut into
 * up to 8 groups (at least 16 tasks where the keys allow) for the threads; the count follows
 * from the shape alone. */
static int64_t attn_key_groups(const ms_k_attn_geom *g) {
  int64_t kb = (g->S + BK - 1) / BK, want = g->nb >= 16 ? 1 : (16 + g->nb - 1) / g->nb;
  want = want < 8 ? want : 8;
  return want < kb ? want : (kb > 0 ? kb : 1);
}

/* keep[t] = dropout keeps Philox element `first + t` (t < n), as ms_k_philox_bernoulli with the
 * keep probability draws it: word (first + t) % 4 of block offset + (first + t) / 4. */
static void attn_keep(const ms_k_attn_geom *g, int64_t first, int64_t n, uint8_t *keep) {
  const uint32_t key[2] = {(uint32_t)g->seed, (uint32_t)(g->seed >> 32)};
  uint32_t w[4];
  int64_t have = -1;
  for (int64_t t = 0; t < n; t++) {
    int64_t e = first + t, block = e / 4;
    if (block != have) {
      uint64_t ctr64 = g->offset + (uint64_t)block;
      const uint32_t ctr[4] = {(uint32_t)ctr64, (uint32_t)(ctr64 >> 32), 0, 0};
      ms_k_philox4x32_10(ctr, key, w);
      have = block;
    }
    keep[t] = w[e % 4] < g->keep_below;
  }
}

/* The sum and the maximum of n values in 8 running lanes, which GCC vectorises (one running
 * value would be a chain of dependent adds). */
#define LANES_REDUCE(T, name, init, step)                                                          \
  static T name(const T *x, int64_t n) {                                                           \
    T lane[8] = {init, init, init, init, init, init, init, init};                                  \
    int64_t t = 0;                                                                                 \
    for (; t + 8 <= n; t += 8)                                                                     \
      for (int u = 0; u < 8; u++) lane[u] = step(lane[u], x[t + u]);                               \
    for (; t < n; t++) lane[0] = step(lane[0], x[t]);                                              \
    T r = lane[0];                                                                                 \
    for (int u = 1; u < 8; u++) r = step(r, lane[u]);                                              \
    return r;                                                                                      \
  }
#define ADD(a, b) ((a) + (b))
#define MAX(a, b) ((b) > (a) ? (b) : (a))
LANES_REDUCE(float, sum_f32, 0.0f, ADD)
LANES_REDUCE(double, sum_f64, 0.0, ADD)
LANES_REDUCE(float, max_lanes_f32, -INFINITY, MAX)
LANES_REDUCE(double, max_f64, -INFINITY, MAX)

/* A row's maximum: 16 lanes at a time where the CPU has AVX-512. */
static float max_f32(const float *x, int64_t n) {
  return ms_k_cpu_avx512() ? ms_k_attention_max_avx512(x, n) : max_lanes_f32(x, n);
}

/* row[t] = exp(row[t] - shift) for t < n, with shift finite and every row[t] - shift <= 0 (or
 * -inf), and their sum: Cephes' expf polynomial (within 2 ulp) in plain arithmetic, so GCC
 * vectorises the loop where a call to expf per score cost as much as the block products (16
 * lanes at a time, summed on the way, in attention_avx512.c where the CPU has AVX-512). Below
 * -87 it is 0. */
static float exp_sum_f32(float *row, int64_t n, float shift) {
  if (ms_k_cpu_avx512()) return ms_k_attention_exp_sum_avx512(row, n, shift);
  for (int64_t t = 0; t < n; t++) {
    float x = row[t] - shift, xc = x > -87.0f ? x : -87.0f;
    float fn = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = xc - fn * 0.693359375f + fn * 2.12194440e-4f;
    float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r +
               1.6666665459e-1f) * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)fn + 127) << 23; /* 2^fn, fn in [-126, 0] */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    row[t] = x > -87.0f ? p * scale : 0.0f;
  }
  return sum_f32(row, n);
}

static double exp_sum_f64(double *row, int64_t n, double shift) {
  for (int64_t t = 0; t < n; t++) row[t] = exp(row[t] - shift);
  return sum_f64(row, n);
}

static void store_row_f32(float *dst, const float *src, int64_t n) { memcpy(dst, src, (size_t)n * sizeof *dst); }
static void store_row_f64(double *dst, const double *src, int64_t n) { memcpy(dst, src, (size_t)n * sizeof *dst); }

#include "attention_f32.h"
#define T float
#define IO float
#define LOAD(x) (x)
#define SFX(name) name##_f32
#define EXP expf
#define LOG logf
#include "attention_body.h" /* which undefines them */

#include "attention_f64.h"
#define T double
#define IO double
#define LOAD(x) (x)
#define SFX(name) name##_f64
#define EXP exp
#define LOG log
#include "attention_body.h" /* which undefines them */

/* bfloat16: float scores, sums, lse and delta over bf16 operands (attention_bf16.h) */
#define exp_sum_bf16 exp_sum_f32
#define max_bf16 max_f32
#include "attention_bf16.h"
#define T float
#define IO uint16_t
#define LOAD(x) bf16_load(x)
#define SFX(name) name##_bf16
#define EXP expf
#define LOG logf
#include "attention_body.h" /* which undefines them */

/* The kernels' range functions for dt: F32, F64, or BF16 where the CPU has AVX-512 BF16 (the
 * engine widens bfloat16 elsewhere). */
typedef struct {
  ms_k_range_fn forward, delta, backward, sum_dq;
  size_t acc_size; /* the size of T: lse, delta and the dQ partials */
} attn_fns;

static bool attn_fns_for(ms_k_dtype dt, attn_fns *f) {
  if (dt == MS_K_F64)
    *f = (attn_fns){forward_range_f64, delta_range_f64, backward_range_f64, sum_dq_range_f64, sizeof(double)};
  else if (dt == MS_K_F32)
    *f = (attn_fns){forward_range_f32, delta_range_f32, backward_range_f32, sum_dq_range_f32, sizeof(float)};
  else if (dt == MS_K_BF16 && ms_k_gemm_bf16_available())
    *f = (attn_fns){forward_range_bf16, delta_range_bf16, backward_range_bf16, sum_dq_range_bf16, sizeof(float)};
  else
    return false;
  return true;
}

int ms_k_cpu_attention(const ms_k_exec *x, ms_k_dtype dt, const ms_k_attn_geom *g, const void *q,
                       const void *k, const void *v, const void *mask, void *out, void *lse) {
  (void)x;
  attn_fns f;
  if (!attn_fns_for(dt, &f)) return MS_K_ERR_NO_MEMORY; /* the engine asks first: not reached */
  atomic_int failed = 0;
  attn_ctx c = {.g = g, .q = q, .k = k, .v = v, .mask = mask, .out = out, .lse = lse, .failed = &failed};
  int64_t tasks = g->nb * ((g->L + BQ - 1) / BQ);
  ms_k_parallel_for(tasks, 1, f.forward, &c);
  return atomic_load(&failed) ? MS_K_ERR_NO_MEMORY : 0;
}

int ms_k_cpu_attention_backward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_attn_geom *g,
                                const void *q, const void *k, const void *v, const void *mask,
                                const void *out, const void *lse, const void *gout, void *delta,
                                void *gq, void *gk, void *gv) {
  (void)x;
  attn_fns f;
  if (!attn_fns_for(dt, &f)) return MS_K_ERR_NO_MEMORY;
  atomic_int failed = 0;
  attn_ctx c = {.g = g, .q = q, .k = k, .v = v, .mask = mask, .out = out, .lse = lse, .gout = gout,
                .delta = delta, .gq = gq, .gk = gk, .gv = gv, .failed = &failed};
  ms_k_parallel_for(g->nb * g->L, 256, f.delta, &c);
  c.groups = attn_key_groups(g);
  /* dQ is summed in float: in partials when groups share it or when gq is bfloat16 */
  bool parts = c.groups > 1 || dt == MS_K_BF16;
  if (parts && !(c.dq_parts = malloc((size_t)(g->nb * c.groups * g->L * g->E) * f.acc_size)))
    return MS_K_ERR_NO_MEMORY;
  ms_k_parallel_for(g->nb * c.groups, 1, f.backward, &c);
  if (parts && !atomic_load(&failed)) ms_k_parallel_for(g->nb * g->L, 64, f.sum_dq, &c);
  free(c.dq_parts);
  return atomic_load(&failed) ? MS_K_ERR_NO_MEMORY : 0;
}
