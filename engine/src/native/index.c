/* native/index.c: gathering slices by an index tensor (index_select), and adding slices back
 * by index (its gradient). The slices are moved by copy_ and add_, so a CUDA tensor is served
 * on its device; the (1-D) index is read on the host. The public op is autograd/grad_index.c's. */
#include "native/native.h"

static ms_status check_index(const ms_tensor *t, int dim, const ms_tensor *idx) {
  char b[MS_SHAPE_STR_LEN];
  if (idx->ndim != 1 || (idx->dtype != MS_INT64 && idx->dtype != MS_INT32))
    return ms_error(MS_ERR_ARG, "index_select: index must be a 1-D int64 or int32 tensor, got %s of shape %s",
                    ms_dtype_name(idx->dtype), ms_shape_str(idx->ndim, idx->shape, b, sizeof b));
  for (int64_t i = 0; i < idx->shape[0]; i++) {
    int64_t k = ms_tensor_get_flat_int(idx, i);
    if (k < 0 || k >= t->shape[dim])
      return ms_error(MS_ERR_ARG, "index_select: index %lld at position %lld is out of range for "
                      "dimension %d of size %lld", (long long)k, (long long)i, dim, (long long)t->shape[dim]);
  }
  return MS_OK;
}

/* Copies slice idx[i] of src into slice i of dst along dim (or adds, for the gradient). */
static ms_status move_slices(ms_tensor *dst, ms_tensor *src, int dim, ms_tensor *idx, bool scatter_add) {
  ms_status st = MS_OK;
  for (int64_t i = 0; st == MS_OK && i < idx->shape[0]; i++) {
    int64_t k = ms_tensor_get_flat_int(idx, i);
    ms_tensor *d = native_select(dst, dim, scatter_add ? k : i);
    ms_tensor *s = native_select(src, dim, scatter_add ? i : k);
    st = d && s ? (scatter_add ? native_binary_(MS_OP_ADD, d, ms_operand_tensor(s)) : native_copy_(d, s)) : MS_ERR_MEMORY;
    ms_tensor_release(d), ms_tensor_release(s);
  }
  return st;
}

ms_status native_index_add_(ms_tensor *dst, int dim, ms_tensor *idx, ms_tensor *src) {
  return move_slices(dst, src, dim, idx, true);
}

/* The forward on a host index (new reference in *out). */
static ms_status index_select_forward(ms_tensor *t, int dim, ms_tensor *idx, ms_tensor **out) {
  int64_t shape[MS_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) shape[d] = d == dim ? idx->shape[0] : t->shape[d];
  *out = ms_tensor_new_empty_on(ms_tensor_device(t), t->ndim, shape, t->dtype);
  ms_status st = *out ? move_slices(*out, t, dim, idx, false) : MS_ERR_MEMORY;
  if (st != MS_OK) ms_tensor_release(*out), *out = NULL;
  return st;
}

ms_tensor *native_index_select(ms_tensor *t, int dim, ms_tensor *idx) {
  if (t->ndim == 0) return ms_error(MS_ERR_ARG, "index_select: cannot index a 0-dim tensor"), NULL;
  if (ms_dim_normalize("index_select", "dim", dim, t->ndim, &dim) != MS_OK ||
      ms_check_same_device("index_select", 2, (ms_tensor *[]){t, idx}) != MS_OK ||
      ms_tensor_check_data_any("index_select", t) != MS_OK || ms_tensor_check_data_any("index_select", idx) != MS_OK)
    return NULL;
  /* the positions are read one by one on the host: a device index comes over once */
  ms_tensor *hidx = native_to_device(idx, (ms_device){MS_CPU, 0});
  ms_tensor *out = NULL;
  if (hidx && check_index(t, dim, hidx) == MS_OK) index_select_forward(t, dim, hidx, &out);
  ms_tensor_release(hidx);
  return out;
}
