/* native.h (engine-internal): the core native ops, below autograd. They compute and nothing
 * else: they never record a graph node, never read requires_grad/grad/grad_fn and never switch
 * grad mode, so calling one on a tensor that requires grad gives a result without a grad_fn.
 * The public ops of moonshard/ops.h and moonshard/tensor.h (engine/src/autograd/grad_*.c) are
 * these plus the node, and derivatives are written against these.
 *
 * Ownership, the one rule of the engine: arguments are borrowed; a returned tensor is a new
 * reference (NULL with the error set on failure). Error messages name the public op ("add",
 * "view", "copy_"), as the public op would. */
#ifndef MS_NATIVE_H
#define MS_NATIVE_H

#include "moonshard/op_types.h"
#include "moonshard/tensor_core.h"

/* ---- elementwise (native/elementwise.c) ---------------------------------------------------- */

/* a op b with broadcasting and PyTorch's type promotion. */
ms_tensor *native_binary(ms_binary_op op, ms_operand a, ms_operand b);
/* The checks of a op= b: operand combinations, the result dtype castable to a's, b's shape
 * broadcasting to a's. native_binary_ runs them itself; the public op runs them before choosing
 * its path. */
ms_status native_binary_check_(ms_binary_op op, ms_tensor *a, ms_operand b);
/* a = a op b in place (a's version bumped). */
ms_status native_binary_(ms_binary_op op, ms_tensor *a, ms_operand b);
ms_tensor *native_unary(ms_unary_op op, ms_tensor *a);
/* The checks of op applied in place to a (input dtype, result castable to a's dtype). */
ms_status native_unary_check_(ms_unary_op op, ms_tensor *a);
ms_status native_unary_(ms_unary_op op, ms_tensor *a);
/* a = op(a) by the kernel writing over a's own elements, where a is a contiguous CPU tensor the
 * kernel computes in; false, having done nothing, where that does not hold. */
bool native_unary_over_itself(ms_unary_op op, ms_tensor *a);
/* relu's gradient: g where y > 0, else 0 (y relu's result). Contiguous CPU floats of one shape
 * and dtype take the kernel in one pass, written over g itself when may_overwrite_g. */
ms_tensor *native_relu_backward(ms_tensor *g, ms_tensor *y, bool may_overwrite_g);
/* min and max may be NULL (not both). */
ms_tensor *native_clamp(ms_tensor *a, const double *min, const double *max);
ms_status native_clamp_check_(ms_tensor *a, const double *min, const double *max);
ms_status native_clamp_(ms_tensor *a, const double *min, const double *max);
ms_tensor *native_where(ms_tensor *cond, ms_operand a, ms_operand b);
ms_tensor *native_masked_fill(ms_tensor *a, ms_tensor *mask, double value);
/* mask (bool) broadcast to a's shape for masked_fill_ (a view), or NULL with the error. */
ms_tensor *native_masked_fill_mask_(ms_tensor *a, ms_tensor *mask);
ms_status native_masked_fill_(ms_tensor *a, ms_tensor *mask, double value);

/* ---- reductions (native/reduce.c) ---------------------------------------------------------- */

ms_tensor *native_reduce(ms_reduce_op op, ms_tensor *a, ms_reduce_opts opts);
/* max/min over dim with the positions (*values and *indices new references, NULL on failure). */
ms_status native_reduce_with_indices(ms_reduce_op op, ms_tensor *a, int dim, bool keepdim,
                                     ms_tensor **values, ms_tensor **indices);

/* ---- products (native/matmul.c) ------------------------------------------------------------ */

ms_tensor *native_mm(ms_tensor *a, ms_tensor *b);
ms_tensor *native_bmm(ms_tensor *a, ms_tensor *b);
ms_tensor *native_addmm(ms_tensor *c, ms_tensor *a, ms_tensor *b, double beta, double alpha);
/* The steps matmul is composed of: the native ones, or (autograd/grad_matmul.c) the public
 * ones, which record a node each, as PyTorch's composite matmul does. */
typedef struct native_matmul_steps {
  ms_tensor *(*mm)(ms_tensor *a, ms_tensor *b);
  ms_tensor *(*bmm)(ms_tensor *a, ms_tensor *b);
  ms_tensor *(*unsqueeze)(ms_tensor *t, int dim);
  ms_tensor *(*squeeze)(ms_tensor *t, int dim);
  ms_tensor *(*expand)(ms_tensor *t, int ndim, const int64_t *shape);
  ms_tensor *(*reshape)(ms_tensor *t, int ndim, const int64_t *shape);
  ms_tensor *(*view)(ms_tensor *t, int ndim, const int64_t *shape);
} native_matmul_steps;
ms_tensor *native_matmul_by(const native_matmul_steps *steps, ms_tensor *a, ms_tensor *b);
ms_tensor *native_matmul(ms_tensor *a, ms_tensor *b);

/* ---- views (native/view.c): share the source's storage ------------------------------------- */

