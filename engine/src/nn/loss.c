/* loss.c: the native nll_loss, cross_entropy (log_softmax fused with nll_loss, with label smoothing) and
 * mse_loss. Class targets are checked once here so the kernels can trust them; the Lua face's
 * 1-based targets arrive with index_base 1 and are never copied to shift them. */
#include "native/dispatch.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"

static ms_tensor *scaled(ms_tensor *t, double k) {
  return native_binary(MS_OP_MUL, ms_operand_tensor(t), ms_operand_number(k, MS_FLOAT64));
}

void native_nll_saved_release(native_nll_saved *s) {
  ms_tensor_release(s->target), ms_tensor_release(s->weight), ms_tensor_release(s->logp);
  ms_tensor_release(s->weight_sum);
  s->target = s->weight = s->logp = s->weight_sum = NULL;
}

ms_tensor *native_nll_backward(const native_nll_saved *s, ms_tensor *grad_output, int in_ndim,
                               const int64_t *in_shape, ms_dtype dt) {
  ms_tensor *g = nn_contiguous(grad_output, dt);
  /* the input's device is its target's: a reduced loss's gradient may arrive as a CPU number */
  ms_tensor *gdev = g ? native_to_device(g, ms_tensor_device(s->target)) : NULL;
  ms_tensor_release(g), g = gdev;
  ms_tensor *gx = g ? ms_tensor_new_empty_on(ms_tensor_device(s->target), in_ndim, in_shape, dt) : NULL;
  if (gx) {
    ms_k_nll_args a = {s->N, s->C, s->inner, ms_tensor_data(s->target), s->base, s->ignore_index,
                       s->weight ? ms_tensor_data(s->weight) : NULL};
    int64_t gs = s->reduction == MS_REDUCTION_NONE ? 1 : 0;
    native_kernels nk;
    const char *op = s->logp ? "cross_entropy backward" : "nll_loss backward";
    if (native_kernels_for(op, ms_tensor_device(gx), &nk) != MS_OK ||
        /* a GPU mean: the kernel divides by the weight sum, which never left the device */
        native_kernel_status(&nk, nk.k->nll_backward(&nk.x, nn_kdtype(dt), &a,
                                                     s->logp ? ms_tensor_data(s->logp) : NULL, ms_tensor_data(g),
                                                     gs, s->weight_sum ? ms_tensor_data(s->weight_sum) : NULL,
                                                     s->nll_scale, s->smooth_scale, s->smoothing,
                                                     ms_tensor_data(gx))) != MS_OK)
      ms_tensor_release(gx), gx = NULL;
  }
  ms_tensor_release(g);
  return gx;
}

/* input (N, C, d...) with target (N, d...), or (C) with a 0-dim target. */
static ms_status check_shapes(const char *op, const ms_tensor *input, const ms_tensor *target,
                              ms_k_nll_args *a) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  bool ok = input->ndim >= 1 && target->ndim == input->ndim - 1;
  for (int d = 0; ok && d < target->ndim; d++) ok = target->shape[d] == input->shape[d == 0 ? 0 : d + 1];
  if (!ok)
    return ms_error(MS_ERR_ARG, "%s: expected input (N, C, d...) with target (N, d...) or input (C) "
                    "with a 0-dim target; got input %s and target %s", op,
                    ms_shape_str(input->ndim, input->shape, b1, sizeof b1),
                    ms_shape_str(target->ndim, target->shape, b2, sizeof b2));
  int cdim = input->ndim == 1 ? 0 : 1;
  nn_split(input, cdim, &a->N, &a->C, &a->inner);
  return MS_OK;
}

/* Every target is a class or ignore_index; the CPU kernels trust what passes here. A rule, not a
 * choice of kernels: targets on a device are checked there by the kernel, which reports a bad one
 * into its exec's bad-value slot, raised at the next synchronization (cuda_bad_values.c): reading
 * them back here would stall every training step. */
static ms_status check_targets(const char *op, const ms_k_nll_args *a, ms_tensor *target) {
  if (ms_tensor_device(target).type != MS_CPU) return MS_OK;
  const int64_t *tg = ms_tensor_data(target);
  ms_status st = MS_OK;
  for (int64_t p = 0, n = a->N * a->inner; p < n && st == MS_OK; p++) {
    int64_t t = tg[p];
    if (t == a->ignore_index || (t - a->base >= 0 && t - a->base < a->C)) continue;
    st = ms_error(MS_ERR_ARG, "%s: target %lld is out of bounds for %lld classes%s%s", op,
                  (long long)t, (long long)a->C,
                  a->base == 1 ? " (targets are 1-based class indices)" : "",
                  a->base == 1 && t == 0 ? "; 0-based labels need + 1" : "");
  }
  return st;
}

