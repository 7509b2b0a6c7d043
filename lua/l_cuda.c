/* l_cuda.c: ms.cuda (devices, memory statistics, events) and the tensor methods that move data
 * between devices (t:cuda(), t:cpu()). Device indices are CUDA's own, 0-based as in PyTorch
 * (they name devices, not positions). */
#include <string.h>

#include "moonshard/pinned.h"
#include "ms_lua.h"

#define MS_EVENT_MT "moonshard.cuda.Event"

static int l_is_available(lua_State *L) { return lua_pushboolean(L, ms_cuda_is_available()), 1; }
static int l_device_count(lua_State *L) { return lua_pushinteger(L, ms_cuda_device_count()), 1; }

/* Why CUDA cannot be used (nil when it can): for scripts that fall back to the CPU. */
static int l_unavailable_reason(lua_State *L) {
  const char *r = ms_cuda_unavailable_reason();
  if (*r) lua_pushstring(L, r);
  else lua_pushnil(L);
  return 1;
}

/* A device argument: nil (the current device), an index, "cuda:N" or a CUDA tensor's device. */
static int check_index(lua_State *L, int idx, const char *fname) {
  if (lua_isnoneornil(L, idx)) return ms_cuda_current_device();
  ms_device d = bind_check_device(L, idx, fname, "device");
  if (d.type != MS_CUDA) bind_arg_error(L, idx, fname, "device", "a CUDA device");
  bind_check_status(L, ms_cuda_check_device(fname, d.index));
  return d.index;
}

static int l_set_device(lua_State *L) {
  bind_check_status(L, ms_cuda_set_device(check_index(L, 1, "set_device")));
  return 0;
}

static int l_current_device(lua_State *L) {
  bind_check_status(L, ms_cuda_check_device("current_device", ms_cuda_current_device()));
  return lua_pushinteger(L, ms_cuda_current_device()), 1;
}

static int l_get_device_name(lua_State *L) {
  char name[256];
  int major, minor;
  bind_check_status(L, ms_cuda_device_name(check_index(L, 1, "get_device_name"), name, sizeof name, &major, &minor));
  lua_pushstring(L, name);
  return 1;
}

static int l_synchronize(lua_State *L) {
  bind_check_status(L, ms_cuda_synchronize(check_index(L, 1, "synchronize")));
  return 0;
}

static int l_empty_cache(lua_State *L) {
  bind_check_status(L, ms_cuda_empty_cache());
  return 0;
}

static ms_cuda_memory_stats stats_of(lua_State *L, const char *fname) {
  ms_cuda_memory_stats s;
  bind_check_status(L, ms_cuda_memory_stats_get(check_index(L, 1, fname), &s));
  return s;
}

static int l_memory_allocated(lua_State *L) { return lua_pushinteger(L, stats_of(L, "memory_allocated").mem.current), 1; }
static int l_max_memory_allocated(lua_State *L) { return lua_pushinteger(L, stats_of(L, "max_memory_allocated").mem.peak), 1; }
static int l_memory_reserved(lua_State *L) { return lua_pushinteger(L, stats_of(L, "memory_reserved").reserved), 1; }
static int l_max_memory_reserved(lua_State *L) { return lua_pushinteger(L, stats_of(L, "max_memory_reserved").reserved_peak), 1; }

/* pinned_memory_stats() -> {live =, cached =}: bytes of page-locked host blocks in use and kept
 * for reuse (size classes), all devices together. */
static int l_pinned_memory_stats(lua_State *L) {
  int64_t live = 0, cached = 0;
  bind_check_status(L, ms_cuda_host_stats(&live, &cached));
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, live), lua_setfield(L, -2, "live");
  lua_pushinteger(L, cached), lua_setfield(L, -2, "cached");
  return 1;
}

/* memory_stats([dev]): the fields of ms.memory_stats() plus reserved bytes, device "cuda:N". */
static int l_memory_stats(lua_State *L) {
  int dev = check_index(L, 1, "memory_stats");
  ms_cuda_memory_stats s;
  bind_check_status(L, ms_cuda_memory_stats_get(dev, &s));
  lua_createtable(L, 0, 8);
  const struct { const char *k; int64_t v; } f[] = {
      {"current", s.mem.current}, {"peak", s.mem.peak}, {"allocations", s.mem.allocations},
      {"cached", s.mem.cached}, {"reserved", s.reserved}, {"reserved_peak", s.reserved_peak}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    lua_pushinteger(L, f[i].v);
    lua_setfield(L, -2, f[i].k);
  }
  lua_createtable(L, 0, MS_MEM_CATEGORY_COUNT);
  for (int c = 0; c < MS_MEM_CATEGORY_COUNT; c++) {
    lua_pushinteger(L, s.mem.by_category[c]);
    lua_setfield(L, -2, ms_mem_category_name((ms_mem_category)c));
  }
  lua_setfield(L, -2, "by_category");
  lua_pushfstring(L, "cuda:%d", dev);
  lua_setfield(L, -2, "device");
  return 1;
}

