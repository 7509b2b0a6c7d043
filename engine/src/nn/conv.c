/* conv.c: the native conv2d, its checks (PyTorch's rules and messages, with shapes) and its
 * backward. The arithmetic is the conv2d slots' of the tensors' device (kernels/cpu/conv.c,
 * kernels/cuda/conv_cudnn.c); this file decides shapes and makes operands contiguous. */
#include <stdlib.h>

#include "kernels/kernels.h"
#include "native/dispatch.h"
#include "nn/conv_internal.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"

ms_status nn_check_4d(const char *op, const char *arg, const ms_tensor *x) {
  ms_status st = nn_check_4d_any(op, arg, x);
  return st == MS_OK ? ms_tensor_check_data(op, x) : st;
}

static ms_status check_4d_shape(const char *op, const char *arg, const ms_tensor *x) {
  char b[MS_SHAPE_STR_LEN];
  if (x->ndim != 4)
    return ms_error(MS_ERR_ARG, "%s: %s must be 4-D (N, C, H, W), got %s", op, arg,
                    ms_shape_str(x->ndim, x->shape, b, sizeof b));
  return MS_OK;
}

ms_status nn_check_4d_any(const char *op, const char *arg, const ms_tensor *x) {
  ms_status st = check_4d_shape(op, arg, x);
  return st == MS_OK ? nn_check_float_any(op, arg, x) : st;
}

ms_status nn_check_4d_float_or_half_any(const char *op, const char *arg, const ms_tensor *x) {
  ms_status st = check_4d_shape(op, arg, x);
  return st == MS_OK ? nn_check_float_or_half_any(op, arg, x) : st;
}

ms_status nn_check_pair(const char *op, const char *arg, const int64_t v[2], int64_t min) {
  if (v[0] >= min && v[1] >= min) return MS_OK;
  return ms_error(MS_ERR_ARG, "%s: %s must be >= %lld, got (%lld, %lld)", op, arg, (long long)min,
                  (long long)v[0], (long long)v[1]);
}

ms_status nn_check_window(const char *op, const char *k_arg, const int64_t in[2], const int64_t k[2],
                             const int64_t pad[2], const int64_t dil[2], int64_t padded[2], int64_t extent[2]) {
  for (int a = 0; a < 2; a++) {
    if (!ms_mul_add_size(2, pad[a], in[a], &padded[a]))
      return ms_error(MS_ERR_ARG, "%s: padding (%lld, %lld) is too large for input size (%lld x %lld)", op,
                      (long long)pad[0], (long long)pad[1], (long long)in[0], (long long)in[1]);
    if (!ms_mul_add_size(dil[a], k[a] - 1, 1, &extent[a]))
      return ms_error(MS_ERR_ARG, "%s: %s (%lld, %lld) with dilation (%lld, %lld) spans too many elements", op,
                      k_arg, (long long)k[0], (long long)k[1], (long long)dil[0], (long long)dil[1]);
  }
  return MS_OK;
}

/* The weight and bias against the input: dims, dtypes, channels and groups. */
static ms_status check_weight(const ms_tensor *x, const ms_tensor *w, const ms_tensor *b, int64_t groups) {
  char s1[MS_SHAPE_STR_LEN], s2[MS_SHAPE_STR_LEN];
  if (w->ndim != 4)
    return ms_error(MS_ERR_ARG, "conv2d: weight must be 4-D (out_channels, in_channels / groups, kH, kW), got %s",
                    ms_shape_str(w->ndim, w->shape, s1, sizeof s1));
  if (w->dtype != x->dtype)
    return ms_error(MS_ERR_ARG, "conv2d: weight dtype %s does not match input dtype %s", ms_dtype_name(w->dtype),
                    ms_dtype_name(x->dtype));
  if (w->shape[2] < 1 || w->shape[3] < 1)
    return ms_error(MS_ERR_ARG, "conv2d: weight's kernel size must be at least 1 x 1, got %s",
                    ms_shape_str(4, w->shape, s1, sizeof s1));
  if (groups < 1) return ms_error(MS_ERR_ARG, "conv2d: groups must be positive, got %lld", (long long)groups);
  if (w->shape[0] % groups != 0)
    return ms_error(MS_ERR_ARG, "conv2d: out_channels %lld (weight %s) must be divisible by groups %lld",
                    (long long)w->shape[0], ms_shape_str(4, w->shape, s1, sizeof s1), (long long)groups);
  if (x->shape[1] != w->shape[1] * groups)
    return ms_error(MS_ERR_ARG, "conv2d: given groups=%lld and weight of size %s, expected input %s to have %lld "
                    "channels, but got %lld channels instead", (long long)groups,
                    ms_shape_str(4, w->shape, s1, sizeof s1), ms_shape_str(4, x->shape, s2, sizeof s2),
                    (long long)(w->shape[1] * groups), (long long)x->shape[1]);
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
    return ms_error(MS_ERR_ARG, "conv2d: bias must be 1-D with %lld elements (out_channels), got %s",
                    (long long)w->shape[0], ms_shape_str(b->ndim, b->shape, s1, sizeof s1));
  if (b && b->dtype != x->dtype)
    return ms_error(MS_ERR_ARG, "conv2d: bias dtype %s does not match input dtype %s", ms_dtype_name(b->dtype),
                    ms_dtype_name(x->dtype));
  if (ms_check_same_device("conv2d", 3, (ms_tensor *[]){(ms_tensor *)x, (ms_tensor *)w, (ms_tensor *)b}))
    return MS_ERR_ARG;
  if (ms_tensor_check_data_any("conv2d", w) != MS_OK) return MS_ERR_RUNTIME;
  return b ? ms_tensor_check_data_any("conv2d", b) : MS_OK;
}

