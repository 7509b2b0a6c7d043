/* grad_select.c: the public gather, scatter, sort, topk, cumsum and cumprod (the native op, then
 * its node) and their derivatives, with the native ops: gather and scatter send the gradient
 * back through the same index (scatter_add, gather), sort and topk through the positions they
 * returned, cumsum as a running sum from the end, cumprod as PyTorch (zeros included). */
#include "grad_util.h"

/* Node layout: ints[I_DIM] the dim (normalized), ints[I_BASE] the index base, ints[I_MODE] the
 * scatter mode or scan op; scatter's src shape from ints[I_SRC_NDIM]. Slot 0: the index (scans:
 * cumprod's input, slot 1 its result). */
enum { I_DIM, I_BASE, I_MODE, I_SRC_NDIM, I_SRC_SHAPE };

static const int64_t *input_shape(const ms_node *n, int i, int *ndim) {
  const ms_edge *e = &n->next[i];
  *ndim = e->node->out_ndim[e->input_nr];
  return e->node->out_shape[e->input_nr];
}

/* zeros of (ndim, shape) in g's dtype with g added at index along dim (new reference). */
static ms_tensor *scatter_add_into_zeros(ms_tensor *g, int ndim, const int64_t *shape, int dim, ms_tensor *index,
                                         int64_t base) {
  ms_tensor *z = ms_tensor_new_zeros_on(ms_tensor_device(g), ndim, shape, g->dtype);
  ms_tensor *out = z ? native_scatter(z, dim, index, ms_operand_tensor(g), MS_SCATTER_ADD, base) : NULL;
  ms_tensor_release(z);
  return out;
}

/* ---- gather --------------------------------------------------------------------------------- */

static ms_status gather_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *idx = ms_node_saved(n, 0);
  if (!idx) return MS_ERR_RUNTIME;
  int nd;
  const int64_t *shape = input_shape(n, 0, &nd);
  grad_in[0] = scatter_add_into_zeros(grad_out[0], nd, shape, (int)n->ints[I_DIM], idx, n->ints[I_BASE]);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

/* A node of the nin inputs (the op's input first) that keeps the index (dim already accepted by
 * the native op). */
static ms_node *index_node(const char *name, ms_backward_fn fn, int nin, ms_tensor *const *in, int dim,
                           ms_tensor *index, int64_t base) {
  ms_node *n = ms_node_new(name, fn, nin, in);
  if (!n) return NULL;
  int nd = in[0]->ndim > 0 ? in[0]->ndim : 1;
  n->ints[I_DIM] = dim < 0 ? dim + nd : dim, n->ints[I_BASE] = base;
  ms_node_save(n, index);
  return n;
}

static ms_status record_gather(ms_tensor *t, int dim, ms_tensor *index, int64_t base, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &t)) return MS_OK;
  return grad_finish(index_node("GatherBackward0", gather_backward, 1, &t, dim, index, base), out);
}

ms_tensor *ms_gather(ms_tensor *t, int dim, ms_tensor *index, int64_t index_base) {
  ms_tensor *out = native_gather(t, dim, index, index_base);
  return grad_kept(out, record_gather(t, dim, index, index_base, out));
}

/* ---- scatter and scatter_add ------------------------------------------------------------------ */

/* g gathered at index, in a zero tensor of src's shape where src is larger than the index. */
static ms_tensor *src_grad(ms_node *n, ms_tensor *g, ms_tensor *idx) {
  int dim = (int)n->ints[I_DIM];
  ms_tensor *gi = native_gather(g, dim, idx, n->ints[I_BASE]);
  int nd = (int)n->ints[I_SRC_NDIM];
  const int64_t *shape = &n->ints[I_SRC_SHAPE];
  bool same = gi && gi->ndim == nd;
  for (int d = 0; same && d < nd; d++) same = gi->shape[d] == shape[d];
  if (!gi || same) return gi;
  ms_tensor *z = ms_tensor_new_zeros_on(ms_tensor_device(g), nd, shape, g->dtype), *part = z;
  if (part) ms_tensor_retain(part);
  for (int d = 0; part && d < nd; d++) { /* the leading corner that the index covered */
    ms_tensor *next = native_narrow(part, d, 0, gi->shape[d]);
    ms_tensor_release(part);
    part = next;
  }
  ms_status st = part ? native_copy_(part, gi) : MS_ERR_MEMORY;
  ms_tensor_release(part), ms_tensor_release(gi);
  if (st != MS_OK) ms_tensor_release(z), z = NULL;
  return z;
}

