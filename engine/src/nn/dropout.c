/* dropout.c: the native inverted dropout, with a mask drawn from the process's Philox stream so
 * that a seed fixes every mask on any thread count or device. The mask (one byte an element) is
 * what the backward scales the gradient with. */
#include <math.h>

#include "native/dispatch.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"
#include "random_state.h"

/* y = mask ? x * scale : 0 over contiguous tensors of one shape on mask's device. */
static ms_status masked_scale(const char *op, ms_tensor *x, ms_tensor *mask, double scale, ms_tensor *y) {
  native_kernels nk;
  if (native_kernels_for(op, ms_tensor_device(mask), &nk) != MS_OK) return MS_ERR_RUNTIME;
  return native_kernel_status(&nk, nk.k->masked_scale(&nk.x, nn_kdtype(y->dtype), ms_tensor_numel(y),
                                                      ms_tensor_data(x), ms_tensor_data(mask), scale,
                                                      ms_tensor_data(y)));
}

ms_tensor *native_dropout_backward(ms_tensor *grad_output, ms_tensor *mask, double scale, ms_dtype dt,
                                   bool may_overwrite_grad) {
  ms_tensor *g = nn_contiguous(grad_output, dt);
  ms_tensor *gx = !g ? NULL
                  : may_overwrite_grad ? (ms_tensor_retain(g), g)
                               : ms_tensor_new_empty_on(ms_tensor_device(mask), mask->ndim, mask->shape, dt);
  if (gx && masked_scale("dropout", g, mask, scale, gx) != MS_OK) ms_tensor_release(gx), gx = NULL;
  ms_tensor_release(g);
  return gx;
}

/* y = dropout(xc) with scale k, and its uint8 mask (1 with probability 1 - p), both of xc's shape
 * on its device, in one kernel: the same draws on either device. */
static ms_status dropout_forward(ms_tensor *xc, double p, double k, ms_tensor *mask, ms_tensor *y) {
  int64_t n = ms_tensor_numel(mask);
  uint64_t seed, offset;
  native_kernels nk;
  if (native_kernels_for("dropout", ms_tensor_device(xc), &nk) != MS_OK) return MS_ERR_RUNTIME;
  random_reserve(ms_k_philox_blocks(n, 4), &seed, &offset);
  return native_kernel_status(&nk, nk.k->dropout(&nk.x, nn_kdtype(y->dtype), seed, offset, n, 1 - p,
                                                 ms_tensor_data(xc), k, ms_tensor_data(mask), ms_tensor_data(y)));
}

ms_tensor *native_dropout(ms_tensor *x, double p, bool training, ms_tensor **mask, double *scale) {
  *mask = NULL, *scale = 1;
  if (!(p >= 0 && p <= 1))
    return ms_error(MS_ERR_ARG, "dropout: probability has to be between 0 and 1, but got %g", p), NULL;
  if (!training || p == 0) {
    if (!x || (!ms_dtype_is_floating(x->dtype) && nn_check_float_any("dropout", "input", x))) return NULL;
    return ms_tensor_retain(x), x;
  }
  /* 16-bit tensors reach here as bfloat16 on the CPU and either 16-bit dtype on CUDA, whose
   * kernels scale them as they are (ms_dropout widens the others) */
  bool cuda_half = ms_dtype_is_half(x->dtype) && ms_tensor_device(x).type == MS_CUDA;
  if (cuda_half ? ms_tensor_check_data_any("dropout", x) : nn_check_float_or_bf16_any("dropout", "input", x))
    return NULL;
  ms_tensor *xc = nn_contiguous(x, x->dtype);
  ms_tensor *m = xc ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, MS_UINT8) : NULL;
  ms_tensor *out = m ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  double k = p == 1 ? 0 : 1 / (1 - p); /* p = 1 drops everything: the scale is never used */
  if (out && dropout_forward(xc, p, k, m, out) != MS_OK) ms_tensor_release(out), out = NULL;
  ms_tensor_release(xc);
  if (!out) return ms_tensor_release(m), NULL;
  *mask = m, *scale = k;
  return out;
}
