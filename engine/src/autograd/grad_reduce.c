/* grad_reduce.c: derivatives of the reductions (sum, mean, prod, max, min, var, std, norm). The
 * output's gradient gets the reduced dim back as size 1 and broadcasting spreads it over the
 * input; max/min share it among ties, max/min over a dim send it to the returned index. */
#include <math.h>

#include "grad_util.h"

/* Layout: ints[0] = op, ints[1] = over all elements, ints[2] = dim (normalized), ints[3] =
 * keepdim, ints[4] = correction; scalars[0] = p. Saved: slot 0 the input, slot 1 the result
 * (detached), where the derivative reads them. */
enum { I_OP, I_ALL, I_DIM, I_KEEPDIM, I_CORRECTION };

static ms_tensor *ref(ms_tensor *t) {
  if (t) ms_tensor_retain(t);
  return t;
}

/* a op b with tensors, both consumed */
static ms_tensor *bin(ms_tensor *a, ms_binary_op op, ms_tensor *b) {
  ms_tensor *r = a && b ? ms_binary(op, ms_operand_tensor(a), ms_operand_tensor(b)) : NULL;
  ms_tensor_release(a), ms_tensor_release(b);
  return r;
}

/* t op v, t consumed */
static ms_tensor *bin_n(ms_tensor *t, ms_binary_op op, double v) {
  ms_tensor *r = t ? ms_binary(op, ms_operand_tensor(t), ms_operand_number(v, MS_FLOAT64)) : NULL;
  ms_tensor_release(t);
  return r;
}

/* cond ? a : b, cond ? a : 0 and cond ? 0 : b; every argument consumed, NULL passes through */
static ms_tensor *select3(ms_tensor *cond, ms_tensor *a, bool a_zero, ms_tensor *b, bool b_zero) {
  ms_operand zero = ms_operand_number(0, MS_INT64);
  bool ok = cond && (a || a_zero) && (b || b_zero);
  ms_tensor *r = ok ? ms_where(cond, a_zero ? zero : ms_operand_tensor(a), b_zero ? zero : ms_operand_tensor(b)) : NULL;
  ms_tensor_release(cond), ms_tensor_release(a), ms_tensor_release(b);
  return r;
}

static ms_tensor *pick(ms_tensor *cond, ms_tensor *a, ms_tensor *b) { return select3(cond, a, false, b, false); }
static ms_tensor *or_zero(ms_tensor *cond, ms_tensor *a) { return select3(cond, a, false, NULL, true); }
static ms_tensor *zero_or(ms_tensor *cond, ms_tensor *b) { return select3(cond, NULL, true, b, false); }

static const int64_t *input_shape(const ms_node *n, int *ndim) {
  const ms_edge *e = &n->next[0];
  *ndim = e->node->out_ndim[e->input_nr];
  return e->node->out_shape[e->input_nr];
}

/* t (of the output's shape) with the reduced dim put back as size 1, so it broadcasts against
 * the input. A new reference. */
static ms_tensor *keep(ms_tensor *t, const ms_node *n) {
  if (n->ints[I_ALL] || n->ints[I_KEEPDIM]) return ref(t);
  return ms_tensor_unsqueeze(t, (int)n->ints[I_DIM]);
}

