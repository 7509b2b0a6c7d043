/* grad_view.c: the public view and shape ops, copies, dtype and device conversions, in-place
 * writes (copy_, fill_, slice assignment) and the factories that fill on a device: each the
 * native op, then its node; and their derivatives. A view's gradient is the output gradient put back into the input's geometry:
 * reshaped, permuted back, embedded into zeros (narrow, select) or summed over what was
 * broadcast (expand). */
#include <stdlib.h>
#include <string.h>

#include "grad_util.h"
#include "tensor_internal.h"

/* ints layout of the one-input nodes: the input's ndim, shape and dtype (the gradient must come
 * back in that geometry), then the op's own parameters (dim, start, length, permutation). */
enum { IN_NDIM = 0, IN_SHAPE = 1, IN_DTYPE = 1 + MS_MAX_DIMS, PARAM = 2 + MS_MAX_DIMS };

static void save_geometry(ms_node *n, const ms_tensor *in) {
  n->ints[IN_NDIM] = in->ndim;
  for (int d = 0; d < in->ndim; d++) n->ints[IN_SHAPE + d] = in->shape[d];
  n->ints[IN_DTYPE] = in->dtype;
}

static int in_ndim(const ms_node *n) { return (int)n->ints[IN_NDIM]; }
static const int64_t *in_shape(const ms_node *n) { return &n->ints[IN_SHAPE]; }
static ms_dtype in_dtype(const ms_node *n) { return (ms_dtype)n->ints[IN_DTYPE]; }

/* Backward functions return through this: a NULL result already carries its error. */
static ms_status result(ms_tensor **slot, ms_tensor *t) {
  *slot = t;
  return t ? MS_OK : MS_ERR_RUNTIME;
}

/* A one-input node for an op on `in`, with in's geometry saved; NULL on failure. */
static ms_node *new_unary(const char *name, ms_backward_fn fn, ms_tensor *in) {
  ms_node *n = ms_node_new(name, fn, 1, &in);
  if (n) save_geometry(n, in);
  return n;
}


/* grad_finish() for a view: out also remembers the tensor it views (the first one that is not a
 * view itself), so that an in-place write through out can be recorded on that base. A reshape
 * that had to copy is no view: it shares no storage with its input. */
static ms_status finish_view(ms_node *n, ms_tensor *in, ms_tensor *out) {
  ms_status st = grad_finish(n, out);
  if (st == MS_OK) grad_view_of(in, out);
  return st;
}

void grad_view_of(ms_tensor *in, ms_tensor *out) {
  if (out->storage != in->storage) return;
  ms_tensor *base = in->grad_base ? in->grad_base : in;
  ms_tensor_retain(base);
  ms_tensor_release(out->grad_base);
  out->grad_base = base;
}

/* Whether out = op(in) gets a node: an op that handed back its input itself keeps in's node. */
static bool records(ms_tensor *in, ms_tensor *out) {
  return out && out != in && ms_autograd_wants(1, &in);
}

/* ---- shape changes that keep the element order: view, reshape, flatten, (un)squeeze -------- */

static ms_status reshape_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  return result(&gi[0], native_reshape(g[0], in_ndim(n), in_shape(n)));
}

static ms_status record_reshape(const char *name, ms_tensor *in, ms_tensor *out) {
  if (!records(in, out)) return MS_OK;
  return finish_view(new_unary(name, reshape_backward, in), in, out);
}

/* ---- transpose and permute ------------------------------------------------------------------ */

static ms_status permute_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  int inverse[MS_MAX_DIMS];
  for (int d = 0; d < in_ndim(n); d++) inverse[n->ints[PARAM + d]] = d;
  return result(&gi[0], native_permute(g[0], inverse));
}

static ms_status record_permute(const char *name, ms_tensor *in, const int *dims, ms_tensor *out) {
  if (!records(in, out)) return MS_OK;
  ms_node *n = new_unary(name, permute_backward, in);
  for (int d = 0; n && d < in->ndim; d++) n->ints[PARAM + d] = dims[d];
  return finish_view(n, in, out);
}

