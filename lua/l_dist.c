/* l_dist.c: ms.distributed, PyTorch's torch.distributed in Lua form. Ranks (get_rank, src=,
 * dst=, new_group's list) are 0-based process ids as in PyTorch: they name processes, they are
 * not positions in a Lua list. Collectives return nothing, or a Work handle with async_op=true
 * (:wait(), :is_completed()) that keeps its tensors alive until collected. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "moonshard/dist.h"
#include "ms_lua.h"

#define MS_PG_MT "moonshard.ProcessGroup"
#define MS_WORK_MT "moonshard.Work"

/* ---- groups ----------------------------------------------------------------------------------- */

typedef struct lua_pg {
  ms_pg *pg; /* owned reference */
} lua_pg;

static void push_group(lua_State *L, ms_pg *pg) {
  lua_pg *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->pg = pg;
  luaL_setmetatable(L, MS_PG_MT);
}

static ms_pg *check_group(lua_State *L, int idx, const char *fname) {
  lua_pg *u = luaL_testudata(L, idx, MS_PG_MT);
  if (!u || !u->pg) bind_arg_error(L, idx, fname, "group", "a process group from new_group");
  return u->pg;
}

/* The group at idx, or the world when nil/none (raising when not initialized). */
static ms_pg *group_or_world(lua_State *L, int idx, const char *fname) {
  if (!lua_isnoneornil(L, idx)) return check_group(L, idx, fname);
  ms_pg *w = ms_pg_world();
  if (!w) bind_error(L, "%s: %s", fname, ms_error_last());
  return w;
}

static int pg_gc(lua_State *L) {
  lua_pg *u = luaL_checkudata(L, 1, MS_PG_MT);
  ms_pg_release(u->pg);
  u->pg = NULL;
  return 0;
}

static int pg_tostring(lua_State *L) {
  ms_pg *pg = check_group(L, 1, "tostring");
  lua_pushfstring(L, "ProcessGroup(rank=%d, size=%d)", ms_pg_rank(pg), ms_pg_size(pg));
  return 1;
}

static int pg_rank(lua_State *L) { return lua_pushinteger(L, ms_pg_rank(check_group(L, 1, "rank"))), 1; }
static int pg_size(lua_State *L) { return lua_pushinteger(L, ms_pg_size(check_group(L, 1, "size"))), 1; }

/* ---- work handles ----------------------------------------------------------------------------- */

/* A Work userdata's uservalue 1 is a table {list = , flat = } when waiting must also scatter a
 * gathered flat tensor into a list (all_gather), else nil. */
typedef struct lua_work {
  ms_work *w;
  bool scattered;
} lua_work;

static lua_work *check_work(lua_State *L) { return luaL_checkudata(L, 1, MS_WORK_MT); }

static void scatter_list(lua_State *L, int list, ms_tensor *flat, const char *fname);

/* Finishes an all_gather into a list once the flat result is there. */
static void finish_work(lua_State *L, lua_work *u) {
  if (u->scattered) return;
  if (lua_getiuservalue(L, 1, 1) != LUA_TTABLE) return (void)lua_pop(L, 1);
  u->scattered = true;
  lua_getfield(L, -1, "list");
  lua_getfield(L, -2, "flat");
  scatter_list(L, lua_absindex(L, -2), ms_lua_to_tensor(L, -1), "all_gather");
  lua_pop(L, 3);
}

static int work_wait(lua_State *L) {
  lua_work *u = check_work(L);
  if (!u->w) return bind_error(L, "wait: the work handle was freed");
  bind_check_status(L, ms_work_wait(u->w));
  finish_work(L, u);
  lua_pushboolean(L, 1);
  return 1;
}

static int work_is_completed(lua_State *L) {
  lua_work *u = check_work(L);
  bool done = !u->w || ms_work_is_completed(u->w);
  lua_pushboolean(L, done);
  return 1;
}

static int work_gc(lua_State *L) {
  lua_work *u = check_work(L);
  ms_work_free(u->w); /* waits first: MPI may still be writing the tensors */
  u->w = NULL;
  return 0;
}

