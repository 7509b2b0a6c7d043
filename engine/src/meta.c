/* meta.c: the meta device's recorded initialisers (meta_log.h, moonshard/meta.h). A record keeps
 * what was written (a fill value, or a uniform/normal draw and the Philox blocks it reserved) and
 * where (the view's dtype and geometry over the storage); replaying them in order on real bytes
 * writes what the ordinary run wrote. */
#include <stdlib.h>
#include <string.h>

#include "meta_log.h"
#include "moonshard/meta.h"
#include "native/native.h"
#include "random_state.h"

typedef struct meta_entry {
  meta_kind kind;
  double a, b;            /* fill: a; uniform: low, high; normal: mean, std */
  uint64_t seed, offset;  /* where a draw's blocks start */
  ms_dtype dtype;         /* the view's geometry over the storage */
  int ndim;
  int64_t shape[MS_MAX_DIMS], strides[MS_MAX_DIMS], elem_offset;
} meta_entry;

struct ms_meta_log {
  int n, cap;
  meta_entry *r;
};

void meta_log_free(struct ms_meta_log *log) {
  if (!log) return;
  free(log->r);
  free(log);
}

/* A contiguous view of every byte of its storage: what it writes hides all earlier records. */
static bool covers_storage(const ms_tensor *t) {
  return t->offset == 0 && ms_tensor_is_contiguous(t) &&
         (size_t)ms_tensor_numel(t) * ms_dtype_size(t->dtype) == t->storage->nbytes;
}

static ms_status grow(struct ms_meta_log **logp) {
  if (!*logp && !(*logp = calloc(1, sizeof **logp)))
    return ms_error(MS_ERR_MEMORY, "meta: out of memory for an initialiser record");
  struct ms_meta_log *log = *logp;
  if (log->n < log->cap) return MS_OK;
  int cap = log->cap ? 2 * log->cap : 4;
  meta_entry *r = realloc(log->r, (size_t)cap * sizeof *r);
  if (!r) return ms_error(MS_ERR_MEMORY, "meta: out of memory for %d initialiser records", cap);
  log->r = r, log->cap = cap;
  return MS_OK;
}

ms_status meta_record(ms_tensor *t, meta_kind kind, double a, double b, uint64_t seed, uint64_t offset) {
  ms_storage *s = t->storage;
  if (s->meta_log && covers_storage(t)) s->meta_log->n = 0;
  if (grow(&s->meta_log) != MS_OK) return MS_ERR_MEMORY;
  meta_entry *r = &s->meta_log->r[s->meta_log->n++];
  *r = (meta_entry){.kind = kind, .a = a, .b = b, .seed = seed, .offset = offset,
                     .dtype = t->dtype, .ndim = t->ndim, .elem_offset = t->offset};
  memcpy(r->shape, t->shape, sizeof r->shape);
  memcpy(r->strides, t->strides, sizeof r->strides);
  return MS_OK;
}

int ms_meta_record_count(const ms_storage *s) {
  return s->device.type == MS_META && s->meta_log ? s->meta_log->n : 0;
}

static ms_status replay(ms_storage *s, const meta_entry *r) {
  ms_tensor *v = ms_tensor_new_view(s, r->dtype, r->ndim, r->shape, r->strides, r->elem_offset);
  if (!v) return MS_ERR_RUNTIME;
  ms_status st = r->kind == META_FILL ? native_fill_(v, r->a)
                                      : random_replay(v, r->kind, r->a, r->b, r->seed, r->offset);
  ms_tensor_release(v);
  return st;
}

ms_status ms_meta_materialize(ms_storage *s, ms_device device, bool replay_records) {
  if (s->device.type != MS_META)
    return ms_error(MS_ERR_ARG, "materialize: expected a meta storage, got one on another device");
  if (device.type == MS_META)
    return ms_error(MS_ERR_ARG, "materialize: expected a device with memory (\"cpu\", \"cuda:N\"), got meta");
  s->device = device;
  if (ms_storage_materialize(s) != MS_OK) {
    s->device = (ms_device){MS_META, 0};
    return ms_error(MS_ERR_MEMORY, "materialize: out of memory for %zu bytes", s->nbytes);
  }
  ms_status st = MS_OK;
  for (int i = 0; replay_records && s->meta_log && i < s->meta_log->n && st == MS_OK; i++)
    st = replay(s, &s->meta_log->r[i]);
  meta_log_free(s->meta_log);
  s->meta_log = NULL;
  return st;
}
