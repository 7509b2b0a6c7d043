/* l_util.c: argument checking and conversion shared by every binding file, and the one place
 * where engine errors turn into Lua errors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ms_lua.h"

int bind_raise(lua_State *L) { return bind_error(L, "%s", ms_error_last()); }

void bind_check_status(lua_State *L, ms_status st) {
  if (st != MS_OK) bind_raise(L);
}

int bind_push_result(lua_State *L, ms_tensor *t) {
  if (!t) return bind_raise(L);
  ms_lua_push_tensor(L, t);
  return 1;
}

const char *bind_describe(lua_State *L, int idx) {
  ms_tensor *t = ms_lua_to_tensor(L, idx);
  char shape[MS_SHAPE_STR_LEN];
  switch (lua_type(L, idx)) {
  case LUA_TNONE: return "no value";
  case LUA_TSTRING: return lua_pushfstring(L, "string '%s'", lua_tostring(L, idx));
  case LUA_TNUMBER:
    return lua_isinteger(L, idx) ? lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, idx))
                                 : lua_pushfstring(L, "%f", lua_tonumber(L, idx));
  case LUA_TBOOLEAN: return lua_toboolean(L, idx) ? "true" : "false";
  default:
    if (t)
      return lua_pushfstring(L, "a %s tensor of shape %s", ms_dtype_name(t->dtype),
                             ms_shape_str(t->ndim, t->shape, shape, sizeof shape));
    if (luaL_testudata(L, idx, MS_TENSOR_MT)) return "a closed tensor";
    return luaL_typename(L, idx);
  }
}

int bind_arg_error(lua_State *L, int arg, const char *fname, const char *what, const char *expected) {
  const char *got = bind_describe(L, arg);
  return bind_error(L, "%s: bad argument #%d (%s): expected %s, got %s", fname, arg, what, expected, got);
}

void bind_check_end(lua_State *L, int idx, const char *fname) {
  for (int i = idx, top = lua_gettop(L); i <= top; i++)
    if (!lua_isnil(L, i))
      bind_error(L, "%s: bad argument #%d: unexpected argument, got %s (the arguments end at #%d)", fname, i,
                 bind_describe(L, i), idx - 1);
}

int64_t bind_check_integer(lua_State *L, int idx, const char *fname, const char *what) {
  int isnum = 0;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (!isnum || lua_type(L, idx) != LUA_TNUMBER) bind_arg_error(L, idx, fname, what, "an integer");
  return v;
}

int bind_narrow_int(lua_State *L, lua_Integer v, int lo, int hi, const char *fname, const char *what) {
  if (v < lo || v > hi)
    bind_error(L, "%s: %s: expected an integer in %d..%d, got %I", fname, what, lo, hi, (LUAI_UACINT)v);
  return (int)v;
}

int bind_check_dim(lua_State *L, int idx, int ndim, const char *fname, const char *what) {
  int64_t d = bind_check_integer(L, idx, fname, what);
  int n = ndim > 0 ? ndim : 1; /* a 0-dim tensor accepts dim 1 and -1, as PyTorch its 0 and -1 */
  if (d == 0 || d < -n || d > n) {
    char expected[96];
    snprintf(expected, sizeof expected, "a dimension in 1..%d or -%d..-1", n, n);
    bind_arg_error(L, idx, fname, what, expected);
  }
  return (int)(d > 0 ? d - 1 : d + n);
}

int64_t bind_check_index(lua_State *L, int idx, int64_t size, const char *fname, const char *what) {
  int64_t i = bind_check_integer(L, idx, fname, what);
  if (i == 0 || i < -size || i > size) {
    char expected[128];
    if (size == 0) snprintf(expected, sizeof expected, "an index into an empty dimension (there is none)");
    else snprintf(expected, sizeof expected, "an index in 1..%lld or -%lld..-1", (long long)size, (long long)size);
    bind_arg_error(L, idx, fname, what, expected);
  }
  return i > 0 ? i - 1 : i + size;
}

static int64_t check_size_value(lua_State *L, int idx, const char *fname) {
  int isnum = 0;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (!isnum || v < -1) bind_arg_error(L, idx, fname, "size", "a non-negative integer");
  return v;
}

