/* grad_reduce.c: the public reductions (the native op, then the node) and their derivatives
 * (sum, mean, prod, max, min, var, std, norm), written with the native ops. The output's
 * gradient gets the reduced dim back as size 1 and broadcasting spreads it over the input;
 * max/min share it among ties, max/min over a dim send it to the returned index. */
#include <math.h>

#include "grad_util.h"

/* Layout: ints[0] = op, ints[1] = over all elements, ints[2] = dim (normalized), ints[3] =
 * keepdim, ints[4] = correction; scalars[0] = p. Saved: slot 0 the input, slot 1 the result
 * (detached), where the derivative reads them. */
enum { I_OP, I_ALL, I_DIM, I_KEEPDIM, I_CORRECTION };

/* ---- combinators: each borrows its arguments and returns a result that the formula's
 * ms_grad_temps owns (NULL passes through), so a formula reads as one expression ------------ */

/* a op b with tensors */
static ms_tensor *bin(ms_grad_temps *s, ms_tensor *a, ms_binary_op op, ms_tensor *b) {
  return a && b ? grad_temp(s, native_binary(op, ms_operand_tensor(a), ms_operand_tensor(b))) : NULL;
}

/* t op v */
static ms_tensor *bin_n(ms_grad_temps *s, ms_tensor *t, ms_binary_op op, double v) {
  return t ? grad_temp(s, native_binary(op, ms_operand_tensor(t), ms_operand_number(v, MS_FLOAT64))) : NULL;
}

static ms_tensor *un(ms_grad_temps *s, ms_unary_op op, ms_tensor *t) {
  return t ? grad_temp(s, native_unary(op, t)) : NULL;
}

/* cond ? a : b, cond ? a : 0 and cond ? 0 : b */
static ms_tensor *select3(ms_grad_temps *s, ms_tensor *cond, ms_tensor *a, bool a_zero, ms_tensor *b, bool b_zero) {
  ms_operand zero = ms_operand_number(0, MS_INT64);
  bool ok = cond && (a || a_zero) && (b || b_zero);
  return ok ? grad_temp(s, native_where(cond, a_zero ? zero : ms_operand_tensor(a), b_zero ? zero : ms_operand_tensor(b))) : NULL;
}

static ms_tensor *pick(ms_grad_temps *s, ms_tensor *cond, ms_tensor *a, ms_tensor *b) {
  return select3(s, cond, a, false, b, false);
}
static ms_tensor *or_zero(ms_grad_temps *s, ms_tensor *cond, ms_tensor *a) { return select3(s, cond, a, false, NULL, true); }
static ms_tensor *zero_or(ms_grad_temps *s, ms_tensor *cond, ms_tensor *b) { return select3(s, cond, NULL, true, b, false); }

static const int64_t *input_shape(const ms_node *n, int *ndim) {
  const ms_edge *e = &n->next[0];
  *ndim = e->node->out_ndim[e->input_nr];
  return e->node->out_shape[e->input_nr];
}

/* t (of the output's shape) with the reduced dim put back as size 1, so it broadcasts against
 * the input. */
static ms_tensor *keep(ms_grad_temps *s, ms_tensor *t, const ms_node *n) {
  if (!t || n->ints[I_ALL] || n->ints[I_KEEPDIM]) return t;
  return grad_temp(s, native_unsqueeze(t, (int)n->ints[I_DIM]));
}

/* The same reduction as the node's, with keepdim: t's rows reduced to keep()'s shape. */
static ms_tensor *reduce_keep(ms_grad_temps *s, ms_reduce_op op, ms_tensor *t, const ms_node *n) {
  ms_reduce_opts o = {.all = n->ints[I_ALL], .dim = (int)n->ints[I_DIM], .keepdim = true, .correction = 1};
  return t ? grad_temp(s, native_reduce(op, t, o)) : NULL;
}

/* How many elements each output reduced. */
static int64_t row_length(const ms_node *n) {
  int nd;
  const int64_t *shape = input_shape(n, &nd);
  if (!n->ints[I_ALL]) return shape[n->ints[I_DIM]];
  int64_t count = 1;
  for (int d = 0; d < nd; d++) count *= shape[d];
  return count;
}

/* t broadcast to the input's shape (a view). */
static ms_tensor *expand_to_input(ms_grad_temps *s, ms_tensor *t, const ms_node *n) {
  int nd;
  const int64_t *shape = input_shape(n, &nd);
  return t ? grad_temp(s, native_expand(t, nd, shape)) : NULL;
}