/* ---- narrow and select: the gradient fills its slot of a zero tensor of the input's shape -- */

enum { P_DIM = PARAM, P_START, P_LENGTH, P_SELECT };

static ms_tensor *slot_of(ms_tensor *t, const ms_node *n) {
  int dim = (int)n->ints[P_DIM];
  if (n->ints[P_SELECT]) return native_select(t, dim, n->ints[P_START]);
  return native_narrow(t, dim, n->ints[P_START], n->ints[P_LENGTH]);
}

static ms_status embed_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  ms_tensor *z = ms_tensor_new_zeros_on(ms_tensor_device(g[0]), in_ndim(n), in_shape(n), g[0]->dtype);
  ms_tensor *slot = z ? slot_of(z, n) : NULL;
  ms_status st = slot ? native_copy_(slot, g[0]) : MS_ERR_RUNTIME;
  ms_tensor_release(slot);
  if (st != MS_OK) ms_tensor_release(z), z = NULL;
  return result(&gi[0], z);
}

static ms_status record_slot(const char *name, ms_tensor *in, int dim, int64_t start,
                              int64_t length, bool select, ms_tensor *out) {
  if (!records(in, out)) return MS_OK;
  ms_node *n = new_unary(name, embed_backward, in);
  if (n) {
    n->ints[P_DIM] = dim, n->ints[P_START] = start;
    n->ints[P_LENGTH] = length, n->ints[P_SELECT] = select;
  }
  return finish_view(n, in, out);
}

ms_status grad_record_narrow(const char *name, ms_tensor *in, int dim, int64_t start,
                               int64_t length, ms_tensor *out) {
  return record_slot(name, in, dim, start, length, false, out);
}

static ms_status record_select(ms_tensor *in, int dim, int64_t index, ms_tensor *out) {
  return record_slot("SelectBackward0", in, dim, index, 1, true, out);
}

/* ---- expand: every read of a broadcast element adds to its gradient ------------------------ */

static ms_status expand_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  return result(&gi[0], grad_sum_to(g[0], in_ndim(n), in_shape(n)));
}

static ms_status record_expand(ms_tensor *in, ms_tensor *out) {
  if (!records(in, out)) return MS_OK;
  return grad_finish(new_unary("ExpandBackward0", expand_backward, in), out);
}

/* ---- copies: clone, contiguous, dtype conversion ------------------------------------------- */

static ms_status copy_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  return result(&gi[0], native_to_dtype(g[0], in_dtype(n)));
}

static ms_status record_copy(const char *name, ms_tensor *in, ms_tensor *out) {
  /* a conversion to an integer or bool dtype is not differentiable: its result needs no grad */
  if (!records(in, out) || !ms_dtype_is_floating(out->dtype)) return MS_OK;
  return grad_finish(new_unary(name, copy_backward, in), out);
}

/* ---- in-place writes ---------------------------------------------------------------------- */

/* copy_ under autograd computes dst's new values out of place first (then written in by
 * grad_rebase_inplace): they are src's, broadcast and converted, so their gradient goes to
 * src, summed over the broadcast dims, in src's dtype; dst's old values get nothing. */
static ms_status copy_into_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  if (!grad_needed(n, 0)) return MS_OK;
  ms_tensor *s = grad_sum_to(g[0], in_ndim(n), in_shape(n));
  ms_tensor *c = s ? native_to_dtype(s, in_dtype(n)) : NULL;
  ms_tensor_release(s);
  return result(&gi[0], c);
}

/* Recorded even when src needs no gradient: dst's new grad_fn must cut it from its old values. */
static ms_status record_copy_into(ms_tensor *src, ms_tensor *out) {
  if (!out || !ms_dtype_is_floating(out->dtype)) return MS_OK;
  ms_node *n = ms_node_new("CopyBackwards", copy_into_backward, 1, &src);
  if (n) save_geometry(n, src);
  return grad_finish(n, out);
}

