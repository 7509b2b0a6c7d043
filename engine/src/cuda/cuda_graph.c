/* cuda_graph.c: CUDA graphs (moonshard/cuda_graph.h): capture the work a thread queues on a device,
 * replay it in one launch. A capture runs on the device's side stream (CUDA cannot
 * capture the legacy default stream), joined to the caller's stream by events, in relaxed mode
 * so the caching allocator may still cudaMalloc; the allocator serves it from the graph's
 * private pool (cuda_alloc.c). Random ops inside count graph-relative Philox offsets
 * (random.c); the kernels add the base that each replay writes into the graph's device slot. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_internal.h"
#include "moonshard/cuda_graph.h"
#include "random_state.h"

struct ms_cuda_graph {
  int device;
  ms_cuda_stream *side;    /* where captures and warm-ups run: the device's side stream */
  ms_cuda_stream *caller;  /* the thread's current stream before capture_begin (NULL: default) */
  cudaEvent_t join;        /* orders the side stream after the caller's work, and back */
  cudaGraph_t graph;
  cudaGraphExec_t exec;    /* non-NULL: replayable */
  cuda_graph_pool *pool;   /* the blocks of the current capture; NULL when empty */
  uint64_t *rng_slot;      /* device memory: the Philox seed and base offset of a replay */
  uint64_t rng_blocks;     /* Philox blocks one replay draws */
  struct ms_cuda_graph *next_doomed;
};

static _Thread_local ms_cuda_graph *capturing; /* captures do not nest, and are per thread */
/* Graphs destroyed while another was being captured (Lua's collector runs any time): freeing
 * their memory would wait for the device and break that capture, so it waits for its end. */
static _Thread_local ms_cuda_graph *doomed;

/* One side stream per device for every graph, created on first use and kept: the warm-ups of
 * all graphs then share the blocks the caching allocator keeps for it (a stream per graph left
 * each one's warm-up memory to that graph alone). Captures are per thread, and only the thread
 * running Lua captures, so sharing it is safe. */
static ms_cuda_stream *side_streams[MS_CUDA_MAX_DEVICES];
static pthread_mutex_t side_lock = PTHREAD_MUTEX_INITIALIZER;

static ms_cuda_stream *side_stream(int device) {
  pthread_mutex_lock(&side_lock);
  if (!side_streams[device]) side_streams[device] = ms_cuda_stream_create(device);
  ms_cuda_stream *s = side_streams[device];
  pthread_mutex_unlock(&side_lock);
  return s;
}

ms_cuda_graph *ms_cuda_graph_capturing(void) { return capturing; }

bool ms_cuda_is_current_stream_capturing(void) {
  return capturing && capturing->device == ms_cuda_current_device();
}

bool ms_cuda_graph_is_captured(const ms_cuda_graph *g) { return g && g->exec; }

ms_cuda_graph *ms_cuda_graph_create(void) {
  int dev = ms_cuda_current_device();
  if (!ms_cuda_is_available())
    return ms_error(MS_ERR_RUNTIME, "CUDAGraph: CUDA graphs need a CUDA build and a CUDA device: %s",
                    ms_cuda_unavailable_reason()), NULL;
  if (cuda_use("CUDAGraph", dev) != MS_OK) return NULL;
  ms_cuda_graph *g = calloc(1, sizeof *g);
  if (!g) return ms_error(MS_ERR_MEMORY, "CUDAGraph: out of memory"), NULL;
  g->device = dev;
  g->side = side_stream(dev);
  ms_status st = g->side ? cuda_check("CUDAGraph", cudaEventCreateWithFlags(&g->join, cudaEventDisableTiming))
                         : MS_ERR_RUNTIME;
  if (st == MS_OK) st = cuda_check("CUDAGraph", cudaMalloc((void **)&g->rng_slot, 2 * sizeof(uint64_t)));
  if (st != MS_OK) return ms_cuda_graph_destroy(g), NULL;
  return g;
}

