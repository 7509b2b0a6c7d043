/* optim.c: the engine side of the fused optimizer steps: optimizer state allocated as its own
 * memory category, and the checks every tensor of a step passes (dtype, shape, layout, released
 * storage) before the kernel sees raw pointers. */
#include <string.h>

#include "moonshard/optim.h"
#include "native/dispatch.h"
#include "optim/optim_internal.h"

ms_tensor *ms_optim_state_new(const ms_tensor *param, double value) {
  int64_t numel = ms_tensor_numel(param), strides[MS_MAX_DIMS];
  size_t nbytes = (size_t)numel * ms_dtype_size(param->dtype);
  /* counted as optimizer state, so memory_stats shows what the optimizer holds */
  ms_storage *s = ms_storage_new_on(ms_tensor_device(param), nbytes, MS_MEM_OPTIMIZER); /* beside param */
  if (!s) return NULL;
  int64_t acc = 1;
  for (int d = param->ndim - 1; d >= 0; d--) {
    strides[d] = acc;
    acc *= param->shape[d] > 0 ? param->shape[d] : 1;
  }
  ms_tensor *t = ms_tensor_new_view(s, param->dtype, param->ndim, param->shape, strides, 0);
  ms_storage_release(s);
  if (t && ms_tensor_fill_(t, value) != MS_OK) ms_tensor_release(t), t = NULL;
  return t;
}