/* fill_ and zero_: the new values are constants, so the node has no inputs and the gradient
 * stops there. */
static ms_status fill_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  (void)n, (void)g, (void)gi;
  return MS_OK;
}

static ms_status record_fill(const char *name, ms_tensor *out) {
  if (!out || !ms_dtype_is_floating(out->dtype)) return MS_OK;
  return grad_finish(ms_node_new(name, fill_backward, 0, NULL), out);
}

/* select_scatter(t, src, dim, index): t's gradient is g with the written slice zeroed; src's is
 * that slice of g, summed over the broadcast dims, in src's dtype. The ints hold src's
 * geometry and the slice's place. */
static ms_tensor *zero_slot(ms_tensor *g, const ms_node *n) {
  ms_tensor *c = native_clone(g), *slot = c ? slot_of(c, n) : NULL;
  ms_status st = slot ? native_zero_(slot) : MS_ERR_RUNTIME;
  ms_tensor_release(slot);
  if (st != MS_OK) ms_tensor_release(c), c = NULL;
  return c;
}

static ms_status scatter_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  if (grad_needed(n, 0) && result(&gi[0], zero_slot(g[0], n)) != MS_OK) return MS_ERR_RUNTIME;
  if (!grad_needed(n, 1)) return MS_OK;
  ms_tensor *slot = slot_of(g[0], n);
  ms_tensor *s = slot ? grad_sum_to(slot, in_ndim(n), in_shape(n)) : NULL;
  ms_tensor *c = s ? native_to_dtype(s, in_dtype(n)) : NULL;
  ms_tensor_release(slot), ms_tensor_release(s);
  return result(&gi[1], c);
}

static ms_status record_select_scatter(const char *name, ms_tensor *t, ms_tensor *src, int dim,
                                         int64_t index, ms_tensor *out) {
  if (!out || !ms_autograd_wants(2, (ms_tensor *[]){t, src}) || !ms_dtype_is_floating(out->dtype)) return MS_OK;
  ms_node *n = ms_node_new(name, scatter_backward, 2, (ms_tensor *[]){t, src});
  if (n) {
    save_geometry(n, src);
    n->ints[P_DIM] = dim, n->ints[P_START] = index, n->ints[P_LENGTH] = 1, n->ints[P_SELECT] = 1;
  }
  return grad_finish(n, out);
}

/* ---- in-place writes through a view: recorded on the view's base ----------------------------
 * The base's new values are its old ones with the view's region replaced by `out` (the
 * write's out-of-place result, whose own graph already reads the old region through the view's
 * nodes): CopySlices, as PyTorch calls it. The view then becomes a view of the new base. The
 * region is kept as the view's geometry relative to the base, which must be contiguous, so the
 * same geometry finds the region in a contiguous gradient of the base's shape.
 * ints: [0] ndim, [1..] shape, [R_STRIDES..] strides, [R_OFFSET] offset from the base's,
 * [R_DTYPE] out's dtype. */
enum { R_SHAPE = 1, R_STRIDES = 1 + MS_MAX_DIMS, R_OFFSET = 1 + 2 * MS_MAX_DIMS, R_DTYPE };

static void save_region(ms_node *n, const ms_tensor *view, const ms_tensor *base, ms_dtype out_dtype) {
  n->ints[0] = view->ndim;
  for (int d = 0; d < view->ndim; d++)
    n->ints[R_SHAPE + d] = view->shape[d], n->ints[R_STRIDES + d] = view->strides[d];
  n->ints[R_OFFSET] = view->offset - base->offset;
  n->ints[R_DTYPE] = out_dtype;
}

/* The view's region of g, a contiguous tensor of the base's shape (a view of g). */
static ms_tensor *region_of(ms_tensor *g, const ms_node *n) {
  return ms_tensor_new_view(g->storage, g->dtype, (int)n->ints[0], &n->ints[R_SHAPE],
                            &n->ints[R_STRIDES], g->offset + n->ints[R_OFFSET]);
}