/* ---- the derivatives: each returns the input's gradient (owned by s) or NULL ---------------- */

/* prod: the product of the others. Written without dividing by zero: per row, a zero input
 * gets the product of the nonzero ones when it is the only zero, every other input gets
 * prod/x when the row has no zero, and everything else gets 0. */
static ms_tensor *prod_grad(ms_grad_temps *s, ms_node *n, ms_tensor *g, ms_tensor *x) {
  ms_tensor *zero = bin_n(s, x, MS_OP_EQ, 0);
  ms_tensor *zeros = reduce_keep(s, MS_RED_SUM, zero, n);
  ms_tensor *x1 = zero ? grad_temp(s, native_where(zero, ms_operand_number(1, MS_INT64), ms_operand_tensor(x))) : NULL;
  ms_tensor *p1 = reduce_keep(s, MS_RED_PROD, x1, n);
  ms_tensor *at_zero = or_zero(s, bin_n(s, zeros, MS_OP_EQ, 1), p1);
  ms_tensor *elsewhere = or_zero(s, bin_n(s, zeros, MS_OP_EQ, 0), bin(s, p1, MS_OP_DIV, x1));
  ms_tensor *f = pick(s, zero, at_zero, elsewhere);
  return bin(s, keep(s, g, n), MS_OP_MUL, f);
}

/* max/min over all elements (or amax/amin over a dim): split evenly among the elements equal to
 * the result. A NaN result came from the NaNs, which share it (PyTorch's
 * evenly_distribute_backward); amax/amin over a dim ignore that case, as PyTorch's do. */
static ms_tensor *even_split_grad(ms_grad_temps *s, ms_node *n, ms_tensor *g, ms_tensor *x, ms_tensor *out) {
  double v = 0;
  bool nan_result = n->ints[I_ALL] && ms_tensor_item(out, &v) == MS_OK && isnan(v);
  ms_tensor *hit = bin(s, x, nan_result ? MS_OP_NE : MS_OP_EQ, nan_result ? x : keep(s, out, n));
  ms_tensor *share = bin(s, keep(s, g, n), MS_OP_DIV, reduce_keep(s, MS_RED_SUM, hit, n));
  return or_zero(s, hit, share);
}

/* var: g * 2 (x - mean) / (N - correction) */
static ms_tensor *centered(ms_grad_temps *s, ms_node *n, ms_tensor *x) {
  return bin(s, x, MS_OP_SUB, reduce_keep(s, MS_RED_MEAN, x, n));
}

static ms_tensor *var_grad(ms_grad_temps *s, ms_node *n, ms_tensor *g, ms_tensor *x) {
  double dof = (double)(row_length(n) - n->ints[I_CORRECTION]);
  return bin(s, centered(s, n, x), MS_OP_MUL, bin_n(s, keep(s, g, n), MS_OP_MUL, 2.0 / dof));
}

/* std: var's gradient over 2 std; 0 where std is 0 (PyTorch masks it rather than give NaN) */
static ms_tensor *std_grad(ms_grad_temps *s, ms_node *n, ms_tensor *g, ms_tensor *x, ms_tensor *out) {
  double dof = (double)(row_length(n) - n->ints[I_CORRECTION]);
  ms_tensor *sd = keep(s, out, n);
  ms_tensor *scale = bin(s, keep(s, g, n), MS_OP_DIV, bin_n(s, sd, MS_OP_MUL, dof));
  scale = zero_or(s, bin_n(s, sd, MS_OP_EQ, 0), scale);
  return bin(s, centered(s, n, x), MS_OP_MUL, scale);
}

/* g / norm^(p-1), 0 where the norm is 0 */
static ms_tensor *norm_scale(ms_grad_temps *s, ms_node *n, ms_tensor *g, ms_tensor *out, double p) {
  ms_tensor *nk = keep(s, out, n);
  ms_tensor *den = p == 2 ? nk : bin_n(s, nk, MS_OP_POW, p - 1);
  return zero_or(s, bin_n(s, nk, MS_OP_EQ, 0), bin(s, keep(s, g, n), MS_OP_DIV, den));
}

