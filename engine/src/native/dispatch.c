/* dispatch.c: a device's kernel table and execution context. The CUDA table exists only where
 * CUDA is built; elsewhere asking for it is the error that says so. */
#include <stdatomic.h>

#include "moonshard/kernel_calls.h"
#include "native/dispatch.h"

#ifdef MS_HAVE_CUDA
#include "cuda/cuda_exec.h"
#endif

static ms_status cuda_kernels(native_kernels *nk, int index) {
#ifdef MS_HAVE_CUDA
  nk->k = &ms_k_cuda_table;
  return cuda_exec_for(nk->op, index, &nk->x);
#else
  (void)index;
  return ms_error(MS_ERR_RUNTIME, "%s: CUDA is not available: this moonshard was built without CUDA "
                  "(configure with -DMS_CUDA=ON on a machine with the CUDA toolkit)", nk->op);
#endif
}

ms_status native_kernels_for(const char *op, ms_device dev, native_kernels *nk) {
  *nk = (native_kernels){.op = op};
  switch (dev.type) {
  case MS_CPU: nk->k = &ms_k_cpu_table; return MS_OK;
  case MS_CUDA: return cuda_kernels(nk, dev.index);
  case MS_META: return ms_meta_no_data(op); /* the one rule: no op reads or writes meta data */
  }
  return ms_error(MS_ERR_ARG, "%s: unknown device type %d", op, (int)dev.type);
}

/* Kernel-table calls per device type (ms_kernel_calls): relaxed atomics, as a loader thread may
 * call kernels beside the main one and only the totals matter. */
static _Atomic int64_t kernel_calls[2];

int64_t ms_kernel_calls(ms_device_type type) {
  return type == MS_CPU || type == MS_CUDA ? atomic_load_explicit(&kernel_calls[type], memory_order_relaxed) : 0;
}

ms_status native_kernel_status(const native_kernels *nk, int err) {
  atomic_fetch_add_explicit(&kernel_calls[nk->k == &ms_k_cpu_table ? MS_CPU : MS_CUDA], 1, memory_order_relaxed);
  if (err == 0) return MS_OK;
  if (err == MS_K_ERR_NO_MEMORY)
    return ms_error(MS_ERR_MEMORY, "%s: %s", nk->op, nk->k->error_string(err));
  return ms_error(MS_ERR_RUNTIME, "%s: %s error: %s", nk->op, nk->k->device, nk->k->error_string(err));
}