/* inputs: the base's old self, out. */
static ms_status copy_slices_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  ms_tensor *gc = native_clone(g[0]); /* contiguous, and ours to zero */
  ms_tensor *r = gc ? region_of(gc, n) : NULL;
  ms_status st = r ? MS_OK : MS_ERR_RUNTIME;
  if (st == MS_OK && grad_needed(n, 1)) { /* a copy: the region is zeroed below */
    ms_tensor *c = ms_tensor_new_empty_on(ms_tensor_device(r), r->ndim, r->shape, (ms_dtype)n->ints[R_DTYPE]);
    st = c ? native_copy_(c, r) : MS_ERR_RUNTIME;
    if (st == MS_OK) gi[1] = c;
    else ms_tensor_release(c);
  }
  if (st == MS_OK && grad_needed(n, 0) && (st = native_zero_(r)) == MS_OK) gi[0] = gc, gc = NULL;
  ms_tensor_release(r), ms_tensor_release(gc);
  return st;
}

/* The view's node after the write: its gradient lands in its region of the base's. */
static ms_status region_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  const ms_edge *e = &n->next[0];
  ms_tensor *z = ms_tensor_new_zeros_on(ms_tensor_device(g[0]), e->node->out_ndim[e->input_nr], e->node->out_shape[e->input_nr], g[0]->dtype);
  ms_tensor *r = z ? region_of(z, n) : NULL;
  ms_status st = r ? native_copy_(r, g[0]) : MS_ERR_RUNTIME;
  ms_tensor_release(r);
  if (st != MS_OK) ms_tensor_release(z), z = NULL;
  return result(&gi[0], z);
}

ms_status grad_record_view_write(ms_tensor *view, ms_tensor *out) {
  ms_tensor *base = view->grad_base;
  if (!ms_tensor_is_contiguous(base))
    return ms_error(MS_ERR_RUNTIME, "autograd: an in-place write through a view of a non-contiguous "
                    "tensor that requires grad is not supported; write into a clone");
  ms_node *cs = ms_node_new("CopySlices", copy_slices_backward, 2, (ms_tensor *[]){base, out});
  if (!cs) return MS_ERR_MEMORY;
  save_region(cs, view, base, out->dtype);
  ms_node_attach(cs, base, 0);
  ms_node_release(cs);
  ms_node *v = ms_node_new("AsStridedBackward0", region_backward, 1, &base);
  if (!v) return MS_ERR_MEMORY;
  save_region(v, view, base, view->dtype);
  ms_node_attach(v, view, 0);
  ms_node_release(v);
  return MS_OK;
}

bool grad_is_view_of_leaf(const ms_tensor *t) {
  return t->grad_base && t->grad_base->requires_grad && !t->grad_base->grad_fn;
}

/* ---- the public views: the view, then its node ---------------------------------------------- */

ms_tensor *ms_tensor_view(ms_tensor *t, int ndim, const int64_t *shape) {
  ms_tensor *out = native_view(t, ndim, shape);
  return grad_kept(out, record_reshape("ViewBackward0", t, out));
}

ms_tensor *ms_tensor_reshape(ms_tensor *t, int ndim, const int64_t *shape) {
  ms_tensor *out = native_reshape(t, ndim, shape);
  return grad_kept(out, record_reshape("ViewBackward0", t, out));
}

ms_tensor *ms_tensor_flatten(ms_tensor *t, int start_dim, int end_dim) {
  ms_tensor *out = native_flatten(t, start_dim, end_dim);
  return grad_kept(out, record_reshape("ViewBackward0", t, out));
}

ms_tensor *ms_tensor_squeeze(ms_tensor *t, int dim) {
  ms_tensor *out = native_squeeze(t, dim);
  return grad_kept(out, record_reshape("SqueezeBackward1", t, out));
}

