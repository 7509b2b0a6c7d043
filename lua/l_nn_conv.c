/* l_nn_conv.c: ms.conv2d, ms.max_pool2d, ms.avg_pool2d and ms.adaptive_avg_pool2d, as functions
 * and methods. Their sizes (kernel, stride, padding, dilation, output size) are counts, not
 * positions, so nothing is shifted by one; each is an integer or a pair {h, w}. */
#include <stdio.h>

#include "ms_lua.h"

/* The integer or pair {h, w} at idx into out; raises naming fname and what otherwise. */
static void check_pair_at(lua_State *L, int idx, const char *fname, const char *what, int64_t out[2]) {
  idx = lua_absindex(L, idx);
  if (lua_isinteger(L, idx)) {
    out[0] = out[1] = lua_tointeger(L, idx);
    return;
  }
  bool ok = lua_istable(L, idx) && lua_rawlen(L, idx) == 2;
  for (int i = 0; ok && i < 2; i++) {
    lua_rawgeti(L, idx, i + 1);
    ok = lua_isinteger(L, -1);
    out[i] = lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  if (!ok)
    bind_error(L, "%s: %s must be an integer or a pair {h, w} of integers, got %s", fname, what,
               bind_describe(L, idx));
}

/* Option `key` as an integer or a pair; leaves out as it is when the option is absent. */
static void opt_pair(ms_lua_opts o, const char *key, int64_t out[2]) {
  if (!o.idx) return;
  if (lua_getfield(o.L, o.idx, key) != LUA_TNIL) {
    char what[64];
    snprintf(what, sizeof what, "option '%s'", key);
    check_pair_at(o.L, -1, o.fname, what, out);
  }
  lua_pop(o.L, 1);
}

/* conv2d(input, weight, bias_or_nil, {stride=1, padding=0, dilation=1, groups=1}); without a
 * bias the options may come third (conv2d(x, w, {stride = 2})), since a table is never a tensor. */
static int l_conv2d(lua_State *L) {
  static const char *const known[] = {"stride", "padding", "dilation", "groups", NULL};
  ms_tensor *x = ms_lua_check_tensor(L, 1, "conv2d");
  ms_tensor *w = ms_lua_check_tensor(L, 2, "conv2d");
  bool opts_third = lua_istable(L, 3) && lua_isnoneornil(L, 4);
  ms_tensor *b = lua_isnoneornil(L, 3) || opts_third ? NULL : ms_lua_check_tensor(L, 3, "conv2d");
  ms_lua_opts o = bind_check_opts(L, opts_third ? 3 : 4, "conv2d", known);
  int64_t stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1}, groups = 1;
  opt_pair(o, "stride", stride);
  opt_pair(o, "padding", padding);
  opt_pair(o, "dilation", dilation);
  bind_opt_integer(o, "groups", &groups);
  return bind_push_result(L, ms_conv2d(x, w, b, stride, padding, dilation, groups));
}

/* max_pool2d(input, kernel_size, {stride=kernel_size, padding=0, dilation=1, ceil_mode=false,
 * return_indices=false}); the indices, when asked for, are 1-based positions in each plane. */
static int l_max_pool2d(lua_State *L) {
  static const char *const known[] = {"stride", "padding", "dilation", "ceil_mode", "return_indices", NULL};
  ms_tensor *x = ms_lua_check_tensor(L, 1, "max_pool2d");
  int64_t kernel[2], padding[2] = {0, 0}, dilation[2] = {1, 1};
  check_pair_at(L, 2, "max_pool2d", "kernel_size", kernel);
  int64_t stride[2] = {kernel[0], kernel[1]};
  ms_lua_opts o = bind_check_opts(L, 3, "max_pool2d", known);
  bool ceil_mode = false, return_indices = false;
  opt_pair(o, "stride", stride);
  opt_pair(o, "padding", padding);
  opt_pair(o, "dilation", dilation);
  bind_opt_bool(o, "ceil_mode", &ceil_mode);
  bind_opt_bool(o, "return_indices", &return_indices);
  if (!return_indices) return bind_push_result(L, ms_max_pool2d(x, kernel, stride, padding, dilation, ceil_mode));
  ms_tensor *values, *indices;
  bind_check_status(L, ms_max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode, &values,
                                                    &indices));
  bind_push_result(L, values);
  ms_tensor *one_based = ms_binary(MS_OP_ADD, ms_operand_tensor(indices), ms_operand_number(1, MS_INT64));
  ms_tensor_release(indices);
  bind_push_result(L, one_based);
  return 2;
}

/* avg_pool2d(input, kernel_size, {stride=kernel_size, padding=0, ceil_mode=false,
 * count_include_pad=true}) */
static int l_avg_pool2d(lua_State *L) {
  static const char *const known[] = {"stride", "padding", "ceil_mode", "count_include_pad", NULL};
  ms_tensor *x = ms_lua_check_tensor(L, 1, "avg_pool2d");
  int64_t kernel[2], padding[2] = {0, 0};
  check_pair_at(L, 2, "avg_pool2d", "kernel_size", kernel);
  int64_t stride[2] = {kernel[0], kernel[1]};
  ms_lua_opts o = bind_check_opts(L, 3, "avg_pool2d", known);
  bool ceil_mode = false, count_include_pad = true;
  opt_pair(o, "stride", stride);
  opt_pair(o, "padding", padding);
  bind_opt_bool(o, "ceil_mode", &ceil_mode);
  bind_opt_bool(o, "count_include_pad", &count_include_pad);
  return bind_push_result(L, ms_avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad));
}

/* adaptive_avg_pool2d(input, output_size) with output_size an integer or {h, w} */
static int l_adaptive_avg_pool2d(lua_State *L) {
  bind_check_end(L, 3, "adaptive_avg_pool2d");
  ms_tensor *x = ms_lua_check_tensor(L, 1, "adaptive_avg_pool2d");
  int64_t size[2];
  check_pair_at(L, 2, "adaptive_avg_pool2d", "output_size", size);
  return bind_push_result(L, ms_adaptive_avg_pool2d(x, size[0], size[1]));
}

void bind_open_nn_conv(lua_State *L) {
  bind_register_both(L, "conv2d", l_conv2d);
  bind_register_both(L, "max_pool2d", l_max_pool2d);
  bind_register_both(L, "avg_pool2d", l_avg_pool2d);
  bind_register_both(L, "adaptive_avg_pool2d", l_adaptive_avg_pool2d);
}
