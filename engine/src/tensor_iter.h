/* tensor_iter.h (engine-internal): walks up to four same-shaped strided operands together,
 * handing kernels 1-D rows. Dimensions that are contiguous in every operand are merged first,
 * so a contiguous tensor is one long row whatever its rank. */
#ifndef MS_TENSOR_ITER_H
#define MS_TENSOR_ITER_H

#include "moonshard/tensor_core.h"

#define MS_ITER_MAX_OPS 4

typedef struct ms_iter {
  int nops;
  int ndim;                                    /* after merging; the last dim is the row */
  int64_t shape[MS_MAX_DIMS];
  int64_t strides[MS_ITER_MAX_OPS][MS_MAX_DIMS]; /* in elements */
  char *data[MS_ITER_MAX_OPS];                   /* first element of each operand */
  size_t elsize[MS_ITER_MAX_OPS];
} ms_iter;

/* One row: n elements; ptr[k] is operand k's first element, stride[k] its element stride. */
typedef void (*ms_iter_row_fn)(void *ctx, int64_t n, char **ptr, const int64_t *stride);

/* Operands are tensors already broadcast to `shape` (strides may be 0). */
void ms_iter_init(ms_iter *it, int ndim, const int64_t *shape, int nops, ms_tensor *const *ops);
/* Calls fn on every row; splits the work over the thread pool when it is large enough. */
void ms_iter_run(const ms_iter *it, ms_iter_row_fn fn, void *ctx);
int64_t ms_iter_numel(const ms_iter *it);

/* Broadcasting: the common shape of a and b; an error naming `op` if they do not broadcast. */
ms_status ms_broadcast_shapes(const char *op, int na, const int64_t *a, int nb, const int64_t *b,
                              int *nout, int64_t *out);

/* The dtype the kernels compute in for values of dtype dt: float32, float64 or int64. */
ms_dtype ms_compute_dtype(ms_dtype dt);

#endif