/* grad_in[0] for the input (positions that scatter wrote get 0), grad_in[1] for src. */
static ms_status scatter_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *idx = ms_node_saved(n, 0), *g = grad_out[0];
  if (!idx) return MS_ERR_RUNTIME;
  bool add = n->ints[I_MODE] == MS_SCATTER_ADD;
  if (grad_needed(n, 0)) {
    if (add) ms_tensor_retain(g), grad_in[0] = g;
    else grad_in[0] = native_scatter(g, (int)n->ints[I_DIM], idx, ms_operand_number(0, MS_INT64), MS_SCATTER_COPY,
                                     n->ints[I_BASE]);
    if (!grad_in[0]) return MS_ERR_MEMORY;
  }
  if (n->num_inputs > 1 && grad_needed(n, 1) && !(grad_in[1] = src_grad(n, g, idx))) return MS_ERR_MEMORY;
  return MS_OK;
}

static const char *scatter_node_name(ms_scatter_mode mode, bool number) {
  if (mode == MS_SCATTER_ADD) return "ScatterAddBackward0";
  return number ? "ScatterBackward1" : "ScatterBackward0";
}

static ms_status record_scatter(ms_tensor *t, int dim, ms_tensor *index, ms_operand src, ms_scatter_mode mode,
                                int64_t base, ms_tensor *out) {
  ms_tensor *in[2] = {t, src.tensor};
  int nin = src.tensor ? 2 : 1;
  if (!out || !ms_autograd_wants(nin, in)) return MS_OK;
  ms_node *n = index_node(scatter_node_name(mode, !src.tensor), scatter_backward, nin, in, dim, index, base);
  if (n) n->ints[I_MODE] = mode;
  if (n && src.tensor) { /* src_grad's shape */
    ms_tensor *s = src.tensor;
    n->ints[I_SRC_NDIM] = s->ndim > 0 ? s->ndim : 1;
    for (int d = 0; d < s->ndim; d++) n->ints[I_SRC_SHAPE + d] = s->shape[d];
    if (s->ndim == 0) n->ints[I_SRC_SHAPE] = 1;
  }
  return grad_finish(n, out);
}

ms_tensor *ms_scatter(ms_tensor *t, int dim, ms_tensor *index, ms_operand src, ms_scatter_mode mode,
                      int64_t index_base) {
  ms_tensor *out = native_scatter(t, dim, index, src, mode, index_base);
  return grad_kept(out, record_scatter(t, dim, index, src, mode, index_base, out));
}

ms_status ms_scatter_(ms_tensor *t, int dim, ms_tensor *index, ms_operand src, ms_scatter_mode mode,
                      int64_t index_base) {
  const char *name = mode == MS_SCATTER_ADD ? "scatter_add" : "scatter";
  bool record = ms_autograd_wants(2, (ms_tensor *[]){t, src.tensor});
  if (record && grad_check_inplace(name, t) != MS_OK) return MS_ERR_RUNTIME;
  ms_tensor *out = record ? ms_scatter(t, dim, index, src, mode, index_base)
                          : native_scatter(t, dim, index, src, mode, index_base);
  ms_status st = !out ? MS_ERR_ARG : record ? grad_rebase_inplace(name, t, out) : native_copy_(t, out);
  ms_tensor_release(out);
  return st;
}

/* ---- sort and topk: the gradient goes back to the positions returned ------------------------ */

static ms_status sorted_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  return gather_backward(n, grad_out, grad_in); /* the same formula: scatter_add into zeros */
}

/* Records on values; the node keeps its own copy of the indices (the Lua face shifts the
 * returned ones in place). */
static ms_status record_sorted(const char *name, ms_tensor *t, int dim, ms_tensor *indices, ms_tensor *values) {
  if (!ms_autograd_wants(1, &t)) return MS_OK;
  ms_tensor *idx = native_clone(indices);
  ms_node *n = idx ? index_node(name, sorted_backward, 1, &t, dim, idx, 0) : NULL;
  ms_tensor_release(idx);
  return grad_finish(n, values);
}

static ms_status kept_pair(ms_status st, ms_tensor **values, ms_tensor **indices) {
  if (st != MS_OK) ms_tensor_release(*values), ms_tensor_release(*indices), *values = *indices = NULL;
  return st;
}

ms_status ms_sort(ms_tensor *t, int dim, bool descending, bool stable, ms_tensor **values, ms_tensor **indices) {
  ms_status st = native_sort(t, dim, descending, values, indices);
  if (st != MS_OK) return st;
  return kept_pair(record_sorted(stable ? "SortBackward1" : "SortBackward0", t, dim, *indices, *values), values,
                   indices);
}

ms_status ms_topk(ms_tensor *t, int64_t k, int dim, bool largest, ms_tensor **values, ms_tensor **indices) {
  ms_status st = native_topk(t, k, dim, largest, values, indices);
  if (st != MS_OK) return st;
  return kept_pair(record_sorted("TopkBackward0", t, dim, *indices, *values), values, indices);
}

/* ---- cumsum and cumprod ----------------------------------------------------------------------- */

/* ---- combinators for cumprod's gradient: each borrows its arguments and returns a result that
 * s owns; a NULL argument (a failed step) gives NULL ---- */
