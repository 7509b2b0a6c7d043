/* storage.c: refcounted byte blocks whose data can be released and materialized again. */
#include <stdlib.h>

#include "moonshard/cuda.h"
#include "moonshard/storage.h"

/* The one place bytes of a storage are obtained and given back, by device. */
static void *device_alloc(ms_device d, size_t nbytes, ms_mem_category category) {
  return d.type == MS_CUDA ? ms_cuda_alloc(d.index, nbytes, category) : ms_mem_alloc(nbytes, category);
}

static void device_free(ms_device d, void *p, size_t nbytes, ms_mem_category category) {
  if (d.type == MS_CUDA) ms_cuda_free(d.index, p, nbytes, category);
  else ms_mem_free(p, nbytes, category);
}

static ms_storage *storage_alloc_object(void) {
  ms_storage *s = calloc(1, sizeof *s);
  if (!s) ms_error(MS_ERR_MEMORY, "out of memory: could not allocate a storage object");
  else atomic_init(&s->refcount, 1);
  return s;
}

ms_storage *ms_storage_new_on(ms_device device, size_t nbytes, ms_mem_category category) {
  ms_storage *s = storage_alloc_object();
  if (!s) return NULL;
  s->device = device;
  s->category = category;
  s->nbytes = nbytes;
  if (device.type == MS_META) return s; /* shapes only: a meta storage never holds bytes */
  s->data = device_alloc(device, nbytes, category);
  if (!s->data) return free(s), NULL;
  return s;
}

ms_storage *ms_storage_new(size_t nbytes, ms_mem_category category) {
  return ms_storage_new_on((ms_device){MS_CPU, 0}, nbytes, category);
}

ms_storage *ms_storage_new_external(void *data, size_t nbytes, ms_storage_deleter deleter, void *ctx) {
  ms_storage *s = storage_alloc_object();
  if (!s) return NULL;
  s->nbytes = nbytes;
  s->data = data;
  s->deleter = deleter;
  s->deleter_ctx = ctx;
  s->external = true;
  return s;
}

void ms_storage_retain(ms_storage *s) { atomic_fetch_add(&s->refcount, 1); }

static void storage_free_data(ms_storage *s) {
  if (!s->data) return;
  if (s->external) {
    if (s->deleter) s->deleter(s->data, s->deleter_ctx);
  } else {
    device_free(s->device, s->data, s->nbytes, s->category);
  }
  s->data = NULL;
}

void ms_storage_release(ms_storage *s) {
  if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
  storage_free_data(s);
  if (s->meta_log) s->meta_log_free(s->meta_log);
  free(s);
}

void ms_storage_release_data(ms_storage *s) {
  storage_free_data(s);
  /* Materialized again, the bytes are the engine's own, whoever owned them before. */
  s->external = false;
}

ms_status ms_storage_materialize(ms_storage *s) {
  if (s->data) return MS_OK;
  if (s->device.type == MS_META) /* an internal misuse: ms_meta_materialize gives it a device first */
    return ms_error(MS_ERR_RUNTIME, "storage: a meta storage holds no bytes (give it a device first)");
  s->data = device_alloc(s->device, s->nbytes, s->category);
  return s->data ? MS_OK : MS_ERR_MEMORY;
}
