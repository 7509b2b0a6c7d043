/* grad_util.h (engine-internal): helpers every backward function uses, and the record functions
 * that the public ops call after computing their result (engine/src/autograd/grad_*.c). */
#ifndef MS_GRAD_UTIL_H
#define MS_GRAD_UTIL_H

#include "moonshard/autograd.h"
#include "moonshard/ops.h"

/* Sums grad over the dims that broadcasting added or expanded, giving a tensor of (ndim, shape)
 * (new reference). grad's shape must be a broadcast of shape. */
ms_tensor *ms_grad_sum_to(ms_tensor *grad, int ndim, const int64_t *shape);
/* The edge i of node needs a gradient. */
static inline bool ms_grad_needed(const ms_node *node, int i) { return node->next[i].node != NULL; }
/* In-place ops under autograd: writes out's values into a and makes out's grad_fn a's, as if a
 * had been replaced by out. Leaves that require grad refuse (PyTorch's rule). `op` is the
 * out-of-place name ("add"); messages say "add_". */
ms_status ms_grad_rebase_inplace(const char *op, ms_tensor *a, ms_tensor *out);
/* Fails with PyTorch's message when a is a leaf requiring grad and grad mode is on. */
ms_status ms_grad_check_inplace(const char *op, const ms_tensor *a);

/* ---- record functions: each takes the op's inputs and its result `out` (consumed), records a
 * node when the inputs require grad, and returns out (NULL, with out released, on failure) --- */
ms_tensor *ms_grad_record_binary(ms_binary_op op, ms_operand a, ms_operand b, ms_tensor *out);

#endif
