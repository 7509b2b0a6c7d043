/* grad_elementwise.c: the public binary elementwise ops (ms_binary, ms_binary_): the native op,
 * then the node; their derivatives, computed with the native ops and reduced to each input's
 * broadcast shape with grad_sum_to; and the whole-tensor comparisons (ms_equal,
 * ms_allclose), public ops that record nothing. */
#include <math.h>

#include "grad_util.h"
#include "tensor_iter.h"


/* Saved layout: slot i = operand i when it is a tensor the derivative reads (else empty);
 * scalars[i] = operand i when a plain number; ints[0] = op; ints[1 + i] = operand i is a tensor. */

/* One input's gradient: grad * factor (factor may be NULL for 1), reduced to the input's shape. */
static ms_tensor *scaled_to(ms_tensor *grad, ms_tensor *factor, double sign, const ms_node *n, int i) {
  ms_tensor *g = factor ? native_binary(MS_OP_MUL, ms_operand_tensor(grad), ms_operand_tensor(factor))
                        : (ms_tensor_retain(grad), grad);
  if (g && sign != 1) {
    ms_tensor *neg = native_binary(MS_OP_MUL, ms_operand_tensor(g), ms_operand_number(sign, MS_FLOAT64));
    ms_tensor_release(g);
    g = neg;
  }
  if (!g) return NULL;
  const ms_edge *e = &n->next[i];
  ms_tensor *r = grad_sum_to(g, e->node->out_ndim[e->input_nr], e->node->out_shape[e->input_nr]);
  ms_tensor_release(g);
  return r;
}

/* The saved operands as they were: tensors (checked for in-place changes) or plain numbers. */
static ms_status load_operands(ms_node *n, ms_operand *a, ms_operand *b) {
  ms_operand *o[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    if (!n->ints[1 + i]) {
      *o[i] = ms_operand_number(n->scalars[i], MS_FLOAT64);
      continue;
    }
    ms_tensor *t = ms_node_saved(n, i);
    if (!t) return MS_ERR_RUNTIME;
    *o[i] = ms_operand_tensor(t);
  }
  return MS_OK;
}

/* d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 */
static ms_status div_backward(ms_node *n, ms_tensor *g, ms_tensor **grad_in) {
  ms_operand a, b;
  if (load_operands(n, &a, &b) != MS_OK) return MS_ERR_RUNTIME;
  ms_tensor *ga = native_binary(MS_OP_DIV, ms_operand_tensor(g), b);
  if (!ga) return MS_ERR_MEMORY;
  if (grad_needed(n, 0) && !(grad_in[0] = scaled_to(ga, NULL, 1, n, 0))) return ms_tensor_release(ga), MS_ERR_MEMORY;
  if (grad_needed(n, 1)) {
    ms_tensor *q = native_binary(MS_OP_DIV, a, b); /* a/b; times ga = g/b gives g*a/b^2 */
    grad_in[1] = q ? scaled_to(ga, q, -1, n, 1) : NULL;
    ms_tensor_release(q);
    if (!grad_in[1]) return ms_tensor_release(ga), MS_ERR_MEMORY;
  }
  ms_tensor_release(ga);
  return MS_OK;
}

/* d(a^b)/da = b a^(b-1), d(a^b)/db = a^b log a */
static ms_status pow_backward(ms_node *n, ms_tensor *g, ms_tensor **grad_in) {
  ms_operand a, b;
  if (load_operands(n, &a, &b) != MS_OK) return MS_ERR_RUNTIME;
  if (grad_needed(n, 0)) {
    ms_tensor *bm1 = b.tensor ? native_binary(MS_OP_SUB, b, ms_operand_number(1, MS_INT64)) : NULL;
    ms_operand e = b.tensor ? ms_operand_tensor(bm1) : ms_operand_number(b.value - 1, MS_FLOAT64);
    ms_tensor *p = !b.tensor || bm1 ? native_binary(MS_OP_POW, a, e) : NULL;
    ms_tensor *f = p ? native_binary(MS_OP_MUL, ms_operand_tensor(p), b) : NULL;
    grad_in[0] = f ? scaled_to(g, f, 1, n, 0) : NULL;
    ms_tensor_release(bm1), ms_tensor_release(p), ms_tensor_release(f);
    if (!grad_in[0]) return MS_ERR_MEMORY;
  }
  if (grad_needed(n, 1)) {
    ms_tensor *p = native_binary(MS_OP_POW, a, b);
    ms_tensor *la = a.tensor ? native_unary(MS_OP_LOG, a.tensor) : ms_tensor_new_scalar(log(a.value), MS_FLOAT32);
    ms_tensor *f = p && la ? native_binary(MS_OP_MUL, ms_operand_tensor(p), ms_operand_tensor(la)) : NULL;
    grad_in[1] = f ? scaled_to(g, f, 1, n, 1) : NULL;
    ms_tensor_release(p), ms_tensor_release(la), ms_tensor_release(f);
    if (!grad_in[1]) return MS_ERR_MEMORY;
  }
  return MS_OK;
}

