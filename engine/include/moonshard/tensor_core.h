/* tensor_core.h: the refcounted n-dimensional view over a storage, and what the tensor core
 * (engine/src/tensor*.c) does with it: lifetime, creation, devices, geometry, element access.
 * The ops on tensors (views, copies, math) are moonshard/tensor.h's and moonshard/ops.h's;
 * include those (tensor.h includes this one). Shapes and strides are in elements; dimensions
 * are 0-based here (only the Lua binding adds 1). Functions named ms_tensor_new_* or documented
 * "new reference" return a reference the caller releases with ms_tensor_release; borrowed
 * arguments are never released by the callee. */
#ifndef MOONSHARD_TENSOR_CORE_H
#define MOONSHARD_TENSOR_CORE_H

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
/* Adds a reference to t (released with ms_tensor_release). */
MS_API void ms_tensor_retain(ms_tensor *t);
MS_API void ms_tensor_release(ms_tensor *t); /* NULL is fine */

/* ---- creation (new references; NULL with an error on failure) --------------------------- */
/* Contiguous, uninitialised. shape may be NULL when ndim == 0 (a scalar tensor). */
MS_API ms_tensor *ms_tensor_new_empty(int ndim, const int64_t *shape, ms_dtype dt);
/* The same on `device` (a CUDA device must be available; otherwise an error saying why). */
MS_API ms_tensor *ms_tensor_new_empty_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt);
/* ms_tensor_new_full_on and ms_tensor_new_zeros_on fill with a device's kernel: tensor.h. */
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
/* The error every op that would touch a meta tensor's data gives (MS_ERR_RUNTIME, naming op):
 * said once here, raised by ms_tensor_check_data_any and native_kernels_for. */
MS_API ms_status ms_meta_no_data(const char *op);
/* Parses "cpu", "meta", "cuda" (the current device), "cuda:N"; false for anything else. */
MS_API bool ms_device_parse(const char *s, ms_device *out);
/* MS_OK when the n tensors (NULLs skipped) are on one device; otherwise PyTorch's message
 * ("Expected all tensors to be on the same device, but found at least two devices, cpu and
 * cuda:0") naming `op`. */
MS_API ms_status ms_check_same_device(const char *op, int n, ms_tensor *const *ts);

/* ---- geometry ---------------------------------------------------------------------------- */
/* The number of elements (the product of the shape; 1 for a 0-dim tensor). */
MS_API int64_t ms_tensor_numel(const ms_tensor *t);
/* Whether the strides are row-major with no gaps. */
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

/* ---- elements and versions ------------------------------------------------------------- */
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
