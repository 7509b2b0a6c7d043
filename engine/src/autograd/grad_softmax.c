/* grad_softmax.c: the public softmax and log_softmax (nn_ops.h): the native op, and a node
 * that differentiates from the saved output. */
#include "grad_nn.h"
#include "moonshard/nn_ops.h"

/* ints[0] = dim, ints[1] = log; slot 0 = the output, saved detached: saving the output itself
 * would make it and its grad_fn own each other. */
static ms_status softmax_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *y = ms_node_saved(n, 0);
  if (!y) return MS_ERR_RUNTIME;
  grad_in[0] = native_softmax_backward(y, grad_out[0], (int)n->ints[0], n->ints[1]);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

static ms_status record_softmax(ms_tensor *x, int dim, bool log, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &x)) return MS_OK;
  ms_node *n = ms_node_new(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", softmax_backward, 1, &x);
  ms_tensor *y = n ? ms_tensor_detach(out) : NULL;
  if (!y) return ms_node_release(n), MS_ERR_MEMORY;
  n->ints[0] = dim, n->ints[1] = log;
  ms_node_save(n, y);
  ms_tensor_release(y);
  return grad_finish(n, out);
}

/* 16-bit floats run natively on every device (the kernels widen each row to float32; output and
 * saved output in the 16-bit dtype, as PyTorch's). */
static ms_tensor *softmax_common(ms_tensor *x, int dim, bool log) {
  ms_tensor *out = native_softmax(x, dim, log);
  return grad_kept(out, record_softmax(x, dim, log, out));
}

ms_tensor *ms_softmax(ms_tensor *x, int dim) { return softmax_common(x, dim, false); }
ms_tensor *ms_log_softmax(ms_tensor *x, int dim) { return softmax_common(x, dim, true); }
