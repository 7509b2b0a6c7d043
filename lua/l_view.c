/* l_view.c: shape ops as functions and methods: view, reshape, narrow, select, transpose,
 * permute, t, squeeze, unsqueeze, expand, flatten, contiguous, clone, chunk, split, cat, stack.
 * Dims and starts are 1-based (negative from the end) here and 0-based below. */
#include <stdlib.h>

#include "ms_lua.h"

static int shape_op(lua_State *L, const char *fname, bool copy_allowed) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  int64_t shape[MS_MAX_DIMS];
  int next;
  int nd = bind_check_sizes(L, 2, shape, fname, &next);
  if (!lua_isnone(L, next)) return bind_arg_error(L, next, fname, "size", "an integer");
  return bind_push_result(L, copy_allowed ? ms_tensor_reshape(t, nd, shape) : ms_tensor_view(t, nd, shape));
}

static int l_view(lua_State *L) { return shape_op(L, "view", false); }
static int l_reshape(lua_State *L) { return shape_op(L, "reshape", true); }

static int as_op(lua_State *L, const char *fname, int which) {
  bind_check_end(L, 3, fname);
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname), *other = ms_lua_check_tensor(L, 2, fname);
  switch (which) {
  case 0: return bind_push_result(L, ms_tensor_view(t, other->ndim, other->shape));
  case 1: return bind_push_result(L, ms_tensor_reshape(t, other->ndim, other->shape));
  default: return bind_push_result(L, ms_tensor_expand(t, other->ndim, other->shape));
  }
}

static int l_view_as(lua_State *L) { return as_op(L, "view_as", 0); }
static int l_reshape_as(lua_State *L) { return as_op(L, "reshape_as", 1); }
static int l_expand_as(lua_State *L) { return as_op(L, "expand_as", 2); }

static int l_narrow(lua_State *L) {
  bind_check_end(L, 5, "narrow");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "narrow");
  if (t->ndim == 0) return bind_error(L, "narrow: a 0-dim tensor cannot be narrowed");
  int dim = bind_check_dim(L, 2, t->ndim, "narrow", "dim");
  int64_t size = t->shape[dim];
  int64_t start = bind_check_integer(L, 3, "narrow", "start");
  int64_t length = bind_check_integer(L, 4, "narrow", "length");
  /* start may equal size + 1 for an empty slice at the end */
  if (start == 0 || start < -size || start > size + 1)
    return bind_error(L, "narrow: bad argument #3 (start): expected a position in 1..%I or -%I..-1 "
                      "of dim %d (size %I), got %I", (LUAI_UACINT)size + 1, (LUAI_UACINT)size, dim + 1,
                      (LUAI_UACINT)size, (LUAI_UACINT)start);
  int64_t s0 = start > 0 ? start - 1 : start + size;
  if (length < 0 || length > size - s0)
    return bind_error(L, "narrow: bad argument #4 (length): start %I + length %I exceeds dim %d of "
                      "size %I", (LUAI_UACINT)start, (LUAI_UACINT)length, dim + 1, (LUAI_UACINT)size);
  return bind_push_result(L, ms_tensor_narrow(t, dim, s0, length));
}

static int l_select(lua_State *L) {
  bind_check_end(L, 4, "select");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "select");
  if (t->ndim == 0) return bind_error(L, "select: a 0-dim tensor cannot be indexed");
  int dim = bind_check_dim(L, 2, t->ndim, "select", "dim");
  int64_t i = bind_check_index(L, 3, t->shape[dim], "select", "index");
  return bind_push_result(L, ms_tensor_select(t, dim, i));
}

static int l_transpose(lua_State *L) {
  bind_check_end(L, 4, "transpose");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "transpose");
  int d0 = bind_check_dim(L, 2, t->ndim, "transpose", "dim0");
  int d1 = bind_check_dim(L, 3, t->ndim, "transpose", "dim1");
  return bind_push_result(L, ms_tensor_transpose(t, d0, d1));
}

/* t(): the transpose of a matrix; vectors and scalars come back as they are. */
static int l_t(lua_State *L) {
  bind_check_end(L, 2, "t");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "t");
  if (t->ndim > 2) return bind_error(L, "t: expects a tensor with <= 2 dimensions, got %d (use transpose or permute)", t->ndim);
  if (t->ndim < 2) return lua_settop(L, 1), 1;
  return bind_push_result(L, ms_tensor_transpose(t, 0, 1));
}

