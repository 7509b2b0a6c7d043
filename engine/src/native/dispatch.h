/* dispatch.h (engine-internal): the one place the engine chooses a device's kernels. A native op
 * settles every rule (dtypes, shapes, devices), asks for the kernels of its tensors' device, and
 * calls the slot; the same call runs on every device:
 *
 *   native_kernels nk;
 *   if (native_kernels_for("fill_", ms_tensor_device(t), &nk) != MS_OK) return MS_ERR_RUNTIME;
 *   return native_kernel_status(&nk, nk.k->fill(&nk.x, &g, bytes));
 */
#ifndef MS_NATIVE_DISPATCH_H
#define MS_NATIVE_DISPATCH_H

#include "kernels/kernel_table.h"
#include "moonshard/tensor_core.h"

typedef struct native_kernels {
  const char *op;       /* the public op, for errors */
  const ms_k_table *k;  /* the device's kernels */
  ms_k_exec x;          /* where they run */
} native_kernels;

/* The kernels of device dev, with that device made current for the calling thread; an error
 * naming op where the device has none (CUDA in a build without CUDA). */
ms_status native_kernels_for(const char *op, ms_device dev, native_kernels *nk);
/* MS_OK for 0; otherwise an error naming the op and what the device said. */
ms_status native_kernel_status(const native_kernels *nk, int err);

/* The rows of in's last dim as the row kernels (reduce_rows, sort_rows, scan_rows) take them:
 * `rows` of them, one per combination of the other dims. */
static inline ms_k_rows native_rows_of(const ms_tensor *in, int64_t rows) {
  ms_k_rows g = {0};
  g.ndim = in->ndim - 1;
  for (int d = 0; d < g.ndim; d++) g.shape[d] = in->shape[d], g.strides[d] = in->strides[d];
  g.rows = rows;
  g.n = in->ndim > 0 ? in->shape[in->ndim - 1] : 1;
  g.stride = in->ndim > 0 ? in->strides[in->ndim - 1] : 0;
  return g;
}

#endif
