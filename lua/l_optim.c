/* l_optim.c: the low-level fused optimizer steps as ms._optim.<name>_step(param, grad, states...,
 * opts), their multi-tensor forms <name>_step_list(params, grads, state arrays..., opts, hp) (one
 * engine call for many parameters; hp: the device numbers of a captured step), <name>_slots(opts)
 * (those numbers) and ms._optim.state(param, value). The optimizer classes of
 * lua/moonshard/optim.lua own the state and the per-group options and call these. */
#include <limits.h>
#include <string.h>

#include "ms_lua.h"

/* A state tensor argument that may be nil (options that do not use it). */
static ms_tensor *opt_tensor(lua_State *L, int idx, const char *fname) {
  return lua_isnoneornil(L, idx) ? NULL : ms_lua_check_tensor(L, idx, fname);
}

static int64_t opt_step(ms_lua_opts o) {
  int64_t step = 1;
  bind_opt_integer(o, "step", &step);
  return step;
}

/* state(param, value = 0): a zero (or value-filled) tensor like param, counted as optimizer
 * memory. */
static int l_state(lua_State *L) {
  ms_tensor *p = ms_lua_check_tensor(L, 1, "_optim.state");
  double value = luaL_optnumber(L, 2, 0);
  return bind_push_result(L, ms_optim_state_new(p, value));
}

static const char *const sgd_known[] = {"lr", "momentum", "dampening", "weight_decay", "nesterov",
                                        "maximize", "init", NULL};

static ms_sgd_options read_sgd(ms_lua_opts o, bool *init) {
  ms_sgd_options so = {0};
  bind_opt_number(o, "lr", &so.lr);
  bind_opt_number(o, "momentum", &so.momentum);
  bind_opt_number(o, "dampening", &so.dampening);
  bind_opt_number(o, "weight_decay", &so.weight_decay);
  bind_opt_bool(o, "nesterov", &so.nesterov);
  bind_opt_bool(o, "maximize", &so.maximize);
  *init = false;
  bind_opt_bool(o, "init", init);
  return so;
}

/* sgd_step(param, grad, momentum_buffer|nil, {lr, momentum, dampening, weight_decay, nesterov,
 * maximize, init}) */
static int l_sgd_step(lua_State *L) {
  const char *fname = "_optim.sgd_step";
  ms_tensor *p = ms_lua_check_tensor(L, 1, fname), *g = ms_lua_check_tensor(L, 2, fname);
  ms_tensor *buf = opt_tensor(L, 3, fname);
  bool init;
  ms_sgd_options so = read_sgd(bind_check_opts(L, 4, fname, sgd_known), &init);
  bind_check_status(L, ms_optim_sgd_step(p, g, buf, init, &so));
  return 0;
}

static const char *const adam_known[] = {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad",
                                         "maximize", "decoupled", "step", NULL};

static ms_adam_options read_adam(ms_lua_opts o) {
  ms_adam_options ao = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  bind_opt_number(o, "lr", &ao.lr);
  bind_opt_number(o, "beta1", &ao.beta1);
  bind_opt_number(o, "beta2", &ao.beta2);
  bind_opt_number(o, "eps", &ao.eps);
  bind_opt_number(o, "weight_decay", &ao.weight_decay);
  bind_opt_bool(o, "amsgrad", &ao.amsgrad);
  bind_opt_bool(o, "maximize", &ao.maximize);
  bind_opt_bool(o, "decoupled", &ao.decoupled);
  ao.step = opt_step(o);
  return ao;
}

/* adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq|nil, {lr, beta1, beta2, eps,
 * weight_decay, amsgrad, maximize, decoupled, step}) */
static int l_adam_step(lua_State *L) {
  const char *fname = "_optim.adam_step";
  ms_tensor *p = ms_lua_check_tensor(L, 1, fname), *g = ms_lua_check_tensor(L, 2, fname);
  ms_tensor *m = ms_lua_check_tensor(L, 3, fname), *v = ms_lua_check_tensor(L, 4, fname);
  ms_tensor *vmax = opt_tensor(L, 5, fname);
  ms_adam_options ao = read_adam(bind_check_opts(L, 6, fname, adam_known));
  bind_check_status(L, ms_optim_adam_step(p, g, m, v, vmax, &ao));
  return 0;
}

