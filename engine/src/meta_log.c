/* meta_log.c: the log of initialisers a meta storage keeps (meta_log.h). Recording lives in the
 * tensor core, below the native ops that record (fill_, uniform_, normal_); replaying them is
 * native work (engine/src/native/materialize.c). */
#include <stdlib.h>
#include <string.h>

#include "meta_log.h"

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

static ms_status grow(ms_storage *s) {
  if (!s->meta_log) {
    if (!(s->meta_log = calloc(1, sizeof *s->meta_log)))
      return ms_error(MS_ERR_MEMORY, "meta: out of memory for an initialiser record");
    s->meta_log_free = meta_log_free;
  }
  struct ms_meta_log *log = s->meta_log;
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
  if (grow(s) != MS_OK) return MS_ERR_MEMORY;
  meta_entry *r = &s->meta_log->r[s->meta_log->n++];
  *r = (meta_entry){.kind = kind, .a = a, .b = b, .seed = seed, .offset = offset,
                    .gen_dtype = t->dtype, .dtype = t->dtype, .ndim = t->ndim, .elem_offset = t->offset};
  memcpy(r->shape, t->shape, sizeof r->shape);
  memcpy(r->strides, t->strides, sizeof r->strides);
  return MS_OK;
}

ms_status meta_log_copy(ms_tensor *dst, const ms_tensor *src) {
  const struct ms_meta_log *from = src->storage->meta_log;
  if (!from || !covers_storage(src)) return MS_OK;
  for (int i = 0; i < from->n; i++) {
    if (grow(dst->storage) != MS_OK) return MS_ERR_MEMORY;
    meta_entry *r = &dst->storage->meta_log->r[dst->storage->meta_log->n++];
    *r = from->r[i]; /* the same elements: both are contiguous of one shape */
    r->dtype = dst->dtype;
  }
  return MS_OK;
}
