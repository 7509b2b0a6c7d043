/* grad_nn.c: the helpers the public nn ops share (grad_nn.h): 16-bit floats widened to float32
 * and rounded back through recorded conversions, and saved slots that may be empty. */
#include "grad_nn.h"

bool nn_half_call(int n, ms_tensor *const *ts, ms_dtype *half) {
  for (int i = 0; i < n; i++)
    if (ts[i] && ms_dtype_is_half(ts[i]->dtype)) return *half = ts[i]->dtype, true;
  return false;
}

bool nn_half_call_widens(ms_tensor *x, ms_dtype *half) {
  return x && nn_half_call(1, &x, half) && !(*half == MS_BFLOAT16 && ms_tensor_device(x).type == MS_CPU);
}

ms_status nn_widen(int n, ms_tensor *const *ts, ms_tensor **wide) {
  for (int i = 0; i < n; i++) {
    wide[i] = NULL;
    if (!ts[i]) continue;
    wide[i] = ms_dtype_is_half(ts[i]->dtype) ? ms_tensor_to_dtype(ts[i], MS_FLOAT32) : (ms_tensor_retain(ts[i]), ts[i]);
    if (!wide[i]) {
      nn_release_all(i, wide);
      return MS_ERR_MEMORY;
    }
  }
  return MS_OK;
}

ms_tensor *nn_narrow_back(ms_tensor *out, ms_dtype dt) {
  if (!out || out->dtype == dt || !ms_dtype_is_floating(out->dtype)) return out ? (ms_tensor_retain(out), out) : NULL;
  return ms_tensor_to_dtype(out, dt);
}

bool nn_saved(ms_node *n, int i, ms_tensor **out) {
  *out = NULL;
  if (n->saved[i].tensor == NULL && !n->released) return true;
  return (*out = ms_node_saved(n, i)) != NULL;
}

void nn_save(ms_node *n, ms_tensor *t) {
  if (t) ms_node_save(n, t);
  else n->saved[n->num_saved++] = (ms_saved){NULL, 0};
}
