/* normalization.c: the native layer_norm and batch_norm. The forwards hand back the mean and
 * inverse standard deviation they computed, so the backwards need one pass over x and the
 * gradient. */
#include <math.h>

#include "native/dispatch.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"

void native_norm_saved_release(native_norm_saved *s) {
  ms_tensor_release(s->x), ms_tensor_release(s->weight), ms_tensor_release(s->mean), ms_tensor_release(s->invstd);
  *s = (native_norm_saved){0};
}

static void *data_or_null(ms_tensor *t) { return t ? ms_tensor_data(t) : NULL; }

/* New buffers for the gradients needed (NULL for the rest); false when memory ran out (those
 * made are released). ndim/shape: of x (gradient 0) and of the parameters (gradients 1, 2, in
 * x's statistics dtype: float32 for a 16-bit x). */
static bool alloc_grads(const bool need[3], const ms_tensor *x, int pndim, const int64_t *pshape,
                        ms_tensor **grads) {
  for (int i = 0; i < 3; i++) {
    grads[i] = NULL;
    if (!need[i]) continue;
    grads[i] = i == 0 ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype)
                      : ms_tensor_new_empty_on(ms_tensor_device(x), pndim, pshape, nn_stat_dtype(x->dtype));
    if (!grads[i]) return nn_release_all(i, grads), false;
  }
  return true;
}

/* ---- layer_norm ---------------------------------------------------------------------------------- */

ms_status native_layer_norm_backward(const native_norm_saved *s, int nd, ms_tensor *grad_output,
                                     const bool need[3], ms_tensor *grad_in[3]) {
  ms_tensor *x = s->x, *w = s->weight, *mean = s->mean, *rstd = s->invstd;
  int64_t M = ms_tensor_numel(mean), N = M ? ms_tensor_numel(x) / M : 0;
  ms_tensor *g = nn_contiguous(grad_output, x->dtype);
  if (!g || !alloc_grads(need, x, nd, x->shape + x->ndim - nd, grad_in))
    return ms_tensor_release(g), MS_ERR_MEMORY;
  native_kernels nk;
  ms_status st = native_kernels_for("layer_norm backward", ms_tensor_device(x), &nk);
  if (st == MS_OK)
    st = native_kernel_status(&nk, nk.k->layer_norm_backward(&nk.x, nn_kdtype(x->dtype), M, N, ms_tensor_data(x),
                                                             ms_tensor_data(g), ms_tensor_data(mean),
                                                             ms_tensor_data(rstd), data_or_null(w),
                                                             data_or_null(grad_in[0]), data_or_null(grad_in[1]),
                                                             data_or_null(grad_in[2])));
  ms_tensor_release(g);
  if (st != MS_OK) nn_release_all(3, grad_in);
  return st;
}

static ms_status check_layer_norm(ms_tensor *x, int nd, const int64_t *ns, ms_tensor *w, ms_tensor *b) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  if (nn_check_float_or_half_any("layer_norm", "input", x)) return MS_ERR_ARG;
  if (ms_check_same_device("layer_norm", 3, (ms_tensor *[]){x, w, b})) return MS_ERR_ARG;
  bool ok = nd >= 1 && nd <= x->ndim;
  for (int d = 0; ok && d < nd; d++) ok = x->shape[x->ndim - nd + d] == ns[d];
  if (!ok)
    return ms_error(MS_ERR_ARG, "layer_norm: normalized_shape %s must match the last dims of the input %s",
                    ms_shape_str(nd, ns, b1, sizeof b1), ms_shape_str(x->ndim, x->shape, b2, sizeof b2));
  ms_tensor *p[2] = {w, b};
  for (int i = 0; i < 2; i++) {
    if (!p[i]) continue;
    /* a 16-bit input takes float32 parameters too (FSDP's param_dtype may leave them so) */
    ms_dtype want = ms_dtype_is_half(x->dtype) && p[i]->dtype == MS_FLOAT32 ? MS_FLOAT32 : x->dtype;
    if (nn_check_param_any("layer_norm", i ? "bias" : "weight", p[i], want, -1)) return MS_ERR_ARG;
    ok = p[i]->ndim == nd;
    for (int d = 0; ok && d < nd; d++) ok = p[i]->shape[d] == ns[d];
    if (!ok)
      return ms_error(MS_ERR_ARG, "layer_norm: %s must have the normalized shape %s, got %s",
                      i ? "bias" : "weight", ms_shape_str(nd, ns, b1, sizeof b1),
                      ms_shape_str(p[i]->ndim, p[i]->shape, b2, sizeof b2));
  }
  return MS_OK;
}

