/* reduce.c: reductions of one strided row in float32, float64 or int64 (sums also bfloat16 and
 * float16, widened a run at a time). Floating sums accumulate in double so a float32 sum of a
 * million elements keeps its digits. Sums over an outer dim go to reduce_cols.c. */
#include <math.h>

#include "kernels/cpu/reduce_cols.h"
#include "kernels/kernel_table.h"

static double load(ms_k_dtype dt, const void *src, int64_t i) {
  return dt == MS_K_F32 ? ((const float *)src)[i] : ((const double *)src)[i];
}

/* The sum of squares of n contiguous float32 or float64 (a 2-norm: clip_grad_norm's), in
 * independent partial sums that vectorise as RSUM's do. */
static double sum_squares(ms_k_dtype dt, int64_t n, const void *src) {
  double acc[8] = {0}, s = 0;
  int64_t i = 0;
  if (dt == MS_K_F32) {
    const float *x = src;
    for (; i + 8 <= n; i += 8)
      for (int k = 0; k < 8; k++) acc[k] += (double)x[i + k] * x[i + k];
    for (; i < n; i++) s += (double)x[i] * x[i];
  } else {
    const double *x = src;
    for (; i + 8 <= n; i += 8)
      for (int k = 0; k < 8; k++) acc[k] += x[i + k] * x[i + k];
    for (; i < n; i++) s += x[i] * x[i];
  }
  for (int k = 0; k < 8; k++) s += acc[k];
  return s;
}

static void reduce_float(ms_k_redop op, ms_k_dtype dt, int64_t n, const void *src, int64_t stride,
                         double p, ms_k_reduce_result *out) {
  switch (op) {
  case MS_K_RSUM: {
    double s = 0;
    if (dt == MS_K_F32 && stride == 1) {
      const float *x = src;
      double acc[8] = {0}; /* independent partial sums: vectorises and reduces rounding error */
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += x[i + k];
      for (; i < n; i++) s += x[i];
      for (int k = 0; k < 8; k++) s += acc[k];
    } else {
      for (int64_t i = 0; i < n; i++) s += load(dt, src, i * stride);
    }
    out->f = s;
    break;
  }
  case MS_K_RPROD: {
    double s = 1;
    for (int64_t i = 0; i < n; i++) s *= load(dt, src, i * stride);
    out->f = s;
    break;
  }
  case MS_K_RMAX: case MS_K_RMIN: case MS_K_RARGMAX: case MS_K_RARGMIN: {
    int want_max = op == MS_K_RMAX || op == MS_K_RARGMAX;
    double best = load(dt, src, 0);
    int64_t at = 0;
    for (int64_t i = 1; i < n && best == best; i++) {
      double v = load(dt, src, i * stride);
      if (v != v || (want_max ? v > best : v < best)) best = v, at = i;
    }
    out->f = best;
    out->index = at;
    break;
  }
  case MS_K_RMOMENTS: {
    double mean = 0, m2 = 0;
    for (int64_t i = 0; i < n; i++) {
      double v = load(dt, src, i * stride), d = v - mean;
      mean += d / (double)(i + 1);
      m2 += d * (v - mean);
    }
    out->f = mean;
    out->m2 = m2;
    break;
  }
  case MS_K_RPOWSUM: {
    if (p == 2 && stride == 1) {
      out->f = sum_squares(dt, n, src);
      break;
    }
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
      double v = fabs(load(dt, src, i * stride));
      if (isinf(p)) s = (v > s || v != v) ? v : s;
      else if (p == 2) s += v * v;
      else if (p == 1) s += v;
      else if (p == 0) s += v != 0;
      else s += pow(v, p);
    }
    out->f = s;
    break;
  }
  }
}

static void reduce_int(ms_k_redop op, int64_t n, const int64_t *x, int64_t stride,
                       ms_k_reduce_result *out) {
  switch (op) {
  case MS_K_RSUM: {
    uint64_t s = 0;
    for (int64_t i = 0; i < n; i++) s += (uint64_t)x[i * stride];
    out->i = (int64_t)s;
    break;
  }
  case MS_K_RPROD: {
    uint64_t s = 1;
    for (int64_t i = 0; i < n; i++) s *= (uint64_t)x[i * stride];
    out->i = (int64_t)s;
    break;
  }
  case MS_K_RMAX: case MS_K_RMIN: case MS_K_RARGMAX: case MS_K_RARGMIN: {
    int want_max = op == MS_K_RMAX || op == MS_K_RARGMAX;
    int64_t best = x[0], at = 0;
    for (int64_t i = 1; i < n; i++) {
      int64_t v = x[i * stride];
      if (want_max ? v > best : v < best) best = v, at = i;
    }
    out->i = best;
    out->index = at;
    break;
  }
  case MS_K_RMOMENTS: case MS_K_RPOWSUM: break; /* floating only: the engine converts first */
  }
}

void ms_k_reduce_row(ms_k_redop op, ms_k_dtype dt, int64_t n, const void *src, int64_t stride,
                     double p, ms_k_reduce_result *out) {
  if (dt == MS_K_I64) reduce_int(op, n, src, stride, out);
  else reduce_float(op, dt, n, src, stride, p, out);
}

/* The sum of a bfloat16 or float16 row: runs widened to float32 (ms_k_cast's vector conversions),
 * each summed as a float32 row is. */
