/* l_nn_ops.c: the functional NN layers on the module table (ms.log_softmax, ms.nll_loss, ...),
 * with softmax and log_softmax as tensor methods too, as in PyTorch. Dims are 1-based. Class
 * targets (nll_loss, cross_entropy) and embedding indices are positions, so they are 1-based
 * too (class 1..C, as Torch7's ClassNLLCriterion); the engine is told so (index_base 1) and
 * subtracts the 1 in its kernels instead of this file copying the index tensor. ignore_index is
 * compared with the value as written in Lua (default -100); padding_idx is a 1-based row. */
#include <string.h>

#include "ms_lua.h"

/* ---- options -------------------------------------------------------------------------------- */

/* String option `key` that must be one of `choices` (NULL-terminated): its position, or dflt. */
static int opt_choice(ms_lua_opts o, const char *key, const char *const *choices, int dflt) {
  if (!o.idx) return dflt;
  lua_getfield(o.L, o.idx, key);
  if (lua_isnil(o.L, -1)) return lua_pop(o.L, 1), dflt;
  const char *s = lua_type(o.L, -1) == LUA_TSTRING ? lua_tostring(o.L, -1) : NULL;
  for (int i = 0; s && choices[i]; i++)
    if (strcmp(s, choices[i]) == 0) return lua_pop(o.L, 1), i;
  int value = lua_gettop(o.L); /* absolute: describing it may push */
  luaL_Buffer b;
  luaL_buffinit(o.L, &b);
  for (int i = 0; choices[i]; i++) {
    luaL_addstring(&b, i ? ", " : "");
    luaL_addchar(&b, '"'), luaL_addstring(&b, choices[i]), luaL_addchar(&b, '"');
  }
  luaL_pushresult(&b);
  const char *list = lua_tostring(o.L, -1);
  return bind_error(o.L, "%s: option '%s': expected one of %s, got %s", o.fname, key, list,
                    bind_describe(o.L, value));
}

/* Tensor option `key` (borrowed: the options table keeps it alive), or NULL when absent. */
static ms_tensor *opt_tensor(ms_lua_opts o, const char *key) {
  if (!o.idx) return NULL;
  lua_getfield(o.L, o.idx, key);
  ms_tensor *t = ms_lua_to_tensor(o.L, -1);
  if (!t && !lua_isnil(o.L, -1))
    bind_error(o.L, "%s: option '%s': expected a tensor, got %s", o.fname, key, bind_describe(o.L, -1));
  lua_pop(o.L, 1);
  return t;
}

static ms_reduction opt_reduction(ms_lua_opts o) {
  static const char *const names[] = {"none", "mean", "sum", NULL}; /* ms_reduction's order */
  return (ms_reduction)opt_choice(o, "reduction", names, MS_REDUCTION_MEAN);
}

/* A tensor or nil at idx. */
static ms_tensor *check_optional_tensor(lua_State *L, int idx, const char *fname, const char *what) {
  if (lua_isnoneornil(L, idx)) return NULL;
  ms_tensor *t = ms_lua_to_tensor(L, idx);
  if (!t) bind_arg_error(L, idx, fname, what, "a tensor or nil");
  return t;
}

/* ---- activations, softmax, dropout ------------------------------------------------------------ */

static int softmax_common(lua_State *L, const char *fname, ms_tensor *(*fn)(ms_tensor *, int)) {
  bind_check_end(L, 3, fname);
  ms_tensor *x = ms_lua_check_tensor(L, 1, fname);
  if (lua_isnoneornil(L, 2))
    return bind_error(L, "%s: the dim argument is required (as in PyTorch, where an implicit dim is "
                      "deprecated)", fname);
  int dim = bind_check_dim(L, 2, x->ndim, fname, "dim");
  return bind_push_result(L, fn(x, dim));
}

static int l_softmax(lua_State *L) { return softmax_common(L, "softmax", ms_softmax); }
static int l_log_softmax(lua_State *L) { return softmax_common(L, "log_softmax", ms_log_softmax); }

/* gelu(x, {approximate = "none" | "tanh"}) */
static int l_gelu(lua_State *L) {
  static const char *const known[] = {"approximate", NULL};
  static const char *const modes[] = {"none", "tanh", NULL};
  ms_tensor *x = ms_lua_check_tensor(L, 1, "gelu");
  int mode = opt_choice(bind_check_opts(L, 2, "gelu", known), "approximate", modes, 0);
  return bind_push_result(L, ms_gelu(x, mode == 1));
}

/* Every activation of the engine's table but GELU's rows (gelu takes its approximate option,
 * above), bound by looping over it (bind_open_nn_ops): the op rides in the closure's upvalue. */
