/* device_feed.c: batches copied to a device on a side stream ahead of the step that reads them
 * (moonshard/device_feed.h). A ring of depth slots; put() fills the slot after the newest, take()
 * empties the oldest. Every ordering between the caller's stream and the side stream is an event
 * waited for on the device, so nothing here makes the host wait for the GPU. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "moonshard/cuda.h"
#include "moonshard/device_feed.h"
#include "moonshard/pinned.h"
#include "native/native.h"

typedef struct feed_slot {
  int n;
  ms_tensor *out[MS_LOADER_MAX_SOURCES];    /* what take() hands out */
  ms_tensor *staged[MS_LOADER_MAX_SOURCES]; /* the raw copy a transform reads (NULL: none); kept
                                               until the caller's stream waited for the side's */
  ms_cuda_event *copied; /* CUDA: recorded on the side stream after the batch's copies */
} feed_slot;

typedef struct feed_transform {
  int n;
  ms_transform_spec specs[MS_TRANSFORM_MAX_SPECS];
} feed_transform;

struct ms_device_feed {
  ms_device device;
  int depth, head, count;
  ms_cuda_stream *side;       /* the device's copy stream (shared by feeds, never destroyed) */
  ms_cuda_event *caller_mark; /* recorded on the caller's stream at each put */
  feed_transform transforms[MS_LOADER_MAX_SOURCES];
  feed_slot slots[MS_FEED_MAX_DEPTH];
};

/* ---- the side streams: one per device for the process, as PyTorch's stream pool -------------
 * Creating a stream per loop would be cheap, but destroying one waits for its work (a host sync
 * at each epoch's end); a stream that lives as long as the process never has to. */

static pthread_mutex_t side_lock = PTHREAD_MUTEX_INITIALIZER;
static ms_cuda_stream *side_streams[MS_CUDA_MAX_DEVICES];

static ms_cuda_stream *side_stream(int index) {
  pthread_mutex_lock(&side_lock);
  if (!side_streams[index]) side_streams[index] = ms_cuda_stream_create(index);
  ms_cuda_stream *s = side_streams[index];
  pthread_mutex_unlock(&side_lock);
  return s;
}

/* An event of device index (events belong to the device current at their creation). */
static ms_cuda_event *event_on(int index) {
  int prev = ms_cuda_current_device();
  if (ms_cuda_set_device(index) != MS_OK) return NULL;
  ms_cuda_event *e = ms_cuda_event_create(false);
  if (prev != index) ms_cuda_set_device(prev); /* a device that was current stays usable */
  return e;
}

/* ---- creation ------------------------------------------------------------------------------ */

ms_device_feed *ms_device_feed_create(ms_device device, int depth) {
  if (depth < 1 || depth > MS_FEED_MAX_DEPTH)
    return ms_error(MS_ERR_ARG, "DataLoader: device_prefetch must be in 1..%d, got %d", MS_FEED_MAX_DEPTH,
                    depth), NULL;
  if (device.type != MS_CPU && device.type != MS_CUDA)
    return ms_error(MS_ERR_ARG, "DataLoader: device must be the CPU or a CUDA device"), NULL;
  if (device.type == MS_CUDA && ms_cuda_check_device("DataLoader", device.index) != MS_OK) return NULL;
  ms_device_feed *f = calloc(1, sizeof *f);
  if (!f) return ms_error(MS_ERR_MEMORY, "DataLoader: out of memory for the device feed"), NULL;
  f->device = device, f->depth = depth;
  if (device.type == MS_CPU) return f;
  bool ok = (f->side = side_stream(device.index)) && (f->caller_mark = event_on(device.index));
  for (int i = 0; ok && i < depth; i++) ok = (f->slots[i].copied = event_on(device.index)) != NULL;
  if (!ok) ms_device_feed_destroy(f), f = NULL;
  return f;
}

ms_status ms_device_feed_set_transform(ms_device_feed *f, int source, const ms_transform_spec *specs, int n) {
  if (source < 0 || source >= MS_LOADER_MAX_SOURCES)
    return ms_error(MS_ERR_ARG, "DataLoader: a device transform for source %d of at most %d", source + 1,
                    MS_LOADER_MAX_SOURCES);
  ms_status st = ms_transform_check_specs(specs, n);
  if (st != MS_OK) return st;
  f->transforms[source].n = n;
  memcpy(f->transforms[source].specs, specs, sizeof *specs * (size_t)n);
  return MS_OK;
}

