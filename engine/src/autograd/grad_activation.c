/* grad_activation.c: the public activations of op_list.h's table (nn_ops.h: ms_activation,
 * ms_gelu, ms_silu): the native op, and a node that saves the input and differentiates through
 * the native backward. */
#include "grad_nn.h"
#include "moonshard/nn_ops.h"

/* ints[0] = the ms_activation_op; slot 0 = the input. */
static ms_status act_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *x = ms_node_saved(n, 0);
  if (!x) return MS_ERR_RUNTIME;
  grad_in[0] = native_activation_backward((ms_activation_op)n->ints[0], x, grad_out[0]);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

static ms_status record_activation(ms_activation_op act, ms_tensor *x, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &x)) return MS_OK;
  ms_node *n = ms_node_new(ms_activation_op_get_info(act)->node, act_backward, 1, &x);
  if (!n) return MS_ERR_MEMORY;
  n->ints[0] = act;
  ms_node_save(n, x);
  return grad_finish(n, out);
}

ms_tensor *ms_activation(ms_activation_op act, ms_tensor *x) {
  if ((unsigned)act >= MS_ACTIVATION_OP_COUNT)
    return ms_error(MS_ERR_ARG, "activation: no activation %d (there are %d)", (int)act, MS_ACTIVATION_OP_COUNT), NULL;
  ms_tensor *out = native_activation(act, x);
  return grad_kept(out, record_activation(act, x, out));
}

ms_tensor *ms_gelu(ms_tensor *x, bool approximate_tanh) {
  return ms_activation(approximate_tanh ? MS_ACT_GELU_TANH : MS_ACT_GELU, x);
}

ms_tensor *ms_silu(ms_tensor *x) { return ms_activation(MS_ACT_SILU, x); }
