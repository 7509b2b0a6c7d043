/* grad_index.c: the public index_select (the native op, then its node) and its derivative,
 * which adds each gradient slice back into the row it came from. */
#include "grad_util.h"

/* slot 0: the index on the host; ints[0]: dim */
static ms_status index_select_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *idx = ms_node_saved(n, 0);
  if (!idx) return MS_ERR_RUNTIME;
  const ms_edge *e = &n->next[0];
  ms_tensor *g = ms_tensor_new_zeros_on(ms_tensor_device(grad_out[0]), e->node->out_ndim[e->input_nr],
                                        e->node->out_shape[e->input_nr], grad_out[0]->dtype);
  ms_status st = g ? native_index_add_(g, (int)n->ints[0], idx, grad_out[0]) : MS_ERR_MEMORY;
  if (st == MS_OK) grad_in[0] = g;
  else ms_tensor_release(g);
  return st;
}

static ms_status record_index_select(ms_tensor *t, int dim, ms_tensor *idx, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &t)) return MS_OK;
  ms_tensor *hidx = native_to_device(idx, (ms_device){MS_CPU, 0}); /* read on the host */
  ms_node *node = hidx ? ms_node_new("IndexSelectBackward0", index_select_backward, 1, &t) : NULL;
  if (node) {
    node->ints[0] = dim < 0 ? dim + t->ndim : dim; /* the native op accepted it */
    ms_node_save(node, hidx);
  }
  ms_tensor_release(hidx);
  return grad_finish(node, out);
}

ms_tensor *ms_tensor_index_select(ms_tensor *t, int dim, ms_tensor *idx) {
  ms_tensor *out = native_index_select(t, dim, idx);
  return grad_kept(out, record_index_select(t, dim, idx, out));
}