int ms_device_feed_queued(const ms_device_feed *f) { return f->count; }

/* ---- put ------------------------------------------------------------------------------------- */

/* Releases what a slot holds; the caller made its stream wait for the slot's copies first. */
static void clear_slot(feed_slot *slot) {
  for (int i = 0; i < slot->n; i++) {
    ms_tensor_release(slot->out[i]);
    ms_tensor_release(slot->staged[i]);
    slot->out[i] = slot->staged[i] = NULL;
  }
  slot->n = 0;
}

/* t's bytes contiguous in page-locked memory, so the copy can run without the host (a new
 * reference; t itself when it already is). */
static ms_tensor *pinned_contiguous(ms_tensor *t) {
  ms_tensor *c = native_contiguous(t);
  if (!c || ms_tensor_is_pinned(c)) return c;
  ms_tensor *p = ms_tensor_pin_memory(c);
  ms_tensor_release(c);
  return p;
}

/* Source i's device tensors, allocated on the caller's stream (see the header); *host receives
 * the pinned tensor to copy from, or NULL when t is already on the device. */
static ms_status stage_source(ms_device_feed *f, feed_slot *slot, int i, ms_tensor *t, ms_tensor **host) {
  const feed_transform *tr = &f->transforms[i];
  *host = NULL;
  if (ms_tensor_device(t).type != MS_CPU) { /* already there: only the transform is left */
    slot->out[i] = tr->n ? ms_transform_apply(t, tr->specs, tr->n) : (ms_tensor_retain(t), t);
    return slot->out[i] ? MS_OK : MS_ERR_ARG;
  }
  if (!(*host = pinned_contiguous(t))) return MS_ERR_MEMORY;
  ms_tensor *dev = ms_tensor_new_empty_on(f->device, t->ndim, t->shape, t->dtype);
  if (!dev) return MS_ERR_MEMORY;
  if (!tr->n) return slot->out[i] = dev, MS_OK;
  slot->staged[i] = dev;
  slot->out[i] = ms_transform_new_output(dev, tr->specs, tr->n);
  return slot->out[i] ? MS_OK : MS_ERR_ARG;
}

/* The copies and transforms of a staged batch, queued on the side stream (made current for the
 * engine's ops meanwhile), then the slot's event. */
static ms_status queue_on_side(ms_device_feed *f, feed_slot *slot, ms_tensor *const *host) {
  int dev = f->device.index;
  ms_cuda_stream *prev = ms_cuda_current_stream(dev);
  ms_status st = ms_cuda_set_stream(dev, f->side);
  for (int i = 0; st == MS_OK && i < slot->n; i++) {
    if (!host[i]) continue;
    ms_tensor *dst = slot->staged[i] ? slot->staged[i] : slot->out[i];
    size_t nbytes = (size_t)ms_tensor_numel(dst) * ms_dtype_size(dst->dtype);
    st = ms_cuda_host_memcpy_async(ms_tensor_data(dst), dev, ms_tensor_data(host[i]), 0, nbytes, MS_CUDA_H2D);
    if (st == MS_OK) st = ms_cuda_host_record_use(host[i]->storage->data, dev); /* the block's start */
    const feed_transform *tr = &f->transforms[i];
    if (st == MS_OK && slot->staged[i]) st = ms_transform_apply_into(slot->out[i], slot->staged[i], tr->specs, tr->n);
  }
  ms_status rec = ms_cuda_event_record(slot->copied, f->side); /* also on failure: see put */
  ms_cuda_set_stream(dev, prev);
  return st != MS_OK ? st : rec;
}