/* permute(3, 1, 2) or permute({3, 1, 2}). */
static int l_permute(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "permute");
  int dims[MS_MAX_DIMS], n;
  bool table = lua_istable(L, 2);
  if (table) bind_check_end(L, 3, "permute"); /* the varargs form counts its arguments below */
  n = table ? (int)lua_rawlen(L, 2) : lua_gettop(L) - 1;
  if (n != t->ndim)
    return bind_error(L, "permute: expected %d dims (one per dimension of the tensor), got %d", t->ndim, n);
  bool seen[MS_MAX_DIMS] = {false};
  for (int i = 0; i < n; i++) {
    if (table) lua_rawgeti(L, 2, i + 1);
    else lua_pushvalue(L, i + 2);
    /* in the varargs form, errors name the argument's own position */
    dims[i] = bind_check_dim(L, table ? lua_gettop(L) : i + 2, t->ndim, "permute", "dims");
    if (seen[dims[i]]) /* here, so the message counts dims from 1 */
      return bind_error(L, "permute: dim %d appears more than once in dims", dims[i] + 1);
    seen[dims[i]] = true;
    lua_pop(L, 1);
  }
  return bind_push_result(L, ms_tensor_permute(t, dims));
}

static int l_squeeze(lua_State *L) {
  bind_check_end(L, 3, "squeeze");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "squeeze");
  if (lua_isnoneornil(L, 2)) return bind_push_result(L, ms_tensor_squeeze_all(t));
  return bind_push_result(L, ms_tensor_squeeze(t, bind_check_dim(L, 2, t->ndim, "squeeze", "dim")));
}

static int l_unsqueeze(lua_State *L) {
  bind_check_end(L, 3, "unsqueeze");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "unsqueeze");
  return bind_push_result(L, ms_tensor_unsqueeze(t, bind_check_dim(L, 2, t->ndim + 1, "unsqueeze", "dim")));
}

static int l_expand(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "expand");
  int64_t shape[MS_MAX_DIMS];
  int next;
  int nd = bind_check_sizes(L, 2, shape, "expand", &next);
  if (!lua_isnone(L, next)) return bind_arg_error(L, next, "expand", "size", "an integer");
  return bind_push_result(L, ms_tensor_expand(t, nd, shape));
}

/* flatten(t, start_dim = 1, end_dim = -1) */
static int l_flatten(lua_State *L) {
  bind_check_end(L, 4, "flatten");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "flatten");
  int start = lua_isnoneornil(L, 2) ? 0 : bind_check_dim(L, 2, t->ndim, "flatten", "start_dim");
  int end = lua_isnoneornil(L, 3) ? (t->ndim ? t->ndim - 1 : 0) : bind_check_dim(L, 3, t->ndim, "flatten", "end_dim");
  if (start > end) /* here, so the message counts dims from 1 */
    return bind_error(L, "flatten: start_dim (%d) cannot come after end_dim (%d)", start + 1, end + 1);
  return bind_push_result(L, ms_tensor_flatten(t, start, end));
}

static int l_contiguous(lua_State *L) {
  bind_check_end(L, 2, "contiguous");
  return bind_push_result(L, ms_tensor_contiguous(ms_lua_check_tensor(L, 1, "contiguous")));
}

static int l_clone(lua_State *L) {
  bind_check_end(L, 2, "clone");
  return bind_push_result(L, ms_tensor_clone(ms_lua_check_tensor(L, 1, "clone")));
}

/* index_select(t, dim, index): index holds 1-based positions (negative count from the end is
 * not accepted here: positions are data). */
static int l_index_select(lua_State *L) {
  bind_check_end(L, 4, "index_select");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "index_select");
  if (t->ndim == 0) return bind_error(L, "index_select: a 0-dim tensor cannot be indexed");
  int dim = bind_check_dim(L, 2, t->ndim, "index_select", "dim");
  ms_tensor *idx = ms_lua_check_tensor(L, 3, "index_select");
  if (idx->dtype != MS_INT64 && idx->dtype != MS_INT32)
    return bind_arg_error(L, 3, "index_select", "index", "an int64 or int32 tensor of 1-based positions");
  ms_tensor *zero_based = ms_binary(MS_OP_SUB, ms_operand_tensor(idx), ms_operand_number(1, MS_INT64));
  if (!zero_based) return bind_raise(L);
  ms_tensor *out = ms_tensor_index_select(t, dim, zero_based);
  ms_tensor_release(zero_based);
  if (!out) /* the engine counts from 0: say it in the user's terms */
    return bind_error(L, "index_select: bad argument #3 (index): expected positions in 1..%I of "
                      "dim %d (%s)", (LUAI_UACINT)t->shape[dim], dim + 1, ms_error_last());
  return bind_push_result(L, out);
}

/* Pushes the n tensors of parts as a Lua sequence, taking over their references. */
static int push_parts(lua_State *L, ms_tensor **parts, int n) {
  if (!parts) return bind_raise(L);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    ms_lua_push_tensor(L, parts[i]);
    lua_rawseti(L, -2, i + 1);
  }
  free(parts);
  return 1;
}

static int optional_dim(lua_State *L, int idx, const ms_tensor *t, const char *fname) {
  return lua_isnoneornil(L, idx) ? 0 : bind_check_dim(L, idx, t->ndim, fname, "dim");
}

static int l_chunk(lua_State *L) {
  bind_check_end(L, 4, "chunk");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "chunk");
  int64_t chunks = bind_check_integer(L, 2, "chunk", "chunks");
  if (chunks < 1 || chunks > INT32_MAX) return bind_arg_error(L, 2, "chunk", "chunks", "a positive integer");
  int dim = optional_dim(L, 3, t, "chunk"), n = 0;
  ms_tensor **parts = ms_tensor_chunk(t, chunks, dim, &n); /* sets n: call before push_parts */
  return push_parts(L, parts, n);
}

