/* grad_util.h (engine-internal): helpers every backward function uses, and the record functions
 * that the public ops call after computing their result (engine/src/autograd/grad_*.c). */
#ifndef MS_GRAD_UTIL_H
#define MS_GRAD_UTIL_H

#include "moonshard/autograd.h"
#include "moonshard/ops.h"

/* Sums grad over the dims that broadcasting added or expanded, giving a tensor of (ndim, shape)
 * (new reference). grad's shape must be a broadcast of shape. */
ms_tensor *ms_grad_sum_to(ms_tensor *grad, int ndim, const int64_t *shape);
/* Whether a backward function may overwrite g, a gradient the walk handed it, instead of
 * allocating its result: nothing but the caller's own `refs` references hold g, nothing else
 * holds its storage, and it records no graph. Saves a buffer and its cache misses on the
 * memory-bound backwards (relu, dropout) and a copy when a leaf's first gradient arrives. */
bool ms_grad_is_exclusive(const ms_tensor *g, int refs);
/* The edge i of node needs a gradient. */
static inline bool ms_grad_needed(const ms_node *node, int i) { return node->next[i].node != NULL; }
/* In-place ops under autograd: writes out's values into a and makes out's grad_fn a's, as if a
 * had been replaced by out. Leaves that require grad refuse (PyTorch's rule). `op` is the
 * out-of-place name ("add"); messages say "add_". */
ms_status ms_grad_rebase_inplace(const char *op, ms_tensor *a, ms_tensor *out);
/* Attaches n as out's grad_fn (output 0) and drops the recording's reference; out is released
 * and NULL returned when the node could not be made (n NULL). */
ms_tensor *ms_grad_finish(ms_node *n, ms_tensor *out);
/* Fails with PyTorch's message when a is a leaf requiring grad, or a view of one, and grad mode
 * is on. */
ms_status ms_grad_check_inplace(const char *op, const ms_tensor *a);
/* t is a recorded view of a leaf that requires grad. */
bool ms_grad_is_view_of_leaf(const ms_tensor *t);

/* ---- record functions: each takes the op's inputs and its result `out` (consumed), records a
 * node when the inputs require grad, and returns out (NULL, with out released, on failure) --- */
ms_tensor *ms_grad_record_binary(ms_binary_op op, ms_operand a, ms_operand b, ms_tensor *out);

/* views and copies (grad_view.c). `name` is the grad_fn name PyTorch shows for the op. Reshape
 * covers every op that keeps the element order (view, reshape, flatten, squeeze, unsqueeze);
 * dims and starts are already normalised (0-based, non-negative). */
ms_tensor *ms_grad_record_reshape(const char *name, ms_tensor *in, ms_tensor *out);
ms_tensor *ms_grad_record_permute(const char *name, ms_tensor *in, const int *dims, ms_tensor *out);
ms_tensor *ms_grad_record_narrow(const char *name, ms_tensor *in, int dim, int64_t start,
                                 int64_t length, ms_tensor *out);
ms_tensor *ms_grad_record_select(ms_tensor *in, int dim, int64_t index, ms_tensor *out);
ms_tensor *ms_grad_record_expand(ms_tensor *in, ms_tensor *out);
/* clone, contiguous, to_dtype: the gradient goes back converted to in's dtype. */
ms_tensor *ms_grad_record_copy(const char *name, ms_tensor *in, ms_tensor *out);
ms_tensor *ms_grad_record_select_scatter(const char *name, ms_tensor *t, ms_tensor *src, int dim,
                                         int64_t index, ms_tensor *out);
ms_tensor *ms_grad_record_cat(ms_tensor *const *ts, int n, int dim, ms_tensor *out);
ms_tensor *ms_grad_record_stack(ms_tensor *const *ts, int n, int dim, ms_tensor *out);
/* In-place writes compute the new values out of place, record them, then hand them to
 * ms_grad_rebase_inplace. These two record unconditionally (a floating out), since the node
 * must replace the old grad_fn of the tensor written to: out holds src's values (copy_) or a
 * constant (fill_, zero_). */
ms_tensor *ms_grad_record_copy_into(ms_tensor *src, ms_tensor *out);
ms_tensor *ms_grad_record_fill(const char *name, ms_tensor *out);
/* Records an in-place write of out's values through `view` (which has a grad_base) on its base
 * (CopySlices) and makes view a view of the new base. */
ms_status ms_grad_record_view_write(ms_tensor *view, ms_tensor *out);
/* products (grad_matmul.c) */
ms_tensor *ms_grad_record_mm(ms_tensor *a, ms_tensor *b, ms_tensor *out);
ms_tensor *ms_grad_record_bmm(ms_tensor *a, ms_tensor *b, ms_tensor *out);
ms_tensor *ms_grad_record_addmm(ms_tensor *c, ms_tensor *a, ms_tensor *b, double beta, double alpha,
                                ms_tensor *out);
ms_tensor *ms_grad_record_unary(ms_unary_op op, ms_tensor *a, ms_tensor *out);
ms_tensor *ms_grad_record_clamp(ms_tensor *a, const double *min, const double *max, ms_tensor *out);
ms_tensor *ms_grad_record_where(ms_tensor *cond, ms_operand a, ms_operand b, ms_tensor *out);
ms_tensor *ms_grad_record_masked_fill(ms_tensor *a, ms_tensor *mask, ms_tensor *out);
ms_tensor *ms_grad_record_reduce(ms_reduce_op op, ms_tensor *a, ms_reduce_opts opts, ms_tensor *out);
/* max/min over a dim: records on `values` (consumed, returned); indices is borrowed (copied). */
ms_tensor *ms_grad_record_reduce_indices(ms_reduce_op op, ms_tensor *a, int dim, bool keepdim,
                                         ms_tensor *indices, ms_tensor *values);
/* Unary ops whose derivative reads their input: their in-place forms compute from a copy. */
bool ms_grad_unary_reads_input(ms_unary_op op);
/* A copy of a's values that stands for a in the graph (same grad_fn and output number), for
 * in-place ops whose node saves the input that the op is about to overwrite (new reference). */
ms_tensor *ms_grad_inplace_original(ms_tensor *a);

#endif
