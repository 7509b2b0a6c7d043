/* activation.c: GELU (exact or tanh-approximated) and SiLU; relu, tanh and sigmoid are unary ops
 * (ops.h). Each saves its input and differentiates in one kernel. */
#include "autograd/grad_util.h"
#include "cuda/cuda_ops.h"
#include "moonshard/nn_ops.h"
#include "nn/nn_internal.h"

/* Switches without a default: a new ms_k_act fails the build here until it is named. */
const char *ms_nn_act_name(ms_k_act act, bool backward) {
  switch (act) {
  case MS_K_ACT_GELU: case MS_K_ACT_GELU_TANH: return backward ? "gelu backward" : "gelu";
  case MS_K_ACT_SILU: return backward ? "silu backward" : "silu";
  }
  return "activation"; /* not an activation: unreachable */
}

static const char *act_node(ms_k_act act) {
  switch (act) {
  case MS_K_ACT_GELU: case MS_K_ACT_GELU_TANH: return "GeluBackward0";
  case MS_K_ACT_SILU: return "SiluBackward0";
  }
  return "ActivationBackward0"; /* not an activation: unreachable */
}

/* ints[0] = the ms_k_act; slot 0 = the input. */
static ms_status act_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *x = ms_node_saved(n, 0);
  if (!x) return MS_ERR_RUNTIME;
  ms_tensor *xc = ms_nn_contiguous(x, x->dtype), *g = xc ? ms_nn_contiguous(grad_out[0], x->dtype) : NULL;
  ms_tensor *gx = g ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  ms_status st = gx ? MS_OK : MS_ERR_MEMORY;
  if (gx && ms_tensor_device(x).type == MS_CUDA)
    st = ms_cuda_activation_backward(ms_nn_act_name((ms_k_act)n->ints[0], true), (ms_k_act)n->ints[0], xc, g, gx);
  else if (gx)
    ms_k_activation_backward((ms_k_act)n->ints[0], ms_nn_kdtype(x->dtype), ms_tensor_numel(x),
                             ms_tensor_data(xc), ms_tensor_data(g), ms_tensor_data(gx));
  ms_tensor_release(xc), ms_tensor_release(g);
  if (st != MS_OK) ms_tensor_release(gx), gx = NULL;
  grad_in[0] = gx;
  return st;
}

static ms_tensor *activation(ms_k_act act, ms_tensor *x) {
  if (ms_nn_check_float_any(ms_nn_act_name(act, false), "input", x)) return NULL;
  ms_tensor *xc = ms_nn_contiguous(x, x->dtype);
  ms_tensor *out = xc ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  if (out && ms_tensor_device(x).type == MS_CUDA) {
    if (ms_cuda_activation(ms_nn_act_name(act, false), act, xc, out) != MS_OK) ms_tensor_release(out), out = NULL;
  } else if (out) {
    ms_k_activation(act, ms_nn_kdtype(x->dtype), ms_tensor_numel(x), ms_tensor_data(xc),
                    ms_tensor_data(out));
  }
  ms_tensor_release(xc);
  if (!out || !ms_autograd_wants(1, &x)) return out;
  ms_node *n = ms_node_new(act_node(act), act_backward, 1, &x);
  if (!n) return ms_tensor_release(out), NULL;
  n->ints[0] = act;
  ms_node_save(n, x);
  ms_node_attach(n, out, 0);
  ms_node_release(n);
  return out;
}

ms_tensor *ms_gelu(ms_tensor *x, bool approximate_tanh) {
  return activation(approximate_tanh ? MS_K_ACT_GELU_TANH : MS_K_ACT_GELU, x);
}

ms_tensor *ms_silu(ms_tensor *x) { return activation(MS_K_ACT_SILU, x); }