static ms_status put_cuda(ms_device_feed *f, feed_slot *slot, ms_tensor *const *batch) {
  ms_tensor *host[MS_LOADER_MAX_SOURCES] = {0};
  ms_status st = MS_OK;
  for (int i = 0; st == MS_OK && i < slot->n; i++) st = stage_source(f, slot, i, batch[i], &host[i]);
  /* the blocks just taken may still be read by work queued on the caller's stream */
  if (st == MS_OK) st = ms_cuda_event_record(f->caller_mark, NULL);
  if (st == MS_OK) st = ms_cuda_stream_wait_event(f->side, f->caller_mark);
  if (st == MS_OK) st = queue_on_side(f, slot, host);
  for (int i = 0; i < slot->n; i++) ms_tensor_release(host[i]); /* marked used: never reused early */
  if (st != MS_OK) { /* drop the batch once whatever the side stream queued has run */
    ms_cuda_stream_wait_event(NULL, slot->copied);
    clear_slot(slot);
  }
  return st;
}

static ms_status put_cpu(ms_device_feed *f, feed_slot *slot, ms_tensor *const *batch) {
  for (int i = 0; i < slot->n; i++) {
    const feed_transform *tr = &f->transforms[i];
    slot->out[i] = tr->n ? ms_transform_apply_ops(batch[i], tr->specs, tr->n) : (ms_tensor_retain(batch[i]), batch[i]);
    if (!slot->out[i]) return clear_slot(slot), MS_ERR_ARG;
  }
  return MS_OK;
}

static ms_status check_batch(const ms_device_feed *f, ms_tensor *const *batch, int n) {
  if (f->count == f->depth)
    return ms_error(MS_ERR_ARG, "DataLoader: the device feed holds %d batches already (its depth)", f->depth);
  if (n < 1 || n > MS_LOADER_MAX_SOURCES)
    return ms_error(MS_ERR_ARG, "DataLoader: a batch of 1 to %d tensors moves to the device, got %d",
                    MS_LOADER_MAX_SOURCES, n);
  for (int i = 0; i < n; i++) {
    ms_device d = ms_tensor_device(batch[i]);
    if (d.type != MS_CPU && (d.type != f->device.type || d.index != f->device.index))
      return ms_error(MS_ERR_ARG, "DataLoader: batch value %d is on another device than the loader's "
                      "(cuda:%d, expected the CPU or the loader's device)", i + 1, d.index);
  }
  return MS_OK;
}

ms_status ms_device_feed_put(ms_device_feed *f, ms_tensor *const *batch, int n) {
  ms_status st = check_batch(f, batch, n);
  if (st != MS_OK) return st;
  feed_slot *slot = &f->slots[(f->head + f->count) % f->depth];
  slot->n = n;
  st = f->device.type == MS_CPU ? put_cpu(f, slot, batch) : put_cuda(f, slot, batch);
  if (st == MS_OK) f->count++;
  return st;
}

/* ---- take and teardown --------------------------------------------------------------------- */

ms_status ms_device_feed_take(ms_device_feed *f, ms_tensor **out, int *n) {
  if (f->count == 0) return ms_error(MS_ERR_ARG, "DataLoader: the device feed holds no batch");
  feed_slot *slot = &f->slots[f->head];
  /* the caller's stream reads the batch only after its copies; the staged blocks, freed below
   * onto the caller's stream, are reused only after the side stream's reads */
  if (f->device.type == MS_CUDA) {
    ms_status st = ms_cuda_stream_wait_event(NULL, slot->copied);
    if (st != MS_OK) return st;
  }
  *n = slot->n;
  for (int i = 0; i < slot->n; i++) {
    out[i] = slot->out[i];
    slot->out[i] = NULL;
  }
  clear_slot(slot);
  f->head = (f->head + 1) % f->depth;
  f->count--;
  return MS_OK;
}

void ms_device_feed_destroy(ms_device_feed *f) {
  if (!f) return;
  for (; f->count > 0; f->count--, f->head = (f->head + 1) % f->depth) {
    feed_slot *slot = &f->slots[f->head];
    if (f->device.type == MS_CUDA) ms_cuda_stream_wait_event(NULL, slot->copied);
    clear_slot(slot);
  }
  for (int i = 0; i < MS_FEED_MAX_DEPTH; i++) ms_cuda_event_destroy(f->slots[i].copied);
  ms_cuda_event_destroy(f->caller_mark);
  free(f);
}
