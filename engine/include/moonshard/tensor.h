/* tensor.h: the refcounted n-dimensional view over a storage. Shapes and strides are in
 * elements; dimensions are 0-based here (only the Lua binding adds 1). Functions named
 * ms_tensor_new_* or documented "new reference" return a reference the caller releases with
 * ms_tensor_release; borrowed arguments are never released by the callee. */
#ifndef MOONSHARD_TENSOR_H
#define MOONSHARD_TENSOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "moonshard/dtype.h"
#include "moonshard/error.h"
#include "moonshard/export.h"
#include "moonshard/storage.h"

#define MS_MAX_DIMS 16

typedef struct ms_tensor ms_tensor;
struct ms_tensor {
  atomic_int refcount;
  ms_dtype dtype;
  int ndim;
  int64_t shape[MS_MAX_DIMS];
  int64_t strides[MS_MAX_DIMS];
  int64_t offset;     /* in elements, from the start of the storage */
  ms_storage *storage; /* owned reference */
  /* autograd (moonshard/autograd.h) */
  bool requires_grad;
  ms_tensor *grad;                 /* owned reference or NULL */
  struct ms_node *grad_fn;         /* owned; NULL for leaves */
  int output_nr;                   /* which output of grad_fn this tensor is */
  struct ms_node *grad_accumulator; /* a leaf's AccumulateGrad node while a graph uses it (weak) */
  struct ms_hook *hooks;           /* a leaf's gradient and post-accumulate hooks (owned) */
  ms_tensor *grad_base;            /* a view recorded by autograd: the tensor it views (owned),
                                      on which in-place writes through the view are recorded */
};

/* ---- lifetime ---------------------------------------------------------------------------- */
MS_API void ms_tensor_retain(ms_tensor *t);
MS_API void ms_tensor_release(ms_tensor *t); /* NULL is fine */

/* ---- creation (new references; NULL with an error on failure) --------------------------- */
/* Contiguous, uninitialised. shape may be NULL when ndim == 0 (a scalar tensor). */
MS_API ms_tensor *ms_tensor_new_empty(int ndim, const int64_t *shape, ms_dtype dt);
/* The same on `device` (a CUDA device must be available; otherwise an error saying why). */
MS_API ms_tensor *ms_tensor_new_empty_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt);
MS_API ms_tensor *ms_tensor_new_full_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt, double value);
MS_API ms_tensor *ms_tensor_new_zeros_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt);
MS_API ms_tensor *ms_tensor_new_full(int ndim, const int64_t *shape, ms_dtype dt, double value);
MS_API ms_tensor *ms_tensor_new_zeros(int ndim, const int64_t *shape, ms_dtype dt);
/* A view over existing storage (retained) with the given geometry; checked against its size. */
MS_API ms_tensor *ms_tensor_new_view(ms_storage *s, ms_dtype dt, int ndim, const int64_t *shape,
                                     const int64_t *strides, int64_t offset);
/* Wraps caller-owned contiguous memory without copying (deleter may be NULL). */
MS_API ms_tensor *ms_tensor_new_from_data(void *data, ms_dtype dt, int ndim, const int64_t *shape,
                                          ms_storage_deleter deleter, void *ctx);
MS_API ms_tensor *ms_tensor_new_scalar(double value, ms_dtype dt); /* 0-dim */
MS_API ms_tensor *ms_tensor_new_arange(double start, double end, double step, ms_dtype dt);
MS_API ms_tensor *ms_tensor_new_linspace(double start, double end, int64_t steps, ms_dtype dt);
MS_API ms_tensor *ms_tensor_new_eye(int64_t n, int64_t m, ms_dtype dt);

/* ---- devices (engine/src/tensor_device.c) ------------------------------------------------- */
static inline ms_device ms_tensor_device(const ms_tensor *t) { return t->storage->device; }
static inline bool ms_device_equal(ms_device a, ms_device b) {
  return a.type == b.type && (a.type == MS_CPU || a.index == b.index);
}
/* "cpu" or "cuda:0" into buf; returns buf. */
MS_API const char *ms_device_str(ms_device d, char *buf, size_t len);
#define MS_DEVICE_STR_LEN 32
/* Parses "cpu", "cuda" (the current device), "cuda:N"; false for anything else. */
MS_API bool ms_device_parse(const char *s, ms_device *out);
/* MS_OK when the n tensors (NULLs skipped) are on one device; otherwise PyTorch's message
 * ("Expected all tensors to be on the same device, but found at least two devices, cpu and
 * cuda:0") naming `op`. */
MS_API ms_status ms_check_same_device(const char *op, int n, ms_tensor *const *ts);
/* t on `device` (new reference; t itself, retained, when already there). Differentiable: the
 * gradient goes back to t's device. */
MS_API ms_tensor *ms_tensor_to_device(ms_tensor *t, ms_device device);

/* ---- geometry ---------------------------------------------------------------------------- */
MS_API int64_t ms_tensor_numel(const ms_tensor *t);
MS_API bool ms_tensor_is_contiguous(const ms_tensor *t);
/* Pointer to the first element (storage data + offset); NULL if the storage is released. */
MS_API void *ms_tensor_data(const ms_tensor *t);
/* MS_OK when t's data can be read by the CPU (on the CPU and materialized, or no elements);
 * otherwise an error naming `op`. Every op checks its inputs with it before touching their
 * bytes, so an op with no CUDA kernel refuses CUDA tensors here ("op: not implemented for CUDA
 * tensors yet") instead of reading device memory. */
