/* grad_attention.c: the public scaled_dot_product_attention (nn_ops.h): the native op, and a
 * node "ScaledDotProductAttentionBackward0" (PyTorch 2.x's math path records a graph of its
 * parts instead; this name is ours, in PyTorch's style) that keeps q, k, v, the mask, the output
 * and the rows' logsumexp, and redraws dropout's mask from the saved Philox range. */
#include <stdlib.h>

#include "grad_nn.h"
#include "moonshard/nn_ops.h"

/* Slots: 0 q, 1 k, 2 v, 3 mask or empty, 4 out, 5 lse; ctx = the kernel geometry. */
static ms_status attention_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  native_attention_saved s = {.g = *(const ms_k_attn_geom *)n->ctx};
  if (!nn_saved(n, 0, &s.q) || !nn_saved(n, 1, &s.k) || !nn_saved(n, 2, &s.v) || !nn_saved(n, 3, &s.mask) ||
      !nn_saved(n, 4, &s.out) || !nn_saved(n, 5, &s.lse))
    return MS_ERR_RUNTIME;
  ms_tensor *grads[3];
  ms_status st = native_attention_backward(&s, grad_out[0], grads);
  if (st != MS_OK) return st;
  for (int i = 0; i < 3; i++) {
    if (grad_needed(n, i)) grad_in[i] = grads[i];
    else ms_tensor_release(grads[i]);
  }
  return MS_OK;
}

static ms_status record_attention(ms_tensor *q, ms_tensor *k, ms_tensor *v, const native_attention_saved *s,
                                  ms_tensor *out) {
  ms_tensor *ins[3] = {q, k, v};
  if (!out || !ms_autograd_wants(3, ins)) return MS_OK;
  ms_node *n = ms_node_new("ScaledDotProductAttentionBackward0", attention_backward, 3, ins);
  ms_k_attn_geom *g = n ? malloc(sizeof *g) : NULL;
  /* the output saved detached: saving it itself would make it and its grad_fn own each other */
  ms_tensor *y = g ? ms_tensor_detach(out) : NULL;
  if (!y) return free(g), ms_node_release(n), MS_ERR_MEMORY;
  *g = s->g;
  n->ctx = g, n->free_ctx = free;
  ms_node_save(n, s->q);
  ms_node_save(n, s->k);
  ms_node_save(n, s->v);
  nn_save(n, s->mask);
  ms_node_save(n, y);
  ms_node_save(n, s->lse);
  ms_tensor_release(y);
  return grad_finish(n, out);
}

ms_tensor *ms_scaled_dot_product_attention(ms_tensor *q, ms_tensor *k, ms_tensor *v, const ms_sdpa_options *o) {
  const ms_sdpa_options none = {0};
  if (!o) o = &none;
  /* PyTorch differentiates a float mask; this op does not, and must not drop its gradient silently */
  if (o->attn_mask && o->attn_mask->requires_grad && ms_grad_enabled())
    return ms_error(MS_ERR_ARG, "scaled_dot_product_attention: attn_mask requires grad, but its gradient is "
                    "not computed (detach it, or add it to the scores yourself)"), NULL;
  ms_dtype half;
  ms_tensor *ts[4] = {q, k, v, o->attn_mask};
  if (q && k && v && nn_half_call(4, ts, &half) && !native_attention_half(q, k, v, o->attn_mask)) {
    /* 16-bit without a native kernel (native_attention_half): computed in float32, rounded back */
    ms_tensor *w[4];
    if (nn_widen(4, ts, w) != MS_OK) return NULL;
    ms_sdpa_options wo = *o;
    wo.attn_mask = w[3];
    ms_tensor *wide = ms_scaled_dot_product_attention(w[0], w[1], w[2], &wo), *out = nn_narrow_back(wide, half);
    nn_release_all(4, w);
    ms_tensor_release(wide);
    return out;
  }
  native_attention_saved s;
  ms_tensor *out = native_attention(q, k, v, o, &s);
  out = grad_kept(out, record_attention(q, k, v, &s, out));
  native_attention_saved_release(&s);
  return out;
}