/* An empty table in the sizes position is the shape of a 0-dim tensor ({} as in torch.zeros([])). */
static bool table_is_empty(lua_State *L, int idx) {
  lua_pushnil(L);
  if (!lua_next(L, idx)) return true;
  lua_pop(L, 2);
  return false;
}

int bind_check_sizes(lua_State *L, int first, int64_t *shape, const char *fname, int *next) {
  int nd = 0;
  if (lua_istable(L, first) && (lua_rawlen(L, first) > 0 || table_is_empty(L, first))) {
    nd = (int)lua_rawlen(L, first);
    if (nd > MS_MAX_DIMS) bind_error(L, "%s: at most %d dimensions, got %d", fname, MS_MAX_DIMS, nd);
    for (int d = 0; d < nd; d++) {
      lua_rawgeti(L, first, d + 1);
      int isnum = 0;
      lua_Integer v = lua_tointegerx(L, -1, &isnum);
      if (!isnum || v < -1 || lua_type(L, -1) != LUA_TNUMBER)
        bind_error(L, "%s: bad argument #%d (size): expected a sequence of non-negative integers, "
                   "got %s at position %d", fname, first, bind_describe(L, -1), d + 1);
      shape[d] = v;
      lua_pop(L, 1);
    }
    *next = first + 1;
    return nd;
  }
  int idx = first;
  while (lua_type(L, idx) == LUA_TNUMBER) {
    if (nd == MS_MAX_DIMS) bind_error(L, "%s: at most %d dimensions", fname, MS_MAX_DIMS);
    shape[nd++] = check_size_value(L, idx++, fname);
  }
  *next = idx;
  return nd;
}

ms_dtype bind_check_dtype(lua_State *L, int idx, const char *fname, const char *what) {
  ms_dtype dt;
  const char *name = lua_tostring(L, idx);
  if (lua_type(L, idx) != LUA_TSTRING || !ms_dtype_from_name(name, &dt))
    bind_arg_error(L, idx, fname, what,
                     "a dtype name (float32, float64, bfloat16, float16, int64, int32, uint8, bool)");
  return dt;
}

/* ---- options tables ------------------------------------------------------------------------- */

/* Pushes the known names sorted, ", "-separated: the next name after the last one written,
 * found again each time (a handful of names, on the error path only). */
static void push_sorted_names(lua_State *L, const char *const *known) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (const char *prev = NULL;;) {
    const char *next = NULL;
    for (int k = 0; known[k]; k++)
      if ((!prev || strcmp(known[k], prev) > 0) && (!next || strcmp(known[k], next) < 0)) next = known[k];
    if (!next) break;
    luaL_addstring(&b, prev ? ", " : "");
    luaL_addstring(&b, next);
    prev = next;
  }
  luaL_pushresult(&b);
}

/* The message shape of the Lua library's options check (lua/moonshard/check_opts.lua): a string
 * key quoted, another as [key]; the known names sorted. */
static void check_known_keys(lua_State *L, int idx, const char *fname, const char *const *known) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    bool is_string = lua_type(L, -2) == LUA_TSTRING, ok = false;
    if (is_string)
      for (int k = 0; known[k] && !ok; k++) ok = strcmp(lua_tostring(L, -2), known[k]) == 0;
    if (!ok) {
      push_sorted_names(L, known);
      lua_pushvalue(L, -3);
      const char *key = luaL_tolstring(L, -1, NULL);
      bind_error(L, is_string ? "%s: unknown option '%s' (expected one of: %s)"
                              : "%s: unknown option [%s] (expected one of: %s)",
                 fname, key, lua_tostring(L, -3));
    }
    lua_pop(L, 1);
  }
}

ms_lua_opts bind_check_opts(lua_State *L, int idx, const char *fname, const char *const *known) {
  ms_lua_opts o = {L, 0, fname};
  bind_check_end(L, idx + 1, fname); /* the options table is always the last argument */
  if (lua_isnoneornil(L, idx)) return o;
  if (!lua_istable(L, idx)) bind_arg_error(L, idx, fname, "options", "an options table");
  o.idx = lua_absindex(L, idx);
  check_known_keys(L, o.idx, fname, known);
  return o;
}

