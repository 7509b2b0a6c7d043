/* softmax.c: softmax and log_softmax over one dim, fused per row (max, sum of exponentials and
 * the write in one kernel), and their gradients from the saved output. */
#include "autograd/grad_util.h"
#include "cuda/cuda_ops.h"
#include "moonshard/nn_ops.h"
#include "nn/nn_internal.h"

/* ints[0] = dim, ints[1] = log; slot 0 = the output, saved detached: saving the output itself
 * would make it and its grad_fn own each other. */
static ms_status softmax_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *y = ms_node_saved(n, 0);
  if (!y) return MS_ERR_RUNTIME;
  ms_tensor *g = ms_nn_contiguous(grad_out[0], y->dtype);
  ms_tensor *gx = g ? ms_tensor_new_empty_on(ms_tensor_device(y), y->ndim, y->shape, y->dtype) : NULL;
  int64_t outer, C, inner;
  ms_nn_split(y, (int)n->ints[0], &outer, &C, &inner);
  if (gx && ms_tensor_device(y).type == MS_CUDA) {
    if (ms_cuda_softmax_backward(y, g, gx, outer, C, inner, (int)n->ints[1]) != MS_OK) ms_tensor_release(gx), gx = NULL;
  } else if (gx) {
    ms_k_softmax_backward(ms_nn_kdtype(y->dtype), outer, C, inner, ms_tensor_data(y),
                          ms_tensor_data(g), ms_tensor_data(gx), (int)n->ints[1]);
  }
  ms_tensor_release(g);
  grad_in[0] = gx;
  return gx ? MS_OK : MS_ERR_MEMORY;
}

/* The forward alone: a new contiguous tensor (grad mode must be off). */
static ms_tensor *softmax_forward(ms_tensor *x, int dim, int log) {
  ms_tensor *xc = ms_nn_contiguous(x, x->dtype);
  ms_tensor *out = xc ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  int64_t outer, C, inner;
  ms_nn_split(x, dim, &outer, &C, &inner);
  if (out && ms_tensor_device(x).type == MS_CUDA) {
    if (ms_cuda_softmax(xc, out, outer, C, inner, log) != MS_OK) ms_tensor_release(out), out = NULL;
  } else if (out) {
    ms_k_softmax(ms_nn_kdtype(x->dtype), outer, C, inner, ms_tensor_data(xc), ms_tensor_data(out), log);
  }
  ms_tensor_release(xc);
  return out;
}

static ms_tensor *record(ms_tensor *x, ms_tensor *out, int dim, int log) {
  if (!out || !ms_autograd_wants(1, &x)) return out;
  ms_node *n = ms_node_new(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", softmax_backward, 1, &x);
  ms_tensor *y = n ? ms_tensor_detach(out) : NULL;
  if (!y) return ms_node_release(n), ms_tensor_release(out), NULL;
  n->ints[0] = dim, n->ints[1] = log;
  ms_node_save(n, y);
  ms_tensor_release(y);
  ms_node_attach(n, out, 0);
  ms_node_release(n);
  return out;
}

static ms_tensor *softmax_common(const char *op, ms_tensor *x, int dim, int log) {
  int d;
  ms_dtype half;
  if (x && ms_nn_half_call(1, &x, &half)) {
    ms_tensor *v;
    if (ms_nn_widen(1, &x, &v) != MS_OK) return NULL;
    ms_tensor *out = softmax_common(op, v, dim, log);
    ms_tensor_release(v);
    return ms_nn_narrow_back(out, half);
  }
  if (ms_nn_check_float_any(op, "input", x)) return NULL;
  /* a 0-dim tensor behaves as one row of one element, with dim 0 or -1 (as PyTorch) */
  if (ms_dim_normalize(op, "dim", dim, x->ndim ? x->ndim : 1, &d)) return NULL;
  bool prev = ms_grad_set_enabled(false);
  ms_tensor *out = softmax_forward(x, d, log);
  ms_grad_set_enabled(prev);
  return record(x, out, d, log);
}

ms_tensor *ms_softmax(ms_tensor *x, int dim) { return softmax_common("softmax", x, dim, 0); }
ms_tensor *ms_log_softmax(ms_tensor *x, int dim) { return softmax_common("log_softmax", x, dim, 1); }
