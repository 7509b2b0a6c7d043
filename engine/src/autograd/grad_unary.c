/* grad_unary.c: derivatives of the unary elementwise ops, clamp, where and masked_fill. Each
 * backward multiplies the incoming gradient by the op's derivative, built from the public ops
 * (grad mode is off during backward); where and masked_fill route it by their masks. */
#include "grad_util.h"
#include "kernels/kernels.h"

static const char *unary_node_names[MS_UNARY_OP_COUNT] = {
    "NegBackward0",     "AbsBackward0",     "ExpBackward0",    "LogBackward0",
    "SqrtBackward0",    "RsqrtBackward0",   "TanhBackward0",   "SigmoidBackward0",
    "ReluBackward0",    "LogicalNotBackward0", "SignBackward0", "FloorBackward0",
    "CeilBackward0",    "RoundBackward0",   "SinBackward0",    "CosBackward0",
    "Log1PBackward0",   "Expm1Backward0",   "ReciprocalBackward0", "PowBackward0"};

/* ---- small combinators: each consumes its tensor argument (NULL passes through) so a chain of
 * them needs no temporaries of its own ------------------------------------------------------- */

static ms_tensor *ref(ms_tensor *t) {
  if (t) ms_tensor_retain(t);
  return t;
}

/* t op v */
static ms_tensor *with_number(ms_tensor *t, ms_binary_op op, double v) {
  ms_tensor *r = t ? ms_binary(op, ms_operand_tensor(t), ms_operand_number(v, MS_FLOAT64)) : NULL;
  ms_tensor_release(t);
  return r;
}

/* v op t */
static ms_tensor *number_with(double v, ms_binary_op op, ms_tensor *t) {
  ms_tensor *r = t ? ms_binary(op, ms_operand_number(v, MS_FLOAT64), ms_operand_tensor(t)) : NULL;
  ms_tensor_release(t);
  return r;
}

static ms_tensor *apply(ms_unary_op op, ms_tensor *t) {
  ms_tensor *r = t ? ms_unary(op, t) : NULL;
  ms_tensor_release(t);
  return r;
}

/* g op t, t consumed, g borrowed */
static ms_tensor *grad_with(ms_tensor *g, ms_binary_op op, ms_tensor *t) {
  ms_tensor *r = t ? ms_binary(op, ms_operand_tensor(g), ms_operand_tensor(t)) : NULL;
  ms_tensor_release(t);
  return r;
}

/* ---- unary ops ------------------------------------------------------------------------------ */

/* Ops whose derivative reads the input (the others read the result, or nothing). */
bool ms_grad_unary_reads_input(ms_unary_op op) {
  switch (op) {
  case MS_OP_ABS: case MS_OP_LOG: case MS_OP_SIN: case MS_OP_COS: case MS_OP_LOG1P:
  case MS_OP_SQUARE: return true;
  default: return false;
  }
}

static bool unary_reads_result(ms_unary_op op) {
  switch (op) {
  case MS_OP_EXP: case MS_OP_SQRT: case MS_OP_RSQRT: case MS_OP_TANH: case MS_OP_SIGMOID:
  case MS_OP_RELU: case MS_OP_EXPM1: case MS_OP_RECIPROCAL: return true;
  default: return false;
  }
}

/* relu's gradient in one pass when g and the saved result are contiguous CPU floats of one
 * shape and dtype (the training loop's case, in float32 or mixed precision's 16-bit floats), written over g when the walk lets it go; NULL
 * otherwise, and the caller takes the general path. */
static ms_tensor *relu_grad_contiguous(ms_tensor *g, ms_tensor *x) {
  if (ms_tensor_device(g).type != MS_CPU || ms_tensor_device(x).type != MS_CPU || g->dtype != x->dtype ||
      !ms_dtype_is_floating(g->dtype) || g->ndim != x->ndim ||
      !ms_tensor_is_contiguous(g) || !ms_tensor_is_contiguous(x))
    return NULL;
  for (int d = 0; d < g->ndim; d++)
    if (g->shape[d] != x->shape[d]) return NULL;
  bool in_place = ms_grad_is_exclusive(g, 1); /* held by the walk only: unary_backward's grad_out */
  ms_tensor *gx = in_place ? (ms_tensor_retain(g), g) : ms_tensor_new_empty(g->ndim, g->shape, g->dtype);
  if (gx)
    ms_k_relu_backward((ms_k_dtype)g->dtype, ms_tensor_numel(g), ms_tensor_data(x), ms_tensor_data(g),
                       ms_tensor_data(gx));
  else
    ms_error_clear();
  return gx;
}

