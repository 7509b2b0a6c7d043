/* native/select.c: gather and scatter along a dim by an index tensor, sort and topk, and running
 * sums and products. The rules are settled here (dtypes, shapes, index values); the device's
 * index_move, sort_rows and scan_rows kernels do the work. Native: the public ops and their
 * derivatives are autograd/grad_select.c's. */
#include "native/dispatch.h"
#include "native/native.h"
#include "tensor_iter.h"

/* t as at least one dim (a 0-dim tensor as one element): a new reference. */
static ms_tensor *at_least_1d(ms_tensor *t) {
  if (t->ndim > 0) return ms_tensor_retain(t), t;
  return native_reshape(t, 1, (int64_t[]){1});
}

/* Each dim of index no larger than `of`'s, except dim when `except_dim`. Dims in messages count
 * from base, as the caller's do. */
static ms_status check_fits(const char *op, const ms_tensor *index, const ms_tensor *of, const char *of_name,
                            int dim, bool except_dim, int64_t base) {
  char bi[MS_SHAPE_STR_LEN], bo[MS_SHAPE_STR_LEN];
  for (int d = 0; d < index->ndim; d++) {
    if ((except_dim && d == dim) || index->shape[d] <= of->shape[d]) continue;
    return ms_error(MS_ERR_ARG, "%s: index of shape %s is larger than %s of shape %s in dim %lld%s", op,
                    ms_shape_str(index->ndim, index->shape, bi, sizeof bi), of_name,
                    ms_shape_str(of->ndim, of->shape, bo, sizeof bo), (long long)(d + base),
                    except_dim ? " (only the indexed dim may be larger)" : "");
  }
  return MS_OK;
}

/* Every index value a position in base .. base + size - 1 (read with two reductions, on the
 * index's device, and their results on the host). */
static ms_status check_values(const char *op, ms_tensor *index, int dim, int64_t size, int64_t base) {
  if (ms_tensor_numel(index) == 0) return MS_OK;
  int64_t v[2];
  const ms_reduce_op ops[2] = {MS_RED_MIN, MS_RED_MAX};
  for (int i = 0; i < 2; i++) {
    ms_tensor *r = native_reduce(ops[i], index, (ms_reduce_opts){.all = true});
    ms_tensor *h = r ? native_to_device(r, (ms_device){MS_CPU, 0}) : NULL;
    if (h) v[i] = ms_tensor_get_flat_int(h, 0);
    ms_tensor_release(r), ms_tensor_release(h);
    if (!h) return MS_ERR_MEMORY;
  }
  if (v[0] >= base && v[1] < base + size) return MS_OK;
  long long bad = v[1] >= base + size ? v[1] : v[0];
  if (size == 0)
    return ms_error(MS_ERR_ARG, "%s: index value %lld is out of range: dim %lld has size 0", op, bad, (long long)(dim + base));
  return ms_error(MS_ERR_ARG, "%s: index value %lld is out of range for dim %lld of size %lld (expected %lld..%lld)",
                  op, bad, (long long)(dim + base), (long long)size, (long long)base, (long long)(base + size - 1));
}

/* The checks gather and scatter share: t, index (and src) on one device with data, index int64
 * with t's number of dims, dim valid (normalized into *dim). */
static ms_status check_index_op(const char *op, ms_tensor *t, int *dim, ms_tensor *index, ms_tensor *src) {
  ms_tensor *ts[3] = {t, index, src};
  int n = src ? 3 : 2;
  if (ms_check_same_device(op, n, ts) != MS_OK) return MS_ERR_ARG;
  for (int i = 0; i < n; i++)
    if (ms_tensor_check_data_any(op, ts[i]) != MS_OK) return MS_ERR_ARG;
  if (index->dtype != MS_INT64)
    return ms_error(MS_ERR_ARG, "%s: index must be an int64 tensor, got %s", op, ms_dtype_name(index->dtype));
  int nd = t->ndim > 0 ? t->ndim : 1, ind = index->ndim > 0 ? index->ndim : 1;
  if (ind != nd)
    return ms_error(MS_ERR_ARG, "%s: index must have as many dims as the input (%d), got %d", op, t->ndim, index->ndim);
  if (src && (src->ndim > 0 ? src->ndim : 1) != nd)
    return ms_error(MS_ERR_ARG, "%s: src must have as many dims as the input (%d), got %d", op, t->ndim, src->ndim);
  if (src && src->dtype != t->dtype)
    return ms_error(MS_ERR_ARG, "%s: src must have the input's dtype (%s), got %s", op, ms_dtype_name(t->dtype),
                    ms_dtype_name(src->dtype));
  int d;
  if (ms_dim_normalize(op, "dim", *dim, nd, &d) != MS_OK) return MS_ERR_ARG;
  *dim = d;
  return MS_OK;
}

