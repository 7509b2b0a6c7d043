/* pool.c: the native max_pool2d, avg_pool2d and adaptive_avg_pool2d: PyTorch's output sizes
 * (ceil_mode included), checks and messages, and their backwards. Average pooling of either kind
 * is turned into explicit per-row and per-column windows here, so one kernel serves both. */
#include <stdlib.h>

#include "kernels/kernels.h"
#include "native/dispatch.h"
#include "nn/conv_internal.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"

/* n / s rounded down or up (s > 0); C's division truncates toward zero. */
static int64_t div_floor(int64_t n, int64_t s) { return n / s - (n % s != 0 && n < 0); }
static int64_t div_ceil(int64_t n, int64_t s) { return n / s + (n % s != 0 && n > 0); }

/* PyTorch's pooling_output_shape, from the checked padded input size and dilated kernel extent
 * (no term can overflow): a last window that would start inside the right padding only is
 * dropped in ceil mode. */
static int64_t pooled_size(int64_t in, int64_t padded, int64_t extent, int64_t s, int64_t pad, bool ceil_mode) {
  int64_t out = (ceil_mode ? div_ceil : div_floor)(padded - extent, s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) out--;
  return out;
}

/* CUDA's pooling kernels take bfloat16 and float16 (float32 arithmetic, one rounding per stored
 * value); the CPU's max pooling bfloat16, a plane at a time widened in cache. */
bool native_pool2d_half(const ms_tensor *x, bool max) {
  if (!ms_dtype_is_half(x->dtype)) return false;
  return ms_tensor_device(x).type != MS_CPU || (max && x->dtype == MS_BFLOAT16);
}

/* The input check of either pool: 16-bit only where native_pool2d_half (grad_pool.c widens the
 * other cases first). */
static ms_status check_pool_input(const char *op, const ms_tensor *x, bool max) {
  return (native_pool2d_half(x, max) ? nn_check_4d_float_or_half_any : nn_check_4d_any)(op, "input", x);
}

/* Checks the window and fills g (planes, sizes, window) for max and avg pooling. */
static ms_status pool_geometry(const char *op, const ms_tensor *x, const int64_t k[2], const int64_t st[2],
                               const int64_t pad[2], const int64_t dil[2], bool ceil_mode, bool max,
                               ms_k_pool2d_geom *g) {
  if (check_pool_input(op, x, max) != MS_OK) return MS_ERR_ARG;
  if (nn_check_pair(op, "kernel_size", k, 1) || nn_check_pair(op, "stride", st, 1) ||
      nn_check_pair(op, "padding", pad, 0) || nn_check_pair(op, "dilation", dil, 1))
    return MS_ERR_ARG;
  if (pad[0] > k[0] / 2 || pad[1] > k[1] / 2)
    return ms_error(MS_ERR_ARG, "%s: pad should be smaller than or equal to half of kernel size, but got "
                    "padding (%lld, %lld) for kernel_size (%lld, %lld)", op, (long long)pad[0],
                    (long long)pad[1], (long long)k[0], (long long)k[1]);
  int64_t padded[2], extent[2];
  if (nn_check_window(op, "kernel_size", x->shape + 2, k, pad, dil, padded, extent) != MS_OK) return MS_ERR_ARG;
  *g = (ms_k_pool2d_geom){.planes = x->shape[0] * x->shape[1], .h = x->shape[2], .w = x->shape[3],
                          .kh = k[0], .kw = k[1], .sh = st[0], .sw = st[1], .ph = pad[0], .pw = pad[1],
                          .dh = dil[0], .dw = dil[1]};
  g->oh = pooled_size(g->h, padded[0], extent[0], st[0], pad[0], ceil_mode);
  g->ow = pooled_size(g->w, padded[1], extent[1], st[1], pad[1], ceil_mode);
  if (g->oh < 1 || g->ow < 1)
    return ms_error(MS_ERR_ARG, "%s: given input size (%lld x %lld x %lld), calculated output size (%lld x %lld "
                    "x %lld) is too small", op, (long long)x->shape[1], (long long)g->h, (long long)g->w,
                    (long long)x->shape[1], (long long)g->oh, (long long)g->ow);
  return MS_OK;
}

static ms_tensor *new_output(const ms_tensor *x, const ms_k_pool2d_geom *g, ms_dtype dt) {
  int64_t shape[4] = {x->shape[0], x->shape[1], g->oh, g->ow};
  return ms_tensor_new_empty_on(ms_tensor_device(x), 4, shape, dt);
}

/* ---- max pooling -------------------------------------------------------------------------- */

