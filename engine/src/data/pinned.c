/* pinned.c: page-locked host tensors (moonshard/pinned.h): storages over the CUDA allocator's
 * recycled host blocks, the DataLoader's pin step and non-blocking copies to a device. */
#include "moonshard/cuda.h"
#include "moonshard/pinned.h"
#include "native/native.h"

/* Storages know their bytes are page-locked by this deleter (an external storage's). */
static void pinned_free(void *data, void *ctx) {
  (void)ctx;
  ms_cuda_host_free(data);
}

ms_storage *ms_storage_new_pinned(size_t nbytes, ms_mem_category category) {
  void *p = ms_cuda_host_alloc(nbytes ? nbytes : 1);
  if (!p) return NULL;
  ms_storage *s = ms_storage_new_external(p, nbytes, pinned_free, NULL);
  if (!s) return ms_cuda_host_free(p), NULL;
  s->category = category;
  return s;
}

bool ms_storage_is_pinned(const ms_storage *s) {
  return s && s->external && s->data && s->deleter == pinned_free;
}

ms_tensor *ms_tensor_pin_memory(ms_tensor *t) {
  if (ms_tensor_device(t).type != MS_CPU)
    return ms_error(MS_ERR_ARG, "pin_memory: only CPU tensors can be pinned, got one on cuda:%d",
                    ms_tensor_device(t).index), NULL;
  if (ms_tensor_is_pinned(t)) return ms_tensor_retain(t), t;
  if (ms_tensor_check_data_any("pin_memory", t) != MS_OK) return NULL;
  int64_t n = ms_tensor_numel(t);
  ms_storage *s = ms_storage_new_pinned((size_t)n * ms_dtype_size(t->dtype), MS_MEM_OTHER);
  if (!s) return NULL;
  int64_t strides[MS_MAX_DIMS], step = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    strides[d] = step;
    step *= t->shape[d] > 0 ? t->shape[d] : 1;
  }
  ms_tensor *out = ms_tensor_new_view(s, t->dtype, t->ndim, t->shape, strides, 0);
  ms_storage_release(s);
  if (out && native_copy_(out, t) != MS_OK) ms_tensor_release(out), out = NULL; /* not recorded */
  return out;
}

ms_tensor *ms_tensor_to_device_opt(ms_tensor *t, ms_device device, bool non_blocking) {
  bool async = non_blocking && device.type == MS_CUDA && ms_tensor_device(t).type == MS_CPU &&
               ms_tensor_is_pinned(t) && ms_tensor_is_contiguous(t) && !t->requires_grad; /* else recorded */
  if (!async) return ms_tensor_to_device(t, device);
  ms_tensor *out = ms_tensor_new_empty_on(device, t->ndim, t->shape, t->dtype);
  if (!out) return NULL;
  size_t nbytes = (size_t)ms_tensor_numel(t) * ms_dtype_size(t->dtype);
  ms_status st = ms_cuda_host_memcpy_async(ms_tensor_data(out), device.index, ms_tensor_data(t), 0, nbytes, MS_CUDA_H2D);
  /* the block, not t's bytes, carries the mark: t may be a view at an offset */
  if (st == MS_OK) st = ms_cuda_host_record_use(t->storage->data, device.index);
  if (st != MS_OK) ms_tensor_release(out), out = NULL;
  return out;
}
