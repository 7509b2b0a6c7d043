/* l_fsdp.c: ms._fsdp, the native half of moonshard.fsdp: a FlatParam userdata per FSDP unit
 * (moonshard/fsdp.h). The Lua half (lua/moonshard/fsdp.lua) owns wrapping, module hooks and
 * state dicts; this file only moves bytes and runs collectives. */
#define _POSIX_C_SOURCE 200809L /* gethostname */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "moonshard/autograd.h"
#include "moonshard/dist.h"
#include "moonshard/fsdp.h"
#include "ms_lua.h"

#define MS_FLAT_PARAM_MT "moonshard.FlatParam"
#define MS_PG_MT "moonshard.ProcessGroup" /* l_dist.c's groups: a box holding one ms_pg * */

typedef struct lua_flat_param {
  ms_flat_param *fp;
} lua_flat_param;

static ms_flat_param *check_fp(lua_State *L) {
  lua_flat_param *u = luaL_checkudata(L, 1, MS_FLAT_PARAM_MT);
  if (!u->fp) luaL_error(L, "fsdp: this flat parameter was freed");
  return u->fp;
}

static ms_fsdp_strategy check_strategy(lua_State *L, int idx) {
  static const char *const names[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", NULL};
  const char *s = luaL_checkstring(L, idx);
  for (int i = 0; names[i]; i++)
    if (strcmp(s, names[i]) == 0) return (ms_fsdp_strategy)i;
  return luaL_error(L, "fsdp: sharding_strategy '%s' is not supported yet (FULL_SHARD, SHARD_GRAD_OP "
                    "or NO_SHARD)", s), MS_FSDP_FULL_SHARD;
}

static ms_pg *opt_group(lua_State *L, int idx) {
  if (lua_isnoneornil(L, idx)) {
    if (!ms_dist_is_initialized())
      luaL_error(L, "fsdp: the default process group is not initialized: call "
                 "ms.distributed.init_process_group first");
    return ms_pg_world();
  }
  ms_pg **box = luaL_testudata(L, idx, MS_PG_MT);
  if (!box || !*box) ms_lua_arg_error(L, idx, "fsdp", "process_group", "a process group from new_group");
  return *box;
}

/* Pushes t as a new box (the box takes a new reference: fp keeps its own). */
static void push_retained(lua_State *L, ms_tensor *t) {
  ms_tensor_retain(t);
  ms_lua_push_tensor(L, t);
}

/* Mixed precision from arg idx: nil, or {param_dtype, reduce_dtype} as dtype names (fsdp.lua
 * validated them and filled the defaults). */
static ms_status apply_mixed_precision(lua_State *L, int idx, ms_flat_param *fp) {
  if (lua_isnoneornil(L, idx)) return MS_OK;
  luaL_checktype(L, idx, LUA_TTABLE);
  ms_dtype pd, rd;
  lua_getfield(L, idx, "param_dtype");
  lua_getfield(L, idx, "reduce_dtype");
  if (!ms_dtype_from_name(luaL_checkstring(L, -2), &pd) || !ms_dtype_from_name(luaL_checkstring(L, -1), &rd))
    return ms_error(MS_ERR_ARG, "fsdp: mixed_precision: unknown dtype name");
  lua_pop(L, 2);
  return ms_flat_param_set_mixed_precision(fp, pd, rd);
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
  int n = ms_lua_narrow_int(L, luaL_len(L, 1), 0, INT_MAX, "fsdp", "#params");
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
    return ms_lua_raise(L);
  push_retained(L, u->fp->shard);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    push_retained(L, u->fp->params[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    push_retained(L, u->fp->pieces[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 4;
}

static int fp_gather(lua_State *L) {
  ms_lua_check_status(L, ms_flat_param_gather(check_fp(L)));
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

static int fp_reduce_grads(lua_State *L) {
  ms_lua_check_status(L, ms_flat_param_reduce_grads(check_fp(L)));
  return 0;
}

static int fp_update_shard(lua_State *L) {
  ms_lua_check_status(L, ms_flat_param_update_shard(check_fp(L)));
  return 0;
}

/* fp:grads_incomplete() -> whether some but not all of the unit's grads arrived in this backward
 * (false right after the native hook counted the last one: BACKWARD_POST's cue). */
static int fp_grads_incomplete(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  lua_pushboolean(L, fp->grads_pending != fp->grads_expected);
  return 1;
}

static int fp_reset_pending(lua_State *L) {
  ms_flat_param_reset_pending(check_fp(L));
  return 0;
}

/* fp:set_no_sync(on): while on, backwards leave the grads in the params, accumulating. */
static int fp_set_no_sync(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  luaL_checktype(L, 2, LUA_TBOOLEAN);
  fp->no_sync = lua_toboolean(L, 2);
  return 0;
}

static int fp_finish_backward(lua_State *L) {
  ms_lua_check_status(L, ms_flat_param_finish_backward(check_fp(L), false));
  return 0;
}

static int fp_drop_unused_grad(lua_State *L) {
  ms_flat_param_drop_unused_grad(check_fp(L));
  return 0;
}

/* fp:piece_offsets() -> {o1, o2, ...}: where each piece starts in its flattened param (elements,
 * from 0). */
static int fp_piece_offsets(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  lua_createtable(L, fp->nparams, 0);
  for (int i = 0; i < fp->nparams; i++) {
    lua_pushinteger(L, fp->piece_offsets[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* fp:info() -> {numel =, padded =, shard_numel =, world =, rank =} */
static int fp_info(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, fp->numel), lua_setfield(L, -2, "numel");
  lua_pushinteger(L, fp->padded), lua_setfield(L, -2, "padded");
  lua_pushinteger(L, fp->shard_numel), lua_setfield(L, -2, "shard_numel");
  lua_pushinteger(L, fp->world), lua_setfield(L, -2, "world");
  lua_pushinteger(L, fp->rank), lua_setfield(L, -2, "rank");
  return 1;
}

/* ---- the root's end of backward ------------------------------------------------------------------ */

/* The units of one root, finished together by one callback queued when the root's backward
 * starts: the one place where a backward's reductions are waited for. The userdata's user value
 * (the list of FlatParam userdata) keeps the units alive; no allocation per backward. */
typedef struct lua_finisher {
  bool queued;
  int n;
  ms_flat_param *fps[];
} lua_finisher;

#define MS_FINISHER_MT "moonshard.FsdpFinisher"

/* Every unit is finished even after an error, so that no collective is left writing into a
 * buffer; after a failed walk or a unit's error the rest only wait and clean up (the other ranks
 * may not start the same collectives). The first error is kept. */
static ms_status finish_all(void *ctx) {
  lua_finisher *f = ctx;
  f->queued = false;
  ms_status st = MS_OK;
  char first[1024] = "";
  for (int i = 0; i < f->n; i++) {
    ms_status r = ms_flat_param_finish_backward(f->fps[i], st != MS_OK || ms_autograd_walk_failed());
    if (r != MS_OK && st == MS_OK) st = r, snprintf(first, sizeof first, "%s", ms_error_last());
  }
  if (st != MS_OK) ms_error(st, "%s", first);
  return st;
}

/* _fsdp.finisher({fp, ...}) -> a finisher with :queue() (during a backward; once per backward:
 * its callback runs even after a failed walk, which clears the flag). */
static int l_finisher(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int n = ms_lua_narrow_int(L, luaL_len(L, 1), 0, INT_MAX, "fsdp finisher", "#units");
  lua_finisher *f = lua_newuserdatauv(L, sizeof *f + sizeof f->fps[0] * (size_t)n, 1);
  f->queued = false;
  f->n = 0;
  for (int i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    lua_flat_param *u = luaL_testudata(L, -1, MS_FLAT_PARAM_MT);
    if (!u || !u->fp) ms_lua_arg_error(L, 1, "fsdp.finisher", "units", "a list of flat parameters");
    f->fps[f->n++] = u->fp;
    lua_pop(L, 1);
  }
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, MS_FINISHER_MT);
  return 1;
}

static int finisher_queue(lua_State *L) {
  lua_finisher *f = luaL_checkudata(L, 1, MS_FINISHER_MT);
  if (f->queued) return 0;
  ms_lua_check_status(L, ms_autograd_queue_callback(finish_all, f));
  f->queued = true;
  return 0;
}

/* ---- communication (flat_param_comm.c, flat_param_mp.c) ------------------------------------- */

/* fp:gather_compute_async(prefetch, backward) issues the compute buffer's all-gather;
 * fp:gather_compute(backward) makes it ready (backward: for the unit's backward, else forward). */
static int fp_gather_compute_async(lua_State *L) {
  ms_lua_check_status(L, ms_flat_param_gather_compute_async(check_fp(L), lua_toboolean(L, 2), lua_toboolean(L, 3)));
  return 0;
}

static int fp_gather_compute(lua_State *L) {
  ms_lua_check_status(L, ms_flat_param_gather_compute(check_fp(L), lua_toboolean(L, 2)));
  return 0;
}

/* fp:set_name(name): the unit's module path, the origin of its collectives (checked across ranks). */
static int fp_set_name(lua_State *L) {
  ms_lua_check_status(L, ms_flat_param_set_name(check_fp(L), luaL_checkstring(L, 2)));
  return 0;
}

static int fp_compute_gathered(lua_State *L) {
  lua_pushboolean(L, ms_flat_param_compute_gathered(check_fp(L)));
  return 1;
}

static int fp_wait_reduce(lua_State *L) {
  ms_lua_check_status(L, ms_flat_param_wait_reduce(check_fp(L)));
  return 0;
}

static int fp_set_inter_group(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  ms_lua_check_status(L, ms_flat_param_set_inter_group(fp, opt_group(L, 2)));
  return 0;
}

/* fp:compute_views() -> {views} in param dtype (nil without mixed precision: the modules keep
 * the views flat_param returned) */
static int fp_compute_views(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  if (!ms_flat_param_mixed(fp)) return lua_pushnil(L), 1;
  lua_createtable(L, fp->nparams, 0);
  for (int i = 0; i < fp->nparams; i++) {
    push_retained(L, fp->compute_params[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* fp:stats([reset]) -> the unit's communication counters (moonshard/fsdp.h), then zeroes them
 * when reset is true. */
static int fp_stats(lua_State *L) {
  ms_flat_param *fp = check_fp(L);
  const ms_fsdp_comm_stats *s = &fp->stats;
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, s->allgather_calls), lua_setfield(L, -2, "allgather_calls");
  lua_pushinteger(L, s->prefetch_calls), lua_setfield(L, -2, "prefetch_calls");
  lua_pushinteger(L, s->reduce_calls), lua_setfield(L, -2, "reduce_calls");
  lua_pushinteger(L, s->allreduce_calls), lua_setfield(L, -2, "allreduce_calls");
  lua_pushinteger(L, s->allgather_bytes), lua_setfield(L, -2, "allgather_bytes");
  lua_pushinteger(L, s->reduce_bytes), lua_setfield(L, -2, "reduce_bytes");
  lua_pushinteger(L, s->waits), lua_setfield(L, -2, "waits");
  lua_pushnumber(L, s->wait_seconds), lua_setfield(L, -2, "wait_seconds");
  lua_pushstring(L, ms_dtype_name(fp->param_dtype)), lua_setfield(L, -2, "param_dtype");
  lua_pushstring(L, ms_dtype_name(fp->reduce_dtype)), lua_setfield(L, -2, "reduce_dtype");
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
  if (gethostname(name, sizeof name - 1) != 0) return luaL_error(L, "fsdp: gethostname failed");
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

void ms_lua_open_fsdp(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"gather", fp_gather},           {"release", fp_release},
      {"is_gathered", fp_is_gathered}, {"reduce_grads", fp_reduce_grads},
      {"reset_pending", fp_reset_pending}, {"info", fp_info},
      {"update_shard", fp_update_shard},
      {"set_no_sync", fp_set_no_sync}, {"finish_backward", fp_finish_backward},
      {"drop_unused_grad", fp_drop_unused_grad}, {"piece_offsets", fp_piece_offsets},
      {"grads_incomplete", fp_grads_incomplete},
      {"gather_compute_async", fp_gather_compute_async}, {"gather_compute", fp_gather_compute},
      {"compute_gathered", fp_compute_gathered}, {"wait_reduce", fp_wait_reduce},
      {"set_inter_group", fp_set_inter_group}, {"compute_views", fp_compute_views},
      {"stats", fp_stats},             {"set_name", fp_set_name},
      {NULL, NULL},
  };
  static const luaL_Reg finisher_methods[] = {
      {"queue", finisher_queue}, {NULL, NULL},
  };
  luaL_newmetatable(L, MS_FLAT_PARAM_MT);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, fp_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newmetatable(L, MS_FINISHER_MT);
  luaL_newlib(L, finisher_methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_createtable(L, 0, 4);
  lua_pushcfunction(L, l_flat_param);
  lua_setfield(L, -2, "flat_param");
  lua_pushcfunction(L, l_finisher);
  lua_setfield(L, -2, "finisher");
  lua_pushcfunction(L, l_progress);
  lua_setfield(L, -2, "progress");
  lua_pushcfunction(L, l_host_key);
  lua_setfield(L, -2, "host_key");
  lua_setfield(L, -3, "_fsdp"); /* module at -2 before the push */
}
