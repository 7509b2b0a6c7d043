/* nn_half.c: bfloat16 and float16 inputs to the NN ops. The CPU kernels compute in float32 or
 * float64 only, so an op given a 16-bit float widens its floating arguments to float32, runs,
 * and rounds the result back; the conversions are recorded by autograd, so gradients come back
 * in the 16-bit dtype as PyTorch's do. This is what FSDP's mixed precision computes with. */
#include "nn_internal.h"

static bool is_half(ms_dtype dt) { return dt == MS_BFLOAT16 || dt == MS_FLOAT16; }

bool ms_nn_half_call(int n, ms_tensor *const *ts, ms_dtype *half) {
  for (int i = 0; i < n; i++)
    if (ts[i] && is_half(ts[i]->dtype)) return *half = ts[i]->dtype, true;
  return false;
}

bool ms_nn_half_call_widens(ms_tensor *x, ms_dtype *half) {
  return x && ms_nn_half_call(1, &x, half) && !(*half == MS_BFLOAT16 && ms_tensor_device(x).type == MS_CPU);
}

ms_status ms_nn_widen(int n, ms_tensor *const *ts, ms_tensor **wide) {
  for (int i = 0; i < n; i++) {
    wide[i] = NULL;
    if (!ts[i]) continue;
    wide[i] = is_half(ts[i]->dtype) ? ms_tensor_to_dtype(ts[i], MS_FLOAT32) : (ms_tensor_retain(ts[i]), ts[i]);
    if (!wide[i]) {
      ms_nn_release_all(i, wide);
      return MS_ERR_MEMORY;
    }
  }
  return MS_OK;
}

void ms_nn_release_all(int n, ms_tensor **ts) {
  for (int i = 0; i < n; i++) {
    ms_tensor_release(ts[i]);
    ts[i] = NULL;
  }
}

ms_tensor *ms_nn_narrow_back(ms_tensor *out, ms_dtype dt) {
  if (!out || out->dtype == dt || !ms_dtype_is_floating(out->dtype)) return out;
  ms_tensor *r = ms_tensor_to_dtype(out, dt);
  ms_tensor_release(out);
  return r;
}
