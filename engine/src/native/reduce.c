/* native/reduce.c: reductions over all elements or one dim (sum, mean, prod, max, min, argmax,
 * argmin, var, std, norm, any, all). The input is brought to its compute dtype, every output element
 * reduces one strided row with the device's reduce_rows / reduce_stat_rows kernel.
 * Native: the public ops and their derivatives are autograd/grad_reduce.c's. */
#include "native/dispatch.h"
#include "native/native.h"
#include "tensor_iter.h"

#define NAME_ROW(id, name) [MS_RED_##id] = name,
static const char *const reduce_names[] = {MS_REDUCE_OP_LIST(NAME_ROW)}; /* moonshard/op_list.h */
#undef NAME_ROW
_Static_assert(sizeof reduce_names / sizeof *reduce_names == MS_REDUCE_OP_COUNT, "reduce op rows");

static bool needs_floating(ms_reduce_op op) {
  return op == MS_RED_MEAN || op == MS_RED_VAR || op == MS_RED_STD || op == MS_RED_NORM;
}

static bool needs_elements(ms_reduce_op op) {
  return op == MS_RED_MAX || op == MS_RED_MIN || op == MS_RED_ARGMAX || op == MS_RED_ARGMIN;
}

static ms_dtype reduce_result_dtype(ms_reduce_op op, ms_dtype in) {
  switch (op) {
  case MS_RED_SUM: case MS_RED_PROD: return ms_dtype_is_floating(in) ? in : MS_INT64;
  case MS_RED_ARGMAX: case MS_RED_ARGMIN: return MS_INT64;
  case MS_RED_ANY: case MS_RED_ALL: return in == MS_UINT8 ? MS_UINT8 : MS_BOOL; /* PyTorch keeps uint8 */
  case MS_RED_MEAN: case MS_RED_MAX: case MS_RED_MIN: case MS_RED_VAR: case MS_RED_STD:
  case MS_RED_NORM: return in;
  }
  return in; /* not an op: unreachable */
}

static ms_k_redop kernel_op(ms_reduce_op op) {
  switch (op) {
  case MS_RED_SUM: case MS_RED_MEAN: return MS_K_RSUM;
  case MS_RED_PROD: return MS_K_RPROD;
  case MS_RED_MAX: return MS_K_RMAX;
  case MS_RED_MIN: return MS_K_RMIN;
  case MS_RED_ARGMAX: return MS_K_RARGMAX;
  case MS_RED_ARGMIN: return MS_K_RARGMIN;
  case MS_RED_VAR: case MS_RED_STD: return MS_K_RMOMENTS;
  case MS_RED_NORM: return MS_K_RPOWSUM;
  case MS_RED_ANY: case MS_RED_ALL: break; /* counts: any_all */
  }
  return MS_K_RSUM; /* not an op: unreachable */
}

/* Reduces the last dim of in (compute dtype) into out (contiguous) and indices (may be NULL) on
 * their device. */
static ms_status reduce_rows(ms_reduce_op op, ms_reduce_opts opts, ms_tensor *in, ms_tensor *out, ms_tensor *indices) {
  native_kernels nk;
  if (native_kernels_for(reduce_names[op], ms_tensor_device(out), &nk) != MS_OK) return MS_ERR_RUNTIME;
  ms_k_rows g = native_rows_of(in, ms_tensor_numel(out));
  ms_k_dtype dt = (ms_k_dtype)in->dtype, out_dt = (ms_k_dtype)out->dtype;
  if (op == MS_RED_VAR || op == MS_RED_STD || op == MS_RED_NORM) {
    ms_k_stat st = {kernel_op(op), opts.p, (double)opts.correction, op == MS_RED_STD};
    return native_kernel_status(&nk, nk.k->reduce_stat_rows(&nk.x, &g, &st, dt, ms_tensor_data(in),
                                                            ms_tensor_data(out), out_dt));
  }
  int err = nk.k->reduce_rows(&nk.x, &g, kernel_op(op), dt, ms_tensor_data(in), op == MS_RED_MEAN,
                              ms_tensor_data(out), out_dt, indices ? ms_tensor_data(indices) : NULL);
  return native_kernel_status(&nk, err);
}