static const char *const adadelta_known[] = {"lr", "rho", "eps", "weight_decay", "maximize", NULL};

static ms_adadelta_options read_adadelta(ms_lua_opts o) {
  ms_adadelta_options ao = {.lr = 1.0, .rho = 0.9, .eps = 1e-6};
  bind_opt_number(o, "lr", &ao.lr);
  bind_opt_number(o, "rho", &ao.rho);
  bind_opt_number(o, "eps", &ao.eps);
  bind_opt_number(o, "weight_decay", &ao.weight_decay);
  bind_opt_bool(o, "maximize", &ao.maximize);
  return ao;
}

/* adadelta_step(param, grad, square_avg, acc_delta, {lr, rho, eps, weight_decay, maximize}) */
static int l_adadelta_step(lua_State *L) {
  const char *fname = "_optim.adadelta_step";
  ms_tensor *p = ms_lua_check_tensor(L, 1, fname), *g = ms_lua_check_tensor(L, 2, fname);
  ms_tensor *sq = ms_lua_check_tensor(L, 3, fname), *acc = ms_lua_check_tensor(L, 4, fname);
  ms_adadelta_options ao = read_adadelta(bind_check_opts(L, 5, fname, adadelta_known));
  bind_check_status(L, ms_optim_adadelta_step(p, g, sq, acc, &ao));
  return 0;
}

/* adagrad_step(param, grad, sum, {lr, lr_decay, weight_decay, eps, maximize, step}) */
static int l_adagrad_step(lua_State *L) {
  static const char *const known[] = {"lr", "lr_decay", "weight_decay", "eps", "maximize", "step", NULL};
  const char *fname = "_optim.adagrad_step";
  ms_tensor *p = ms_lua_check_tensor(L, 1, fname), *g = ms_lua_check_tensor(L, 2, fname);
  ms_tensor *sum = ms_lua_check_tensor(L, 3, fname);
  ms_lua_opts o = bind_check_opts(L, 4, fname, known);
  ms_adagrad_options ao = {.lr = 1e-2, .eps = 1e-10};
  bind_opt_number(o, "lr", &ao.lr);
  bind_opt_number(o, "lr_decay", &ao.lr_decay);
  bind_opt_number(o, "weight_decay", &ao.weight_decay);
  bind_opt_number(o, "eps", &ao.eps);
  bind_opt_bool(o, "maximize", &ao.maximize);
  ao.step = opt_step(o);
  bind_check_status(L, ms_optim_adagrad_step(p, g, sum, &ao));
  return 0;
}

/* rmsprop_step(param, grad, square_avg, grad_avg|nil, momentum_buffer|nil, {lr, alpha, eps,
 * weight_decay, momentum, centered, maximize}) */
static int l_rmsprop_step(lua_State *L) {
  static const char *const known[] = {"lr", "alpha", "eps", "weight_decay", "momentum", "centered",
                                      "maximize", NULL};
  const char *fname = "_optim.rmsprop_step";
  ms_tensor *p = ms_lua_check_tensor(L, 1, fname), *g = ms_lua_check_tensor(L, 2, fname);
  ms_tensor *sq = ms_lua_check_tensor(L, 3, fname);
  ms_tensor *gavg = opt_tensor(L, 4, fname), *buf = opt_tensor(L, 5, fname);
  ms_lua_opts o = bind_check_opts(L, 6, fname, known);
  ms_rmsprop_options ro = {.lr = 1e-2, .alpha = 0.99, .eps = 1e-8};
  bind_opt_number(o, "lr", &ro.lr);
  bind_opt_number(o, "alpha", &ro.alpha);
  bind_opt_number(o, "eps", &ro.eps);
  bind_opt_number(o, "weight_decay", &ro.weight_decay);
  bind_opt_number(o, "momentum", &ro.momentum);
  bind_opt_bool(o, "centered", &ro.centered);
  bind_opt_bool(o, "maximize", &ro.maximize);
  bind_check_status(L, ms_optim_rmsprop_step(p, g, sq, gavg, buf, &ro));
  return 0;
}