static ms_tensor *bin(ms_grad_temps *s, ms_tensor *a, ms_binary_op op, ms_tensor *b) {
  return a && b ? grad_temp(s, native_binary(op, ms_operand_tensor(a), ms_operand_tensor(b))) : NULL;
}
static ms_tensor *bin_n(ms_grad_temps *s, ms_tensor *a, ms_binary_op op, double v) {
  return a ? grad_temp(s, native_binary(op, ms_operand_tensor(a), ms_operand_number(v, MS_INT64))) : NULL;
}
/* cond ? a : v and cond ? v : a */
static ms_tensor *or_number(ms_grad_temps *s, ms_tensor *cond, ms_tensor *a, double v) {
  return cond && a ? grad_temp(s, native_where(cond, ms_operand_tensor(a), ms_operand_number(v, MS_INT64))) : NULL;
}
static ms_tensor *number_or(ms_grad_temps *s, ms_tensor *cond, double v, ms_tensor *a) {
  return cond && a ? grad_temp(s, native_where(cond, ms_operand_number(v, MS_INT64), ms_operand_tensor(a))) : NULL;
}
static ms_tensor *scan(ms_grad_temps *s, ms_scan_op op, ms_tensor *t, int dim, bool reverse) {
  return t ? grad_temp(s, native_scan(op, t, dim, reverse)) : NULL;
}

/* cumprod's gradient with PyTorch's care for zeros: along a row, with z its first zero, positions
 * before z get the running sum (from the end) of g * y, over x; z itself gets the same sum of
 * g * P, P the running product with x[z] taken as 1; positions after z get 0. A row without a
 * zero is the first formula throughout. */
static ms_tensor *cumprod_grad(ms_tensor *g, ms_tensor *x, ms_tensor *y, int dim) {
  ms_grad_temps s = {0};
  ms_tensor *is_zero = bin_n(&s, x, MS_OP_EQ, 0);
  ms_tensor *zeros_so_far = scan(&s, MS_SCAN_CUMSUM, is_zero, dim, false);
  ms_tensor *before = bin_n(&s, zeros_so_far, MS_OP_EQ, 0);
  ms_tensor *first = bin(&s, bin_n(&s, zeros_so_far, MS_OP_EQ, 1), MS_OP_LOGICAL_AND, is_zero);
  ms_tensor *a = bin(&s, scan(&s, MS_SCAN_CUMSUM, bin(&s, g, MS_OP_MUL, y), dim, true), MS_OP_DIV,
                     or_number(&s, before, x, 1));
  ms_tensor *p = scan(&s, MS_SCAN_CUMPROD, number_or(&s, first, 1, x), dim, false);
  ms_tensor *b = scan(&s, MS_SCAN_CUMSUM, bin(&s, g, MS_OP_MUL, p), dim, true);
  ms_tensor *at_zero = or_number(&s, first, b, 0);
  ms_tensor *r = a && at_zero ? native_where(before, ms_operand_tensor(a), ms_operand_tensor(at_zero)) : NULL;
  grad_temps_release(&s);
  return r;
}

/* cumsum: the running sum of g from the end; cumprod: cumprod_grad (slot 0 the input, slot 1
 * the result). */
static ms_status scan_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  int dim = (int)n->ints[I_DIM];
  if (n->ints[I_MODE] == MS_SCAN_CUMSUM)
    return (grad_in[0] = native_scan(MS_SCAN_CUMSUM, grad_out[0], dim, true)) ? MS_OK : MS_ERR_MEMORY;
  ms_tensor *x = ms_node_saved(n, 0), *y = ms_node_saved(n, 1);
  if (!x || !y) return MS_ERR_RUNTIME;
  return (grad_in[0] = cumprod_grad(grad_out[0], x, y, dim)) ? MS_OK : MS_ERR_MEMORY;
}

/* cumprod saves its input and a detached copy of its result. */
static bool save_cumprod(ms_node *n, ms_tensor *t, ms_tensor *out) {
  ms_tensor *d = ms_tensor_detach(out);
  if (!d) return false;
  ms_node_save(n, t), ms_node_save(n, d);
  ms_tensor_release(d);
  return true;
}

static ms_status record_scan(ms_scan_op op, ms_tensor *t, int dim, ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &t)) return MS_OK;
  ms_node *n = ms_node_new(op == MS_SCAN_CUMSUM ? "CumsumBackward0" : "CumprodBackward0", scan_backward, 1, &t);
  if (n) {
    int nd = t->ndim > 0 ? t->ndim : 1;
    n->ints[I_DIM] = dim < 0 ? dim + nd : dim, n->ints[I_MODE] = op;
    if (op == MS_SCAN_CUMPROD && !save_cumprod(n, t, out)) ms_node_release(n), n = NULL;
  }
  return grad_finish(n, out);
}

ms_tensor *ms_scan(ms_scan_op op, ms_tensor *t, int dim) {
  ms_tensor *out = native_scan(op, t, dim, false);
  return grad_kept(out, record_scan(op, t, dim, out));
}