/* The kernel's walk over index: direct addressed as index, indexed with dim replaced. */
static ms_k_index_geom index_geom(const ms_tensor *index, int dim, const ms_tensor *direct,
                                  const ms_tensor *indexed, int64_t base) {
  ms_k_index_geom g = {.ndim = index->ndim, .dim = dim, .base = base};
  for (int d = 0; d < index->ndim; d++) {
    g.shape[d] = index->shape[d];
    g.istride[d] = index->strides[d], g.dstride[d] = direct->strides[d], g.astride[d] = indexed->strides[d];
  }
  return g;
}

static ms_status index_move(const char *op, int mode, ms_tensor *index, int dim, ms_tensor *direct,
                            ms_tensor *indexed, int64_t base) {
  native_kernels nk;
  if (native_kernels_for(op, ms_tensor_device(indexed), &nk) != MS_OK) return MS_ERR_RUNTIME;
  ms_k_index_geom g = index_geom(index, dim, direct, indexed, base);
  return native_kernel_status(&nk, nk.k->index_move(&nk.x, &g, mode, (ms_k_dtype)indexed->dtype,
                                                    ms_tensor_data(index), ms_tensor_data(direct),
                                                    ms_tensor_data(indexed)));
}

ms_tensor *native_gather(ms_tensor *t, int dim, ms_tensor *index, int64_t base) {
  if (check_index_op("gather", t, &dim, index, NULL) != MS_OK) return NULL;
  ms_tensor *t1 = at_least_1d(t), *i1 = at_least_1d(index);
  ms_tensor *out = NULL;
  if (t1 && i1 && check_fits("gather", i1, t1, "the input", dim, true, base) == MS_OK &&
      check_values("gather", i1, dim, t1->shape[dim], base) == MS_OK) {
    out = ms_tensor_new_empty_on(ms_tensor_device(t), index->ndim, index->shape, t->dtype);
    ms_tensor *o1 = out ? at_least_1d(out) : NULL;
    if (!o1 || index_move("gather", MS_K_GATHER, i1, dim, o1, t1, base) != MS_OK) ms_tensor_release(out), out = NULL;
    ms_tensor_release(o1);
  }
  ms_tensor_release(t1), ms_tensor_release(i1);
  return out;
}

/* src as a tensor of index's shape: the given one, or the number filled in t's dtype and expanded
 * (no copy). A new reference. */
static ms_tensor *scatter_source(ms_tensor *t, ms_tensor *index, ms_operand src) {
  if (src.tensor) return at_least_1d(src.tensor);
  ms_tensor *one = native_full_on(ms_tensor_device(t), 0, NULL, t->dtype, src.value);
  int nd = index->ndim > 0 ? index->ndim : 1;
  int64_t shape[MS_MAX_DIMS];
  for (int d = 0; d < nd; d++) shape[d] = index->ndim > 0 ? index->shape[d] : 1;
  ms_tensor *out = one ? native_expand(one, nd, shape) : NULL;
  ms_tensor_release(one);
  return out;
}

/* out (a fresh copy of the input, compute dtype for ADD) written by the kernel. */
static ms_status scatter_into(const char *op, ms_tensor *out, int dim, ms_tensor *i1, ms_tensor *s1,
                              ms_scatter_mode mode, int64_t base) {
  if (mode == MS_SCATTER_COPY) return index_move(op, MS_K_SCATTER, i1, dim, s1, out, base);
  ms_tensor *s = native_to_dtype(s1, out->dtype);
  ms_status st = s ? index_move(op, MS_K_SCATTER_ADD, i1, dim, s, out, base) : MS_ERR_MEMORY;
  ms_tensor_release(s);
  return st;
}