/* maximum/minimum: the gradient goes to the chosen operand; ties split it in halves (PyTorch). */
static ms_status extremum_backward(ms_node *n, ms_tensor *g, ms_tensor **grad_in, bool is_max) {
  ms_operand a, b;
  if (load_operands(n, &a, &b) != MS_OK) return MS_ERR_RUNTIME;
  ms_tensor *win = native_binary(is_max ? MS_OP_GT : MS_OP_LT, a, b), *tie = native_binary(MS_OP_EQ, a, b);
  ms_tensor *wa = NULL, *wb = NULL;
  if (win && tie) { /* weight of a: 1 where it wins, 0.5 on ties */
    ms_tensor *wf = native_to_dtype(win, g->dtype), *tf = native_to_dtype(tie, g->dtype);
    ms_tensor *half = tf ? native_binary(MS_OP_MUL, ms_operand_tensor(tf), ms_operand_number(0.5, MS_FLOAT64)) : NULL;
    wa = wf && half ? native_binary(MS_OP_ADD, ms_operand_tensor(wf), ms_operand_tensor(half)) : NULL;
    wb = wa ? native_binary(MS_OP_SUB, ms_operand_number(1, MS_INT64), ms_operand_tensor(wa)) : NULL;
    ms_tensor_release(wf), ms_tensor_release(tf), ms_tensor_release(half);
  }
  ms_status st = wa && wb ? MS_OK : MS_ERR_MEMORY;
  if (st == MS_OK && grad_needed(n, 0) && !(grad_in[0] = scaled_to(g, wa, 1, n, 0))) st = MS_ERR_MEMORY;
  if (st == MS_OK && grad_needed(n, 1) && !(grad_in[1] = scaled_to(g, wb, 1, n, 1))) st = MS_ERR_MEMORY;
  ms_tensor_release(win), ms_tensor_release(tie), ms_tensor_release(wa), ms_tensor_release(wb);
  return st;
}

static ms_status binary_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *g = grad_out[0];
  switch ((ms_binary_op)n->ints[0]) {
  case MS_OP_ADD: case MS_OP_SUB:
    if (grad_needed(n, 0) && !(grad_in[0] = scaled_to(g, NULL, 1, n, 0))) return MS_ERR_MEMORY;
    if (grad_needed(n, 1) && !(grad_in[1] = scaled_to(g, NULL, n->ints[0] == MS_OP_SUB ? -1 : 1, n, 1)))
      return MS_ERR_MEMORY;
    return MS_OK;
  case MS_OP_MUL: {
    ms_operand a, b;
    if (load_operands(n, &a, &b) != MS_OK) return MS_ERR_RUNTIME;
    for (int i = 0; i < 2; i++) {
      if (!grad_needed(n, i)) continue;
      ms_operand other = i == 0 ? b : a;
      ms_tensor *f = other.tensor ? (ms_tensor_retain(other.tensor), other.tensor) : ms_tensor_new_scalar(other.value, g->dtype);
      grad_in[i] = f ? scaled_to(g, f, 1, n, i) : NULL;
      ms_tensor_release(f);
      if (!grad_in[i]) return MS_ERR_MEMORY;
    }
    return MS_OK;
  }
  case MS_OP_DIV: return div_backward(n, g, grad_in);
  case MS_OP_POW: return pow_backward(n, g, grad_in);
  case MS_OP_MAXIMUM: return extremum_backward(n, g, grad_in, true);
  case MS_OP_MINIMUM: return extremum_backward(n, g, grad_in, false);
  case MS_OP_EQ: case MS_OP_NE: case MS_OP_LT: case MS_OP_LE: case MS_OP_GT: case MS_OP_GE:
  case MS_OP_LOGICAL_AND: case MS_OP_LOGICAL_OR: break; /* bool results record no node */
  }
  return ms_error(MS_ERR_RUNTIME, "backward: %s has no derivative", ms_binary_op_name((ms_binary_op)n->ints[0]));
}

/* The grad_fn name of op on these operands: the row's (moonshard/op_list.h, two tensors), except
 * where PyTorch names a form with a number apart: pow with a number exponent is PowBackward0, a
 * number minus a tensor RsubBackward1, a number over a tensor MulBackward0 (PyTorch computes it
 * as number * reciprocal). */
static const char *binary_node_name(ms_binary_op op, ms_operand a, ms_operand b) {
  if (op == MS_OP_POW && !b.tensor) return "PowBackward0";
  if (op == MS_OP_SUB && !a.tensor) return "RsubBackward1";
  if (op == MS_OP_DIV && !a.tensor) return "MulBackward0";
  return ms_binary_op_get_info(op)->node;
}

