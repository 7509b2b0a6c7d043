/* l_fsdp.c: ms._fsdp, the native half of moonshard.fsdp: a FlatParam userdata per FSDP unit
 * (moonshard/fsdp.h) and an FsdpState per root (moonshard/fsdp_runtime.h: the per-step runtime).
 * The Lua half (lua/moonshard/fsdp.lua) owns wrapping, module hooks, the walk over a unit's
 * inputs and outputs and state dicts; the engine decides what each step gathers, prefetches,
 * reduces and frees. */
#define _POSIX_C_SOURCE 200809L /* gethostname */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "moonshard/dist.h"
#include "moonshard/fsdp.h"
#include "moonshard/fsdp_runtime.h"
#include "ms_lua.h"

#define MS_FLAT_PARAM_MT "moonshard.FlatParam"
#define MS_PG_MT "moonshard.ProcessGroup" /* l_dist.c's groups: a box holding one ms_pg * */

typedef struct lua_flat_param {
  ms_flat_param *fp;
} lua_flat_param;

static ms_flat_param *check_fp(lua_State *L) {
  lua_flat_param *u = luaL_checkudata(L, 1, MS_FLAT_PARAM_MT);
  if (!u->fp) bind_error(L, "fsdp: this flat parameter was freed");
  return u->fp;
}