ms_tensor *native_scatter(ms_tensor *t, int dim, ms_tensor *index, ms_operand src, ms_scatter_mode mode,
                          int64_t base) {
  const char *op = mode == MS_SCATTER_ADD ? "scatter_add" : "scatter";
  if (mode == MS_SCATTER_ADD && !src.tensor)
    return ms_error(MS_ERR_ARG, "scatter_add: src must be a tensor (scatter takes a number)"), NULL;
  if (check_index_op(op, t, &dim, index, src.tensor) != MS_OK) return NULL;
  ms_tensor *t1 = at_least_1d(t), *i1 = at_least_1d(index), *s1 = t1 && i1 ? scatter_source(t, index, src) : NULL;
  ms_tensor *out = NULL;
  if (s1 && check_fits(op, i1, t1, "the input", dim, true, base) == MS_OK &&
      check_fits(op, i1, s1, "src", dim, false, base) == MS_OK && check_values(op, i1, dim, t1->shape[dim], base) == MS_OK) {
    /* sums in the compute dtype (a 16-bit float or a small integer is rounded once at the end) */
    ms_tensor *work = mode == MS_SCATTER_ADD ? native_to_dtype(t1, compute_dtype(t->dtype)) : (ms_tensor_retain(t1), t1);
    out = !work ? NULL : work != t1 ? (ms_tensor_retain(work), work) : native_clone(t1); /* never t's storage */
    if (out && scatter_into(op, out, dim, i1, s1, mode, base) != MS_OK) ms_tensor_release(out), out = NULL;
    ms_tensor_release(work);
    ms_tensor *shaped = out ? native_reshape(out, t->ndim, t->shape) : NULL;
    ms_tensor_release(out);
    out = shaped ? native_to_dtype(shaped, t->dtype) : NULL;
    ms_tensor_release(shaped);
  }
  ms_tensor_release(t1), ms_tensor_release(i1), ms_tensor_release(s1);
  return out;
}

/* ---- rows along dim: sort and scans ---------------------------------------------------------- */

/* t in dtype dt with dim moved last (new reference), and the permutation used. */
static ms_tensor *dim_last(ms_tensor *t, int dim, ms_dtype dt, int *perm) {
  int k = 0;
  for (int d = 0; d < t->ndim; d++)
    if (d != dim) perm[k++] = d;
  perm[k] = dim;
  ms_tensor *in = native_to_dtype(t, dt);
  ms_tensor *moved = in ? native_permute(in, perm) : NULL;
  ms_tensor_release(in);
  return moved;
}

/* r (rows along the last dim) put back in t's order and dtype dt, contiguous: a new reference;
 * r is released. */
static ms_tensor *dim_back(ms_tensor *r, const int *perm, ms_dtype dt) {
  int inv[MS_MAX_DIMS];
  for (int d = 0; d < r->ndim; d++) inv[perm[d]] = d;
  ms_tensor *back = native_permute(r, inv);
  ms_tensor_release(r);
  ms_tensor *c = back ? native_contiguous(back) : NULL;
  ms_tensor_release(back);
  ms_tensor *out = c ? native_to_dtype(c, dt) : NULL;
  ms_tensor_release(c);
  return out;
}

/* The normalized dim of t (a 0-dim tensor is seen as one element along dim 0). */
static ms_status row_dim(const char *op, ms_tensor *t, int dim, int *out) {
  if (ms_tensor_check_data_any(op, t) != MS_OK) return MS_ERR_ARG;
  return ms_dim_normalize(op, "dim", dim, t->ndim > 0 ? t->ndim : 1, out);
}

/* The first k of t (at least 1-D) sorted along dim: values and 0-based indices, new references. */
static ms_status sort_dim(const char *op, ms_tensor *t, int dim, bool descending, int64_t k, ms_tensor **values,
                          ms_tensor **indices) {
  int perm[MS_MAX_DIMS];
  ms_tensor *in = dim_last(t, dim, compute_dtype(t->dtype), perm);
  int64_t shape[MS_MAX_DIMS];
  for (int d = 0; in && d < in->ndim; d++) shape[d] = d == in->ndim - 1 ? k : in->shape[d];
  ms_tensor *v = in ? ms_tensor_new_empty_on(ms_tensor_device(t), in->ndim, shape, in->dtype) : NULL;
  ms_tensor *i = in ? ms_tensor_new_empty_on(ms_tensor_device(t), in->ndim, shape, MS_INT64) : NULL;
  native_kernels nk;
  ms_status st = v && i ? native_kernels_for(op, ms_tensor_device(t), &nk) : MS_ERR_MEMORY;
  if (st == MS_OK) {
    int64_t n = in->shape[in->ndim - 1];
    ms_k_rows g = native_rows_of(in, n ? ms_tensor_numel(in) / n : 0);
    st = native_kernel_status(&nk, nk.k->sort_rows(&nk.x, &g, (ms_k_dtype)in->dtype, ms_tensor_data(in), descending,
                                                   k, ms_tensor_data(v), ms_tensor_data(i)));
  }
  ms_tensor_release(in);
  if (st != MS_OK) return ms_tensor_release(v), ms_tensor_release(i), st;
  *values = dim_back(v, perm, t->dtype);
  *indices = dim_back(i, perm, MS_INT64);
  return *values && *indices ? MS_OK : MS_ERR_MEMORY;
}

