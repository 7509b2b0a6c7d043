/* grad_loss.c: the public nll_loss, cross_entropy and mse_loss (nn_ops.h): the native ops and
 * their nodes. */
#include "grad_nn.h"
#include "moonshard/nn_ops.h"

/* Node layout shared by nll_loss and cross_entropy: slot 0 = target (contiguous), 1 = weight or
 * empty, 2 = log-probabilities (cross_entropy only) or empty, 3 = the weight sum a GPU mean
 * divides by or empty; ints = N, C, inner, ignore_index, base, reduction; scalars = nll scale,
 * smooth scale, label smoothing. */
enum { I_N, I_C, I_INNER, I_IGNORE, I_BASE, I_RED };

static ms_status nll_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  native_nll_saved s = {.N = n->ints[I_N], .C = n->ints[I_C], .inner = n->ints[I_INNER],
                        .ignore_index = n->ints[I_IGNORE], .base = n->ints[I_BASE],
                        .reduction = (ms_reduction)n->ints[I_RED], .nll_scale = n->scalars[0],
                        .smooth_scale = n->scalars[1], .smoothing = n->scalars[2]};
  if (!nn_saved(n, 0, &s.target) || !nn_saved(n, 1, &s.weight) || !nn_saved(n, 2, &s.logp) ||
      !nn_saved(n, 3, &s.weight_sum))
    return MS_ERR_RUNTIME;
  const ms_edge *e = &n->next[0]; /* the input, whose gradient is needed */
  grad_in[0] = native_nll_backward(&s, grad_out[0], e->node->out_ndim[e->input_nr],
                                   e->node->out_shape[e->input_nr], n->out_dtype[0]);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

/* Records the node of either loss: the input is the only differentiable argument. */
static ms_status record_nll(ms_tensor *input, const native_nll_saved *s, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &input)) return MS_OK;
  ms_node *n = ms_node_new("NllLossBackward0", nll_backward, 1, &input);
  if (!n) return MS_ERR_MEMORY;
  int64_t ints[] = {s->N, s->C, s->inner, s->ignore_index, s->base, s->reduction};
  for (int i = 0; i < 6; i++) n->ints[i] = ints[i];
  n->scalars[0] = s->nll_scale, n->scalars[1] = s->smooth_scale, n->scalars[2] = s->smoothing;
  ms_node_save(n, s->target);
  nn_save(n, s->weight);
  nn_save(n, s->logp);
  nn_save(n, s->weight_sum);
  return grad_finish(n, out);
}

ms_tensor *ms_nll_loss(ms_tensor *input, ms_tensor *target, ms_tensor *weight, int64_t ignore_index,
                       ms_reduction reduction, int64_t index_base) {
  ms_dtype half;
  /* 16-bit inputs are widened, except on CUDA (with a weight of their dtype), whose nll kernels
   * compute in float32 and round once: the widened values */
  bool native = input && ms_tensor_device(input).type == MS_CUDA && ms_dtype_is_half(input->dtype) &&
                (!weight || weight->dtype == input->dtype);
  if (input && !native && nn_half_call(2, (ms_tensor *[]){input, weight}, &half)) {
    ms_tensor *v[2];
    if (nn_widen(2, (ms_tensor *[]){input, weight}, v) != MS_OK) return NULL;
    ms_tensor *wide = ms_nll_loss(v[0], target, v[1], ignore_index, reduction, index_base);
    ms_tensor *out = nn_narrow_back(wide, half);
    nn_release_all(2, v);
    ms_tensor_release(wide);
    return out;
  }
  native_nll_saved s;
  ms_tensor *out = native_nll_loss(input, target, weight, ignore_index, reduction, index_base, &s);
  out = grad_kept(out, record_nll(input, &s, out));
  native_nll_saved_release(&s);
  return out;
}

ms_tensor *ms_cross_entropy(ms_tensor *input, ms_tensor *target, ms_tensor *weight, int64_t ignore_index,
                            ms_reduction reduction, double label_smoothing, int64_t index_base) {
  ms_dtype half;
  if (input && nn_half_call(2, (ms_tensor *[]){input, weight}, &half)) { /* as nll_loss */
    ms_tensor *v[2];
    if (nn_widen(2, (ms_tensor *[]){input, weight}, v) != MS_OK) return NULL;
    ms_tensor *wide = ms_cross_entropy(v[0], target, v[1], ignore_index, reduction, label_smoothing, index_base);
    ms_tensor *out = nn_narrow_back(wide, half);
    nn_release_all(2, v);
    ms_tensor_release(wide);
    return out;
  }
  native_nll_saved s;
  ms_tensor *out =
      native_cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing, index_base, &s);
  out = grad_kept(out, record_nll(input, &s, out));
  native_nll_saved_release(&s);
  return out;
}

/* ---- mse_loss --------------------------------------------------------------------------------- */

/* ints[0] = reduction; slots 0, 1 = a, b. */
static ms_status mse_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *a = ms_node_saved(n, 0), *b = a ? ms_node_saved(n, 1) : NULL;
  if (!b) return MS_ERR_RUNTIME;
  const bool need[2] = {grad_needed(n, 0), grad_needed(n, 1)};
  ms_tensor *full[2];
  ms_status st = native_mse_loss_backward(a, b, (ms_reduction)n->ints[0], grad_out[0], need, full);
  for (int i = 0; i < 2 && st == MS_OK; i++) { /* each reduced to its input's shape */
    if (!need[i]) continue;
    const ms_edge *e = &n->next[i];
    if (!(grad_in[i] = grad_sum_to(full[i], e->node->out_ndim[e->input_nr], e->node->out_shape[e->input_nr])))
      st = MS_ERR_MEMORY;
  }
  ms_tensor_release(full[0]), ms_tensor_release(full[1]);
  return st;
}

static ms_status record_mse(ms_tensor *a, ms_tensor *b, ms_reduction reduction, ms_tensor *out) {
  ms_tensor *ins[2] = {a, b};
  if (!out || !ms_autograd_wants(2, ins)) return MS_OK;
  ms_node *n = ms_node_new("MseLossBackward0", mse_backward, 2, ins);
  if (!n) return MS_ERR_MEMORY;
  n->ints[0] = reduction;
  ms_node_save(n, a), ms_node_save(n, b);
  return grad_finish(n, out);
}

ms_tensor *ms_mse_loss(ms_tensor *a, ms_tensor *b, ms_reduction reduction) {
  ms_tensor *out = native_mse_loss(a, b, reduction);
  return grad_kept(out, record_mse(a, b, reduction, out));
}
