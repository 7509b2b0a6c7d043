/* test_lua_box_oom.c: an out-of-memory error while a tensor is boxed for Lua (issue 17:
 * lua/l_tensor.c leaked the tensor's reference) must release the reference. A Lua state whose
 * allocator fails on demand pushes a tensor under lua_pcall; the tensor's refcount must be back
 * to what the caller held. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdbool.h>
#include <stdlib.h>

#include "moonshard/lua.h"
#include "moonshard/moonshard.h"
#include "test.h"

static bool fail_allocations;

static void *failing_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud, (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  if (fail_allocations && nsize > osize) return NULL;
  return realloc(ptr, nsize);
}

static int push(lua_State *L) {
  ms_lua_push_tensor(L, lua_touserdata(L, 1));
  return 1;
}

int main(void) {
  lua_State *L = lua_newstate(failing_alloc, NULL);
  luaL_openlibs(L);
  luaL_requiref(L, "moonshard", luaopen_moonshard, 0);
  lua_settop(L, 0);
  ms_tensor *t = ms_tensor_new_zeros(1, (int64_t[]){3}, MS_FLOAT32);
  CHECK(t != NULL);

  ms_tensor_retain(t); /* the reference that push hands to the box */
  lua_pushcfunction(L, push);
  lua_pushlightuserdata(L, t);
  fail_allocations = true;
  int st = lua_pcall(L, 1, 1, 0);
  fail_allocations = false;
  CHECK(st == LUA_ERRMEM);
  CHECK(atomic_load(&t->refcount) == 1); /* released, not leaked */
  lua_settop(L, 0);

  ms_tensor_retain(t); /* and boxing still works once memory is back */
  lua_pushcfunction(L, push);
  lua_pushlightuserdata(L, t);
  CHECK(lua_pcall(L, 1, 1, 0) == LUA_OK);
  CHECK(atomic_load(&t->refcount) == 2);
  lua_close(L);
  CHECK(atomic_load(&t->refcount) == 1);
  ms_tensor_release(t);
  return ms_test_finish();
}