/* sort_dim for any t: a 0-dim tensor is sorted as one element and given back 0-dim. */
static ms_status sorted(const char *op, ms_tensor *t, int dim, bool descending, int64_t k, ms_tensor **values,
                        ms_tensor **indices) {
  *values = *indices = NULL;
  ms_tensor *t1 = at_least_1d(t);
  ms_status st = t1 ? sort_dim(op, t1, dim, descending, k, values, indices) : MS_ERR_MEMORY;
  ms_tensor_release(t1);
  if (st == MS_OK && t->ndim == 0) {
    ms_tensor *v = native_reshape(*values, 0, NULL), *i = native_reshape(*indices, 0, NULL);
    ms_tensor_release(*values), ms_tensor_release(*indices);
    *values = v, *indices = i;
    st = v && i ? MS_OK : MS_ERR_MEMORY;
  }
  if (st != MS_OK) ms_tensor_release(*values), ms_tensor_release(*indices), *values = *indices = NULL;
  return st;
}

ms_status native_sort(ms_tensor *t, int dim, bool descending, ms_tensor **values, ms_tensor **indices) {
  *values = *indices = NULL;
  if (row_dim("sort", t, dim, &dim) != MS_OK) return MS_ERR_ARG;
  return sorted("sort", t, dim, descending, t->ndim > 0 ? t->shape[dim] : 1, values, indices);
}

ms_status native_topk(ms_tensor *t, int64_t k, int dim, bool largest, ms_tensor **values, ms_tensor **indices) {
  *values = *indices = NULL;
  if (row_dim("topk", t, dim, &dim) != MS_OK) return MS_ERR_ARG;
  if (t->dtype == MS_BOOL) /* as PyTorch, which has no such kernel */
    return ms_error(MS_ERR_ARG, "topk: not supported for bool tensors (convert with :long() first)");
  int64_t size = t->ndim > 0 ? t->shape[dim] : 1;
  if (k < 0 || k > size)
    return ms_error(MS_ERR_ARG, "topk: k (%lld) is out of range for a dim of size %lld (expected 0..%lld)",
                    (long long)k, (long long)size, (long long)size);
  /* a 0-dim tensor is its own top element whatever k (PyTorch's answer) */
  return sorted("topk", t, dim, largest, t->ndim > 0 ? k : 1, values, indices);
}

ms_tensor *native_scan(ms_scan_op op, ms_tensor *t, int dim, bool reverse) {
  const char *name = op == MS_SCAN_CUMSUM ? "cumsum" : "cumprod";
  if (row_dim(name, t, dim, &dim) != MS_OK) return NULL;
  ms_dtype rd = ms_dtype_is_floating(t->dtype) ? t->dtype : MS_INT64; /* PyTorch's result dtype */
  ms_tensor *t1 = at_least_1d(t);
  int perm[MS_MAX_DIMS];
  ms_tensor *in = t1 ? dim_last(t1, dim, compute_dtype(t->dtype), perm) : NULL;
  ms_tensor_release(t1);
  ms_tensor *r = in ? ms_tensor_new_empty_on(ms_tensor_device(t), in->ndim, in->shape, in->dtype) : NULL;
  native_kernels nk;
  ms_status st = r ? native_kernels_for(name, ms_tensor_device(t), &nk) : MS_ERR_MEMORY;
  if (st == MS_OK) {
    int64_t n = in->shape[in->ndim - 1];
    ms_k_rows g = native_rows_of(in, n ? ms_tensor_numel(in) / n : 0);
    st = native_kernel_status(&nk, nk.k->scan_rows(&nk.x, &g, op == MS_SCAN_CUMPROD, reverse, (ms_k_dtype)in->dtype,
                                                   ms_tensor_data(in), ms_tensor_data(r)));
  }
  ms_tensor_release(in);
  if (st != MS_OK) return ms_tensor_release(r), NULL;
  ms_tensor *out = dim_back(r, perm, rd);
  ms_tensor *shaped = out ? native_reshape(out, t->ndim, t->shape) : NULL;
  ms_tensor_release(out);
  return shaped;
}
