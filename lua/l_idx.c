/* l_idx.c: the IDX reader (engine/src/data/idx.c, idx_rows.c) for Lua: ms.read_idx(path) -> a
 * uint8 tensor of the whole file, and ms._idx_rows(path) -> an object reading rows on demand
 * (#rows, :shape(), :get(i) -> row i as a tensor), which the DataLoader takes as a source. The
 * datasets (lua/moonshard/datasets.lua) are built on them. */
#include "ms_lua.h"

#define IDX_ROWS_MT "moonshard.IdxRows"

typedef struct rows_box {
  ms_idx_rows *rows; /* NULL once closed */
} rows_box;

static int l_read_idx(lua_State *L) {
  if (lua_type(L, 1) != LUA_TSTRING) return bind_arg_error(L, 1, "read_idx", "path", "a string");
  ms_tensor *t = NULL;
  ms_idx_read(lua_tostring(L, 1), &t);
  return bind_push_result(L, t); /* raises the reader's message when t is NULL */
}

ms_idx_rows *bind_check_idx_rows(lua_State *L, int idx, const char *fname) {
  rows_box *box = luaL_testudata(L, idx, IDX_ROWS_MT);
  if (!box) return bind_arg_error(L, idx, fname, "rows", "an IDX rows object (ms._idx_rows)"), NULL;
  if (!box->rows) bind_error(L, "%s: the IDX rows object was closed", fname);
  return box->rows;
}

static int l_idx_rows(lua_State *L) {
  if (lua_type(L, 1) != LUA_TSTRING) return bind_arg_error(L, 1, "idx_rows", "path", "a string");
  rows_box *box = lua_newuserdatauv(L, sizeof *box, 0); /* before the resource it will own */
  box->rows = NULL;
  luaL_setmetatable(L, IDX_ROWS_MT);
  bind_check_status(L, ms_idx_rows_open(lua_tostring(L, 1), &box->rows));
  return 1;
}

static int rows_close(lua_State *L) {
  rows_box *box = luaL_checkudata(L, 1, IDX_ROWS_MT);
  ms_idx_rows_release(box->rows); /* a loader using it holds its own reference */
  box->rows = NULL;
  return 0;
}

static int rows_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)ms_idx_rows_info(bind_check_idx_rows(L, 1, "idx_rows"))->shape[0]);
  return 1;
}

/* The file's shape (the header's sizes) as a Size, like a tensor's .shape. */
static int rows_shape(lua_State *L) {
  const ms_idx_info *in = ms_idx_rows_info(bind_check_idx_rows(L, 1, "idx_rows:shape"));
  bind_push_size(L, in->ndim, in->shape);
  return 1;
}

/* Row i (1-based, negative from the end) as a new tensor of the file's shape less its first dim. */
static int rows_get(lua_State *L) {
  ms_idx_rows *f = bind_check_idx_rows(L, 1, "idx_rows:get");
  const ms_idx_info *in = ms_idx_rows_info(f);
  int64_t i = bind_check_index(L, 2, in->shape[0], "idx_rows:get", "index");
  ms_tensor *one = ms_idx_rows_gather(f, &i, 1);
  if (!one) return bind_raise(L);
  ms_tensor *row = ms_tensor_select(one, 0, 0);
  ms_tensor_release(one);
  return bind_push_result(L, row);
}

void bind_open_idx(lua_State *L) {
  luaL_newmetatable(L, IDX_ROWS_MT);
  static const luaL_Reg meta[] = {{"__gc", rows_close}, {"__close", rows_close}, {"__len", rows_len}, {NULL, NULL}};
  luaL_setfuncs(L, meta, 0);
  static const luaL_Reg methods[] = {{"shape", rows_shape}, {"get", rows_get}, {"close", rows_close}, {NULL, NULL}};
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_read_idx);
  lua_setfield(L, -3, "read_idx");
  lua_pushcfunction(L, l_idx_rows);
  lua_setfield(L, -3, "_idx_rows"); /* private: lua/moonshard/datasets.lua is the API */
}
