/* l_watch.c: what watching a training run needs from C (lua/moonshard/progress.lua, plot.lua):
 *   ms.plot(...), ms.summary(...)         require "moonshard.plot" / "moonshard.summary" on the first
 *                                         call and call its function (the library stays unloaded
 *                                         until used, as ms.spawn)
 *   ms._png_encode(width, height, pixels) -> the PNG file's bytes (engine/src/io/png.c)
 *   ms._isatty(file)                      -> whether a Lua file handle is a terminal */
#define _POSIX_C_SOURCE 200809L /* fileno, isatty */
#include <stdio.h>
#include <unistd.h>

#include "moonshard/checked.h"
#include "moonshard/png.h"
#include "ms_lua.h"

/* upvalue 1: the module to require; its result (a function) is called with the arguments */
static int l_forward(lua_State *L) {
  int n = lua_gettop(L);
  if (lua_getglobal(L, "require") != LUA_TFUNCTION) return luaL_error(L, "moonshard: no 'require'");
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_call(L, 1, 1);
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

#define PNG_BOX_MT "moonshard.png_buffer"

/* __gc of the box holding an encoded PNG, so a memory error while copying it does not leak it */
static int png_box_gc(lua_State *L) {
  uint8_t **p = luaL_checkudata(L, 1, PNG_BOX_MT);
  ms_png_free(*p);
  *p = NULL;
  return 0;
}

/* ms._png_encode(width, height, pixels): pixels a table of width * height integers 0xRRGGBB,
 * row-major (plot_canvas.lua's raster); read here, where it costs a small part of a Lua loop. */
static int l_png_encode(lua_State *L) {
  lua_Integer w = luaL_checkinteger(L, 1), h = luaL_checkinteger(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  int64_t npx, nbytes;
  if (w < 1 || h < 1 || !ms_mul_i64(w, h, &npx) || !ms_mul_i64(npx, 3, &nbytes) || (lua_Integer)luaL_len(L, 3) != npx)
    return luaL_error(L, "png_encode: %I pixels are not a %I x %I image", (lua_Integer)luaL_len(L, 3), w, h);
  uint8_t *rgb = lua_newuserdatauv(L, (size_t)nbytes, 0); /* collected with the call: no leak on error */
  for (int64_t i = 0; i < npx; i++) {
    lua_Integer c = (lua_rawgeti(L, 3, (lua_Integer)i + 1), lua_tointeger(L, -1));
    lua_pop(L, 1);
    rgb[3 * i] = (uint8_t)(c >> 16), rgb[3 * i + 1] = (uint8_t)(c >> 8), rgb[3 * i + 2] = (uint8_t)c;
  }
  uint8_t **box = lua_newuserdatauv(L, sizeof *box, 0); /* the box exists before what it owns */
  *box = NULL;
  luaL_setmetatable(L, PNG_BOX_MT);
  size_t len;
  bind_check_status(L, ms_png_encode(rgb, w, h, box, &len));
  lua_pushlstring(L, (const char *)*box, len);
  ms_png_free(*box);
  *box = NULL;
  return 1;
}

static int l_isatty(lua_State *L) {
  luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);
  lua_pushboolean(L, s->closef != NULL && s->f != NULL && isatty(fileno(s->f)));
  return 1;
}

void bind_open_watch(lua_State *L) {
  if (luaL_newmetatable(L, PNG_BOX_MT)) {
    lua_pushcfunction(L, png_box_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  static const char *const forwarded[][2] = {{"plot", "moonshard.plot"}, {"summary", "moonshard.summary"}};
  lua_pushvalue(L, -2);
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) {
    lua_pushstring(L, forwarded[i][1]);
    lua_pushcclosure(L, l_forward, 1);
    lua_setfield(L, -2, forwarded[i][0]);
  }
  static const luaL_Reg fns[] = {{"_png_encode", l_png_encode}, {"_isatty", l_isatty}, {NULL, NULL}};
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
