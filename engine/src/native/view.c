/* native/view.c: views that share their source's storage: view, narrow, select, transpose,
 * permute, squeeze, unsqueeze, expand, flatten (reshape copies when the strides do not allow a
 * view). Each returns a new reference. The public ops, which record one node for the whole op,
 * are autograd/grad_view.c's. */
#include <string.h>

#include "moonshard/checked.h"
#include "native/native.h"

static ms_tensor *make_view(ms_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                            int64_t offset) {
  return ms_tensor_new_view(t->storage, t->dtype, ndim, shape, strides, offset);
}

/* Replaces one -1 in shape by the size that keeps numel; checks the product. */
static ms_status infer_shape(const char *op, const ms_tensor *t, int ndim, const int64_t *shape,
                             int64_t *out) {
  int64_t known = 1, numel = ms_tensor_numel(t);
  int infer = -1;
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  if (ndim > MS_MAX_DIMS)
    return ms_error(MS_ERR_ARG, "%s: at most %d dimensions, got %d", op, MS_MAX_DIMS, ndim);
  for (int d = 0; d < ndim; d++) {
    out[d] = shape[d];
    if (shape[d] == -1) {
      if (infer >= 0) return ms_error(MS_ERR_ARG, "%s: only one dimension can be inferred (-1)", op);
      infer = d;
    } else if (shape[d] < 0) {
      return ms_error(MS_ERR_ARG, "%s: invalid size %lld at dim %d", op, (long long)shape[d], d);
    } else if (!ms_mul_i64(known, shape[d], &known) || known > MS_MAX_NUMEL) {
      return ms_error(MS_ERR_ARG, "%s: shape %s is too large (more than %lld elements)", op,
                      ms_shape_str(ndim, shape, b1, sizeof b1), (long long)MS_MAX_NUMEL);
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return ms_error(MS_ERR_ARG, "%s: shape %s is invalid for input of size %lld", op,
                      ms_shape_str(ndim, shape, b1, sizeof b1), (long long)numel);
    out[infer] = numel / known;
  } else if (known != numel) {
    return ms_error(MS_ERR_ARG, "%s: shape %s is invalid for input of size %lld (shape %s)", op,
                    ms_shape_str(ndim, shape, b1, sizeof b1), (long long)numel,
                    ms_shape_str(t->ndim, t->shape, b2, sizeof b2));
  }
  return MS_OK;
}

/* Strides for viewing t as `shape` without a copy, if its strides allow. Old dims are walked
 * from the innermost in groups that are contiguous among themselves; each group must be
 * covered exactly by a run of new dims, which then step within the group. */
static bool view_strides(const ms_tensor *t, int ndim, const int64_t *shape, int64_t *strides) {
  if (ms_tensor_numel(t) == 0 || t->ndim == 0) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) strides[d] = s, s *= shape[d] ? shape[d] : 1;
    return true;
  }
  int nd = ndim - 1;
  int64_t base = t->strides[t->ndim - 1], group_numel = 1, view_numel = 1;
  for (int od = t->ndim - 1; od >= 0; od--) {
    group_numel *= t->shape[od];
    bool group_ends = od == 0 || (t->shape[od - 1] != 1 && t->strides[od - 1] != group_numel * base);
    if (!group_ends) continue;
    while (nd >= 0 && (view_numel < group_numel || shape[nd] == 1)) {
      strides[nd] = view_numel * base;
      view_numel *= shape[nd];
      nd--;
    }
    if (view_numel != group_numel) return false;
    if (od > 0) base = t->strides[od - 1], group_numel = 1, view_numel = 1;
  }
  return nd == -1;
}

