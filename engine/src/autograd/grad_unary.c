/* grad_unary.c: the public unary elementwise ops, clamp, where and masked_fill (the native op,
 * then the node; in place under autograd, computed out of place and rebased), and their
 * derivatives: the incoming gradient times the op's derivative, built from the native ops;
 * where and masked_fill route it by their masks. */
#include "grad_util.h"

/* ---- small combinators: each borrows its arguments and returns a new reference (NULL passes
 * through); a formula keeps its intermediate results in a ms_grad_temps, released at its end -- */

/* t op v */
static ms_tensor *with_number(ms_tensor *t, ms_binary_op op, double v) {
  return t ? native_binary(op, ms_operand_tensor(t), ms_operand_number(v, MS_FLOAT64)) : NULL;
}

/* v op t */
static ms_tensor *number_with(double v, ms_binary_op op, ms_tensor *t) {
  return t ? native_binary(op, ms_operand_number(v, MS_FLOAT64), ms_operand_tensor(t)) : NULL;
}

static ms_tensor *apply(ms_unary_op op, ms_tensor *t) { return t ? native_unary(op, t) : NULL; }

/* g op t */
static ms_tensor *grad_with(ms_tensor *g, ms_binary_op op, ms_tensor *t) {
  return t ? native_binary(op, ms_operand_tensor(g), ms_operand_tensor(t)) : NULL;
}

/* ---- unary ops ------------------------------------------------------------------------------ */

/* What the op's derivative reads (its row of moonshard/op_list.h). */
static bool reads_input(ms_unary_op op) { return ms_unary_op_get_info(op)->saves == MS_UNARY_SAVES_INPUT; }
static bool unary_reads_result(ms_unary_op op) { return ms_unary_op_get_info(op)->saves == MS_UNARY_SAVES_RESULT; }

/* The gradient of the input; x is the saved input or result (the row's SAVES). A new op fails
 * the build here (-Wswitch-enum) until its derivative is written. */
static ms_tensor *unary_grad(ms_unary_op op, ms_tensor *g, ms_tensor *x, ms_grad_temps *s) {
#define T(e) grad_temp(s, (e))
  switch (op) {
  case MS_OP_NEG: return with_number(g, MS_OP_MUL, -1);
  case MS_OP_ABS: return grad_with(g, MS_OP_MUL, T(native_unary(MS_OP_SIGN, x)));
  case MS_OP_EXP: return grad_with(g, MS_OP_MUL, x);
  case MS_OP_LOG: return grad_with(g, MS_OP_DIV, x);
  case MS_OP_SQRT: return grad_with(g, MS_OP_DIV, T(with_number(x, MS_OP_MUL, 2)));
  case MS_OP_RSQRT: /* d x^-1/2 = -1/2 x^-3/2 = -1/2 out^3 */
    return grad_with(g, MS_OP_MUL, T(with_number(T(with_number(x, MS_OP_POW, 3)), MS_OP_MUL, -0.5)));
  case MS_OP_TANH: return grad_with(g, MS_OP_MUL, T(number_with(1, MS_OP_SUB, T(native_unary(MS_OP_SQUARE, x)))));
  case MS_OP_SIGMOID:
    return grad_with(g, MS_OP_MUL, T(grad_with(x, MS_OP_MUL, T(number_with(1, MS_OP_SUB, x)))));
  case MS_OP_RELU: /* held by the walk only (unary_backward's grad_out): g may take the result */
    return native_relu_backward(g, x, grad_is_exclusive(g, 1));
  case MS_OP_SIGN: case MS_OP_FLOOR: case MS_OP_CEIL: case MS_OP_ROUND: /* flat almost everywhere */
    return ms_tensor_new_zeros_on(ms_tensor_device(g), g->ndim, g->shape, g->dtype);
  case MS_OP_SIN: return grad_with(g, MS_OP_MUL, T(native_unary(MS_OP_COS, x)));
  case MS_OP_COS: return grad_with(g, MS_OP_MUL, T(apply(MS_OP_NEG, T(native_unary(MS_OP_SIN, x)))));
  case MS_OP_LOG1P: return grad_with(g, MS_OP_DIV, T(with_number(x, MS_OP_ADD, 1)));
  case MS_OP_EXPM1: return grad_with(g, MS_OP_MUL, T(with_number(x, MS_OP_ADD, 1)));
  case MS_OP_RECIPROCAL: return grad_with(g, MS_OP_MUL, T(apply(MS_OP_NEG, T(native_unary(MS_OP_SQUARE, x)))));
  case MS_OP_SQUARE: return grad_with(g, MS_OP_MUL, T(with_number(x, MS_OP_MUL, 2)));
  case MS_OP_SOFTPLUS: /* g * sigmoid(x), and g itself past the threshold where softplus is x */
    return native_where(T(with_number(x, MS_OP_GT, 20)), ms_operand_tensor(g),
                        ms_operand_tensor(T(grad_with(g, MS_OP_MUL, T(native_unary(MS_OP_SIGMOID, x))))));
  case MS_OP_LOGICAL_NOT: break; /* bool results record no node */
  }
#undef T
  return ms_error(MS_ERR_RUNTIME, "backward: %s has no derivative", ms_unary_op_name(op)), NULL;
}

