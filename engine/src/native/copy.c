/* native/copy.c: copying between tensors (with broadcasting and dtype conversion), contiguous,
 * clone, fill and slice assignment. The public ops, which record, are autograd/grad_view.c's. */
#include <string.h>

#include "kernels/kernels.h"
#include "meta_log.h"
#include "native/dispatch.h"
#include "native/native.h"
#include "tensor_iter.h"
#include "tensor_internal.h"

/* Copies src (already of dst's shape) into dst, converting; both materialized, non-overlapping
 * and on one device. */
static ms_status copy_same_shape(ms_tensor *dst, ms_tensor *src) {
  native_kernels nk;
  if (native_kernels_for("copy_", ms_tensor_device(dst), &nk) != MS_OK) return MS_ERR_RUNTIME;
  ms_iter it;
  ms_tensor *ops[2] = {dst, src};
  iter_init(&it, dst->ndim, dst->shape, 2, ops);
  return native_kernel_status(&nk, nk.k->cast(&nk.x, &it, (ms_k_dtype)dst->dtype, (ms_k_dtype)src->dtype));
}

ms_status native_copy_(ms_tensor *dst, ms_tensor *src) {
  if (ms_tensor_check_data_any("copy_", dst) || ms_tensor_check_data_any("copy_", src)) return MS_ERR_RUNTIME;
  ms_tensor *b = native_expand(src, dst->ndim, dst->shape);
  if (!b) {
    char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
    return ms_error(MS_ERR_ARG, "copy_: source of shape %s cannot be broadcast to destination %s",
                    ms_shape_str(src->ndim, src->shape, b1, sizeof b1),
                    ms_shape_str(dst->ndim, dst->shape, b2, sizeof b2));
  }
  if (b->storage == dst->storage) { /* overlapping: read from a private copy */
    ms_tensor *c = native_clone(b);
    ms_tensor_release(b);
    if (!(b = c)) return MS_ERR_MEMORY;
  }
  /* copy_ is the one op that may cross devices, as in PyTorch */
  ms_status st = ms_device_equal(ms_tensor_device(dst), ms_tensor_device(b)) ? copy_same_shape(dst, b)
                                                                             : native_copy_across(dst, b);
  ms_tensor_release(b);
  if (st == MS_OK) ms_tensor_bump_version(dst);
  return st;
}

/* A new contiguous tensor of dtype dt holding t's values. */
/* A meta t gives a meta result, as PyTorch's meta tensors (shapes only), carrying t's records
 * when t is its whole storage (meta_log_copy): a model converted before it is materialised gets
 * the values of one converted after. */
static ms_tensor *meta_copy_as(ms_tensor *t, ms_dtype dt) {
  ms_tensor *out = ms_tensor_new_empty_on(ms_tensor_device(t), t->ndim, t->shape, dt);
  if (out && meta_log_copy(out, t) != MS_OK) ms_tensor_release(out), out = NULL;
  return out;
}

static ms_tensor *copy_as(ms_tensor *t, ms_dtype dt) {
  if (ms_tensor_device(t).type == MS_META) return meta_copy_as(t, dt);
  if (ms_tensor_check_data_any("copy", t) != MS_OK) return NULL;
  ms_tensor *out = ms_tensor_new_empty_on(ms_tensor_device(t), t->ndim, t->shape, dt);
  if (out && copy_same_shape(out, t) != MS_OK) ms_tensor_release(out), out = NULL;
  return out;
}

ms_tensor *native_to_dtype(ms_tensor *t, ms_dtype dt) {
  if (t->dtype == dt) return ms_tensor_retain(t), t;
  return copy_as(t, dt);
}

ms_tensor *native_contiguous(ms_tensor *t) {
  if (ms_tensor_is_contiguous(t)) return ms_tensor_retain(t), t;
  return copy_as(t, t->dtype);
}

ms_tensor *native_clone(ms_tensor *t) { return copy_as(t, t->dtype); }

/* Every element = value, converted once (a meta t records the fill instead: meta_log.c) on the host (the CPU's rounding on every device). */
ms_status native_fill_(ms_tensor *t, double value) {
  if (ms_tensor_device(t).type == MS_META) return meta_record(t, META_FILL, value, 0, 0, 0);
  if (ms_tensor_check_data_any("fill_", t) != MS_OK) return MS_ERR_RUNTIME;
  native_kernels nk;
  if (native_kernels_for("fill_", ms_tensor_device(t), &nk) != MS_OK) return MS_ERR_RUNTIME;
  unsigned char bytes[8];
  ms_k_fill(1, bytes, (ms_k_dtype)t->dtype, 1, value);
  ms_iter it;
  iter_init(&it, t->ndim, t->shape, 1, &t);
  ms_status st = native_kernel_status(&nk, nk.k->fill(&nk.x, &it, bytes));
  if (st == MS_OK) ms_tensor_bump_version(t);
  return st;
}

ms_status native_zero_(ms_tensor *t) { return native_fill_(t, 0); }

ms_tensor *native_full_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt, double value) {
  if (device.type == MS_CPU) return ms_tensor_new_full(ndim, shape, dt, value);
  ms_tensor *t = tensor_new_contiguous_on(device, "full", ndim, shape, dt);
  if (t && native_fill_(t, value) != MS_OK) ms_tensor_release(t), t = NULL;
  return t;
}

ms_tensor *native_select_scatter(ms_tensor *t, ms_tensor *src, int dim, int64_t index) {
  ms_tensor *out = native_clone(t);
  ms_tensor *slot = out ? native_select(out, dim, index) : NULL;
  ms_status st = slot ? native_copy_(slot, src) : MS_ERR_RUNTIME;
  ms_tensor_release(slot);
  if (st != MS_OK) ms_tensor_release(out), out = NULL;
  return out;
}

ms_status native_select_assign_(ms_tensor *t, int dim, int64_t index, ms_tensor *src) {
  ms_tensor *slot = native_select(t, dim, index);
  ms_status st = slot ? native_copy_(slot, src) : MS_ERR_RUNTIME;
  ms_tensor_release(slot);
  return st;
}
