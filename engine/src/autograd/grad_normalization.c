/* grad_normalization.c: the public layer_norm and batch_norm (nn_ops.h): the native ops and
 * their nodes, which keep the statistics the forward computed. */
#include "grad_nn.h"
#include "moonshard/nn_ops.h"

/* Slots of both nodes: 0 = x (contiguous), 1 = weight or empty, 2 = mean, 3 = inverse std. */
static bool load(ms_node *n, native_norm_saved *s) {
  return nn_saved(n, 0, &s->x) && nn_saved(n, 1, &s->weight) && nn_saved(n, 2, &s->mean) &&
         nn_saved(n, 3, &s->invstd);
}

/* Records a node over inputs {x, w, b} that saves s; ints[0] = `param`. */
static ms_status record_norm(const char *name, ms_backward_fn backward, ms_tensor *x, ms_tensor *w, ms_tensor *b,
                             const native_norm_saved *s, int64_t param, ms_tensor *out) {
  ms_tensor *ins[3] = {x, w, b};
  if (!out || !ms_autograd_wants(3, ins)) return MS_OK;
  ms_node *n = ms_node_new(name, backward, 3, ins);
  if (!n) return MS_ERR_MEMORY;
  n->ints[0] = param;
  ms_node_save(n, s->x);
  nn_save(n, s->weight);
  ms_node_save(n, s->mean);
  ms_node_save(n, s->invstd);
  return grad_finish(n, out);
}

/* ints[0] = number of normalized dims. */
static ms_status layer_norm_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  native_norm_saved s;
  if (!load(n, &s)) return MS_ERR_RUNTIME;
  const bool need[3] = {grad_needed(n, 0), grad_needed(n, 1), grad_needed(n, 2)};
  return native_layer_norm_backward(&s, (int)n->ints[0], grad_out[0], need, grad_in);
}

ms_tensor *ms_layer_norm(ms_tensor *x, int nshape, const int64_t *ns, ms_tensor *w, ms_tensor *b,
                         double eps) {
  native_norm_saved s;
  ms_tensor *out = native_layer_norm(x, nshape, ns, w, b, eps, &s);
  out = grad_kept(out, record_norm("NativeLayerNormBackward0", layer_norm_backward, x, w, b, &s, nshape,
                                      out));
  native_norm_saved_release(&s);
  return out;
}

/* ints[0] = training. */
static ms_status batch_norm_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  native_norm_saved s;
  if (!load(n, &s)) return MS_ERR_RUNTIME;
  const bool need[3] = {grad_needed(n, 0), grad_needed(n, 1), grad_needed(n, 2)};
  return native_batch_norm_backward(&s, n->ints[0], grad_out[0], need, grad_in);
}

/* A 16-bit x on the CPU (no native 16-bit batch norm there; CUDA's kernels take it): x, w and b
 * widened to float32 (recorded), 16-bit running statistics updated
 * through float32 copies written back (float32 ones, as PyTorch allows, directly), the output
 * rounded back to x's dtype. A float32 x with 16-bit parameters meets the native check. */
static ms_tensor *batch_norm_half(ms_tensor *x, ms_tensor *rm, ms_tensor *rv, ms_tensor *w, ms_tensor *b,
                                  bool training, double momentum, double eps) {
  ms_tensor *v[5] = {NULL};
  ms_tensor *out = NULL;
  if (nn_widen(5, (ms_tensor *[]){x, w, b, rm, rv}, v) != MS_OK) return NULL;
  ms_tensor *wide = ms_batch_norm(v[0], v[3], v[4], v[1], v[2], training, momentum, eps);
  bool ok = wide != NULL;
  if (ok && training && rm && v[3] != rm) ok = native_copy_(rm, v[3]) == MS_OK;
  if (ok && training && rv && v[4] != rv) ok = native_copy_(rv, v[4]) == MS_OK;
  if (ok) out = nn_narrow_back(wide, x->dtype);
  nn_release_all(5, v);
  ms_tensor_release(wide);
  return out;
}

ms_tensor *ms_batch_norm(ms_tensor *x, ms_tensor *rm, ms_tensor *rv, ms_tensor *w, ms_tensor *b,
                         bool training, double momentum, double eps) {
  if (x && ms_dtype_is_half(x->dtype) && !native_batch_norm_half(x))
    return batch_norm_half(x, rm, rv, w, b, training, momentum, eps);
  native_norm_saved s;
  ms_tensor *out = native_batch_norm(x, rm, rv, w, b, training, momentum, eps, &s);
  out = grad_kept(out, record_norm("NativeBatchNormBackward0", batch_norm_backward, x, w, b, &s, training,
                                      out));
  native_norm_saved_release(&s);
  return out;
}
