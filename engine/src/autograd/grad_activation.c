/* grad_activation.c: the public GELU and SiLU (nn_ops.h): the native op, and a node that saves
 * the input and differentiates through the native backward. */
#include "grad_nn.h"
#include "moonshard/nn_ops.h"

/* A switch without a default: a new ms_k_act fails the build here until it is named. */
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
  grad_in[0] = native_activation_backward((ms_k_act)n->ints[0], x, grad_out[0]);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

static ms_status record_activation(ms_k_act act, ms_tensor *x, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &x)) return MS_OK;
  ms_node *n = ms_node_new(act_node(act), act_backward, 1, &x);
  if (!n) return MS_ERR_MEMORY;
  n->ints[0] = act;
  ms_node_save(n, x);
  return ms_grad_finish(n, out);
}

static ms_tensor *activation(ms_k_act act, ms_tensor *x) {
  ms_tensor *out = native_activation(act, x);
  return ms_grad_kept(out, record_activation(act, x, out));
}

ms_tensor *ms_gelu(ms_tensor *x, bool approximate_tanh) {
  return activation(approximate_tanh ? MS_K_ACT_GELU_TANH : MS_K_ACT_GELU, x);
}

ms_tensor *ms_silu(ms_tensor *x) { return activation(MS_K_ACT_SILU, x); }