static ms_status check_loss(const char *op, ms_tensor *input, ms_tensor *target, ms_tensor *weight,
                            ms_k_nll_args *a) {
  /* CUDA's nll kernels take 16-bit log-probabilities (ms_nll_loss widens them elsewhere) */
  bool cuda_half = ms_dtype_is_half(input->dtype) && ms_tensor_device(input).type == MS_CUDA;
  if (cuda_half ? ms_tensor_check_data_any(op, input) : nn_check_float_any(op, "input", input)) return MS_ERR_ARG;
  if (nn_check_index_tensor_any(op, "target", target)) return MS_ERR_ARG;
  if (ms_check_same_device(op, 3, (ms_tensor *[]){input, target, weight})) return MS_ERR_ARG;
  if (check_shapes(op, input, target, a)) return MS_ERR_ARG;
  return nn_check_param_any(op, "weight", weight, input->dtype, a->C);
}

/* The per-position terms, combined by the reduction: (1 - s) nll + s / C smooth. *nll_scale and
 * *smooth_scale receive what the backward multiplies a scalar gradient by. */
typedef struct loss_terms {
  ms_tensor *nll, *wt, *smooth; /* contiguous, target's shape; smooth NULL without smoothing */
} loss_terms;

/* The reduced loss, computed where the terms lie in one kernel (sums in float64); *sw receives the
 * weight sum (a 0-dim float64 tensor there) that a mean divides by. */
static ms_tensor *reduce_terms(const char *op, const loss_terms *t, bool mean, double s, int64_t C, ms_tensor **sw) {
  ms_device dev = ms_tensor_device(t->nll);
  ms_tensor *out = ms_tensor_new_empty_on(dev, 0, NULL, t->nll->dtype);
  *sw = out ? ms_tensor_new_empty_on(dev, 0, NULL, MS_FLOAT64) : NULL;
  native_kernels nk;
  if (!*sw || native_kernels_for(op, dev, &nk) != MS_OK ||
      native_kernel_status(&nk, nk.k->nll_reduce(&nk.x, nn_kdtype(t->nll->dtype), ms_tensor_numel(t->nll),
                                                 ms_tensor_data(t->nll), ms_tensor_data(t->wt),
                                                 t->smooth ? ms_tensor_data(t->smooth) : NULL, s, C, mean,
                                                 ms_tensor_data(out), ms_tensor_data(*sw))) != MS_OK) {
    ms_tensor_release(out), ms_tensor_release(*sw), *sw = NULL;
    return NULL;
  }
  return out;
}

/* A reduced loss without smoothing straight from the log-probabilities: the nll_loss slot, one
 * kernel for nll_rows and nll_reduce (the same sums); *sw as reduce_terms'. */
static ms_tensor *reduce_direct(const char *op, const ms_k_nll_args *a, ms_tensor *logp, bool mean, ms_tensor **sw) {
  ms_device dev = ms_tensor_device(logp);
  ms_tensor *out = ms_tensor_new_empty_on(dev, 0, NULL, logp->dtype);
  *sw = out ? ms_tensor_new_empty_on(dev, 0, NULL, MS_FLOAT64) : NULL;
  native_kernels nk;
  if (!*sw || native_kernels_for(op, dev, &nk) != MS_OK ||
      native_kernel_status(&nk, nk.k->nll_loss(&nk.x, nn_kdtype(logp->dtype), a, ms_tensor_data(logp), mean,
                                               ms_tensor_data(out), ms_tensor_data(*sw))) != MS_OK) {
    ms_tensor_release(out), ms_tensor_release(*sw), *sw = NULL;
    return NULL;
  }
  return out;
}

/* A reduced loss out with its weight sum w. A rule, not a choice of kernels: the host never waits
 * for a device, so a mean on a device keeps its weight sum there in *sw (the backward divides its
 * incoming gradient by it); on the CPU the sum is read at no cost and the backward scales by its
 * inverse. */
static ms_tensor *finish_reduced(ms_tensor *out, ms_tensor *w, bool mean, double *nll_scale, double *smooth_scale,
                                 ms_tensor **sw) {
  if (!out) return NULL;
  if (ms_tensor_device(w).type != MS_CPU) {
    if (mean) *sw = w;
    else ms_tensor_release(w);
    return out;
  }
  double v = *(const double *)ms_tensor_data(w);
  ms_tensor_release(w);
  /* the mean divides both terms by the weight of the targets not ignored (their count when
   * unweighted), as PyTorch 1.13 does */
  *nll_scale = *smooth_scale = mean ? 1 / v : 1;
  return out;
}

