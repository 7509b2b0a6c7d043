/* cuda_stream.c: streams (the calling thread's current stream per device, which every engine
 * kernel and copy on that device is queued on) and events for ordering and timing. */
#include <stdlib.h>

#include "cuda_exec.h"
#include "cuda_internal.h"

struct ms_cuda_stream {
  cudaStream_t raw;
  int device;
};

struct ms_cuda_event {
  cudaEvent_t raw;
  int device;
  bool timing, recorded;
};

static _Thread_local ms_cuda_stream *current[MS_CUDA_MAX_DEVICES];

cudaStream_t cuda_raw_stream(int index) {
  ms_cuda_stream *s = index >= 0 && index < MS_CUDA_MAX_DEVICES ? current[index] : NULL;
  return s ? s->raw : 0;
}

ms_cuda_stream *ms_cuda_stream_create(int index) {
  if (cuda_use("Stream", index) != MS_OK) return NULL;
  ms_cuda_stream *s = calloc(1, sizeof *s);
  if (!s) return ms_error(MS_ERR_MEMORY, "Stream: out of memory"), NULL;
  s->device = index;
  /* non-blocking: the legacy default stream would otherwise serialize with it */
  if (cuda_check("Stream", cudaStreamCreateWithFlags(&s->raw, cudaStreamNonBlocking)) != MS_OK)
    return free(s), NULL;
  return s;
}

void ms_cuda_stream_destroy(ms_cuda_stream *s) {
  if (!s) return;
  for (int i = 0; i < MS_CUDA_MAX_DEVICES; i++) /* this thread's; others must unset their own */
    if (current[i] == s) current[i] = NULL;
  if (cuda_use("Stream", s->device) == MS_OK) {
    cudaStreamSynchronize(s->raw);
    cudaStreamDestroy(s->raw);
  }
  free(s);
}

ms_status ms_cuda_stream_synchronize(ms_cuda_stream *s) {
  if (cuda_refuse_in_capture("Stream.synchronize", "it waits for the device") != MS_OK) return MS_ERR_RUNTIME;
  if (cuda_use("Stream.synchronize", s->device) != MS_OK) return MS_ERR_RUNTIME;
  if (cuda_check("Stream.synchronize", cudaStreamSynchronize(s->raw)) != MS_OK) return MS_ERR_RUNTIME;
  return cuda_raise_bad_values("Stream.synchronize");
}

ms_status ms_cuda_set_stream(int index, ms_cuda_stream *s) {
  if (ms_cuda_check_device("set_stream", index) != MS_OK) return MS_ERR_RUNTIME;
  if (s && s->device != index)
    return ms_error(MS_ERR_ARG, "set_stream: the stream belongs to cuda:%d, not cuda:%d", s->device, index);
  current[index] = s;
  return MS_OK;
}

ms_cuda_stream *ms_cuda_current_stream(int index) {
  return index >= 0 && index < MS_CUDA_MAX_DEVICES ? current[index] : NULL;
}

ms_cuda_event *ms_cuda_event_create(bool timing) {
  int dev = ms_cuda_current_device();
  if (cuda_use("Event", dev) != MS_OK) return NULL;
  ms_cuda_event *e = calloc(1, sizeof *e);
  if (!e) return ms_error(MS_ERR_MEMORY, "Event: out of memory"), NULL;
  e->device = dev, e->timing = timing;
  unsigned flags = timing ? cudaEventDefault : cudaEventDisableTiming;
  if (cuda_check("Event", cudaEventCreateWithFlags(&e->raw, flags)) != MS_OK) return free(e), NULL;
  return e;
}

void ms_cuda_event_destroy(ms_cuda_event *e) {
  if (!e) return;
  if (cuda_use("Event", e->device) == MS_OK) cudaEventDestroy(e->raw);
  free(e);
}

