/* cuda_internal.h (engine-internal): what the engine's CUDA files share: turning CUDA status
 * codes into engine errors, making a device current for the calling thread, and the stream that
 * engine work on a device is queued on. */
#ifndef MS_CUDA_INTERNAL_H
#define MS_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

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

/* ---- CUDA graphs (cuda_graph.c) ----------------------------------------------------------
 * While a thread captures a graph on a device, the caching allocator serves that thread's
 * allocations on the device from the graph's private pool (cuda_alloc.c): the replayed step
 * writes the same addresses each time, so no block of it may go to eager code. */
typedef struct cuda_graph_pool cuda_graph_pool;
/* What the calling thread captures (cuda_capture.c): set by cuda_graph.c at capture_begin,
 * cleared (NULL) at capture_end; the allocator and the kernels' exec read it. */
typedef struct cuda_capture {
  int device;
  cuda_graph_pool *pool;
  const uint64_t *rng_base;
} cuda_capture;
void cuda_capture_set(const cuda_capture *c);
/* The private pool of the graph the calling thread is capturing on device index; NULL if none. */
cuda_graph_pool *cuda_capture_pool(int index);
/* The graph's device slot (Philox seed, base offset of the replay) for kernel_table.h's rng_base
 * while the calling thread captures on device index; NULL otherwise. */
const uint64_t *cuda_capture_rng_base(int index);
/* MS_OK unless the calling thread is capturing a graph; then the error that `op` would make the
 * host wait for the device (`what`), which a capture cannot hold. */
ms_status cuda_refuse_in_capture(const char *op, const char *what);
/* `what` for a copy between the host and a device, which a capture would bake in. */
#define HOST_COPY_IN_CAPTURE                                                                       \
  "it copies between the host and a device: a replay would read or write the same host bytes "    \
  "again, and a copy to the host (item(), tolist(), cpu(), printing) waits for the device"

/* A new empty private pool on device index (NULL with the error set). */
cuda_graph_pool *cuda_graph_pool_new(int index);
/* The graph is gone (reset or destroyed): its free blocks go back to the driver now, and each
 * block a tensor still holds goes to the eager cache when that tensor frees it. Never called
 * during a capture (cudaFree waits for the device). */
void cuda_graph_pool_release(cuda_graph_pool *pool);

#endif