static ms_status check_reduce_input(ms_reduce_op op, const ms_tensor *a, int64_t n) {
  const char *name = reduce_names[op];
  if (ms_tensor_check_data_any(name, a) != MS_OK) return MS_ERR_RUNTIME;
  if (needs_floating(op) && !ms_dtype_is_floating(a->dtype))
    return ms_error(MS_ERR_ARG, "%s: expected a floating point tensor, got %s (convert it with "
                    ":float() or :double())", name, ms_dtype_name(a->dtype));
  if ((op == MS_RED_ARGMAX || op == MS_RED_ARGMIN) && a->dtype == MS_BOOL) /* PyTorch has no such kernel */
    return ms_error(MS_ERR_ARG, "%s: not supported for bool tensors (convert with :byte() or :long())", name);
  if (needs_elements(op) && n == 0)
    return ms_error(MS_ERR_ARG, "%s: cannot reduce an empty dimension (it has no identity)", name);
  return MS_OK;
}

/* The dtype the kernel reads: the compute dtype, except bfloat16 and float16 as they are where the
 * device's kernel reads them (a widened copy of Linear's bias gradient cost more than the sum):
 * every device sums them; CUDA's kernels read them for every op (the CPU's still widen them for
 * the others). The values are the same: a kernel reads a 16-bit element as its float32 value. */
static ms_dtype kernel_input_dtype(ms_reduce_op op, const ms_tensor *a) {
  bool every_op = ms_tensor_device(a).type == MS_CUDA;
  if (ms_dtype_is_half(a->dtype) && (op == MS_RED_SUM || op == MS_RED_MEAN || every_op)) return a->dtype;
  return compute_dtype(a->dtype);
}

/* Runs the reduction of `a` along `dim` (0-based, valid) into out (and indices). */
static ms_status reduce_dim(ms_reduce_op op, ms_tensor *a, int dim, ms_reduce_opts opts,
                            ms_tensor *out, ms_tensor *indices) {
  int perm[MS_MAX_DIMS], k = 0;
  for (int d = 0; d < a->ndim; d++)
    if (d != dim) perm[k++] = d;
  perm[k] = dim;
  ms_tensor *in = native_to_dtype(a, kernel_input_dtype(op, a));
  ms_tensor *moved = in ? native_permute(in, perm) : NULL;
  ms_tensor_release(in);
  if (!moved) return MS_ERR_MEMORY;
  ms_status st = reduce_rows(op, opts, moved, out, indices);
  ms_tensor_release(moved);
  return st;
}

/* Output shape of a reduction over dim. */
static int reduced_shape(const ms_tensor *a, int dim, bool keepdim, int64_t *shape) {
  int nd = 0;
  for (int d = 0; d < a->ndim; d++) {
    if (d != dim) shape[nd++] = a->shape[d];
    else if (keepdim) shape[nd++] = 1;
  }
  return nd;
}

/* any / all: whether the count of nonzero (zero) elements is above (equal to) 0, so empty rows
 * give false (true) and NaN counts as nonzero, as in PyTorch. */
