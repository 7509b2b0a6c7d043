/* grad_dropout.c: the public dropout (nn_ops.h): the native op, and a node that keeps the mask
 * and scales the gradient with it. */
#include "grad_nn.h"
#include "moonshard/nn_ops.h"

/* scalars[0] = 1 / (1 - p); slot 0 = the mask. */
static ms_status dropout_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *mask = ms_node_saved(n, 0);
  if (!mask) return MS_ERR_RUNTIME;
  ms_dtype dt = n->out_dtype[0];
  /* the scaled gradient overwrites the incoming one when the walk lets it go (on the CPU) */
  bool overwrite = ms_tensor_device(mask).type == MS_CPU && grad_out[0]->dtype == dt &&
               ms_tensor_is_contiguous(grad_out[0]) && grad_is_exclusive(grad_out[0], 1);
  grad_in[0] = native_dropout_backward(grad_out[0], mask, n->scalars[0], dt, overwrite);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

static ms_status record_dropout(ms_tensor *x, ms_tensor *mask, double scale, ms_tensor *out) {
  if (!out || !mask || !ms_autograd_wants(1, &x)) return MS_OK;
  ms_node *n = ms_node_new("NativeDropoutBackward0", dropout_backward, 1, &x);
  if (!n) return MS_ERR_MEMORY;
  n->scalars[0] = scale;
  ms_node_save(n, mask);
  return grad_finish(n, out);
}

ms_tensor *ms_dropout(ms_tensor *x, double p, bool training) {
  ms_dtype half;
  /* 16-bit inputs that will be dropped are widened: the same mask as in float32 (drawn per
   * element); bfloat16 on the CPU and both 16-bit dtypes on CUDA are scaled as they are (their
   * kernels compute in float32 and round once: the widened values) */
  bool native_half = x && ms_dtype_is_half(x->dtype) && ms_tensor_device(x).type == MS_CUDA;
  if (training && p > 0 && p <= 1 && !native_half && nn_half_call_widens(x, &half)) {
    ms_tensor *v;
    if (nn_widen(1, &x, &v) != MS_OK) return NULL;
    ms_tensor *wide = ms_dropout(v, p, training), *out = nn_narrow_back(wide, half);
    ms_tensor_release(v), ms_tensor_release(wide);
    return out;
  }
  ms_tensor *mask;
  double scale;
  ms_tensor *out = native_dropout(x, p, training, &mask, &scale);
  out = grad_kept(out, record_dropout(x, mask, scale, out));
  ms_tensor_release(mask);
  return out;
}