ms_tensor *native_view(ms_tensor *t, int ndim, const int64_t *shape);
/* A view when the strides allow, else a contiguous copy. */
ms_tensor *native_reshape(ms_tensor *t, int ndim, const int64_t *shape);
ms_tensor *native_flatten(ms_tensor *t, int start_dim, int end_dim);
ms_tensor *native_squeeze(ms_tensor *t, int dim);
ms_tensor *native_squeeze_all(ms_tensor *t);
ms_tensor *native_unsqueeze(ms_tensor *t, int dim);
ms_tensor *native_narrow(ms_tensor *t, int dim, int64_t start, int64_t length);
ms_tensor *native_select(ms_tensor *t, int dim, int64_t index);
ms_tensor *native_transpose(ms_tensor *t, int dim0, int dim1);
ms_tensor *native_permute(ms_tensor *t, const int *dims);
ms_tensor *native_expand(ms_tensor *t, int ndim, const int64_t *shape);

/* ---- copies (native/copy.c) ---------------------------------------------------------------- */

/* dst = src broadcast and converted, across devices too (dst's version bumped). */
ms_status native_copy_(ms_tensor *dst, ms_tensor *src);
/* t itself (a new reference) when it already has dtype dt, else a converted copy. */
ms_tensor *native_to_dtype(ms_tensor *t, ms_dtype dt);
/* t itself when contiguous, else a contiguous copy. */
ms_tensor *native_contiguous(ms_tensor *t);
ms_tensor *native_clone(ms_tensor *t);
ms_status native_fill_(ms_tensor *t, double value);
ms_status native_zero_(ms_tensor *t);
/* A new contiguous tensor on `device` filled with value (new reference). */
ms_tensor *native_full_on(ms_device device, int ndim, const int64_t *shape, ms_dtype dt, double value);
/* A copy of t whose slice `index` of dim holds src (broadcast). */
ms_tensor *native_select_scatter(ms_tensor *t, ms_tensor *src, int dim, int64_t index);
/* t[index along dim] = src (broadcast), written through a view of t. */
ms_status native_select_assign_(ms_tensor *t, int dim, int64_t index, ms_tensor *src);
/* The cross-device half of native_copy_ (native/device.c): src of dst's shape, on another
 * device. */
ms_status native_copy_across(ms_tensor *dst, ms_tensor *src);
/* t itself when already on device, else a contiguous copy there (native/device.c). */
ms_tensor *native_to_device(ms_tensor *t, ms_device device);

/* ---- gathering (native/index.c) ------------------------------------------------------------ */

/* Slices idx[i] of t along dim; idx a 1-D int64/int32 tensor on t's device. */
ms_tensor *native_index_select(ms_tensor *t, int dim, ms_tensor *idx);
/* dst's slice idx[i] along dim += src's slice i (the gradient of index_select); idx on the host. */
ms_status native_index_add_(ms_tensor *dst, int dim, ms_tensor *idx, ms_tensor *src);

/* ---- selection along a dim and running sums (native/select.c) ------------------------------ */

/* ms_gather, ms_scatter, ms_sort, ms_topk and ms_scan without their nodes (moonshard/ops.h):
 * index positions count from base; the returned sort and topk indices are 0-based. */
ms_tensor *native_gather(ms_tensor *t, int dim, ms_tensor *index, int64_t base);
ms_tensor *native_scatter(ms_tensor *t, int dim, ms_tensor *index, ms_operand src, ms_scatter_mode mode,
                          int64_t base);
ms_status native_sort(ms_tensor *t, int dim, bool descending, ms_tensor **values, ms_tensor **indices);
ms_status native_topk(ms_tensor *t, int64_t k, int dim, bool largest, ms_tensor **values, ms_tensor **indices);
/* reverse: from each row's last element back (cumsum's gradient) */
ms_tensor *native_scan(ms_scan_op op, ms_tensor *t, int dim, bool reverse);

/* ---- triangles (native/triangle.c) --------------------------------------------------------- */

/* ms_triangle and ms_triangle_ without their nodes (moonshard/ops.h). */
ms_tensor *native_triangle(ms_triangle_op op, ms_tensor *t, int64_t diagonal);
ms_status native_triangle_(ms_triangle_op op, ms_tensor *t, int64_t diagonal);

/* ---- joins (native/join.c) ----------------------------------------------------------------- */

ms_tensor *native_cat(ms_tensor *const *ts, int n, int dim);
ms_tensor *native_stack(ms_tensor *const *ts, int n, int dim);
/* Pieces of `size` along dim (the last may be shorter), as views: a malloc'ed array of *count
 * new references (free the array), NULL on failure. */
ms_tensor **native_split(ms_tensor *t, int64_t size, int dim, int *count);
ms_tensor **native_chunk(ms_tensor *t, int chunks, int dim, int *count);
/* Pieces of the n sizes listed (non-negative, summing to dim's size), as native_split's. */
ms_tensor **native_split_with_sizes(ms_tensor *t, const int64_t *sizes, int n, int dim);

#endif
