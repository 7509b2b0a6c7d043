/* native/reduce.c: reductions over all elements or one dim (sum, mean, prod, max, min, argmax,
 * argmin, var, std, norm). The input is brought to its compute dtype, every output element
 * reduces one strided row with the kernel, and outputs are spread over the thread pool.
 * Native: the public ops and their derivatives are autograd/grad_reduce.c's. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "cuda/cuda_ops.h"
#include "native/native.h"
#include "tensor_iter.h"

#define NAME_ROW(id, name) [MS_RED_##id] = name,
static const char *const reduce_names[] = {MS_REDUCE_OP_LIST(NAME_ROW)}; /* from ops.h's list */
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
  }
  return MS_K_RSUM; /* not an op: unreachable */
}

typedef struct reduce_job {
  ms_reduce_op op;
  ms_reduce_opts opts;
  const ms_tensor *in;   /* compute dtype; the reduced dim moved last */
  ms_tensor *out;        /* contiguous, numel = product of the other dims */
  ms_tensor *indices;    /* optional int64 output of the positions */
  int64_t n;             /* row length */
} reduce_job;

/* The final value of one row from the kernel's accumulators. */
static double finish_value(const reduce_job *job, const ms_k_reduce_result *r) {
  double n = (double)job->n;
  switch (job->op) {
  case MS_RED_MEAN: return r->f / n;
  case MS_RED_VAR: case MS_RED_STD: {
    double dof = n - (double)job->opts.correction;
    double var = dof > 0 ? r->m2 / dof : NAN; /* too few elements for the correction */
    return job->op == MS_RED_STD ? sqrt(var) : var;
  }
  case MS_RED_NORM: {
    double p = job->opts.p;
    if (isinf(p) || p == 0 || p == 1) return r->f;
    return p == 2 ? sqrt(r->f) : pow(r->f, 1.0 / p);
  }
  case MS_RED_ARGMAX: case MS_RED_ARGMIN: return (double)r->index;
  case MS_RED_SUM: case MS_RED_PROD: case MS_RED_MAX: case MS_RED_MIN: return r->f;
  }
  return r->f; /* not an op: unreachable */
}

static void reduce_range(void *arg, int64_t begin, int64_t end) {
  const reduce_job *job = arg;
  const ms_tensor *in = job->in;
  int outer_nd = in->ndim - 1;
  ms_k_dtype cd = (ms_k_dtype)in->dtype;
  size_t es = ms_dtype_size(in->dtype);
  for (int64_t j = begin; j < end; j++) {
    int64_t off = 0, rem = j;
    for (int d = outer_nd - 1; d >= 0; d--) off += (rem % in->shape[d]) * in->strides[d], rem /= in->shape[d];
    const char *row = (const char *)ms_tensor_data(in) + off * (int64_t)es;
    ms_k_reduce_result r = {0};
    if (job->n > 0 || !needs_elements(job->op))
      ms_k_reduce_row(kernel_op(job->op), cd, job->n, row, in->strides[outer_nd], job->opts.p, &r);
    else
      r.f = r.i = 0;
    if (job->n == 0 && job->op == MS_RED_PROD) r.f = 1, r.i = 1;
    bool int_result = cd == MS_K_I64 && !needs_floating(job->op) && job->op != MS_RED_ARGMAX && job->op != MS_RED_ARGMIN;
    if (int_result) ms_k_cast(1, (char *)ms_tensor_data(job->out) + j * (int64_t)ms_dtype_size(job->out->dtype),
                              (ms_k_dtype)job->out->dtype, 1, &r.i, MS_K_I64, 1);
    else ms_tensor_set_flat(job->out, j, finish_value(job, &r));
    if (job->indices) ((int64_t *)ms_tensor_data(job->indices))[j] = r.index;
  }
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

/* Runs the reduction of `a` along `dim` (0-based, valid) into out (and indices). */
static ms_status reduce_dim(ms_reduce_op op, ms_tensor *a, int dim, ms_reduce_opts opts,
                            ms_tensor *out, ms_tensor *indices) {
  int perm[MS_MAX_DIMS], k = 0;
  for (int d = 0; d < a->ndim; d++)
    if (d != dim) perm[k++] = d;
  perm[k] = dim;
  ms_tensor *in = native_to_dtype(a, ms_compute_dtype(a->dtype));
  ms_tensor *moved = in ? native_permute(in, perm) : NULL;
  ms_tensor_release(in);
  if (!moved) return MS_ERR_MEMORY;
  if (ms_tensor_device(a).type == MS_CUDA) {
    bool stat = op == MS_RED_VAR || op == MS_RED_STD || op == MS_RED_NORM;
    ms_status st = stat ? ms_cuda_reduce_stat(kernel_op(op), opts.p, opts.correction, op == MS_RED_STD, moved, out)
                        : ms_cuda_reduce(kernel_op(op), op == MS_RED_MEAN, moved, out, indices);
    ms_tensor_release(moved);
    return st;
  }
  reduce_job job = {op, opts, moved, out, indices, a->shape[dim]};
  /* Long rows are worth a thread each; short rows are grouped. */
  int64_t grain = job.n >= 4096 ? 1 : 4096 / (job.n + 1) + 1;
  ms_k_parallel_for(ms_tensor_numel(out), grain, reduce_range, &job);
  ms_tensor_release(moved);
  return MS_OK;
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

ms_tensor *native_reduce(ms_reduce_op op, ms_tensor *a, ms_reduce_opts opts) {
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