static int l_activation(lua_State *L) {
  ms_activation_op op = (ms_activation_op)lua_tointeger(L, lua_upvalueindex(1));
  const char *name = ms_activation_op_get_info(op)->name;
  bind_check_end(L, 2, name);
  return bind_push_result(L, ms_activation(op, ms_lua_check_tensor(L, 1, name)));
}

/* dropout(x, {p = 0.5, training = true}) */
static int l_dropout(lua_State *L) {
  static const char *const known[] = {"p", "training", NULL};
  ms_tensor *x = ms_lua_check_tensor(L, 1, "dropout");
  ms_lua_opts o = bind_check_opts(L, 2, "dropout", known);
  double p = 0.5;
  bool training = true;
  bind_opt_number(o, "p", &p);
  bind_opt_bool(o, "training", &training);
  return bind_push_result(L, ms_dropout(x, p, training));
}

/* ---- linear and embedding ----------------------------------------------------------------------- */

/* linear(x, weight, bias_or_nil) */
static int l_linear(lua_State *L) {
  bind_check_end(L, 4, "linear");
  ms_tensor *x = ms_lua_check_tensor(L, 1, "linear"), *w = ms_lua_check_tensor(L, 2, "linear");
  ms_tensor *b = check_optional_tensor(L, 3, "linear", "bias");
  return bind_push_result(L, ms_linear(x, w, b));
}

/* padding_idx: a 1-based row of the weight (negative from the end), returned 0-based; -1 when
 * absent. */
static int64_t opt_padding_idx(ms_lua_opts o, int64_t rows) {
  int64_t p;
  if (!bind_opt_integer(o, "padding_idx", &p)) return -1;
  if (p == 0 || p < -rows || p > rows)
    bind_error(o.L, "embedding: padding_idx must be a row of the weight, 1..%I or -%I..-1, got %I",
               (lua_Integer)rows, (lua_Integer)rows, (lua_Integer)p);
  return p > 0 ? p - 1 : p + rows;
}

/* embedding(indices, weight, {padding_idx = }): indices are 1-based rows of weight. */
static int l_embedding(lua_State *L) {
  static const char *const known[] = {"padding_idx", NULL};
  ms_tensor *idx = ms_lua_check_tensor(L, 1, "embedding"), *w = ms_lua_check_tensor(L, 2, "embedding");
  ms_lua_opts o = bind_check_opts(L, 3, "embedding", known);
  int64_t padding = opt_padding_idx(o, w->ndim >= 1 ? w->shape[0] : 0);
  return bind_push_result(L, ms_embedding(idx, w, padding, 1));
}

/* ---- normalization ------------------------------------------------------------------------------ */

/* layer_norm(x, normalized_shape, weight_or_nil, bias_or_nil, {eps = 1e-5}); normalized_shape is
 * an integer or a table of sizes. */
static int l_layer_norm(lua_State *L) {
  static const char *const known[] = {"eps", NULL};
  ms_tensor *x = ms_lua_check_tensor(L, 1, "layer_norm");
  int64_t shape[MS_MAX_DIMS];
  int next, nd;
  if (lua_isinteger(L, 2)) nd = 1, shape[0] = lua_tointeger(L, 2);
  else if (lua_istable(L, 2)) nd = bind_check_sizes(L, 2, shape, "layer_norm", &next);
  else return bind_arg_error(L, 2, "layer_norm", "normalized_shape", "an integer or a table of sizes");
  ms_tensor *w = check_optional_tensor(L, 3, "layer_norm", "weight");
  ms_tensor *b = check_optional_tensor(L, 4, "layer_norm", "bias");
  double eps = 1e-5;
  bind_opt_number(bind_check_opts(L, 5, "layer_norm", known), "eps", &eps);
  return bind_push_result(L, ms_layer_norm(x, nd, shape, w, b, eps));
}

/* batch_norm(x, running_mean, running_var, weight, bias, {training = false, momentum = 0.1,
 * eps = 1e-5}); any of the four tensors may be nil (the running ones only when training). */
static int l_batch_norm(lua_State *L) {
  static const char *const known[] = {"training", "momentum", "eps", NULL};
  ms_tensor *x = ms_lua_check_tensor(L, 1, "batch_norm");
  ms_tensor *rm = check_optional_tensor(L, 2, "batch_norm", "running_mean");
  ms_tensor *rv = check_optional_tensor(L, 3, "batch_norm", "running_var");
  ms_tensor *w = check_optional_tensor(L, 4, "batch_norm", "weight");
  ms_tensor *b = check_optional_tensor(L, 5, "batch_norm", "bias");
  ms_lua_opts o = bind_check_opts(L, 6, "batch_norm", known);
  bool training = false;
  double momentum = 0.1, eps = 1e-5;
  bind_opt_bool(o, "training", &training);
  bind_opt_number(o, "momentum", &momentum);
  bind_opt_number(o, "eps", &eps);
  return bind_push_result(L, ms_batch_norm(x, rm, rv, w, b, training, momentum, eps));
}

