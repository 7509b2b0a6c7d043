/* l_fsdp.c: ms._fsdp, the native half of moonshard.fsdp: a FlatParam userdata per FSDP unit
 * (moonshard/fsdp.h). The Lua half (lua/moonshard/fsdp.lua) owns wrapping, module hooks and
 * state dicts; this file only moves bytes and runs collectives. */
#include <string.h>

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

/* _fsdp.flat_param(params, strategy, group) -> fp, shard, {views}, {pieces}: params is a list
 * of tensors in registration order; the views replace them in their modules during forward,
 * the pieces (this rank's parts, fp->pieces) are what named_parameters gives. */
static int l_flat_param(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  ms_fsdp_strategy strategy = check_strategy(L, 2);
  ms_pg *pg = opt_group(L, 3);
  int n = (int)luaL_len(L, 1);
  ms_tensor **params = lua_newuserdatauv(L, sizeof *params * (size_t)(n > 0 ? n : 1), 0);
  for (int i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    params[i] = ms_lua_check_tensor(L, -1, "fsdp");
    lua_pop(L, 1);
  }
  lua_flat_param *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->fp = NULL;
  luaL_setmetatable(L, MS_FLAT_PARAM_MT);
  u->fp = ms_flat_param_create(params, n, pg, strategy);
  if (!u->fp || ms_flat_param_install_hooks(u->fp) != MS_OK) return ms_lua_raise(L);
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
  ms_lua_check_status(L, ms_flat_param_finish_backward(check_fp(L)));
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
 * starts. The userdata's user value (the list of FlatParam userdata) keeps the units alive; no
 * allocation per backward, so a failed backward that drops the callback leaks nothing. */
typedef struct lua_finisher {
  bool queued;
  int n;
  ms_flat_param *fps[];
} lua_finisher;

#define MS_FINISHER_MT "moonshard.FsdpFinisher"

static ms_status finish_all(void *ctx) {
  lua_finisher *f = ctx;
  f->queued = false;
  ms_status st = MS_OK;
  for (int i = 0; st == MS_OK && i < f->n; i++) st = ms_flat_param_finish_backward(f->fps[i]);
  return st;
}

/* _fsdp.finisher({fp, ...}) -> a finisher with :queue() (during a backward; once per backward)
 * and :reset() (a new forward: a failed backward may have left it queued). */
static int l_finisher(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int n = (int)luaL_len(L, 1);
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

static int finisher_reset(lua_State *L) {
  lua_finisher *f = luaL_checkudata(L, 1, MS_FINISHER_MT);
  f->queued = false;
  return 0;
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
      {NULL, NULL},
  };
  static const luaL_Reg finisher_methods[] = {
      {"queue", finisher_queue}, {"reset", finisher_reset}, {NULL, NULL},
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
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, l_flat_param);
  lua_setfield(L, -2, "flat_param");
  lua_pushcfunction(L, l_finisher);
  lua_setfield(L, -2, "finisher");
  lua_setfield(L, -3, "_fsdp"); /* module at -2 before the push */
}