/* Pushes option `key`; returns false (pushing nothing) when absent. */
static bool opt_push(ms_lua_opts o, const char *key) {
  if (!o.idx) return false;
  if (lua_getfield(o.L, o.idx, key) == LUA_TNIL) {
    lua_pop(o.L, 1);
    return false;
  }
  return true;
}

static int opt_type_error(ms_lua_opts o, const char *key, const char *expected) {
  return bind_error(o.L, "%s: option '%s': expected %s, got %s", o.fname, key, expected,
                    bind_describe(o.L, -1));
}

bool bind_opt_dtype(ms_lua_opts o, const char *key, ms_dtype *out) {
  if (!opt_push(o, key)) return false;
  if (lua_type(o.L, -1) != LUA_TSTRING || !ms_dtype_from_name(lua_tostring(o.L, -1), out))
    opt_type_error(o, key, "a dtype name (float32, float64, bfloat16, float16, int64, int32, uint8, bool)");
  lua_pop(o.L, 1);
  return true;
}

bool bind_opt_bool(ms_lua_opts o, const char *key, bool *out) {
  if (!opt_push(o, key)) return false;
  if (!lua_isboolean(o.L, -1)) opt_type_error(o, key, "a boolean");
  *out = lua_toboolean(o.L, -1);
  lua_pop(o.L, 1);
  return true;
}

bool bind_opt_number(ms_lua_opts o, const char *key, double *out) {
  if (!opt_push(o, key)) return false;
  if (lua_type(o.L, -1) != LUA_TNUMBER) opt_type_error(o, key, "a number");
  *out = lua_tonumber(o.L, -1);
  lua_pop(o.L, 1);
  return true;
}

bool bind_opt_integer(ms_lua_opts o, const char *key, int64_t *out) {
  if (!opt_push(o, key)) return false;
  int isnum = 0;
  *out = lua_tointegerx(o.L, -1, &isnum);
  if (!isnum) opt_type_error(o, key, "an integer");
  lua_pop(o.L, 1);
  return true;
}

ms_device bind_check_device(lua_State *L, int idx, const char *fname, const char *what) {
  ms_device d = {MS_CPU, 0};
  if (lua_isinteger(L, idx) && lua_tointeger(L, idx) >= 0 && lua_tointeger(L, idx) < MS_CUDA_MAX_DEVICES)
    return (ms_device){MS_CUDA, (int)lua_tointeger(L, idx)}; /* model:to(rank), as torch */
  if (lua_type(L, idx) != LUA_TSTRING || !ms_device_parse(lua_tostring(L, idx), &d))
    bind_arg_error(L, idx, fname, what, "a device: \"cpu\", \"cuda\", \"cuda:N\", \"meta\" or a CUDA device index");
  return d;
}

static void check_device_option(ms_lua_opts o, ms_lua_factory_opts *f) {
  if (!opt_push(o, "device")) return;
  if (lua_type(o.L, -1) != LUA_TSTRING && !lua_isinteger(o.L, -1))
    opt_type_error(o, "device", "a device name such as \"cpu\" or \"cuda:0\"");
  f->device = bind_check_device(o.L, lua_gettop(o.L), o.fname, "device");
  f->has_device = true;
  lua_pop(o.L, 1);
}

/* The device factories use without a device option: the CPU, or what an ms.device(...) scope set
 * (l_meta.c). Per process, as torch.set_default_device. */
static ms_device g_default_device = {MS_CPU, 0};

ms_device bind_default_device(void) { return g_default_device; }
void bind_set_default_device(ms_device d) { g_default_device = d; }

ms_lua_factory_opts bind_factory_options(lua_State *L, int idx, const char *fname, ms_dtype dflt) {
  static const char *const known[] = {"dtype", "device", "requires_grad", NULL};
  ms_lua_opts o = bind_check_opts(L, idx, fname, known);
  ms_lua_factory_opts f = {dflt, false, false, g_default_device};
  bind_opt_dtype(o, "dtype", &f.dtype);
  bind_opt_bool(o, "requires_grad", &f.requires_grad);
  check_device_option(o, &f);
  return f;
}

