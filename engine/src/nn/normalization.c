/* normalization.c: layer_norm and batch_norm. The forwards keep the mean and inverse standard
 * deviation they computed, so the backwards need one pass over x and the gradient. */
#include <math.h>

#include "autograd/grad_util.h"
#include "cuda/cuda_ops.h"
#include "moonshard/nn_ops.h"
#include "nn/nn_internal.h"

/* Slots of both nodes: 0 = x (contiguous), 1 = weight or empty, 2 = mean, 3 = inverse std. */
static bool load(ms_node *n, ms_tensor **x, ms_tensor **w, ms_tensor **mean, ms_tensor **rstd) {
  return ms_nn_saved(n, 0, x) && ms_nn_saved(n, 1, w) && ms_nn_saved(n, 2, mean) && ms_nn_saved(n, 3, rstd);
}

static void *data_or_null(ms_tensor *t) { return t ? ms_tensor_data(t) : NULL; }
static bool on_cuda(const ms_tensor *t) { return ms_tensor_device(t).type == MS_CUDA; }

/* New zero-free buffers for the gradients the node's edges need (NULL for the rest); false when
 * memory ran out. shape/ndim: of x (slot 0) and of the parameters (slots 1, 2). */
static bool alloc_grads(ms_node *n, const ms_tensor *x, int pndim, const int64_t *pshape,
                        ms_tensor **grad_in) {
  for (int i = 0; i < 3; i++) {
    if (!ms_grad_needed(n, i)) continue;
    grad_in[i] = i == 0 ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype)
                        : ms_tensor_new_empty_on(ms_tensor_device(x), pndim, pshape, x->dtype);
    if (!grad_in[i]) return false;
  }
  return true;
}

static void save_stats(ms_node *n, ms_tensor *x, ms_tensor *w, ms_tensor *mean, ms_tensor *rstd) {
  ms_node_save(n, x);
  ms_nn_save(n, w);
  ms_node_save(n, mean);
  ms_node_save(n, rstd);
}

/* ---- layer_norm ---------------------------------------------------------------------------------- */

/* ints[0] = number of normalized dims. */
static ms_status layer_norm_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *x, *w, *mean, *rstd;
  if (!load(n, &x, &w, &mean, &rstd)) return MS_ERR_RUNTIME;
  int nd = (int)n->ints[0];
  int64_t M = ms_tensor_numel(mean), N = M ? ms_tensor_numel(x) / M : 0;
  ms_tensor *g = ms_nn_contiguous(grad_out[0], x->dtype);
  if (!g || !alloc_grads(n, x, nd, x->shape + x->ndim - nd, grad_in))
    return ms_tensor_release(g), MS_ERR_MEMORY;
  ms_status st = MS_OK;
  if (on_cuda(x))
    st = ms_cuda_layer_norm_backward(M, N, x, g, mean, rstd, w, grad_in[0], grad_in[1], grad_in[2]);
  else
    ms_k_layer_norm_backward(ms_nn_kdtype(x->dtype), M, N, ms_tensor_data(x), ms_tensor_data(g),
                             ms_tensor_data(mean), ms_tensor_data(rstd), data_or_null(w),
                             data_or_null(grad_in[0]), data_or_null(grad_in[1]), data_or_null(grad_in[2]));
  ms_tensor_release(g);
  return st;
}

static ms_status check_layer_norm(ms_tensor *x, int nd, const int64_t *ns, ms_tensor *w, ms_tensor *b) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  if (ms_nn_check_float_any("layer_norm", "input", x)) return MS_ERR_ARG;
  if (ms_check_same_device("layer_norm", 3, (ms_tensor *[]){x, w, b})) return MS_ERR_ARG;
  bool ok = nd >= 1 && nd <= x->ndim;
  for (int d = 0; ok && d < nd; d++) ok = x->shape[x->ndim - nd + d] == ns[d];
  if (!ok)
    return ms_error(MS_ERR_ARG, "layer_norm: normalized_shape %s must match the last dims of the input %s",
                    ms_shape_str(nd, ns, b1, sizeof b1), ms_shape_str(x->ndim, x->shape, b2, sizeof b2));
  ms_tensor *p[2] = {w, b};
  for (int i = 0; i < 2; i++) {
    if (!p[i]) continue;
    if (ms_nn_check_param_any("layer_norm", i ? "bias" : "weight", p[i], x->dtype, -1)) return MS_ERR_ARG;
    ok = p[i]->ndim == nd;
    for (int d = 0; ok && d < nd; d++) ok = p[i]->shape[d] == ns[d];
    if (!ok)
      return ms_error(MS_ERR_ARG, "layer_norm: %s must have the normalized shape %s, got %s",
                      i ? "bias" : "weight", ms_shape_str(nd, ns, b1, sizeof b1),
                      ms_shape_str(p[i]->ndim, p[i]->shape, b2, sizeof b2));
  }
  return MS_OK;
}

