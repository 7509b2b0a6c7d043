/* softmax.c: the native softmax and log_softmax over one dim, fused per row (max, sum of
 * exponentials and the write in one kernel), and their gradients from the output. */
#include "native/dispatch.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"

/* dim normalised against t (a 0-dim tensor behaves as one row of one element, with dim 0 or -1,
 * as PyTorch). */
static ms_status softmax_dim(const ms_tensor *t, int dim, bool log, int *d) {
  return ms_dim_normalize(log ? "log_softmax" : "softmax", "dim", dim, t->ndim ? t->ndim : 1, d);
}

ms_tensor *native_softmax_backward(ms_tensor *y, ms_tensor *grad_output, int dim, bool log) {
  int d;
  if (softmax_dim(y, dim, log, &d)) return NULL;
  ms_tensor *g = nn_contiguous(grad_output, y->dtype);
  ms_tensor *gx = g ? ms_tensor_new_empty_on(ms_tensor_device(y), y->ndim, y->shape, y->dtype) : NULL;
  int64_t outer, C, inner;
  nn_split(y, d, &outer, &C, &inner);
  native_kernels nk;
  if (gx && (native_kernels_for(log ? "log_softmax backward" : "softmax backward", ms_tensor_device(y), &nk) != MS_OK ||
             native_kernel_status(&nk, nk.k->softmax_backward(&nk.x, nn_kdtype(y->dtype), outer, C, inner,
                                                              ms_tensor_data(y), ms_tensor_data(g),
                                                              ms_tensor_data(gx), log)) != MS_OK))
    ms_tensor_release(gx), gx = NULL;
  ms_tensor_release(g);
  return gx;
}

ms_tensor *native_softmax(ms_tensor *x, int dim, bool log) {
  int d;
  if (nn_check_float_or_half_any(log ? "log_softmax" : "softmax", "input", x)) return NULL;
  if (softmax_dim(x, dim, log, &d)) return NULL;
  ms_tensor *xc = nn_contiguous(x, x->dtype);
  ms_tensor *out = xc ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  int64_t outer, C, inner;
  nn_split(x, d, &outer, &C, &inner);
  if (out && nn_softmax_rows(log ? "log_softmax" : "softmax", xc, out, outer, C, inner, log) != MS_OK)
    ms_tensor_release(out), out = NULL;
  ms_tensor_release(xc);
  return out;
}
