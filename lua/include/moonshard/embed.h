/* moonshard/embed.h: moonshard inside a host C program. A host opens an ms_state (a Lua 5.4
 * state with the standard libraries, where `require "moonshard"` finds the built-in module),
 * runs Lua code in it, and calls Lua functions on tensors it owns. Nothing here prints or exits:
 * every failure comes back as a status and a message with a Lua traceback.
 *
 *   ms_state *S = ms_state_open();
 *   if (ms_state_run_string(S, "ms = require 'moonshard'\n"
 *                              "function scale(t) return t * 2 end", "=init") != MS_OK)
 *     fprintf(stderr, "%s\n", ms_state_error(S));
 *   ms_tensor *out = NULL;
 *   if (ms_state_call_tensors(S, "scale", 1, &x, &out) == MS_OK) { ...; ms_tensor_release(out); }
 *   ms_state_close(S);
 *
 * An ms_state, like any lua_State, is used by one thread at a time. */
#ifndef MOONSHARD_EMBED_H
#define MOONSHARD_EMBED_H

#include <lua.h>

#include "moonshard/error.h"
#include "moonshard/export.h"
#include "moonshard/tensor.h"

typedef struct ms_state ms_state;

/* A new state: standard libraries open and `require "moonshard"` working (no global is set:
 * scripts write `local ms = require "moonshard"`). NULL on failure, with ms_error_last() set. */
MS_API ms_state *ms_state_open(void);
/* Frees the state and everything Lua holds (tensors still referenced only from Lua are
 * released). NULL is fine. */
MS_API void ms_state_close(ms_state *S);
/* The underlying lua_State, for anything this header does not cover (borrowed; it lives until
 * ms_state_close). */
MS_API lua_State *ms_state_lua(ms_state *S);

/* Runs a chunk of Lua source. chunkname follows Lua's convention ("=name" is shown as is,
 * "@file" as a file name); NULL names it after the code. MS_OK, or a status with the message in
 * ms_state_error(): MS_ERR_ARG for a syntax error, MS_ERR_MEMORY, MS_ERR_RUNTIME for a run-time
 * error. */
MS_API ms_status ms_state_run_string(ms_state *S, const char *code, const char *chunkname);
/* Runs a Lua file (MS_ERR_IO when it cannot be read; otherwise as ms_state_run_string). */
MS_API ms_status ms_state_run_file(ms_state *S, const char *path);
/* Calls the global function `fname` ("train.step" walks tables from the globals) with `nargs`
 * tensors. The args are borrowed: Lua gets its own new reference to each. When `result` is not
 * NULL, the call's first result must be a tensor and *result receives a new reference to it
 * (the caller releases it); *result is NULL on failure. */
MS_API ms_status ms_state_call_tensors(ms_state *S, const char *fname, int nargs, ms_tensor *const *args,
                                       ms_tensor **result);
/* The message of the last failed call on S, with its traceback; "" when the last call
 * succeeded. Valid until the next call on S. The same message is also in ms_error_last(). */
MS_API const char *ms_state_error(ms_state *S);

/* ---- for programs that manage their own lua_State (the moonshard executable does) ---------- */

/* Opens the standard libraries in L and registers moonshard in package.preload, so
 * `require "moonshard"` works without a search path. Raises a Lua error only on lack of memory,
 * so call it protected (lua_pcall of a C function) where that matters. */
MS_API void ms_lua_openlibs(lua_State *L);
/* A message handler for lua_pcall: turns the error object into a string (through its
 * __tostring metamethod, or a note of its type) and appends a stack traceback. A mistake that
 * moonshard reported at the user's line ("train.lua:12: nn.Linear: ...") stays that one line,
 * unless the environment sets MOONSHARD_TRACEBACK=1 (docs/errors.md). */
MS_API int ms_lua_msghandler(lua_State *L);
/* lua_pcall(L, nargs, nresults, h) with ms_lua_msghandler as h: the function and its arguments
 * are on top of the stack. On failure the message with its traceback is left on the stack. */
MS_API int ms_lua_pcall(lua_State *L, int nargs, int nresults);

#endif
