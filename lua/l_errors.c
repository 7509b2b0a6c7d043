/* l_errors.c: errors that point at the user's line. A mistake found inside moonshard (a C
 * binding, or a Lua library function several calls deep) is reported at the first stack frame
 * outside moonshard: the line of the user's script or REPL that called in. Both ways of raising
 * go through here: bind_error for the C bindings, and the `error` that the library's Lua chunks
 * see (bind_lib_error, module.c). The message handler of the executable and of embedding hosts
 * asks bind_is_user_mistake to print such an error as one line, without a traceback. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ms_lua.h"

/* The registry key of the last message raised here with a user position. */
#define USER_ERROR_KEY "moonshard.user_error"

/* True when short_src names a chunk of moonshard's Lua library: an embedded file
 * ("[moonshard] nn", module.c), or in a stock lua5.4 a file ".../moonshard/nn.lua" whose module
 * ("moonshard.nn") is loaded. */
static bool is_library_chunk(lua_State *L, const char *src) {
  if (strncmp(src, "[moonshard] ", 12) == 0) return true;
  const char *tail = NULL;
  for (const char *p = strstr(src, "moonshard/"); p; p = strstr(p + 1, "moonshard/"))
    if (p == src || p[-1] == '/') tail = p;
  size_t n = tail ? strlen(tail) : 0;
  if (n < 5 || strcmp(tail + n - 4, ".lua") != 0) return false;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (size_t i = 0; i < n - 4; i++) luaL_addchar(&b, tail[i] == '/' ? '.' : tail[i]);
  luaL_pushresult(&b); /* "moonshard.nn" */
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushvalue(L, -2);
  bool loaded = lua_rawget(L, -2) != LUA_TNIL;
  lua_pop(L, 3);
  return loaded;
}

/* Pushes "src:line: " of the first Lua frame from `level` up that is not moonshard's library;
 * returns false (pushing nothing) when every frame is moonshard's or C. */
static bool push_user_where(lua_State *L, int level) {
  lua_Debug ar;
  for (; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline > 0 && !is_library_chunk(L, ar.short_src)) {
      lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
      return true;
    }
  }
  return false;
}

/* Raises the message on top of the stack, prefixed by the position of the first user frame from
 * `from` up (else by `level`'s, as error() would); a message with a user position is remembered
 * for bind_is_user_mistake. */
static int raise_at_user_line(lua_State *L, int from, int level) {
  bool user = push_user_where(L, from);
  if (!user) luaL_where(L, level);
  lua_insert(L, -2);
  lua_concat(L, 2);
  if (user) {
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, USER_ERROR_KEY);
  }
  return lua_error(L);
}

int bind_error(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  return raise_at_user_line(L, 1, 1);
}

int bind_error_from(lua_State *L, int from, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  return raise_at_user_line(L, from, from);
}

/* error(message [, level]) for the library's chunks: as Lua's, except that a string message
 * with a level other than 0 is positioned at the user's line instead of the level's. */
int bind_lib_error(lua_State *L) {
  lua_Integer level = luaL_optinteger(L, 2, 1);
  lua_settop(L, 1);
  if (lua_type(L, 1) != LUA_TSTRING || level <= 0) return lua_error(L);
  return raise_at_user_line(L, 1, (int)level);
}

bool bind_is_user_mistake(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TSTRING) return false;
  const char *env = getenv("MOONSHARD_TRACEBACK");
  if (env && *env && strcmp(env, "0") != 0) return false;
  lua_getfield(L, LUA_REGISTRYINDEX, USER_ERROR_KEY);
  bool same = lua_rawequal(L, idx, -1);
  lua_pop(L, 1);
  return same;
}

/* ---- "did you mean" -------------------------------------------------------------------------- */

/* The edit distance of a and b (insertions, deletions, substitutions, and swaps of two neighbours,
 * the commonest typo), for names up to 63 characters. */
static size_t edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 63 || m > 63) return (size_t)-1;
  size_t d[64][64];
  for (size_t i = 0; i <= n; i++) d[i][0] = i;
  for (size_t j = 0; j <= m; j++) d[0][j] = j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[n][m];
}

void bind_suggest_init(bind_suggestion *s, const char *name) {
  s->name = name;
  s->best = NULL;
  s->distance = strlen(name) <= 3 ? 1 : strlen(name) <= 6 ? 2 : 3; /* the farthest worth naming */
}

void bind_suggest_consider(bind_suggestion *s, const char *candidate) {
  if (candidate[0] == '_') return; /* private names are never suggested */
  size_t d = edit_distance(s->name, candidate);
  if (d > s->distance) return;
  if (s->best && d == s->distance && strcmp(candidate, s->best) >= 0) return; /* ties: the first by name */
  s->best = candidate;
  s->distance = d;
}

void bind_suggest_table(bind_suggestion *s, lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) bind_suggest_consider(s, lua_tostring(L, -1));
  }
}

/* ms._did_you_mean(name, names): the nearest of the strings in the list or keys of the table
 * `names` (nil when none is near), for the library's own "has no field" messages. */
static int l_did_you_mean(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  bind_suggestion s;
  bind_suggest_init(&s, name);
  bind_suggest_table(&s, L, 2);
  for (lua_Integer i = 1; lua_rawgeti(L, 2, i) != LUA_TNIL; i++) {
    if (lua_type(L, -1) == LUA_TSTRING) bind_suggest_consider(&s, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (!s.best) return 0;
  lua_pushstring(L, s.best);
  return 1;
}

bool bind_library_frame(lua_State *L, int level) {
  lua_Debug ar;
  if (!lua_getstack(L, level, &ar)) return true;
  lua_getinfo(L, "S", &ar);
  return ar.what[0] == 'C' || is_library_chunk(L, ar.short_src);
}

/* ms._library_frame(level): whether the function at `level` (debug.getinfo's numbering) is
 * moonshard's library or C, for __index functions that answer the user and the library apart. */
static int l_library_frame(lua_State *L) {
  lua_pushboolean(L, bind_library_frame(L, (int)luaL_checkinteger(L, 1)));
  return 1;
}

void bind_open_errors(lua_State *L) {
  /* stack: module, methods */
  lua_pushcfunction(L, l_did_you_mean);
  lua_setfield(L, -3, "_did_you_mean");
  lua_pushcfunction(L, l_library_frame);
  lua_setfield(L, -3, "_library_frame");
}
