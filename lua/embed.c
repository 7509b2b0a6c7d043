/* embed.c: moonshard inside a host C program (moonshard/embed.h), and the pieces the executable
 * shares with it: opening the libraries with moonshard preloaded, and the traceback message
 * handler. Nothing here prints or exits; failures come back as ms_status plus a message. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "moonshard/embed.h"
#include "moonshard/lua.h"
#include "ms_lua.h"

struct ms_state {
  lua_State *L;
  char *error; /* message of the last failed call (malloc'd), NULL after a success */
};

/* ---- shared with the executable ------------------------------------------------------------ */

void ms_lua_openlibs(lua_State *L) {
  luaL_openlibs(L);
  /* preload rather than a global: scripts say `local ms = require "moonshard"`, the same line
   * that works in a stock lua5.4 loading moonshard.so */
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_moonshard);
  lua_setfield(L, -2, "moonshard");
  lua_pop(L, 1);
  /* the Lua library too, so `require "moonshard.nn"` works before `require "moonshard"` */
  bind_preload_embedded(L);
}

int ms_lua_msghandler(lua_State *L) {
  /* a mistake moonshard reported at the user's line is that line alone: the traceback would
   * only show the library's insides (MOONSHARD_TRACEBACK=1 keeps it) */
  if (bind_is_user_mistake(L, 1)) return 1;
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    /* error objects that know how to print themselves keep their text */
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      msg = lua_tostring(L, -1);
    else
      msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

int ms_lua_pcall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs; /* where the function is */
  lua_pushcfunction(L, ms_lua_msghandler);
  lua_insert(L, base);
  int status = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  return status;
}

/* ---- errors ---------------------------------------------------------------------------------- */

static ms_status status_of(int lua_status) {
  switch (lua_status) {
  case LUA_OK: return MS_OK;
  case LUA_ERRSYNTAX: return MS_ERR_ARG; /* the code handed in is malformed */
  case LUA_ERRMEM: return MS_ERR_MEMORY;
  case LUA_ERRFILE: return MS_ERR_IO;
  default: return MS_ERR_RUNTIME;
  }
}

/* Records msg as the state's last error and the thread's engine error; returns status. */
static ms_status set_error(ms_state *S, ms_status status, const char *msg) {
  free(S->error);
  S->error = strdup(msg);
  return ms_error(status, "%s", msg);
}

/* Turns a Lua status into the API's result; on failure pops the message left on the stack. */
static ms_status finish(ms_state *S, int lua_status) {
  free(S->error);
  S->error = NULL;
  if (lua_status == LUA_OK) return MS_OK;
  const char *msg = lua_tostring(S->L, -1);
  ms_status status = set_error(S, status_of(lua_status), msg ? msg : "(error object is not a string)");
  lua_pop(S->L, 1);
  return status;
}

/* ---- the state ------------------------------------------------------------------------------- */

static int open_body(lua_State *L) {
  ms_lua_openlibs(L);
  return 0;
}

ms_state *ms_state_open(void) {
  ms_state *S = calloc(1, sizeof *S);
  if (S == NULL || (S->L = luaL_newstate()) == NULL) {
    free(S);
    ms_error(MS_ERR_MEMORY, "ms_state_open: not enough memory for a Lua state");
    return NULL;
  }
  /* opening the libraries allocates, so it runs protected: a failure is a status, not a panic */
  lua_pushcfunction(S->L, open_body);
  if (ms_lua_pcall(S->L, 0, 0) != LUA_OK) {
    ms_error(MS_ERR_MEMORY, "ms_state_open: %s", lua_tostring(S->L, -1));
    ms_state_close(S);
    return NULL;
  }
  return S;
}

void ms_state_close(ms_state *S) {
  if (S == NULL) return;
  lua_close(S->L);
  free(S->error);
  free(S);
}

lua_State *ms_state_lua(ms_state *S) { return S ? S->L : NULL; }

const char *ms_state_error(ms_state *S) {
  if (S == NULL || S->error == NULL) return "";
  return S->error;
}

/* ---- running code ---------------------------------------------------------------------------- */

ms_status ms_state_run_string(ms_state *S, const char *code, const char *chunkname) {
  if (S == NULL) return ms_error(MS_ERR_ARG, "ms_state_run_string: state is NULL");
  if (code == NULL) return set_error(S, MS_ERR_ARG, "ms_state_run_string: code is NULL");
  int status = luaL_loadbuffer(S->L, code, strlen(code), chunkname ? chunkname : code);
  if (status == LUA_OK) status = ms_lua_pcall(S->L, 0, 0);
  return finish(S, status);
}

