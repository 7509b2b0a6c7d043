/* select.c: the CPU's gather / scatter (index_move), stable sort of rows (sort_rows) and running
 * sums and products (scan_rows). Each spreads independent lines or rows over the thread pool;
 * the work inside one line or row runs in order, so results never depend on the threads. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_table.h"

/* Lines or rows of n elements each: enough of them per task that a task is worth its start. */
static int64_t grain_for(int64_t n) { return n >= 4096 ? 1 : 4096 / (n + 1) + 1; }

/* ---- index_move ---------------------------------------------------------------------------- */

typedef struct move_job {
  const ms_k_index_geom *g;
  int mode;
  ms_k_dtype dt;
  size_t elsize;
  const int64_t *index;
  char *direct, *indexed;
} move_job;

/* One line's loop with the element type T fixed and the move written once (OP(dp, ap) on typed
 * pointers), so the compiler sees plain loads and stores instead of a memcpy of a runtime size. */
#define MOVE_LOOP(T, OP)                                                                           \
  do {                                                                                             \
    T *dp = (T *)job->direct + doff, *ap = (T *)job->indexed + aoff;                               \
    for (int64_t j = 0; j < n; j++) {                                                              \
      int64_t k = ix[j * is] - base;                                                               \
      OP(dp[j * ds], ap[k * as]);                                                                  \
    }                                                                                              \
  } while (0)
#define GATHER_OP(d, a) ((d) = (a))
#define SCATTER_OP(d, a) ((a) = (d))
#define ADD_OP(d, a) ((a) += (d))
#define ADD_WRAP_OP(d, a) ((a) = (int64_t)((uint64_t)(a) + (uint64_t)(d))) /* int64 wraps, never UB */

/* Moves of any dtype by its size. */
#define MOVE_BY_SIZE(OP)                                                                           \
  do {                                                                                             \
    if (job->elsize == 8) MOVE_LOOP(uint64_t, OP);                                                 \
    else if (job->elsize == 4) MOVE_LOOP(uint32_t, OP);                                            \
    else if (job->elsize == 2) MOVE_LOOP(uint16_t, OP);                                            \
    else MOVE_LOOP(uint8_t, OP);                                                                   \
  } while (0)

/* Line r: the r-th combination (row-major) of the coordinates other than dim. */
static void move_line(const move_job *job, int64_t r) {
  const ms_k_index_geom *g = job->g;
  int64_t io = 0, doff = 0, aoff = 0;
  for (int d = g->ndim - 1; d >= 0; d--) {
    if (d == g->dim) continue;
    int64_t c = r % g->shape[d];
    r /= g->shape[d];
    io += c * g->istride[d], doff += c * g->dstride[d], aoff += c * g->astride[d];
  }
  int dim = g->dim;
  const int64_t *ix = job->index + io;
  int64_t n = g->shape[dim], is = g->istride[dim], ds = g->dstride[dim], as = g->astride[dim], base = g->base;
  if (job->mode == MS_K_GATHER) MOVE_BY_SIZE(GATHER_OP);
  else if (job->mode == MS_K_SCATTER) MOVE_BY_SIZE(SCATTER_OP);
  else if (job->dt == MS_K_F32) MOVE_LOOP(float, ADD_OP);
  else if (job->dt == MS_K_F64) MOVE_LOOP(double, ADD_OP);
  else MOVE_LOOP(int64_t, ADD_WRAP_OP);
}

static void move_range(void *arg, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; r++) move_line(arg, r);
}

int ms_k_cpu_index_move(const ms_k_exec *x, const ms_k_index_geom *g, int mode, ms_k_dtype dt,
                        const int64_t *index, void *direct, void *indexed) {
  (void)x;
  int64_t lines = 1;
  for (int d = 0; d < g->ndim; d++)
    if (d != g->dim) lines *= g->shape[d];
  if (lines == 0 || g->shape[g->dim] == 0) return 0;
  move_job job = {g, mode, dt, ms_k_dtype_size(dt), index, direct, indexed};
  ms_k_parallel_for(lines, grain_for(g->shape[g->dim]), move_range, &job);
  return 0;
}

