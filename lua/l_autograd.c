/* l_autograd.c: the Lua face of autograd: backward, detach, requires_grad, grad mode scopes
 * (ms.no_grad() as a to-be-closed value or around a function), and tensor hooks written in Lua.
 * Lua hooks run inside the engine's backward walk under lua_pcall, so a Lua error in a hook
 * becomes an engine error that unwinds the walk cleanly before it is raised again here. */
#include <stdlib.h>

#include "ms_lua.h"

#define MS_GRAD_MODE_MT "moonshard.GradMode"
#define MS_HOOK_HANDLE_MT "moonshard.HookHandle"

void bind_set_requires_grad(lua_State *L, ms_tensor *t, bool on, const char *fname) {
  if (on && !ms_dtype_is_floating(t->dtype))
    luaL_error(L, "%s: only floating point tensors can require gradients, got dtype %s", fname,
               ms_dtype_name(t->dtype));
  if (!on && t->grad_fn)
    luaL_error(L, "%s: you can only change requires_grad of leaf tensors (this one was computed "
               "by %s); use :detach() to get a tensor that does not require grad", fname, t->grad_fn->name);
  t->requires_grad = on;
}

static int l_requires_grad_(lua_State *L) {
  bind_check_end(L, 3, "requires_grad_");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "requires_grad_");
  bind_set_requires_grad(L, t, lua_isnoneornil(L, 2) ? true : lua_toboolean(L, 2), "requires_grad_");
  lua_settop(L, 1);
  return 1;
}

/* backward(t, grad?, {retain_graph=false}) */
static int l_backward(lua_State *L) {
  static const char *const known[] = {"retain_graph", "create_graph", NULL};
  ms_tensor *t = ms_lua_check_tensor(L, 1, "backward");
  int optidx = 2;
  ms_tensor *grad = NULL;
  if (ms_lua_to_tensor(L, 2)) grad = ms_lua_to_tensor(L, 2), optidx = 3;
  else if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
    return bind_arg_error(L, 2, "backward", "gradient", "a tensor or an options table");
  ms_lua_opts o = bind_check_opts(L, optidx, "backward", known);
  bool retain = false, create = false;
  bind_opt_bool(o, "retain_graph", &retain);
  if (bind_opt_bool(o, "create_graph", &create) && create)
    return luaL_error(L, "backward: create_graph (higher-order gradients) is not supported");
  bind_check_status(L, ms_backward(t, grad, retain));
  return 0;
}

static int l_detach(lua_State *L) {
  bind_check_end(L, 2, "detach");
  return bind_push_result(L, ms_tensor_detach(ms_lua_check_tensor(L, 1, "detach")));
}

/* ---- grad mode --------------------------------------------------------------------------------- */

/* A grad-mode scope: remembers the mode to restore on __close (or __gc if never closed). */
typedef struct grad_scope {
  bool previous;
  bool open;
} grad_scope;

static int scope_close(lua_State *L) {
  grad_scope *s = luaL_checkudata(L, 1, MS_GRAD_MODE_MT);
  if (s->open) ms_grad_set_enabled(s->previous), s->open = false;
  return 0;
}

/* Calls the function at index 2 with the arguments after it, grad mode set to `enabled`,
 * restoring the mode whether it returns or raises. */
static int call_with_grad_mode(lua_State *L, bool enabled) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  bool prev = ms_grad_set_enabled(enabled);
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  ms_grad_set_enabled(prev);
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

static int grad_mode(lua_State *L, bool enabled) {
  if (!lua_isnoneornil(L, 1)) return call_with_grad_mode(L, enabled);
  grad_scope *s = lua_newuserdatauv(L, sizeof *s, 0);
  s->open = false;
  luaL_setmetatable(L, MS_GRAD_MODE_MT);
  s->previous = ms_grad_set_enabled(enabled);
  s->open = true;
  return 1;
}

static int l_no_grad(lua_State *L) { return grad_mode(L, false); }
static int l_enable_grad(lua_State *L) { return grad_mode(L, true); }

static int l_set_grad_enabled(lua_State *L) {
  bind_check_end(L, 2, "set_grad_enabled");
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  ms_grad_set_enabled(lua_toboolean(L, 1));
  return 0;
}

static int l_is_grad_enabled(lua_State *L) { return lua_pushboolean(L, ms_grad_enabled()), 1; }

/* ---- hooks ------------------------------------------------------------------------------------- */

typedef struct lua_hook {
  lua_State *L;
  int ref; /* the Lua function, in the registry */
} lua_hook;

static void lua_hook_free(void *ctx) {
  lua_hook *h = ctx;
  luaL_unref(h->L, LUA_REGISTRYINDEX, h->ref);
  free(h);
}