/* The work queued on `from` so far runs before what is queued on `to` from now on. */
static ms_status join_streams(const char *op, ms_cuda_graph *g, cudaStream_t from, cudaStream_t to) {
  if (cuda_check(op, cudaEventRecord(g->join, from)) != MS_OK) return MS_ERR_RUNTIME;
  return cuda_check(op, cudaStreamWaitEvent(to, g->join, 0));
}

/* Puts the thread back on the caller's stream after the side stream's work. */
static ms_status leave_side(const char *op, ms_cuda_graph *g) {
  cudaStream_t side = cuda_raw_stream(g->device);
  ms_cuda_set_stream(g->device, g->caller);
  return join_streams(op, g, side, cuda_raw_stream(g->device));
}

ms_status ms_cuda_graph_side_stream(ms_cuda_graph *g, bool enter) {
  if (capturing) return ms_error(MS_ERR_RUNTIME, "side stream: not allowed during a capture");
  if (cuda_use("side stream", g->device) != MS_OK) return MS_ERR_RUNTIME;
  if (!enter) return leave_side("side stream", g);
  g->caller = ms_cuda_current_stream(g->device);
  cudaStream_t caller = cuda_raw_stream(g->device);
  ms_cuda_set_stream(g->device, g->side);
  ms_status st = join_streams("side stream", g, caller, cuda_raw_stream(g->device));
  if (st != MS_OK) ms_cuda_set_stream(g->device, g->caller);
  return st;
}

ms_status ms_cuda_graph_capture_begin(ms_cuda_graph *g) {
  if (capturing)
    return ms_error(MS_ERR_RUNTIME, "capture_begin: this thread is already capturing a CUDA graph "
                    "(captures do not nest: end the other one first)");
  if (g->exec || g->pool)
    return ms_error(MS_ERR_RUNTIME, "capture_begin: the graph already holds a capture (reset() it first)");
  if (cuda_use("capture_begin", g->device) != MS_OK) return MS_ERR_RUNTIME;
  if (!cuda_bad_value_slot()) return MS_ERR_RUNTIME; /* its host allocation, before any capture */
  if (!(g->pool = cuda_graph_pool_new(g->device))) return MS_ERR_RUNTIME;
  g->caller = ms_cuda_current_stream(g->device);
  cudaStream_t caller = cuda_raw_stream(g->device);
  ms_cuda_set_stream(g->device, g->side);
  cudaStream_t side = cuda_raw_stream(g->device);
  ms_status st = join_streams("capture_begin", g, caller, side);
  if (st == MS_OK) st = cuda_check("capture_begin", cudaStreamBeginCapture(side, cudaStreamCaptureModeRelaxed));
  if (st != MS_OK) {
    ms_cuda_set_stream(g->device, g->caller);
    cuda_graph_pool_release(g->pool);
    g->pool = NULL;
    return st;
  }
  random_capture_begin();
  capturing = g;
  cuda_capture_set(&(cuda_capture){g->device, g->pool, g->rng_slot});
  return MS_OK;
}

/* What a failed capture says: CUDA's reason, and where ours are listed. */
static ms_status capture_failed(ms_cuda_graph *g, ms_status st) {
  char why[512];
  snprintf(why, sizeof why, "%s", st == MS_OK ? "CUDA returned no graph" : ms_error_last());
  if (g->graph) cudaGraphDestroy(g->graph);
  g->graph = NULL;
  cuda_graph_pool_release(g->pool);
  g->pool = NULL;
  return ms_error(MS_ERR_RUNTIME, "capture_end: the capture failed, the graph stays empty: %s (an "
                  "operation inside it cannot be captured; docs/cuda-graphs.md lists what a step may hold)", why);
}