ms_tensor *native_max_pool2d_backward(const ms_k_pool2d_geom *g, const int64_t in_shape[4], ms_tensor *idx,
                                      ms_tensor *grad_output, ms_dtype dt) {
  ms_tensor *go = nn_contiguous(grad_output, dt);
  ms_tensor *gx = go ? ms_tensor_new_empty_on(ms_tensor_device(idx), 4, in_shape, dt) : NULL;
  if (!gx) return ms_tensor_release(go), ms_error(MS_ERR_MEMORY, "max_pool2d backward: out of memory"), NULL;
  native_kernels nk;
  if (native_kernels_for("max_pool2d backward", ms_tensor_device(idx), &nk) != MS_OK ||
      native_kernel_status(&nk, nk.k->max_pool2d_backward(&nk.x, nn_kdtype(dt), g, ms_tensor_data(go),
                                                          ms_tensor_data(idx), ms_tensor_data(gx))) != MS_OK)
    ms_tensor_release(gx), gx = NULL;
  ms_tensor_release(go);
  return gx;
}

ms_status native_max_pool2d(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                            const int64_t padding[2], const int64_t dilation[2], bool ceil_mode,
                            bool want_indices, ms_tensor **values, ms_tensor **indices, ms_k_pool2d_geom *g) {
  *values = *indices = NULL;
  if (pool_geometry("max_pool2d", x, kernel, stride, padding, dilation, ceil_mode, true, g) != MS_OK)
    return MS_ERR_ARG;
  /* a rule of the slot (kernel_table.h): only the CPU's kernel may skip the indices */
  bool with_indices = want_indices || ms_tensor_device(x).type != MS_CPU;
  ms_tensor *xc = native_contiguous(x);
  ms_tensor *out = xc ? new_output(x, g, x->dtype) : NULL;
  ms_tensor *idx = out && with_indices ? new_output(x, g, MS_INT64) : NULL;
  if (!out || (with_indices && !idx))
    return ms_tensor_release(xc), ms_tensor_release(out), MS_ERR_MEMORY;
  native_kernels nk;
  ms_status st = native_kernels_for("max_pool2d", ms_tensor_device(x), &nk);
  if (st == MS_OK)
    st = native_kernel_status(&nk, nk.k->max_pool2d(&nk.x, nn_kdtype(x->dtype), g, ms_tensor_data(xc),
                                                    ms_tensor_data(out), idx ? ms_tensor_data(idx) : NULL));
  ms_tensor_release(xc);
  if (st != MS_OK) return ms_tensor_release(out), ms_tensor_release(idx), st;
  *values = out, *indices = idx;
  return MS_OK;
}

/* ---- average pooling ---------------------------------------------------------------------- */

/* The windows of an average pool: one int64 tensor on the op's device, viewed through `w` (device
 * pointers, as the kernels' slots want them). */
typedef struct avg_windows {
  ms_tensor *buf;
  ms_k_pool_windows w;
} avg_windows;

/* One axis of avg_pool2d, as PyTorch's avg_pool2d_out_frame: the divisor counts the padding
 * (when asked) but never the part of a ceil-mode window hanging past it. */
static void axis_fixed(int64_t *s, int64_t *e, int64_t *div, int64_t out, int64_t in, int64_t k, int64_t st,
                       int64_t pad, bool include_pad) {
  for (int64_t i = 0; i < out; i++) {
    int64_t a = i * st - pad, b = a + k < in + pad ? a + k : in + pad;
    int64_t full = b - a;
    a = a < 0 ? 0 : a, b = b > in ? in : b;
    s[i] = a, e[i] = b, div[i] = include_pad ? full : b - a;
  }
}

/* One axis of adaptive pooling: window i covers [floor(i*in/out), ceil((i+1)*in/out)). */
static void axis_adaptive(int64_t *s, int64_t *e, int64_t *div, int64_t out, int64_t in) {
  for (int64_t i = 0; i < out; i++) {
    s[i] = i * in / out;
    e[i] = ((i + 1) * in + out - 1) / out;
    div[i] = e[i] - s[i];
  }
}

/* The windows computed on the host, then moved to dev in one copy (none on the CPU); the
 * allocator reuses a device's copy in stream order, after the kernels that read it. */
