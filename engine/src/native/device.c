/* native/device.c: copies between the CPU and CUDA devices: a tensor moved to a device, and the
 * cross-device half of copy_. The public to() (recorded, so a gradient goes back to the device
 * its input came from) is autograd/grad_view.c's. */
#include "moonshard/cuda.h"
#include "native/native.h"

static ms_cuda_copy_kind copy_kind(ms_device dst, ms_device src) {
  if (dst.type == MS_CUDA && src.type == MS_CUDA) return MS_CUDA_D2D;
  return dst.type == MS_CUDA ? MS_CUDA_H2D : MS_CUDA_D2H;
}

/* Contiguous src -> contiguous dst of the same dtype and size, between two devices. */
static ms_status copy_bytes(ms_tensor *dst, ms_tensor *src) {
  size_t nbytes = (size_t)ms_tensor_numel(src) * ms_dtype_size(src->dtype);
  ms_device dd = ms_tensor_device(dst), sd = ms_tensor_device(src);
  return ms_cuda_memcpy(ms_tensor_data(dst), dd.index, ms_tensor_data(src), sd.index, nbytes,
                        copy_kind(dd, sd));
}

ms_status native_copy_across(ms_tensor *dst, ms_tensor *src) {
  /* converted and made contiguous where src is, so one plain copy crosses */
  ms_tensor *c = ms_tensor_new_empty_on(ms_tensor_device(src), dst->ndim, dst->shape, dst->dtype);
  ms_status st = c ? native_copy_(c, src) : MS_ERR_RUNTIME;
  if (st == MS_OK && ms_tensor_is_contiguous(dst)) {
    st = copy_bytes(dst, c);
  } else if (st == MS_OK) { /* a strided destination: land contiguous, then scatter there */
    ms_tensor *landing = ms_tensor_new_empty_on(ms_tensor_device(dst), dst->ndim, dst->shape, dst->dtype);
    st = landing ? copy_bytes(landing, c) : MS_ERR_RUNTIME;
    if (st == MS_OK) st = native_copy_(dst, landing);
    ms_tensor_release(landing);
  }
  ms_tensor_release(c);
  return st;
}

/* The plain move: a contiguous copy of t on `device`; to meta, the shape only (as PyTorch's
 * .to("meta"); the records of a meta source stay with it: ms_meta_materialize). */
static ms_tensor *move(ms_tensor *t, ms_device device) {
  if (device.type == MS_META) return ms_tensor_new_empty_on(device, t->ndim, t->shape, t->dtype);
  if (device.type == MS_CUDA && !ms_cuda_is_available())
    return ms_error(MS_ERR_RUNTIME, "to: cannot move a tensor to cuda:%d: CUDA is not available: %s",
                    device.index, ms_cuda_unavailable_reason()), NULL;
  if (device.type == MS_CUDA && ms_cuda_check_device("to", device.index) != MS_OK) return NULL;
  if (ms_tensor_check_data_any("to", t) != MS_OK) return NULL;
  ms_tensor *src = native_contiguous(t);
  ms_tensor *out = src ? ms_tensor_new_empty_on(device, t->ndim, t->shape, t->dtype) : NULL;
  if (out && copy_bytes(out, src) != MS_OK) ms_tensor_release(out), out = NULL;
  ms_tensor_release(src);
  return out;
}

ms_tensor *native_to_device(ms_tensor *t, ms_device device) {
  if (ms_device_equal(ms_tensor_device(t), device)) return ms_tensor_retain(t), t;
  return move(t, device);
}