/* ---- sort_rows: a merge sort of positions, stable ----------------------------------------- */

typedef struct sort_job {
  const ms_k_rows *g;
  ms_k_dtype dt;
  const char *src;
  int descending;
  int64_t k;
  char *values;
  int64_t *indices;
  atomic_int failed; /* a task could not get its work buffer */
} sort_job;

/* Whether a comes strictly before b: ascending order with NaN above every number, or its
 * reverse. Equal values (two NaNs included) are not ordered, so the merge keeps their order. */
#define BEFORE_FLOAT(a, b, desc) ((desc) ? (a != a ? b == b : a > b) : (b != b ? a == a : a < b))
#define BEFORE_INT(a, b, desc) ((desc) ? a > b : a < b)

/* A row's elements as (key, position) pairs, sorted by a bottom-up merge sort through tmp: runs
 * of RUN by insertion, then merges. Both keep equal keys in their order (stable). */
enum { RUN = 16 };
#define DEFINE_SORT(name, T, BEFORE)                                                               \
  typedef struct name##_item {                                                                     \
    T key;                                                                                         \
    int64_t pos;                                                                                   \
  } name##_item;                                                                                   \
  static void name(name##_item *a, name##_item *tmp, int64_t n, int desc) {                       \
    for (int64_t lo = 0; lo < n; lo += RUN) {                                                      \
      int64_t hi = lo + RUN < n ? lo + RUN : n;                                                    \
      for (int64_t i = lo + 1; i < hi; i++) {                                                      \
        name##_item v = a[i];                                                                      \
        int64_t j = i;                                                                             \
        for (; j > lo && BEFORE(v.key, a[j - 1].key, desc); j--) a[j] = a[j - 1];                 \
        a[j] = v;                                                                                  \
      }                                                                                            \
    }                                                                                              \
    for (int64_t w = RUN; w < n; w *= 2) {                                                         \
      for (int64_t lo = 0; lo < n; lo += 2 * w) {                                                  \
        int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;               \
        int64_t i = lo, j = mid, o = lo;                                                           \
        while (i < mid && j < hi) tmp[o++] = BEFORE(a[j].key, a[i].key, desc) ? a[j++] : a[i++];   \
        while (i < mid) tmp[o++] = a[i++];                                                         \
        while (j < hi) tmp[o++] = a[j++];                                                          \
      }                                                                                            \
      memcpy(a, tmp, (size_t)n * sizeof *a);                                                       \
    }                                                                                              \
  }                                                                                                \
  /* The first k of one row (n elements `stride` apart) sorted, into values and indices, with 2n  \
   * items of work. A few of many (topk) are selected instead: the best k kept in order, each    \
   * newcomer inserted after its equals (so the result is the stable sort's first k). */         \
  static void name##_row(const T *row, int64_t n, int64_t stride, int desc, int64_t k,             \
                         name##_item *work, T *values, int64_t *indices) {                         \
    if (k * 8 <= n) {                                                                              \
      int64_t m = 0;                                                                               \
      for (int64_t i = 0; i < n; i++) {                                                            \
        T v = row[i * stride];                                                                     \
        if (m == k && !BEFORE(v, work[m - 1].key, desc)) continue;                                 \
        int64_t j = m < k ? m++ : m - 1; /* full: the last one drops out */                        \
        for (; j > 0 && BEFORE(v, work[j - 1].key, desc); j--) work[j] = work[j - 1];              \
        work[j].key = v, work[j].pos = i;                                                          \
      }                                                                                            \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) work[i].key = row[i * stride], work[i].pos = i;              \
      name(work, work + n, n, desc);                                                               \
    }                                                                                              \
    for (int64_t i = 0; i < k; i++) values[i] = work[i].key, indices[i] = work[i].pos;             \
  }
DEFINE_SORT(sort_f32, float, BEFORE_FLOAT)
DEFINE_SORT(sort_f64, double, BEFORE_FLOAT)
DEFINE_SORT(sort_i64, int64_t, BEFORE_INT)

