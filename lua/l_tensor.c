/* l_tensor.c: the tensor userdata: creation and release (one engine reference per userdata,
 * released by __gc and __close alike), field access, indexing, operators, printing, and the
 * collector accounting that keeps memory bounded without collectgarbage(). */
#include <string.h>

#include "ms_lua.h"

typedef struct tensor_box {
  ms_tensor *t; /* NULL once closed */
} tensor_box;

/* ---- memory accounting ----------------------------------------------------------------------- */

/* Collect when the engine holds more than this; set after each collection to the live set plus
 * a headroom of 16 MB or a quarter of the live set. Not twice the live set (Lua's own pause):
 * the live set is mostly long-lived data (a dataset, parameters, optimizer state), and
 * doubling it let a step's dead activations pile up to twice the process's real need, while a
 * collection costs only the walk of the small Lua heap. The quarter keeps collections per step
 * few when the live set is large. */
#define GC_MIN_HEADROOM ((int64_t)16 << 20)
static _Thread_local int64_t gc_threshold = GC_MIN_HEADROOM;
/* The live set the threshold was set from, lowered when memory is freed without this
 * accounting (collectgarbage(), __close): otherwise the threshold stays where a large, now dead
 * working set put it, and a loop's garbage piles up to it, each new block freshly mapped and
 * faulted in (ops_bench's relu after the batch-1000 cases: 2305 page faults a call, 2 GB/s on
 * the first thread count measured, 14 GB/s once a collection had reset the threshold). */
static _Thread_local int64_t gc_live;

/* Bytes the engine holds for tensors: the CPU's and every CUDA device's. */
static int64_t engine_bytes(void) { return ms_memory_stats_get().current + ms_cuda_memory_current_total(); }

static void set_threshold(int64_t live) {
  gc_live = live;
  gc_threshold = live + (live / 4 > GC_MIN_HEADROOM ? live / 4 : GC_MIN_HEADROOM);
}

void bind_account_memory(lua_State *L) {
  int64_t now = engine_bytes();
  if (now < gc_live) set_threshold(now);
  if (now <= gc_threshold) return;
  lua_gc(L, LUA_GCCOLLECT);
  set_threshold(engine_bytes());
}

/* ---- boxes ------------------------------------------------------------------------------------- */

/* An empty box (t NULL, as a closed tensor's), for ms_lua_push_tensor's protected call. */
static int new_box(lua_State *L) {
  tensor_box *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->t = NULL;
  luaL_setmetatable(L, MS_TENSOR_MT);
  return 1;
}

void ms_lua_push_tensor(lua_State *L, ms_tensor *t) {
  if (!t) {
    lua_pushnil(L);
    return;
  }
  /* The box is made under a protected call: an out-of-memory error there releases t before it
   * propagates, instead of leaking its reference. Once the box holds t, nothing can fail
   * without the box owning it. */
  lua_pushcfunction(L, new_box);
  if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
    ms_tensor_release(t);
    lua_error(L);
  }
  ((tensor_box *)lua_touserdata(L, -1))->t = t;
  bind_account_memory(L);
}

ms_tensor *ms_lua_to_tensor(lua_State *L, int idx) {
  tensor_box *box = luaL_testudata(L, idx, MS_TENSOR_MT);
  return box ? box->t : NULL;
}

ms_tensor *ms_lua_check_tensor(lua_State *L, int idx, const char *fname) {
  tensor_box *box = luaL_testudata(L, idx, MS_TENSOR_MT);
  if (!box) bind_arg_error(L, idx, fname, "tensor", "a tensor");
  if (!box->t) bind_error(L, "%s: bad argument #%d: the tensor has been closed", fname, idx);
  return box->t;
}

static int tensor_release(lua_State *L) {
  tensor_box *box = luaL_checkudata(L, 1, MS_TENSOR_MT);
  ms_tensor_release(box->t);
  box->t = NULL; /* __gc after __close finds nothing left to do */
  return 0;
}

/* ---- fields and indexing ------------------------------------------------------------------------ */

