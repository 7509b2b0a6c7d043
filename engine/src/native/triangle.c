/* native/triangle.c: tril and triu (the rows of MS_TRIANGLE_OP_LIST) over the last two dims of a
 * tensor of any dtype, batched over the leading dims: a contiguous copy (or the tensor itself, in
 * place) whose elements off the kept triangle the device's triangle_zero kernel sets to zero.
 * Native: the public ops and their derivative are autograd/grad_triangle.c's. */
#include "native/dispatch.h"
#include "native/native.h"

#define INFO_ROW(ID, NAME, NODE) {NAME, NODE},
static const ms_triangle_op_info triangle_info[] = {MS_TRIANGLE_OP_LIST(INFO_ROW)};
#undef INFO_ROW

const ms_triangle_op_info *ms_triangle_op_get_info(ms_triangle_op op) { return &triangle_info[op]; }

/* The kernel's side: 1 where the op keeps the upper triangle. */
static int upper_of(ms_triangle_op op) { return op == MS_TRI_TRIU; }

static ms_status check_matrix(const char *op, const ms_tensor *t) {
  if (t->ndim >= 2) return ms_tensor_check_data_any(op, t);
  char b[MS_SHAPE_STR_LEN];
  return ms_error(MS_ERR_ARG, "%s: expected a tensor of at least 2 dims (a matrix or a batch of them), got %d "
                  "dim%s (shape %s)", op, t->ndim, t->ndim == 1 ? "" : "s", ms_shape_str(t->ndim, t->shape, b, sizeof b));
}

/* Zeroes the elements of contiguous t off op's triangle. */
static ms_status zero_off_triangle(ms_triangle_op op, ms_tensor *t, int64_t diagonal) {
  const char *name = triangle_info[op].name;
  native_kernels nk;
  if (native_kernels_for(name, ms_tensor_device(t), &nk) != MS_OK) return MS_ERR_RUNTIME;
  int64_t rows = t->shape[t->ndim - 2], cols = t->shape[t->ndim - 1];
  int64_t numel = ms_tensor_numel(t), batch = rows && cols ? numel / rows / cols : 0;
  return native_kernel_status(&nk, nk.k->triangle_zero(&nk.x, batch, rows, cols, upper_of(op), diagonal,
                                                       ms_dtype_size(t->dtype), ms_tensor_data(t)));
}

ms_tensor *native_triangle(ms_triangle_op op, ms_tensor *t, int64_t diagonal) {
  if (check_matrix(triangle_info[op].name, t) != MS_OK) return NULL;
  ms_tensor *out = native_clone(t); /* contiguous */
  if (out && zero_off_triangle(op, out, diagonal) != MS_OK) ms_tensor_release(out), out = NULL;
  return out;
}

ms_status native_triangle_(ms_triangle_op op, ms_tensor *t, int64_t diagonal) {
  if (check_matrix(triangle_info[op].name, t) != MS_OK) return MS_ERR_ARG;
  if (ms_tensor_is_contiguous(t)) {
    ms_status st = zero_off_triangle(op, t, diagonal);
    if (st == MS_OK) ms_tensor_bump_version(t);
    return st;
  }
  ms_tensor *r = native_triangle(op, t, diagonal); /* strided: computed aside, copied back */
  ms_status st = r ? native_copy_(t, r) : MS_ERR_ARG;
  ms_tensor_release(r);
  return st;
}
