/* l_io_parts.c: what sharded checkpoints need beyond ms.save/ms.load (l_io.c): an open
 * safetensors file read a range at a time (a rank reads only the elements it keeps), and JSON
 * for their index, read and written by engine/src/io/json.c. All internal (ms._safetensors_open,
 * ms._json_decode, ms._json_encode), used by lua/moonshard/fsdp_state.lua and fsdp_checkpoint.lua. */
#include <limits.h>
#include <stdlib.h>
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

/* ---- Lua values as a JSON tree (ms._json_encode) --------------------------------------------- */

#define ENCODE_MAX_DEPTH 64

static int key_order(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A copy of the string at idx (JSON strings here are C strings: a NUL inside is refused). */
static char *dup_string(lua_State *L, int idx) {
  size_t n;
  const char *s = lua_tolstring(L, idx, &n);
  if (strlen(s) != n) luaL_error(L, "json_encode: a string holds a NUL byte");
  char *d = malloc(n + 1);
  if (!d) luaL_error(L, "json_encode: out of memory");
  return memcpy(d, s, n + 1);
}

/* Gives out room for n entries (zeroed, so a raise half-way leaves a tree ms_json_free frees). */
static void alloc_entries(lua_State *L, ms_json *out, int n, bool keyed) {
  out->items = calloc((size_t)(n ? n : 1), sizeof *out->items);
  if (keyed) out->keys = calloc((size_t)(n ? n : 1), sizeof *out->keys);
  if (!out->items || (keyed && !out->keys)) luaL_error(L, "json_encode: out of memory");
  out->count = n;
}

static void to_json(lua_State *L, int idx, ms_json *out, int depth);

/* The table at idx: a sequence 1..n (an empty table included) as an array, a table with string
 * keys as an object with its keys sorted (so the text is the same from run to run). */
static void table_to_json(lua_State *L, int idx, ms_json *out, int depth) {
  if (depth >= ENCODE_MAX_DEPTH) luaL_error(L, "json_encode: tables nested deeper than %d (a cycle?)", ENCODE_MAX_DEPTH);
  luaL_checkstack(L, 4, "json_encode: nested too deep");
  lua_Integer len = (lua_Integer)lua_rawlen(L, idx), keys = 0, strings = 0;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    keys++;
    if (lua_type(L, -2) == LUA_TSTRING) strings++;
    else if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) < 1 || lua_tointeger(L, -2) > len)
      luaL_error(L, "json_encode: a table key must be a string or an index 1..#t, got %s", luaL_typename(L, -2));
  }
  if (keys > INT_MAX) luaL_error(L, "json_encode: too many entries");
  if (strings == 0) { /* an array */
    if (keys != len) luaL_error(L, "json_encode: a sequence with holes (nil items) has no JSON form");
    out->kind = MS_JSON_ARRAY;
    alloc_entries(L, out, (int)keys, false);
    for (int i = 0; i < out->count; i++) {
      lua_rawgeti(L, idx, i + 1);
      to_json(L, lua_gettop(L), &out->items[i], depth + 1);
      lua_pop(L, 1);
    }
    return;
  }
  if (strings != keys) luaL_error(L, "json_encode: a table mixes array items and string keys");
  out->kind = MS_JSON_OBJECT;
  alloc_entries(L, out, (int)keys, true);
  int n = 0;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) out->keys[n++] = dup_string(L, -2);
  qsort(out->keys, (size_t)n, sizeof *out->keys, key_order);
  for (int i = 0; i < n; i++) {
    lua_getfield(L, idx, out->keys[i]);
    to_json(L, lua_gettop(L), &out->items[i], depth + 1);
    lua_pop(L, 1);
  }
}

static void to_json(lua_State *L, int idx, ms_json *out, int depth) {
  switch (lua_type(L, idx)) {
  case LUA_TNIL: out->kind = MS_JSON_NULL; return;
  case LUA_TBOOLEAN: out->kind = MS_JSON_BOOL, out->boolean = lua_toboolean(L, idx); return;
  case LUA_TNUMBER:
    out->kind = MS_JSON_NUMBER;
    if (lua_isinteger(L, idx) && lua_tointeger(L, idx) >= 0) out->is_uint = true, out->uint = (uint64_t)lua_tointeger(L, idx);
    out->number = (double)lua_tonumber(L, idx);
    return;
  case LUA_TSTRING: out->kind = MS_JSON_STRING, out->string = dup_string(L, idx); return;
  case LUA_TTABLE: table_to_json(L, idx, out, depth); return;
  default: luaL_error(L, "json_encode: %s has no JSON form", luaL_typename(L, idx));
  }
}

/* ms._json_encode(value) -> compact JSON text: tables with string keys as objects (keys sorted),
 * sequences and empty tables as arrays, integers as integers, nil as null. Raises on a value
 * with no JSON form (a function, NaN, a cycle, a mixed table). */
static int l_json_encode(lua_State *L) {
  luaL_checkany(L, 1);
  json_box *b = lua_newuserdatauv(L, sizeof *b, 0); /* frees the tree if a conversion raises */
  b->root = NULL;
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, json_box_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  if (!(b->root = calloc(1, sizeof *b->root))) return luaL_error(L, "json_encode: out of memory");
  to_json(L, 1, b->root, 0);
  size_t n;
  char *text = ms_json_write(b->root, &n);
  ms_json_free(b->root);
  b->root = NULL;
  if (!text) return bind_raise(L);
  lua_pushlstring(L, text, n);
  free(text);
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
  lua_pushcfunction(L, l_json_encode);
  lua_setfield(L, -3, "_json_encode");
}