ms_status ms_cuda_event_record(ms_cuda_event *e, ms_cuda_stream *s) {
  if (s && s->device != e->device)
    return ms_error(MS_ERR_ARG, "Event.record: the event belongs to cuda:%d but the stream to cuda:%d",
                    e->device, s->device);
  if (cuda_use("Event.record", e->device) != MS_OK) return MS_ERR_RUNTIME;
  cudaStream_t raw = s ? s->raw : cuda_raw_stream(e->device);
  if (cuda_check("Event.record", cudaEventRecord(e->raw, raw)) != MS_OK) return MS_ERR_RUNTIME;
  e->recorded = true;
  return MS_OK;
}

ms_status ms_cuda_event_synchronize(ms_cuda_event *e) {
  if (!e->recorded) return MS_OK; /* as CUDA: nothing to wait for */
  if (cuda_refuse_in_capture("Event.synchronize", "it waits for the device") != MS_OK) return MS_ERR_RUNTIME;
  if (cuda_use("Event.synchronize", e->device) != MS_OK) return MS_ERR_RUNTIME;
  if (cuda_check("Event.synchronize", cudaEventSynchronize(e->raw)) != MS_OK) return MS_ERR_RUNTIME;
  return cuda_raise_bad_values("Event.synchronize");
}

ms_status ms_cuda_stream_wait_event(ms_cuda_stream *s, ms_cuda_event *e) {
  if (s && s->device != e->device)
    return ms_error(MS_ERR_ARG, "Stream.wait_event: the event belongs to cuda:%d but the stream to cuda:%d",
                    e->device, s->device);
  if (!e->recorded) return MS_OK; /* as CUDA: nothing to wait for */
  if (cuda_use("Stream.wait_event", e->device) != MS_OK) return MS_ERR_RUNTIME;
  cudaStream_t raw = s ? s->raw : cuda_raw_stream(e->device);
  return cuda_check("Stream.wait_event", cudaStreamWaitEvent(raw, e->raw, 0));
}

ms_status ms_cuda_event_query(ms_cuda_event *e, bool *done) {
  *done = true;
  if (!e->recorded) return MS_OK;
  if (cuda_use("Event.query", e->device) != MS_OK) return MS_ERR_RUNTIME;
  cudaError_t err = cudaEventQuery(e->raw);
  if (err == cudaErrorNotReady) return (void)cudaGetLastError(), *done = false, MS_OK;
  return cuda_check("Event.query", err);
}

ms_status ms_cuda_event_elapsed_ms(ms_cuda_event *start, ms_cuda_event *end, float *ms) {
  if (!start->timing || !end->timing)
    return ms_error(MS_ERR_ARG, "Event.elapsed_time: both events must be created with "
                    "enable_timing = true");
  if (!start->recorded || !end->recorded)
    return ms_error(MS_ERR_ARG, "Event.elapsed_time: both events must be recorded first (the %s "
                    "event was not)", !start->recorded ? "start" : "end");
  if (start->device != end->device)
    return ms_error(MS_ERR_ARG, "Event.elapsed_time: the events are on cuda:%d and cuda:%d; both "
                    "must be on one device", start->device, end->device);
  if (cuda_use("Event.elapsed_time", end->device) != MS_OK) return MS_ERR_RUNTIME;
  return cuda_check("Event.elapsed_time", cudaEventElapsedTime(ms, start->raw, end->raw));
}

/* Kernel scratch is the caching allocator's: reuse on the same stream needs no synchronization. */
static void *scratch_alloc(int device, size_t nbytes) { return ms_cuda_alloc(device, nbytes, MS_MEM_OTHER); }
static void scratch_free(int device, void *p, size_t nbytes) { ms_cuda_free(device, p, nbytes, MS_MEM_OTHER); }

ms_status cuda_exec_for(const char *op, int index, ms_k_exec *x) {
  if (cuda_use(op, index) != MS_OK) return MS_ERR_RUNTIME;
  ms_k_bad_value *bad = cuda_bad_value_slot();
  if (!bad) return MS_ERR_RUNTIME;
  *x = (ms_k_exec){.device = index, .stream = cuda_raw_stream(index), .bad = bad,
                   .scratch_alloc = scratch_alloc, .scratch_free = scratch_free,
                   .rng_base = cuda_capture_rng_base(index)};
  return MS_OK;
}
