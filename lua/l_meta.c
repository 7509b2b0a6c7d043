/* l_meta.c: the meta device from Lua (moonshard/meta.h): ms.device(name) as a to-be-closed
 * scope of the factories' default device (`local _ <close> = ms.device("meta")`, PyTorch 2's
 * `with torch.device("meta")`), ms.get_default_device(), and the helpers nn.deferred_init,
 * module:to_empty and nn.materialize_module are written with (lua/moonshard/nn_meta.lua). */
#include "ms_lua.h"

#define DEVICE_SCOPE_MT "moonshard.device_scope"

static void push_device_name(lua_State *L, ms_device d) {
  char b[MS_DEVICE_STR_LEN];
  lua_pushstring(L, ms_device_str(d, b, sizeof b));
}

/* The scope remembers the device it replaced; closing it (once) puts that back. */
typedef struct device_scope {
  ms_device device, previous;
  bool open;
} device_scope;

static int scope_close(lua_State *L) {
  device_scope *s = luaL_checkudata(L, 1, DEVICE_SCOPE_MT);
  if (s->open) bind_set_default_device(s->previous);
  s->open = false;
  return 0;
}

static int scope_tostring(lua_State *L) {
  device_scope *s = luaL_checkudata(L, 1, DEVICE_SCOPE_MT);
  char b[MS_DEVICE_STR_LEN];
  lua_pushfstring(L, "device(type='%s')", ms_device_str(s->device, b, sizeof b));
  return 1;
}

/* ms.device(name): the factories' default device becomes `name` until the result is closed. */
static int l_device(lua_State *L) {
  bind_check_end(L, 2, "device");
  ms_device d = bind_check_device(L, 1, "device", "type");
  device_scope *s = lua_newuserdatauv(L, sizeof *s, 0);
  *s = (device_scope){d, bind_default_device(), true};
  luaL_setmetatable(L, DEVICE_SCOPE_MT);
  bind_set_default_device(d);
  return 1;
}

static int l_get_default_device(lua_State *L) {
  push_device_name(L, bind_default_device());
  return 1;
}

/* ms._meta_records(t): how many initialisers t's (meta) storage holds. */
static int l_meta_records(lua_State *L) {
  lua_pushinteger(L, ms_meta_record_count(ms_lua_check_tensor(L, 1, "_meta_records")->storage));
  return 1;
}

/* ms._meta_materialize(t, device, replay): t's meta storage gets bytes on device (every view
 * and tie follows), with its records replayed when replay is true. */
static int l_meta_materialize(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "_meta_materialize");
  ms_device d = bind_check_device(L, 2, "_meta_materialize", "device");
  bind_check_status(L, ms_meta_materialize(t->storage, d, lua_toboolean(L, 3)));
  return 0;
}

/* ms._storage_key(t): a light userdata naming t's storage, for finding views and ties. */
static int l_storage_key(lua_State *L) {
  lua_pushlightuserdata(L, ms_lua_check_tensor(L, 1, "_storage_key")->storage);
  return 1;
}

/* ms._release_storage(t): frees t's bytes now, not at Lua's next collection (FSDP's wrap drops
 * each materialised unit's full parameters before the next unit). */
static int l_release_storage(lua_State *L) {
  ms_storage_release_data(ms_lua_check_tensor(L, 1, "_release_storage")->storage);
  return 0;
}

void bind_open_meta(lua_State *L) {
  luaL_newmetatable(L, DEVICE_SCOPE_MT);
  static const luaL_Reg meta[] = {{"__close", scope_close}, {"__tostring", scope_tostring}, {NULL, NULL}};
  luaL_setfuncs(L, meta, 0);
  lua_pop(L, 1);
  static const luaL_Reg fns[] = {{"device", l_device}, {"get_default_device", l_get_default_device},
                                 {"_meta_records", l_meta_records}, {"_meta_materialize", l_meta_materialize},
                                 {"_storage_key", l_storage_key}, {"_release_storage", l_release_storage},
                                 {NULL, NULL}};
  for (const luaL_Reg *f = fns; f->name; f++) {
    lua_pushcfunction(L, f->func);
    lua_setfield(L, -3, f->name);
  }
}
