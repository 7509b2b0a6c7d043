/* dropout.c: inverted dropout with a mask drawn from the process's Philox stream, so a seed
 * fixes every mask on any thread count or device. The mask is kept (one byte an element) for the
 * backward, which scales the gradient the same way. */
#include <math.h>

#include "autograd/grad_util.h"
#include "cuda/cuda_ops.h"
#include "moonshard/nn_ops.h"
#include "nn/nn_internal.h"
#include "random_state.h"

/* scalars[0] = 1 / (1 - p); slot 0 = the mask. */
static ms_status dropout_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *mask = ms_node_saved(n, 0);
  if (!mask) return MS_ERR_RUNTIME;
  ms_dtype dt = n->out_dtype[0];
  /* the scaled gradient overwrites the incoming one when the walk lets it go (on the CPU) */
  bool in_place = ms_tensor_device(mask).type == MS_CPU && grad_out[0]->dtype == dt &&
                  ms_tensor_is_contiguous(grad_out[0]) && ms_grad_is_exclusive(grad_out[0], 1);
  ms_tensor *g = ms_nn_contiguous(grad_out[0], dt);
  ms_tensor *gx = !g ? NULL
                  : in_place ? (ms_tensor_retain(g), g)
                             : ms_tensor_new_empty_on(ms_tensor_device(mask), mask->ndim, mask->shape, dt);
  if (gx && ms_tensor_device(mask).type == MS_CUDA) {
    if (ms_cuda_masked_scale(g, mask, n->scalars[0], gx) != MS_OK) ms_tensor_release(gx), gx = NULL;
  } else if (gx)
    ms_k_masked_scale(ms_nn_kdtype(dt), ms_tensor_numel(gx), ms_tensor_data(g), ms_tensor_data(mask),
                      n->scalars[0], ms_tensor_data(gx));
  ms_tensor_release(g);
  grad_in[0] = gx;
  return gx ? MS_OK : MS_ERR_MEMORY;
}

/* A uint8 mask of x's shape on x's device: each element 1 with probability 1 - p, the same
 * draws on either device. */
static ms_tensor *draw_mask(const ms_tensor *x, double p) {
  ms_tensor *mask = ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, MS_UINT8);
  if (!mask) return NULL;
  int64_t n = ms_tensor_numel(mask);
  uint64_t seed, offset;
  double keep = 1 - p;
  ms_random_reserve(ms_k_philox_blocks(n, 4), &seed, &offset);
  if (ms_tensor_device(x).type == MS_CUDA) {
    if (ms_cuda_bernoulli_mask(mask, seed, offset, keep) != MS_OK) ms_tensor_release(mask), mask = NULL;
  } else {
    ms_k_philox_bernoulli(seed, offset, n, &keep, 0, ms_tensor_data(mask));
  }
  return mask;
}

static ms_tensor *record(ms_tensor *x, ms_tensor *out, ms_tensor *mask, double scale) {
  if (!ms_autograd_wants(1, &x)) return out;
  ms_node *n = ms_node_new("NativeDropoutBackward0", dropout_backward, 1, &x);
  if (!n) return ms_tensor_release(out), NULL;
  n->scalars[0] = scale;
  ms_node_save(n, mask);
  ms_node_attach(n, out, 0);
  ms_node_release(n);
  return out;
}

ms_tensor *ms_dropout(ms_tensor *x, double p, bool training) {
  if (!(p >= 0 && p <= 1))
    return ms_error(MS_ERR_ARG, "dropout: probability has to be between 0 and 1, but got %g", p), NULL;
  if (!training || p == 0) {
    if (!x || (!ms_dtype_is_floating(x->dtype) && ms_nn_check_float_any("dropout", "input", x))) return NULL;
    return ms_tensor_retain(x), x;
  }
  ms_dtype half;
  /* the same mask as in float32 (drawn per element); bfloat16 on the CPU is scaled as it is */
  if (ms_nn_half_call_widens(x, &half)) {
    ms_tensor *v;
    if (ms_nn_widen(1, &x, &v) != MS_OK) return NULL;
    ms_tensor *out = ms_dropout(v, p, training);
    ms_tensor_release(v);
    return ms_nn_narrow_back(out, half);
  }
  if (ms_nn_check_float_or_bf16_any("dropout", "input", x)) return NULL;
  ms_tensor *xc = ms_nn_contiguous(x, x->dtype), *mask = xc ? draw_mask(x, p) : NULL;
  ms_tensor *out = mask ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  double scale = p == 1 ? 0 : 1 / (1 - p); /* p = 1 drops everything: the scale is never used */
  if (out && ms_tensor_device(x).type == MS_CUDA) {
    if (ms_cuda_masked_scale(xc, mask, scale, out) != MS_OK) ms_tensor_release(out), out = NULL;
  } else if (out)
    ms_k_masked_scale(ms_nn_kdtype(x->dtype), ms_tensor_numel(x), ms_tensor_data(xc), ms_tensor_data(mask),
                      scale, ms_tensor_data(out));
  ms_tensor_release(xc);
  if (out) out = record(x, out, mask, scale);
  ms_tensor_release(mask);
  return out;
}
