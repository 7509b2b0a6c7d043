/* l_idx.c: ms.read_idx(path) -> uint8 tensor, the IDX reader (engine/src/data/idx.c) for Lua.
 * The datasets (lua/moonshard/datasets.lua) are built on it. */
#include "ms_lua.h"

static int l_read_idx(lua_State *L) {
  if (lua_type(L, 1) != LUA_TSTRING) return ms_lua_arg_error(L, 1, "read_idx", "path", "a string");
  ms_tensor *t = NULL;
  ms_idx_read(lua_tostring(L, 1), &t);
  return ms_lua_push_result(L, t); /* raises the reader's message when t is NULL */
}

void ms_lua_open_idx(lua_State *L) {
  lua_pushcfunction(L, l_read_idx);
  lua_setfield(L, -3, "read_idx");
}
