/* grad_matmul.c: the public products (the native op, then the node) and the derivatives of mm,
 * bmm and addmm. For out = alpha * a @ b (+ beta * c): grad_a = alpha * g @ b^T, grad_b =
 * alpha * a^T @ g, grad_c = beta * g summed to c's shape. matmul records nothing itself: it is
 * composed of public ops (unsqueeze, expand, reshape, mm, bmm, view, squeeze) that each record
 * their own node, as PyTorch's composite matmul does. */
#include "grad_util.h"

/* Saved layout: slot 0 = a (kept only when b needs a gradient), slot 1 = b (only when a does);
 * scalars[0] = beta, scalars[1] = alpha; for addmm ints hold c's ndim and shape. */

/* g @ b^T (left) or a^T @ g, scaled by alpha; `other` is the saved operand. batched products
 * transpose their last two dims. */
static ms_tensor *product_grad(ms_tensor *g, ms_tensor *other, bool left, bool batched, double alpha) {
  int d0 = batched ? 1 : 0;
  ms_tensor *ot = native_transpose(other, d0, d0 + 1);
  ms_tensor *p = !ot ? NULL : batched ? (left ? native_bmm(g, ot) : native_bmm(ot, g)) : (left ? native_mm(g, ot) : native_mm(ot, g));
  ms_tensor_release(ot);
  if (!p || alpha == 1) return p;
  ms_tensor *s = native_binary(MS_OP_MUL, ms_operand_tensor(p), ms_operand_number(alpha, MS_FLOAT64));
  ms_tensor_release(p);
  return s;
}

/* Gradients of the product's operands, which are inputs first and first + 1 of the node. */
static ms_status operand_grads(ms_node *n, ms_tensor *g, ms_tensor **gi, int first, bool batched) {
  for (int i = 0; i < 2; i++) {
    if (!grad_needed(n, first + i)) continue;
    ms_tensor *other = ms_node_saved(n, 1 - i); /* a's gradient reads b and b's reads a */
    if (!other) return MS_ERR_RUNTIME;
    if (!(gi[first + i] = product_grad(g, other, i == 0, batched, n->scalars[1]))) return MS_ERR_RUNTIME;
  }
  return MS_OK;
}

static ms_status mm_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  return operand_grads(n, g[0], gi, 0, false);
}

static ms_status bmm_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  return operand_grads(n, g[0], gi, 0, true);
}

static ms_status addmm_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  if (grad_needed(n, 0)) {
    double beta = n->scalars[0];
    ms_tensor *s = grad_sum_to(g[0], (int)n->ints[0], &n->ints[1]);
    ms_tensor *c = s && beta != 1 ? native_binary(MS_OP_MUL, ms_operand_tensor(s), ms_operand_number(beta, MS_FLOAT64)) : s;
    if (c != s) ms_tensor_release(s);
    if (!(gi[0] = c)) return MS_ERR_RUNTIME;
  }
  return operand_grads(n, g[0], gi, 1, false);
}

/* The node of a product with operands a and b at inputs first, first + 1 of `ins`. */
static ms_node *product_node(const char *name, ms_backward_fn fn, int n_in, ms_tensor *const *ins,
                             ms_tensor *a, ms_tensor *b, double alpha) {
  ms_node *n = ms_node_new(name, fn, n_in, ins);
  if (!n) return NULL;
  ms_tensor *keep[2] = {b->requires_grad ? a : NULL, a->requires_grad ? b : NULL};
  for (int i = 0; i < 2; i++) {
    if (keep[i]) ms_node_save(n, keep[i]);
    else n->saved[n->num_saved++] = (ms_saved){NULL, 0}; /* slot i stays operand i */
  }
  n->scalars[1] = alpha;
  return n;
}


static bool records(ms_tensor *out, int n, ms_tensor *const *ins) {
  return out && ms_dtype_is_floating(out->dtype) && ms_autograd_wants(n, ins);
}

static ms_status record_mm(ms_tensor *a, ms_tensor *b, ms_tensor *out) {
  ms_tensor *ins[2] = {a, b};
  if (!records(out, 2, ins)) return MS_OK;
  return grad_finish(product_node("MmBackward0", mm_backward, 2, ins, a, b, 1), out);
}

static ms_status record_bmm(ms_tensor *a, ms_tensor *b, ms_tensor *out) {
  ms_tensor *ins[2] = {a, b};
  if (!records(out, 2, ins)) return MS_OK;
  return grad_finish(product_node("BmmBackward0", bmm_backward, 2, ins, a, b, 1), out);
}

static ms_status record_addmm(ms_tensor *c, ms_tensor *a, ms_tensor *b, double beta, double alpha,
                              ms_tensor *out) {
  ms_tensor *ins[3] = {c, a, b};
  if (!records(out, 3, ins)) return MS_OK;
  ms_node *n = product_node("AddmmBackward0", addmm_backward, 3, ins, a, b, alpha);
  if (n) {
    n->scalars[0] = beta;
    n->ints[0] = c->ndim;
    for (int d = 0; d < c->ndim; d++) n->ints[1 + d] = c->shape[d];
  }
  return grad_finish(n, out);
}

ms_tensor *ms_mm(ms_tensor *a, ms_tensor *b) {
  ms_tensor *out = native_mm(a, b);
  return grad_kept(out, record_mm(a, b, out));
}

ms_tensor *ms_bmm(ms_tensor *a, ms_tensor *b) {
  ms_tensor *out = native_bmm(a, b);
  return grad_kept(out, record_bmm(a, b, out));
}

ms_tensor *ms_addmm(ms_tensor *c, ms_tensor *a, ms_tensor *b, double beta, double alpha) {
  ms_tensor *out = native_addmm(c, a, b, beta, alpha);
  return grad_kept(out, record_addmm(c, a, b, beta, alpha, out));
}

static const native_matmul_steps public_steps = {
    .mm = ms_mm, .bmm = ms_bmm, .unsqueeze = ms_tensor_unsqueeze, .squeeze = ms_tensor_squeeze,
    .expand = ms_tensor_expand, .reshape = ms_tensor_reshape, .view = ms_tensor_view};

ms_tensor *ms_matmul(ms_tensor *a, ms_tensor *b) { return native_matmul_by(&public_steps, a, b); }
