/* cuda_graph.h: CUDA graphs (engine/src/cuda/cuda_graph.c; docs/cuda-graphs.md). Apart from
 * cuda.h because the graphs sit above the random generator (a replay reserves its numbers),
 * which sits above the devices: cuda.h's users must not depend on it. */
#ifndef MOONSHARD_CUDA_GRAPH_H
#define MOONSHARD_CUDA_GRAPH_H

#include <stdbool.h>

#include "moonshard/error.h"
#include "moonshard/export.h"

/* A graph records the work one thread queues on a device between capture_begin and capture_end
 * (a training step), and replay launches all of it again in one call. The capture runs on the
 * device's side stream (shared by all graphs), joined to the caller's stream before and after;
 * what it allocates comes from the graph's private pool, so a replay writes the same addresses; random
 * ops draw from graph-relative offsets, and each replay reserves its blocks from the generator
 * first, so replay k draws what eager step k would. Inside a capture, anything that makes the
 * host wait for the device (a copy to the host, synchronize) or copies host bytes is refused
 * with an error naming it. Without CUDA, every call answers "CUDA graphs need ...". */
typedef struct ms_cuda_graph ms_cuda_graph;
/* A new empty graph; NULL with an error when no CUDA device can be used. */
MS_API ms_cuda_graph *ms_cuda_graph_create(void);
MS_API void ms_cuda_graph_destroy(ms_cuda_graph *g); /* ends its capture, if any; NULL is fine */
/* Starts capturing the calling thread's work on its current device into g (empty: reset it
 * first); captures do not nest. */
MS_API ms_status ms_cuda_graph_capture_begin(ms_cuda_graph *g);
/* Ends g's capture and makes it replayable; the thread's stream is restored either way, and a
 * capture that failed leaves g empty and says why. */
MS_API ms_status ms_cuda_graph_capture_end(ms_cuda_graph *g);
/* Queues one replay of g on its device's current stream of the calling thread. */
MS_API ms_status ms_cuda_graph_replay(ms_cuda_graph *g);
/* Empties g: its capture is dropped and its private pool given back (blocks tensors still hold
 * go back when they are freed). */
MS_API ms_status ms_cuda_graph_reset(ms_cuda_graph *g);
MS_API bool ms_cuda_graph_is_captured(const ms_cuda_graph *g); /* whether replay has something */
/* enter: the calling thread's work on g's device goes to g's side stream (after the work queued
 * so far) until the matching leave, which joins it back: warm-up steps run where the capture
 * will, so per-stream lazy set-up (library workspaces) happens before it. */
MS_API ms_status ms_cuda_graph_side_stream(ms_cuda_graph *g, bool enter);
/* The graph the calling thread is capturing (NULL: none), and whether it captures at all. */
MS_API ms_cuda_graph *ms_cuda_graph_capturing(void);
MS_API bool ms_cuda_is_current_stream_capturing(void);

#endif