static bool same_shape(const ms_tensor *a, const ms_tensor *b) {
  return a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* A tensor the step reads or writes alongside param: same shape and dtype (a grad may be a 16-bit
 * float instead: `low`), readable; written ones must be contiguous too. */
ms_status optim_check_like(const char *op, const char *arg, const ms_tensor *param,
                           const ms_tensor *t, bool written, bool low) {
  char want[MS_SHAPE_STR_LEN], got[MS_SHAPE_STR_LEN];
  if (!t) return ms_error(MS_ERR_ARG, "%s: %s is required by the options given", op, arg);
  if (!same_shape(param, t))
    return ms_error(MS_ERR_ARG, "%s: %s must have the parameter's shape %s, got %s", op, arg,
                    ms_shape_str(param->ndim, param->shape, want, sizeof want),
                    ms_shape_str(t->ndim, t->shape, got, sizeof got));
  if (t->dtype != param->dtype && !(low && ms_dtype_is_half(t->dtype)))
    return ms_error(MS_ERR_ARG, "%s: %s must have the parameter's dtype %s%s, got %s", op, arg,
                    ms_dtype_name(param->dtype), low ? " (or bfloat16 or float16)" : "", ms_dtype_name(t->dtype));
  if (written && !ms_tensor_is_contiguous(t))
    return ms_error(MS_ERR_ARG, "%s: %s must be contiguous", op, arg);
  if (ms_check_same_device(op, 2, (ms_tensor *[]){(ms_tensor *)param, (ms_tensor *)t}) != MS_OK) return MS_ERR_ARG;
  return ms_tensor_check_data_any(op, t);
}

/* The checks shared by every step; *g receives a contiguous grad of param's dtype (new
 * reference): a 16-bit grad (FSDP's keep_low_precision_grads) is widened exactly here, so every
 * update computes as it does on a grad of the parameter's dtype. */
ms_status optim_check_step_named(const char *op, const char *pname, const char *gname,
                                 ms_tensor *param, ms_tensor *grad, ms_tensor **g) {
  *g = NULL;
  if (!param || !grad) return ms_error(MS_ERR_ARG, "%s: %s and %s are required", op, pname, gname);
  if (param->dtype != MS_FLOAT32 && param->dtype != MS_FLOAT64)
    return ms_error(MS_ERR_ARG, "%s: %s must be float32 or float64, got %s", op, pname,
                    ms_dtype_name(param->dtype));
  if (!ms_tensor_is_contiguous(param))
    return ms_error(MS_ERR_ARG, "%s: %s must be contiguous", op, pname);
  /* every step has a CUDA kernel: param may be on any device (check_like keeps the rest on it) */
  ms_status st = ms_tensor_check_data_any(op, param);
  if (st == MS_OK) st = optim_check_like(op, gname, param, grad, false, true);
  if (st != MS_OK) return st;
  /* a strided gradient (an expanded or transposed view) is packed once here */
  *g = grad->dtype != param->dtype ? ms_tensor_to_dtype(grad, param->dtype) : ms_tensor_contiguous(grad);
  return *g ? MS_OK : MS_ERR_MEMORY;
}

static ms_status check_step(const char *op, ms_tensor *param, ms_tensor *grad, ms_tensor **g) {
  return optim_check_step_named(op, "param", "grad", param, grad, g);
}

/* Checks each state that the options use (NULL entries of `used` are skipped). */
static ms_status check_states(const char *op, ms_tensor *param, int n, ms_tensor *const *states,
                              const char *const *names, const bool *used) {
  for (int i = 0; i < n; i++) {
    if (!used[i]) continue;
    ms_status st = optim_check_like(op, names[i], param, states[i], true, false);
    if (st != MS_OK) return st;
  }
  return MS_OK;
}

static void *data_or_null(ms_tensor *t, bool used) { return used ? ms_tensor_data(t) : NULL; }

/* The kernels of param's device (every tensor of a step is on it: check_like). */
static ms_status step_kernels(const char *op, const ms_tensor *param, native_kernels *nk) {
  return native_kernels_for(op, ms_tensor_device(param), nk);
}

ms_k_sgd_hp optim_sgd_hp(const ms_sgd_options *o, bool init_buffer) {
  return (ms_k_sgd_hp){o->lr, o->momentum, o->dampening, o->weight_decay, o->nesterov, o->maximize,
                       init_buffer};
}

ms_k_adam_hp optim_adam_hp(const ms_adam_options *o) {
  return (ms_k_adam_hp){o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, (double)o->step,
                        o->amsgrad, o->maximize, o->decoupled};
}

ms_k_adadelta_hp optim_adadelta_hp(const ms_adadelta_options *o) {
  return (ms_k_adadelta_hp){o->lr, o->rho, o->eps, o->weight_decay, o->maximize};
}

ms_status ms_optim_sgd_step(ms_tensor *param, ms_tensor *grad, ms_tensor *momentum_buffer,
                            bool init_buffer, const ms_sgd_options *o) {
  static const char *const names[] = {"momentum_buffer"};
  bool used[] = {o->momentum != 0};
  ms_tensor *g;
  ms_status st = check_step("sgd_step", param, grad, &g);
  if (st == MS_OK) st = check_states("sgd_step", param, 1, &momentum_buffer, names, used);
  if (st == MS_OK) {
    ms_k_sgd_hp hp = optim_sgd_hp(o, init_buffer);
    native_kernels nk;
    st = step_kernels("sgd_step", param, &nk);
    if (st == MS_OK)
      st = native_kernel_status(&nk, nk.k->sgd_step(&nk.x, (ms_k_dtype)param->dtype, ms_tensor_numel(param),
                                                    ms_tensor_data(param), ms_tensor_data(g),
                                                    data_or_null(momentum_buffer, used[0]), &hp));
    if (st == MS_OK) ms_tensor_bump_version(param);
  }
  ms_tensor_release(g);
  return st;
}

ms_status ms_optim_adam_step(ms_tensor *param, ms_tensor *grad, ms_tensor *exp_avg,
                             ms_tensor *exp_avg_sq, ms_tensor *max_exp_avg_sq,
                             const ms_adam_options *o) {
  static const char *const names[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  ms_tensor *states[] = {exp_avg, exp_avg_sq, max_exp_avg_sq};
  bool used[] = {true, true, o->amsgrad};
  const char *op = o->decoupled ? "adamw_step" : "adam_step";
  ms_tensor *g;
  ms_status st = check_step(op, param, grad, &g);
  if (st == MS_OK) st = check_states(op, param, 3, states, names, used);
  if (st == MS_OK && o->step < 1) st = ms_error(MS_ERR_ARG, "%s: step must be >= 1, got %lld", op, (long long)o->step);
  if (st == MS_OK) {
    ms_k_adam_hp hp = optim_adam_hp(o);
    native_kernels nk;
    st = step_kernels(op, param, &nk);
    if (st == MS_OK)
      st = native_kernel_status(&nk, nk.k->adam_step(&nk.x, (ms_k_dtype)param->dtype, ms_tensor_numel(param),
                                                     ms_tensor_data(param), ms_tensor_data(g),
                                                     ms_tensor_data(exp_avg), ms_tensor_data(exp_avg_sq),
                                                     data_or_null(max_exp_avg_sq, used[2]), &hp));
    if (st == MS_OK) ms_tensor_bump_version(param);
  }
  ms_tensor_release(g);
  return st;
}

ms_status ms_optim_adadelta_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg,
                                 ms_tensor *acc_delta, const ms_adadelta_options *o) {
  static const char *const names[] = {"square_avg", "acc_delta"};
  ms_tensor *states[] = {square_avg, acc_delta};
  bool used[] = {true, true};
  ms_tensor *g;
  ms_status st = check_step("adadelta_step", param, grad, &g);
  if (st == MS_OK) st = check_states("adadelta_step", param, 2, states, names, used);
  if (st == MS_OK) {
    ms_k_adadelta_hp hp = optim_adadelta_hp(o);
    native_kernels nk;
    st = step_kernels("adadelta_step", param, &nk);
    if (st == MS_OK)
      st = native_kernel_status(&nk, nk.k->adadelta_step(&nk.x, (ms_k_dtype)param->dtype, ms_tensor_numel(param),
                                                         ms_tensor_data(param), ms_tensor_data(g),
                                                         ms_tensor_data(square_avg), ms_tensor_data(acc_delta),
                                                         &hp));
    if (st == MS_OK) ms_tensor_bump_version(param);
  }
  ms_tensor_release(g);
  return st;
}

ms_status ms_optim_adagrad_step(ms_tensor *param, ms_tensor *grad, ms_tensor *state_sum,
                                const ms_adagrad_options *o) {
  static const char *const names[] = {"sum"};
  bool used[] = {true};
  ms_tensor *g;
  ms_status st = check_step("adagrad_step", param, grad, &g);
  if (st == MS_OK) st = check_states("adagrad_step", param, 1, &state_sum, names, used);
  if (st == MS_OK && o->step < 1) st = ms_error(MS_ERR_ARG, "adagrad_step: step must be >= 1, got %lld", (long long)o->step);
  if (st == MS_OK) {
    ms_k_adagrad_hp hp = {o->lr, o->lr_decay, o->weight_decay, o->eps, (double)o->step, o->maximize};
    native_kernels nk;
    st = step_kernels("adagrad_step", param, &nk);
    if (st == MS_OK)
      st = native_kernel_status(&nk, nk.k->adagrad_step(&nk.x, (ms_k_dtype)param->dtype, ms_tensor_numel(param),
                                                        ms_tensor_data(param), ms_tensor_data(g),
                                                        ms_tensor_data(state_sum), &hp));
    if (st == MS_OK) ms_tensor_bump_version(param);
  }
  ms_tensor_release(g);
  return st;
}

ms_status ms_optim_rmsprop_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg,
                                ms_tensor *grad_avg, ms_tensor *momentum_buffer,
                                const ms_rmsprop_options *o) {
  static const char *const names[] = {"square_avg", "grad_avg", "momentum_buffer"};
  ms_tensor *states[] = {square_avg, grad_avg, momentum_buffer};
  bool used[] = {true, o->centered, o->momentum > 0};
  ms_tensor *g;
  ms_status st = check_step("rmsprop_step", param, grad, &g);
  if (st == MS_OK) st = check_states("rmsprop_step", param, 3, states, names, used);
  if (st == MS_OK) {
    ms_k_rmsprop_hp hp = {o->lr, o->alpha, o->eps, o->weight_decay, o->momentum, o->centered,
                          o->maximize};
    native_kernels nk;
    st = step_kernels("rmsprop_step", param, &nk);
    if (st == MS_OK)
      st = native_kernel_status(&nk, nk.k->rmsprop_step(&nk.x, (ms_k_dtype)param->dtype, ms_tensor_numel(param),
                                                        ms_tensor_data(param), ms_tensor_data(g),
                                                        ms_tensor_data(square_avg), data_or_null(grad_avg, used[1]),
                                                        data_or_null(momentum_buffer, used[2]), &hp));
    if (st == MS_OK) ms_tensor_bump_version(param);
  }
  ms_tensor_release(g);
  return st;
}