static ms_tensor *norm_grad(ms_grad_temps *s, ms_node *n, ms_tensor *g, ms_tensor *x, ms_tensor *out) {
  double p = n->scalars[0];
  if (p == 0) { /* the count of nonzeros is flat */
    int nd;
    const int64_t *shape = input_shape(n, &nd);
    return grad_temp(s, ms_tensor_new_zeros_on(ms_tensor_device(x), nd, shape, x->dtype));
  }
  if (p == 1) return bin(s, keep(s, g, n), MS_OP_MUL, un(s, MS_OP_SIGN, x));
  if (isinf(p)) { /* the largest magnitudes share it, with their signs */
    ms_tensor *a = un(s, MS_OP_ABS, x);
    ms_tensor *share = a ? even_split_grad(s, n, g, a, out) : NULL;
    return bin(s, un(s, MS_OP_SIGN, x), MS_OP_MUL, share);
  }
  if (p == 2) return bin(s, x, MS_OP_MUL, norm_scale(s, n, g, out, p));
  /* sign(x) |x|^(p-1), 0 at x = 0 where p < 1 would give 0 * inf */
  ms_tensor *mag = bin_n(s, un(s, MS_OP_ABS, x), MS_OP_POW, p - 1);
  ms_tensor *sm = zero_or(s, bin_n(s, x, MS_OP_EQ, 0), bin(s, un(s, MS_OP_SIGN, x), MS_OP_MUL, mag));
  return bin(s, sm, MS_OP_MUL, norm_scale(s, n, g, out, p));
}

static ms_tensor *reduce_grad(ms_grad_temps *s, ms_node *n, ms_tensor *g, ms_tensor *x, ms_tensor *out) {
  switch ((ms_reduce_op)n->ints[I_OP]) {
  case MS_RED_SUM: return expand_to_input(s, keep(s, g, n), n);
  case MS_RED_MEAN: return expand_to_input(s, bin_n(s, keep(s, g, n), MS_OP_DIV, (double)row_length(n)), n);
  case MS_RED_PROD: return prod_grad(s, n, g, x);
  case MS_RED_MAX: case MS_RED_MIN: return even_split_grad(s, n, g, x, out);
  case MS_RED_VAR: return var_grad(s, n, g, x);
  case MS_RED_STD: return std_grad(s, n, g, x, out);
  case MS_RED_NORM: return norm_grad(s, n, g, x, out);
  case MS_RED_ARGMAX: case MS_RED_ARGMIN: case MS_RED_ANY: case MS_RED_ALL:
    break; /* integer and bool results record no node */
  }
  return ms_error(MS_ERR_RUNTIME, "backward: %s has no derivative", n->name), NULL;
}

static ms_status reduce_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *saved[2] = {NULL, NULL};
  for (int i = 0; i < n->num_saved; i++)
    if (!(saved[i] = ms_node_saved(n, i))) return MS_ERR_RUNTIME;
  ms_grad_temps s = {0};
  ms_tensor *r = reduce_grad(&s, n, grad_out[0], saved[0], saved[1]);
  if (r) ms_tensor_retain(r); /* outlives the formula's temporaries */
  grad_temps_release(&s);
  grad_in[0] = r;
  return r ? MS_OK : MS_ERR_MEMORY;
}

static const char *reduce_node_name(ms_reduce_op op, bool all) {
  switch (op) {
  case MS_RED_SUM: return all ? "SumBackward0" : "SumBackward1";
  case MS_RED_MEAN: return all ? "MeanBackward0" : "MeanBackward1";
  case MS_RED_PROD: return all ? "ProdBackward0" : "ProdBackward1";
  case MS_RED_MAX: return all ? "MaxBackward1" : "AmaxBackward0";
  case MS_RED_MIN: return all ? "MinBackward1" : "AminBackward0";
  case MS_RED_VAR: return "VarBackward0";
  case MS_RED_STD: return "StdBackward0";
  case MS_RED_NORM: return "NormBackward1";
  case MS_RED_ARGMAX: case MS_RED_ARGMIN: case MS_RED_ANY: case MS_RED_ALL:
    break; /* integer and bool results record no node */
  }
  return NULL;
}

/* Saves a detached view of the result: the result holds the node, so saving it directly would
 * make a reference cycle. The view shares the storage, hence the version. */
static bool save_result(ms_node *n, ms_tensor *out) {
  ms_tensor *d = ms_tensor_detach(out);
  if (d) ms_node_save(n, d);
  ms_tensor_release(d);
  return d != NULL;
}

