/* l_select.c: gather, scatter, scatter_add (and their in-place forms), sort, argsort, topk,
 * cumsum, cumprod, tril and triu (and their in-place forms). Dims and positions are 1-based here: index tensors go to the engine with
 * index base 1 (no shifted copy), and the positions sort and topk return are shifted to 1-based. */
#include "ms_lua.h"

/* The index argument: an int64 tensor of 1-based positions. */
static ms_tensor *check_index(lua_State *L, int idx, const char *fname) {
  ms_tensor *i = ms_lua_to_tensor(L, idx);
  if (!i || i->dtype != MS_INT64) bind_arg_error(L, idx, fname, "index", "an int64 tensor of 1-based positions");
  return i;
}

/* gather(t, dim, index) */
static int l_gather(lua_State *L) {
  bind_check_end(L, 4, "gather");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "gather");
  int dim = bind_check_dim(L, 2, t->ndim, "gather", "dim");
  return bind_push_result(L, ms_gather(t, dim, check_index(L, 3, "gather"), 1));
}

/* (t, dim, index, src) of scatter and its relatives; src a tensor, or a number where `number`. */
static ms_operand scatter_args(lua_State *L, const char *fname, bool number, ms_tensor **t, int *dim, ms_tensor **index) {
  bind_check_end(L, 5, fname);
  *t = ms_lua_check_tensor(L, 1, fname);
  *dim = bind_check_dim(L, 2, (*t)->ndim, fname, "dim");
  *index = check_index(L, 3, fname);
  if (number) return bind_check_operand(L, 4, fname, "src");
  return ms_operand_tensor(ms_lua_check_tensor(L, 4, fname));
}

static int scatter(lua_State *L, const char *fname, ms_scatter_mode mode) {
  ms_tensor *t, *index;
  int dim;
  ms_operand src = scatter_args(L, fname, mode == MS_SCATTER_COPY, &t, &dim, &index);
  return bind_push_result(L, ms_scatter(t, dim, index, src, mode, 1));
}

static int scatter_(lua_State *L, const char *fname, ms_scatter_mode mode) {
  ms_tensor *t, *index;
  int dim;
  ms_operand src = scatter_args(L, fname, mode == MS_SCATTER_COPY, &t, &dim, &index);
  bind_check_status(L, ms_scatter_(t, dim, index, src, mode, 1));
  lua_settop(L, 1);
  return 1;
}

static int l_scatter(lua_State *L) { return scatter(L, "scatter", MS_SCATTER_COPY); }
static int l_scatter_(lua_State *L) { return scatter_(L, "scatter_", MS_SCATTER_COPY); }
static int l_scatter_add(lua_State *L) { return scatter(L, "scatter_add", MS_SCATTER_ADD); }
static int l_scatter_add_(lua_State *L) { return scatter_(L, "scatter_add_", MS_SCATTER_ADD); }

/* ---- sort, argsort, topk ---------------------------------------------------------------------- */

typedef struct sort_opts {
  int dim;
  bool descending, stable, largest, sorted;
} sort_opts;

/* dim from an options table at idx, if given there. */
static void opt_dim(lua_State *L, int idx, const ms_tensor *t, const char *fname, int *dim) {
  if (lua_getfield(L, idx, "dim") != LUA_TNIL) *dim = bind_check_dim(L, lua_gettop(L), t->ndim, fname, "dim");
  lua_pop(L, 1);
}

/* sort(t, dim?, descending?) or sort(t, {dim =, descending =, stable =}), from argument first;
 * the last dim by default, as PyTorch. */
static sort_opts read_sort_args(lua_State *L, int first, const ms_tensor *t, const char *fname) {
  static const char *const known[] = {"dim", "descending", "stable", NULL};
  sort_opts o = {.dim = t->ndim > 0 ? t->ndim - 1 : 0};
  if (lua_istable(L, first)) {
    ms_lua_opts opts = bind_check_opts(L, first, fname, known);
    opt_dim(L, first, t, fname, &o.dim);
    bind_opt_bool(opts, "descending", &o.descending);
    bind_opt_bool(opts, "stable", &o.stable);
    return o;
  }
  bind_check_end(L, first + 2, fname);
  if (!lua_isnoneornil(L, first)) o.dim = bind_check_dim(L, first, t->ndim, fname, "dim");
  if (!lua_isnoneornil(L, first + 1)) {
    if (!lua_isboolean(L, first + 1)) bind_arg_error(L, first + 1, fname, "descending", "a boolean");
    o.descending = lua_toboolean(L, first + 1);
  }
  return o;
}

/* Pushes values and 1-based indices (or the indices alone), after st (their op's status). */
static int push_sorted(lua_State *L, ms_status st, ms_tensor *values, ms_tensor *indices, bool both) {
  bind_check_status(L, st);
  if (both) ms_lua_push_tensor(L, values);
  else ms_tensor_release(values);
  ms_lua_push_tensor(L, bind_one_based(L, indices));
  return both ? 2 : 1;
}

static int sort(lua_State *L, const char *fname, bool both) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname), *values, *indices;
  sort_opts o = read_sort_args(L, 2, t, fname);
  ms_status st = ms_sort(t, o.dim, o.descending, o.stable, &values, &indices); /* before its results are read */
  return push_sorted(L, st, values, indices, both);
}

static int l_sort(lua_State *L) { return sort(L, "sort", true); }
static int l_argsort(lua_State *L) { return sort(L, "argsort", false); }

