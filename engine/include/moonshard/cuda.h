/* cuda.h: the CUDA devices as the engine sees them: availability (never a crash without a driver
 * or a GPU), the current device, a caching allocator per device with its statistics, streams and
 * events. A build without CUDA provides the same functions, answering "built without CUDA". */
#ifndef MOONSHARD_CUDA_H
#define MOONSHARD_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "moonshard/error.h"
#include "moonshard/export.h"
#include "moonshard/memory.h"

#define MS_CUDA_MAX_DEVICES 64

/* ---- devices ----------------------------------------------------------------------------- */
/* Whether at least one CUDA device can be used. Asks the driver once per process. */
MS_API bool ms_cuda_is_available(void);
MS_API int ms_cuda_device_count(void); /* 0 when unavailable */
/* Why no device can be used ("built without CUDA", "no NVIDIA driver ...", "no CUDA device ...");
 * "" when one can. */
MS_API const char *ms_cuda_unavailable_reason(void);
/* MS_OK when `index` names a usable device; otherwise an error naming `op` that says why. */
MS_API ms_status ms_cuda_check_device(const char *op, int index);
/* The device's name ("NVIDIA H200") and compute capability into buf. */
MS_API ms_status ms_cuda_device_name(int index, char *buf, size_t len, int *major, int *minor);
/* The calling thread's current device (0 until set). */
MS_API ms_status ms_cuda_set_device(int index);
MS_API int ms_cuda_current_device(void);
/* Waits for all work queued on a device (index < 0: the current one). */
MS_API ms_status ms_cuda_synchronize(int index);

/* ---- the caching allocator ---------------------------------------------------------------- */
/* Device memory of at least nbytes on device `index`, reused from the device's cache of freed
 * blocks of the same size class and stream when one is there (cudaMalloc only on a miss);
 * NULL with an error (the CUDA message and the device's statistics) on failure. */
MS_API void *ms_cuda_alloc(int index, size_t nbytes, ms_mem_category category);
/* Returns p (from ms_cuda_alloc with the same nbytes and category) to the device's cache. Work
 * already queued on its stream that reads p stays valid: the block is reused only in stream
 * order on that same stream. */
MS_API void ms_cuda_free(int index, void *p, size_t nbytes, ms_mem_category category);
/* current: bytes of live tensors (requested sizes); peak: most since the last reset; cached:
 * bytes held in the cache (reserved = current rounded up to classes + cached). */
typedef struct ms_cuda_memory_stats {
  ms_memory_stats mem;
  int64_t reserved; /* bytes obtained from cudaMalloc and not yet returned */
  int64_t reserved_peak;
} ms_cuda_memory_stats;
/* The memory statistics of CUDA device index into *out; an error without CUDA or for a bad index. */
MS_API ms_status ms_cuda_memory_stats_get(int index, ms_cuda_memory_stats *out);
/* Bytes of live tensors on all CUDA devices together (0 without CUDA): what the Lua face adds to
 * the CPU's bytes to pace its collector, so device memory stays bounded in a loop too. */
MS_API int64_t ms_cuda_memory_current_total(void);
MS_API ms_status ms_cuda_reset_peak(int index);
/* Returns every cached block of every device to the driver (after a synchronize). */
MS_API ms_status ms_cuda_empty_cache(void);

/* ---- copies ----------------------------------------------------------------------------------
 * Byte copies between host and device or two devices, ordered on the current stream of the
 * device involved; a copy to the host waits for it, so the bytes are there on return. */
typedef enum ms_cuda_copy_kind { MS_CUDA_H2D, MS_CUDA_D2H, MS_CUDA_D2D } ms_cuda_copy_kind;
/* dst_index / src_index: the devices of dst and src (ignored for the host side). */
MS_API ms_status ms_cuda_memcpy(void *dst, int dst_index, const void *src, int src_index, size_t nbytes,
                                ms_cuda_copy_kind kind);

/* ---- streams and events -------------------------------------------------------------------- */
typedef struct ms_cuda_stream ms_cuda_stream;
/* A new stream on device `index` (caller destroys). */
MS_API ms_cuda_stream *ms_cuda_stream_create(int index);
MS_API void ms_cuda_stream_destroy(ms_cuda_stream *s); /* waits for its work first; NULL is fine */
MS_API ms_status ms_cuda_stream_synchronize(ms_cuda_stream *s);
/* The stream engine work on device `index` is queued on, for the calling thread; NULL sets the
 * device's default stream back. s must belong to that device. */
MS_API ms_status ms_cuda_set_stream(int index, ms_cuda_stream *s);
MS_API ms_cuda_stream *ms_cuda_current_stream(int index); /* NULL: the default stream */

typedef struct ms_cuda_event ms_cuda_event;
/* A new event on the current device; timing enables elapsed_time. NULL with an error when no
 * device can be used. */
MS_API ms_cuda_event *ms_cuda_event_create(bool timing);
MS_API void ms_cuda_event_destroy(ms_cuda_event *e); /* NULL is fine */
/* Records e on stream s (NULL: the current stream of e's device). */
MS_API ms_status ms_cuda_event_record(ms_cuda_event *e, ms_cuda_stream *s);
MS_API ms_status ms_cuda_event_synchronize(ms_cuda_event *e);
/* Makes stream s (NULL: the current stream of e's device) wait, on the device, for the work
 * before e's last record; the host does not wait. A never-recorded e: nothing to wait for. */
MS_API ms_status ms_cuda_stream_wait_event(ms_cuda_stream *s, ms_cuda_event *e);
/* Whether the work before e's record has finished (true for an event never recorded). */
MS_API ms_status ms_cuda_event_query(ms_cuda_event *e, bool *done);
/* Milliseconds from start's record to end's; both recorded, with timing, end finished. */
MS_API ms_status ms_cuda_event_elapsed_ms(ms_cuda_event *start, ms_cuda_event *end, float *ms);


/* ---- page-locked host memory (cuda_alloc.c) ------------------------------------------------
 * What pin_memory and FSDP's cpu_offload hold host bytes in: copies from and to it can run
 * asynchronously. Blocks are recycled by size class; one whose last queued copy has not run is
 * not handed out again. Without CUDA, alloc fails with an error saying why. */
MS_API void *ms_cuda_host_alloc(size_t nbytes);
MS_API void ms_cuda_host_free(void *p); /* p from ms_cuda_host_alloc; NULL is fine */
/* Marks p (from ms_cuda_host_alloc) as used by the work queued so far on device index's current
 * stream: the block is reused only once that work ran. */
MS_API ms_status ms_cuda_host_record_use(void *p, int index);
/* A copy between page-locked host memory and a device (H2D or D2H), queued on the device's
 * current stream without waiting; the caller marks the host block used (ms_cuda_host_record_use
 * on the block's start) and keeps the bytes alive until then. */
MS_API ms_status ms_cuda_host_memcpy_async(void *dst, int dst_index, const void *src, int src_index, size_t nbytes,
                                           ms_cuda_copy_kind kind);
/* Page-locked bytes in live blocks and in the cache (size classes). */
MS_API ms_status ms_cuda_host_stats(int64_t *live, int64_t *cached);

#endif