ms_tensor *ms_tensor_squeeze_all(ms_tensor *t) {
  ms_tensor *out = native_squeeze_all(t);
  return grad_kept(out, record_reshape("SqueezeBackward0", t, out));
}

ms_tensor *ms_tensor_unsqueeze(ms_tensor *t, int dim) {
  ms_tensor *out = native_unsqueeze(t, dim);
  return grad_kept(out, record_reshape("UnsqueezeBackward0", t, out));
}

/* The native ops accepted the arguments, so these only map negative ones to their place. */
ms_tensor *ms_tensor_narrow(ms_tensor *t, int dim, int64_t start, int64_t length) {
  ms_tensor *out = native_narrow(t, dim, start, length);
  if (!out) return NULL;
  if (dim < 0) dim += t->ndim;
  if (start < 0) start += t->shape[dim];
  return grad_kept(out, grad_record_narrow("SliceBackward0", t, dim, start, length, out));
}

ms_tensor *ms_tensor_select(ms_tensor *t, int dim, int64_t index) {
  ms_tensor *out = native_select(t, dim, index);
  if (!out) return NULL;
  if (dim < 0) dim += t->ndim;
  if (index < 0) index += t->shape[dim];
  return grad_kept(out, record_select(t, dim, index, out));
}

ms_tensor *ms_tensor_transpose(ms_tensor *t, int dim0, int dim1) {
  ms_tensor *out = native_transpose(t, dim0, dim1);
  if (!out || t->ndim == 0) return grad_kept(out, record_reshape("TransposeBackward0", t, out));
  int dims[MS_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) dims[d] = d;
  dim0 = dim0 < 0 ? dim0 + t->ndim : dim0, dim1 = dim1 < 0 ? dim1 + t->ndim : dim1;
  dims[dim0] = dim1, dims[dim1] = dim0;
  return grad_kept(out, record_permute("TransposeBackward0", t, dims, out));
}

ms_tensor *ms_tensor_permute(ms_tensor *t, const int *dims) {
  ms_tensor *out = native_permute(t, dims);
  int norm[MS_MAX_DIMS];
  for (int d = 0; out && d < t->ndim; d++) norm[d] = dims[d] < 0 ? dims[d] + t->ndim : dims[d];
  return grad_kept(out, record_permute("PermuteBackward0", t, norm, out));
}

ms_tensor *ms_tensor_expand(ms_tensor *t, int ndim, const int64_t *shape) {
  ms_tensor *out = native_expand(t, ndim, shape);
  return grad_kept(out, record_expand(t, out));
}

/* ---- the public copies --------------------------------------------------------------------- */

/* Under autograd the new values are made out of place and recorded, then written in by
 * grad_rebase_inplace, which also records a write through a view on the view's base. */
static ms_status copy_recorded(ms_tensor *dst, ms_tensor *src) {
  if (grad_check_inplace("copy", dst) != MS_OK) return MS_ERR_RUNTIME;
  ms_tensor *out = ms_tensor_new_empty(dst->ndim, dst->shape, dst->dtype);
  ms_status st = out ? native_copy_(out, src) : MS_ERR_MEMORY;
  if (st == MS_OK) st = record_copy_into(src, out);
  if (st == MS_OK) st = grad_rebase_inplace("copy", dst, out);
  ms_tensor_release(out);
  return st;
}

ms_status ms_tensor_copy_(ms_tensor *dst, ms_tensor *src) {
  if (ms_autograd_wants(2, (ms_tensor *[]){dst, src})) return copy_recorded(dst, src);
  return native_copy_(dst, src);
}

/* The same tensor (with its grad_fn) when nothing changes, else a copy recorded as one. */
ms_tensor *ms_tensor_to_dtype(ms_tensor *t, ms_dtype dt) {
  ms_tensor *out = native_to_dtype(t, dt);
  return grad_kept(out, record_copy("ToCopyBackward0", t, out));
}

ms_tensor *ms_tensor_contiguous(ms_tensor *t) {
  ms_tensor *out = native_contiguous(t);
  return grad_kept(out, record_copy("CloneBackward0", t, out));
}