static int l_reset_peak_memory_stats(lua_State *L) {
  bind_check_status(L, ms_cuda_reset_peak(check_index(L, 1, "reset_peak_memory_stats")));
  return 0;
}

/* ---- events: the userdata exists before the event it will own (liolib's order) ------------- */

typedef struct event_box {
  ms_cuda_event *e; /* NULL once released */
} event_box;

static ms_cuda_event *check_event(lua_State *L, int idx, const char *fname) {
  event_box *b = luaL_checkudata(L, idx, MS_EVENT_MT);
  if (!b->e) bind_error(L, "%s: the event has been released", fname);
  return b->e;
}

/* Event({enable_timing = true}) */
static int l_event_new(lua_State *L) {
  static const char *const known[] = {"enable_timing", "blocking", "interprocess", NULL};
  ms_lua_opts o = bind_check_opts(L, 1, "Event", known);
  bool timing = false, flag = false;
  bind_opt_bool(o, "enable_timing", &timing);
  if (bind_opt_bool(o, "interprocess", &flag) && flag)
    return bind_error(L, "Event: interprocess events are not supported");
  bind_opt_bool(o, "blocking", &flag); /* synchronize() blocks either way */
  event_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->e = NULL;
  luaL_setmetatable(L, MS_EVENT_MT);
  if (!(b->e = ms_cuda_event_create(timing))) return bind_raise(L);
  return 1;
}

static int l_event_release(lua_State *L) {
  event_box *b = luaL_checkudata(L, 1, MS_EVENT_MT);
  ms_cuda_event_destroy(b->e);
  b->e = NULL;
  return 0;
}

static int l_event_record(lua_State *L) {
  bind_check_status(L, ms_cuda_event_record(check_event(L, 1, "record"), NULL));
  return lua_settop(L, 1), 1;
}

static int l_event_synchronize(lua_State *L) {
  bind_check_status(L, ms_cuda_event_synchronize(check_event(L, 1, "synchronize")));
  return 0;
}

static int l_event_query(lua_State *L) {
  bool done;
  bind_check_status(L, ms_cuda_event_query(check_event(L, 1, "query"), &done));
  return lua_pushboolean(L, done), 1;
}

/* start:elapsed_time(end_event): milliseconds, as torch.cuda.Event.elapsed_time. */
static int l_event_elapsed_time(lua_State *L) {
  float ms = 0;
  bind_check_status(L, ms_cuda_event_elapsed_ms(check_event(L, 1, "elapsed_time"),
                                                  check_event(L, 2, "elapsed_time"), &ms));
  return lua_pushnumber(L, ms), 1;
}

static int l_event_tostring(lua_State *L) {
  event_box *b = luaL_checkudata(L, 1, MS_EVENT_MT);
  lua_pushfstring(L, b->e ? "cuda.Event(%p)" : "cuda.Event(released)", (void *)b->e);
  return 1;
}

/* ---- CUDA graphs: ms.cuda.CUDAGraph (moonshard/cuda.h); the graph scope and make_graphed_step
 * are Lua (lua/moonshard/cuda_graphs.lua). Each graph keeps its replay hooks in its user value
 * (a list of functions), and the registry holds the graph being captured (current_graph). */

#define MS_GRAPH_MT "moonshard.cuda.CUDAGraph"
#define MS_GRAPH_CURRENT "moonshard.cuda.current_graph"

typedef struct graph_box {
  ms_cuda_graph *g; /* NULL once released */
} graph_box;

static graph_box *check_graph(lua_State *L, int idx, const char *fname) {
  graph_box *b = luaL_checkudata(L, idx, MS_GRAPH_MT);
  if (!b->g) bind_error(L, "%s: the CUDA graph has been released", fname);
  return b;
}

/* The graph at idx's hooks: a fresh empty list (a new capture has none of the last one's). */
static void clear_hooks(lua_State *L, int idx) {
  lua_newtable(L);
  lua_setiuservalue(L, idx, 1);
}

static void set_current(lua_State *L, int idx) {
  lua_pushvalue(L, idx);
  lua_setfield(L, LUA_REGISTRYINDEX, MS_GRAPH_CURRENT);
}

static int l_graph_new(lua_State *L) {
  graph_box *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->g = NULL;
  luaL_setmetatable(L, MS_GRAPH_MT);
  clear_hooks(L, lua_gettop(L));
  if (!(b->g = ms_cuda_graph_create())) return bind_raise(L);
  return 1;
}