/* The gradient of the input; x is the saved input or result (see the two lists above). */
static ms_tensor *unary_grad(ms_unary_op op, ms_tensor *g, ms_tensor *x) {
  switch (op) {
  case MS_OP_NEG: return with_number(ref(g), MS_OP_MUL, -1);
  case MS_OP_ABS: return grad_with(g, MS_OP_MUL, ms_unary(MS_OP_SIGN, x));
  case MS_OP_EXP: return grad_with(g, MS_OP_MUL, ref(x));
  case MS_OP_LOG: return grad_with(g, MS_OP_DIV, ref(x));
  case MS_OP_SQRT: return grad_with(g, MS_OP_DIV, with_number(ref(x), MS_OP_MUL, 2));
  case MS_OP_RSQRT: /* d x^-1/2 = -1/2 x^-3/2 = -1/2 out^3 */
    return grad_with(g, MS_OP_MUL, with_number(with_number(ref(x), MS_OP_POW, 3), MS_OP_MUL, -0.5));
  case MS_OP_TANH: return grad_with(g, MS_OP_MUL, number_with(1, MS_OP_SUB, ms_unary(MS_OP_SQUARE, x)));
  case MS_OP_SIGMOID:
    return grad_with(g, MS_OP_MUL, grad_with(x, MS_OP_MUL, number_with(1, MS_OP_SUB, ref(x))));
  case MS_OP_RELU: { /* where, not a product: an infinite gradient must not become NaN at 0 */
    ms_tensor *fast = relu_grad_contiguous(g, x);
    if (fast) return fast;
    ms_tensor *pos = with_number(ref(x), MS_OP_GT, 0);
    ms_tensor *r = pos ? ms_where(pos, ms_operand_tensor(g), ms_operand_number(0, MS_INT64)) : NULL;
    ms_tensor_release(pos);
    return r;
  }
  case MS_OP_SIGN: case MS_OP_FLOOR: case MS_OP_CEIL: case MS_OP_ROUND: /* flat almost everywhere */
    return ms_tensor_new_zeros_on(ms_tensor_device(g), g->ndim, g->shape, g->dtype);
  case MS_OP_SIN: return grad_with(g, MS_OP_MUL, ms_unary(MS_OP_COS, x));
  case MS_OP_COS: return grad_with(g, MS_OP_MUL, apply(MS_OP_NEG, ms_unary(MS_OP_SIN, x)));
  case MS_OP_LOG1P: return grad_with(g, MS_OP_DIV, with_number(ref(x), MS_OP_ADD, 1));
  case MS_OP_EXPM1: return grad_with(g, MS_OP_MUL, with_number(ref(x), MS_OP_ADD, 1));
  case MS_OP_RECIPROCAL: return grad_with(g, MS_OP_MUL, apply(MS_OP_NEG, ms_unary(MS_OP_SQUARE, x)));
  case MS_OP_SQUARE: return grad_with(g, MS_OP_MUL, with_number(ref(x), MS_OP_MUL, 2));
  default:
    return ms_error(MS_ERR_RUNTIME, "backward: %s has no derivative", ms_unary_op_name(op)), NULL;
  }
}

static ms_status unary_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *x = NULL;
  if (n->num_saved && !(x = ms_node_saved(n, 0))) return MS_ERR_RUNTIME;
  grad_in[0] = unary_grad((ms_unary_op)n->ints[0], grad_out[0], x);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

/* Saves a detached view of an op's own result: the result holds the node, so saving the result
 * itself would make a reference cycle. The view shares the storage, hence its version. */
static void save_result(ms_node *n, ms_tensor *out) {
  ms_tensor *d = ms_tensor_detach(out);
  if (d) ms_node_save(n, d);
  ms_tensor_release(d);
}

ms_tensor *ms_grad_record_unary(ms_unary_op op, ms_tensor *a, ms_tensor *out) {
  if (!out || op == MS_OP_LOGICAL_NOT || !ms_autograd_wants(1, &a)) return out;
  ms_node *n = ms_node_new(unary_node_names[op], unary_backward, 1, &a);
  if (!n) return ms_tensor_release(out), NULL;
  n->ints[0] = op;
  if (ms_grad_unary_reads_input(op)) ms_node_save(n, a);
  else if (unary_reads_result(op)) save_result(n, out);
  if ((ms_grad_unary_reads_input(op) || unary_reads_result(op)) && n->num_saved == 0) {
    ms_node_release(n), ms_tensor_release(out);
    return NULL; /* the detach failed and said why */
  }
  ms_node_attach(n, out, 0);
  ms_node_release(n);
  return out;
}

/* An in-place op under autograd computes out of place from a copy of a's old values (so a's own
 * later overwrite does not spoil what the node saved); the copy stands for a in the graph. */