/* split(size, dim) into equal pieces, or split({2, 3, 5}, dim) into the sizes listed. */
static int l_split(lua_State *L) {
  bind_check_end(L, 4, "split");
  ms_tensor *t = ms_lua_check_tensor(L, 1, "split");
  int dim = optional_dim(L, 3, t, "split"), n = 0;
  if (!lua_istable(L, 2)) {
    ms_tensor **parts = ms_tensor_split(t, bind_check_integer(L, 2, "split", "split_size"), dim, &n);
    return push_parts(L, parts, n);
  }
  lua_Unsigned len = lua_rawlen(L, 2);
  if (len < 1 || len > INT32_MAX)
    return bind_error(L, "split: bad argument #2 (split_sizes): expected 1 to %d sizes, got %I", INT32_MAX,
                      (LUAI_UACINT)len);
  int count = (int)len;
  int64_t total = 0, *sizes = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)count, 0); /* freed by the GC */
  for (int i = 1; i <= count; i++) {
    lua_rawgeti(L, 2, i);
    int isnum = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isnum);
    if (!isnum || v < 0 || lua_type(L, -1) != LUA_TNUMBER)
      return bind_error(L, "split: bad argument #2 (split_sizes): expected a sequence of non-negative "
                        "integers, got %s at position %d", bind_describe(L, -1), i);
    if (!ms_add_i64(total, v, &total))
      return bind_error(L, "split: bad argument #2 (split_sizes): the sizes' sum overflows at position %d", i);
    sizes[i - 1] = v;
    lua_pop(L, 1);
  }
  if (t->ndim == 0 || total != t->shape[dim])
    return bind_error(L, "split: the sizes sum to %I but dim %d has size %I", (LUAI_UACINT)total, dim + 1,
                      (LUAI_UACINT)(t->ndim ? t->shape[dim] : 0));
  return push_parts(L, ms_tensor_split_with_sizes(t, sizes, count, dim), count);
}

/* The tensors of the sequence at idx into a malloc'd array (borrowed: they stay in the table). */
static ms_tensor **check_tensor_list(lua_State *L, int idx, const char *fname, int *n) {
  if (!lua_istable(L, idx)) bind_arg_error(L, idx, fname, "tensors", "a sequence of tensors");
  *n = (int)lua_rawlen(L, idx);
  if (*n == 0) bind_error(L, "%s: expected a non-empty sequence of tensors", fname);
  ms_tensor **ts = lua_newuserdatauv(L, sizeof(ms_tensor *) * (size_t)*n, 0); /* freed by the GC */
  for (int i = 0; i < *n; i++) {
    lua_rawgeti(L, idx, i + 1);
    ts[i] = ms_lua_to_tensor(L, -1);
    if (!ts[i]) bind_error(L, "%s: element %d of the sequence is %s, expected a tensor", fname, i + 1, bind_describe(L, -1));
    lua_pop(L, 1);
  }
  return ts;
}

static int join_op(lua_State *L, const char *fname, bool stack) {
  int n;
  bind_check_end(L, 3, fname); /* before the settop below drops what follows */
  lua_settop(L, 2); /* check_tensor_list pushes its array: keep it off the dim argument */
  ms_tensor **ts = check_tensor_list(L, 1, fname, &n);
  int dim = lua_isnoneornil(L, 2) ? 0 : bind_check_dim(L, 2, ts[0]->ndim + (stack ? 1 : 0), fname, "dim");
  return bind_push_result(L, stack ? ms_tensor_stack(ts, n, dim) : ms_tensor_cat(ts, n, dim));
}

static int l_cat(lua_State *L) { return join_op(L, "cat", false); }
static int l_stack(lua_State *L) { return join_op(L, "stack", true); }

void bind_open_view(lua_State *L) {
  static const struct { const char *name; lua_CFunction fn; } both[] = {
      {"view", l_view},         {"reshape", l_reshape},       {"view_as", l_view_as},
      {"reshape_as", l_reshape_as}, {"expand_as", l_expand_as}, {"narrow", l_narrow},
      {"select", l_select},     {"transpose", l_transpose},   {"t", l_t},
      {"permute", l_permute},   {"squeeze", l_squeeze},       {"unsqueeze", l_unsqueeze},
      {"expand", l_expand},     {"flatten", l_flatten},       {"contiguous", l_contiguous},
      {"clone", l_clone},       {"index_select", l_index_select},       {"chunk", l_chunk},           {"split", l_split}};
  for (size_t i = 0; i < sizeof both / sizeof both[0]; i++) bind_register_both(L, both[i].name, both[i].fn);
  lua_pushcfunction(L, l_cat);
  lua_setfield(L, -3, "cat");
  lua_pushcfunction(L, l_stack);
  lua_setfield(L, -3, "stack");
}