static int push_field(lua_State *L, ms_tensor *t, const char *key) {
  if (strcmp(key, "shape") == 0) bind_push_size(L, t->ndim, t->shape);
  else if (strcmp(key, "dtype") == 0) lua_pushstring(L, ms_dtype_name(t->dtype));
  else if (strcmp(key, "device") == 0) {
    char b[MS_DEVICE_STR_LEN];
    lua_pushstring(L, ms_device_str(ms_tensor_device(t), b, sizeof b));
  }
  else if (strcmp(key, "is_cuda") == 0) lua_pushboolean(L, ms_tensor_device(t).type == MS_CUDA);
  else if (strcmp(key, "is_meta") == 0) lua_pushboolean(L, ms_tensor_device(t).type == MS_META);
  else if (strcmp(key, "requires_grad") == 0) lua_pushboolean(L, t->requires_grad);
  else if (strcmp(key, "ndim") == 0) lua_pushinteger(L, t->ndim);
  else if (strcmp(key, "is_leaf") == 0) lua_pushboolean(L, ms_tensor_is_leaf(t));
  else if (strcmp(key, "grad_fn") == 0) {
    if (t->grad_fn) lua_pushstring(L, t->grad_fn->name); /* the node's name, or nil for leaves */
    else lua_pushnil(L);
  }
  else if (strcmp(key, "grad") == 0) {
    if (t->grad) ms_tensor_retain(t->grad);
    ms_lua_push_tensor(L, t->grad);
  } else return 0;
  return 1;
}

/* The fields push_field answers, for "did you mean". */
static const char *const FIELDS[] = {"shape", "dtype", "device", "is_cuda", "is_meta", "requires_grad",
                                     "ndim", "is_leaf", "grad_fn", "grad", NULL};

/* t.key where key names nothing, read by the user's code: an error rather than nil, so a typo
 * (y.gard) or a PyTorch form that has another spelling here (x[{1, 2}]) is caught where it is
 * written. */
static int unknown_key(lua_State *L) {
  if (bind_library_frame(L, 1)) return lua_pushnil(L), 1; /* the library's own probes read nil */
  if (lua_type(L, 2) != LUA_TSTRING)
    return bind_error(L, "index: a tensor is indexed by an integer (x[i], 1-based; x[i][j] for two dims) "
                      "or a field or method name, got %s (for ranges use x:narrow(dim, start, length), "
                      "for a list of indices x:index_select(dim, idx))", bind_describe(L, 2));
  const char *key = lua_tostring(L, 2);
  bind_suggestion s;
  bind_suggest_init(&s, key);
  for (int i = 0; FIELDS[i]; i++) bind_suggest_consider(&s, FIELDS[i]);
  bind_suggest_table(&s, L, lua_upvalueindex(1));
  if (s.best) return bind_error(L, "Tensor has no field '%s' (did you mean '%s'?)", key, s.best);
  return bind_error(L, "Tensor has no field '%s' (its fields are shape, dtype, device, requires_grad, grad, "
                    "grad_fn, is_leaf, ndim, is_cuda, is_meta; methods are called with ':')", key);
}

static int tensor_index(lua_State *L) {
  tensor_box *box = luaL_checkudata(L, 1, MS_TENSOR_MT);
  if (!box->t && lua_type(L, 2) == LUA_TSTRING) { /* u:sum() on a closed u: let sum say so */
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  }
  ms_tensor *t = ms_lua_check_tensor(L, 1, "index");
  if (lua_type(L, 2) == LUA_TNUMBER) {
    if (t->ndim == 0) return bind_error(L, "index: a 0-dim tensor cannot be indexed (use :item())");
    int64_t i = bind_check_index(L, 2, t->shape[0], "index", "index");
    return bind_push_result(L, ms_tensor_select(t, 0, i));
  }
  if (lua_type(L, 2) == LUA_TSTRING && push_field(L, t, lua_tostring(L, 2))) return 1;
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1; /* a method */
  return unknown_key(L);
}

static void set_requires_grad(lua_State *L, ms_tensor *t, int idx) {
  luaL_checktype(L, idx, LUA_TBOOLEAN);
  bind_set_requires_grad(L, t, lua_toboolean(L, idx), "requires_grad");
}

static void set_grad(lua_State *L, ms_tensor *t, int idx) {
  ms_tensor *g = lua_isnil(L, idx) ? NULL : ms_lua_check_tensor(L, idx, "grad");
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  if (g && (g->ndim != t->ndim || memcmp(g->shape, t->shape, sizeof(int64_t) * t->ndim) != 0))
    bind_error(L, "grad: assigned grad has shape %s but the tensor has shape %s",
               ms_shape_str(g->ndim, g->shape, b1, sizeof b1), ms_shape_str(t->ndim, t->shape, b2, sizeof b2));
  if (g) ms_tensor_retain(g);
  ms_tensor_release(t->grad);
  t->grad = g;
}