ms_tensor *ms_layer_norm(ms_tensor *x, int nshape, const int64_t *ns, ms_tensor *w, ms_tensor *b,
                         double eps) {
  if (check_layer_norm(x, nshape, ns, w, b)) return NULL;
  int64_t N = 1;
  for (int d = 0; d < nshape; d++) N *= ns[d];
  int64_t M = N ? ms_tensor_numel(x) / N : 0;
  ms_tensor *xc = ms_nn_contiguous(x, x->dtype), *wc = w ? ms_nn_contiguous(w, x->dtype) : NULL;
  ms_tensor *bc = b ? ms_nn_contiguous(b, x->dtype) : NULL;
  ms_device dev = ms_tensor_device(x);
  ms_tensor *y = ms_tensor_new_empty_on(dev, x->ndim, x->shape, x->dtype);
  ms_tensor *mean = ms_tensor_new_empty_on(dev, 1, &M, x->dtype), *rstd = ms_tensor_new_empty_on(dev, 1, &M, x->dtype);
  ms_tensor *ins[3] = {x, w, b}, *out = NULL;
  if (xc && (wc || !w) && (bc || !b) && y && mean && rstd) {
    ms_status st = MS_OK;
    if (on_cuda(x))
      st = ms_cuda_layer_norm(M, N, xc, wc, bc, eps, y, mean, rstd);
    else
      ms_k_layer_norm(ms_nn_kdtype(x->dtype), M, N, ms_tensor_data(xc), data_or_null(wc), data_or_null(bc), eps,
                      ms_tensor_data(y), ms_tensor_data(mean), ms_tensor_data(rstd));
    if (st == MS_OK) out = y, y = NULL;
  }
  bool wants = out && ms_autograd_wants(3, ins);
  ms_node *n = wants ? ms_node_new("NativeLayerNormBackward0", layer_norm_backward, 3, ins) : NULL;
  if (n) {
    n->ints[0] = nshape;
    save_stats(n, xc, wc, mean, rstd);
    ms_node_attach(n, out, 0);
    ms_node_release(n);
  } else if (wants) {
    ms_tensor_release(out), out = NULL;
  }
  ms_tensor_release(xc), ms_tensor_release(wc), ms_tensor_release(bc), ms_tensor_release(y);
  ms_tensor_release(mean), ms_tensor_release(rstd);
  return out;
}

/* ---- batch_norm ---------------------------------------------------------------------------------- */

/* ints[0] = training. */
static ms_status batch_norm_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *x, *w, *mean, *invstd;
  if (!load(n, &x, &w, &mean, &invstd)) return MS_ERR_RUNTIME;
  int64_t N, C, inner;
  ms_nn_split(x, 1, &N, &C, &inner);
  ms_tensor *g = ms_nn_contiguous(grad_out[0], x->dtype);
  if (!g || !alloc_grads(n, x, 1, &C, grad_in)) return ms_tensor_release(g), MS_ERR_MEMORY;
  ms_status st = MS_OK;
  if (on_cuda(x))
    st = ms_cuda_batch_norm_backward(N, C, inner, x, g, mean, invstd, w, (int)n->ints[0], grad_in[0], grad_in[1],
                                     grad_in[2]);
  else
    ms_k_batch_norm_backward(ms_nn_kdtype(x->dtype), N, C, inner, ms_tensor_data(x), ms_tensor_data(g),
                             ms_tensor_data(mean), ms_tensor_data(invstd), data_or_null(w), (int)n->ints[0],
                             data_or_null(grad_in[0]), data_or_null(grad_in[1]), data_or_null(grad_in[2]));
  ms_tensor_release(g);
  return st;
}