/* The same reduction as the node's, with keepdim: t's rows reduced to keep()'s shape. */
static ms_tensor *reduce_keep(ms_reduce_op op, ms_tensor *t, const ms_node *n) {
  ms_reduce_opts o = {.all = n->ints[I_ALL], .dim = (int)n->ints[I_DIM], .keepdim = true, .correction = 1};
  return t ? ms_reduce(op, t, o) : NULL;
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

/* t broadcast to the input's shape (a view). Consumes t. */
static ms_tensor *expand_to_input(ms_tensor *t, const ms_node *n) {
  int nd;
  const int64_t *shape = input_shape(n, &nd);
  ms_tensor *r = t ? ms_tensor_expand(t, nd, shape) : NULL;
  ms_tensor_release(t);
  return r;
}

/* ---- the derivatives: each returns the input's gradient (new reference) or NULL ------------ */

/* prod: the product of the others. Written without dividing by zero: per row, a zero input
 * gets the product of the nonzero ones when it is the only zero, every other input gets
 * prod/x when the row has no zero, and everything else gets 0. */
static ms_tensor *prod_grad(ms_node *n, ms_tensor *g, ms_tensor *x) {
  ms_tensor *zero = bin_n(ref(x), MS_OP_EQ, 0);
  ms_tensor *zeros = reduce_keep(MS_RED_SUM, zero, n);
  ms_tensor *x1 = zero ? ms_where(zero, ms_operand_number(1, MS_INT64), ms_operand_tensor(x)) : NULL;
  ms_tensor *p1 = reduce_keep(MS_RED_PROD, x1, n);
  ms_tensor *at_zero = or_zero(bin_n(ref(zeros), MS_OP_EQ, 1), ref(p1));
  ms_tensor *elsewhere = or_zero(bin_n(ref(zeros), MS_OP_EQ, 0), bin(ref(p1), MS_OP_DIV, ref(x1)));
  ms_tensor *f = pick(zero, at_zero, elsewhere);
  ms_tensor_release(zeros), ms_tensor_release(x1), ms_tensor_release(p1);
  return bin(keep(g, n), MS_OP_MUL, f);
}

/* max/min over all elements (or amax/amin over a dim): split evenly among the elements equal to
 * the result. A NaN result came from the NaNs, which share it (PyTorch's
 * evenly_distribute_backward); amax/amin over a dim ignore that case, as PyTorch's do. */
static ms_tensor *even_split_grad(ms_node *n, ms_tensor *g, ms_tensor *x, ms_tensor *out) {
  double v = 0;
  bool nan_result = n->ints[I_ALL] && ms_tensor_item(out, &v) == MS_OK && isnan(v);
  ms_tensor *hit = bin(ref(x), nan_result ? MS_OP_NE : MS_OP_EQ, nan_result ? ref(x) : keep(out, n));
  ms_tensor *share = bin(keep(g, n), MS_OP_DIV, reduce_keep(MS_RED_SUM, hit, n));
  return or_zero(hit, share);
}

/* var: g * 2 (x - mean) / (N - correction) */
static ms_tensor *centered(ms_node *n, ms_tensor *x) {
  return bin(ref(x), MS_OP_SUB, reduce_keep(MS_RED_MEAN, x, n));
}

static ms_tensor *var_grad(ms_node *n, ms_tensor *g, ms_tensor *x) {
  double dof = (double)(row_length(n) - n->ints[I_CORRECTION]);
  return bin(centered(n, x), MS_OP_MUL, bin_n(keep(g, n), MS_OP_MUL, 2.0 / dof));
}

/* std: var's gradient over 2 std; 0 where std is 0 (PyTorch masks it rather than give NaN) */
static ms_tensor *std_grad(ms_node *n, ms_tensor *g, ms_tensor *x, ms_tensor *out) {
  double dof = (double)(row_length(n) - n->ints[I_CORRECTION]);
  ms_tensor *s = keep(out, n);
  ms_tensor *scale = bin(keep(g, n), MS_OP_DIV, bin_n(ref(s), MS_OP_MUL, dof));
  scale = zero_or(bin_n(s, MS_OP_EQ, 0), scale);
  return bin(centered(n, x), MS_OP_MUL, scale);
}

/* g / norm^(p-1), 0 where the norm is 0 */
static ms_tensor *norm_scale(ms_node *n, ms_tensor *g, ms_tensor *out, double p) {
  ms_tensor *nk = keep(out, n);
  ms_tensor *den = p == 2 ? ref(nk) : bin_n(ref(nk), MS_OP_POW, p - 1);
  return zero_or(bin_n(nk, MS_OP_EQ, 0), bin(keep(g, n), MS_OP_DIV, den));
}

static ms_tensor *norm_grad(ms_node *n, ms_tensor *g, ms_tensor *x, ms_tensor *out) {
  double p = n->scalars[0];
  if (p == 0) { /* the count of nonzeros is flat */
    int nd;
    const int64_t *shape = input_shape(n, &nd);
    return ms_tensor_new_zeros_on(ms_tensor_device(x), nd, shape, x->dtype);
  }
  if (p == 1) return bin(keep(g, n), MS_OP_MUL, ms_unary(MS_OP_SIGN, x));
  if (isinf(p)) { /* the largest magnitudes share it, with their signs */
    ms_tensor *a = ms_unary(MS_OP_ABS, x);
    ms_tensor *share = a ? even_split_grad(n, g, a, out) : NULL;
    ms_tensor_release(a);
    return bin(ms_unary(MS_OP_SIGN, x), MS_OP_MUL, share);
  }
  if (p == 2) return bin(ref(x), MS_OP_MUL, norm_scale(n, g, out, p));
  /* sign(x) |x|^(p-1), 0 at x = 0 where p < 1 would give 0 * inf */
  ms_tensor *mag = bin_n(ms_unary(MS_OP_ABS, x), MS_OP_POW, p - 1);
  ms_tensor *s = zero_or(bin_n(ref(x), MS_OP_EQ, 0), bin(ms_unary(MS_OP_SIGN, x), MS_OP_MUL, mag));
  return bin(s, MS_OP_MUL, norm_scale(n, g, out, p));
}

static ms_tensor *reduce_grad(ms_node *n, ms_tensor *g, ms_tensor *x, ms_tensor *out) {
  switch ((ms_reduce_op)n->ints[I_OP]) {
  case MS_RED_SUM: return expand_to_input(keep(g, n), n);
  case MS_RED_MEAN: return expand_to_input(bin_n(keep(g, n), MS_OP_DIV, (double)row_length(n)), n);
  case MS_RED_PROD: return prod_grad(n, g, x);
  case MS_RED_MAX: case MS_RED_MIN: return even_split_grad(n, g, x, out);
  case MS_RED_VAR: return var_grad(n, g, x);
  case MS_RED_STD: return std_grad(n, g, x, out);
  case MS_RED_NORM: return norm_grad(n, g, x, out);
  default: return ms_error(MS_ERR_RUNTIME, "backward: %s has no derivative", n->name), NULL;
  }
}

static ms_status reduce_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *saved[2] = {NULL, NULL};
  for (int i = 0; i < n->num_saved; i++)
    if (!(saved[i] = ms_node_saved(n, i))) return MS_ERR_RUNTIME;
  grad_in[0] = reduce_grad(n, grad_out[0], saved[0], saved[1]);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
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
  default: return "NormBackward1";
  }
}

