/* l_function.c: the C half of custom autograd Functions (ms.autograd.Function, written in Lua in
 * lua/moonshard/autograd.lua): ms.autograd._function_node attaches one engine node whose backward
 * calls a Lua function, and ms.autograd's other names load from that Lua file on first use. The
 * Lua backward runs inside the engine's walk under lua_pcall, as the tensor hooks of
 * l_autograd.c do: its error becomes the engine's error, naming the node, and unwinds the walk. */
#include <stdlib.h>

#include "ms_lua.h"

typedef struct lua_backward {
  lua_State *L; /* the main thread: a coroutine that recorded the node may be gone by backward */
  int ref;      /* the Lua backward, in the registry */
} lua_backward;

static void lua_backward_free(void *ctx) {
  lua_backward *b = ctx;
  luaL_unref(b->L, LUA_REGISTRYINDEX, b->ref);
  free(b);
}

/* Reads the Lua backward's result (a table: entry i the gradient of input i, nil for none). */
static ms_status take_grads(lua_State *L, const ms_node *node, ms_tensor **grad_in) {
  if (!lua_istable(L, -1))
    return ms_error(MS_ERR_RUNTIME, "%s: the backward must give a table of gradients, got %s", node->name,
                    luaL_typename(L, -1));
  for (int i = 0; i < node->num_inputs; i++) {
    lua_rawgeti(L, -1, i + 1);
    ms_tensor *g = ms_lua_to_tensor(L, -1);
    bool bad = !g && !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (bad)
      return ms_error(MS_ERR_RUNTIME, "%s: the gradient of input %d must be a tensor or nil", node->name, i + 1);
    if (g && node->next[i].node) ms_tensor_retain(g), grad_in[i] = g;
  }
  return MS_OK;
}

static ms_status call_backward(void *ctx, const ms_node *node, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  lua_backward *b = ctx;
  lua_State *L = b->L;
  if (!lua_checkstack(L, node->num_outputs + 2))
    return ms_error(MS_ERR_MEMORY, "%s: out of Lua stack space", node->name);
  lua_rawgeti(L, LUA_REGISTRYINDEX, b->ref);
  for (int k = 0; k < node->num_outputs; k++) ms_tensor_retain(grad_out[k]), ms_lua_push_tensor(L, grad_out[k]);
  if (lua_pcall(L, node->num_outputs, 1, 0) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    ms_status st = ms_error(MS_ERR_RUNTIME, "%s: %s", node->name, msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
    return st;
  }
  ms_status st = take_grads(L, node, grad_in);
  lua_pop(L, 1);
  if (st != MS_OK)
    for (int i = 0; i < node->num_inputs; i++) ms_tensor_release(grad_in[i]), grad_in[i] = NULL;
  return st;
}

/* _function_node(name, backward, inputs, n, outputs) -> the outputs as new tensors (sharing their
 * storage) with one node as grad_fn. inputs[1..n]: tensors, or anything else for inputs that are
 * not tensors; outputs: 1..4 tensors. backward(grad_1, ...) returns a table of n gradients. */
static int l_function_node(lua_State *L) {
  const char *fname = "autograd.Function.apply";
  const char *name = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  luaL_checktype(L, 3, LUA_TTABLE);
  int n = bind_narrow_int(L, luaL_checkinteger(L, 4), 0, 1 << 20, fname, "number of inputs");
  luaL_checktype(L, 5, LUA_TTABLE);
  int nout = (int)luaL_len(L, 5);
  if (nout < 1 || nout > MS_NODE_MAX_OUTPUTS)
    return bind_error(L, "%s: %s: forward must return 1 to %d differentiable tensors, got %d", fname, name,
                      MS_NODE_MAX_OUTPUTS, nout);
  ms_tensor **inputs = lua_newuserdatauv(L, sizeof *inputs * (size_t)(n ? n : 1), 0); /* freed by the GC */
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 3, i + 1);
    inputs[i] = ms_lua_to_tensor(L, -1);
    lua_pop(L, 1);
  }
  lua_backward *b = malloc(sizeof *b);
  if (!b) return bind_error(L, "%s: out of memory", fname);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  b->L = lua_tothread(L, -1);
  lua_pop(L, 1);
  lua_pushvalue(L, 2);
  b->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  ms_node *node = ms_custom_node_new(name, n, inputs, call_backward, b, lua_backward_free);
  if (!node) return bind_raise(L);
  lua_createtable(L, nout, 0);
  for (int k = 0; k < nout; k++) {
    lua_rawgeti(L, 5, k + 1);
    ms_tensor *out = ms_lua_to_tensor(L, -1);
    lua_pop(L, 1);
    ms_tensor *d = out ? ms_tensor_detach(out) : NULL;
    if (!d) {
      ms_node_release(node);
      if (out) return bind_raise(L);
      return bind_error(L, "%s: %s: output %d is not a tensor", fname, name, k + 1);
    }
    ms_node_attach(node, d, k);
    ms_lua_push_tensor(L, d);
    lua_rawseti(L, -2, k + 1);
  }
  ms_node_release(node);
  return 1;
}

/* ms.autograd.X for a name this file does not define: moonshard.autograd's (Function), cached. */
static int autograd_index(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "moonshard.autograd");
  lua_call(L, 1, 1);
  lua_pushvalue(L, 2);
  lua_gettable(L, -2);
  if (!lua_isnil(L, -1)) {
    lua_pushvalue(L, 2);
    lua_pushvalue(L, -2);
    lua_rawset(L, 1);
  }
  return 1;
}

void bind_open_function(lua_State *L) {
  lua_newtable(L);
  lua_pushcfunction(L, l_function_node);
  lua_setfield(L, -2, "_function_node");
  lua_newtable(L);
  lua_pushcfunction(L, autograd_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setfield(L, -3, "autograd");
}
