/* tensor.c: tensor lifetime, creation of contiguous tensors and geometry queries. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "moonshard/checked.h"
#include "moonshard/tensor_core.h"
#include "tensor_internal.h"

/* Frees a tensor's autograd state; installed by autograd (it is above the tensor core) before
 * any tensor has such state. */
static _Atomic(ms_tensor_free_fn) autograd_free;

ms_tensor_free_fn tensor_set_autograd_free(ms_tensor_free_fn fn) { return atomic_exchange(&autograd_free, fn); }

void ms_tensor_retain(ms_tensor *t) { atomic_fetch_add(&t->refcount, 1); }

static bool has_autograd_state(const ms_tensor *t) { return t->grad_fn || t->hooks || t->grad_base; }

void ms_tensor_release(ms_tensor *t) {
  if (!t || atomic_fetch_sub(&t->refcount, 1) != 1) return;
  if (has_autograd_state(t)) atomic_load(&autograd_free)(t);
  ms_tensor_release(t->grad);
  ms_storage_release(t->storage);
  free(t);
}

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d] > 0 ? shape[d] : 1;
  }
}

static ms_status check_shape(const char *op, int ndim, const int64_t *shape, int64_t *numel) {
  if (ndim < 0 || ndim > MS_MAX_DIMS)
    return ms_error(MS_ERR_ARG, "%s: a tensor has 0 to %d dimensions, got %d", op, MS_MAX_DIMS, ndim);
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 0)
      return ms_error(MS_ERR_ARG, "%s: sizes must be non-negative, got %lld at dim %d", op,
                      (long long)shape[d], d);
  if (!ms_numel_i64(ndim, shape, numel)) {
    char b[MS_SHAPE_STR_LEN];
    return ms_error(MS_ERR_ARG, "%s: shape %s is too large (more than %lld elements)", op,
                    ms_shape_str(ndim, shape, b, sizeof b), (long long)MS_MAX_NUMEL);
  }
  return MS_OK;
}

/* A tensor object over `s` (whose reference it takes over). */
static ms_tensor *tensor_wrap(ms_storage *s, ms_dtype dt, int ndim, const int64_t *shape,
                              const int64_t *strides, int64_t offset) {
  ms_tensor *t = calloc(1, sizeof *t);
  if (!t) {
    ms_storage_release(s);
    ms_error(MS_ERR_MEMORY, "out of memory: could not allocate a tensor object");
    return NULL;
  }
  atomic_init(&t->refcount, 1);
  t->dtype = dt;
  t->ndim = ndim;
  for (int d = 0; d < ndim; d++) t->shape[d] = shape[d], t->strides[d] = strides[d];
  t->offset = offset;
  t->storage = s;
  return t;
}

ms_tensor *tensor_new_contiguous_on(ms_device dev, const char *op, int ndim, const int64_t *shape,
                                    ms_dtype dt) {
  int64_t numel = 0, strides[MS_MAX_DIMS];
  if (check_shape(op, ndim, shape, &numel) != MS_OK) return NULL;
  size_t nbytes = (size_t)numel * ms_dtype_size(dt);
  ms_storage *s = ms_storage_new_on(dev, nbytes, MS_MEM_OTHER);
  if (!s && dev.type == MS_CUDA) return NULL; /* the allocator's message says why */
  if (!s) {
    char b[MS_SHAPE_STR_LEN];
    ms_error(MS_ERR_MEMORY, "%s: out of memory: could not allocate %zu bytes for a %s tensor of "
             "shape %s", op, nbytes, ms_dtype_name(dt), ms_shape_str(ndim, shape, b, sizeof b));
    return NULL;
  }
  contiguous_strides(ndim, shape, strides);
  return tensor_wrap(s, dt, ndim, shape, strides, 0);
}

static ms_tensor *new_contiguous(const char *op, int ndim, const int64_t *shape, ms_dtype dt) {
  return tensor_new_contiguous_on((ms_device){MS_CPU, 0}, op, ndim, shape, dt);
}