/* Saves a detached view of the result: the result holds the node, so saving it directly would
 * make a reference cycle. The view shares the storage, hence the version. */
static bool save_result(ms_node *n, ms_tensor *out) {
  ms_tensor *d = ms_tensor_detach(out);
  if (d) ms_node_save(n, d);
  ms_tensor_release(d);
  return d != NULL;
}

ms_tensor *ms_grad_record_reduce(ms_reduce_op op, ms_tensor *a, ms_reduce_opts opts, ms_tensor *out) {
  /* argmax/argmin give integer positions: nothing flows back */
  if (!out || op == MS_RED_ARGMAX || op == MS_RED_ARGMIN || !ms_autograd_wants(1, &a)) return out;
  bool all = opts.all || a->ndim == 0;
  int dim = 0;
  if (!all && ms_dim_normalize("backward", "dim", opts.dim, a->ndim, &dim) != MS_OK)
    return ms_tensor_release(out), NULL;
  ms_node *n = ms_node_new(reduce_node_name(op, all), reduce_backward, 1, &a);
  if (!n) return ms_tensor_release(out), NULL;
  n->ints[I_OP] = op, n->ints[I_ALL] = all, n->ints[I_DIM] = dim, n->ints[I_KEEPDIM] = opts.keepdim;
  n->ints[I_CORRECTION] = opts.correction;
  n->scalars[0] = opts.p;
  bool ok = true;
  if (op != MS_RED_SUM && op != MS_RED_MEAN) ms_node_save(n, a);
  if (op == MS_RED_MAX || op == MS_RED_MIN || op == MS_RED_STD || op == MS_RED_NORM) ok = save_result(n, out);
  if (!ok) return ms_node_release(n), ms_tensor_release(out), NULL;
  ms_node_attach(n, out, 0);
  ms_node_release(n);
  return out;
}

/* ---- max/min over a dim: the gradient goes to the returned index ---------------------------- */

/* slot 0: a private copy of the indices (callers may shift the returned ones in place) */
static ms_status index_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *idx = ms_node_saved(n, 0);
  if (!idx) return MS_ERR_RUNTIME;
  if (n->ints[I_ALL]) return grad_in[0] = ref(grad_out[0]), MS_OK; /* a 0-dim input is its own max */
  int nd, dim = (int)n->ints[I_DIM];
  const int64_t *shape = input_shape(n, &nd);
  int64_t along[MS_MAX_DIMS]; /* positions along dim, shaped (1, ..., n, ..., 1) */
  for (int d = 0; d < nd; d++) along[d] = d == dim ? shape[d] : 1;
  ms_tensor *pos = ms_tensor_new_arange(0, (double)shape[dim], 1, MS_INT64);
  ms_tensor *col = pos ? ms_tensor_view(pos, nd, along) : NULL;
  ms_tensor_release(pos);
  ms_tensor *hit = bin(col, MS_OP_EQ, keep(idx, n));
  grad_in[0] = or_zero(hit, keep(grad_out[0], n));
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

ms_tensor *ms_grad_record_reduce_indices(ms_reduce_op op, ms_tensor *a, int dim, bool keepdim,
                                         ms_tensor *indices, ms_tensor *values) {
  if (!values || !ms_autograd_wants(1, &a)) return values;
  int d = 0;
  if (a->ndim > 0 && ms_dim_normalize("backward", "dim", dim, a->ndim, &d) != MS_OK)
    return ms_tensor_release(values), NULL;
  bool prev = ms_grad_set_enabled(false);
  ms_tensor *idx = ms_tensor_clone(indices);
  ms_grad_set_enabled(prev);
  ms_node *n = idx ? ms_node_new(op == MS_RED_MAX ? "MaxBackward0" : "MinBackward0", index_backward, 1, &a) : NULL;
  if (!n) return ms_tensor_release(idx), ms_tensor_release(values), NULL;
  n->ints[I_OP] = op, n->ints[I_ALL] = a->ndim == 0, n->ints[I_DIM] = d, n->ints[I_KEEPDIM] = keepdim;
  ms_node_save(n, idx);
  ms_tensor_release(idx);
  ms_node_attach(n, values, 0);
  ms_node_release(n);
  return values;
}
