/* l_autograd.c: the Lua face of autograd: backward, detach, requires_grad, grad mode scopes
 * (ms.no_grad() as a to-be-closed value or around a function), and tensor hooks written in Lua.
 * Lua hooks run inside the engine's backward walk under lua_pcall, so a Lua error in a hook
 * becomes an engine error that unwinds the walk cleanly before it is raised again here. */
#include <stdlib.h>
#include <string.h>

#include "ms_lua.h"

#define MS_GRAD_MODE_MT "moonshard.GradMode"
#define MS_HOOK_HANDLE_MT "moonshard.HookHandle"

void bind_set_requires_grad(lua_State *L, ms_tensor *t, bool on, const char *fname) {
  if (on && !ms_dtype_is_floating(t->dtype))
    bind_error(L, "%s: only floating point tensors can require gradients, got dtype %s", fname,
               ms_dtype_name(t->dtype));
  if (!on && t->grad_fn)
    bind_error(L, "%s: you can only change requires_grad of leaf tensors (this one was computed "
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
    return bind_error(L, "backward: create_graph (higher-order gradients) is not supported");
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
  const char *fname; /* "no_grad" or "enable_grad", for the message of a bare call */
  int depth;         /* the stack depth of the function that opened it */
  int line;          /* and its line there */
  lua_Hook old_hook; /* the hook that was set before the check (restored after it) */
  int old_mask, old_count;
} grad_scope;

static void scope_end(grad_scope *s) {
  if (s->open) ms_grad_set_enabled(s->previous), s->open = false;
}

static int scope_close(lua_State *L) {
  scope_end(luaL_checkudata(L, 1, MS_GRAD_MODE_MT));
  return 0;
}

/* ---- a bare ms.no_grad() ----------------------------------------------------------------------
 * `ms.no_grad()` whose result is dropped would switch gradients off until the collector finds the
 * scope. A C function cannot see whether its result goes to a `<close>` variable, so the check
 * comes just after: a line and return hook, set when the scope opens, waits for the opening
 * function's next line (or its return). By then a scope bound with `<close>` sits in one of its
 * locals (or, at a return, was closed); a scope that is still open and in no local was dropped:
 * it is closed (so it changed nothing) and the call is an error showing the `<close>` form. The
 * hook runs for one line and is then removed, the previous hook put back. */

#define PENDING_SCOPE_KEY "moonshard.pending_grad_scope"

static int stack_depth(lua_State *L, int level) {
  lua_Debug ar;
  while (lua_getstack(L, level, &ar)) level++;
  return level;
}

/* True when a local of the function at `level` holds the value on top of the stack. */
static bool held_in_local(lua_State *L, int level) {
  lua_Debug ar;
  if (!lua_getstack(L, level, &ar)) return false;
  for (int i = 1;; i++) {
    const char *name = lua_getlocal(L, &ar, i);
    if (!name) return false;
    bool same = name[0] != '(' && lua_rawequal(L, -1, -2); /* "(temporary)" slots are no locals */
    lua_pop(L, 1);
    if (same) return true;
  }
}

/* True when the function a return hook runs for hands back the value on top of the stack. */
static bool returns_value(lua_State *L, lua_Debug *ar) {
  if (!lua_getinfo(L, "r", ar)) return false;
  for (int i = 0; i < ar->ntransfer; i++) {
    if (!lua_getlocal(L, ar, ar->ftransfer + i)) return false;
    bool same = lua_rawequal(L, -1, -2);
    lua_pop(L, 1);
    if (same) return true;
  }
  return false;
}

/* True when the function at `level` is a Lua function (not C: pcall, a host). */
static bool lua_frame(lua_State *L, int level) {
  lua_Debug ar;
  return lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar) && ar.what[0] != 'C';
}

static void scope_check_hook(lua_State *L, lua_Debug *ar) {
  lua_getfield(L, LUA_REGISTRYINDEX, PENDING_SCOPE_KEY);
  grad_scope *s = luaL_testudata(L, -1, MS_GRAD_MODE_MT);
  int depth = stack_depth(L, 0);
  if (s && depth > s->depth) { /* inside a function the opener's line calls: not yet */
    lua_pop(L, 1);
    return;
  }
  /* `return ms.no_grad()` (a helper that opens the scope for its caller): the caller's next line
   * decides; a C caller (pcall, a host) keeps it, as when C opens a scope */
  bool returned = s && s->open && ar->event == LUA_HOOKRET && depth == s->depth && returns_value(L, ar);
  if (returned && lua_frame(L, 1)) {
    s->depth--;
    lua_pop(L, 1);
    return;
  }
  bool dropped = s && s->open && !returned &&
                 (ar->event == LUA_HOOKRET || depth < s->depth || !held_in_local(L, 0));
  lua_sethook(L, s ? s->old_hook : NULL, s ? s->old_mask : 0, s ? s->old_count : 0);
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, PENDING_SCOPE_KEY);
  lua_pop(L, 1);
  if (!dropped) return;
  scope_end(s);
  if (depth < s->depth) return; /* an error unwound the opener: nothing to point at */
  bind_error_from(L, 0, "ms.%s() on line %d: its scope was not kept, so it would switch gradients %s "
                  "until the collector found it; write `local _ <close> = ms.%s()` for the rest of the "
                  "block, or ms.%s(function() ... end)", s->fname, s->line,
                  strcmp(s->fname, "no_grad") == 0 ? "off" : "on", s->fname, s->fname);
}

/* Arms the check of the scope on top of the stack (see above). */
static void scope_watch(lua_State *L, grad_scope *s) {
  lua_Debug ar;
  if (!lua_getstack(L, 1, &ar)) return;
  lua_getinfo(L, "Sl", &ar);
  if (ar.what[0] == 'C') return; /* opened by C (a host, pcall(ms.no_grad)): its caller keeps it */
  s->line = ar.currentline;
  s->depth = stack_depth(L, 1) - 1; /* the frames up to the opener: all but this function */
  lua_getfield(L, LUA_REGISTRYINDEX, PENDING_SCOPE_KEY);
  bool armed = !lua_isnil(L, -1); /* a check already waits: keep its hook to restore */
  grad_scope *pending = armed ? luaL_testudata(L, -1, MS_GRAD_MODE_MT) : NULL;
  lua_pop(L, 1);
  s->old_hook = pending ? pending->old_hook : lua_gethook(L);
  s->old_mask = pending ? pending->old_mask : lua_gethookmask(L);
  s->old_count = pending ? pending->old_count : lua_gethookcount(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, PENDING_SCOPE_KEY);
  lua_sethook(L, scope_check_hook, LUA_MASKLINE | LUA_MASKRET, 0);
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
  s->fname = enabled ? "enable_grad" : "no_grad";
  luaL_setmetatable(L, MS_GRAD_MODE_MT);
  scope_watch(L, s);
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
  if (!h) bind_error(L, "%s: out of memory", fname);
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