/* Fills the kernel geometry (output size included) after checking every argument. */
static ms_status conv_geometry(const ms_tensor *x, const ms_tensor *w, const ms_tensor *b, const int64_t st[2],
                               const int64_t pad[2], const int64_t dil[2], int64_t groups, ms_k_conv2d_geom *g) {
  /* 16-bit reaches here only on its native paths (ms_conv2d widens the other cases) */
  bool half = native_conv2d_half(x, w, b, groups);
  if ((half ? nn_check_4d_float_or_half_any : nn_check_4d_any)("conv2d", "input", x) != MS_OK ||
      check_weight(x, w, b, groups) != MS_OK)
    return MS_ERR_ARG;
  if (nn_check_pair("conv2d", "stride", st, 1) || nn_check_pair("conv2d", "padding", pad, 0) ||
      nn_check_pair("conv2d", "dilation", dil, 1))
    return MS_ERR_ARG;
  *g = (ms_k_conv2d_geom){.n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
                          .o = w->shape[0], .kh = w->shape[2], .kw = w->shape[3], .sh = st[0], .sw = st[1],
                          .ph = pad[0], .pw = pad[1], .dh = dil[0], .dw = dil[1], .groups = groups};
  int64_t padded[2], extent[2];
  if (nn_check_window("conv2d", "kernel size", (int64_t[]){g->h, g->w}, (int64_t[]){g->kh, g->kw}, pad, dil,
                         padded, extent) != MS_OK)
    return MS_ERR_ARG;
  if (extent[0] > padded[0] || extent[1] > padded[1])
    return ms_error(MS_ERR_ARG, "conv2d: calculated padded input size per channel: (%lld x %lld); kernel size "
                    "(dilated): (%lld x %lld); kernel size can't be greater than actual input size",
                    (long long)padded[0], (long long)padded[1], (long long)extent[0], (long long)extent[1]);
  g->oh = (padded[0] - extent[0]) / st[0] + 1;
  g->ow = (padded[1] - extent[1]) / st[1] + 1;
  return MS_OK;
}

