/* grad_embedding.c: the public embedding (nn_ops.h): the native op, and a node that keeps the
 * indices and scatters the gradient back into the weight's rows. */
#include "grad_nn.h"
#include "moonshard/nn_ops.h"

/* ints[0] = padding_idx, ints[1] = index base; slot 0 = the indices (contiguous). */
static ms_status embedding_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *idx = ms_node_saved(n, 0);
  if (!idx) return MS_ERR_RUNTIME;
  const ms_edge *e = &n->next[0];
  grad_in[0] = native_embedding_backward(idx, grad_out[0], e->node->out_shape[e->input_nr], n->out_dtype[0],
                                         n->ints[0], n->ints[1]);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

static ms_status record_embedding(ms_tensor *w, ms_tensor *idx, int64_t padding_idx, int64_t index_base,
                                  ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &w)) return MS_OK;
  ms_node *n = ms_node_new("EmbeddingBackward0", embedding_backward, 1, &w);
  if (!n) return MS_ERR_MEMORY;
  n->ints[0] = padding_idx, n->ints[1] = index_base;
  ms_node_save(n, idx);
  return grad_finish(n, out);
}

ms_tensor *ms_embedding(ms_tensor *indices, ms_tensor *w, int64_t padding_idx, int64_t index_base) {
  ms_tensor *idx;
  ms_tensor *out = native_embedding(indices, w, padding_idx, index_base, &idx);
  out = grad_kept(out, record_embedding(w, idx, padding_idx, index_base, out));
  ms_tensor_release(idx);
  return out;
}
