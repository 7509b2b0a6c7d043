/* tensor_device.c: which device a tensor lives on: device names and the same-device rule every
 * multi-tensor op checks. Moving between devices is native/device.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moonshard/cuda.h"
#include "moonshard/tensor_core.h"

const char *ms_device_str(ms_device d, char *buf, size_t len) {
  if (d.type == MS_CPU) snprintf(buf, len, "cpu");
  else if (d.type == MS_META) snprintf(buf, len, "meta");
  else snprintf(buf, len, "cuda:%d", d.index);
  return buf;
}

bool ms_device_parse(const char *s, ms_device *out) {
  if (strcmp(s, "cpu") == 0) return *out = (ms_device){MS_CPU, 0}, true;
  if (strcmp(s, "meta") == 0) return *out = (ms_device){MS_META, 0}, true;
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

ms_status ms_meta_no_data(const char *op) {
  return ms_error(MS_ERR_RUNTIME, "%s: meta tensors have no data (built under ms.device('meta') / "
                  "nn.deferred_init?): give them storage first (nn.materialize_module(module), "
                  "module:to_empty{device = \"cpu\"}, or wrap the model in FSDP)", op);
}