/* topk(t, k, dim?, largest?, sorted?) or topk(t, k, {dim =, largest =, sorted =}). The result is
 * always sorted (PyTorch leaves the order unspecified when sorted = false). */
static int l_topk(lua_State *L) {
  static const char *const known[] = {"dim", "largest", "sorted", NULL};
  ms_tensor *t = ms_lua_check_tensor(L, 1, "topk"), *values, *indices;
  int64_t k = bind_check_integer(L, 2, "topk", "k");
  sort_opts o = {.dim = t->ndim > 0 ? t->ndim - 1 : 0, .largest = true, .sorted = true};
  if (lua_istable(L, 3)) {
    ms_lua_opts opts = bind_check_opts(L, 3, "topk", known);
    opt_dim(L, 3, t, "topk", &o.dim);
    bind_opt_bool(opts, "largest", &o.largest);
    bind_opt_bool(opts, "sorted", &o.sorted);
  } else {
    bind_check_end(L, 6, "topk");
    if (!lua_isnoneornil(L, 3)) o.dim = bind_check_dim(L, 3, t->ndim, "topk", "dim");
    for (int i = 4; i <= 5; i++) {
      if (lua_isnoneornil(L, i)) continue;
      if (!lua_isboolean(L, i)) bind_arg_error(L, i, "topk", i == 4 ? "largest" : "sorted", "a boolean");
      *(i == 4 ? &o.largest : &o.sorted) = lua_toboolean(L, i);
    }
  }
  ms_status st = ms_topk(t, k, o.dim, o.largest, &values, &indices);
  return push_sorted(L, st, values, indices, true);
}

/* ---- cumsum, cumprod -------------------------------------------------------------------------- */

/* cumsum(t, dim, {dtype =}): dtype converts the input first, as PyTorch. */
static int scan(lua_State *L, ms_scan_op op, const char *fname) {
  static const char *const known[] = {"dtype", NULL};
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  if (lua_isnoneornil(L, 2)) bind_arg_error(L, 2, fname, "dim", "a dimension (there is no default)");
  int dim = bind_check_dim(L, 2, t->ndim, fname, "dim");
  ms_dtype dt = t->dtype;
  bind_opt_dtype(bind_check_opts(L, 3, fname, known), "dtype", &dt);
  ms_tensor *in = ms_tensor_to_dtype(t, dt);
  if (!in) return bind_raise(L);
  ms_tensor *out = ms_scan(op, in, dim);
  ms_tensor_release(in);
  return bind_push_result(L, out);
}

static int l_cumsum(lua_State *L) { return scan(L, MS_SCAN_CUMSUM, "cumsum"); }
static int l_cumprod(lua_State *L) { return scan(L, MS_SCAN_CUMPROD, "cumprod"); }

/* ---- tril, triu (the rows of MS_TRIANGLE_OP_LIST; the op is the closure's upvalue) ----------- */

/* The diagonal: tril(t, diagonal?) or tril(t, {diagonal =}); 0 by default, as PyTorch. */
static int64_t triangle_diagonal(lua_State *L, const char *fname) {
  static const char *const known[] = {"diagonal", NULL};
  int64_t d = 0;
  if (lua_istable(L, 2)) {
    bind_opt_integer(bind_check_opts(L, 2, fname, known), "diagonal", &d);
    return d;
  }
  bind_check_end(L, 3, fname);
  return lua_isnoneornil(L, 2) ? 0 : bind_check_integer(L, 2, fname, "diagonal");
}

static int l_triangle(lua_State *L) {
  ms_triangle_op op = (ms_triangle_op)lua_tointeger(L, lua_upvalueindex(1));
  const char *fname = ms_triangle_op_get_info(op)->name;
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  return bind_push_result(L, ms_triangle(op, t, triangle_diagonal(L, fname)));
}

static int l_triangle_(lua_State *L) {
  ms_triangle_op op = (ms_triangle_op)lua_tointeger(L, lua_upvalueindex(1));
  char fname[16]; /* "tril_" */
  snprintf(fname, sizeof fname, "%s_", ms_triangle_op_get_info(op)->name);
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  bind_check_status(L, ms_triangle_(op, t, triangle_diagonal(L, fname)));
  lua_settop(L, 1);
  return 1;
}

/* Every row of the triangle table, as name and name_ (function and method). */
static void register_triangle_ops(lua_State *L) {
  for (int op = 0; op < MS_TRIANGLE_OP_COUNT; op++) {
    char inplace[16]; /* "triu_" */
    snprintf(inplace, sizeof inplace, "%s_", ms_triangle_op_get_info((ms_triangle_op)op)->name);
    lua_pushinteger(L, op);
    lua_pushcclosure(L, l_triangle, 1);
    bind_register_value_both(L, ms_triangle_op_get_info((ms_triangle_op)op)->name);
    lua_pushinteger(L, op);
    lua_pushcclosure(L, l_triangle_, 1);
    bind_register_value_both(L, inplace);
  }
}

void bind_open_select(lua_State *L) {
  static const struct { const char *name; lua_CFunction fn; } both[] = {
      {"gather", l_gather},   {"scatter", l_scatter}, {"scatter_", l_scatter_}, {"scatter_add", l_scatter_add},
      {"scatter_add_", l_scatter_add_}, {"sort", l_sort}, {"argsort", l_argsort}, {"topk", l_topk},
      {"cumsum", l_cumsum},   {"cumprod", l_cumprod}};
  for (size_t i = 0; i < sizeof both / sizeof both[0]; i++) bind_register_both(L, both[i].name, both[i].fn);
  register_triangle_ops(L);
}
