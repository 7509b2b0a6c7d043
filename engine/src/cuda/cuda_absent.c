/* cuda_absent.c: the CUDA API of moonshard/cuda.h in a build without CUDA: no device, and every
 * request for one answers "built without CUDA" as an engine error. */
#include "moonshard/cuda.h"

static const char *const REASON = "this moonshard was built without CUDA (configure with -DMS_CUDA=ON "
                                  "on a machine with the CUDA toolkit)";

static ms_status absent(const char *op) {
  return ms_error(MS_ERR_RUNTIME, "%s: CUDA is not available: %s", op, REASON);
}

bool ms_cuda_is_available(void) { return false; }
int ms_cuda_device_count(void) { return 0; }
const char *ms_cuda_unavailable_reason(void) { return REASON; }
ms_status ms_cuda_check_device(const char *op, int index) { return (void)index, absent(op); }
ms_status ms_cuda_device_name(int index, char *buf, size_t len, int *major, int *minor) {
  (void)index, (void)len, (void)major, (void)minor;
  if (len) buf[0] = 0;
  return absent("get_device_name");
}
ms_status ms_cuda_set_device(int index) { return (void)index, absent("set_device"); }
int ms_cuda_current_device(void) { return 0; }
ms_status ms_cuda_synchronize(int index) { return (void)index, absent("synchronize"); }

void *ms_cuda_alloc(int index, size_t nbytes, ms_mem_category category) {
  (void)index, (void)nbytes, (void)category;
  return absent("alloc"), NULL;
}
/* Nothing can have been allocated, so nothing is freed. */
void ms_cuda_free(int index, void *p, size_t nbytes, ms_mem_category category) {
  (void)index, (void)p, (void)nbytes, (void)category;
}
ms_status ms_cuda_memory_stats_get(int index, ms_cuda_memory_stats *out) {
  (void)index, (void)out;
  return absent("memory_stats");
}
int64_t ms_cuda_memory_current_total(void) { return 0; }
ms_status ms_cuda_reset_peak(int index) { return (void)index, absent("reset_peak_memory_stats"); }
ms_status ms_cuda_empty_cache(void) { return MS_OK; } /* as PyTorch: a no-op without devices */

ms_status ms_cuda_memcpy(void *dst, int dst_index, const void *src, int src_index, size_t nbytes,
                         ms_cuda_copy_kind kind) {
  (void)dst, (void)dst_index, (void)src, (void)src_index, (void)nbytes, (void)kind;
  return absent("copy");
}

ms_cuda_stream *ms_cuda_stream_create(int index) { return (void)index, absent("Stream"), NULL; }
void ms_cuda_stream_destroy(ms_cuda_stream *s) { (void)s; }
ms_status ms_cuda_stream_synchronize(ms_cuda_stream *s) { return (void)s, absent("Stream.synchronize"); }
ms_status ms_cuda_set_stream(int index, ms_cuda_stream *s) { return (void)index, (void)s, absent("set_stream"); }
ms_cuda_stream *ms_cuda_current_stream(int index) { return (void)index, NULL; }

ms_cuda_event *ms_cuda_event_create(bool timing) { return (void)timing, absent("Event"), NULL; }
void ms_cuda_event_destroy(ms_cuda_event *e) { (void)e; }
ms_status ms_cuda_event_record(ms_cuda_event *e, ms_cuda_stream *s) { return (void)e, (void)s, absent("Event.record"); }
ms_status ms_cuda_event_synchronize(ms_cuda_event *e) { return (void)e, absent("Event.synchronize"); }
ms_status ms_cuda_event_query(ms_cuda_event *e, bool *done) { return (void)e, *done = true, absent("Event.query"); }
ms_status ms_cuda_event_elapsed_ms(ms_cuda_event *a, ms_cuda_event *b, float *ms) {
  return (void)a, (void)b, (void)ms, absent("Event.elapsed_time");
}

/* ---- page-locked host memory: none without CUDA ---- */
void *ms_cuda_host_alloc(size_t nbytes) { return (void)nbytes, absent("pin_memory"), NULL; }
void ms_cuda_host_free(void *p) { (void)p; }
ms_status ms_cuda_host_record_use(void *p, int index) { return (void)p, (void)index, absent("pin_memory"); }
ms_status ms_cuda_host_memcpy_async(void *dst, int dst_index, const void *src, int src_index, size_t nbytes,
                                    ms_cuda_copy_kind kind) {
  (void)dst, (void)dst_index, (void)src, (void)src_index, (void)nbytes, (void)kind;
  return absent("copy");
}
ms_status ms_cuda_host_stats(int64_t *live, int64_t *cached) { return *live = 0, *cached = 0, MS_OK; }
