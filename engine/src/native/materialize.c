/* native/materialize.c: materialising a meta storage (moonshard/meta.h): real bytes on a device, then
 * the recorded initialisers (meta_log.h) replayed in order, each on a view with the geometry it
 * ran on and, for draws, the generator blocks it reserved then. */
#include "meta_log.h"
#include "moonshard/meta.h"
#include "native/native.h"
#include "random_state.h"

int ms_meta_record_count(const ms_storage *s) {
  return s->device.type == MS_META && s->meta_log ? s->meta_log->n : 0;
}

static ms_status write(ms_tensor *v, const meta_entry *r) {
  return r->kind == META_FILL ? native_fill_(v, r->a) : random_replay(v, r->kind, r->a, r->b, r->seed, r->offset);
}

/* A record carried through a dtype conversion writes in its first dtype, then converts: the
 * values of "initialise, then convert" (gpt.GPT(c):double()). */
static ms_status replay(ms_storage *s, const meta_entry *r) {
  ms_tensor *v = ms_tensor_new_view(s, r->dtype, r->ndim, r->shape, r->strides, r->elem_offset);
  if (!v) return MS_ERR_RUNTIME;
  ms_tensor *tmp = r->gen_dtype == r->dtype ? NULL : ms_tensor_new_empty_on(s->device, r->ndim, r->shape, r->gen_dtype);
  ms_status st = r->gen_dtype != r->dtype && !tmp ? MS_ERR_MEMORY : write(tmp ? tmp : v, r);
  if (st == MS_OK && tmp) st = native_copy_(v, tmp);
  ms_tensor_release(tmp);
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
