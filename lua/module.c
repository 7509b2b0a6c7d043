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
extern const struct ms_lua_embedded ms_lua_embedded_files[]; /* generated at build time */

/* package.preload loader for an embedded file; upvalue 1 is its index in the table. */
static int load_embedded(lua_State *L) {
  const struct ms_lua_embedded *f = &ms_lua_embedded_files[lua_tointeger(L, lua_upvalueindex(1))];
  char chunkname[128];
  snprintf(chunkname, sizeof chunkname, "=[moonshard] %s", f->name);
  if (luaL_loadbuffer(L, f->src, f->len, chunkname) != LUA_OK) return lua_error(L);
  lua_pushstring(L, f->name);
  lua_call(L, 1, 1);
  return 1;
}

void ms_lua_preload_embedded(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (int i = 0; ms_lua_embedded_files[i].name; i++) {
    lua_pushinteger(L, i);
    lua_pushcclosure(L, load_embedded, 1);
    lua_setfield(L, -2, ms_lua_embedded_files[i].name);
  }
  lua_pop(L, 1);
}

int luaopen_moonshard(lua_State *L) {
  ms_lua_preload_embedded(L);
  lua_newtable(L); /* the module */
  lua_newtable(L); /* tensor methods */
  ms_lua_open_tensor(L);
  ms_lua_open_create(L);
  ms_lua_open_view(L);
  ms_lua_open_math(L);
  ms_lua_open_runtime(L);
  ms_lua_open_autograd(L);
  ms_lua_open_nn_conv(L);
  ms_lua_open_nn_ops(L);
  ms_lua_open_optim(L);
  ms_lua_open_io(L);
  ms_lua_open_io_parts(L);
  ms_lua_open_files(L);
  ms_lua_open_idx(L);
  ms_lua_open_random_fill(L);
  ms_lua_open_transforms(L);
  ms_lua_open_loader(L);
  ms_lua_open_dist(L);
  ms_lua_open_launch(L);
  ms_lua_open_fsdp(L);
  ms_lua_open_cuda(L);
  lua_setfield(L, -2, "Tensor"); /* ms.Tensor: the method table, to extend from Lua */
  /* ms.flatten(x, start_dim) is the same function as x:flatten(start_dim): already there. */
  return 1;
}