ms_tensor *native_layer_norm(ms_tensor *x, int nshape, const int64_t *ns, ms_tensor *w, ms_tensor *b,
                             double eps, native_norm_saved *saved) {
  *saved = (native_norm_saved){0};
  if (check_layer_norm(x, nshape, ns, w, b)) return NULL;
  int64_t N = 1;
  for (int d = 0; d < nshape; d++) N *= ns[d];
  int64_t M = N ? ms_tensor_numel(x) / N : 0;
  /* 16-bit x: the kernel reads parameters and writes statistics in float32 */
  ms_dtype sdt = nn_stat_dtype(x->dtype);
  ms_tensor *xc = nn_contiguous(x, x->dtype), *wc = w ? nn_contiguous(w, sdt) : NULL;
  ms_tensor *bc = b ? nn_contiguous(b, sdt) : NULL;
  ms_device dev = ms_tensor_device(x);
  ms_tensor *y = ms_tensor_new_empty_on(dev, x->ndim, x->shape, x->dtype);
  ms_tensor *mean = ms_tensor_new_empty_on(dev, 1, &M, sdt), *rstd = ms_tensor_new_empty_on(dev, 1, &M, sdt);
  ms_tensor *out = NULL;
  if (xc && (wc || !w) && (bc || !b) && y && mean && rstd) {
    native_kernels nk;
    ms_status st = native_kernels_for("layer_norm", ms_tensor_device(x), &nk);
    if (st == MS_OK)
      st = native_kernel_status(&nk, nk.k->layer_norm(&nk.x, nn_kdtype(x->dtype), M, N, ms_tensor_data(xc),
                                                      data_or_null(wc), data_or_null(bc), eps, ms_tensor_data(y),
                                                      ms_tensor_data(mean), ms_tensor_data(rstd)));
    if (st == MS_OK) out = y, y = NULL;
  }
  *saved = (native_norm_saved){xc, wc, mean, rstd};
  if (!out) native_norm_saved_release(saved);
  ms_tensor_release(bc), ms_tensor_release(y);
  return out;
}

/* ---- batch_norm ---------------------------------------------------------------------------------- */

ms_status native_batch_norm_backward(const native_norm_saved *s, bool training, ms_tensor *grad_output,
                                     const bool need[3], ms_tensor *grad_in[3]) {
  ms_tensor *x = s->x, *w = s->weight, *mean = s->mean, *invstd = s->invstd;
  int64_t N, C, inner;
  nn_split(x, 1, &N, &C, &inner);
  ms_tensor *g = nn_contiguous(grad_output, x->dtype);
  if (!g || !alloc_grads(need, x, 1, &C, grad_in)) return ms_tensor_release(g), MS_ERR_MEMORY;
  native_kernels nk;
  ms_status st = native_kernels_for("batch_norm backward", ms_tensor_device(x), &nk);
  if (st == MS_OK)
    st = native_kernel_status(&nk, nk.k->batch_norm_backward(&nk.x, nn_kdtype(x->dtype), N, C, inner,
                                                             ms_tensor_data(x), ms_tensor_data(g),
                                                             ms_tensor_data(mean), ms_tensor_data(invstd),
                                                             data_or_null(w), training, data_or_null(grad_in[0]),
                                                             data_or_null(grad_in[1]), data_or_null(grad_in[2])));
  ms_tensor_release(g);
  if (st != MS_OK) nn_release_all(3, grad_in);
  return st;
}