static ms_status record_reduce(ms_reduce_op op, ms_tensor *a, ms_reduce_opts opts, ms_tensor *out) {
  /* argmax/argmin give integer positions, any/all booleans: nothing flows back */
  bool no_grad = op == MS_RED_ARGMAX || op == MS_RED_ARGMIN || op == MS_RED_ANY || op == MS_RED_ALL;
  if (!out || no_grad || !ms_autograd_wants(1, &a)) return MS_OK;
  bool all = opts.all || a->ndim == 0;
  int dim = 0;
  if (!all && ms_dim_normalize("backward", "dim", opts.dim, a->ndim, &dim) != MS_OK) return MS_ERR_ARG;
  ms_node *n = ms_node_new(reduce_node_name(op, all), reduce_backward, 1, &a);
  if (!n) return MS_ERR_MEMORY;
  n->ints[I_OP] = op, n->ints[I_ALL] = all, n->ints[I_DIM] = dim, n->ints[I_KEEPDIM] = opts.keepdim;
  n->ints[I_CORRECTION] = opts.correction;
  n->scalars[0] = opts.p;
  bool ok = true;
  if (op != MS_RED_SUM && op != MS_RED_MEAN) ms_node_save(n, a);
  if (op == MS_RED_MAX || op == MS_RED_MIN || op == MS_RED_STD || op == MS_RED_NORM) ok = save_result(n, out);
  if (!ok) return ms_node_release(n), MS_ERR_MEMORY;
  return grad_finish(n, out);
}

ms_tensor *ms_reduce(ms_reduce_op op, ms_tensor *a, ms_reduce_opts opts) {
  ms_tensor *out = native_reduce(op, a, opts);
  return grad_kept(out, record_reduce(op, a, opts, out));
}

/* ---- max/min over a dim: the gradient goes to the returned index ---------------------------- */

/* slot 0: a private copy of the indices (callers may shift the returned ones in place) */
static ms_status index_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *idx = ms_node_saved(n, 0);
  if (!idx) return MS_ERR_RUNTIME;
  if (n->ints[I_ALL]) /* a 0-dim input is its own max */
    return ms_tensor_retain(grad_out[0]), grad_in[0] = grad_out[0], MS_OK;
  int nd, dim = (int)n->ints[I_DIM];
  const int64_t *shape = input_shape(n, &nd);
  int64_t along[MS_MAX_DIMS]; /* positions along dim, shaped (1, ..., n, ..., 1) */
  for (int d = 0; d < nd; d++) along[d] = d == dim ? shape[d] : 1;
  ms_grad_temps s = {0};
  ms_tensor *pos = grad_temp(&s, ms_tensor_new_arange(0, (double)shape[dim], 1, MS_INT64));
  ms_tensor *col = pos ? grad_temp(&s, native_view(pos, nd, along)) : NULL;
  ms_tensor *hit = bin(&s, col, MS_OP_EQ, keep(&s, idx, n));
  ms_tensor *r = or_zero(&s, hit, keep(&s, grad_out[0], n));
  if (r) ms_tensor_retain(r);
  grad_temps_release(&s);
  grad_in[0] = r;
  return r ? MS_OK : MS_ERR_MEMORY;
}

/* Records on values; indices are copied (the node must not see later shifts of them). */
static ms_status record_reduce_indices(ms_reduce_op op, ms_tensor *a, int dim, bool keepdim,
                                       ms_tensor *indices, ms_tensor *values) {
  if (!ms_autograd_wants(1, &a)) return MS_OK;
  int d = 0;
  if (a->ndim > 0 && ms_dim_normalize("backward", "dim", dim, a->ndim, &d) != MS_OK) return MS_ERR_ARG;
  ms_tensor *idx = native_clone(indices);
  ms_node *n = idx ? ms_node_new(op == MS_RED_MAX ? "MaxBackward0" : "MinBackward0", index_backward, 1, &a) : NULL;
  if (!n) return ms_tensor_release(idx), MS_ERR_MEMORY;
  n->ints[I_OP] = op, n->ints[I_ALL] = a->ndim == 0, n->ints[I_DIM] = d, n->ints[I_KEEPDIM] = keepdim;
  ms_node_save(n, idx);
  ms_tensor_release(idx);
  return grad_finish(n, values);
}

ms_status ms_reduce_with_indices(ms_reduce_op op, ms_tensor *a, int dim, bool keepdim,
                                 ms_tensor **values, ms_tensor **indices) {
  ms_status st = native_reduce_with_indices(op, a, dim, keepdim, values, indices);
  if (st != MS_OK) return st;
  /* the gradient flows through the values only; the indices are integers */
  if ((st = record_reduce_indices(op, a, dim, keepdim, *indices, *values)) != MS_OK) {
    ms_tensor_release(*values), ms_tensor_release(*indices);
    *values = *indices = NULL;
  }
  return st;
}
