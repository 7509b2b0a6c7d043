/* tensor.h: tensors (moonshard/tensor_core.h) and the ops that reshape, move and copy them.
 * Every op here returns a new reference (or a status for the in-place `_` forms) and records
 * its gradient under autograd (moonshard/autograd.h). Dimensions are 0-based here (only the Lua
 * binding adds 1); borrowed arguments are never released by the callee. */
#ifndef MOONSHARD_TENSOR_H
#define MOONSHARD_TENSOR_H

#include "moonshard/export.h"
#include "moonshard/tensor_core.h"

/* ---- creation on a device, filled by its kernel (new references) ---------------------------- */
/* A new tensor of shape on device, every element value. */
MS_API ms_tensor *ms_tensor_new_full_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt, double value);
/* A new tensor of shape on device filled with zeros. */
MS_API ms_tensor *ms_tensor_new_zeros_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt);

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
/* Splits dim into n pieces of the sizes listed (non-negative, summing to dim's size); an array
 * of n references as ms_tensor_split's. */
MS_API ms_tensor **ms_tensor_split_with_sizes(ms_tensor *t, const int64_t *sizes, int n, int dim);
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
/* ---- devices ------------------------------------------------------------------------------ */
/* t on `device` (new reference; t itself, retained, when already there). Differentiable: the
 * gradient goes back to t's device. */
MS_API ms_tensor *ms_tensor_to_device(ms_tensor *t, ms_device device);

#endif