/* The first element of row r of g, in elements. */
static int64_t row_offset(const ms_k_rows *g, int64_t r) {
  int64_t off = 0;
  for (int d = g->ndim - 1; d >= 0; d--) off += (r % g->shape[d]) * g->strides[d], r /= g->shape[d];
  return off;
}

static void sort_range(void *arg, int64_t begin, int64_t end) {
  sort_job *job = arg;
  int64_t n = job->g->n, stride = job->g->stride;
  size_t es = ms_k_dtype_size(job->dt);
  void *work = malloc((size_t)(2 * n) * 16); /* 2n items of at most 16 bytes */
  if (!work) {
    atomic_store(&job->failed, 1); /* any task's failure fails the call */
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    const char *row = job->src + row_offset(job->g, r) * (int64_t)es;
    int64_t k = job->k;
    int desc = job->descending;
    char *values = job->values + r * k * (int64_t)es;
    int64_t *indices = job->indices + r * k;
    if (job->dt == MS_K_F32) sort_f32_row((const float *)row, n, stride, desc, k, work, (float *)values, indices);
    else if (job->dt == MS_K_F64) sort_f64_row((const double *)row, n, stride, desc, k, work, (double *)values, indices);
    else sort_i64_row((const int64_t *)row, n, stride, desc, k, work, (int64_t *)values, indices);
  }
  free(work);
}

int ms_k_cpu_sort_rows(const ms_k_exec *x, const ms_k_rows *g, ms_k_dtype dt, const void *src,
                       int descending, int64_t k, void *values, int64_t *indices) {
  (void)x;
  if (g->rows == 0 || k == 0) return 0;
  sort_job job = {g, dt, src, descending, k, values, indices, 0};
  /* a row's n log n compares: rows are worth a task each sooner than a reduction's */
  ms_k_parallel_for(g->rows, g->n >= 256 ? 1 : 256 / g->n + 1, sort_range, &job);
  return atomic_load(&job.failed) ? MS_K_ERR_NO_MEMORY : 0;
}

/* ---- scan_rows ------------------------------------------------------------------------------ */

typedef struct scan_job {
  const ms_k_rows *g;
  int prod, reverse;
  ms_k_dtype dt;
  const char *src;
  char *out;
} scan_job;

static void scan_range(void *arg, int64_t begin, int64_t end) {
  const scan_job *job = arg;
  int64_t n = job->g->n, stride = job->g->stride;
  size_t es = ms_k_dtype_size(job->dt);
  for (int64_t r = begin; r < end; r++) {
    const char *row = job->src + row_offset(job->g, r) * (int64_t)es;
    char *out = job->out + r * n * (int64_t)es;
    double f = job->prod ? 1 : 0;
    uint64_t i = job->prod ? 1 : 0; /* unsigned: int64 overflow wraps instead of being undefined */
    for (int64_t s = 0; s < n; s++) {
      int64_t k = job->reverse ? n - 1 - s : s;
      const char *p = row + k * stride * (int64_t)es;
      char *o = out + k * (int64_t)es;
      if (job->dt == MS_K_F32) {
        f = job->prod ? f * *(const float *)p : f + *(const float *)p;
        *(float *)o = (float)f;
      } else if (job->dt == MS_K_F64) {
        f = job->prod ? f * *(const double *)p : f + *(const double *)p;
        *(double *)o = f;
      } else {
        uint64_t v = (uint64_t) * (const int64_t *)p;
        i = job->prod ? i * v : i + v;
        *(int64_t *)o = (int64_t)i;
      }
    }
  }
}

int ms_k_cpu_scan_rows(const ms_k_exec *x, const ms_k_rows *g, int prod, int reverse, ms_k_dtype dt,
                       const void *src, void *out) {
  (void)x;
  if (g->rows == 0 || g->n == 0) return 0;
  scan_job job = {g, prod, reverse, dt, src, out};
  ms_k_parallel_for(g->rows, grain_for(g->n), scan_range, &job);
  return 0;
}
