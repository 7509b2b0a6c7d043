/* grad_util.c: shared backward helpers: reducing a broadcast gradient to an input's shape, and
 * the bookkeeping of in-place ops under autograd. */
#include <string.h>

#include "grad_util.h"

ms_tensor *grad_sum_to(ms_tensor *grad, int ndim, const int64_t *shape) {
  ms_tensor_retain(grad);
  /* leading dims that broadcasting added, then dims expanded from size 1 */
  while (grad->ndim > ndim) {
    ms_tensor *s = native_reduce(MS_RED_SUM, grad, (ms_reduce_opts){.dim = 0});
    ms_tensor_release(grad);
    if (!(grad = s)) return NULL;
  }
  for (int d = 0; d < ndim; d++) {
    if (shape[d] != 1 || grad->shape[d] == 1) continue;
    ms_tensor *s = native_reduce(MS_RED_SUM, grad, (ms_reduce_opts){.dim = d, .keepdim = true});
    ms_tensor_release(grad);
    if (!(grad = s)) return NULL;
  }
  return grad;
}

bool grad_is_exclusive(const ms_tensor *g, int refs) {
  return !ms_grad_enabled() && !g->requires_grad && !g->grad_fn && atomic_load(&g->refcount) == refs &&
         atomic_load(&g->storage->refcount) == 1;
}

ms_status grad_finish(ms_node *n, ms_tensor *out) {
  if (!n) return MS_ERR_MEMORY;
  ms_node_attach(n, out, 0);
  ms_node_release(n);
  return MS_OK;
}

ms_status grad_check_inplace(const char *op, const ms_tensor *a) {
  if (!ms_grad_enabled() || !a->requires_grad) return MS_OK;
  if (!a->grad_fn)
    return ms_error(MS_ERR_RUNTIME, "%s_: a leaf tensor that requires grad is being used in an "
                    "in-place operation (do it under ms.no_grad(), or on a clone)", op);
  /* the write would change the leaf's values behind the graph's back */
  if (grad_is_view_of_leaf(a))
    return ms_error(MS_ERR_RUNTIME, "%s_: a view of a leaf tensor that requires grad is being used "
                    "in an in-place operation (do it under ms.no_grad(), or on a clone)", op);
  return MS_OK;
}

ms_status grad_rebase_inplace(const char *op, ms_tensor *a, ms_tensor *out) {
  if (!out) return MS_ERR_MEMORY;
  ms_status st = grad_check_inplace(op, a);
  if (st == MS_OK) st = native_copy_(a, out);
  /* a write through a view changes its base: the base records it (views made without grad
   * mode have no grad_base) */
  if (st == MS_OK && ms_grad_enabled() && a->grad_base) st = grad_record_view_write(a, out);
  else if (st == MS_OK && out->grad_fn) ms_node_attach(out->grad_fn, a, out->output_nr);
  return st;
}

/* An in-place op under autograd computes out of place from a copy of a's old values (so a's own
 * later overwrite does not spoil what the node saved); the copy stands for a in the graph. */
ms_tensor *grad_inplace_original(ms_tensor *a) {
  ms_tensor *c = native_clone(a);
  if (!c || !a->grad_fn) return c;
  ms_node_retain(a->grad_fn);
  c->grad_fn = a->grad_fn;
  c->output_nr = a->output_nr;
  c->requires_grad = true;
  return c;
}