static void sum_half_row(ms_k_dtype dt, int64_t n, const char *src, int64_t stride, ms_k_reduce_result *out) {
  enum { RUN = 1024 };
  float buf[RUN];
  double s = 0;
  for (int64_t i = 0; i < n; i += RUN) {
    int64_t k = n - i < RUN ? n - i : RUN;
    ms_k_reduce_result r = {0};
    ms_k_cast(k, buf, MS_K_F32, 1, src + i * stride * 2, dt, stride);
    ms_k_reduce_row(MS_K_RSUM, MS_K_F32, k, buf, 1, 0, &r);
    s += r.f;
  }
  out->f = s;
}

/* ---- the table's bodies: every row of a geometry, rows spread over the thread pool ---- */

typedef struct rows_job {
  const ms_k_rows *g;
  ms_k_redop op;
  ms_k_dtype dt;
  const char *src;
  char *out;
  ms_k_dtype out_dt;
  int64_t *indices;
  int mean;
  const ms_k_stat *st; /* reduce_stat_rows; NULL for reduce_rows */
} rows_job;

/* The first element of row r. */
static const char *row_start(const rows_job *job, int64_t r) {
  const ms_k_rows *g = job->g;
  int64_t off = 0;
  for (int d = g->ndim - 1; d >= 0; d--) off += (r % g->shape[d]) * g->strides[d], r /= g->shape[d];
  return job->src + off * (int64_t)ms_k_dtype_size(job->dt);
}

/* The value of a stat row from its accumulators: var / std over n - correction, or the p-th root
 * of a p-norm's sum. */
static double finish_stat(const ms_k_stat *st, int64_t n, const ms_k_reduce_result *r) {
  if (st->op == MS_K_RMOMENTS) {
    double dof = (double)n - st->correction;
    double var = dof > 0 ? r->m2 / dof : NAN; /* too few elements for the correction */
    return st->root ? sqrt(var) : var;
  }
  double p = st->p;
  if (isinf(p) || p == 0 || p == 1) return r->f;
  return p == 2 ? sqrt(r->f) : pow(r->f, 1.0 / p);
}

/* The value of a plain row: an int64 sum, product or extreme stays an int64 (a double would
 * round it); the arg ops give the position; mean divides the sum by n. */
static void store_row(const rows_job *job, int64_t r, const ms_k_reduce_result *res) {
  char *dst = job->out + r * (int64_t)ms_k_dtype_size(job->out_dt);
  bool arg = job->op == MS_K_RARGMAX || job->op == MS_K_RARGMIN;
  if (job->dt == MS_K_I64 && !job->mean && !arg) {
    ms_k_cast(1, dst, job->out_dt, 1, &res->i, MS_K_I64, 1);
    return;
  }
  double v = arg ? (double)res->index : job->mean ? res->f / (double)job->g->n : res->f;
  ms_k_cast(1, dst, job->out_dt, 1, &v, MS_K_F64, 1);
}

static void rows_range(void *arg, int64_t begin, int64_t end) {
  const rows_job *job = arg;
  int64_t n = job->g->n;
  bool extreme = job->op == MS_K_RMAX || job->op == MS_K_RMIN || job->op == MS_K_RARGMAX || job->op == MS_K_RARGMIN;
  for (int64_t r = begin; r < end; r++) {
    ms_k_reduce_result res = {0};
    if (job->dt == MS_K_BF16 || job->dt == MS_K_F16) sum_half_row(job->dt, n, row_start(job, r), job->g->stride, &res);
    else if (n > 0 || !extreme) ms_k_reduce_row(job->op, job->dt, n, row_start(job, r), job->g->stride,
                                           job->st ? job->st->p : 0, &res);
    if (n == 0 && job->op == MS_K_RPROD) res.f = 1, res.i = 1;
    if (job->st) {
      double v = finish_stat(job->st, n, &res);
      ms_k_cast(1, job->out + r * (int64_t)ms_k_dtype_size(job->out_dt), job->out_dt, 1, &v, MS_K_F64, 1);
    } else {
      store_row(job, r, &res);
    }
    if (job->indices) job->indices[r] = res.index;
  }
}

static void run_rows(rows_job *job) {
  /* Long rows are worth a thread each; short rows are grouped. */
  int64_t n = job->g->n, grain = n >= 4096 ? 1 : 4096 / (n + 1) + 1;
  ms_k_parallel_for(job->g->rows, grain, rows_range, job);
}

int ms_k_cpu_reduce_rows(const ms_k_exec *x, const ms_k_rows *g, ms_k_redop op, ms_k_dtype dt,
                         const void *src, int mean, void *out, ms_k_dtype out_dt, int64_t *indices) {
  (void)x;
  if (op == MS_K_RSUM && ms_k_reduce_cols(g, dt, src, mean, out, out_dt)) return 0;
  rows_job job = {g, op, dt, src, out, out_dt, indices, mean, NULL};
  run_rows(&job);
  return 0;
}

int ms_k_cpu_reduce_stat_rows(const ms_k_exec *x, const ms_k_rows *g, const ms_k_stat *st, ms_k_dtype dt,
                              const void *src, void *out, ms_k_dtype out_dt) {
  (void)x;
  rows_job job = {g, st->op, dt, src, out, out_dt, NULL, 0, st};
  run_rows(&job);
  return 0;
}