ms_tensor *native_view(ms_tensor *t, int ndim, const int64_t *shape) {
  int64_t sh[MS_MAX_DIMS], st[MS_MAX_DIMS];
  if (infer_shape("view", t, ndim, shape, sh) != MS_OK) return NULL;
  if (!view_strides(t, ndim, sh, st)) {
    char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
    return ms_error(MS_ERR_ARG, "view: size %s is not compatible with the input's size %s and "
                    "strides (at least one dimension spans two contiguous subspaces); use reshape",
                    ms_shape_str(ndim, sh, b1, sizeof b1), ms_shape_str(t->ndim, t->shape, b2, sizeof b2)), NULL;
  }
  return make_view(t, ndim, sh, st, t->offset);
}

ms_tensor *native_reshape(ms_tensor *t, int ndim, const int64_t *shape) {
  int64_t sh[MS_MAX_DIMS], st[MS_MAX_DIMS];
  if (infer_shape("reshape", t, ndim, shape, sh) != MS_OK) return NULL;
  if (view_strides(t, ndim, sh, st)) return make_view(t, ndim, sh, st, t->offset);
  ms_tensor *c = native_contiguous(t);
  if (!c) return NULL;
  ms_tensor *v = native_view(c, ndim, sh);
  ms_tensor_release(c);
  return v;
}

ms_tensor *native_narrow(ms_tensor *t, int dim, int64_t start, int64_t length) {
  if (ms_dim_normalize("narrow", "dim", dim, t->ndim, &dim) != MS_OK) return NULL;
  if (t->ndim == 0) return ms_error(MS_ERR_ARG, "narrow: cannot narrow a 0-dim tensor"), NULL;
  int64_t size = t->shape[dim];
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start > size || length > size - start)
    return ms_error(MS_ERR_ARG, "narrow: start %lld + length %lld exceeds dimension size %lld",
                    (long long)start, (long long)length, (long long)size), NULL;
  int64_t shape[MS_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[dim] = length;
  return make_view(t, t->ndim, shape, t->strides, t->offset + start * t->strides[dim]);
}

ms_tensor *native_select(ms_tensor *t, int dim, int64_t index) {
  if (t->ndim == 0) return ms_error(MS_ERR_ARG, "select: cannot index a 0-dim tensor"), NULL;
  if (ms_dim_normalize("select", "dim", dim, t->ndim, &dim) != MS_OK) return NULL;
  int64_t size = t->shape[dim];
  if (index < -size || index >= size)
    return ms_error(MS_ERR_ARG, "select: index %lld is out of bounds for dimension %d with size %lld",
                    (long long)index, dim, (long long)size), NULL;
  if (index < 0) index += size;
  int64_t shape[MS_MAX_DIMS], strides[MS_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < t->ndim; d++)
    if (d != dim) shape[nd] = t->shape[d], strides[nd++] = t->strides[d];
  return make_view(t, nd, shape, strides, t->offset + index * t->strides[dim]);
}

ms_tensor *native_transpose(ms_tensor *t, int dim0, int dim1) {
  if (ms_dim_normalize("transpose", "dim0", dim0, t->ndim, &dim0) != MS_OK ||
      ms_dim_normalize("transpose", "dim1", dim1, t->ndim, &dim1) != MS_OK)
    return NULL;
  if (t->ndim == 0) return make_view(t, 0, NULL, NULL, t->offset);
  int64_t shape[MS_MAX_DIMS], strides[MS_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  memcpy(strides, t->strides, sizeof strides);
  shape[dim0] = t->shape[dim1], shape[dim1] = t->shape[dim0];
  strides[dim0] = t->strides[dim1], strides[dim1] = t->strides[dim0];
  return make_view(t, t->ndim, shape, strides, t->offset);
}

ms_tensor *native_permute(ms_tensor *t, const int *dims) {
  int64_t shape[MS_MAX_DIMS], strides[MS_MAX_DIMS];
  bool seen[MS_MAX_DIMS] = {false};
  for (int d = 0; d < t->ndim; d++) {
    int src;
    if (ms_dim_normalize("permute", "dims", dims[d], t->ndim, &src) != MS_OK) return NULL;
    if (seen[src]) return ms_error(MS_ERR_ARG, "permute: dim %d appears more than once in dims", src), NULL;
    seen[src] = true;
    shape[d] = t->shape[src];
    strides[d] = t->strides[src];
  }
  return make_view(t, t->ndim, shape, strides, t->offset);
}

ms_tensor *native_squeeze(ms_tensor *t, int dim) {
  if (ms_dim_normalize("squeeze", "dim", dim, t->ndim, &dim) != MS_OK) return NULL;
  if (t->ndim == 0 || t->shape[dim] != 1) return make_view(t, t->ndim, t->shape, t->strides, t->offset);
  return native_select(t, dim, 0);
}

ms_tensor *native_squeeze_all(ms_tensor *t) {
  int64_t shape[MS_MAX_DIMS], strides[MS_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] != 1) shape[nd] = t->shape[d], strides[nd++] = t->strides[d];
  return make_view(t, nd, shape, strides, t->offset);
}