/* Pushes a Work for w (owned); extra (stack index or 0) becomes its uservalue. */
static int push_work(lua_State *L, ms_work *w, int extra) {
  lua_work *u = lua_newuserdatauv(L, sizeof *u, 1);
  u->w = w, u->scattered = false;
  luaL_setmetatable(L, MS_WORK_MT);
  if (extra) {
    lua_pushvalue(L, extra);
    lua_setiuservalue(L, -2, 1);
  }
  return 1;
}

/* ---- options ---------------------------------------------------------------------------------- */

typedef struct coll_opts {
  ms_pg *pg;
  ms_dist_op op;
  bool async;
  int64_t root;
} coll_opts;

static ms_dist_op check_op_name(lua_State *L, int idx, const char *fname) {
  const char *s = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : "";
  for (int i = 0; i < MS_DIST_OP_COUNT; i++)
    if (strcmp(s, ms_dist_op_name((ms_dist_op)i)) == 0) return (ms_dist_op)i;
  return bind_error(L, "%s: option 'op': expected one of \"sum\", \"avg\", \"max\", \"min\", \"product\", got %s",
                    fname, bind_describe(L, idx));
}

/* {group=, async_op=, op= (when has_op), src=/dst= (root_key)} */
static coll_opts check_coll_opts(lua_State *L, int idx, const char *fname, bool has_op, const char *root_key) {
  const char *known[5] = {"group", "async_op"};
  int k = 2;
  if (has_op) known[k++] = "op";
  if (root_key) known[k++] = root_key;
  known[k] = NULL;
  ms_lua_opts o = bind_check_opts(L, idx, fname, known);
  coll_opts c = {NULL, MS_DIST_SUM, false, 0};
  bind_opt_bool(o, "async_op", &c.async);
  if (root_key) bind_opt_integer(o, root_key, &c.root);
  if (c.root < 0 || c.root > 1 << 30) bind_error(L, "%s: option '%s': bad rank %I", fname, root_key, (lua_Integer)c.root);
  if (o.idx && has_op) {
    lua_getfield(L, o.idx, "op");
    if (!lua_isnil(L, -1)) c.op = check_op_name(L, lua_gettop(L), fname);
    lua_pop(L, 1);
  }
  if (o.idx) lua_getfield(L, o.idx, "group");
  else lua_pushnil(L);
  c.pg = group_or_world(L, lua_gettop(L), fname); /* the options table keeps it alive */
  lua_pop(L, 1);
  return c;
}

/* Raises on failure; returns the number of results (a Work when async). */
static int finish_call(lua_State *L, ms_status st, ms_work *w, int extra) {
  bind_check_status(L, st);
  return w ? push_work(L, w, extra) : 0;
}

/* ---- the world -------------------------------------------------------------------------------- */

/* init_process_group("mpi" | "self" | "auto" | "nccl" | {backend=, timeout=}) */
static int l_init(lua_State *L) {
  static const char *const known[] = {"backend", "timeout", NULL};
  const char *backend = "auto";
  double timeout = 0;
  if (lua_type(L, 1) == LUA_TSTRING) backend = lua_tostring(L, 1);
  else if (lua_istable(L, 1)) {
    ms_lua_opts o = bind_check_opts(L, 1, "init_process_group", known);
    lua_getfield(L, 1, "backend");
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
      return bind_error(L, "init_process_group: option 'backend': expected a string, got %s", bind_describe(L, -1));
    if (!lua_isnil(L, -1)) backend = lua_tostring(L, -1); /* the table keeps the string alive */
    lua_pop(L, 1);
    bind_opt_number(o, "timeout", &timeout);
  } else if (!lua_isnoneornil(L, 1))
    return bind_arg_error(L, 1, "init_process_group", "backend", "a backend name or an options table");
  bind_check_status(L, ms_dist_init(backend, timeout));
  return 0;
}

static int l_is_initialized(lua_State *L) { return lua_pushboolean(L, ms_dist_is_initialized()), 1; }
static int l_true(lua_State *L) { return lua_pushboolean(L, 1), 1; }

