/* l_runtime.c: process-wide functions of the module: seeding, threads, memory statistics,
 * dtype names as constants, type tests, and launching ranks (spawn). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <sys/resource.h>
#include <time.h>

#include "ms_lua.h"

static int l_manual_seed(lua_State *L) {
  bind_check_end(L, 2, "manual_seed");
  ms_manual_seed((uint64_t)bind_check_integer(L, 1, "manual_seed", "seed"));
  return 0;
}

static int l_initial_seed(lua_State *L) { return lua_pushinteger(L, (lua_Integer)ms_initial_seed()), 1; }

static int l_set_num_threads(lua_State *L) {
  bind_check_end(L, 2, "set_num_threads");
  int64_t n = bind_check_integer(L, 1, "set_num_threads", "n");
  if (n < 1 || n > 1024) return bind_arg_error(L, 1, "set_num_threads", "n", "an integer in 1..1024");
  ms_set_num_threads((int)n);
  return 0;
}

static int l_get_num_threads(lua_State *L) { return lua_pushinteger(L, ms_get_num_threads()), 1; }

/* memory_stats() -> {current=, peak=, allocations=, cached=, cache_bound=, process_peak=,
 * by_category={params=, ...}}, in bytes. process_peak is the process's peak resident memory since
 * it started (getrusage's maxrss, /proc's VmHWM), which reset_peak_memory_stats leaves alone. */
static int l_memory_stats(lua_State *L) {
  ms_memory_stats s = ms_memory_stats_get();
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, s.current);
  lua_setfield(L, -2, "current");
  lua_pushinteger(L, s.peak);
  lua_setfield(L, -2, "peak");
  lua_pushinteger(L, s.allocations);
  lua_setfield(L, -2, "allocations");
  lua_pushinteger(L, s.cached);
  lua_setfield(L, -2, "cached");
  lua_pushinteger(L, s.cache_bound);
  lua_setfield(L, -2, "cache_bound");
  struct rusage ru;
  lua_pushinteger(L, getrusage(RUSAGE_SELF, &ru) == 0 ? (lua_Integer)ru.ru_maxrss * 1024 : -1);
  lua_setfield(L, -2, "process_peak");
  lua_createtable(L, 0, MS_MEM_CATEGORY_COUNT);
  for (int c = 0; c < MS_MEM_CATEGORY_COUNT; c++) {
    lua_pushinteger(L, s.by_category[c]);
    lua_setfield(L, -2, ms_mem_category_name((ms_mem_category)c));
  }
  lua_setfield(L, -2, "by_category");
  lua_pushliteral(L, "cpu");
  lua_setfield(L, -2, "device");
  return 1;
}

static int l_reset_peak_memory_stats(lua_State *L) {
  (void)L;
  ms_memory_reset_peak();
  return 0;
}

/* perf_counter(): seconds from a monotonic clock, for timing in scripts (Lua's os.clock counts
 * CPU time of every thread, os.time whole seconds). */
static int l_perf_counter(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
  return 1;
}

static int l_empty_cache(lua_State *L) {
  (void)L;
  ms_memory_empty_cache();
  return 0;
}

/* spawn(main, nprocs, ...): loads moonshard/spawn.lua on first use (most scripts never launch)
 * and calls it with every argument. */
static int l_spawn(lua_State *L) {
  int n = lua_gettop(L);
  if (lua_getglobal(L, "require") != LUA_TFUNCTION) return bind_error(L, "ms.spawn: no 'require'");
  lua_pushliteral(L, "moonshard.spawn");
  lua_call(L, 1, 1);
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

/* ms._kernel_calls() -> {cpu = n, cuda = n}: the engine's kernel-table calls so far per device
 * type (private: tests and benches count a step's launches as the difference of two readings). */
static int l_kernel_calls(lua_State *L) {
  bind_check_end(L, 1, "_kernel_calls");
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)ms_kernel_calls(MS_CPU));
  lua_setfield(L, -2, "cpu");
  lua_pushinteger(L, (lua_Integer)ms_kernel_calls(MS_CUDA));
  lua_setfield(L, -2, "cuda");
  return 1;
}

static int l_is_tensor(lua_State *L) { return lua_pushboolean(L, ms_lua_to_tensor(L, 1) != NULL), 1; }

/* ms.Timer and ms.timeit, beside perf_counter: lua/moonshard/timer.lua, which needs nothing of
 * the module to load. The module is on top. */
static void open_timer(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "moonshard.timer");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "Timer");
  lua_setfield(L, -3, "Timer");
  lua_getfield(L, -1, "timeit");
  lua_setfield(L, -3, "timeit");
  lua_pop(L, 1);
}

void bind_open_runtime(lua_State *L) {
  static const luaL_Reg fns[] = {{"manual_seed", l_manual_seed},
                                 {"initial_seed", l_initial_seed},
                                 {"set_num_threads", l_set_num_threads},
                                 {"get_num_threads", l_get_num_threads},
                                 {"memory_stats", l_memory_stats},
                                 {"reset_peak_memory_stats", l_reset_peak_memory_stats},
                                 {"is_tensor", l_is_tensor},
                                 {"empty_cache", l_empty_cache},
                                 {"perf_counter", l_perf_counter},
                                 {"spawn", l_spawn},
                                 {"_kernel_calls", l_kernel_calls},
                                 {NULL, NULL}};
  lua_pushvalue(L, -2);
  luaL_setfuncs(L, fns, 0);
  /* ms.float32 == "float32", so PyTorch's spelling {dtype = ms.float64} works */
  for (int d = 0; d < MS_DTYPE_COUNT; d++) {
    lua_pushstring(L, ms_dtype_name((ms_dtype)d));
    lua_setfield(L, -2, ms_dtype_name((ms_dtype)d));
  }
  static const char *const aliases[][2] = {{"float", "float32"}, {"double", "float64"},
                                           {"half", "float16"},  {"long", "int64"},
                                           {"int", "int32"}};
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
    lua_pushstring(L, aliases[i][1]);
    lua_setfield(L, -2, aliases[i][0]);
  }
  lua_pushliteral(L, MS_VERSION_STRING);
  lua_setfield(L, -2, "__version__");
  open_timer(L);
  lua_pop(L, 1);
}
