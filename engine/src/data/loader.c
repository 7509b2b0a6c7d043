/* loader.c: the DataLoader's native engine (moonshard/loader.h): worker threads that gather
 * rows of source tensors into batches and transform them, ahead of the caller, into a bounded
 * ring that hands batches out strictly in order.
 *
 * Ordering: workers claim batch numbers from one counter and write batch k into ring slot
 * k % capacity. A worker may claim k only while k < next_take + capacity, so the slot it will
 * write is free; the consumer waits on slot next_take % capacity. Whatever order the workers
 * finish in, batches leave in order, and they are the same for any number of workers because
 * making batch k depends on k alone. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moonshard/cuda.h"
#include "moonshard/loader.h"
#include "moonshard/pinned.h"
#include "native/native.h"

typedef struct loader_slot {
  bool ready;
  bool failed;       /* making the batch failed: message says why and out holds nothing */
  char message[512];
  ms_tensor *out[MS_LOADER_MAX_SOURCES];
} loader_slot;

typedef struct loader_source {
  ms_tensor *tensor; /* contiguous; owned reference (NULL when rows is used) */
  ms_idx_rows *rows; /* or rows read from a file per batch; owned reference */
  size_t row_bytes;  /* bytes of one row (one index of dim 0) */
  ms_loader_transform_fn transform;
  void *ctx;
  void (*free_ctx)(void *ctx);
} loader_source;

struct ms_loader {
  int nsources;
  loader_source sources[MS_LOADER_MAX_SOURCES];
  int64_t *indices, *offsets, nbatches;
  /* workers and the ring */
  int num_workers, started;
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t can_claim; /* a slot was freed, or stop */
  pthread_cond_t ready;     /* a batch was made */
  int64_t next_claim, next_take;
  int64_t capacity;
  loader_slot *slots;
  bool stop;
  bool pin; /* pin_memory with a GPU present: batches end in page-locked blocks (pinned.c) */
};

/* ---- making one batch (any thread) --------------------------------------------------------- */

/* The rows of batch k of source s, copied into a new contiguous tensor. Indices were checked
 * at creation, so this cannot go out of bounds. */
static ms_tensor *gather_rows(const ms_loader *l, const loader_source *s, int64_t k) {
  const ms_tensor *t = s->tensor;
  int64_t first = l->offsets[k], count = l->offsets[k + 1] - first;
  if (s->rows) return ms_idx_rows_gather(s->rows, l->indices + first, count);
  int64_t shape[MS_MAX_DIMS];
  memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  shape[0] = count;
  ms_tensor *out = ms_tensor_new_empty(t->ndim, shape, t->dtype);
  if (!out) return NULL;
  const char *src = ms_tensor_data(t);
  char *dst = ms_tensor_data(out);
  for (int64_t i = 0; i < count; i++)
    memcpy(dst + (size_t)i * s->row_bytes, src + (size_t)l->indices[first + i] * s->row_bytes,
           s->row_bytes);
  return out;
}

static ms_tensor *make_one(const ms_loader *l, const loader_source *s, int64_t k) {
  ms_tensor *rows = gather_rows(l, s, k);
  ms_tensor *out = rows;
  if (rows && s->transform) {
    out = s->transform(s->ctx, rows);
    ms_tensor_release(rows);
  }
  if (!out || !l->pin) return out;
  ms_tensor *pinned = ms_tensor_pin_memory(out); /* a recycled block: no cudaHostAlloc per batch */
  ms_tensor_release(out);
  return pinned;
}

/* Fills slot with batch k, or with the error that stopped it (then no tensors are kept). */
static void make_batch(const ms_loader *l, int64_t k, loader_slot *slot) {
  /* Batches are data, never part of a graph: fresh tensors of gathered rows, which the
   * transforms (transforms.c) change with native ops. */
  slot->failed = false;
  for (int i = 0; i < l->nsources; i++) {
    slot->out[i] = make_one(l, &l->sources[i], k);
    if (slot->out[i]) continue;
    const char *msg = ms_error_last(); /* this thread's: ms_error is thread-local */
    snprintf(slot->message, sizeof slot->message, "%s", *msg ? msg : "making the batch failed");
    slot->failed = true;
    for (int j = 0; j < i; j++) ms_tensor_release(slot->out[j]);
    break;
  }
}

/* ---- workers ------------------------------------------------------------------------------- */

static void *worker_main(void *arg) {
  ms_loader *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->stop && l->next_claim < l->nbatches && l->next_claim >= l->next_take + l->capacity)
      pthread_cond_wait(&l->can_claim, &l->mu);
    if (l->stop || l->next_claim >= l->nbatches) break;
    int64_t k = l->next_claim++;
    pthread_mutex_unlock(&l->mu);
    loader_slot made;
    make_batch(l, k, &made);
    pthread_mutex_lock(&l->mu);
    made.ready = true;
    l->slots[k % l->capacity] = made;
    pthread_cond_broadcast(&l->ready);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

