/* moonshard/lua.h: the Lua face for C programs that run their own lua_State: open the library
 * and move tensors across the boundary. Tensors in Lua are full userdata holding one engine
 * reference each, released by __gc and __close. */
#ifndef MOONSHARD_LUA_H
#define MOONSHARD_LUA_H

#include <lua.h>

#include "moonshard/export.h"
#include "moonshard/tensor.h"

/* The module opener: `require "moonshard"` calls it; pushes the module table. */
MS_API int luaopen_moonshard(lua_State *L);
/* Pushes a tensor userdata that takes over one reference of t (the caller's reference moves
 * to Lua). Pushes nil if t is NULL. */
MS_API void ms_lua_push_tensor(lua_State *L, ms_tensor *t);
/* The tensor at idx (borrowed: valid while the value stays on the stack), or a Lua error
 * naming `fname` and argument idx. */
MS_API ms_tensor *ms_lua_check_tensor(lua_State *L, int idx, const char *fname);
/* The tensor at idx (borrowed) or NULL if the value is not a tensor. */
MS_API ms_tensor *ms_lua_to_tensor(lua_State *L, int idx);

#endif