ms_tensor *native_unsqueeze(ms_tensor *t, int dim) {
  if (ms_dim_normalize("unsqueeze", "dim", dim, t->ndim + 1, &dim) != MS_OK) return NULL;
  if (t->ndim >= MS_MAX_DIMS) return ms_error(MS_ERR_ARG, "unsqueeze: at most %d dimensions", MS_MAX_DIMS), NULL;
  int64_t shape[MS_MAX_DIMS], strides[MS_MAX_DIMS];
  for (int d = 0, s = 0; d <= t->ndim; d++) {
    if (d == dim) {
      shape[d] = 1;
      strides[d] = s < t->ndim ? t->strides[s] * t->shape[s] : 1;
    } else {
      shape[d] = t->shape[s], strides[d] = t->strides[s], s++;
    }
  }
  return make_view(t, t->ndim + 1, shape, strides, t->offset);
}

ms_tensor *native_expand(ms_tensor *t, int ndim, const int64_t *shape) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  if (ndim < t->ndim || ndim > MS_MAX_DIMS)
    return ms_error(MS_ERR_ARG, "expand: the number of sizes (%d) must be at least the tensor's "
                    "number of dimensions (%d)", ndim, t->ndim), NULL;
  int64_t sh[MS_MAX_DIMS], st[MS_MAX_DIMS];
  int lead = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) {
    int src = d - lead;
    int64_t have = src >= 0 ? t->shape[src] : 1;
    int64_t want = shape[d] == -1 && src >= 0 ? have : shape[d];
    if (want < 0 || (have != want && have != 1)) /* dim counted from the end: 0- or 1-based alike */
      return ms_error(MS_ERR_ARG, "expand: the expanded size %lld must match the existing size "
                      "%lld at non-singleton dim %d (target %s, tensor %s)", (long long)shape[d],
                      (long long)have, d - ndim, ms_shape_str(ndim, shape, b1, sizeof b1),
                      ms_shape_str(t->ndim, t->shape, b2, sizeof b2)), NULL;
    sh[d] = want;
    st[d] = src >= 0 && have == want ? t->strides[src] : 0;
  }
  return make_view(t, ndim, sh, st, t->offset);
}

ms_tensor *native_flatten(ms_tensor *t, int start_dim, int end_dim) {
  if (t->ndim == 0) return native_reshape(t, 1, (int64_t[]){1});
  if (ms_dim_normalize("flatten", "start_dim", start_dim, t->ndim, &start_dim) != MS_OK ||
      ms_dim_normalize("flatten", "end_dim", end_dim, t->ndim, &end_dim) != MS_OK)
    return NULL;
  if (start_dim > end_dim)
    return ms_error(MS_ERR_ARG, "flatten: start_dim (%d) cannot come after end_dim (%d)", start_dim, end_dim), NULL;
  int64_t shape[MS_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (d > start_dim && d <= end_dim) shape[nd - 1] *= t->shape[d];
    else shape[nd++] = t->shape[d];
  }
  return native_reshape(t, nd, shape);
}