/* ---- multi-tensor steps: arrays of tensors, one engine call ---- */

/* The tensors of the array at idx (nil: NULL, for a state the options do not use), every array
 * of one call as long as the first (*n < 0: this one sets it). Kept in a userdata pushed on the
 * stack (freed by the GC: nothing leaks when a check raises); the tensors stay borrowed. */
static ms_tensor **tensor_array(lua_State *L, int idx, const char *fname, const char *what, int *n) {
  if (*n >= 0 && lua_isnoneornil(L, idx)) return NULL;
  if (!lua_istable(L, idx)) bind_arg_error(L, idx, fname, what, "an array of tensors");
  int len = bind_narrow_int(L, luaL_len(L, idx), 0, INT_MAX, fname, what);
  if (*n < 0) *n = len;
  if (len != *n) bind_error(L, "%s: %s has %d tensors, params has %d", fname, what, len, *n);
  ms_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(len > 0 ? len : 1), 0);
  for (int i = 0; i < len; i++) {
    lua_geti(L, idx, i + 1);
    ts[i] = ms_lua_check_tensor(L, -1, fname);
    lua_pop(L, 1);
  }
  return ts;
}

/* The params and grads at 1 and 2 and nstates state arrays from 3 (nil where unused), then the
 * options table and the optional hp tensor after it. */
static ms_optim_list read_list(lua_State *L, const char *fname, int nstates, const char *const *names) {
  ms_optim_list l = {.count = -1};
  int hp_idx = 3 + nstates + 1;
  bind_check_end(L, hp_idx + 1, fname); /* before the arrays below push their userdata */
  l.hp = opt_tensor(L, hp_idx, fname);
  l.param = tensor_array(L, 1, fname, "params", &l.count);
  l.grad = tensor_array(L, 2, fname, "grads", &l.count);
  for (int k = 0; k < nstates; k++) l.state[k] = tensor_array(L, 3 + k, fname, names[k], &l.count);
  return l;
}

/* The options table of a list call sits before its hp argument: checked with everything after it
 * left to read_list. */
static ms_lua_opts list_opts(lua_State *L, int idx, const char *fname, const char *const *known) {
  lua_pushvalue(L, idx);
  ms_lua_opts o = bind_check_opts(L, lua_gettop(L), fname, known);
  return o;
}

/* sgd_step_list(params, grads, momentum_buffers|nil, opts, hp|nil): opts as sgd_step's */
static int l_sgd_step_list(lua_State *L) {
  static const char *const names[] = {"momentum_buffers"};
  const char *fname = "_optim.sgd_step_list";
  ms_optim_list l = read_list(L, fname, 1, names);
  bool init;
  ms_sgd_options so = read_sgd(list_opts(L, 4, fname, sgd_known), &init);
  bind_check_status(L, ms_optim_sgd_step_list(&l, init, &so));
  return 0;
}

/* adam_step_list(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs|nil, opts, hp|nil) */
static int l_adam_step_list(lua_State *L) {
  static const char *const names[] = {"exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"};
  const char *fname = "_optim.adam_step_list";
  ms_optim_list l = read_list(L, fname, 3, names);
  ms_adam_options ao = read_adam(list_opts(L, 6, fname, adam_known));
  bind_check_status(L, ms_optim_adam_step_list(&l, &ao));
  return 0;
}

/* adadelta_step_list(params, grads, square_avgs, acc_deltas, opts, hp|nil) */
static int l_adadelta_step_list(lua_State *L) {
  static const char *const names[] = {"square_avgs", "acc_deltas"};
  const char *fname = "_optim.adadelta_step_list";
  ms_optim_list l = read_list(L, fname, 2, names);
  ms_adadelta_options ao = read_adadelta(list_opts(L, 5, fname, adadelta_known));
  bind_check_status(L, ms_optim_adadelta_step_list(&l, &ao));
  return 0;
}