ms_tensor *ms_tensor_new_empty(int ndim, const int64_t *shape, ms_dtype dt) {
  return new_contiguous("empty", ndim, shape, dt);
}

ms_tensor *ms_tensor_new_empty_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt) {
  return tensor_new_contiguous_on(device, "empty", ndim, shape, dt);
}

ms_tensor *ms_tensor_new_full(int ndim, const int64_t *shape, ms_dtype dt, double value) {
  ms_tensor *t = new_contiguous("full", ndim, shape, dt);
  if (t) ms_k_fill(ms_tensor_numel(t), ms_tensor_data(t), (ms_k_dtype)dt, 1, value);
  return t;
}

ms_tensor *ms_tensor_new_zeros(int ndim, const int64_t *shape, ms_dtype dt) {
  ms_tensor *t = new_contiguous("zeros", ndim, shape, dt);
  if (t) memset(ms_tensor_data(t), 0, (size_t)ms_tensor_numel(t) * ms_dtype_size(dt));
  return t;
}

ms_tensor *ms_tensor_new_scalar(double value, ms_dtype dt) {
  return ms_tensor_new_full(0, NULL, dt, value);
}

ms_tensor *ms_tensor_new_view(ms_storage *s, ms_dtype dt, int ndim, const int64_t *shape,
                              const int64_t *strides, int64_t offset) {
  int64_t numel, lo = offset, hi = offset;
  if (check_shape("view", ndim, shape, &numel) != MS_OK) return NULL;
  for (int d = 0; d < ndim && numel > 0; d++) {
    int64_t span, *end = strides[d] < 0 ? &lo : &hi; /* the side this dim's span extends */
    if (!ms_mul_i64(shape[d] - 1, strides[d], &span) || !ms_add_i64(*end, span, end))
      return ms_error(MS_ERR_ARG, "view: stride %lld at dim %d reaches past any storage", (long long)strides[d], d), NULL;
  }
  size_t cap = s->nbytes / ms_dtype_size(dt);
  if (numel > 0 && (lo < 0 || (uint64_t)hi >= cap))
    return ms_error(MS_ERR_ARG, "view: elements %lld..%lld lie outside a storage of %zu elements",
                    (long long)lo, (long long)hi, cap), NULL;
  ms_storage_retain(s);
  return tensor_wrap(s, dt, ndim, shape, strides, offset);
}

ms_tensor *ms_tensor_new_from_data(void *data, ms_dtype dt, int ndim, const int64_t *shape,
                                   ms_storage_deleter deleter, void *ctx) {
  int64_t numel, strides[MS_MAX_DIMS];
  if (check_shape("from_data", ndim, shape, &numel) != MS_OK) return NULL;
  ms_storage *s = ms_storage_new_external(data, (size_t)numel * ms_dtype_size(dt), deleter, ctx);
  if (!s) return NULL;
  contiguous_strides(ndim, shape, strides);
  return tensor_wrap(s, dt, ndim, shape, strides, 0);
}

ms_tensor *ms_tensor_new_arange(double start, double end, double step, ms_dtype dt) {
  if (step == 0 || !isfinite(step) || !isfinite(start) || !isfinite(end))
    return ms_error(MS_ERR_ARG, "arange: step must be non-zero and bounds finite, got start=%g end=%g step=%g",
                    start, end, step), NULL;
  if ((end - start) / step < 0)
    return ms_error(MS_ERR_ARG, "arange: upper bound and larger bound inconsistent with step sign "
                    "(start=%g, end=%g, step=%g)", start, end, step), NULL;
  double count = ceil((end - start) / step);
  if (!(count < 0x1p62)) /* also keeps the conversion below defined */
    return ms_error(MS_ERR_ARG, "arange: start=%g, end=%g, step=%g gives too many elements (%g)",
                    start, end, step, count), NULL;
  int64_t n = (int64_t)count;
  ms_tensor *t = new_contiguous("arange", 1, &n, dt);
  if (!t) return NULL;
  for (int64_t i = 0; i < n; i++) ms_tensor_set_flat(t, i, start + (double)i * step);
  return t;
}