MS_API ms_status ms_tensor_check_data(const char *op, const ms_tensor *t);
/* The same on any device: for ops that dispatch to a CUDA kernel themselves. */
MS_API ms_status ms_tensor_check_data_any(const char *op, const ms_tensor *t);
/* "(2, 3)" into buf; returns buf. For error messages. */
MS_API const char *ms_shape_str(int ndim, const int64_t *shape, char *buf, size_t len);
#define MS_SHAPE_STR_LEN 256
/* Normalises a possibly negative 0-based dim against ndim (accepting -ndim..ndim-1).
 * `op` and `arg` name the caller in the error. */
MS_API ms_status ms_dim_normalize(const char *op, const char *arg, int64_t dim, int ndim, int *out);

/* ---- views: share the storage (new references) -------------------------------------------- */
/* shape may hold one -1 to infer. view fails if the strides cannot express it; reshape copies. */
MS_API ms_tensor *ms_tensor_view(ms_tensor *t, int ndim, const int64_t *shape);
MS_API ms_tensor *ms_tensor_reshape(ms_tensor *t, int ndim, const int64_t *shape);
MS_API ms_tensor *ms_tensor_narrow(ms_tensor *t, int dim, int64_t start, int64_t length);
MS_API ms_tensor *ms_tensor_select(ms_tensor *t, int dim, int64_t index);
MS_API ms_tensor *ms_tensor_transpose(ms_tensor *t, int dim0, int dim1);
MS_API ms_tensor *ms_tensor_permute(ms_tensor *t, const int *dims); /* dims has t->ndim entries */
MS_API ms_tensor *ms_tensor_squeeze(ms_tensor *t, int dim);   /* dim < 0 ... see ms_tensor_squeeze_all */
MS_API ms_tensor *ms_tensor_squeeze_all(ms_tensor *t);
MS_API ms_tensor *ms_tensor_unsqueeze(ms_tensor *t, int dim); /* dim in 0..ndim */
/* shape entries of -1 keep the size; new leading dims may be added. */
MS_API ms_tensor *ms_tensor_expand(ms_tensor *t, int ndim, const int64_t *shape);
MS_API ms_tensor *ms_tensor_flatten(ms_tensor *t, int start_dim, int end_dim);
/* Returns t itself (retained) when already contiguous, else a contiguous copy. */
MS_API ms_tensor *ms_tensor_contiguous(ms_tensor *t);
MS_API ms_tensor *ms_tensor_clone(ms_tensor *t);
/* Splits dim into pieces of `size` (last may be shorter); *count receives the number of pieces.
 * Returns a malloc'd array of new references that the caller frees (and releases). */
MS_API ms_tensor **ms_tensor_split(ms_tensor *t, int64_t size, int dim, int *count);
MS_API ms_tensor **ms_tensor_chunk(ms_tensor *t, int chunks, int dim, int *count);
/* The slices idx[0], idx[1], ... of t along dim (0-based values, int64 or int32), as a new
 * tensor; differentiable. */
MS_API ms_tensor *ms_tensor_index_select(ms_tensor *t, int dim, ms_tensor *idx);
MS_API ms_tensor *ms_tensor_cat(ms_tensor *const *ts, int n, int dim);
MS_API ms_tensor *ms_tensor_stack(ms_tensor *const *ts, int n, int dim);

/* ---- copies and conversions -------------------------------------------------------------- */
/* Copies src into dst (same number of elements after broadcasting src to dst's shape),
 * converting dtypes. */
MS_API ms_status ms_tensor_copy_(ms_tensor *dst, ms_tensor *src);
MS_API ms_tensor *ms_tensor_to_dtype(ms_tensor *t, ms_dtype dt); /* t retained if already dt */
MS_API ms_status ms_tensor_fill_(ms_tensor *t, double value);
/* A copy of t whose slice `index` of `dim` holds src (broadcast to the slice): PyTorch's
 * select_scatter (new reference). */
MS_API ms_tensor *ms_tensor_select_scatter(ms_tensor *t, ms_tensor *src, int dim, int64_t index);
/* t[index along dim] = src (broadcast), in place. Under autograd t's grad_fn becomes the write
 * (CopySlices), so gradients reach both t's old values and src; a leaf that requires grad
 * refuses while grad mode is on. */
MS_API ms_status ms_tensor_select_assign_(ms_tensor *t, int dim, int64_t index, ms_tensor *src);
MS_API ms_status ms_tensor_zero_(ms_tensor *t);
/* Reads/writes one element by 0-based flat index in row-major (logical) order (on a CUDA
 * tensor: one small copy each, for printing and tests, never for loops). */
MS_API double ms_tensor_get_flat(const ms_tensor *t, int64_t i);
MS_API int64_t ms_tensor_get_flat_int(const ms_tensor *t, int64_t i);
MS_API void ms_tensor_set_flat(ms_tensor *t, int64_t i, double v);
/* Value of a one-element tensor. */
MS_API ms_status ms_tensor_item(const ms_tensor *t, double *out);
/* In-place ops bump the version of the storage, which every view shares (autograd checks it). */
MS_API void ms_tensor_bump_version(ms_tensor *t);
MS_API int ms_tensor_version(const ms_tensor *t);

#endif
