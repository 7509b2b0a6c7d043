/* l_optim.c: the low-level fused optimizer steps as ms._optim.<name>_step(param, grad, states...,
 * opts) and ms._optim.state(param, value). The optimizer classes of lua/moonshard/optim.lua own
 * the state and the per-group options and call these once per parameter. */
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

/* sgd_step(param, grad, momentum_buffer|nil, {lr, momentum, dampening, weight_decay, nesterov,
 * maximize, init}) */
static int l_sgd_step(lua_State *L) {
  static const char *const known[] = {"lr", "momentum", "dampening", "weight_decay", "nesterov",
                                      "maximize", "init", NULL};
  const char *fname = "_optim.sgd_step";
  ms_tensor *p = ms_lua_check_tensor(L, 1, fname), *g = ms_lua_check_tensor(L, 2, fname);
  ms_tensor *buf = opt_tensor(L, 3, fname);
  ms_lua_opts o = bind_check_opts(L, 4, fname, known);
  ms_sgd_options so = {0};
  bool init = false;
  bind_opt_number(o, "lr", &so.lr);
  bind_opt_number(o, "momentum", &so.momentum);
  bind_opt_number(o, "dampening", &so.dampening);
  bind_opt_number(o, "weight_decay", &so.weight_decay);
  bind_opt_bool(o, "nesterov", &so.nesterov);
  bind_opt_bool(o, "maximize", &so.maximize);
  bind_opt_bool(o, "init", &init);
  bind_check_status(L, ms_optim_sgd_step(p, g, buf, init, &so));
  return 0;
}

/* adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq|nil, {lr, beta1, beta2, eps,
 * weight_decay, amsgrad, maximize, decoupled, step}) */
static int l_adam_step(lua_State *L) {
  static const char *const known[] = {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad",
                                      "maximize", "decoupled", "step", NULL};
  const char *fname = "_optim.adam_step";
  ms_tensor *p = ms_lua_check_tensor(L, 1, fname), *g = ms_lua_check_tensor(L, 2, fname);
  ms_tensor *m = ms_lua_check_tensor(L, 3, fname), *v = ms_lua_check_tensor(L, 4, fname);
  ms_tensor *vmax = opt_tensor(L, 5, fname);
  ms_lua_opts o = bind_check_opts(L, 6, fname, known);
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
  bind_check_status(L, ms_optim_adam_step(p, g, m, v, vmax, &ao));
  return 0;
}

/* adadelta_step(param, grad, square_avg, acc_delta, {lr, rho, eps, weight_decay, maximize}) */
static int l_adadelta_step(lua_State *L) {
  static const char *const known[] = {"lr", "rho", "eps", "weight_decay", "maximize", NULL};
  const char *fname = "_optim.adadelta_step";
  ms_tensor *p = ms_lua_check_tensor(L, 1, fname), *g = ms_lua_check_tensor(L, 2, fname);
  ms_tensor *sq = ms_lua_check_tensor(L, 3, fname), *acc = ms_lua_check_tensor(L, 4, fname);
  ms_lua_opts o = bind_check_opts(L, 5, fname, known);
  ms_adadelta_options ao = {.lr = 1.0, .rho = 0.9, .eps = 1e-6};
  bind_opt_number(o, "lr", &ao.lr);
  bind_opt_number(o, "rho", &ao.rho);
  bind_opt_number(o, "eps", &ao.eps);
  bind_opt_number(o, "weight_decay", &ao.weight_decay);
  bind_opt_bool(o, "maximize", &ao.maximize);
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

void bind_open_optim(lua_State *L) {
  static const luaL_Reg fns[] = {
      {"state", l_state},
      {"sgd_step", l_sgd_step},
      {"adam_step", l_adam_step},
      {"adadelta_step", l_adadelta_step},
      {"adagrad_step", l_adagrad_step},
      {"rmsprop_step", l_rmsprop_step},
      {NULL, NULL},
  };
  luaL_newlib(L, fns);
  lua_setfield(L, -3, "_optim"); /* ms._optim: the module table sits under the method table */
}