static ms_status start_workers(ms_loader *l) {
  l->threads = calloc((size_t)l->num_workers, sizeof *l->threads);
  if (!l->threads) return ms_error(MS_ERR_MEMORY, "DataLoader: out of memory for the workers");
  for (; l->started < l->num_workers; l->started++)
    if (pthread_create(&l->threads[l->started], NULL, worker_main, l) != 0)
      return ms_error(MS_ERR_RUNTIME, "DataLoader: could not start worker thread %d of %d",
                      l->started + 1, l->num_workers);
  return MS_OK;
}

/* ---- creation ------------------------------------------------------------------------------ */

static void free_contexts(const ms_loader_source *sources, int n) {
  for (int i = 0; i < n; i++)
    if (sources[i].free_ctx) sources[i].free_ctx(sources[i].ctx);
}

static int64_t source_rows(const ms_loader_source *s) {
  return s->tensor ? s->tensor->shape[0] : ms_idx_rows_info(s->rows)->shape[0];
}

static ms_status check_sources(const ms_loader_source *sources, int n) {
  if (n < 1 || n > MS_LOADER_MAX_SOURCES)
    return ms_error(MS_ERR_ARG, "DataLoader: expected 1 to %d source tensors, got %d",
                    MS_LOADER_MAX_SOURCES, n);
  for (int i = 0; i < n; i++) {
    const ms_tensor *t = sources[i].tensor;
    if (!t == !sources[i].rows)
      return ms_error(MS_ERR_ARG, "DataLoader: source %d must be either a tensor or the rows of an IDX "
                      "file, got %s", i + 1, t ? "both" : "neither");
    if (t && t->ndim < 1)
      return ms_error(MS_ERR_ARG, "DataLoader: source %d must be a tensor of at least 1 dim", i + 1);
    if (source_rows(&sources[i]) != source_rows(&sources[0]))
      return ms_error(MS_ERR_ARG, "DataLoader: source %d has %lld rows, source 1 has %lld",
                      i + 1, (long long)source_rows(&sources[i]), (long long)source_rows(&sources[0]));
    ms_status st = t ? ms_tensor_check_data("DataLoader", t) : MS_OK;
    if (st != MS_OK) return st;
  }
  return MS_OK;
}

static ms_status check_batches(const int64_t *indices, const int64_t *offsets, int64_t nbatches,
                               int64_t rows) {
  if (nbatches < 0 || offsets[0] != 0)
    return ms_error(MS_ERR_ARG, "DataLoader: malformed batch offsets");
  for (int64_t k = 0; k < nbatches; k++) {
    if (offsets[k + 1] < offsets[k])
      return ms_error(MS_ERR_ARG, "DataLoader: malformed batch offsets at batch %lld", (long long)k);
    for (int64_t j = offsets[k]; j < offsets[k + 1]; j++)
      if (indices[j] < 0 || indices[j] >= rows)
        return ms_error(MS_ERR_ARG, "DataLoader: index %lld is out of range for a dataset of %lld "
                        "rows (0-based)", (long long)indices[j], (long long)rows);
  }
  return MS_OK;
}

/* Takes the sources over (contiguous copies where needed) and copies the batch layout. */
static ms_status fill_loader(ms_loader *l, const ms_loader_source *sources, int n,
                             const int64_t *indices, const int64_t *offsets) {
  for (int i = 0; i < n; i++) {
    loader_source *s = &l->sources[i];
    s->transform = sources[i].transform, s->ctx = sources[i].ctx, s->free_ctx = sources[i].free_ctx;
    l->nsources = i + 1; /* from here on destroy frees this context */
    if (sources[i].rows) {
      ms_idx_rows_retain(s->rows = sources[i].rows);
      continue;
    }
    s->tensor = native_contiguous(sources[i].tensor); /* raw rows are read: no graph */
    if (!s->tensor) return MS_ERR_MEMORY;
    int64_t rows = s->tensor->shape[0];
    s->row_bytes = rows ? (size_t)(ms_tensor_numel(s->tensor) / rows) * ms_dtype_size(s->tensor->dtype) : 0;
  }
  size_t nidx = (size_t)offsets[l->nbatches];
  l->indices = malloc((nidx ? nidx : 1) * sizeof *l->indices);
  l->offsets = malloc((size_t)(l->nbatches + 1) * sizeof *l->offsets);
  l->slots = calloc((size_t)l->capacity, sizeof *l->slots);
  if (!l->indices || !l->offsets || !l->slots)
    return ms_error(MS_ERR_MEMORY, "DataLoader: out of memory for the batch lists");
  memcpy(l->indices, indices, nidx * sizeof *l->indices);
  memcpy(l->offsets, offsets, (size_t)(l->nbatches + 1) * sizeof *l->offsets);
  return MS_OK;
}

