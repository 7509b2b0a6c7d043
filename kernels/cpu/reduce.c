/* reduce.c: reductions of one strided row in float32, float64 or int64. Floating sums
 * accumulate in double so a float32 sum of a million elements keeps its digits. */
#include <math.h>

#include "kernels/kernels.h"

static double load(ms_k_dtype dt, const void *src, int64_t i) {
  return dt == MS_K_F32 ? ((const float *)src)[i] : ((const double *)src)[i];
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
