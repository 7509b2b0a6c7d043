/* grad_pool.c: the public max_pool2d, avg_pool2d and adaptive_avg_pool2d (nn_conv.h): the native
 * ops and their nodes, which keep the checked geometry (and max pooling's indices). A 16-bit
 * input without a native kernel (native_pool2d_half: float16 on the CPU, and average pooling
 * there) is pooled in float32 and rounded back, through recorded conversions. */
#include "grad_nn.h"
#include "moonshard/nn_conv.h"

/* Node ints: [0, 4) the input's shape, then the geometry (planes, h, w, oh, ow, kh, kw, sh, sw,
 * ph, pw, dh, dw) at [4, 17), then the average pools' [17] kind (0 avg_pool2d, 1 adaptive) and
 * [18] count_include_pad. */
enum { AVG_KIND = 17, AVG_INCLUDE_PAD = 18 };

static void store_geometry(ms_node *n, const ms_tensor *x, const ms_k_pool2d_geom *g) {
  const int64_t v[13] = {g->planes, g->h, g->w, g->oh, g->ow, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw};
  for (int i = 0; i < 4; i++) n->ints[i] = x->shape[i];
  for (int i = 0; i < 13; i++) n->ints[4 + i] = v[i];
}

static ms_k_pool2d_geom load_geometry(const ms_node *n) {
  const int64_t *v = n->ints + 4;
  return (ms_k_pool2d_geom){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]};
}

/* ---- max pooling -------------------------------------------------------------------------- */

/* slot 0 = the indices. */
static ms_status max_pool_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *idx = ms_node_saved(n, 0);
  if (!idx) return MS_ERR_RUNTIME;
  ms_k_pool2d_geom g = load_geometry(n);
  grad_in[0] = native_max_pool2d_backward(&g, n->ints, idx, grad_out[0], n->out_dtype[0]);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

static ms_status record_max_pool(ms_tensor *x, const ms_k_pool2d_geom *g, ms_tensor *idx, ms_tensor *out) {
  ms_node *n = ms_node_new("MaxPool2DWithIndicesBackward0", max_pool_backward, 1, &x);
  if (!n) return MS_ERR_MEMORY;
  store_geometry(n, x, g);
  ms_node_save(n, idx);
  return grad_finish(n, out);
}

/* The indices are made only when the caller or the backward needs them (*indices stays NULL
 * otherwise: under no_grad, ms_max_pool2d writes none). */
static ms_status max_pool(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2], const int64_t padding[2],
                          const int64_t dilation[2], bool ceil_mode, bool want_indices, ms_tensor **values,
                          ms_tensor **indices) {
  *values = *indices = NULL;
  ms_dtype half = x ? x->dtype : MS_FLOAT32;
  if (x && ms_dtype_is_half(half) && !native_pool2d_half(x, true)) {
    ms_tensor *v, *wide;
    if (nn_widen(1, &x, &v) != MS_OK) return MS_ERR_MEMORY;
    ms_status st = max_pool(v, kernel, stride, padding, dilation, ceil_mode, want_indices, &wide, indices);
    ms_tensor_release(v);
    if (st == MS_OK && !(*values = nn_narrow_back(wide, half))) {
      ms_tensor_release(*indices);
      *indices = NULL;
      st = MS_ERR_MEMORY;
    }
    ms_tensor_release(wide);
    return st;
  }
  ms_k_pool2d_geom g;
  bool grad = x && ms_autograd_wants(1, &x);
  ms_tensor *out, *idx;
  ms_status st = native_max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, grad || want_indices, &out,
                                   &idx, &g);
  if (st == MS_OK && grad && (st = record_max_pool(x, &g, idx, out)) != MS_OK)
    ms_tensor_release(out), ms_tensor_release(idx), out = idx = NULL;
  *values = out, *indices = idx;
  return st;
}

ms_status ms_max_pool2d_with_indices(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                                     const int64_t padding[2], const int64_t dilation[2],
                                     bool ceil_mode, ms_tensor **values, ms_tensor **indices) {
  return max_pool(x, kernel, stride, padding, dilation, ceil_mode, true, values, indices);
}

ms_tensor *ms_max_pool2d(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                         const int64_t padding[2], const int64_t dilation[2], bool ceil_mode) {
  ms_tensor *values, *indices;
  if (max_pool(x, kernel, stride, padding, dilation, ceil_mode, false, &values, &indices) != MS_OK) return NULL;
  ms_tensor_release(indices); /* the node keeps its own reference (NULL without autograd) */
  return values;
}

/* ---- average pooling ---------------------------------------------------------------------- */

static ms_status avg_pool_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_k_pool2d_geom g = load_geometry(n);
  grad_in[0] = native_avg_pool2d_backward(&g, n->ints, n->ints[AVG_KIND], n->ints[AVG_INCLUDE_PAD], grad_out[0],
                                          n->out_dtype[0]);
  return grad_in[0] ? MS_OK : MS_ERR_MEMORY;
}

/* Records the node of either average pool on out (borrowed). */
static ms_status record_avg_pool(ms_tensor *x, const ms_k_pool2d_geom *g, bool adaptive, bool include_pad,
                                 ms_tensor *out) {
  if (!out || !ms_autograd_wants(1, &x)) return MS_OK;
  ms_node *n = ms_node_new(adaptive ? "AdaptiveAvgPool2DBackward0" : "AvgPool2DBackward0", avg_pool_backward, 1, &x);
  if (!n) return MS_ERR_MEMORY;
  store_geometry(n, x, g);
  n->ints[AVG_KIND] = adaptive, n->ints[AVG_INCLUDE_PAD] = include_pad;
  return grad_finish(n, out);
}

/* *v = x as float32 (recorded) where average pooling widens x, else NULL. */
static ms_status avg_widen(ms_tensor *x, ms_tensor **v) {
  *v = NULL;
  if (!x || !ms_dtype_is_half(x->dtype) || native_pool2d_half(x, false)) return MS_OK;
  return nn_widen(1, &x, v);
}

/* The widened pool's result rounded back to dt; releases wide and v. */
static ms_tensor *narrowed(ms_tensor *wide, ms_tensor *v, ms_dtype dt) {
  ms_tensor *out = nn_narrow_back(wide, dt);
  ms_tensor_release(wide), ms_tensor_release(v);
  return out;
}

ms_tensor *ms_avg_pool2d(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                         const int64_t padding[2], bool ceil_mode, bool count_include_pad) {
  ms_tensor *v;
  if (avg_widen(x, &v) != MS_OK) return NULL;
  if (v) return narrowed(ms_avg_pool2d(v, kernel, stride, padding, ceil_mode, count_include_pad), v, x->dtype);
  ms_k_pool2d_geom g;
  ms_tensor *out = native_avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, &g);
  return grad_kept(out, record_avg_pool(x, &g, false, count_include_pad, out));
}

ms_tensor *ms_adaptive_avg_pool2d(ms_tensor *x, int64_t out_h, int64_t out_w) {
  ms_tensor *v;
  if (avg_widen(x, &v) != MS_OK) return NULL;
  if (v) return narrowed(ms_adaptive_avg_pool2d(v, out_h, out_w), v, x->dtype);
  ms_k_pool2d_geom g;
  ms_tensor *out = native_adaptive_avg_pool2d(x, out_h, out_w, &g);
  return grad_kept(out, record_avg_pool(x, &g, true, false, out));
}
