/* tensor_copy.c: copying between tensors (with broadcasting and dtype conversion), contiguous,
 * clone, fill, and single-element access. */
#include <string.h>

#include "kernels/kernels.h"
#include "moonshard/tensor.h"
#include "tensor_iter.h"

typedef struct cast_ctx {
  ms_dtype dst, src;
} cast_ctx;

static void cast_row(void *arg, int64_t n, char **p, const int64_t *s) {
  const cast_ctx *c = arg;
  ms_k_cast(n, p[0], (ms_k_dtype)c->dst, s[0], p[1], (ms_k_dtype)c->src, s[1]);
}

/* Copies src (already of dst's shape) into dst; both materialized and non-overlapping. */
static void copy_same_shape(ms_tensor *dst, ms_tensor *src) {
  ms_iter it;
  ms_tensor *ops[2] = {dst, src};
  ms_iter_init(&it, dst->ndim, dst->shape, 2, ops);
  cast_ctx c = {dst->dtype, src->dtype};
  ms_iter_run(&it, cast_row, &c);
}

ms_status ms_tensor_copy_(ms_tensor *dst, ms_tensor *src) {
  if (ms_tensor_check_data("copy_", dst) || ms_tensor_check_data("copy_", src)) return MS_ERR_RUNTIME;
  ms_tensor *b = ms_tensor_expand(src, dst->ndim, dst->shape);
  if (!b) {
    char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
    return ms_error(MS_ERR_ARG, "copy_: source of shape %s cannot be broadcast to destination %s",
                    ms_shape_str(src->ndim, src->shape, b1, sizeof b1),
                    ms_shape_str(dst->ndim, dst->shape, b2, sizeof b2));
  }
  if (b->storage == dst->storage) { /* overlapping: read from a private copy */
    ms_tensor *c = ms_tensor_clone(b);
    ms_tensor_release(b);
    if (!(b = c)) return MS_ERR_MEMORY;
  }
  copy_same_shape(dst, b);
  ms_tensor_release(b);
  ms_tensor_bump_version(dst);
  return MS_OK;
}

/* A new contiguous tensor of dtype dt holding t's values. */
static ms_tensor *copy_as(ms_tensor *t, ms_dtype dt) {
  if (ms_tensor_check_data("copy", t) != MS_OK) return NULL;
  ms_tensor *out = ms_tensor_new_empty(t->ndim, t->shape, dt);
  if (out) copy_same_shape(out, t);
  return out;
}

ms_tensor *ms_tensor_to_dtype(ms_tensor *t, ms_dtype dt) {
  if (t->dtype == dt) return ms_tensor_retain(t), t;
  return copy_as(t, dt);
}

ms_tensor *ms_tensor_contiguous(ms_tensor *t) {
  if (ms_tensor_is_contiguous(t)) return ms_tensor_retain(t), t;
  return copy_as(t, t->dtype);
}

ms_tensor *ms_tensor_clone(ms_tensor *t) { return copy_as(t, t->dtype); }

typedef struct fill_ctx {
  ms_dtype dt;
  double value;
} fill_ctx;

static void fill_row(void *arg, int64_t n, char **p, const int64_t *s) {
  const fill_ctx *c = arg;
  ms_k_fill(n, p[0], (ms_k_dtype)c->dt, s[0], c->value);
}

ms_status ms_tensor_fill_(ms_tensor *t, double value) {
  if (ms_tensor_check_data("fill_", t) != MS_OK) return MS_ERR_RUNTIME;
  ms_iter it;
  ms_iter_init(&it, t->ndim, t->shape, 1, &t);
  fill_ctx c = {t->dtype, value};
  ms_iter_run(&it, fill_row, &c);
  ms_tensor_bump_version(t);
  return MS_OK;
}

ms_status ms_tensor_zero_(ms_tensor *t) { return ms_tensor_fill_(t, 0); }

/* Byte address of the element at logical row-major position i. */
static char *element_at(const ms_tensor *t, int64_t i) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    off += (i % t->shape[d]) * t->strides[d];
    i /= t->shape[d];
  }
  return (char *)ms_tensor_data(t) + off * (int64_t)ms_dtype_size(t->dtype);
}

double ms_tensor_get_flat(const ms_tensor *t, int64_t i) {
  double v;
  ms_k_cast(1, &v, MS_K_F64, 1, element_at(t, i), (ms_k_dtype)t->dtype, 1);
  return v;
}

int64_t ms_tensor_get_flat_int(const ms_tensor *t, int64_t i) {
  int64_t v;
  ms_k_cast(1, &v, MS_K_I64, 1, element_at(t, i), (ms_k_dtype)t->dtype, 1);
  return v;
}

void ms_tensor_set_flat(ms_tensor *t, int64_t i, double v) {
  ms_k_cast(1, element_at(t, i), (ms_k_dtype)t->dtype, 1, &v, MS_K_F64, 1);
}

ms_status ms_tensor_item(const ms_tensor *t, double *out) {
  int64_t n = ms_tensor_numel(t);
  if (n != 1) {
    char b[MS_SHAPE_STR_LEN];
    return ms_error(MS_ERR_ARG, "item: only a one-element tensor can be converted to a number, "
                    "got shape %s (%lld elements)", ms_shape_str(t->ndim, t->shape, b, sizeof b), (long long)n);
  }
  if (ms_tensor_check_data("item", t) != MS_OK) return MS_ERR_RUNTIME;
  *out = ms_tensor_get_flat(t, 0);
  return MS_OK;
}
