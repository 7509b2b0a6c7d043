/* cuda_internal.h (engine-internal): what the engine's CUDA files share: turning CUDA status
 * codes into engine errors, making a device current for the calling thread, and the stream that
 * engine work on a device is queued on. */
#ifndef MS_CUDA_INTERNAL_H
#define MS_CUDA_INTERNAL_H

#include <cuda_runtime.h>

#include "moonshard/cuda.h"

/* MS_OK for cudaSuccess; otherwise an engine error "op: CUDA error: <CUDA's message>". */
ms_status cuda_check(const char *op, cudaError_t err);
/* Checks that `index` is usable and makes it the calling thread's device. */
ms_status cuda_use(const char *op, int index);
/* The raw stream of device index for the calling thread (0: the default stream). */
cudaStream_t cuda_raw_stream(int index);

/* The host slot where kernels report a bad value they find (cuda_bad_values.c); NULL with the
 * error set if it cannot be had. */
struct ms_k_bad_value *cuda_bad_value_slot(void);
/* Raises (once) a bad value that a kernel reported, naming `at`, the call that synchronized. */
ms_status cuda_raise_bad_values(const char *at);

#endif