static int l_is_mpi_available(lua_State *L) {
#ifdef MS_HAVE_MPI
  bool built = true;
#else
  bool built = false;
#endif
  return lua_pushboolean(L, built), 1;
}

/* Built with NCCL (and MPI to start it); a GPU is still needed at init_process_group("nccl"). */
static int l_is_nccl_available(lua_State *L) {
#if defined(MS_HAVE_MPI) && defined(MS_HAVE_NCCL)
  bool built = true;
#else
  bool built = false;
#endif
  return lua_pushboolean(L, built), 1;
}

/* get_rank([group]): the world rank, or the rank in group (-1 when not a member). */
static int l_get_rank(lua_State *L) {
  lua_pushinteger(L, ms_pg_rank(group_or_world(L, 1, "get_rank")));
  return 1;
}

static int l_get_world_size(lua_State *L) {
  lua_pushinteger(L, ms_pg_size(group_or_world(L, 1, "get_world_size")));
  return 1;
}

static int l_get_local_rank(lua_State *L) { return lua_pushinteger(L, ms_dist_local_rank()), 1; }

static int l_get_backend(lua_State *L) {
  group_or_world(L, 1, "get_backend");
  lua_pushstring(L, ms_dist_backend());
  return 1;
}

/* get_process_group_ranks(group): the world ranks of its members, in group-rank order. */
static int l_get_process_group_ranks(lua_State *L) {
  ms_pg *pg = group_or_world(L, 1, "get_process_group_ranks");
  lua_createtable(L, ms_pg_size(pg), 0);
  for (int i = 0; i < ms_pg_size(pg); i++) {
    lua_pushinteger(L, ms_pg_global_rank(pg, i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_destroy(lua_State *L) {
  if (!lua_isnoneornil(L, 1))
    return bind_error(L, "destroy_process_group: destroying one group is not supported (groups are freed "
                      "when collected); call it without arguments to destroy everything");
  bind_check_status(L, ms_dist_destroy());
  return 0;
}

/* new_group(ranks): ranks is a list of 0-based world ranks; nil means every rank. Every rank
 * of the world must call it. */
static int l_new_group(lua_State *L) {
  ms_pg *world = group_or_world(L, 2, "new_group"); /* arg 2 is never given: the world */
  bool all = lua_isnoneornil(L, 1);
  if (!all) luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1); /* the scratch array below must not take the list's place */
  int n = all ? ms_pg_size(world) : (int)lua_rawlen(L, 1);
  int *ranks = lua_newuserdatauv(L, sizeof *ranks * (size_t)(n ? n : 1), 0); /* freed by the GC */
  for (int i = 0; i < n; i++) {
    if (all) {
      ranks[i] = i;
      continue;
    }
    lua_rawgeti(L, 1, i + 1);
    if (!lua_isinteger(L, -1))
      return bind_error(L, "new_group: ranks[%d] must be an integer rank, got %s", i + 1, bind_describe(L, -1));
    char what[32];
    snprintf(what, sizeof what, "ranks[%d]", i + 1);
    ranks[i] = bind_narrow_int(L, lua_tointeger(L, -1), 0, INT_MAX, "new_group", what);
    lua_pop(L, 1);
  }
  ms_pg *pg = ms_pg_new_group(ranks, n);
  if (!pg) return bind_raise(L);
  push_group(L, pg);
  return 1;
}

/* ---- collectives ------------------------------------------------------------------------------ */

/* all_reduce(t, {op=, group=, async_op=}) */
static int l_all_reduce(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "all_reduce");
  coll_opts o = check_coll_opts(L, 2, "all_reduce", true, NULL);
  ms_work *w = NULL;
  ms_status st = ms_pg_all_reduce(o.pg, t, o.op, o.async ? &w : NULL);
  return finish_call(L, st, w, 0);
}

/* all_gather_into_tensor(out, t, {group=, async_op=}) */
static int l_all_gather_into_tensor(lua_State *L) {
  const char *f = "all_gather_into_tensor";
  ms_tensor *out = ms_lua_check_tensor(L, 1, f), *in = ms_lua_check_tensor(L, 2, f);
  coll_opts o = check_coll_opts(L, 3, f, false, NULL);
  ms_work *w = NULL;
  ms_status st = ms_pg_all_gather(o.pg, out, in, o.async ? &w : NULL);
  return finish_call(L, st, w, 0);
}

/* reduce_scatter_tensor(out, t, {op=, group=, async_op=}) */
static int l_reduce_scatter_tensor(lua_State *L) {
  const char *f = "reduce_scatter_tensor";
  ms_tensor *out = ms_lua_check_tensor(L, 1, f), *in = ms_lua_check_tensor(L, 2, f);
  coll_opts o = check_coll_opts(L, 3, f, true, NULL);
  ms_work *w = NULL;
  ms_status st = ms_pg_reduce_scatter(o.pg, out, in, o.op, o.async ? &w : NULL);
  return finish_call(L, st, w, 0);
}

/* broadcast(t, {src=0, group=, async_op=}) */
static int l_broadcast(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "broadcast");
  coll_opts o = check_coll_opts(L, 2, "broadcast", false, "src");
  ms_work *w = NULL;
  ms_status st = ms_pg_broadcast(o.pg, t, (int)o.root, o.async ? &w : NULL);
  return finish_call(L, st, w, 0);
}

/* reduce(t, {dst=0, op=, group=, async_op=}): only dst's tensor receives the result. */
static int l_reduce(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "reduce");
  coll_opts o = check_coll_opts(L, 2, "reduce", true, "dst");
  ms_work *w = NULL;
  ms_status st = ms_pg_reduce(o.pg, t, (int)o.root, o.op, o.async ? &w : NULL);
  return finish_call(L, st, w, 0);
}