static ms_tensor *any_all(ms_reduce_op op, ms_tensor *a, ms_reduce_opts opts) {
  int dim;
  if (ms_tensor_check_data_any(reduce_names[op], a) != MS_OK) return NULL;
  if (!opts.all && a->ndim > 0 && ms_dim_normalize(reduce_names[op], "dim", opts.dim, a->ndim, &dim) != MS_OK) return NULL;
  bool any = op == MS_RED_ANY;
  ms_operand zero = ms_operand_number(0, MS_INT64);
  ms_tensor *hit = native_binary(any ? MS_OP_NE : MS_OP_EQ, ms_operand_tensor(a), zero);
  ms_tensor *count = hit ? native_reduce(MS_RED_SUM, hit, opts) : NULL;
  ms_tensor *out = count ? native_binary(any ? MS_OP_GT : MS_OP_EQ, ms_operand_tensor(count), zero) : NULL;
  ms_tensor_release(hit), ms_tensor_release(count);
  ms_tensor *typed = out ? native_to_dtype(out, reduce_result_dtype(op, a->dtype)) : NULL;
  ms_tensor_release(out);
  return typed;
}

ms_tensor *native_reduce(ms_reduce_op op, ms_tensor *a, ms_reduce_opts opts) {
  if (op == MS_RED_ANY || op == MS_RED_ALL) return any_all(op, a, opts);
  ms_dtype rd = reduce_result_dtype(op, a->dtype);
  if (opts.all || a->ndim == 0) {
    if (check_reduce_input(op, a, ms_tensor_numel(a)) != MS_OK) return NULL;
    ms_tensor *flat = native_reshape(a, 1, (int64_t[]){ms_tensor_numel(a)});
    ms_tensor *out = flat ? ms_tensor_new_empty_on(ms_tensor_device(a), 0, NULL, rd) : NULL;
    ms_status st = out ? reduce_dim(op, flat, 0, opts, out, NULL) : MS_ERR_MEMORY;
    ms_tensor_release(flat);
    if (st != MS_OK) ms_tensor_release(out), out = NULL;
    return out;
  }
  int dim;
  if (ms_dim_normalize(reduce_names[op], "dim", opts.dim, a->ndim, &dim) != MS_OK) return NULL;
  if (check_reduce_input(op, a, a->shape[dim]) != MS_OK) return NULL;
  int64_t shape[MS_MAX_DIMS];
  int nd = reduced_shape(a, dim, opts.keepdim, shape);
  ms_tensor *out = ms_tensor_new_empty_on(ms_tensor_device(a), nd, shape, rd);
  if (out && reduce_dim(op, a, dim, opts, out, NULL) != MS_OK) ms_tensor_release(out), out = NULL;
  return out;
}

ms_status native_reduce_with_indices(ms_reduce_op op, ms_tensor *a, int dim, bool keepdim,
                                     ms_tensor **values, ms_tensor **indices) {
  *values = *indices = NULL;
  if (op != MS_RED_MAX && op != MS_RED_MIN)
    return ms_error(MS_ERR_ARG, "%s: only max and min return indices", reduce_names[op]);
  if (a->ndim == 0) dim = 0;
  else if (ms_dim_normalize(reduce_names[op], "dim", dim, a->ndim, &dim) != MS_OK) return MS_ERR_ARG;
  ms_tensor *src = a->ndim == 0 ? native_reshape(a, 1, (int64_t[]){1}) : (ms_tensor_retain(a), a);
  if (!src) return MS_ERR_MEMORY;
  ms_status st = check_reduce_input(op, src, src->shape[dim]);
  int64_t shape[MS_MAX_DIMS];
  int nd = a->ndim == 0 ? 0 : reduced_shape(src, dim, keepdim, shape);
  if (st == MS_OK) {
    *values = ms_tensor_new_empty_on(ms_tensor_device(a), nd, shape, a->dtype);
    *indices = ms_tensor_new_empty_on(ms_tensor_device(a), nd, shape, MS_INT64);
    ms_reduce_opts opts = {.dim = dim, .keepdim = keepdim};
    st = *values && *indices ? reduce_dim(op, src, dim, opts, *values, *indices) : MS_ERR_MEMORY;
  }
  ms_tensor_release(src);
  if (st != MS_OK) {
    ms_tensor_release(*values), ms_tensor_release(*indices);
    *values = *indices = NULL;
  }
  return st;
}
