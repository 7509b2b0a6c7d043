/* cuda_internal.h (engine-internal): what the engine's CUDA files share: turning CUDA status
 * codes into engine errors, making a device current for the calling thread, and the stream that
 * engine work on a device is queued on. */
#ifndef MS_CUDA_INTERNAL_H
#define MS_CUDA_INTERNAL_H

#include <cuda_runtime.h>

#include "moonshard/cuda.h"
#include "moonshard/tensor_core.h"

/* MS_OK for cudaSuccess; otherwise an engine error "op: CUDA error: <CUDA's message>". */
ms_status ms_cuda_check(const char *op, cudaError_t err);
/* Checks that `index` is usable and makes it the calling thread's device. */
ms_status ms_cuda_use(const char *op, int index);
/* The raw stream of device index for the calling thread (0: the default stream). */
cudaStream_t ms_cuda_raw_stream(int index);

/* The host slot where kernels report a bad value they find (cuda_bad_values.c); NULL with the
 * error set if it cannot be had. */
struct ms_k_bad_value *ms_cuda_bad_value_slot(void);
/* Raises (once) a bad value that a kernel reported, naming `at`, the call that synchronized. */
ms_status ms_cuda_raise_bad_values(const char *at);

/* Makes t's device current for op and gives the stream its work goes on. */
static inline ms_status ms_cuda_use_tensor(const char *op, const ms_tensor *t, cudaStream_t *stream) {
  int dev = ms_tensor_device(t).index;
  if (ms_cuda_use(op, dev) != MS_OK) return MS_ERR_RUNTIME;
  *stream = ms_cuda_raw_stream(dev);
  return MS_OK;
}

#endif