/* barrier({group=, async_op=}) */
static int l_barrier(lua_State *L) {
  coll_opts o = check_coll_opts(L, 1, "barrier", false, NULL);
  ms_work *w = NULL;
  ms_status st = ms_pg_barrier(o.pg, o.async ? &w : NULL);
  return finish_call(L, st, w, 0);
}

/* Checks that list (a Lua sequence at idx) holds `size` tensors shaped like t's numel/dtype. */
static void check_list(lua_State *L, int list, int size, const ms_tensor *t, const char *fname) {
  if ((int)lua_rawlen(L, list) != size)
    bind_error(L, "%s: tensor_list has %d entries, expected the group size (%d)", fname, (int)lua_rawlen(L, list), size);
  for (int i = 1; i <= size; i++) {
    lua_rawgeti(L, list, i);
    ms_tensor *e = ms_lua_to_tensor(L, -1);
    if (!e) bind_error(L, "%s: tensor_list[%d] must be a tensor, got %s", fname, i, bind_describe(L, -1));
    if (e->dtype != t->dtype || ms_tensor_numel(e) != ms_tensor_numel(t))
      bind_error(L, "%s: tensor_list[%d] is %s with %I elements, expected %s with %I like the input", fname, i,
                 ms_dtype_name(e->dtype), (lua_Integer)ms_tensor_numel(e), ms_dtype_name(t->dtype),
                 (lua_Integer)ms_tensor_numel(t));
    lua_pop(L, 1);
  }
}

/* Copies slice i of the flat gathered tensor into list[i]. */
static void scatter_list(lua_State *L, int list, ms_tensor *flat, const char *fname) {
  int n = (int)lua_rawlen(L, list);
  int64_t per = n ? ms_tensor_numel(flat) / n : 0;
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, list, i + 1);
    ms_tensor *dst = ms_lua_to_tensor(L, -1);
    if (!dst) bind_error(L, "%s: tensor_list[%d] is no longer a tensor", fname, i + 1);
    ms_tensor *piece = ms_tensor_narrow(flat, 0, i * per, per);
    ms_tensor *shaped = piece ? ms_tensor_view(piece, dst->ndim, dst->shape) : NULL;
    ms_status st = shaped ? ms_tensor_copy_(dst, shaped) : MS_ERR_MEMORY;
    ms_tensor_release(piece), ms_tensor_release(shaped);
    bind_check_status(L, st);
    lua_pop(L, 1);
  }
}