static ms_tensor *combine(const char *op, const loss_terms *t, ms_reduction red, double s, int64_t C,
                          double *nll_scale, double *smooth_scale, ms_tensor **sw) {
  *nll_scale = *smooth_scale = 1;
  if (red != MS_REDUCTION_NONE) {
    bool mean = red == MS_REDUCTION_MEAN;
    ms_tensor *w, *out = reduce_terms(op, t, mean, s, C, &w);
    return finish_reduced(out, w, mean, nll_scale, smooth_scale, sw);
  }
  if (!t->smooth) return ms_tensor_retain(t->nll), t->nll;
  ms_tensor *a = scaled(t->nll, 1 - s), *b = a ? scaled(t->smooth, s / (double)C) : NULL;
  ms_tensor *out = b ? native_binary(MS_OP_ADD, ms_operand_tensor(a), ms_operand_tensor(b)) : NULL;
  ms_tensor_release(a), ms_tensor_release(b);
  return out;
}

static void terms_release(loss_terms *t) {
  ms_tensor_release(t->nll), ms_tensor_release(t->wt), ms_tensor_release(t->smooth);
}

/* Both losses after their checks: logp holds the log-probabilities (contiguous);
 * scales[] receives the backward's nll scale, smooth scale and the smoothing. */
static ms_tensor *loss_forward(const char *op, const ms_k_nll_args *a, ms_tensor *logp, ms_tensor *target,
                               ms_reduction red, double s, double scales[3], ms_tensor **sw) {
  scales[0] = scales[1] = 1, scales[2] = s;
  if (red != MS_REDUCTION_NONE && s == 0) { /* the common case in one kernel */
    bool mean = red == MS_REDUCTION_MEAN;
    ms_tensor *w, *out = reduce_direct(op, a, logp, mean, &w);
    return finish_reduced(out, w, mean, &scales[0], &scales[1], sw);
  }
  ms_dtype dt = logp->dtype;
  ms_device dev = ms_tensor_device(logp);
  loss_terms t = {ms_tensor_new_empty_on(dev, target->ndim, target->shape, dt),
                  ms_tensor_new_empty_on(dev, target->ndim, target->shape, dt),
                  s > 0 ? ms_tensor_new_empty_on(dev, target->ndim, target->shape, dt) : NULL};
  ms_tensor *out = NULL;
  native_kernels nk;
  if (t.nll && t.wt && (s == 0 || t.smooth) && native_kernels_for(op, dev, &nk) == MS_OK &&
      native_kernel_status(&nk, nk.k->nll_rows(&nk.x, nn_kdtype(dt), a, ms_tensor_data(logp),
                                               ms_tensor_data(t.nll), ms_tensor_data(t.wt),
                                               t.smooth ? ms_tensor_data(t.smooth) : NULL)) == MS_OK) {
    out = combine(op, &t, red, s, a->C, &scales[0], &scales[1], sw);
    scales[2] = s;
  }
  terms_release(&t);
  return out;
}

/* The checks and conversions of both losses; on success the caller owns *target and *weight. */
static ms_status prepare(const char *op, ms_tensor *input, ms_tensor *target_in, ms_tensor *weight_in,
                         int64_t ignore_index, int64_t base, ms_k_nll_args *a, ms_tensor **target,
                         ms_tensor **weight) {
  *a = (ms_k_nll_args){.ignore_index = ignore_index, .base = base};
  *target = *weight = NULL;
  if (check_loss(op, input, target_in, weight_in, a)) return MS_ERR_ARG;
  *target = nn_contiguous(target_in, MS_INT64);
  *weight = *target && weight_in ? nn_contiguous(weight_in, input->dtype) : NULL;
  if (!*target || (weight_in && !*weight)) return MS_ERR_MEMORY;
  a->target = ms_tensor_data(*target);
  a->weight = *weight ? ms_tensor_data(*weight) : NULL;
  return check_targets(op, a, *target);
}

/* The saved state of a loss that passed prepare(), and the loss from its log-probabilities. */
static ms_tensor *finish(const char *op, const ms_k_nll_args *a, ms_tensor *logp, ms_reduction red, double s,
                         native_nll_saved *saved) {
  double scales[3] = {1, 1, 0};
  ms_tensor *out = loss_forward(op, a, logp, saved->target, red, s, scales, &saved->weight_sum);
  saved->N = a->N, saved->C = a->C, saved->inner = a->inner;
  saved->ignore_index = a->ignore_index, saved->base = a->base, saved->reduction = red;
  saved->nll_scale = scales[0], saved->smooth_scale = scales[1], saved->smoothing = scales[2];
  return out;
}