static ms_fsdp_strategy check_strategy(lua_State *L, int idx) {
  static const char *const names[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", NULL};
  const char *s = luaL_checkstring(L, idx);
  for (int i = 0; names[i]; i++)
    if (strcmp(s, names[i]) == 0) return (ms_fsdp_strategy)i;
  return bind_error(L, "fsdp: sharding_strategy '%s' is not supported yet (FULL_SHARD, SHARD_GRAD_OP "
                    "or NO_SHARD)", s), MS_FSDP_FULL_SHARD;
}

static ms_pg *opt_group(lua_State *L, int idx) {
  if (lua_isnoneornil(L, idx)) {
    if (!ms_dist_is_initialized())
      bind_error(L, "fsdp: the default process group is not initialized: call "
                 "ms.distributed.init_process_group first");
    return ms_pg_world();
  }
  ms_pg **box = luaL_testudata(L, idx, MS_PG_MT);
  if (!box || !*box) bind_arg_error(L, idx, "fsdp", "process_group", "a process group from new_group");
  return *box;
}

/* Pushes t as a new box (the box takes a new reference: fp keeps its own). */
static void push_retained(lua_State *L, ms_tensor *t) {
  ms_tensor_retain(t);
  ms_lua_push_tensor(L, t);
}

/* Pushes {get(fp, 0), get(fp, 1), ...}: one of the unit's per-parameter tensors, in order. */
static void push_list(lua_State *L, const ms_flat_param *fp, ms_tensor *(*get)(const ms_flat_param *, int)) {
  ms_flat_param_info info;
  ms_flat_param_get_info(fp, &info);
  lua_createtable(L, info.nparams, 0);
  for (int i = 0; i < info.nparams; i++) {
    push_retained(L, get(fp, i));
    lua_rawseti(L, -2, i + 1);
  }
}

/* Mixed precision from arg idx: nil, or {param_dtype, reduce_dtype, keep_low_precision_grads}
 * (dtype names and a boolean: fsdp.lua validated them and filled the defaults). */
static ms_status apply_mixed_precision(lua_State *L, int idx, ms_flat_param *fp) {
  if (lua_isnoneornil(L, idx)) return MS_OK;
  luaL_checktype(L, idx, LUA_TTABLE);
  ms_dtype pd, rd;
  lua_getfield(L, idx, "param_dtype");
  lua_getfield(L, idx, "reduce_dtype");
  if (!ms_dtype_from_name(luaL_checkstring(L, -2), &pd) || !ms_dtype_from_name(luaL_checkstring(L, -1), &rd))
    return ms_error(MS_ERR_ARG, "fsdp: mixed_precision: unknown dtype name");
  lua_pop(L, 2);
  lua_getfield(L, idx, "keep_low_precision_grads");
  bool keep = lua_toboolean(L, -1);
  lua_pop(L, 1);
  ms_status st = ms_flat_param_set_mixed_precision(fp, pd, rd);
  return st == MS_OK ? ms_flat_param_set_keep_low_precision_grads(fp, keep) : st;
}

/* _fsdp.flat_param(params, strategy, group[, mixed_precision[, offload_params]]) -> fp, shard,
 * {views}, {pieces}:
 * params is a list of tensors in registration order; the views (float, dtype of the params)
 * stand in for them while a unit is gathered outside forward (summon_full_params, state dicts),
 * fp:compute_views() in forward; the pieces (this rank's parts, fp->pieces) are what
 * named_parameters gives. */
static int l_flat_param(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  ms_fsdp_strategy strategy = check_strategy(L, 2);
  ms_pg *pg = opt_group(L, 3);
  int n = bind_narrow_int(L, luaL_len(L, 1), 0, INT_MAX, "fsdp", "#params");
  ms_tensor **params = lua_newuserdatauv(L, sizeof *params * (size_t)(n > 0 ? n : 1), 0);
  for (int i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    params[i] = ms_lua_check_tensor(L, -1, "fsdp");
    lua_pop(L, 1);
  }
  lua_flat_param *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->fp = NULL;
  luaL_setmetatable(L, MS_FLAT_PARAM_MT);
  u->fp = ms_flat_param_create(params, n, pg, strategy, lua_toboolean(L, 5));
  if (!u->fp || apply_mixed_precision(L, 4, u->fp) != MS_OK || ms_flat_param_install_hooks(u->fp) != MS_OK)
    return bind_raise(L);
  push_retained(L, ms_flat_param_shard(u->fp));
  push_list(L, u->fp, ms_flat_param_view);
  push_list(L, u->fp, ms_flat_param_piece);
  return 4;
}

static int fp_gather(lua_State *L) {
  bind_check_status(L, ms_flat_param_gather(check_fp(L)));
  return 0;
}

static int fp_release(lua_State *L) {
  ms_flat_param_release(check_fp(L));
  return 0;
}

static int fp_is_gathered(lua_State *L) {
  lua_pushboolean(L, ms_flat_param_is_gathered(check_fp(L)));
  return 1;
}

static int fp_update_shard(lua_State *L) {
  bind_check_status(L, ms_flat_param_update_shard(check_fp(L)));
  return 0;
}

/* fp:set_no_sync(on): while on, backwards leave the grads in the params, accumulating. */
static int fp_set_no_sync(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  luaL_checktype(L, 2, LUA_TBOOLEAN);
  ms_flat_param_set_no_sync(fp, lua_toboolean(L, 2));
  return 0;
}

/* fp:piece_offsets() -> {o1, o2, ...}: where each piece starts in its flattened param (elements,
 * from 0). */
static int fp_piece_offsets(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  ms_flat_param_info info;
  ms_flat_param_get_info(fp, &info);
  lua_createtable(L, info.nparams, 0);
  for (int i = 0; i < info.nparams; i++) {
    lua_pushinteger(L, ms_flat_param_piece_offset(fp, i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* fp:info() -> {numel =, padded =, shard_numel =, world =, rank =} */
static int fp_info(lua_State *L) {
  ms_flat_param_info info;
  ms_flat_param_get_info(check_fp(L), &info);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, info.numel), lua_setfield(L, -2, "numel");
  lua_pushinteger(L, info.padded), lua_setfield(L, -2, "padded");
  lua_pushinteger(L, info.shard_numel), lua_setfield(L, -2, "shard_numel");
  lua_pushinteger(L, info.world), lua_setfield(L, -2, "world");
  lua_pushinteger(L, info.rank), lua_setfield(L, -2, "rank");
  return 1;
}

/* ---- the per-step runtime (moonshard/fsdp_runtime.h) --------------------------------------------- */

#define MS_FSDP_STATE_MT "moonshard.FsdpState"

typedef struct lua_fsdp_state {
  ms_fsdp_state *s;
} lua_fsdp_state;

/* The tensors of the list at idx as an array (a userdata pushed on the stack, freed by the GC:
 * nothing leaks when a check raises); the tensors stay borrowed from the list. */
static ms_tensor **check_tensor_list(lua_State *L, int idx, const char *fname, int *n) {
  luaL_checktype(L, idx, LUA_TTABLE);
  *n = bind_narrow_int(L, luaL_len(L, idx), 0, INT_MAX, fname, "#outputs");
  ms_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(*n > 0 ? *n : 1), 0);
  for (int i = 0; i < *n; i++) {
    lua_geti(L, idx, i + 1);
    ts[i] = ms_lua_check_tensor(L, -1, fname);
    lua_pop(L, 1);
  }
  return ts;
}

/* _fsdp.state({fp, ...}, root_fp or nil) -> the root's runtime state (ms_fsdp_state_new). */
static int l_state(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int n = bind_narrow_int(L, luaL_len(L, 1), 0, INT_MAX, "fsdp.state", "#units");
  ms_flat_param **fps = lua_newuserdatauv(L, sizeof *fps * (size_t)(n > 0 ? n : 1), 0);
  for (int i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    lua_flat_param *u = luaL_testudata(L, -1, MS_FLAT_PARAM_MT);
    if (!u || !u->fp) bind_arg_error(L, 1, "fsdp.state", "units", "a list of flat parameters");
    fps[i] = u->fp;
    lua_pop(L, 1);
  }
  ms_flat_param *root = NULL;
  if (!lua_isnoneornil(L, 2)) {
    lua_flat_param *u = luaL_testudata(L, 2, MS_FLAT_PARAM_MT);
    if (!u || !u->fp) bind_arg_error(L, 2, "fsdp.state", "root_unit", "a flat parameter or nil");
    root = u->fp;
  }
  lua_fsdp_state *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->s = NULL;
  luaL_setmetatable(L, MS_FSDP_STATE_MT);
  if (!(box->s = ms_fsdp_state_new(fps, n, root))) return bind_raise(L);
  return 1;
}

static ms_fsdp_state *check_state(lua_State *L) {
  lua_fsdp_state *box = luaL_checkudata(L, 1, MS_FSDP_STATE_MT);
  if (!box->s) bind_error(L, "fsdp: this root state was freed");
  return box->s;
}

static int state_root_pre_forward(lua_State *L) {
  bind_check_status(L, ms_fsdp_root_pre_forward(check_state(L)));
  return 0;
}

/* state:root_post_forward({outputs}) */
static int state_root_post_forward(lua_State *L) {
  ms_fsdp_state *s = check_state(L);
  int n;
  ms_tensor **outs = check_tensor_list(L, 2, "fsdp root post_forward", &n);
  bind_check_status(L, ms_fsdp_root_post_forward(s, outs, n));
  return 0;
}

static int state_gc(lua_State *L) {
  lua_fsdp_state *box = luaL_checkudata(L, 1, MS_FSDP_STATE_MT);
  ms_fsdp_state_free(box->s);
  box->s = NULL;
  return 0;
}

static int fp_pre_forward(lua_State *L) {
  bind_check_status(L, ms_fsdp_pre_forward(check_fp(L)));
  return 0;
}

/* fp:post_forward({outputs}): the unit's output tensors (fsdp.lua walks nested tables). */
static int fp_post_forward(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  int n;
  ms_tensor **outs = check_tensor_list(L, 2, "fsdp post_forward", &n);
  bind_check_status(L, ms_fsdp_post_forward(fp, outs, n));
  return 0;
}

/* fp:set_prefetch(forward_prefetch, backward_prefetch): a boolean and nil, "BACKWARD_PRE" or
 * "BACKWARD_POST" (fsdp_comm.lua validated them). */
static int fp_set_prefetch(lua_State *L) {
  static const char *const names[] = {"NONE", "BACKWARD_PRE", "BACKWARD_POST", NULL};
  ms_flat_param *fp = check_fp(L);
  ms_fsdp_backward_prefetch bwd = lua_isnoneornil(L, 3) ? MS_FSDP_PREFETCH_NONE
                                                          : (ms_fsdp_backward_prefetch)luaL_checkoption(L, 3, NULL, names);
  bind_check_status(L, ms_fsdp_set_prefetch(fp, lua_toboolean(L, 2), bwd));
  return 0;
}

/* fp:set_limit_all_gathers(on) */
static int fp_set_limit_all_gathers(lua_State *L) {
  bind_check_status(L, ms_fsdp_set_limit_all_gathers(check_fp(L), lua_toboolean(L, 2)));
  return 0;
}

/* ---- communication (flat_param_comm.c, flat_param_mp.c) ------------------------------------- */

/* fp:set_name(name): the unit's module path, the origin of its collectives (checked across ranks). */
static int fp_set_name(lua_State *L) {
  bind_check_status(L, ms_flat_param_set_name(check_fp(L), luaL_checkstring(L, 2)));
  return 0;
}

static int fp_compute_gathered(lua_State *L) {
  lua_pushboolean(L, ms_flat_param_compute_gathered(check_fp(L)));
  return 1;
}

static int fp_set_inter_group(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  bind_check_status(L, ms_flat_param_set_inter_group(fp, opt_group(L, 2)));
  return 0;
}

/* fp:compute_views() -> {views} in param dtype (nil without mixed precision: the modules keep
 * the views flat_param returned) */
static int fp_compute_views(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  if (!ms_flat_param_mixed(fp)) return lua_pushnil(L), 1;
  push_list(L, fp, ms_flat_param_compute_view);
  return 1;
}

/* fp:stats([reset]) -> the unit's communication counters (moonshard/fsdp.h), then zeroes them
 * when reset is true. */
static int fp_stats(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  const ms_fsdp_comm_stats *s = ms_flat_param_stats(fp);
  ms_flat_param_info info;
  ms_flat_param_get_info(fp, &info);
  lua_createtable(L, 0, 11);
  lua_pushinteger(L, s->allgather_calls), lua_setfield(L, -2, "allgather_calls");
  lua_pushinteger(L, s->prefetch_calls), lua_setfield(L, -2, "prefetch_calls");
  lua_pushinteger(L, s->reduce_calls), lua_setfield(L, -2, "reduce_calls");
  lua_pushinteger(L, s->allreduce_calls), lua_setfield(L, -2, "allreduce_calls");
  lua_pushinteger(L, s->allgather_bytes), lua_setfield(L, -2, "allgather_bytes");
  lua_pushinteger(L, s->reduce_bytes), lua_setfield(L, -2, "reduce_bytes");
  lua_pushinteger(L, s->waits), lua_setfield(L, -2, "waits");
  lua_pushnumber(L, s->wait_seconds), lua_setfield(L, -2, "wait_seconds");
  lua_pushinteger(L, s->max_gathered), lua_setfield(L, -2, "max_gathered");
  lua_pushstring(L, ms_dtype_name(info.param_dtype)), lua_setfield(L, -2, "param_dtype");
  lua_pushstring(L, ms_dtype_name(info.reduce_dtype)), lua_setfield(L, -2, "reduce_dtype");
  if (lua_toboolean(L, 2)) ms_flat_param_stats_reset(fp);
  return 1;
}

static int l_progress(lua_State *L) {
  (void)L;
  ms_fsdp_progress();
  return 0;
}

/* _fsdp.host_key() -> an integer naming this host (a hash of its name), for HYBRID_SHARD's
 * default groups: the ranks with equal keys share a node. */
static int l_host_key(lua_State *L) {
  char name[256] = "";
  if (gethostname(name, sizeof name - 1) != 0) return bind_error(L, "fsdp: gethostname failed");
  uint64_t h = 1469598103934665603u;
  for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211u;
  lua_pushinteger(L, (lua_Integer)(h >> 1));
  return 1;
}

static int fp_gc(lua_State *L) {
  lua_flat_param *u = luaL_checkudata(L, 1, MS_FLAT_PARAM_MT);
  ms_flat_param_free(u->fp);
  u->fp = NULL;
  return 0;
}

void bind_open_fsdp(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"gather", fp_gather},           {"release", fp_release},
      {"is_gathered", fp_is_gathered}, {"info", fp_info},
      {"update_shard", fp_update_shard},
      {"set_no_sync", fp_set_no_sync}, {"piece_offsets", fp_piece_offsets},
      {"compute_gathered", fp_compute_gathered},
      {"set_inter_group", fp_set_inter_group}, {"compute_views", fp_compute_views},
      {"stats", fp_stats},             {"set_name", fp_set_name},
      {"pre_forward", fp_pre_forward}, {"post_forward", fp_post_forward},
      {"set_prefetch", fp_set_prefetch}, {"set_limit_all_gathers", fp_set_limit_all_gathers},
      {NULL, NULL},
  };
  static const luaL_Reg state_methods[] = {
      {"root_pre_forward", state_root_pre_forward}, {"root_post_forward", state_root_post_forward},
      {NULL, NULL},
  };
  luaL_newmetatable(L, MS_FLAT_PARAM_MT);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, fp_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newmetatable(L, MS_FSDP_STATE_MT);
  luaL_newlib(L, state_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, state_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lua_createtable(L, 0, 4);
  lua_pushcfunction(L, l_flat_param);
  lua_setfield(L, -2, "flat_param");
  lua_pushcfunction(L, l_state);
  lua_setfield(L, -2, "state");
  lua_pushcfunction(L, l_progress);
  lua_setfield(L, -2, "progress");
  lua_pushcfunction(L, l_host_key);
  lua_setfield(L, -2, "host_key");
  lua_setfield(L, -3, "_fsdp"); /* module at -2 before the push */
}