ms_loader *ms_loader_create(const ms_loader_source *sources, int nsources, const int64_t *indices,
                            const int64_t *offsets, int64_t nbatches, ms_loader_config cfg) {
  ms_status st = check_sources(sources, nsources);
  if (st == MS_OK) st = check_batches(indices, offsets, nbatches, source_rows(&sources[0]));
  if (st == MS_OK && (cfg.num_workers < 0 || cfg.prefetch_factor < 1))
    st = ms_error(MS_ERR_ARG, "DataLoader: num_workers must be >= 0 and prefetch_factor >= 1, "
                  "got %d and %d", cfg.num_workers, cfg.prefetch_factor);
  ms_loader *l = st == MS_OK ? calloc(1, sizeof *l) : NULL;
  if (!l) {
    if (st == MS_OK) ms_error(MS_ERR_MEMORY, "DataLoader: out of memory");
    free_contexts(sources, nsources);
    return NULL;
  }
  l->nbatches = nbatches;
  l->num_workers = cfg.num_workers;
  l->pin = cfg.pin_memory && ms_cuda_is_available(); /* without a GPU: a no-op, as PyTorch */
  l->capacity = cfg.num_workers > 0 ? (int64_t)cfg.num_workers * cfg.prefetch_factor : 1;
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->can_claim, NULL);
  pthread_cond_init(&l->ready, NULL);
  st = fill_loader(l, sources, nsources, indices, offsets);
  if (st == MS_OK && l->num_workers > 0) st = start_workers(l);
  if (st != MS_OK) {
    free_contexts(sources + l->nsources, nsources - l->nsources); /* not yet taken over */
    ms_loader_destroy(l);
    return NULL;
  }
  return l;
}

/* ---- consuming ----------------------------------------------------------------------------- */

int64_t ms_loader_num_batches(const ms_loader *l) { return l->nbatches; }
int ms_loader_num_sources(const ms_loader *l) { return l->nsources; }
bool ms_loader_exhausted(const ms_loader *l) { return l->next_take >= l->nbatches; }

/* Waits for batch next_take and moves it out of the ring, freeing its slot for a worker. */
static void take_from_ring(ms_loader *l, loader_slot *got) {
  pthread_mutex_lock(&l->mu);
  loader_slot *slot = &l->slots[l->next_take % l->capacity];
  while (!slot->ready) pthread_cond_wait(&l->ready, &l->mu);
  *got = *slot;
  memset(slot, 0, sizeof *slot);
  l->next_take++;
  pthread_cond_broadcast(&l->can_claim);
  pthread_mutex_unlock(&l->mu);
}

ms_status ms_loader_next(ms_loader *l, ms_tensor **out, int64_t *batch) {
  if (batch) *batch = l->next_take;
  if (ms_loader_exhausted(l))
    return ms_error(MS_ERR_ARG, "DataLoader: all %lld batches were handed out", (long long)l->nbatches);
  loader_slot got;
  if (l->num_workers > 0) {
    take_from_ring(l, &got);
  } else {
    make_batch(l, l->next_take, &got);
    l->next_take++;
  }
  if (got.failed) return ms_error(MS_ERR_RUNTIME, "%s", got.message);
  memcpy(out, got.out, sizeof(ms_tensor *) * (size_t)l->nsources);
  return MS_OK;
}

/* ---- teardown ------------------------------------------------------------------------------ */

static void stop_workers(ms_loader *l) {
  pthread_mutex_lock(&l->mu);
  l->stop = true;
  pthread_cond_broadcast(&l->can_claim);
  pthread_mutex_unlock(&l->mu);
  for (int i = 0; i < l->started; i++) pthread_join(l->threads[i], NULL);
  free(l->threads);
}

void ms_loader_destroy(ms_loader *l) {
  if (!l) return;
  stop_workers(l);
  for (int64_t i = 0; l->slots && i < l->capacity; i++) {
    loader_slot *slot = &l->slots[i];
    if (!slot->ready) continue;
    if (!slot->failed)
      for (int s = 0; s < l->nsources; s++) ms_tensor_release(slot->out[s]);
  }
  for (int i = 0; i < l->nsources; i++) {
    ms_tensor_release(l->sources[i].tensor);
    ms_idx_rows_release(l->sources[i].rows);
    if (l->sources[i].free_ctx) l->sources[i].free_ctx(l->sources[i].ctx);
  }
  free(l->slots), free(l->indices), free(l->offsets);
  pthread_cond_destroy(&l->ready), pthread_cond_destroy(&l->can_claim);
  pthread_mutex_destroy(&l->mu);
  free(l);
}