static ms_status unary_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *x = NULL;
  if (n->num_saved && !(x = ms_node_saved(n, 0))) return MS_ERR_RUNTIME;
  ms_grad_temps s = {0};
  grad_in[0] = unary_grad((ms_unary_op)n->ints[0], grad_out[0], x, &s);
  grad_temps_release(&s);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

/* Saves a detached view of an op's own result: the result holds the node, so saving the result
 * itself would make a reference cycle. The view shares the storage, hence its version. */
static void save_result(ms_node *n, ms_tensor *out) {
  ms_tensor *d = ms_tensor_detach(out);
  if (d) ms_node_save(n, d);
  ms_tensor_release(d);
}

static ms_status record_unary(ms_unary_op op, ms_tensor *a, ms_tensor *out) {
  if (!out || ms_unary_op_get_info(op)->dtypes == MS_UNARY_LOGICAL || !ms_autograd_wants(1, &a)) return MS_OK;
  ms_node *n = ms_node_new(ms_unary_op_get_info(op)->node, unary_backward, 1, &a);
  if (!n) return MS_ERR_MEMORY;
  n->ints[0] = op;
  if (reads_input(op)) ms_node_save(n, a);
  else if (unary_reads_result(op)) save_result(n, out);
  if ((reads_input(op) || unary_reads_result(op)) && n->num_saved == 0) {
    ms_node_release(n);
    return MS_ERR_MEMORY; /* the detach failed and said why */
  }
  return grad_finish(n, out);
}

ms_tensor *ms_unary(ms_unary_op op, ms_tensor *a) {
  ms_tensor *out = native_unary(op, a);
  return grad_kept(out, record_unary(op, a, out));
}

/* In place under autograd. Where the derivative reads the result or nothing (relu, exp, tanh,
 * ...) and a is not a view, a is written over and its history extended by the op's node, which
 * saves a as written (relu_ after a conv: no result to allocate, and the activation's memory
 * is the conv's). Otherwise computed out of place (from a copy of a when the derivative reads
 * the input) and rebased onto a. */
static ms_status unary_inplace_grad(ms_unary_op op, ms_tensor *a) {
  const char *name = ms_unary_op_name(op);
  if (grad_check_inplace(name, a) != MS_OK) return MS_ERR_RUNTIME;
  if (!reads_input(op) && !a->grad_base && native_unary_over_itself(op, a))
    return record_unary(op, a, a);
  ms_tensor *src = reads_input(op) ? grad_inplace_original(a) : (ms_tensor_retain(a), a);
  ms_tensor *out = src ? ms_unary(op, src) : NULL;
  ms_tensor_release(src);
  ms_status st = grad_rebase_inplace(name, a, out);
  ms_tensor_release(out);
  return st;
}

ms_status ms_unary_(ms_unary_op op, ms_tensor *a) {
  if (!ms_autograd_wants(1, &a)) return native_unary_(op, a);
  ms_status st = native_unary_check_(op, a);
  return st == MS_OK ? unary_inplace_grad(op, a) : st;
}

/* ---- clamp, where, masked_fill ------------------------------------------------------------- */

/* The gradient edge i (input of node n) as the input's shape: sums over broadcast dims. */
static ms_tensor *to_input(ms_tensor *g, const ms_node *n, int i) {
  if (!g) return NULL;
  const ms_edge *e = &n->next[i];
  return grad_sum_to(g, e->node->out_ndim[e->input_nr], e->node->out_shape[e->input_nr]);
}

/* g where mask is `pass`, else 0 */
static ms_tensor *masked_grad(ms_tensor *mask, ms_tensor *g, bool pass) {
  if (!mask) return NULL;
  ms_operand gt = ms_operand_tensor(g), zero = ms_operand_number(0, MS_INT64);
  return native_where(mask, pass ? gt : zero, pass ? zero : gt);
}

/* ints[0], ints[1]: min, max given; scalars: their values. The gradient passes where
 * min <= x <= max (PyTorch's ClampBackward1, bounds included). */