ms_tensor *ms_tensor_new_linspace(double start, double end, int64_t steps, ms_dtype dt) {
  if (steps < 0) return ms_error(MS_ERR_ARG, "linspace: steps must be non-negative, got %lld", (long long)steps), NULL;
  ms_tensor *t = new_contiguous("linspace", 1, &steps, dt);
  if (!t) return NULL;
  double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0;
  /* Fill from both ends as PyTorch does, so the last value is exactly `end` (one step: start). */
  int64_t half = steps > 1 ? steps / 2 : steps;
  for (int64_t i = 0; i < steps; i++)
    ms_tensor_set_flat(t, i, i < half ? start + step * (double)i : end - step * (double)(steps - 1 - i));
  return t;
}

ms_tensor *ms_tensor_new_eye(int64_t n, int64_t m, ms_dtype dt) {
  int64_t shape[2] = {n, m < 0 ? n : m};
  ms_tensor *t = new_contiguous("eye", 2, shape, dt);
  if (!t) return NULL;
  memset(ms_tensor_data(t), 0, (size_t)ms_tensor_numel(t) * ms_dtype_size(dt));
  for (int64_t i = 0; i < shape[0] && i < shape[1]; i++) ms_tensor_set_flat(t, i * shape[1] + i, 1);
  return t;
}

int64_t ms_tensor_numel(const ms_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

bool ms_tensor_is_contiguous(const ms_tensor *t) {
  int64_t s = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] == 0) return true;
    if (t->shape[d] != 1 && t->strides[d] != s) return false;
    s *= t->shape[d];
  }
  return true;
}

void *ms_tensor_data(const ms_tensor *t) {
  if (!t->storage->data) return NULL;
  return (char *)t->storage->data + t->offset * (int64_t)ms_dtype_size(t->dtype);
}

ms_status ms_tensor_check_data_any(const char *op, const ms_tensor *t) {
  if (t->storage->device.type == MS_META) return ms_meta_no_data(op);
  if (t->storage->data || ms_tensor_numel(t) == 0) return MS_OK;
  return ms_error(MS_ERR_RUNTIME, "%s: the tensor's storage has been released (its data is not "
                  "materialized)", op);
}

ms_status ms_tensor_check_data(const char *op, const ms_tensor *t) {
  if (t->storage->device.type == MS_CUDA)
    return ms_error(MS_ERR_RUNTIME, "%s: not implemented for CUDA tensors yet (move the tensor "
                    "with :cpu() first)", op);
  return ms_tensor_check_data_any(op, t);
}

const char *ms_shape_str(int ndim, const int64_t *shape, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len, "(");
  for (int d = 0; d < ndim && used < len; d++)
    used += (size_t)snprintf(buf + used, len - used, d ? ", %lld" : "%lld", (long long)shape[d]);
  if (used < len) snprintf(buf + used, len - used, ndim == 1 ? ",)" : ")");
  return buf;
}

ms_status ms_dim_normalize(const char *op, const char *arg, int64_t dim, int ndim, int *out) {
  int n = ndim > 0 ? ndim : 1; /* a 0-dim tensor accepts dim 0 and -1, as PyTorch does */
  if (dim < -n || dim >= n)
    return ms_error(MS_ERR_ARG, "%s: %s out of range: expected a dim in [%d, %d], got %lld", op,
                    arg, -n, n - 1, (long long)dim);
  *out = (int)(dim < 0 ? dim + n : dim);
  return MS_OK;
}

void ms_tensor_bump_version(ms_tensor *t) { atomic_fetch_add(&t->storage->version, 1); }

int ms_tensor_version(const ms_tensor *t) { return atomic_load(&t->storage->version); }
