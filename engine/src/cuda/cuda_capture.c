/* cuda_capture.c: what the calling thread is capturing into a CUDA graph, for the layers below
 * the graphs (the caching allocator, the kernels' exec, the host waits that a capture refuses).
 * Apart from cuda_graph.c, which sits above the random generator, so that these layers do not
 * depend on it. */
#include "cuda_internal.h"

static _Thread_local cuda_capture current; /* pool NULL: not capturing */

void cuda_capture_set(const cuda_capture *c) { current = c ? *c : (cuda_capture){0}; }

cuda_graph_pool *cuda_capture_pool(int index) {
  return current.pool && current.device == index ? current.pool : NULL;
}

const uint64_t *cuda_capture_rng_base(int index) {
  return current.pool && current.device == index ? current.rng_base : NULL;
}

ms_status cuda_refuse_in_capture(const char *op, const char *what) {
  if (!current.pool) return MS_OK;
  return ms_error(MS_ERR_RUNTIME, "%s: not allowed while a CUDA graph is being captured: %s (move it out "
                  "of the captured step; docs/cuda-graphs.md lists what a step may hold)", op, what);
}
