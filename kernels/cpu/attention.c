/* attention.c: scaled dot product attention on the CPU (kernel_table.h's attention rows), tiled
 * with an online softmax so that memory stays O(block) per task, never O(L S) per problem.
 * Forward tasks are (problem, query block); backward tasks are (problem, key block) for dK and
 * dV and (problem, query block) for dQ, each recomputing its scores from q, k and the saved
 * logsumexp. Each task writes disjoint rows, so the results do not depend on the thread count. */
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_table.h"

enum { BQ = 64, BK = 128 }; /* query and key rows per block: a block's scores fit the L2 cache */

typedef struct attn_ctx {
  const ms_k_attn_geom *g;
  const void *q, *k, *v, *mask, *out, *lse, *gout;
  void *delta, *gq, *gk, *gv;
  atomic_int *failed;  /* a task's scratch could not be had */
} attn_ctx;

/* The mask's element offset for problem b (its batch index unravelled over bshape). */
static int64_t attn_mask_offset(const ms_k_attn_geom *g, int64_t b) {
  int64_t off = 0;
  for (int d = g->nbatch - 1; d >= 0; d--) {
    off += (b % g->bshape[d]) * g->mstride[d];
    b /= g->bshape[d];
  }
  return off;
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

#define T float
#define SFX(name) name##_f32
#define GEMM ms_k_sgemm
#define EXP expf
#define LOG logf
#include "attention_body.h"
#undef T
#undef SFX
#undef GEMM
#undef EXP
#undef LOG

#define T double
#define SFX(name) name##_f64
#define GEMM ms_k_dgemm
#define EXP exp
#define LOG log
#include "attention_body.h"
#undef T
#undef SFX
#undef GEMM
#undef EXP
#undef LOG

int ms_k_cpu_attention(const ms_k_exec *x, ms_k_dtype dt, const ms_k_attn_geom *g, const void *q,
                       const void *k, const void *v, const void *mask, void *out, void *lse) {
  (void)x;
  atomic_int failed = 0;
  attn_ctx c = {.g = g, .q = q, .k = k, .v = v, .mask = mask, .out = out, .lse = lse, .failed = &failed};
  int64_t tasks = g->nb * ((g->L + BQ - 1) / BQ);
  ms_k_parallel_for(tasks, 1, dt == MS_K_F64 ? forward_range_f64 : forward_range_f32, &c);
  return atomic_load(&failed) ? MS_K_ERR_NO_MEMORY : 0;
}

int ms_k_cpu_attention_backward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_attn_geom *g,
                                const void *q, const void *k, const void *v, const void *mask,
                                const void *out, const void *lse, const void *gout, void *delta,
                                void *gq, void *gk, void *gv) {
  (void)x;
  atomic_int failed = 0;
  attn_ctx c = {.g = g, .q = q, .k = k, .v = v, .mask = mask, .out = out, .lse = lse, .gout = gout,
                .delta = delta, .gq = gq, .gk = gk, .gv = gv, .failed = &failed};
  bool f64 = dt == MS_K_F64;
  ms_k_parallel_for(g->nb * g->L, 256, f64 ? delta_range_f64 : delta_range_f32, &c);
  int64_t tasks = g->nb * ((g->S + BK - 1) / BK + (g->L + BQ - 1) / BQ);
  ms_k_parallel_for(tasks, 1, f64 ? backward_range_f64 : backward_range_f32, &c);
  return atomic_load(&failed) ? MS_K_ERR_NO_MEMORY : 0;
}
