/* device_feed.h: batches moved to a device ahead of the step that reads them (the DataLoader's
 * `device` option). put() queues a batch's host tensors: their copies (and a transform, such as
 * ToTensor + Normalize on raw uint8 images) run on a side stream, so batch k + 1 crosses the bus
 * while step k computes; take() hands the oldest batch out after making the caller's stream wait
 * for its copy on the device, never on the host.
 *
 * Memory reuse is ordered by events, never by host waits: a batch's device tensors come from the
 * caching allocator on the caller's stream (whose freed blocks may still be read by work queued
 * there), so the side stream first waits for an event recorded on the caller's stream, then
 * writes them; the staging copies the transform reads are released only at take(), after the
 * caller's stream waits for the side stream, so a block freed on the caller's stream is never
 * reused while the side stream still reads it. Host blocks are page-locked (pinned first when
 * not) and marked used until their copy ran (ms_cuda_host_record_use).
 *
 * On the CPU the feed is a queue whose transform runs as the same tensor ops at put(): what the
 * tests use to run the device path without a GPU. One feed serves one caller thread. */
#ifndef MOONSHARD_DEVICE_FEED_H
#define MOONSHARD_DEVICE_FEED_H

#include "moonshard/export.h"
#include "moonshard/loader.h"
#include "moonshard/tensor.h"
#include "moonshard/transforms_ops.h"

#define MS_FEED_MAX_DEPTH 16

typedef struct ms_device_feed ms_device_feed;

/* A feed to `device` (a CUDA device, or the CPU) holding at most depth batches (1..16: 2 keeps
 * the batch in use and the next one). NULL with an error when the device cannot be used. */
MS_API ms_device_feed *ms_device_feed_create(ms_device device, int depth);
/* Source `source` (0-based) of every batch goes through specs[0..n) on the device after its
 * copy. Set before the first put. */
MS_API ms_status ms_device_feed_set_transform(ms_device_feed *f, int source, const ms_transform_spec *specs, int n);
/* Queues a batch of n (1..MS_LOADER_MAX_SOURCES) tensors (borrowed), each on the CPU or already
 * on the feed's device. An error when the feed holds depth batches. */
MS_API ms_status ms_device_feed_put(ms_device_feed *f, ms_tensor *const *batch, int n);
/* The oldest batch: out[i] receives a new reference for each of its *n tensors. An error when
 * none is queued. */
MS_API ms_status ms_device_feed_take(ms_device_feed *f, ms_tensor **out, int *n);
/* How many batches are queued (put and not yet taken). */
MS_API int ms_device_feed_queued(const ms_device_feed *f);
/* Drops the batches still queued (ordered after their copies) and frees the feed. NULL is fine. */
MS_API void ms_device_feed_destroy(ms_device_feed *f);

#endif