/* Ends g's capture and instantiates it. */
static ms_status end_capture(ms_cuda_graph *g) {
  capturing = NULL;
  cuda_capture_set(NULL);
  g->rng_blocks = random_capture_end();
  if (cuda_use("capture_end", g->device) != MS_OK) return capture_failed(g, MS_ERR_RUNTIME);
  ms_status st = cuda_check("capture_end", cudaStreamEndCapture(cuda_raw_stream(g->device), &g->graph));
  ms_status left = leave_side("capture_end", g);
  if (st != MS_OK || left != MS_OK || !g->graph) return capture_failed(g, st != MS_OK ? st : left);
  /* auto-free: a library's stream-ordered allocation (cuBLAS's workspace) that the capture never
   * freed is freed before the next launch, so replays do not fail on it (as PyTorch does) */
  st = cuda_check("capture_end", cudaGraphInstantiate(&g->exec, g->graph, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  if (st != MS_OK) g->exec = NULL;
  return st == MS_OK ? MS_OK : capture_failed(g, st);
}

ms_status ms_cuda_graph_capture_end(ms_cuda_graph *g) {
  if (capturing != g)
    return ms_error(MS_ERR_RUNTIME, "capture_end: the graph is not being captured on this thread "
                    "(call capture_begin first)");
  ms_status st = end_capture(g);
  while (doomed) { /* their frees may wait for the device now */
    ms_cuda_graph *d = doomed;
    doomed = d->next_doomed;
    ms_cuda_graph_destroy(d);
  }
  return st;
}

/* Writes this replay's Philox seed and base offset into the slot, in stream order before the
 * launch, from a page-locked block that is not reused before the copy ran (cuda_alloc.c). */
static ms_status upload_rng(ms_cuda_graph *g) {
  uint64_t seed, offset;
  random_reserve((int64_t)g->rng_blocks, &seed, &offset); /* the eager steps' blocks, at once */
  uint64_t *host = ms_cuda_host_alloc(2 * sizeof *host);
  if (!host) return MS_ERR_MEMORY;
  host[0] = seed, host[1] = offset;
  ms_status st = cuda_check("replay", cudaMemcpyAsync(g->rng_slot, host, 2 * sizeof *host,
                                                      cudaMemcpyHostToDevice, cuda_raw_stream(g->device)));
  if (st == MS_OK) st = ms_cuda_host_record_use(host, g->device);
  ms_cuda_host_free(host);
  return st;
}

ms_status ms_cuda_graph_replay(ms_cuda_graph *g) {
  if (capturing)
    return ms_error(MS_ERR_RUNTIME, "replay: not allowed while this thread captures a CUDA graph");
  if (!g->exec)
    return ms_error(MS_ERR_RUNTIME, "replay: the graph holds no capture (capture_begin ... capture_end first)");
  if (cuda_use("replay", g->device) != MS_OK) return MS_ERR_RUNTIME;
  if (g->rng_blocks && upload_rng(g) != MS_OK) return MS_ERR_RUNTIME;
  return cuda_check("replay", cudaGraphLaunch(g->exec, cuda_raw_stream(g->device)));
}

ms_status ms_cuda_graph_reset(ms_cuda_graph *g) {
  if (capturing)
    return ms_error(MS_ERR_RUNTIME, "reset: not allowed while this thread captures a CUDA graph "
                    "(it gives memory back, which waits for the device)");
  if (cuda_use("reset", g->device) != MS_OK) return MS_ERR_RUNTIME;
  if (g->exec) cudaGraphExecDestroy(g->exec);
  if (g->graph) cudaGraphDestroy(g->graph);
  g->exec = NULL, g->graph = NULL, g->rng_blocks = 0;
  cuda_graph_pool_release(g->pool); /* waits for replays still running */
  g->pool = NULL;
  return MS_OK;
}

void ms_cuda_graph_destroy(ms_cuda_graph *g) {
  if (!g) return;
  if (capturing == g) ms_cuda_graph_capture_end(g); /* dropped mid-capture: end it, keep nothing */
  if (capturing) {
    g->next_doomed = doomed, doomed = g;
    return;
  }
  if (cuda_use("CUDAGraph", g->device) == MS_OK) {
    ms_cuda_graph_reset(g);
    if (g->join) cudaEventDestroy(g->join);
    if (g->rng_slot) cudaFree(g->rng_slot);
  }
  free(g); /* its side stream is the device's, kept */
}