/* t[i] = v writes a number or a tensor (broadcast) into the i-th slice. */
static int tensor_newindex(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "newindex");
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "requires_grad") == 0) {
    set_requires_grad(L, t, 3);
    return 0;
  }
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "grad") == 0) {
    set_grad(L, t, 3);
    return 0;
  }
  if (lua_type(L, 2) != LUA_TNUMBER)
    return bind_error(L, "newindex: tensors accept t[i] = value and the fields requires_grad and "
                      "grad, got key %s", bind_describe(L, 2));
  if (t->ndim == 0) return bind_error(L, "newindex: a 0-dim tensor cannot be indexed (use :fill_())");
  int64_t i = bind_check_index(L, 2, t->shape[0], "newindex", "index");
  ms_tensor *src = ms_lua_to_tensor(L, 3), *v;
  if (src) {
    /* As torch's setitem, leading size-1 dims of the value beyond the slice's rank are dropped
     * (through view, so a value that requires grad keeps its graph). */
    int k = 0;
    while (src->ndim - k > t->ndim - 1 && src->shape[k] == 1) k++;
    v = ms_tensor_view(src, src->ndim - k, src->shape + k);
  } else if (lua_type(L, 3) == LUA_TNUMBER || lua_isboolean(L, 3)) {
    v = ms_tensor_new_scalar(lua_isboolean(L, 3) ? lua_toboolean(L, 3) : lua_tonumber(L, 3), t->dtype);
  } else {
    return bind_arg_error(L, 3, "newindex", "value", "a number, a boolean or a tensor");
  }
  /* the write goes through the engine so that autograd sees it (CopySlices on t) */
  ms_status st = v ? ms_tensor_select_assign_(t, 0, i, v) : MS_ERR_MEMORY;
  ms_tensor_release(v);
  bind_check_status(L, st);
  return 0;
}

static int tensor_len(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "len");
  if (t->ndim == 0) return bind_error(L, "len: a 0-dim tensor has no length");
  lua_pushinteger(L, t->shape[0]);
  return 1;
}

/* Printing is policy, so it lives in Lua: moonshard.tensor_repr.format(t). */
static int tensor_tostring(lua_State *L) {
  tensor_box *box = luaL_checkudata(L, 1, MS_TENSOR_MT);
  if (!box->t) return lua_pushliteral(L, "tensor(<closed>)"), 1;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "moonshard.tensor_repr");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "format");
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1);
  return 1;
}

/* ---- operators --------------------------------------------------------------------------------- */

static int binary_metamethod(lua_State *L, ms_binary_op op, const char *name) {
  ms_operand a = bind_check_operand(L, 1, name, "left operand");
  ms_operand b = bind_check_operand(L, 2, name, "right operand");
  return bind_push_result(L, ms_binary(op, a, b));
}

static int tensor_add(lua_State *L) { return binary_metamethod(L, MS_OP_ADD, "add"); }
static int tensor_sub(lua_State *L) { return binary_metamethod(L, MS_OP_SUB, "sub"); }
static int tensor_mul(lua_State *L) { return binary_metamethod(L, MS_OP_MUL, "mul"); }
static int tensor_div(lua_State *L) { return binary_metamethod(L, MS_OP_DIV, "div"); }
static int tensor_pow(lua_State *L) { return binary_metamethod(L, MS_OP_POW, "pow"); }
static int tensor_unm(lua_State *L) {
  return bind_push_result(L, ms_unary(MS_OP_NEG, ms_lua_check_tensor(L, 1, "neg")));
}

void bind_open_tensor(lua_State *L) {
  /* stack: module, methods */
  static const luaL_Reg meta[] = {
      {"__gc", tensor_release}, {"__close", tensor_release}, {"__newindex", tensor_newindex},
      {"__len", tensor_len},    {"__tostring", tensor_tostring}, {"__add", tensor_add},
      {"__sub", tensor_sub},    {"__mul", tensor_mul},        {"__div", tensor_div},
      {"__pow", tensor_pow},    {"__unm", tensor_unm},        {NULL, NULL}};
  luaL_newmetatable(L, MS_TENSOR_MT);
  luaL_setfuncs(L, meta, 0);
  lua_pushliteral(L, "Tensor");
  lua_setfield(L, -2, "__name");
  lua_pushvalue(L, -2); /* methods as the upvalue of __index */
  lua_pushcclosure(L, tensor_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}