/* Calls the hook's function with `arg` (a tensor, new reference) under pcall; the result stays
 * on the stack. An error becomes the engine's error. */
static ms_status call_lua_hook(lua_hook *h, ms_tensor *arg) {
  lua_State *L = h->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, h->ref);
  ms_tensor_retain(arg);
  ms_lua_push_tensor(L, arg);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    ms_status st = ms_error(MS_ERR_RUNTIME, "hook: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return st;
  }
  return MS_OK;
}

static ms_status grad_hook_trampoline(void *ctx, ms_tensor *grad, ms_tensor **replace) {
  lua_hook *h = ctx;
  if (call_lua_hook(h, grad) != MS_OK) return MS_ERR_RUNTIME;
  ms_tensor *r = ms_lua_to_tensor(h->L, -1);
  ms_status st = MS_OK;
  if (r) ms_tensor_retain(r), *replace = r;
  else if (!lua_isnil(h->L, -1))
    st = ms_error(MS_ERR_RUNTIME, "hook: a gradient hook must return a tensor or nothing, got %s",
                  luaL_typename(h->L, -1));
  lua_pop(h->L, 1);
  return st;
}

static ms_status post_hook_trampoline(void *ctx, ms_tensor *param) {
  lua_hook *h = ctx;
  if (call_lua_hook(h, param) != MS_OK) return MS_ERR_RUNTIME;
  lua_pop(h->L, 1);
  return MS_OK;
}

/* A handle with :remove(), as PyTorch's RemovableHandle. */
typedef struct hook_handle {
  int id;
} hook_handle;

static int push_handle(lua_State *L, int id) {
  if (!id) return bind_raise(L);
  hook_handle *hh = lua_newuserdatauv(L, sizeof *hh, 1);
  hh->id = id;
  lua_pushvalue(L, 1); /* the tensor, kept by the handle for remove() */
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, MS_HOOK_HANDLE_MT);
  return 1;
}

static int handle_remove(lua_State *L) {
  hook_handle *hh = luaL_checkudata(L, 1, MS_HOOK_HANDLE_MT);
  if (!hh->id) return 0;
  lua_getiuservalue(L, 1, 1);
  ms_tensor *t = ms_lua_to_tensor(L, -1);
  if (t) bind_check_status(L, ms_tensor_remove_hook(t, hh->id));
  hh->id = 0;
  return 0;
}

static lua_hook *new_lua_hook(lua_State *L, int fn_idx, const char *fname) {
  luaL_checktype(L, fn_idx, LUA_TFUNCTION);
  lua_hook *h = malloc(sizeof *h);
  if (!h) luaL_error(L, "%s: out of memory", fname);
  lua_pushvalue(L, fn_idx);
  h->L = L;
  h->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return h;
}

static int l_register_hook(lua_State *L) {
  bind_check_end(L, 3, "register_hook");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "register_hook");
  lua_hook *h = new_lua_hook(L, 2, "register_hook");
  return push_handle(L, ms_tensor_register_hook(t, grad_hook_trampoline, h, lua_hook_free));
}

static int l_register_post_accumulate_grad_hook(lua_State *L) {
  bind_check_end(L, 3, "register_post_accumulate_grad_hook");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "register_post_accumulate_grad_hook");
  lua_hook *h = new_lua_hook(L, 2, "register_post_accumulate_grad_hook");
  return push_handle(L, ms_tensor_register_post_accumulate_hook(t, post_hook_trampoline, h, lua_hook_free));
}

void bind_open_autograd(lua_State *L) {
  luaL_newmetatable(L, MS_GRAD_MODE_MT);
  lua_pushcfunction(L, scope_close);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, scope_close);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newmetatable(L, MS_HOOK_HANDLE_MT);
  lua_newtable(L);
  lua_pushcfunction(L, handle_remove);
  lua_setfield(L, -2, "remove");
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  static const struct { const char *name; lua_CFunction fn; } both[] = {
      {"backward", l_backward}, {"detach", l_detach}, {"requires_grad_", l_requires_grad_},
      {"register_hook", l_register_hook},
      {"register_post_accumulate_grad_hook", l_register_post_accumulate_grad_hook}};
  for (size_t i = 0; i < sizeof both / sizeof both[0]; i++) bind_register_both(L, both[i].name, both[i].fn);
  static const luaL_Reg fns[] = {{"no_grad", l_no_grad}, {"enable_grad", l_enable_grad},
                                 {"set_grad_enabled", l_set_grad_enabled},
                                 {"is_grad_enabled", l_is_grad_enabled}, {NULL, NULL}};
  lua_pushvalue(L, -2);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