ms_tensor *ms_grad_inplace_original(ms_tensor *a) {
  bool prev = ms_grad_set_enabled(false);
  ms_tensor *c = ms_tensor_clone(a);
  ms_grad_set_enabled(prev);
  if (!c || !a->grad_fn) return c;
  ms_node_retain(a->grad_fn);
  c->grad_fn = a->grad_fn;
  c->output_nr = a->output_nr;
  c->requires_grad = true;
  return c;
}

/* ---- clamp, where, masked_fill ------------------------------------------------------------- */

/* The gradient edge i (input of node n) as the input's shape: sums over broadcast dims.
 * Consumes g. */
static ms_tensor *to_input(ms_tensor *g, const ms_node *n, int i) {
  if (!g) return NULL;
  const ms_edge *e = &n->next[i];
  ms_tensor *r = ms_grad_sum_to(g, e->node->out_ndim[e->input_nr], e->node->out_shape[e->input_nr]);
  ms_tensor_release(g);
  return r;
}

/* g where mask is `pass`, else 0 */
static ms_tensor *masked_grad(ms_tensor *mask, ms_tensor *g, bool pass) {
  ms_operand gt = ms_operand_tensor(g), zero = ms_operand_number(0, MS_INT64);
  return ms_where(mask, pass ? gt : zero, pass ? zero : gt);
}

/* ints[0], ints[1]: min, max given; scalars: their values. The gradient passes where
 * min <= x <= max (PyTorch's ClampBackward1, bounds included). */
static ms_status clamp_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *x = ms_node_saved(n, 0);
  if (!x) return MS_ERR_RUNTIME;
  ms_tensor *lo = n->ints[0] ? with_number(ref(x), MS_OP_GE, n->scalars[0]) : NULL;
  ms_tensor *hi = n->ints[1] ? with_number(ref(x), MS_OP_LE, n->scalars[1]) : NULL;
  bool ok = (lo || !n->ints[0]) && (hi || !n->ints[1]);
  ms_tensor *in = !ok ? NULL
                  : lo && hi ? ms_binary(MS_OP_LOGICAL_AND, ms_operand_tensor(lo), ms_operand_tensor(hi))
                             : ref(lo ? lo : hi);
  grad_in[0] = in ? masked_grad(in, grad_out[0], true) : NULL;
  ms_tensor_release(lo), ms_tensor_release(hi), ms_tensor_release(in);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

ms_tensor *ms_grad_record_clamp(ms_tensor *a, const double *min, const double *max, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &a)) return out;
  ms_node *n = ms_node_new("ClampBackward1", clamp_backward, 1, &a);
  if (!n) return ms_tensor_release(out), NULL;
  n->ints[0] = min != NULL, n->ints[1] = max != NULL;
  n->scalars[0] = min ? *min : 0, n->scalars[1] = max ? *max : 0;
  ms_node_save(n, a);
  ms_node_attach(n, out, 0);
  ms_node_release(n);
  return out;
}

/* slot 0: the condition; inputs: the two operands (numbers have no edge) */
static ms_status where_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *cond = ms_node_saved(n, 0);
  if (!cond) return MS_ERR_RUNTIME;
  for (int i = 0; i < 2; i++)
    if (ms_grad_needed(n, i) && !(grad_in[i] = to_input(masked_grad(cond, grad_out[0], i == 0), n, i)))
      return MS_ERR_MEMORY;
  return MS_OK;
}

ms_tensor *ms_grad_record_where(ms_tensor *cond, ms_operand a, ms_operand b, ms_tensor *out) {
  ms_tensor *ins[2] = {a.tensor, b.tensor};
  if (!out || !ms_autograd_wants(2, ins)) return out;
  ms_node *n = ms_node_new("WhereBackward0", where_backward, 2, ins);
  if (!n) return ms_tensor_release(out), NULL;
  ms_node_save(n, cond);
  ms_node_attach(n, out, 0);
  ms_node_release(n);
  return out;
}

/* slot 0: the mask; the gradient flows where the value was not filled in */
static ms_status masked_fill_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *mask = ms_node_saved(n, 0);
  if (!mask) return MS_ERR_RUNTIME;
  grad_in[0] = to_input(masked_grad(mask, grad_out[0], false), n, 0);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

ms_tensor *ms_grad_record_masked_fill(ms_tensor *a, ms_tensor *mask, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &a)) return out;
  ms_node *n = ms_node_new("MaskedFillBackward0", masked_fill_backward, 1, &a);
  if (!n) return ms_tensor_release(out), NULL;
  ms_node_save(n, mask);
  ms_node_attach(n, out, 0);
  ms_node_release(n);
  return out;
}
