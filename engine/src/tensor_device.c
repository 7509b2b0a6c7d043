/* tensor_device.c: which device a tensor lives on and moving it: device names, the same-device
 * rule every multi-tensor op checks, and copies between the CPU and CUDA devices (recorded for
 * autograd, so a gradient goes back to the device its input came from). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad_util.h"
#include "cuda/cuda_ops.h"
#include "moonshard/cuda.h"
#include "moonshard/tensor.h"

const char *ms_device_str(ms_device d, char *buf, size_t len) {
  if (d.type == MS_CPU) snprintf(buf, len, "cpu");
  else snprintf(buf, len, "cuda:%d", d.index);
  return buf;
}

bool ms_device_parse(const char *s, ms_device *out) {
  if (strcmp(s, "cpu") == 0) return *out = (ms_device){MS_CPU, 0}, true;
  if (strcmp(s, "cuda") == 0) return *out = (ms_device){MS_CUDA, ms_cuda_current_device()}, true;
  if (strncmp(s, "cuda:", 5) != 0 || s[5] < '0' || s[5] > '9') return false;
  char *end;
  long i = strtol(s + 5, &end, 10);
  if (*end || i >= MS_CUDA_MAX_DEVICES) return false;
  return *out = (ms_device){MS_CUDA, (int)i}, true;
}

ms_status ms_check_same_device(const char *op, int n, ms_tensor *const *ts) {
  const ms_tensor *first = NULL;
  for (int i = 0; i < n; i++) {
    if (!ts[i]) continue;
    if (!first) first = ts[i];
    else if (!ms_device_equal(ms_tensor_device(first), ms_tensor_device(ts[i]))) {
      char b1[MS_DEVICE_STR_LEN], b2[MS_DEVICE_STR_LEN];
      return ms_error(MS_ERR_ARG, "%s: Expected all tensors to be on the same device, but found at "
                      "least two devices, %s and %s", op,
                      ms_device_str(ms_tensor_device(first), b1, sizeof b1),
                      ms_device_str(ms_tensor_device(ts[i]), b2, sizeof b2));
    }
  }
  return MS_OK;
}

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

ms_status ms_tensor_copy_across(ms_tensor *dst, ms_tensor *src) {
  /* converted and made contiguous where src is, so one plain copy crosses */
  ms_tensor *c = ms_tensor_new_empty_on(ms_tensor_device(src), dst->ndim, dst->shape, dst->dtype);
  ms_status st = c ? ms_tensor_copy_(c, src) : MS_ERR_RUNTIME;
  if (st == MS_OK && ms_tensor_is_contiguous(dst)) {
    st = copy_bytes(dst, c);
  } else if (st == MS_OK) { /* a strided destination: land contiguous, then scatter there */
    ms_tensor *landing = ms_tensor_new_empty_on(ms_tensor_device(dst), dst->ndim, dst->shape, dst->dtype);
    st = landing ? copy_bytes(landing, c) : MS_ERR_RUNTIME;
    if (st == MS_OK) st = ms_tensor_copy_(dst, landing);
    ms_tensor_release(landing);
  }
  ms_tensor_release(c);
  return st;
}

/* The plain move: a contiguous copy of t on `device`. */
static ms_tensor *move(ms_tensor *t, ms_device device) {
  if (device.type == MS_CUDA && !ms_cuda_is_available())
    return ms_error(MS_ERR_RUNTIME, "to: cannot move a tensor to cuda:%d: CUDA is not available: %s",
                    device.index, ms_cuda_unavailable_reason()), NULL;
  if (device.type == MS_CUDA && ms_cuda_check_device("to", device.index) != MS_OK) return NULL;
  if (ms_tensor_check_data_any("to", t) != MS_OK) return NULL;
  ms_tensor *src = ms_tensor_contiguous(t);
  ms_tensor *out = src ? ms_tensor_new_empty_on(device, t->ndim, t->shape, t->dtype) : NULL;
  if (out && copy_bytes(out, src) != MS_OK) ms_tensor_release(out), out = NULL;
  ms_tensor_release(src);
  return out;
}

/* The input's device is kept in ints[0..1]: its gradient is moved back there. */
static ms_status to_copy_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  ms_device back = {(ms_device_type)n->ints[0], (int)n->ints[1]};
  *gi = ms_tensor_to_device(g[0], back);
  return *gi ? MS_OK : MS_ERR_RUNTIME;
}

ms_tensor *ms_tensor_to_device(ms_tensor *t, ms_device device) {
  if (ms_device_equal(ms_tensor_device(t), device)) return ms_tensor_retain(t), t;
  bool prev = ms_grad_set_enabled(false);
  ms_tensor *out = move(t, device);
  ms_grad_set_enabled(prev);
  if (!out || !ms_autograd_wants(1, &t)) return out;
  ms_node *n = ms_node_new("ToCopyBackward0", to_copy_backward, 1, &t);
  if (n) n->ints[0] = ms_tensor_device(t).type, n->ints[1] = ms_tensor_device(t).index;
  return ms_grad_finish(n, out);
}
