/* activation.c: the native GELU (exact or tanh-approximated) and SiLU, forward and backward;
 * relu, tanh and sigmoid are unary ops (ops.h). Each differentiates from its input in one
 * kernel. */
#include "cuda/cuda_ops.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"

/* The public name of a kernel activation ("gelu" for both GELUs), or of its backward, for
 * errors. A switch without a default: a new ms_k_act fails the build here until it is named. */
static const char *act_name(ms_k_act act, bool backward) {
  switch (act) {
  case MS_K_ACT_GELU: case MS_K_ACT_GELU_TANH: return backward ? "gelu backward" : "gelu";
  case MS_K_ACT_SILU: return backward ? "silu backward" : "silu";
  }
  return "activation"; /* not an activation: unreachable */
}

ms_tensor *native_activation_backward(ms_k_act act, ms_tensor *x, ms_tensor *grad_output) {
  ms_tensor *xc = ms_nn_contiguous(x, x->dtype), *g = xc ? ms_nn_contiguous(grad_output, x->dtype) : NULL;
  ms_tensor *gx = g ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  ms_status st = gx ? MS_OK : MS_ERR_MEMORY;
  if (gx && ms_tensor_device(x).type == MS_CUDA)
    st = ms_cuda_activation_backward(act_name(act, true), act, xc, g, gx);
  else if (gx)
    ms_k_activation_backward(act, ms_nn_kdtype(x->dtype), ms_tensor_numel(x), ms_tensor_data(xc),
                             ms_tensor_data(g), ms_tensor_data(gx));
  ms_tensor_release(xc), ms_tensor_release(g);
  if (st != MS_OK) ms_tensor_release(gx), gx = NULL;
  return gx;
}

ms_tensor *native_activation(ms_k_act act, ms_tensor *x) {
  if (ms_nn_check_float_any(act_name(act, false), "input", x)) return NULL;
  ms_tensor *xc = ms_nn_contiguous(x, x->dtype);
  ms_tensor *out = xc ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  if (out && ms_tensor_device(x).type == MS_CUDA) {
    if (ms_cuda_activation(act_name(act, false), act, xc, out) != MS_OK) ms_tensor_release(out), out = NULL;
  } else if (out) {
    ms_k_activation(act, ms_nn_kdtype(x->dtype), ms_tensor_numel(x), ms_tensor_data(xc),
                    ms_tensor_data(out));
  }
  ms_tensor_release(xc);
  return out;
}