ms_tensor *native_nll_loss(ms_tensor *input, ms_tensor *target_in, ms_tensor *weight_in, int64_t ignore_index,
                           ms_reduction reduction, int64_t index_base, native_nll_saved *saved) {
  ms_k_nll_args a;
  ms_tensor *logp = NULL, *out = NULL;
  *saved = (native_nll_saved){0};
  ms_status st = prepare("nll_loss", input, target_in, weight_in, ignore_index, index_base, &a, &saved->target,
                         &saved->weight);
  if (st == MS_OK && (logp = nn_contiguous(input, input->dtype)))
    out = finish("nll_loss", &a, logp, reduction, 0, saved);
  ms_tensor_release(logp);
  if (!out) native_nll_saved_release(saved);
  return out;
}

/* log_softmax over the class dim into a new contiguous tensor. */
static ms_tensor *class_log_softmax(ms_tensor *input, const ms_k_nll_args *a) {
  ms_tensor *xc = nn_contiguous(input, input->dtype);
  ms_tensor *logp = xc ? ms_tensor_new_empty_on(ms_tensor_device(input), input->ndim, input->shape, input->dtype) : NULL;
  if (logp && nn_softmax_rows("cross_entropy", xc, logp, a->N, a->C, a->inner, true) != MS_OK)
    ms_tensor_release(logp), logp = NULL;
  ms_tensor_release(xc);
  return logp;
}

ms_tensor *native_cross_entropy(ms_tensor *input, ms_tensor *target_in, ms_tensor *weight_in, int64_t ignore_index,
                                ms_reduction reduction, double label_smoothing, int64_t index_base,
                                native_nll_saved *saved) {
  *saved = (native_nll_saved){0};
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    return ms_error(MS_ERR_ARG, "cross_entropy: label_smoothing must be between 0.0 and 1.0, got %g",
                    label_smoothing), NULL;
  ms_k_nll_args a;
  ms_tensor *out = NULL;
  ms_status st = prepare("cross_entropy", input, target_in, weight_in, ignore_index, index_base, &a,
                         &saved->target, &saved->weight);
  if (st == MS_OK && (saved->logp = class_log_softmax(input, &a)))
    out = finish("cross_entropy", &a, saved->logp, reduction, label_smoothing, saved);
  if (!out) native_nll_saved_release(saved);
  return out;
}

/* ---- mse_loss --------------------------------------------------------------------------------- */

/* d/da = 2 (a - b) g (/ numel for mean), d/db = -that. */
ms_status native_mse_loss_backward(ms_tensor *a, ms_tensor *b, ms_reduction reduction, ms_tensor *grad_output,
                                   const bool need[2], ms_tensor *grads[2]) {
  ms_tensor *d = native_binary(MS_OP_SUB, ms_operand_tensor(a), ms_operand_tensor(b));
  double k = reduction == MS_REDUCTION_MEAN && d ? 2.0 / (double)ms_tensor_numel(d) : 2.0;
  ms_tensor *dk = d ? scaled(d, k) : NULL;
  ms_tensor *f = dk ? native_binary(MS_OP_MUL, ms_operand_tensor(dk), ms_operand_tensor(grad_output)) : NULL;
  ms_status st = f ? MS_OK : MS_ERR_MEMORY;
  grads[0] = grads[1] = NULL;
  if (st == MS_OK && need[0]) grads[0] = (ms_tensor_retain(f), f);
  if (st == MS_OK && need[1] && !(grads[1] = native_unary(MS_OP_NEG, f))) st = MS_ERR_MEMORY;
  ms_tensor_release(d), ms_tensor_release(dk), ms_tensor_release(f);
  if (st != MS_OK) nn_release_all(2, grads);
  return st;
}

static ms_tensor *mse_forward(ms_tensor *a, ms_tensor *b, ms_reduction red) {
  ms_tensor *d = native_binary(MS_OP_SUB, ms_operand_tensor(a), ms_operand_tensor(b));
  ms_tensor *sq = d ? native_unary(MS_OP_SQUARE, d) : NULL;
  ms_tensor_release(d);
  if (!sq || red == MS_REDUCTION_NONE) return sq;
  ms_reduce_op op = red == MS_REDUCTION_SUM ? MS_RED_SUM : MS_RED_MEAN;
  ms_tensor *r = native_reduce(op, sq, (ms_reduce_opts){.all = true});
  ms_tensor_release(sq);
  return r;
}

ms_tensor *native_mse_loss(ms_tensor *a, ms_tensor *b, ms_reduction reduction) {
  if (nn_check_float_any("mse_loss", "input", a) || nn_check_float_any("mse_loss", "target", b)) return NULL;
  return mse_forward(a, b, reduction);
}