static ms_status check_batch_norm(ms_tensor *x, ms_tensor *rm, ms_tensor *rv, ms_tensor *w, ms_tensor *b,
                                  bool training) {
  char buf[MS_SHAPE_STR_LEN];
  if (ms_nn_check_float_any("batch_norm", "input", x)) return MS_ERR_ARG;
  if (x->ndim < 2)
    return ms_error(MS_ERR_ARG, "batch_norm: input must have at least 2 dims (N, C, ...), got %s",
                    ms_shape_str(x->ndim, x->shape, buf, sizeof buf));
  int64_t C = x->shape[1];
  if (ms_nn_check_param_any("batch_norm", "running_mean", rm, x->dtype, C) ||
      ms_nn_check_param_any("batch_norm", "running_var", rv, x->dtype, C) ||
      ms_nn_check_param_any("batch_norm", "weight", w, x->dtype, C) ||
      ms_nn_check_param_any("batch_norm", "bias", b, x->dtype, C) ||
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
  return ms_binary(MS_OP_MUL, ms_operand_tensor(t), ms_operand_number(k, MS_FLOAT64));
}

/* 1 / sqrt(var + eps), a new tensor. */
static ms_tensor *inverse_std(ms_tensor *var, double eps) {
  ms_tensor *v = ms_binary(MS_OP_ADD, ms_operand_tensor(var), ms_operand_number(eps, MS_FLOAT64));
  ms_tensor *r = v ? ms_unary(MS_OP_RSQRT, v) : NULL;
  ms_tensor_release(v);
  return r;
}

/* running = (1 - momentum) running + momentum * batch, in place. */
static ms_status update_running(ms_tensor *running, ms_tensor *batch, double momentum) {
  ms_tensor *a = scaled(running, 1 - momentum), *c = a ? scaled(batch, momentum) : NULL;
  ms_tensor *s = c ? ms_binary(MS_OP_ADD, ms_operand_tensor(a), ms_operand_tensor(c)) : NULL;
  ms_status st = s ? ms_tensor_copy_(running, s) : MS_ERR_MEMORY;
  ms_tensor_release(a), ms_tensor_release(c), ms_tensor_release(s);
  return st;
}

/* The statistics to normalize with (new references in *mean, *invstd); grad mode is off. */
static ms_status batch_stats(ms_tensor *xc, ms_tensor *rm, ms_tensor *rv, bool training, double momentum,
                             double eps, ms_tensor **mean, ms_tensor **invstd) {
  int64_t N, C, inner;
  ms_nn_split(xc, 1, &N, &C, &inner);
  *invstd = NULL;
  if (!training) {
    *mean = ms_nn_contiguous(rm, xc->dtype);
    ms_tensor *v = *mean ? ms_nn_contiguous(rv, xc->dtype) : NULL;
    *invstd = v ? inverse_std(v, eps) : NULL;
    ms_tensor_release(v);
    return *invstd ? MS_OK : MS_ERR_MEMORY;
  }
  *mean = ms_tensor_new_empty_on(ms_tensor_device(xc), 1, &C, xc->dtype);
  ms_tensor *var = *mean ? ms_tensor_new_empty_on(ms_tensor_device(xc), 1, &C, xc->dtype) : NULL;
  if (!var) return MS_ERR_MEMORY;
  ms_status st = MS_OK;
  if (on_cuda(xc))
    st = ms_cuda_batch_norm_stats(N, C, inner, xc, *mean, var);
  else
    ms_k_batch_norm_stats(ms_nn_kdtype(xc->dtype), N, C, inner, ms_tensor_data(xc), ms_tensor_data(*mean),
                          ms_tensor_data(var));
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

static ms_tensor *batch_norm_record(ms_tensor *out, ms_tensor *const ins[3], ms_tensor *xc, ms_tensor *wc,
                                    ms_tensor *mean, ms_tensor *invstd, bool training) {
  if (!out || !ms_autograd_wants(3, ins)) return out;
  ms_node *n = ms_node_new("NativeBatchNormBackward0", batch_norm_backward, 3, ins);
  if (!n) return ms_tensor_release(out), NULL;
  n->ints[0] = training;
  save_stats(n, xc, wc, mean, invstd);
  ms_node_attach(n, out, 0);
  ms_node_release(n);
  return out;
}

ms_tensor *ms_batch_norm(ms_tensor *x, ms_tensor *rm, ms_tensor *rv, ms_tensor *w, ms_tensor *b,
                         bool training, double momentum, double eps) {
  if (check_batch_norm(x, rm, rv, w, b, training)) return NULL;
  bool prev = ms_grad_set_enabled(false);
  ms_tensor *xc = ms_nn_contiguous(x, x->dtype), *wc = w ? ms_nn_contiguous(w, x->dtype) : NULL;
  ms_tensor *bc = b ? ms_nn_contiguous(b, x->dtype) : NULL, *mean = NULL, *invstd = NULL, *out = NULL;
  bool ready = xc && (wc || !w) && (bc || !b);
  if (ready && batch_stats(xc, rm, rv, training, momentum, eps, &mean, &invstd) == MS_OK &&
      (out = ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype))) {
    int64_t N, C, inner;
    ms_nn_split(xc, 1, &N, &C, &inner);
    if (!on_cuda(x))
      ms_k_batch_norm_apply(ms_nn_kdtype(x->dtype), N, C, inner, ms_tensor_data(xc), ms_tensor_data(mean),
                            ms_tensor_data(invstd), data_or_null(wc), data_or_null(bc), ms_tensor_data(out));
    else if (ms_cuda_batch_norm_apply(N, C, inner, xc, mean, invstd, wc, bc, out) != MS_OK)
      ms_tensor_release(out), out = NULL;
  }
  ms_grad_set_enabled(prev);
  ms_tensor *ins[3] = {x, w, b};
  out = batch_norm_record(out, ins, xc, wc, mean, invstd, training);
  ms_tensor_release(xc), ms_tensor_release(wc), ms_tensor_release(bc);
  ms_tensor_release(mean), ms_tensor_release(invstd);
  return out;
}
