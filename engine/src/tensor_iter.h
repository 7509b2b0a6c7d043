/* tensor_iter.h (engine-internal): the geometry of up to four same-shaped strided operands as
 * the kernels take it, and walking it in 1-D rows on the CPU. Dimensions that are contiguous in
 * every operand are merged first, so a contiguous tensor is one long row whatever its rank. */
#ifndef MS_TENSOR_ITER_H
#define MS_TENSOR_ITER_H

#include "kernels/kernel_table.h"
#include "moonshard/tensor_core.h"

/* The iterator is the kernels' geometry (kernels/kernel_table.h), built from tensors. */
typedef ms_k_geom ms_iter;
typedef ms_k_row_fn ms_iter_row_fn;
_Static_assert(MS_MAX_DIMS == MS_K_MAX_DIMS, "a tensor's dims must fit the kernels' geometry");

/* Operands are tensors already broadcast to `shape` (strides may be 0). */
void iter_init(ms_iter *it, int ndim, const int64_t *shape, int nops, ms_tensor *const *ops);
/* Calls fn on every row; splits the work over the thread pool when it is large enough. */
static inline void iter_run(const ms_iter *it, ms_iter_row_fn fn, void *ctx) { ms_k_geom_run(it, fn, ctx); }
static inline int64_t iter_numel(const ms_iter *it) { return ms_k_geom_numel(it); }

/* Broadcasting: the common shape of a and b; an error naming `op` if they do not broadcast. */
ms_status broadcast_shapes(const char *op, int na, const int64_t *a, int nb, const int64_t *b,
                              int *nout, int64_t *out);

/* The dtype the kernels compute in for values of dtype dt: float32, float64 or int64. */
ms_dtype compute_dtype(ms_dtype dt);

#endif