bool native_batch_norm_half(const ms_tensor *x) {
  return ms_dtype_is_half(x->dtype) && ms_tensor_device(x).type != MS_CPU;
}

/* A parameter or running statistic of a 16-bit x may be x's dtype or float32 (as layer_norm's). */
static ms_status check_bn_param(const char *arg, const ms_tensor *p, const ms_tensor *x, int64_t C) {
  ms_dtype want = p && ms_dtype_is_half(x->dtype) && p->dtype == MS_FLOAT32 ? MS_FLOAT32 : x->dtype;
  return nn_check_param_any("batch_norm", arg, p, want, C);
}

static ms_status check_batch_norm(ms_tensor *x, ms_tensor *rm, ms_tensor *rv, ms_tensor *w, ms_tensor *b,
                                  bool training) {
  char buf[MS_SHAPE_STR_LEN];
  if ((native_batch_norm_half(x) ? nn_check_float_or_half_any : nn_check_float_any)("batch_norm", "input", x))
    return MS_ERR_ARG;
  if (x->ndim < 2)
    return ms_error(MS_ERR_ARG, "batch_norm: input must have at least 2 dims (N, C, ...), got %s",
                    ms_shape_str(x->ndim, x->shape, buf, sizeof buf));
  int64_t C = x->shape[1];
  if (check_bn_param("running_mean", rm, x, C) || check_bn_param("running_var", rv, x, C) ||
      check_bn_param("weight", w, x, C) || check_bn_param("bias", b, x, C) ||
      ms_check_same_device("batch_norm", 5, (ms_tensor *[]){x, rm, rv, w, b}))
    return MS_ERR_ARG;
  if (!training && (!rm || !rv))
    return ms_error(MS_ERR_ARG, "batch_norm: running_mean and running_var are required in evaluation mode");
  if (training && ms_tensor_numel(x) / C <= 1)
    return ms_error(MS_ERR_ARG, "batch_norm: expected more than 1 value per channel when training, "
                    "got input %s",
                    ms_shape_str(x->ndim, x->shape, buf, sizeof buf));
  return MS_OK;
}

static ms_tensor *scaled(ms_tensor *t, double k) {
  return native_binary(MS_OP_MUL, ms_operand_tensor(t), ms_operand_number(k, MS_FLOAT64));
}

/* 1 / sqrt(var + eps), a new tensor. */
static ms_tensor *inverse_std(ms_tensor *var, double eps) {
  ms_tensor *v = native_binary(MS_OP_ADD, ms_operand_tensor(var), ms_operand_number(eps, MS_FLOAT64));
  ms_tensor *r = v ? native_unary(MS_OP_RSQRT, v) : NULL;
  ms_tensor_release(v);
  return r;
}

/* running = (1 - momentum) running + momentum * batch, in place; computed in batch's dtype (a
 * 16-bit running statistic in float32, rounded once as it is stored, as a widened one is). */
static ms_status update_running(ms_tensor *running, ms_tensor *batch, double momentum) {
  ms_tensor *r = native_to_dtype(running, batch->dtype);
  ms_tensor *a = r ? scaled(r, 1 - momentum) : NULL, *c = a ? scaled(batch, momentum) : NULL;
  ms_tensor *s = c ? native_binary(MS_OP_ADD, ms_operand_tensor(a), ms_operand_tensor(c)) : NULL;
  ms_status st = s ? native_copy_(running, s) : MS_ERR_MEMORY;
  ms_tensor_release(r), ms_tensor_release(a), ms_tensor_release(c), ms_tensor_release(s);
  return st;
}

/* The statistics to normalize with (new references in *mean, *invstd), in xc's statistics dtype
 * (float32 for a 16-bit xc). */