/* The slots (MS_OPTIM_MAX_SLOTS values, the rest zero) written into hp (the argument at idx, made
 * by slots_buffer; returned) or, without one (NULL), as a new float64 CPU tensor. */
static int push_slots(lua_State *L, int idx, ms_tensor *hp, const double *v) {
  if (hp) {
    bind_check_status(L, ms_optim_slots_write(hp, v));
    lua_pushvalue(L, idx);
    return 1;
  }
  ms_tensor *t = ms_tensor_new_empty(1, (int64_t[]){MS_OPTIM_MAX_SLOTS}, MS_FLOAT64);
  if (t) memcpy(ms_tensor_data(t), v, sizeof(double) * MS_OPTIM_MAX_SLOTS);
  return bind_push_result(L, t);
}

/* The options table of a slots call sits before its hp argument (see list_opts). */
static ms_lua_opts slots_opts(lua_State *L, const char *fname, const char *const *known) {
  bind_check_end(L, 3, fname);
  return list_opts(L, 1, fname, known);
}

/* The slots of one optimizer's options: fill reads them and derives the values. */
typedef void (*slots_fill)(ms_lua_opts o, double *v);

static void sgd_fill(ms_lua_opts o, double *v) {
  bool init;
  ms_sgd_options so = read_sgd(o, &init);
  ms_optim_sgd_slots(&so, v);
}

static void adam_fill(ms_lua_opts o, double *v) {
  ms_adam_options ao = read_adam(o);
  ms_optim_adam_slots(&ao, v);
}

static void adadelta_fill(ms_lua_opts o, double *v) {
  ms_adadelta_options ao = read_adadelta(o);
  ms_optim_adadelta_slots(&ao, v);
}

/* <name>_slots(opts, hp|nil): opts as the step's */
static int slots_call(lua_State *L, const char *fname, const char *const *known, slots_fill fill) {
  ms_tensor *hp = opt_tensor(L, 2, fname); /* before slots_opts pushes */
  double v[MS_OPTIM_MAX_SLOTS] = {0};
  fill(slots_opts(L, fname, known), v);
  return push_slots(L, 2, hp, v);
}

static int l_sgd_slots(lua_State *L) { return slots_call(L, "_optim.sgd_slots", sgd_known, sgd_fill); }
static int l_adam_slots(lua_State *L) { return slots_call(L, "_optim.adam_slots", adam_known, adam_fill); }
static int l_adadelta_slots(lua_State *L) {
  return slots_call(L, "_optim.adadelta_slots", adadelta_known, adadelta_fill);
}

/* slots_buffer(like): ms_optim_slots_new, the hp of a captured step */
static int l_slots_buffer(lua_State *L) {
  ms_tensor *like = ms_lua_check_tensor(L, 1, "_optim.slots_buffer");
  bind_check_end(L, 2, "_optim.slots_buffer");
  return bind_push_result(L, ms_optim_slots_new(like));
}

void bind_open_optim(lua_State *L) {
  static const luaL_Reg fns[] = {
      {"state", l_state},
      {"sgd_step", l_sgd_step},
      {"adam_step", l_adam_step},
      {"adadelta_step", l_adadelta_step},
      {"adagrad_step", l_adagrad_step},
      {"rmsprop_step", l_rmsprop_step},
      {"sgd_step_list", l_sgd_step_list},
      {"adam_step_list", l_adam_step_list},
      {"adadelta_step_list", l_adadelta_step_list},
      {"sgd_slots", l_sgd_slots},
      {"adam_slots", l_adam_slots},
      {"adadelta_slots", l_adadelta_slots},
      {"slots_buffer", l_slots_buffer},
      {NULL, NULL},
  };
  luaL_newlib(L, fns);
  lua_setfield(L, -3, "_optim"); /* ms._optim: the module table sits under the method table */
}
