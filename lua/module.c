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

/* package.preload loader for an embedded file; upvalue 1 is its index in the table. */
static int load_embedded(lua_State *L) {
  const struct ms_lua_embedded *f = &bind_embedded_files[lua_tointeger(L, lua_upvalueindex(1))];
  char chunkname[128];
  snprintf(chunkname, sizeof chunkname, "=[moonshard] %s", f->name);
  if (luaL_loadbuffer(L, f->src, f->len, chunkname) != LUA_OK) return lua_error(L);
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
  bind_open_cuda(L);
  lua_setfield(L, -2, "Tensor"); /* ms.Tensor: the method table, to extend from Lua */
  /* ms.flatten(x, start_dim) is the same function as x:flatten(start_dim): already there. */
  return 1;
}