static int l_graph_capture_begin(lua_State *L) {
  graph_box *b = check_graph(L, 1, "capture_begin");
  bind_check_status(L, ms_cuda_graph_capture_begin(b->g));
  clear_hooks(L, 1);
  set_current(L, 1);
  return 0;
}

static int l_graph_capture_end(lua_State *L) {
  graph_box *b = check_graph(L, 1, "capture_end");
  ms_status st = ms_cuda_graph_capture_end(b->g);
  if (!ms_cuda_graph_capturing()) {
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, MS_GRAPH_CURRENT);
  }
  bind_check_status(L, st);
  return 0;
}

/* g:replay(): every replay hook, in the order they were added, then one launch of the graph. */
static int l_graph_replay(lua_State *L) {
  graph_box *b = check_graph(L, 1, "replay");
  if (!ms_cuda_graph_is_captured(b->g) || ms_cuda_graph_capturing()) /* no hook runs for nothing: */
    bind_check_status(L, ms_cuda_graph_replay(b->g));                  /* its error says why */
  lua_getiuservalue(L, 1, 1);
  lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, -1, i);
    lua_pushvalue(L, 1);
    lua_call(L, 1, 0);
  }
  bind_check_status(L, ms_cuda_graph_replay(b->g));
  return 0;
}

static int l_graph_reset(lua_State *L) {
  graph_box *b = check_graph(L, 1, "reset");
  bind_check_status(L, ms_cuda_graph_reset(b->g));
  clear_hooks(L, 1);
  return 0;
}

/* g:add_replay_hook(fn): fn(g) runs before each replay, to refresh host state the capture baked in. */
static int l_graph_add_replay_hook(lua_State *L) {
  check_graph(L, 1, "add_replay_hook");
  if (lua_type(L, 2) != LUA_TFUNCTION) return bind_arg_error(L, 2, "add_replay_hook", "hook", "a function");
  lua_getiuservalue(L, 1, 1);
  lua_pushvalue(L, 2);
  lua_seti(L, -2, luaL_len(L, -2) + 1);
  return 0;
}

static int l_graph_is_captured(lua_State *L) {
  lua_pushboolean(L, ms_cuda_graph_is_captured(check_graph(L, 1, "is_captured")->g));
  return 1;
}

/* g:_side_stream(enter): make_graphed_step's warm-up runs on the graph's side stream. */
static int l_graph_side_stream(lua_State *L) {
  graph_box *b = check_graph(L, 1, "_side_stream");
  bind_check_status(L, ms_cuda_graph_side_stream(b->g, lua_toboolean(L, 2)));
  return 0;
}

static int l_graph_release(lua_State *L) {
  graph_box *b = luaL_checkudata(L, 1, MS_GRAPH_MT);
  ms_cuda_graph_destroy(b->g);
  b->g = NULL;
  return 0;
}

static int l_graph_tostring(lua_State *L) {
  graph_box *b = luaL_checkudata(L, 1, MS_GRAPH_MT);
  lua_pushstring(L, !b->g ? "cuda.CUDAGraph(released)"
                 : ms_cuda_graph_is_captured(b->g) ? "cuda.CUDAGraph(captured)" : "cuda.CUDAGraph(empty)");
  return 1;
}

static int l_is_current_stream_capturing(lua_State *L) {
  return lua_pushboolean(L, ms_cuda_is_current_stream_capturing()), 1;
}

/* current_graph(): the graph being captured on this thread, or nil. */
static int l_current_graph(lua_State *L) {
  if (!ms_cuda_graph_capturing()) return lua_pushnil(L), 1;
  lua_getfield(L, LUA_REGISTRYINDEX, MS_GRAPH_CURRENT);
  return 1;
}

/* ms.cuda.graph, ms.cuda.make_graphed_step: Lua (moonshard.cuda_graphs), required on first read. */
static int cuda_index(lua_State *L) {
  const char *key = lua_tostring(L, 2);
  if (!key || (strcmp(key, "graph") != 0 && strcmp(key, "make_graphed_step") != 0)) return 0;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "moonshard.cuda_graphs");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, key);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, -2);
  lua_rawset(L, 1);
  return 1;
}

static void open_graphs(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"capture_begin", l_graph_capture_begin}, {"capture_end", l_graph_capture_end},
      {"replay", l_graph_replay}, {"reset", l_graph_reset}, {"add_replay_hook", l_graph_add_replay_hook},
      {"is_captured", l_graph_is_captured}, {"release", l_graph_release},
      {"_side_stream", l_graph_side_stream}, {NULL, NULL}};
  static const luaL_Reg meta[] = {
      {"__gc", l_graph_release}, {"__close", l_graph_release}, {"__tostring", l_graph_tostring}, {NULL, NULL}};
  luaL_newmetatable(L, MS_GRAPH_MT);
  luaL_setfuncs(L, meta, 0);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

