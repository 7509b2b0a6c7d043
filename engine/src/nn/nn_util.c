/* nn_util.c: the checks and conversions that the NN ops share (nn_internal.h). */
#include "native/dispatch.h"
#include "nn/nn_internal.h"

ms_status nn_check_float_any(const char *op, const char *arg, const ms_tensor *t) {
  if (t->dtype != MS_FLOAT32 && t->dtype != MS_FLOAT64)
    return ms_error(MS_ERR_ARG, "%s: %s must be float32 or float64, got %s", op, arg,
                    ms_dtype_name(t->dtype));
  return ms_tensor_check_data_any(op, t);
}

ms_status nn_check_float_or_bf16_any(const char *op, const char *arg, const ms_tensor *t) {
  if (t->dtype == MS_BFLOAT16) return ms_tensor_check_data_any(op, t);
  return nn_check_float_any(op, arg, t);
}


ms_status nn_check_float_or_half_any(const char *op, const char *arg, const ms_tensor *t) {
  if (!ms_dtype_is_half(t->dtype) && t->dtype != MS_FLOAT32 && t->dtype != MS_FLOAT64)
    return ms_error(MS_ERR_ARG, "%s: %s must be float32, float64, bfloat16 or float16, got %s", op, arg,
                    ms_dtype_name(t->dtype));
  return ms_tensor_check_data_any(op, t);
}

ms_dtype nn_stat_dtype(ms_dtype dt) { return ms_dtype_is_half(dt) ? MS_FLOAT32 : dt; }

ms_status nn_check_float(const char *op, const char *arg, const ms_tensor *t) {
  ms_status st = nn_check_float_any(op, arg, t);
  return st == MS_OK ? ms_tensor_check_data(op, t) : st;
}

ms_status nn_check_param(const char *op, const char *arg, const ms_tensor *t, ms_dtype dt,
                            int64_t n) {
  ms_status st = nn_check_param_any(op, arg, t, dt, n);
  return st == MS_OK && t ? ms_tensor_check_data(op, t) : st;
}

ms_status nn_check_param_any(const char *op, const char *arg, const ms_tensor *t, ms_dtype dt,
                                int64_t n) {
  if (!t) return MS_OK;
  char buf[MS_SHAPE_STR_LEN];
  if (t->dtype != dt)
    return ms_error(MS_ERR_ARG, "%s: %s must have the input's dtype %s, got %s", op, arg,
                    ms_dtype_name(dt), ms_dtype_name(t->dtype));
  if (n >= 0 && (t->ndim != 1 || t->shape[0] != n))
    return ms_error(MS_ERR_ARG, "%s: %s must have shape (%lld,), got %s", op, arg, (long long)n,
                    ms_shape_str(t->ndim, t->shape, buf, sizeof buf));
  return ms_tensor_check_data_any(op, t);
}

ms_status nn_check_index_tensor_any(const char *op, const char *arg, const ms_tensor *t) {
  if (t->dtype != MS_INT64)
    return ms_error(MS_ERR_ARG, "%s: %s must be an int64 tensor, got %s (convert with :long())",
                    op, arg, ms_dtype_name(t->dtype));
  return ms_tensor_check_data_any(op, t);
}

ms_status nn_check_index_tensor(const char *op, const char *arg, const ms_tensor *t) {
  ms_status st = nn_check_index_tensor_any(op, arg, t);
  return st == MS_OK ? ms_tensor_check_data(op, t) : st;
}

void nn_split(const ms_tensor *t, int dim, int64_t *outer, int64_t *size, int64_t *inner) {
  *outer = 1, *inner = 1, *size = t->ndim ? t->shape[dim] : 1;
  for (int d = 0; d < dim; d++) *outer *= t->shape[d];
  for (int d = dim + 1; d < t->ndim; d++) *inner *= t->shape[d];
}

ms_tensor *nn_contiguous(ms_tensor *t, ms_dtype dt) {
  ms_tensor *d = native_to_dtype(t, dt);
  ms_tensor *c = d ? native_contiguous(d) : NULL;
  ms_tensor_release(d);
  return c;
}

ms_status nn_softmax_rows(const char *op, ms_tensor *x, ms_tensor *y, int64_t outer, int64_t C, int64_t inner,
                             bool log) {
  native_kernels nk;
  if (native_kernels_for(op, ms_tensor_device(x), &nk) != MS_OK) return MS_ERR_RUNTIME;
  return native_kernel_status(&nk, nk.k->softmax(&nk.x, nn_kdtype(x->dtype), outer, C, inner, ms_tensor_data(x),
                                                 ms_tensor_data(y), log));
}

void nn_release_all(int n, ms_tensor **ts) {
  for (int i = 0; i < n; i++) {
    ms_tensor_release(ts[i]);
    ts[i] = NULL;
  }
}
