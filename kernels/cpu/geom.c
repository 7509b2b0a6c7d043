/* geom.c: walking an N-D geometry row by row on the CPU, split over the thread pool. */
#include "kernels/kernel_table.h"

int64_t ms_k_geom_numel(const ms_k_geom *g) {
  int64_t n = 1;
  for (int d = 0; d < g->ndim; d++) n *= g->shape[d];
  return n;
}

typedef struct geom_job {
  const ms_k_geom *g;
  ms_k_row_fn fn;
  void *ctx;
} geom_job;

/* Runs the elements [begin, end) of the flattened iteration space, row piece by row piece. */
static void geom_range(void *arg, int64_t begin, int64_t end) {
  const geom_job *job = arg;
  const ms_k_geom *g = job->g;
  int last = g->ndim - 1;
  int64_t rowlen = g->shape[last], idx[MS_K_MAX_DIMS];
  int64_t rem = begin;
  for (int d = last; d >= 0; d--) idx[d] = rem % g->shape[d], rem /= g->shape[d];
  int64_t inner[MS_K_MAX_OPS];
  for (int k = 0; k < g->nops; k++) inner[k] = g->strides[k][last];
  for (int64_t pos = begin; pos < end;) {
    char *ptr[MS_K_MAX_OPS];
    for (int k = 0; k < g->nops; k++) {
      int64_t off = 0;
      for (int d = 0; d <= last; d++) off += idx[d] * g->strides[k][d];
      ptr[k] = g->data[k] + off * (int64_t)g->elsize[k];
    }
    int64_t n = rowlen - idx[last];
    if (n > end - pos) n = end - pos;
    job->fn(job->ctx, n, ptr, inner);
    pos += n;
    idx[last] += n;
    for (int d = last; d > 0 && idx[d] == g->shape[d]; d--) idx[d] = 0, idx[d - 1]++;
  }
}

void ms_k_geom_run(const ms_k_geom *g, ms_k_row_fn fn, void *ctx) {
  geom_job job = {g, fn, ctx};
  int64_t n = ms_k_geom_numel(g);
  if (n == 0) return;
  /* Below ~32k elements a thread hand-off costs more than it saves. */
  ms_k_parallel_for(n, 32768, geom_range, &job);
}
