/* cuda_graph_absent.c: the CUDA graph API of moonshard/cuda_graph.h in a build without CUDA:
 * every graph request answers why there is none (the Lua face's make_graphed_step then runs
 * steps eagerly). Apart from cuda_absent.c as cuda_graph.c is apart from the device runtime. */
#include "moonshard/cuda.h"
#include "moonshard/cuda_graph.h"

static ms_status no_graphs(const char *op) {
  return ms_error(MS_ERR_RUNTIME, "%s: CUDA graphs need a CUDA build and a CUDA device: %s", op,
                  ms_cuda_unavailable_reason());
}
ms_cuda_graph *ms_cuda_graph_create(void) { return no_graphs("CUDAGraph"), NULL; }
void ms_cuda_graph_destroy(ms_cuda_graph *g) { (void)g; }
ms_status ms_cuda_graph_capture_begin(ms_cuda_graph *g) { return (void)g, no_graphs("capture_begin"); }
ms_status ms_cuda_graph_capture_end(ms_cuda_graph *g) { return (void)g, no_graphs("capture_end"); }
ms_status ms_cuda_graph_replay(ms_cuda_graph *g) { return (void)g, no_graphs("replay"); }
ms_status ms_cuda_graph_reset(ms_cuda_graph *g) { return (void)g, no_graphs("reset"); }
bool ms_cuda_graph_is_captured(const ms_cuda_graph *g) { return (void)g, false; }
ms_status ms_cuda_graph_side_stream(ms_cuda_graph *g, bool enter) { return (void)g, (void)enter, no_graphs("side stream"); }
ms_cuda_graph *ms_cuda_graph_capturing(void) { return NULL; }
bool ms_cuda_is_current_stream_capturing(void) { return false; }