/* all_gather(tensor_list, t, {group=, async_op=}): gathers into one flat tensor, then copies. */
static int l_all_gather(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  ms_tensor *in = ms_lua_check_tensor(L, 2, "all_gather");
  coll_opts o = check_coll_opts(L, 3, "all_gather", false, NULL);
  if (ms_pg_rank(o.pg) < 0) return 0; /* not a member: nothing, as PyTorch */
  check_list(L, 1, ms_pg_size(o.pg), in, "all_gather");
  ms_tensor *c = ms_tensor_contiguous(in);
  ms_tensor *flat = c ? ms_tensor_new_empty(1, (int64_t[]){ms_tensor_numel(in) * ms_pg_size(o.pg)}, in->dtype) : NULL;
  if (!flat) return ms_tensor_release(c), bind_raise(L);
  lua_createtable(L, 0, 2); /* holds flat and list for the copy after the wait */
  lua_pushvalue(L, 1), lua_setfield(L, -2, "list");
  ms_lua_push_tensor(L, flat), lua_setfield(L, -2, "flat");
  ms_lua_push_tensor(L, c); /* releases c with the collector, after the work is done with it */
  ms_work *w = NULL;
  ms_status st = ms_pg_all_gather(o.pg, flat, c, o.async ? &w : NULL);
  bind_check_status(L, st);
  if (w) return push_work(L, w, lua_gettop(L) - 1);
  scatter_list(L, 1, flat, "all_gather");
  return 0;
}

/* ---- registration ----------------------------------------------------------------------------- */

static void make_metatables(lua_State *L) {
  static const luaL_Reg pg_methods[] = {{"rank", pg_rank}, {"size", pg_size}, {NULL, NULL}};
  static const luaL_Reg work_methods[] = {{"wait", work_wait}, {"is_completed", work_is_completed}, {NULL, NULL}};
  luaL_newmetatable(L, MS_PG_MT);
  luaL_newlib(L, pg_methods), lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, pg_gc), lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, pg_tostring), lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  luaL_newmetatable(L, MS_WORK_MT);
  luaL_newlib(L, work_methods), lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, work_gc), lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}

void bind_open_dist(lua_State *L) {
  static const luaL_Reg fns[] = {
      {"init_process_group", l_init},
      {"is_initialized", l_is_initialized},
      {"is_available", l_true},
      {"is_mpi_available", l_is_mpi_available},
      {"is_nccl_available", l_is_nccl_available},
      {"get_rank", l_get_rank},
      {"get_world_size", l_get_world_size},
      {"get_local_rank", l_get_local_rank},
      {"get_backend", l_get_backend},
      {"get_process_group_ranks", l_get_process_group_ranks},
      {"new_group", l_new_group},
      {"destroy_process_group", l_destroy},
      {"all_reduce", l_all_reduce},
      {"all_gather_into_tensor", l_all_gather_into_tensor},
      {"all_gather", l_all_gather},
      {"reduce_scatter_tensor", l_reduce_scatter_tensor},
      {"broadcast", l_broadcast},
      {"reduce", l_reduce},
      {"barrier", l_barrier},
      {NULL, NULL},
  };
  make_metatables(L);
  luaL_newlib(L, fns);
  /* ReduceOp.SUM etc., as PyTorch spells them; the values are the option strings */
  lua_createtable(L, 0, MS_DIST_OP_COUNT);
  static const char *const upper[] = {"SUM", "AVG", "MAX", "MIN", "PRODUCT"};
  for (int i = 0; i < MS_DIST_OP_COUNT; i++) {
    lua_pushstring(L, ms_dist_op_name((ms_dist_op)i));
    lua_setfield(L, -2, upper[i]);
  }
  lua_setfield(L, -2, "ReduceOp");
  lua_setfield(L, -3, "distributed"); /* module at -2 before the push */
}