ms_tensor *ms_tensor_clone(ms_tensor *t) {
  ms_tensor *out = native_clone(t);
  return grad_kept(out, record_copy("CloneBackward0", t, out));
}

/* `op` is the out-of-place name for messages ("fill"), node the grad_fn t gets under autograd:
 * t's new values are constants, made out of place and written in as copy_ does. */
static ms_status fill_as(const char *op, const char *node, ms_tensor *t, double value) {
  if (!ms_autograd_wants(1, &t)) return native_fill_(t, value);
  if (grad_check_inplace(op, t) != MS_OK) return MS_ERR_RUNTIME;
  if (ms_tensor_check_data_any("fill_", t) != MS_OK) return MS_ERR_RUNTIME;
  ms_tensor *out = ms_tensor_new_full(t->ndim, t->shape, t->dtype, value);
  ms_status st = out ? record_fill(node, out) : MS_ERR_MEMORY;
  if (st == MS_OK) st = grad_rebase_inplace(op, t, out);
  ms_tensor_release(out);
  return st;
}

/* The factories that fill on a device: new tensors, no node. */
ms_tensor *ms_tensor_new_full_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt, double value) {
  return native_full_on(device, ndim, shape, dt, value);
}

ms_tensor *ms_tensor_new_zeros_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt) {
  return native_full_on(device, ndim, shape, dt, 0);
}

ms_status ms_tensor_fill_(ms_tensor *t, double value) { return fill_as("fill", "FillBackward0", t, value); }

ms_status ms_tensor_zero_(ms_tensor *t) { return fill_as("zero", "ZeroBackward0", t, 0); }

ms_tensor *ms_tensor_select_scatter(ms_tensor *t, ms_tensor *src, int dim, int64_t index) {
  ms_tensor *out = native_select_scatter(t, src, dim, index);
  if (!out) return NULL;
  if (dim < 0) dim += t->ndim;
  if (index < 0) index += t->shape[dim];
  return grad_kept(out, record_select_scatter("SelectScatterBackward0", t, src, dim, index, out));
}

/* Without autograd, a plain write through a view. With it, t is replaced by the
 * select_scatter result, so t's gradient flows to its old self outside the slice and to src
 * inside it (PyTorch's CopySlices). */
ms_status ms_tensor_select_assign_(ms_tensor *t, int dim, int64_t index, ms_tensor *src) {
  if (!ms_autograd_wants(2, (ms_tensor *[]){t, src})) return native_select_assign_(t, dim, index, src);
  if (grad_check_inplace("copy", t) != MS_OK) return MS_ERR_RUNTIME;
  ms_tensor *out = native_select_scatter(t, src, dim, index);
  if (out && dim < 0) dim += t->ndim;
  if (out && index < 0) index += t->shape[dim];
  ms_status st = out ? record_select_scatter("CopySlices", t, src, dim, index, out) : MS_ERR_MEMORY;
  if (st == MS_OK) st = grad_rebase_inplace("copy", t, out);
  ms_tensor_release(out);
  return st;
}

/* ---- moving between devices: the gradient goes back to the input's device ------------------ */

/* The input's device is kept in ints[0..1]. */
static ms_status to_copy_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  ms_device back = {(ms_device_type)n->ints[0], (int)n->ints[1]};
  *gi = native_to_device(g[0], back);
  return *gi ? MS_OK : MS_ERR_RUNTIME;
}

ms_tensor *ms_tensor_to_device(ms_tensor *t, ms_device device) {
  ms_tensor *out = native_to_device(t, device);
  if (!out || out == t || !ms_autograd_wants(1, &t)) return out;
  ms_node *n = ms_node_new("ToCopyBackward0", to_copy_backward, 1, &t);
  if (n) n->ints[0] = ms_tensor_device(t).type, n->ints[1] = ms_tensor_device(t).index;
  return grad_kept(out, grad_finish(n, out));
}