static ms_status make_windows(const ms_k_pool2d_geom *g, bool adaptive, bool include_pad, ms_device dev,
                              avg_windows *aw) {
  int64_t count; /* the geometry was checked, so oh and ow are each at most MS_MAX_NUMEL */
  if (!ms_mul_add_size(3, g->oh + g->ow, 0, &count))
    return ms_error(MS_ERR_ARG, "%s: output size (%lld x %lld) is too large", adaptive ? "adaptive_avg_pool2d" :
                    "avg_pool2d", (long long)g->oh, (long long)g->ow);
  ms_tensor *host = ms_tensor_new_empty(1, &count, MS_INT64);
  if (!host) return MS_ERR_MEMORY;
  int64_t *r = ms_tensor_data(host), *c = r + 3 * g->oh;
  if (adaptive) {
    axis_adaptive(r, r + g->oh, r + 2 * g->oh, g->oh, g->h);
    axis_adaptive(c, c + g->ow, c + 2 * g->ow, g->ow, g->w);
  } else {
    axis_fixed(r, r + g->oh, r + 2 * g->oh, g->oh, g->h, g->kh, g->sh, g->ph, include_pad);
    axis_fixed(c, c + g->ow, c + 2 * g->ow, g->ow, g->w, g->kw, g->sw, g->pw, include_pad);
  }
  aw->buf = native_to_device(host, dev);
  ms_tensor_release(host);
  if (!aw->buf) return MS_ERR_RUNTIME; /* the copy's own message stands */
  r = ms_tensor_data(aw->buf), c = r + 3 * g->oh;
  aw->w = (ms_k_pool_windows){r, r + g->oh, r + 2 * g->oh, c, c + g->ow, c + 2 * g->ow};
  return MS_OK;
}

ms_tensor *native_avg_pool2d_backward(const ms_k_pool2d_geom *g, const int64_t in_shape[4], bool adaptive,
                                      bool count_include_pad, ms_tensor *grad_output, ms_dtype dt) {
  ms_device dev = ms_tensor_device(grad_output);
  avg_windows aw;
  if (make_windows(g, adaptive, count_include_pad, dev, &aw) != MS_OK) return NULL;
  ms_tensor *go = nn_contiguous(grad_output, dt);
  ms_tensor *gx = go ? ms_tensor_new_empty_on(dev, 4, in_shape, dt) : NULL;
  native_kernels nk;
  if (gx && (native_kernels_for("avg_pool2d backward", dev, &nk) != MS_OK ||
             native_kernel_status(&nk, nk.k->avg_pool2d_backward(&nk.x, nn_kdtype(dt), g, &aw.w, ms_tensor_data(go),
                                                                 ms_tensor_data(gx))) != MS_OK))
    ms_tensor_release(gx), gx = NULL;
  ms_tensor_release(go), ms_tensor_release(aw.buf);
  return gx;
}

/* The forward from a checked geometry. */
static ms_tensor *avg_pool(ms_tensor *x, const ms_k_pool2d_geom *g, bool adaptive, bool include_pad) {
  const char *op = adaptive ? "adaptive_avg_pool2d" : "avg_pool2d";
  avg_windows aw;
  if (make_windows(g, adaptive, include_pad, ms_tensor_device(x), &aw) != MS_OK) return NULL;
  ms_tensor *xc = native_contiguous(x), *out = xc ? new_output(x, g, x->dtype) : NULL;
  native_kernels nk;
  if (out && (native_kernels_for(op, ms_tensor_device(x), &nk) != MS_OK ||
              native_kernel_status(&nk, nk.k->avg_pool2d(&nk.x, nn_kdtype(x->dtype), g, &aw.w, ms_tensor_data(xc),
                                                         ms_tensor_data(out))) != MS_OK))
    ms_tensor_release(out), out = NULL;
  ms_tensor_release(xc), ms_tensor_release(aw.buf);
  return out;
}

ms_tensor *native_avg_pool2d(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                             const int64_t padding[2], bool ceil_mode, bool count_include_pad, ms_k_pool2d_geom *g) {
  const int64_t one[2] = {1, 1};
  if (pool_geometry("avg_pool2d", x, kernel, stride, padding, one, ceil_mode, false, g) != MS_OK) return NULL;
  return avg_pool(x, g, false, count_include_pad);
}

ms_tensor *native_adaptive_avg_pool2d(ms_tensor *x, int64_t out_h, int64_t out_w, ms_k_pool2d_geom *g) {
  const int64_t size[2] = {out_h, out_w};
  if (check_pool_input("adaptive_avg_pool2d", x, false) != MS_OK ||
      nn_check_pair("adaptive_avg_pool2d", "output_size", size, 1) != MS_OK)
    return NULL;
  int64_t span; /* the windows compute (i + 1) * in + out - 1 for i < out */
  if (out_h > MS_MAX_NUMEL || out_w > MS_MAX_NUMEL || !ms_mul_add_size(out_h, x->shape[2], out_h, &span) ||
      !ms_mul_add_size(out_w, x->shape[3], out_w, &span))
    return ms_error(MS_ERR_ARG, "adaptive_avg_pool2d: output_size (%lld, %lld) is too large for input size "
                    "(%lld x %lld)", (long long)out_h, (long long)out_w, (long long)x->shape[2],
                    (long long)x->shape[3]), NULL;
  *g = (ms_k_pool2d_geom){.planes = x->shape[0] * x->shape[1], .h = x->shape[2], .w = x->shape[3],
                          .oh = out_h, .ow = out_w, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1};
  return avg_pool(x, g, true, false);
}