ms_status ms_state_run_file(ms_state *S, const char *path) {
  if (S == NULL) return ms_error(MS_ERR_ARG, "ms_state_run_file: state is NULL");
  if (path == NULL) return set_error(S, MS_ERR_ARG, "ms_state_run_file: path is NULL");
  int status = luaL_loadfile(S->L, path);
  if (status == LUA_OK) status = ms_lua_pcall(S->L, 0, 0);
  return finish(S, status);
}

/* ---- calling a function on tensors ----------------------------------------------------------- */

typedef struct call_args {
  const char *fname;
  int nargs;
  ms_tensor *const *args;
  bool want_result;
  ms_tensor *result; /* new reference, set last so that nothing can fail after it */
} call_args;

static bool indexable(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TTABLE) return true;
  if (luaL_getmetafield(L, idx, "__index") == LUA_TNIL) return false;
  lua_pop(L, 1);
  return true;
}

static bool callable(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TFUNCTION) return true;
  if (luaL_getmetafield(L, idx, "__call") == LUA_TNIL) return false;
  lua_pop(L, 1);
  return true;
}

/* Pushes the value at a dotted path ("a.b.c") below the globals, raising a Lua error that
 * names the piece that is missing. */
static void push_path(lua_State *L, const char *path) {
  lua_pushglobaltable(L);
  for (const char *p = path;;) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    if (p > path && !indexable(L, -1))
      luaL_error(L, "ms_state_call_tensors: cannot find '%s': '%s' is a %s value", path,
                 lua_pushlstring(L, path, (size_t)(p - path) - 1), luaL_typename(L, -2));
    lua_pushlstring(L, p, n);
    lua_gettable(L, -2);
    lua_remove(L, -2);
    if (dot == NULL) return;
    p = dot + 1;
  }
}

static int call_body(lua_State *L) {
  call_args *a = lua_touserdata(L, 1);
  push_path(L, a->fname);
  if (!callable(L, -1))
    return luaL_error(L, "ms_state_call_tensors: '%s' is a %s value, not a function", a->fname,
                      luaL_typename(L, -1));
  luaL_checkstack(L, a->nargs, "ms_state_call_tensors: too many arguments");
  for (int i = 0; i < a->nargs; i++) {
    ms_tensor_retain(a->args[i]); /* Lua's own reference; its __gc releases it */
    ms_lua_push_tensor(L, a->args[i]);
  }
  lua_call(L, a->nargs, a->want_result ? 1 : 0);
  if (!a->want_result) return 0;
  ms_tensor *t = ms_lua_to_tensor(L, -1);
  if (t == NULL)
    return luaL_error(L, "ms_state_call_tensors: '%s' returned a %s value, expected a tensor",
                      a->fname, luaL_typename(L, -1));
  ms_tensor_retain(t);
  a->result = t;
  return 0;
}

static ms_status check_call_args(ms_state *S, const char *fname, int nargs,
                                 ms_tensor *const *args) {
  if (fname == NULL) return set_error(S, MS_ERR_ARG, "ms_state_call_tensors: fname is NULL");
  if (nargs < 0 || (nargs > 0 && args == NULL)) {
    char msg[128];
    snprintf(msg, sizeof msg, "ms_state_call_tensors: nargs must be >= 0 with args given, got %d%s",
             nargs, args ? "" : " and args NULL");
    return set_error(S, MS_ERR_ARG, msg);
  }
  for (int i = 0; i < nargs; i++) {
    if (args[i] == NULL) {
      char msg[128];
      snprintf(msg, sizeof msg, "ms_state_call_tensors: args[%d] is NULL", i);
      return set_error(S, MS_ERR_ARG, msg);
    }
  }
  return MS_OK;
}

ms_status ms_state_call_tensors(ms_state *S, const char *fname, int nargs, ms_tensor *const *args,
                                ms_tensor **result) {
  if (result) *result = NULL;
  if (S == NULL) return ms_error(MS_ERR_ARG, "ms_state_call_tensors: state is NULL");
  ms_status st = check_call_args(S, fname, nargs, args);
  if (st != MS_OK) return st;
  call_args a = {fname, nargs, args, result != NULL, NULL};
  lua_pushcfunction(S->L, call_body);
  lua_pushlightuserdata(S->L, &a);
  st = finish(S, ms_lua_pcall(S->L, 1, 0));
  if (st == MS_OK && result) *result = a.result;
  return st;
}
