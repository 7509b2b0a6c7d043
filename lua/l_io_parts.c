/* l_io_parts.c: what sharded checkpoints need beyond ms.save/ms.load (l_io.c): an open
 * safetensors file read a range at a time (a rank reads only the elements it keeps), and a JSON
 * reader for their index. Both are internal (ms._safetensors_open, ms._json_decode), used by
 * lua/moonshard/fsdp_state.lua. */
#include <string.h>

#include "moonshard/io.h"
#include "moonshard/json.h"
#include "ms_lua.h"

#define FILE_MT "moonshard.SafetensorsFile"

typedef struct file_box {
  ms_safetensors_file *f;
} file_box;

static ms_safetensors_file *check_file(lua_State *L) {
  file_box *b = luaL_checkudata(L, 1, FILE_MT);
  if (!b->f) bind_error(L, "safetensors file: read after close");
  return b->f;
}

/* __gc and __close share this; safe to call twice. */
static int file_close(lua_State *L) {
  file_box *b = luaL_checkudata(L, 1, FILE_MT);
  ms_safetensors_close(b->f);
  b->f = NULL;
  return 0;
}

/* ms._safetensors_open(path) -> file, with file:read(name, offset, count) (offset counted from
 * 0 in elements, as the index stores it) and file:close(). */
static int l_open(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  file_box *b = lua_newuserdatauv(L, sizeof *b, 0); /* the box exists before what it owns */
  b->f = NULL;
  luaL_setmetatable(L, FILE_MT);
  if (!(b->f = ms_safetensors_open(path))) return bind_raise(L);
  return 1;
}

static int file_read(lua_State *L) {
  ms_safetensors_file *f = check_file(L);
  const char *name = luaL_checkstring(L, 2);
  int64_t offset = bind_check_integer(L, 3, "safetensors read", "offset");
  int64_t count = bind_check_integer(L, 4, "safetensors read", "count");
  return bind_push_result(L, ms_safetensors_read_range(f, name, offset, count));
}

/* Pushes j as Lua values: objects as tables, arrays as sequences, integers that fit as Lua
 * integers, other numbers as floats, null as nil. */
static void push_json(lua_State *L, const ms_json *j) {
  luaL_checkstack(L, 4, "json: nested too deep");
  switch (j->kind) {
  case MS_JSON_NULL: lua_pushnil(L); return;
  case MS_JSON_BOOL: lua_pushboolean(L, j->boolean); return;
  case MS_JSON_STRING: lua_pushstring(L, j->string); return;
  case MS_JSON_NUMBER:
    if (j->is_uint && j->uint <= (uint64_t)LUA_MAXINTEGER) lua_pushinteger(L, (lua_Integer)j->uint);
    else lua_pushnumber(L, j->number);
    return;
  case MS_JSON_ARRAY:
    lua_createtable(L, j->count, 0);
    for (int i = 0; i < j->count; i++) push_json(L, &j->items[i]), lua_rawseti(L, -2, i + 1);
    return;
  case MS_JSON_OBJECT:
    lua_createtable(L, 0, j->count);
    for (int i = 0; i < j->count; i++) push_json(L, &j->items[i]), lua_setfield(L, -2, j->keys[i]);
    return;
  }
}

typedef struct json_box {
  ms_json *root;
} json_box;

static int json_box_gc(lua_State *L) {
  json_box *b = lua_touserdata(L, 1);
  ms_json_free(b->root);
  b->root = NULL;
  return 0;
}

/* ms._json_decode(text [, what]) -> value; a malformed text raises naming `what` (a path). */
static int l_json_decode(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  const char *what = luaL_optstring(L, 2, "json");
  json_box *b = lua_newuserdatauv(L, sizeof *b, 0); /* frees the tree if a push raises */
  b->root = NULL;
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, json_box_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  char err[200];
  if (!ms_json_utf8_valid(text, len)) return bind_error(L, "%s: not valid UTF-8", what);
  if (!(b->root = ms_json_parse(text, len, err, sizeof err))) return bind_error(L, "%s: not valid JSON: %s", what, err);
  push_json(L, b->root);
  ms_json_free(b->root);
  b->root = NULL;
  return 1;
}

void bind_open_io_parts(lua_State *L) {
  static const luaL_Reg methods[] = {{"read", file_read}, {"close", file_close}, {NULL, NULL}};
  if (luaL_newmetatable(L, FILE_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, file_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, file_close);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, l_open);
  lua_setfield(L, -3, "_safetensors_open");
  lua_pushcfunction(L, l_json_decode);
  lua_setfield(L, -3, "_json_decode");
}
