/* grad_triangle.c: the public tril and triu (the native op, then its node) and their derivative:
 * the gradient passes where the op kept the element and is 0 where it wrote 0, which is the same
 * op applied to the incoming gradient. */
#include "grad_util.h"

/* Node layout: ints[I_OP] the ms_triangle_op, ints[I_DIAGONAL] the diagonal. Nothing saved. */
enum { I_OP, I_DIAGONAL };

static ms_status triangle_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  grad_in[0] = native_triangle((ms_triangle_op)n->ints[I_OP], grad_out[0], n->ints[I_DIAGONAL]);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

static ms_status record_triangle(ms_triangle_op op, ms_tensor *t, int64_t diagonal, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &t)) return MS_OK;
  ms_node *n = ms_node_new(ms_triangle_op_get_info(op)->node, triangle_backward, 1, &t);
  if (n) n->ints[I_OP] = op, n->ints[I_DIAGONAL] = diagonal;
  return grad_finish(n, out);
}

ms_tensor *ms_triangle(ms_triangle_op op, ms_tensor *t, int64_t diagonal) {
  ms_tensor *out = native_triangle(op, t, diagonal);
  return grad_kept(out, record_triangle(op, t, diagonal, out));
}

ms_status ms_triangle_(ms_triangle_op op, ms_tensor *t, int64_t diagonal) {
  const char *name = ms_triangle_op_get_info(op)->name;
  if (!ms_autograd_wants(1, &t)) return native_triangle_(op, t, diagonal);
  if (grad_check_inplace(name, t) != MS_OK) return MS_ERR_RUNTIME;
  ms_tensor *out = ms_triangle(op, t, diagonal);
  ms_status st = grad_rebase_inplace(name, t, out);
  ms_tensor_release(out);
  return st;
}