/* The geometry of a forward that passed conv_geometry, from its input, weight and parameters. */
static ms_k_conv2d_geom geom_of(const ms_tensor *x, const ms_tensor *w, const int64_t st[2], const int64_t pad[2],
                                const int64_t dil[2], int64_t groups) {
  ms_k_conv2d_geom g = {.n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
                        .o = w->shape[0], .kh = w->shape[2], .kw = w->shape[3], .sh = st[0], .sw = st[1],
                        .ph = pad[0], .pw = pad[1], .dh = dil[0], .dw = dil[1], .groups = groups};
  g.oh = (g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  return g;
}

/* A fresh tensor of `ndim`, `shape` like `like` when needed, else NULL. */
static ms_tensor *grad_buffer(bool need, const ms_tensor *like, int ndim, const int64_t *shape, ms_status *st) {
  if (!need || *st != MS_OK) return NULL;
  ms_tensor *t = ms_tensor_new_empty_on(ms_tensor_device(like), ndim, shape, like->dtype);
  if (!t) *st = MS_ERR_MEMORY;
  return t;
}

ms_status native_conv2d_backward(ms_tensor *xs, ms_tensor *ws, ms_tensor *grad_output, const int64_t stride[2],
                                 const int64_t padding[2], const int64_t dilation[2], int64_t groups,
                                 const bool need[3], ms_tensor *grads[3]) {
  ms_k_conv2d_geom g = geom_of(xs, ws, stride, padding, dilation, groups);
  ms_tensor *x = native_contiguous(xs), *w = native_contiguous(ws);
  ms_tensor *go = native_to_dtype(grad_output, xs->dtype), *gc = go ? native_contiguous(go) : NULL;
  ms_status st = x && w && gc ? MS_OK : MS_ERR_MEMORY;
  int64_t bshape = g.o;
  ms_tensor *gx = grad_buffer(need[0], xs, xs->ndim, xs->shape, &st);
  ms_tensor *gw = grad_buffer(need[1], ws, ws->ndim, ws->shape, &st);
  ms_tensor *gb = grad_buffer(need[2], xs, 1, &bshape, &st);
  native_kernels nk;
  if (st == MS_OK && (st = native_kernels_for("conv2d backward", ms_tensor_device(xs), &nk)) == MS_OK)
    st = native_kernel_status(&nk, nk.k->conv2d_backward(&nk.x, (ms_k_dtype)xs->dtype, &g, ms_tensor_data(x),
                                                         ms_tensor_data(w), ms_tensor_data(gc),
                                                         gx ? ms_tensor_data(gx) : NULL, gw ? ms_tensor_data(gw) : NULL,
                                                         gb ? ms_tensor_data(gb) : NULL));
  ms_tensor_release(x), ms_tensor_release(w), ms_tensor_release(go), ms_tensor_release(gc);
  grads[0] = gx, grads[1] = gw, grads[2] = gb;
  if (st != MS_OK) nn_release_all(3, grads);
  return st;
}

/* The forward on contiguous copies. */
static ms_tensor *conv_forward(ms_tensor *x, ms_tensor *w, ms_tensor *b, const ms_k_conv2d_geom *g) {
  ms_tensor *xc = native_contiguous(x), *wc = native_contiguous(w);
  ms_tensor *bc = b ? native_contiguous(b) : NULL;
  int64_t shape[4] = {g->n, g->o, g->oh, g->ow};
  ms_tensor *out = xc && wc && (!b || bc) ? ms_tensor_new_empty_on(ms_tensor_device(x), 4, shape, x->dtype) : NULL;
  native_kernels nk;
  if (out && (native_kernels_for("conv2d", ms_tensor_device(x), &nk) != MS_OK ||
              native_kernel_status(&nk, nk.k->conv2d_forward(&nk.x, (ms_k_dtype)x->dtype, g, ms_tensor_data(xc),
                                                             ms_tensor_data(wc), bc ? ms_tensor_data(bc) : NULL,
                                                             ms_tensor_data(out))) != MS_OK))
    ms_tensor_release(out), out = NULL;
  ms_tensor_release(xc), ms_tensor_release(wc), ms_tensor_release(bc);
  return out;
}

/* bfloat16 on the CPU with groups = 1 runs kernels/cpu/conv_bf16.c (vdpbf16ps GEMMs, float32
 * sums, one rounding) where the CPU has AVX-512 BF16; bfloat16 and float16 on CUDA run cuDNN on
 * the 16-bit tensors (float32 compute, kernels/cuda/conv_cudnn.c); anything else 16-bit widens
 * to float32. */
bool native_conv2d_half(const ms_tensor *x, const ms_tensor *w, const ms_tensor *b, int64_t groups) {
  if (!ms_dtype_is_half(x->dtype) || w->dtype != x->dtype || (b && b->dtype != x->dtype)) return false;
  if (ms_tensor_device(x).type != MS_CPU) return true;
  return x->dtype == MS_BFLOAT16 && groups == 1 && ms_k_conv2d_bf16_direct();
}

ms_tensor *native_conv2d(ms_tensor *x, ms_tensor *w, ms_tensor *b, const int64_t stride[2],
                         const int64_t padding[2], const int64_t dilation[2], int64_t groups) {
  ms_k_conv2d_geom g;
  if (conv_geometry(x, w, b, stride, padding, dilation, groups, &g) != MS_OK) return NULL;
  return conv_forward(x, w, b, &g);
}
