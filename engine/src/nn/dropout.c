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

/* A uint8 mask of x's shape on x's device: each element 1 with probability 1 - p, the same
 * draws on either device. */
static ms_tensor *draw_mask(const ms_tensor *x, double p) {
  ms_tensor *mask = ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, MS_UINT8);
  if (!mask) return NULL;
  int64_t n = ms_tensor_numel(mask);
  uint64_t seed, offset;
  native_kernels nk;
  if (native_kernels_for("dropout", ms_tensor_device(x), &nk) != MS_OK) return ms_tensor_release(mask), NULL;
  random_reserve(ms_k_philox_blocks(n, 4), &seed, &offset);
  int err = nk.k->philox_bernoulli(&nk.x, seed, offset, n, 1 - p, ms_tensor_data(mask));
  if (native_kernel_status(&nk, err) != MS_OK) ms_tensor_release(mask), mask = NULL;
  return mask;
}

ms_tensor *native_dropout(ms_tensor *x, double p, bool training, ms_tensor **mask, double *scale) {
  *mask = NULL, *scale = 1;
  if (!(p >= 0 && p <= 1))
    return ms_error(MS_ERR_ARG, "dropout: probability has to be between 0 and 1, but got %g", p), NULL;
  if (!training || p == 0) {
    if (!x || (!ms_dtype_is_floating(x->dtype) && nn_check_float_any("dropout", "input", x))) return NULL;
    return ms_tensor_retain(x), x;
  }
  /* bfloat16 reaches here on the CPU only, where it is scaled as it is */
  if (nn_check_float_or_bf16_any("dropout", "input", x)) return NULL;
  ms_tensor *xc = nn_contiguous(x, x->dtype), *m = xc ? draw_mask(x, p) : NULL;
  ms_tensor *out = m ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  double k = p == 1 ? 0 : 1 / (1 - p); /* p = 1 drops everything: the scale is never used */
  if (out && masked_scale("dropout", xc, m, k, out) != MS_OK) ms_tensor_release(out), out = NULL;
  ms_tensor_release(xc);
  if (!out) return ms_tensor_release(m), NULL;
  *mask = m, *scale = k;
  return out;
}