static ms_status batch_stats(ms_tensor *xc, ms_tensor *rm, ms_tensor *rv, bool training, double momentum,
                             double eps, ms_tensor **mean, ms_tensor **invstd) {
  int64_t N, C, inner;
  nn_split(xc, 1, &N, &C, &inner);
  ms_dtype sdt = nn_stat_dtype(xc->dtype);
  *invstd = NULL;
  if (!training) {
    *mean = nn_contiguous(rm, sdt);
    ms_tensor *v = *mean ? nn_contiguous(rv, sdt) : NULL;
    *invstd = v ? inverse_std(v, eps) : NULL;
    ms_tensor_release(v);
    return *invstd ? MS_OK : MS_ERR_MEMORY;
  }
  *mean = ms_tensor_new_empty_on(ms_tensor_device(xc), 1, &C, sdt);
  ms_tensor *var = *mean ? ms_tensor_new_empty_on(ms_tensor_device(xc), 1, &C, sdt) : NULL;
  if (!var) return MS_ERR_MEMORY;
  native_kernels nk;
  ms_status st = native_kernels_for("batch_norm", ms_tensor_device(xc), &nk);
  if (st == MS_OK)
    st = native_kernel_status(&nk, nk.k->batch_norm_stats(&nk.x, nn_kdtype(xc->dtype), N, C, inner,
                                                          ms_tensor_data(xc), ms_tensor_data(*mean),
                                                          ms_tensor_data(var)));
  if (st != MS_OK) return ms_tensor_release(var), st;
  double count = (double)N * (double)inner;
  ms_tensor *unbiased = rv ? scaled(var, count / (count - 1)) : NULL; /* Bessel's correction */
  if (rv && !unbiased) st = MS_ERR_MEMORY;
  if (st == MS_OK && rm) st = update_running(rm, *mean, momentum);
  if (st == MS_OK && rv) st = update_running(rv, unbiased, momentum);
  if (st == MS_OK && !(*invstd = inverse_std(var, eps))) st = MS_ERR_MEMORY;
  ms_tensor_release(var), ms_tensor_release(unbiased);
  return st;
}

ms_tensor *native_batch_norm(ms_tensor *x, ms_tensor *rm, ms_tensor *rv, ms_tensor *w, ms_tensor *b, bool training,
                             double momentum, double eps, native_norm_saved *saved) {
  *saved = (native_norm_saved){0};
  if (check_batch_norm(x, rm, rv, w, b, training)) return NULL;
  /* 16-bit x (CUDA): the kernels read parameters and statistics in float32 */
  ms_dtype sdt = nn_stat_dtype(x->dtype);
  ms_tensor *xc = nn_contiguous(x, x->dtype), *wc = w ? nn_contiguous(w, sdt) : NULL;
  ms_tensor *bc = b ? nn_contiguous(b, sdt) : NULL, *mean = NULL, *invstd = NULL, *out = NULL;
  bool ready = xc && (wc || !w) && (bc || !b);
  if (ready && batch_stats(xc, rm, rv, training, momentum, eps, &mean, &invstd) == MS_OK &&
      (out = ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype))) {
    int64_t N, C, inner;
    nn_split(xc, 1, &N, &C, &inner);
    native_kernels nk;
    if (native_kernels_for("batch_norm", ms_tensor_device(x), &nk) != MS_OK ||
        native_kernel_status(&nk, nk.k->batch_norm_apply(&nk.x, nn_kdtype(x->dtype), N, C, inner,
                                                         ms_tensor_data(xc), ms_tensor_data(mean),
                                                         ms_tensor_data(invstd), data_or_null(wc),
                                                         data_or_null(bc), ms_tensor_data(out))) != MS_OK)
      ms_tensor_release(out), out = NULL;
  }
  *saved = (native_norm_saved){xc, wc, mean, invstd};
  if (!out) native_norm_saved_release(saved);
  ms_tensor_release(bc);
  return out;
}