/* ---- tensor methods -------------------------------------------------------------------------- */

/* t:cuda([device][, {non_blocking = true}]) or t:cuda({device =, non_blocking =}): a copy on a
 * CUDA device (the current one by default); t itself when there. non_blocking: see t:to. */
static int l_tensor_cuda(lua_State *L) {
  static const char *const known[] = {"device", "non_blocking", NULL};
  ms_tensor *t = ms_lua_check_tensor(L, 1, "cuda");
  ms_device d = {MS_CUDA, ms_cuda_current_device()};
  int dev_idx = 2, opt_idx = 3;
  if (lua_istable(L, 2)) dev_idx = 0, opt_idx = 2;
  ms_lua_opts o = bind_check_opts(L, opt_idx, "cuda", known);
  bool nb = false;
  bind_opt_bool(o, "non_blocking", &nb);
  if (opt_idx == 2 && lua_getfield(L, 2, "device") != LUA_TNIL) dev_idx = lua_gettop(L);
  if (dev_idx && !lua_isnoneornil(L, dev_idx)) {
    d = bind_check_device(L, dev_idx, "cuda", "device");
    if (d.type != MS_CUDA) return bind_arg_error(L, dev_idx, "cuda", "device", "a CUDA device");
  }
  return bind_push_result(L, ms_tensor_to_device_opt(t, d, nb));
}

static int l_tensor_cpu(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "cpu");
  return bind_push_result(L, ms_tensor_to_device(t, (ms_device){MS_CPU, 0}));
}

/* t:pin_memory(): a copy in page-locked host memory (t itself when already there); raises
 * without CUDA, as torch. t:is_pinned(). */
static int l_tensor_pin_memory(lua_State *L) {
  return bind_push_result(L, ms_tensor_pin_memory(ms_lua_check_tensor(L, 1, "pin_memory")));
}

static int l_tensor_is_pinned(lua_State *L) {
  lua_pushboolean(L, ms_tensor_is_pinned(ms_lua_check_tensor(L, 1, "is_pinned")));
  return 1;
}

void bind_open_cuda(lua_State *L) {
  /* stack: module, methods */
  lua_pushcfunction(L, l_tensor_cuda);
  lua_setfield(L, -2, "cuda");
  lua_pushcfunction(L, l_tensor_cpu);
  lua_setfield(L, -2, "cpu");
  lua_pushcfunction(L, l_tensor_pin_memory);
  lua_setfield(L, -2, "pin_memory");
  lua_pushcfunction(L, l_tensor_is_pinned);
  lua_setfield(L, -2, "is_pinned");

  static const luaL_Reg event_methods[] = {
      {"record", l_event_record}, {"synchronize", l_event_synchronize}, {"query", l_event_query},
      {"elapsed_time", l_event_elapsed_time}, {"release", l_event_release}, {NULL, NULL}};
  static const luaL_Reg event_meta[] = {
      {"__gc", l_event_release}, {"__close", l_event_release}, {"__tostring", l_event_tostring}, {NULL, NULL}};
  open_graphs(L);
  luaL_newmetatable(L, MS_EVENT_MT);
  luaL_setfuncs(L, event_meta, 0);
  luaL_newlib(L, event_methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);

  static const luaL_Reg fns[] = {
      {"is_available", l_is_available}, {"device_count", l_device_count},
      {"unavailable_reason", l_unavailable_reason}, {"set_device", l_set_device},
      {"current_device", l_current_device}, {"get_device_name", l_get_device_name},
      {"synchronize", l_synchronize}, {"empty_cache", l_empty_cache},
      {"memory_allocated", l_memory_allocated}, {"max_memory_allocated", l_max_memory_allocated},
      {"memory_reserved", l_memory_reserved}, {"max_memory_reserved", l_max_memory_reserved},
      {"memory_stats", l_memory_stats}, {"reset_peak_memory_stats", l_reset_peak_memory_stats},
      {"pinned_memory_stats", l_pinned_memory_stats},
      {"get_rng_state", bind_cuda_get_rng_state}, {"set_rng_state", bind_cuda_set_rng_state},
      {"Event", l_event_new}, {"CUDAGraph", l_graph_new},
      {"is_current_stream_capturing", l_is_current_stream_capturing}, {"current_graph", l_current_graph},
      {NULL, NULL}};
  luaL_newlib(L, fns);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, cuda_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setfield(L, -3, "cuda");
}
