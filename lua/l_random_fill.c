/* l_random_fill.c: in-place random fills, t:uniform_(a, b) and t:normal_(mean, std), as
 * methods and as ms.uniform_(t, ...) / ms.normal_(t, ...). They draw from the one Philox
 * generator, so ms.manual_seed makes nn.init and layer construction reproducible. */
#include "ms_lua.h"

/* The tensor to fill (floating, and not a leaf that autograd tracks unless under no_grad: as in
 * torch, writing into a parameter in place is only allowed where no graph is recorded). */
static ms_tensor *check_fill_target(lua_State *L, const char *fname) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  if (!ms_dtype_is_floating(t->dtype))
    luaL_error(L, "%s: bad argument #1 (tensor): expected a floating tensor, got %s", fname,
               ms_lua_describe(L, 1));
  if (t->requires_grad && ms_tensor_is_leaf(t) && ms_grad_enabled())
    luaL_error(L, "%s: a leaf tensor that requires grad cannot be filled in place while grad "
               "mode is on (use it under ms.no_grad())", fname);
  return t;
}

static double opt_number(lua_State *L, int idx, double dflt, const char *fname, const char *what) {
  if (lua_isnoneornil(L, idx)) return dflt;
  if (lua_type(L, idx) != LUA_TNUMBER) ms_lua_arg_error(L, idx, fname, what, "a number");
  return lua_tonumber(L, idx);
}

static int l_uniform_(lua_State *L) {
  ms_tensor *t = check_fill_target(L, "uniform_");
  double a = opt_number(L, 2, 0.0, "uniform_", "from");
  double b = opt_number(L, 3, 1.0, "uniform_", "to");
  if (!(a <= b))
    return luaL_error(L, "uniform_: expected from <= to, got from=%f to=%f", a, b);
  ms_lua_check_status(L, ms_tensor_uniform_(t, a, b));
  lua_settop(L, 1);
  return 1;
}

static int l_normal_(lua_State *L) {
  ms_tensor *t = check_fill_target(L, "normal_");
  double mean = opt_number(L, 2, 0.0, "normal_", "mean");
  double std = opt_number(L, 3, 1.0, "normal_", "std");
  if (!(std >= 0)) return luaL_error(L, "normal_: expected std >= 0, got %f", std);
  ms_lua_check_status(L, ms_tensor_normal_(t, mean, std));
  lua_settop(L, 1);
  return 1;
}

void ms_lua_open_random_fill(lua_State *L) {
  ms_lua_register_both(L, "uniform_", l_uniform_);
  ms_lua_register_both(L, "normal_", l_normal_);
}