/* ---- losses ------------------------------------------------------------------------------------- */

/* nll_loss(input, target, {weight =, ignore_index = -100, reduction = "mean"}) and
 * cross_entropy(..., {..., label_smoothing = 0}): targets are 1-based class indices. */
static int class_loss(lua_State *L, bool ce) {
  static const char *const nll_known[] = {"weight", "ignore_index", "reduction", NULL};
  static const char *const ce_known[] = {"weight", "ignore_index", "reduction", "label_smoothing", NULL};
  const char *fname = ce ? "cross_entropy" : "nll_loss";
  ms_tensor *input = ms_lua_check_tensor(L, 1, fname), *target = ms_lua_check_tensor(L, 2, fname);
  ms_lua_opts o = bind_check_opts(L, 3, fname, ce ? ce_known : nll_known);
  ms_tensor *weight = opt_tensor(o, "weight");
  int64_t ignore_index = -100;
  double smoothing = 0;
  bind_opt_integer(o, "ignore_index", &ignore_index);
  ms_reduction red = opt_reduction(o);
  if (!ce) return bind_push_result(L, ms_nll_loss(input, target, weight, ignore_index, red, 1));
  bind_opt_number(o, "label_smoothing", &smoothing);
  return bind_push_result(L, ms_cross_entropy(input, target, weight, ignore_index, red, smoothing, 1));
}

static int l_nll_loss(lua_State *L) { return class_loss(L, false); }
static int l_cross_entropy(lua_State *L) { return class_loss(L, true); }

/* mse_loss(input, target, {reduction = "mean"}) */
static int l_mse_loss(lua_State *L) {
  static const char *const known[] = {"reduction", NULL};
  ms_tensor *a = ms_lua_check_tensor(L, 1, "mse_loss"), *b = ms_lua_check_tensor(L, 2, "mse_loss");
  ms_reduction red = opt_reduction(bind_check_opts(L, 3, "mse_loss", known));
  return bind_push_result(L, ms_mse_loss(a, b, red));
}

/* ---- attention ---------------------------------------------------------------------------------- */

/* scaled_dot_product_attention(q, k, v, {attn_mask =, is_causal = false, dropout_p = 0, scale =}):
 * torch.nn.functional's; no dims are taken, so nothing here is 1-based. */
static int l_scaled_dot_product_attention(lua_State *L) {
  static const char *const known[] = {"attn_mask", "is_causal", "dropout_p", "scale", NULL};
  const char *fname = "scaled_dot_product_attention";
  ms_tensor *q = ms_lua_check_tensor(L, 1, fname), *k = ms_lua_check_tensor(L, 2, fname);
  ms_tensor *v = ms_lua_check_tensor(L, 3, fname);
  ms_lua_opts o = bind_check_opts(L, 4, fname, known);
  ms_sdpa_options opt = {.attn_mask = opt_tensor(o, "attn_mask")};
  double scale;
  bind_opt_bool(o, "is_causal", &opt.is_causal);
  bind_opt_number(o, "dropout_p", &opt.dropout_p);
  if (bind_opt_number(o, "scale", &scale)) opt.scale = &scale;
  return bind_push_result(L, ms_scaled_dot_product_attention(q, k, v, &opt));
}

void bind_open_nn_ops(lua_State *L) {
  static const luaL_Reg module_only[] = {
      {"gelu", l_gelu}, {"dropout", l_dropout}, {"linear", l_linear},
      {"embedding", l_embedding}, {"layer_norm", l_layer_norm}, {"batch_norm", l_batch_norm},
      {"nll_loss", l_nll_loss}, {"cross_entropy", l_cross_entropy}, {"mse_loss", l_mse_loss},
      {"scaled_dot_product_attention", l_scaled_dot_product_attention},
      {NULL, NULL}};
  bind_register_both(L, "softmax", l_softmax);
  bind_register_both(L, "log_softmax", l_log_softmax);
  for (const luaL_Reg *r = module_only; r->name; r++) {
    lua_pushcfunction(L, r->func);
    lua_setfield(L, -3, r->name); /* the module table, below the methods */
  }
  for (int op = 0; op < MS_ACTIVATION_OP_COUNT; op++) {
    if (op == MS_ACT_GELU || op == MS_ACT_GELU_TANH) continue;
    lua_pushinteger(L, op);
    lua_pushcclosure(L, l_activation, 1);
    lua_setfield(L, -3, ms_activation_op_get_info((ms_activation_op)op)->name);
  }
}