ms_tensor *bind_apply_factory_options(lua_State *L, ms_tensor *t, ms_lua_factory_opts o, const char *fname) {
  if (o.requires_grad && !ms_dtype_is_floating(t->dtype)) {
    ms_tensor_release(t);
    bind_error(L, "%s: only floating point tensors can require gradients, got dtype %s", fname,
               ms_dtype_name(o.dtype));
  }
  if (!ms_device_equal(ms_tensor_device(t), o.device)) {
    ms_tensor *moved = ms_tensor_to_device(t, o.device); /* t is no leaf requiring grad yet */
    ms_tensor_release(t);
    if (!(t = moved)) bind_error(L, "%s: option 'device': %s", fname, ms_error_last());
  }
  if (o.requires_grad) t->requires_grad = true;
  return t;
}

ms_operand bind_check_operand(lua_State *L, int idx, const char *fname, const char *what) {
  ms_tensor *t = ms_lua_to_tensor(L, idx);
  if (t) return ms_operand_tensor(t);
  if (lua_type(L, idx) == LUA_TNUMBER)
    return ms_operand_number(lua_tonumber(L, idx), lua_isinteger(L, idx) ? MS_INT64 : MS_FLOAT64);
  if (lua_isboolean(L, idx)) return ms_operand_number(lua_toboolean(L, idx), MS_BOOL);
  bind_arg_error(L, idx, fname, what, "a tensor or a number");
  return ms_operand_number(0, MS_INT64);
}

ms_tensor *bind_one_based(lua_State *L, ms_tensor *indices) {
  if (!indices) bind_raise(L);
  ms_status st = ms_binary_(MS_OP_ADD, indices, ms_operand_number(1, MS_INT64));
  if (st != MS_OK) ms_tensor_release(indices), bind_raise(L);
  return indices;
}

/* ---- values ------------------------------------------------------------------------------------ */

void bind_push_element(lua_State *L, const ms_tensor *t, int64_t i) {
  if (t->dtype == MS_BOOL) lua_pushboolean(L, ms_tensor_get_flat_int(t, i) != 0);
  else if (ms_dtype_is_integral(t->dtype)) lua_pushinteger(L, ms_tensor_get_flat_int(t, i));
  else lua_pushnumber(L, ms_tensor_get_flat(t, i));
}

static int size_tostring(lua_State *L) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "torch.Size([");
  lua_Integer n = luaL_len(L, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    if (i > 1) luaL_addstring(&b, ", ");
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, "])");
  luaL_pushresult(&b);
  return 1;
}

static int size_eq(lua_State *L) {
  lua_Integer n = luaL_len(L, 1);
  if (!lua_istable(L, 2) || luaL_len(L, 2) != n) return lua_pushboolean(L, 0), 1;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    lua_geti(L, 2, i);
    bool same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!same) return lua_pushboolean(L, 0), 1;
  }
  lua_pushboolean(L, 1);
  return 1;
}

void bind_push_size(lua_State *L, int ndim, const int64_t *shape) {
  lua_createtable(L, ndim, 0);
  for (int d = 0; d < ndim; d++) {
    lua_pushinteger(L, shape[d]);
    lua_rawseti(L, -2, d + 1);
  }
  if (luaL_newmetatable(L, MS_SIZE_MT)) {
    lua_pushcfunction(L, size_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushcfunction(L, size_eq);
    lua_setfield(L, -2, "__eq");
    lua_pushliteral(L, "Size");
    lua_setfield(L, -2, "__name");
  }
  lua_setmetatable(L, -2);
}

void bind_register_both(lua_State *L, const char *name, lua_CFunction fn) {
  lua_pushcfunction(L, fn);
  bind_register_value_both(L, name);
}

void bind_register_value_both(lua_State *L, const char *name) {
  lua_pushvalue(L, -1);
  lua_setfield(L, -4, name);
  lua_setfield(L, -2, name);
}