static ms_status record_binary(ms_binary_op op, ms_operand a, ms_operand b, ms_tensor *out) {
  ms_tensor *ins[2] = {a.tensor, b.tensor};
  /* comparisons and logical ops give bool results (no node name): nothing flows back */
  const char *node = binary_node_name(op, a, b);
  if (!out || !node || !ms_autograd_wants(2, ins)) return MS_OK;
  ms_node *n = ms_node_new(node, binary_backward, 2, ins);
  if (!n) return MS_ERR_MEMORY;
  n->ints[0] = op;
  for (int i = 0; i < 2; i++) {
    n->ints[1 + i] = ins[i] != NULL;
    n->scalars[i] = i == 0 ? a.value : b.value;
    bool reads_operands = op != MS_OP_ADD && op != MS_OP_SUB;
    if (ins[i] && reads_operands) ms_node_save(n, ins[i]);
    else n->saved[n->num_saved++] = (ms_saved){NULL, 0}; /* slot i stays operand i */
  }
  return grad_finish(n, out);
}

ms_tensor *ms_binary(ms_binary_op op, ms_operand a, ms_operand b) {
  ms_tensor *out = native_binary(op, a, b);
  return grad_kept(out, record_binary(op, a, b, out));
}

/* In place under autograd: computed out of place and rebased onto a. When the derivative reads
 * the operands, it reads a copy of a's old values, which stands for a in the graph: saving a
 * itself would see it overwritten (and a would own the node that owns it). */
static ms_status binary_inplace_grad(ms_binary_op op, ms_tensor *a, ms_operand b) {
  const char *name = ms_binary_op_name(op);
  if (grad_check_inplace(name, a) != MS_OK) return MS_ERR_RUNTIME;
  bool reads_operands = op != MS_OP_ADD && op != MS_OP_SUB;
  ms_tensor *src = reads_operands ? grad_inplace_original(a) : (ms_tensor_retain(a), a);
  if (!src) return MS_ERR_MEMORY;
  if (b.tensor == a) b = ms_operand_tensor(src); /* y:mul_(y) reads the old y twice */
  ms_tensor *out = ms_binary(op, ms_operand_tensor(src), b);
  ms_tensor_release(src);
  ms_status st = grad_rebase_inplace(name, a, out);
  ms_tensor_release(out);
  return st;
}

ms_status ms_binary_(ms_binary_op op, ms_tensor *a, ms_operand b) {
  if (!ms_autograd_wants(2, (ms_tensor *[]){a, b.tensor})) return native_binary_(op, a, b);
  if (native_binary_check_(op, a, b) != MS_OK) return MS_ERR_ARG;
  return binary_inplace_grad(op, a, b);
}

/* ---- whole-tensor comparisons: public, with a bool answer (nothing to record) ---------------- */

bool ms_equal(ms_tensor *a, ms_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  ms_tensor *ne = native_binary(MS_OP_NE, ms_operand_tensor(a), ms_operand_tensor(b));
  if (!ne) return false;
  ms_tensor *any = native_reduce(MS_RED_MAX, ne, (ms_reduce_opts){.all = true});
  bool equal = ms_tensor_numel(ne) == 0 || (any && ms_tensor_get_flat(any, 0) == 0);
  ms_tensor_release(any);
  ms_tensor_release(ne);
  return equal;
}

/* t as float64 broadcast to (ndim, shape) (new reference). */
static ms_tensor *as_float64(ms_tensor *t, int ndim, const int64_t *shape) {
  ms_tensor *d = native_to_dtype(t, MS_FLOAT64);
  ms_tensor *e = d ? native_expand(d, ndim, shape) : NULL;
  ms_tensor_release(d);
  return e;
}

ms_status ms_allclose(ms_tensor *a, ms_tensor *b, double rtol, double atol, bool *out) {
  int ndim;
  *out = false;
  if (a->dtype != b->dtype) /* as PyTorch: comparing across dtypes is more likely a slip */
    return ms_error(MS_ERR_ARG, "allclose: expected both tensors to have the same dtype, got %s and %s",
                    ms_dtype_name(a->dtype), ms_dtype_name(b->dtype));
  int64_t shape[MS_MAX_DIMS];
  if (broadcast_shapes("allclose", a->ndim, a->shape, b->ndim, b->shape, &ndim, shape)) return MS_ERR_ARG;
  ms_tensor *da = as_float64(a, ndim, shape), *db = as_float64(b, ndim, shape);
  ms_status st = da && db ? MS_OK : MS_ERR_MEMORY;
  *out = true;
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  for (int64_t i = 0; st == MS_OK && i < n && *out; i++) {
    double x = ms_tensor_get_flat(da, i), y = ms_tensor_get_flat(db, i);
    /* infinities must match exactly: inf - (-inf) is within rtol * inf */
    *out = x == y || (isfinite(x) && isfinite(y) && fabs(x - y) <= atol + rtol * fabs(y));
  }
  ms_tensor_release(da);
  ms_tensor_release(db);
  return st;
}
