/* grad_linear.c: the public linear (nn_ops.h): the native op, and a node (MmBackward0 or
 * AddmmBackward0, as PyTorch names it) that differentiates through the native backward. */
#include "grad_nn.h"
#include "moonshard/nn_ops.h"

/* inputs {x, w, b}; slots 0 = x, 1 = w. */
static ms_status linear_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *x = ms_node_saved(n, 0), *w = x ? ms_node_saved(n, 1) : NULL;
  if (!w) return MS_ERR_RUNTIME;
  const bool need[3] = {grad_needed(n, 0), grad_needed(n, 1), grad_needed(n, 2)};
  return native_linear_backward(x, w, grad_out[0], need, grad_in);
}

static ms_status record_linear(ms_tensor *x, ms_tensor *w, ms_tensor *b, ms_tensor *out) {
  ms_tensor *ins[3] = {x, w, b};
  if (!out || !ms_autograd_wants(3, ins)) return MS_OK;
  ms_node *n = ms_node_new(b ? "AddmmBackward0" : "MmBackward0", linear_backward, 3, ins);
  if (!n) return MS_ERR_MEMORY;
  ms_node_save(n, x), ms_node_save(n, w);
  return grad_finish(n, out);
}

ms_tensor *ms_linear(ms_tensor *x, ms_tensor *w, ms_tensor *b) {
  ms_dtype half;
  if (nn_half_call(3, (ms_tensor *[]){x, w, b}, &half) && !native_linear_half(x, w, b)) {
    ms_tensor *v[3];
    if (nn_widen(3, (ms_tensor *[]){x, w, b}, v) != MS_OK) return NULL;
    ms_tensor *wide = ms_linear(v[0], v[1], v[2]), *out = nn_narrow_back(wide, half);
    nn_release_all(3, v);
    ms_tensor_release(wide);
    return out;
  }
  ms_tensor *out = native_linear(x, w, b);
  return grad_kept(out, record_linear(x, w, b, out));
}