static ms_status clamp_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *x = ms_node_saved(n, 0);
  if (!x) return MS_ERR_RUNTIME;
  ms_grad_temps s = {0};
  ms_tensor *lo = n->ints[0] ? grad_temp(&s, with_number(x, MS_OP_GE, n->scalars[0])) : NULL;
  ms_tensor *hi = n->ints[1] ? grad_temp(&s, with_number(x, MS_OP_LE, n->scalars[1])) : NULL;
  bool ok = (lo || !n->ints[0]) && (hi || !n->ints[1]);
  ms_tensor *in = !ok ? NULL
                  : lo && hi ? grad_temp(&s, native_binary(MS_OP_LOGICAL_AND, ms_operand_tensor(lo), ms_operand_tensor(hi)))
                             : lo ? lo : hi;
  grad_in[0] = masked_grad(in, grad_out[0], true);
  grad_temps_release(&s);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

static ms_status record_clamp(ms_tensor *a, const double *min, const double *max, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &a)) return MS_OK;
  ms_node *n = ms_node_new("ClampBackward1", clamp_backward, 1, &a);
  if (!n) return MS_ERR_MEMORY;
  n->ints[0] = min != NULL, n->ints[1] = max != NULL;
  n->scalars[0] = min ? *min : 0, n->scalars[1] = max ? *max : 0;
  ms_node_save(n, a);
  return grad_finish(n, out);
}

ms_tensor *ms_clamp(ms_tensor *a, const double *min, const double *max) {
  ms_tensor *out = native_clamp(a, min, max);
  return grad_kept(out, record_clamp(a, min, max, out));
}

ms_status ms_clamp_(ms_tensor *a, const double *lo, const double *hi) {
  if (!ms_autograd_wants(1, &a)) return native_clamp_(a, lo, hi);
  if (native_clamp_check_(a, lo, hi) != MS_OK) return MS_ERR_ARG;
  /* the node saves the input, which the write below would overwrite: clamp a copy */
  if (grad_check_inplace("clamp", a) != MS_OK) return MS_ERR_RUNTIME;
  ms_tensor *src = grad_inplace_original(a);
  ms_tensor *out = src ? ms_clamp(src, lo, hi) : NULL;
  ms_tensor_release(src);
  ms_status st = grad_rebase_inplace("clamp", a, out);
  ms_tensor_release(out);
  return st;
}

/* slot 0: the condition; inputs: the two operands (numbers have no edge) */
static ms_status where_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *cond = ms_node_saved(n, 0);
  if (!cond) return MS_ERR_RUNTIME;
  for (int i = 0; i < 2; i++) {
    if (!grad_needed(n, i)) continue;
    ms_tensor *m = masked_grad(cond, grad_out[0], i == 0);
    grad_in[i] = to_input(m, n, i);
    ms_tensor_release(m);
    if (!grad_in[i]) return MS_ERR_MEMORY;
  }
  return MS_OK;
}

static ms_status record_where(ms_tensor *cond, ms_operand a, ms_operand b, ms_tensor *out) {
  ms_tensor *ins[2] = {a.tensor, b.tensor};
  if (!out || !ms_autograd_wants(2, ins)) return MS_OK;
  ms_node *n = ms_node_new("WhereBackward0", where_backward, 2, ins);
  if (!n) return MS_ERR_MEMORY;
  ms_node_save(n, cond);
  return grad_finish(n, out);
}

ms_tensor *ms_where(ms_tensor *cond, ms_operand a, ms_operand b) {
  ms_tensor *out = native_where(cond, a, b);
  return grad_kept(out, record_where(cond, a, b, out));
}

/* slot 0: the mask; the gradient flows where the value was not filled in */
static ms_status masked_fill_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *mask = ms_node_saved(n, 0);
  if (!mask) return MS_ERR_RUNTIME;
  ms_tensor *m = masked_grad(mask, grad_out[0], false);
  grad_in[0] = to_input(m, n, 0);
  ms_tensor_release(m);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

static ms_status record_masked_fill(ms_tensor *a, ms_tensor *mask, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &a)) return MS_OK;
  ms_node *n = ms_node_new("MaskedFillBackward0", masked_fill_backward, 1, &a);
  if (!n) return MS_ERR_MEMORY;
  ms_node_save(n, mask);
  return grad_finish(n, out);
}

ms_tensor *ms_masked_fill(ms_tensor *a, ms_tensor *mask, double value) {
  ms_tensor *out = native_masked_fill(a, mask, value);
  return grad_kept(out, record_masked_fill(a, mask, out));
}

/* under autograd the node saves only the mask, so a may be overwritten directly */
ms_status ms_masked_fill_(ms_tensor *a, ms_tensor *mask, double value) {
  if (!ms_autograd_wants(1, &a)) return native_masked_fill_(a, mask, value);
  ms_tensor *m = native_masked_fill_mask_(a, mask);
  if (!m) return MS_ERR_ARG;
  ms_tensor *out = ms_masked_fill(a, m, value);
  ms_tensor_release(m);
  ms_status st = grad_rebase_inplace("masked_fill", a, out);
  ms_tensor_release(out);
  return st;
}
