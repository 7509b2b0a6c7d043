/* module.c: luaopen_moonshard, the one entry point of the Lua face: builds the module table and
 * the tensor method table from the binding files, and makes the pure-Lua library files that
 * are embedded in the binary requireable as "moonshard.<name>". */
#include <stdio.h>
#include <string.h>

#include "ms_lua.h"

struct ms_lua_embedded {
  const char *name;
  const char *src;
  size_t len;
};
extern const struct ms_lua_embedded bind_embedded_files[]; /* generated at build time */

/* Pushes the environment of the library's chunks: the globals, except that `error` positions
 * its message at the user's line (bind_lib_error), so that the library's hundreds of
 * error(msg, level) calls report where the user called in, whatever their level. Reads and
 * writes of every other name go to the globals. Made once per state. */
static void push_library_env(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, "moonshard.library_env") == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, bind_lib_error);
  lua_setfield(L, -2, "error");
  lua_createtable(L, 0, 2);
  lua_pushglobaltable(L);
  lua_setfield(L, -2, "__index");
  lua_pushglobaltable(L);
  lua_setfield(L, -2, "__newindex");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "moonshard.library_env");
}

/* package.preload loader for an embedded file; upvalue 1 is its index in the table. The chunk
 * name "=[moonshard] <name>" is how errors tell the library's lines from the user's (l_errors.c). */
static int load_embedded(lua_State *L) {
  const struct ms_lua_embedded *f = &bind_embedded_files[lua_tointeger(L, lua_upvalueindex(1))];
  char chunkname[128];
  snprintf(chunkname, sizeof chunkname, "=[moonshard] %s", f->name);
  if (luaL_loadbuffer(L, f->src, f->len, chunkname) != LUA_OK) return lua_error(L);
  push_library_env(L);
  lua_setupvalue(L, -2, 1); /* _ENV */
  lua_pushstring(L, f->name);
  lua_call(L, 1, 1);
  return 1;
}

void bind_preload_embedded(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (int i = 0; bind_embedded_files[i].name; i++) {
    lua_pushinteger(L, i);
    lua_pushcclosure(L, load_embedded, 1);
    lua_setfield(L, -2, bind_embedded_files[i].name);
  }
  lua_pop(L, 1);
}

/* ms.nn, ms.optim, ms.F, ms.data, ...: the library's modules, required on first read and then
 * kept as fields (requiring them while the module is being opened would recurse: each requires
 * "moonshard" itself). */
static const char *const LAZY_FIELDS[][2] = {
    {"nn", "moonshard.nn"},           {"optim", "moonshard.optim"},
    {"F", "moonshard.functional"},    {"functional", "moonshard.functional"},
    {"data", "moonshard.data"},       {"lr_scheduler", "moonshard.lr_scheduler"},
    {"datasets", "moonshard.datasets"}, {"transforms", "moonshard.transforms"},
    {"samplers", "moonshard.samplers"}, {"fsdp", "moonshard.fsdp"},
};

static int module_index(lua_State *L) {
  const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "";
  for (size_t i = 0; i < sizeof LAZY_FIELDS / sizeof LAZY_FIELDS[0]; i++) {
    if (strcmp(key, LAZY_FIELDS[i][0]) != 0) continue;
    lua_getglobal(L, "require");
    lua_pushstring(L, LAZY_FIELDS[i][1]);
    lua_call(L, 1, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, -2);
    lua_rawset(L, 1);
    return 1;
  }
  return 0;
}

int luaopen_moonshard(lua_State *L) {
  bind_preload_embedded(L);
  lua_newtable(L); /* the module */
  lua_newtable(L); /* tensor methods */
  bind_open_tensor(L);
  bind_open_create(L);
  bind_open_view(L);
  bind_open_math(L);
  bind_open_select(L);
  bind_open_runtime(L);
  bind_open_autograd(L);
  bind_open_function(L);
  bind_open_nn_conv(L);
  bind_open_nn_ops(L);
  bind_open_optim(L);
  bind_open_io(L);
  bind_open_io_parts(L);
  bind_open_files(L);
  bind_open_idx(L);
  bind_open_random_fill(L);
  bind_open_meta(L);
  bind_open_transforms(L);
  bind_open_loader(L);
  bind_open_dist(L);
  bind_open_launch(L);
  bind_open_fsdp(L);
  bind_open_watch(L);
  bind_open_cuda(L);
  bind_open_errors(L);
  lua_setfield(L, -2, "Tensor"); /* ms.Tensor: the method table, to extend from Lua */
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, module_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  /* ms.flatten(x, start_dim) is the same function as x:flatten(start_dim): already there. */
  return 1;
}
