/* l_create.c: tensor factories: ms.tensor from nested tables, zeros/ones/full/empty, arange,
 * linspace, eye, the random factories and the *_like forms. Sizes come as integers or one
 * table; an options table {dtype=, device=, requires_grad=} comes last. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "moonshard/cuda.h"
#include "ms_lua.h"

/* ---- ms.tensor(nested_table) ------------------------------------------------------------------- */

typedef struct nested_info {
  int ndim;
  int64_t shape[MS_MAX_DIMS];
  bool has_float, has_int, has_bool;
} nested_info;

/* Finds the shape by following first elements, then checks every leaf while filling. */
static void nested_shape(lua_State *L, int idx, nested_info *info) {
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1) && !ms_lua_to_tensor(L, -1)) {
    if (info->ndim == MS_MAX_DIMS) bind_error(L, "tensor: nested tables deeper than %d levels", MS_MAX_DIMS);
    info->shape[info->ndim++] = (int64_t)lua_rawlen(L, -1);
    if (lua_rawlen(L, -1) == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
}

static void note_leaf_kind(lua_State *L, int idx, nested_info *info, const char *path) {
  if (lua_type(L, idx) == LUA_TNUMBER) {
    if (lua_isinteger(L, idx)) info->has_int = true;
    else info->has_float = true;
  } else if (lua_isboolean(L, idx)) {
    info->has_bool = true;
  } else {
    bind_error(L, "tensor: expected a number or a boolean at %s, got %s", path, bind_describe(L, idx));
  }
}

/* Walks the nested table at idx (depth d), checking lengths; with t set, stores the leaves. */
static void nested_walk(lua_State *L, int idx, int d, nested_info *info, ms_tensor *t, int64_t *pos,
                        char *path, size_t pathlen) {
  if (d == info->ndim) {
    if (!t) note_leaf_kind(L, idx, info, path);
    else if (t->dtype == MS_INT64 && lua_isinteger(L, idx)) /* exact beyond 2^53; t is contiguous */
      ((int64_t *)ms_tensor_data(t))[(*pos)++] = lua_tointeger(L, idx);
    else ms_tensor_set_flat(t, (*pos)++, lua_isboolean(L, idx) ? lua_toboolean(L, idx) : lua_tonumber(L, idx));
    return;
  }
  if (!lua_istable(L, idx) || (int64_t)lua_rawlen(L, idx) != info->shape[d])
    bind_error(L, "tensor: expected a sequence of length %I at %s (the shape so far is set by "
               "first elements), got %s", (LUAI_UACINT)info->shape[d], path,
               lua_istable(L, idx) ? lua_pushfstring(L, "one of length %I", (LUAI_UACINT)lua_rawlen(L, idx))
                                   : bind_describe(L, idx));
  for (int64_t i = 1; i <= info->shape[d]; i++) {
    lua_rawgeti(L, idx, i);
    size_t n = strlen(path);
    snprintf(path + n, pathlen - n, "[%lld]", (long long)i);
    nested_walk(L, lua_gettop(L), d + 1, info, t, pos, path, pathlen);
    path[n] = '\0';
    lua_pop(L, 1);
  }
}

/* PyTorch's inference: any float -> float32; else any integer -> int64; else bool. */
static ms_dtype inferred_dtype(const nested_info *info) {
  if (info->has_float) return MS_FLOAT32;
  if (info->has_int) return MS_INT64;
  if (info->has_bool) return MS_BOOL;
  return MS_FLOAT32; /* an empty table */
}

static int l_tensor(lua_State *L) {
  ms_tensor *src = ms_lua_to_tensor(L, 1);
  if (src) { /* a copy, as torch.tensor(t) makes */
    ms_lua_factory_opts o = bind_factory_options(L, 2, "tensor", src->dtype);
    if (!o.has_device) o.device = ms_tensor_device(src);
    ms_tensor *t = ms_tensor_new_empty_on(o.device, src->ndim, src->shape, o.dtype);
    bool prev = ms_grad_set_enabled(false); /* a new leaf, cut from src's graph as in torch */
    ms_status st = t ? ms_tensor_copy_(t, src) : MS_ERR_MEMORY;
    ms_grad_set_enabled(prev);
    if (st != MS_OK) return ms_tensor_release(t), bind_raise(L);
    t = bind_apply_factory_options(L, t, o, "tensor");
    return bind_push_result(L, t);
  }
  if (!lua_istable(L, 1) && lua_type(L, 1) != LUA_TNUMBER && !lua_isboolean(L, 1))
    return bind_arg_error(L, 1, "tensor", "data", "a number, a boolean, a (nested) table or a tensor");
  nested_info info = {0};
  char path[512] = "data";
  nested_shape(L, 1, &info);
  int64_t pos = 0;
  nested_walk(L, 1, 0, &info, NULL, &pos, path, sizeof path);
  ms_lua_factory_opts o = bind_factory_options(L, 2, "tensor", inferred_dtype(&info));
  ms_tensor *t = ms_tensor_new_empty(info.ndim, info.shape, o.dtype);
  if (!t) return bind_raise(L);
  ms_lua_push_tensor(L, t); /* owned by Lua before the walk, which may raise */
  pos = 0;
  nested_walk(L, 1, 0, &info, t, &pos, path, sizeof path);
  ms_tensor_retain(t); /* the walk wrote on the CPU; now the device and requires_grad */
  return bind_push_result(L, bind_apply_factory_options(L, t, o, "tensor"));
}

/* frombuffer(string, {dtype="uint8", offset=0, count=-1}): a tensor holding a copy of the
 * bytes (Lua strings are immutable, so no sharing), read as little-endian elements. */
static int l_frombuffer(lua_State *L) {
  static const char *const known[] = {"dtype", "offset", "count", NULL};
  size_t len;
  const char *bytes = luaL_checklstring(L, 1, &len);
  ms_lua_opts o = bind_check_opts(L, 2, "frombuffer", known);
  ms_dtype dt = MS_UINT8;
  int64_t offset = 0, count = -1;
  bind_opt_dtype(o, "dtype", &dt);
  bind_opt_integer(o, "offset", &offset);
  bind_opt_integer(o, "count", &count);
  size_t es = ms_dtype_size(dt);
  if (offset < 0 || (size_t)offset > len)
    return bind_error(L, "frombuffer: offset %I is outside the buffer of %I bytes", (LUAI_UACINT)offset,
                      (LUAI_UACINT)len);
  int64_t avail = (int64_t)((len - (size_t)offset) / es);
  if (count < 0) {
    if ((len - (size_t)offset) % es)
      return bind_error(L, "frombuffer: %I bytes after offset %I are not a whole number of %s elements",
                        (LUAI_UACINT)(len - (size_t)offset), (LUAI_UACINT)offset, ms_dtype_name(dt));
    count = avail;
  } else if (count > avail) {
    return bind_error(L, "frombuffer: count %I exceeds the %I %s elements the buffer holds after offset %I",
                      (LUAI_UACINT)count, (LUAI_UACINT)avail, ms_dtype_name(dt), (LUAI_UACINT)offset);
  }
  ms_tensor *t = ms_tensor_new_empty(1, &count, dt);
  if (!t) return bind_raise(L);
  memcpy(ms_tensor_data(t), bytes + offset, (size_t)count * es);
  return bind_push_result(L, t);
}

/* from_file(path, {dtype="uint8", offset=0, size=-1, shared=false}): a 1-D tensor of size
 * elements (torch.from_file's name; -1: every whole element) over the file's bytes from offset,
 * mapped rather than read; shared writes go to the file, otherwise they stay in this process. */
static int l_from_file(lua_State *L) {
  static const char *const known[] = {"dtype", "offset", "size", "shared", NULL};
  const char *path = luaL_checkstring(L, 1);
  ms_lua_opts o = bind_check_opts(L, 2, "from_file", known);
  ms_dtype dt = MS_UINT8;
  int64_t offset = 0, size = -1;
  bool shared = false;
  bind_opt_dtype(o, "dtype", &dt);
  bind_opt_integer(o, "offset", &offset);
  bind_opt_integer(o, "size", &size);
  bind_opt_bool(o, "shared", &shared);
  return bind_push_result(L, ms_tensor_from_file(path, dt, offset, size, shared));
}

/* ---- constant fills --------------------------------------------------------------------------- */

/* Raises the engine's error under the factory's name: zeros and ones are made by the engine's
 * full, whose name would mislead ("full: out of memory ..." -> "ones: out of memory ..."). */
static int raise_as(lua_State *L, const char *fname) {
  const char *msg = ms_error_last(), *colon = strstr(msg, ": ");
  if (colon && strcspn(msg, " :") == (size_t)(colon - msg)) msg = colon + 2; /* "word: " */
  return bind_error(L, "%s: %s", fname, msg);
}

/* Sizes may hold -1 for view; a new tensor's may not. Checked here to name the factory. */
static void check_new_sizes(lua_State *L, int nd, const int64_t *shape, const char *fname) {
  char b[MS_SHAPE_STR_LEN];
  int64_t n;
  for (int d = 0; d < nd; d++)
    if (shape[d] < 0)
      bind_error(L, "%s: bad argument (size): expected non-negative sizes, got %I at dim %d of %s",
                 fname, (LUAI_UACINT)shape[d], d + 1, ms_shape_str(nd, shape, b, sizeof b));
  if (!ms_numel_i64(nd, shape, &n))
    bind_error(L, "%s: shape %s is too large", fname, ms_shape_str(nd, shape, b, sizeof b));
}

/* A new contiguous tensor where the factory first writes it. A constant fill is made on the asked
 * device itself: on a GPU one fill kernel, queued like any op, instead of a fill on the CPU and a
 * copy from the host (which a CUDA graph's capture refuses). A random draw is made on the CPU and
 * moved afterwards, so a seed gives the CPU's numbers on any device; on meta it is recorded there
 * (moonshard/meta.h) rather than made on the CPU and dropped by the move. */
static ms_tensor *new_for_factory(ms_lua_factory_opts o, int nd, const int64_t *shape, bool constant) {
  ms_device d = constant || o.device.type == MS_META ? o.device : (ms_device){MS_CPU, 0};
  return ms_tensor_new_empty_on(d, nd, shape, o.dtype);
}

/* A CUDA device the factory would write on must be usable: the error names the option, as
 * moving a CPU-made tensor there would (bind_apply_factory_options). */
static void check_device_option(lua_State *L, ms_device d, const char *fname) {
  if (d.type != MS_CUDA || ms_cuda_check_device(fname, d.index) == MS_OK) return;
  const char *msg = ms_error_last(), *colon = strstr(msg, ": ");
  size_t n = strlen(fname);
  if (colon && (size_t)(colon - msg) == n && strncmp(msg, fname, n) == 0) msg = colon + 2;
  char dev[32];
  bind_error(L, "%s: option 'device' is %s, which cannot be used: %s", fname, ms_device_str(d, dev, sizeof dev), msg);
}

static int fill_factory(lua_State *L, const char *fname, double value, bool uninitialised) {
  int64_t shape[MS_MAX_DIMS];
  int next;
  int nd = bind_check_sizes(L, 1, shape, fname, &next);
  check_new_sizes(L, nd, shape, fname);
  ms_lua_factory_opts o = bind_factory_options(L, next, fname, MS_FLOAT32);
  check_device_option(L, o.device, fname);
  ms_tensor *t = new_for_factory(o, nd, shape, true);
  if (t && !uninitialised && ms_tensor_fill_(t, value) != MS_OK) ms_tensor_release(t), t = NULL;
  if (!t) return raise_as(L, fname);
  t = bind_apply_factory_options(L, t, o, fname);
  return bind_push_result(L, t);
}

static int l_zeros(lua_State *L) { return fill_factory(L, "zeros", 0, false); }
static int l_ones(lua_State *L) { return fill_factory(L, "ones", 1, false); }
static int l_empty(lua_State *L) { return fill_factory(L, "empty", 0, true); }

/* The dtype a plain fill value implies (torch.full infers it the same way). */
static ms_dtype value_dtype(lua_State *L, int idx) {
  if (lua_isboolean(L, idx)) return MS_BOOL;
  return lua_isinteger(L, idx) ? MS_INT64 : MS_FLOAT32;
}

static double check_fill_value(lua_State *L, int idx, const char *fname) {
  if (lua_isboolean(L, idx)) return lua_toboolean(L, idx);
  if (lua_type(L, idx) != LUA_TNUMBER) bind_arg_error(L, idx, fname, "fill_value", "a number or a boolean");
  return lua_tonumber(L, idx);
}

/* full({2, 3}, 7) or full(2, 3, 7): the last number is the fill value. */
static int l_full(lua_State *L) {
  int64_t shape[MS_MAX_DIMS];
  int next, nd, vidx;
  if (lua_istable(L, 1)) {
    nd = bind_check_sizes(L, 1, shape, "full", &next);
    vidx = next;
  } else {
    int top = 1;
    while (lua_type(L, top + 1) == LUA_TNUMBER || lua_isboolean(L, top + 1)) top++;
    vidx = top; /* sizes are 1 .. top-1 */
    if (vidx - 1 > MS_MAX_DIMS)
      return bind_error(L, "full: at most %d dimensions, got %d", MS_MAX_DIMS, vidx - 1);
    for (nd = 0; nd < vidx - 1; nd++) shape[nd] = bind_check_integer(L, nd + 1, "full", "size");
    if (vidx == 1) /* full(7) has no size: a 0-dim tensor is full({}, 7) */
      return bind_arg_error(L, 1, "full", "size", "sizes and a fill value");
  }
  check_new_sizes(L, nd, shape, "full");
  double v = check_fill_value(L, vidx, "full");
  ms_lua_factory_opts o = bind_factory_options(L, vidx + 1, "full", value_dtype(L, vidx));
  check_device_option(L, o.device, "full");
  ms_tensor *t = ms_tensor_new_full_on(o.device, nd, shape, o.dtype, v);
  if (!t) return raise_as(L, "full");
  t = bind_apply_factory_options(L, t, o, "full");
  return bind_push_result(L, t);
}

/* ---- ranges ----------------------------------------------------------------------------------- */

static int l_arange(lua_State *L) {
  int nnum = 0;
  while (nnum < 3 && lua_type(L, nnum + 1) == LUA_TNUMBER) nnum++;
  if (nnum == 0) return bind_arg_error(L, 1, "arange", "end", "a number");
  bool all_int = true;
  for (int i = 1; i <= nnum; i++) all_int = all_int && lua_isinteger(L, i);
  double start = nnum >= 2 ? lua_tonumber(L, 1) : 0, end = nnum >= 2 ? lua_tonumber(L, 2) : lua_tonumber(L, 1);
  double step = nnum == 3 ? lua_tonumber(L, 3) : 1;
  ms_lua_factory_opts o = bind_factory_options(L, nnum + 1, "arange", all_int ? MS_INT64 : MS_FLOAT32);
  ms_tensor *t = ms_tensor_new_arange(start, end, step, o.dtype);
  if (!t) return bind_raise(L);
  t = bind_apply_factory_options(L, t, o, "arange");
  return bind_push_result(L, t);
}

static int l_linspace(lua_State *L) {
  double start = luaL_checknumber(L, 1), end = luaL_checknumber(L, 2);
  int64_t steps = bind_check_integer(L, 3, "linspace", "steps");
  ms_lua_factory_opts o = bind_factory_options(L, 4, "linspace", MS_FLOAT32);
  ms_tensor *t = ms_tensor_new_linspace(start, end, steps, o.dtype);
  if (!t) return bind_raise(L);
  t = bind_apply_factory_options(L, t, o, "linspace");
  return bind_push_result(L, t);
}

static int l_eye(lua_State *L) {
  int64_t n = bind_check_integer(L, 1, "eye", "n"), m = -1;
  int optidx = 2;
  if (lua_type(L, 2) == LUA_TNUMBER) m = bind_check_integer(L, 2, "eye", "m"), optidx = 3;
  if (n < 0 || (optidx == 3 && m < 0)) return bind_error(L, "eye: sizes must be non-negative, got n=%I m=%I", (LUAI_UACINT)n,
                                                        (LUAI_UACINT)m);
  check_new_sizes(L, 2, (int64_t[]){n, optidx == 3 ? m : n}, "eye");
  ms_lua_factory_opts o = bind_factory_options(L, optidx, "eye", MS_FLOAT32);
  ms_tensor *t = ms_tensor_new_eye(n, m, o.dtype);
  if (!t) return bind_raise(L);
  t = bind_apply_factory_options(L, t, o, "eye");
  return bind_push_result(L, t);
}

/* ---- random ------------------------------------------------------------------------------------ */

typedef enum { RANDOM_UNIFORM, RANDOM_NORMAL } random_kind;

/* rand and randn draw floating values only; say so under the caller's name. */
static void check_random_dtype(lua_State *L, ms_dtype dt, const char *fname) {
  if (!ms_dtype_is_floating(dt))
    bind_error(L, "%s: expected a floating point dtype (float32, float64, bfloat16, float16), got %s",
               fname, ms_dtype_name(dt));
}

static ms_tensor *random_fill(lua_State *L, ms_tensor *t, random_kind kind) {
  ms_status st = kind == RANDOM_UNIFORM ? ms_tensor_uniform_(t, 0, 1) : ms_tensor_normal_(t, 0, 1);
  if (st != MS_OK) ms_tensor_release(t), bind_raise(L);
  return t;
}

static int random_factory(lua_State *L, const char *fname, random_kind kind) {
  int64_t shape[MS_MAX_DIMS];
  int next;
  int nd = bind_check_sizes(L, 1, shape, fname, &next);
  check_new_sizes(L, nd, shape, fname);
  ms_lua_factory_opts o = bind_factory_options(L, next, fname, MS_FLOAT32);
  check_random_dtype(L, o.dtype, fname);
  ms_tensor *t = new_for_factory(o, nd, shape, false);
  if (!t) return raise_as(L, fname);
  random_fill(L, t, kind);
  t = bind_apply_factory_options(L, t, o, fname);
  return bind_push_result(L, t);
}

static int l_rand(lua_State *L) { return random_factory(L, "rand", RANDOM_UNIFORM); }
static int l_randn(lua_State *L) { return random_factory(L, "randn", RANDOM_NORMAL); }

/* randint(low, high, size) or randint(high, size), as torch.randint. */
static int l_randint(lua_State *L) {
  int64_t low = 0, high, shape[MS_MAX_DIMS];
  int sizeidx = 3, next;
  if (lua_istable(L, 2)) {
    high = bind_check_integer(L, 1, "randint", "high");
    sizeidx = 2;
  } else {
    low = bind_check_integer(L, 1, "randint", "low");
    high = bind_check_integer(L, 2, "randint", "high");
  }
  if (!lua_istable(L, sizeidx)) return bind_arg_error(L, sizeidx, "randint", "size", "a table of sizes");
  int nd = bind_check_sizes(L, sizeidx, shape, "randint", &next);
  check_new_sizes(L, nd, shape, "randint");
  ms_lua_factory_opts o = bind_factory_options(L, next, "randint", MS_INT64);
  ms_tensor *t = ms_tensor_new_empty(nd, shape, o.dtype);
  if (!t) return bind_raise(L);
  if (ms_tensor_randint_(t, low, high) != MS_OK) return ms_tensor_release(t), bind_raise(L);
  t = bind_apply_factory_options(L, t, o, "randint");
  return bind_push_result(L, t);
}

/* Takes the `seed` key out of the options table at idx (replacing it with a copy without the
 * key, so the factory options still reject unknown keys). Returns whether a seed was given. */
static bool take_seed_option(lua_State *L, int idx, uint64_t *seed) {
  if (!lua_istable(L, idx)) return false;
  lua_getfield(L, idx, "seed");
  if (lua_isnil(L, -1)) return lua_pop(L, 1), false;
  if (!lua_isinteger(L, -1))
    return bind_error(L, "randperm: option 'seed': expected an integer, got %s",
                      bind_describe(L, -1)), false;
  *seed = (uint64_t)lua_tointeger(L, -1); /* as manual_seed: a negative seed wraps to 64 bits */
  lua_pop(L, 1);
  lua_newtable(L);
  for (lua_pushnil(L); lua_next(L, idx);) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, -4);
  }
  lua_pushnil(L);
  lua_setfield(L, -2, "seed");
  lua_replace(L, idx);
  return true;
}

/* randperm(n, {dtype =, requires_grad =, seed =}): a permutation of 1..n, positions as Lua
 * counts them (torch.randperm's permutation of 0..n-1, plus one, as Torch7's randperm); with a
 * seed it comes from a generator of its own and the global one is untouched (so ranks agree
 * whatever they drew). */
static int l_randperm(lua_State *L) {
  int64_t n = bind_check_integer(L, 1, "randperm", "n");
  static const char *const known[] = {"dtype", "device", "requires_grad", "seed", NULL};
  bind_check_opts(L, 2, "randperm", known); /* names seed among the known keys on a typo */
  uint64_t seed = 0;
  bool seeded = take_seed_option(L, 2, &seed);
  ms_lua_factory_opts o = bind_factory_options(L, 2, "randperm", MS_INT64);
  ms_tensor *t = ms_tensor_new_randperm_from(n, 1, o.dtype, seeded ? &seed : NULL);
  if (!t) return bind_raise(L);
  t = bind_apply_factory_options(L, t, o, "randperm");
  return bind_push_result(L, t);
}

/* bernoulli(p_tensor) draws each element with its probability; bernoulli(t, p) with one p. */
static int l_bernoulli(lua_State *L) {
  bind_check_end(L, 3, "bernoulli");
  ms_tensor *p = ms_lua_check_tensor(L, 1, "bernoulli");
  if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TNUMBER)
    return bind_arg_error(L, 2, "bernoulli", "p", "a probability (a number in [0, 1])");
  if (lua_type(L, 2) != LUA_TNUMBER) return bind_push_result(L, ms_tensor_new_bernoulli(p));
  /* on t's device, as torch.bernoulli(t, p) */
  ms_tensor *probs = ms_tensor_new_full_on(ms_tensor_device(p), p->ndim, p->shape, ms_dtype_to_floating(p->dtype),
                                           lua_tonumber(L, 2));
  if (!probs) return bind_raise(L);
  ms_tensor *t = ms_tensor_new_bernoulli(probs);
  ms_tensor_release(probs);
  return bind_push_result(L, t);
}

/* multinomial(input, num_samples, replacement?) or multinomial(input, num_samples, {replacement =,
 * seed =}): 1-based category indices (int64) on input's device; with a seed they come from a
 * generator of its own, as randperm's (moonshard has no Generator objects: `generator` is refused
 * with that advice). */
static int l_multinomial(lua_State *L) {
  static const char *const known[] = {"replacement", "seed", NULL};
  ms_tensor *p = ms_lua_check_tensor(L, 1, "multinomial");
  int64_t k = bind_check_integer(L, 2, "multinomial", "num_samples");
  bool replacement = false, seeded = false;
  int64_t seed = 0;
  if (lua_isboolean(L, 3)) {
    replacement = lua_toboolean(L, 3);
    bind_check_end(L, 4, "multinomial");
  } else {
    if (lua_istable(L, 3)) {
      int given = lua_getfield(L, 3, "generator") != LUA_TNIL;
      lua_pop(L, 1);
      if (given)
        return bind_error(L, "multinomial: option 'generator': moonshard has no Generator objects; pass seed = "
                          "<integer> to draw from a generator of its own (the global one untouched), or seed "
                          "the global one with ms.manual_seed");
    }
    ms_lua_opts o = bind_check_opts(L, 3, "multinomial", known);
    bind_opt_bool(o, "replacement", &replacement);
    seeded = bind_opt_integer(o, "seed", &seed);
  }
  uint64_t s = (uint64_t)seed; /* as manual_seed: a negative seed wraps to 64 bits */
  return bind_push_result(L, ms_tensor_new_multinomial(p, k, replacement, 1, seeded ? &s : NULL));
}

/* ---- *_like ------------------------------------------------------------------------------------- */

static int like_factory(lua_State *L, const char *fname, int kind, int optidx) {
  ms_tensor *src = ms_lua_check_tensor(L, 1, fname);
  ms_lua_factory_opts o = bind_factory_options(L, optidx, fname, src->dtype);
  if (!o.has_device) o.device = ms_tensor_device(src); /* *_like keeps the source's device */
  double value = kind == 2 ? check_fill_value(L, 2, fname) : 0; /* may raise: before t exists */
  if (kind >= 4) check_random_dtype(L, o.dtype, fname);
  check_device_option(L, o.device, fname);
  ms_tensor *t = new_for_factory(o, src->ndim, src->shape, kind < 4);
  if (!t) return bind_raise(L);
  ms_status st = MS_OK;
  switch (kind) {
  case 0: st = ms_tensor_fill_(t, 0); break;
  case 1: st = ms_tensor_fill_(t, 1); break;
  case 2: st = ms_tensor_fill_(t, value); break;
  case 3: break;
  case 4: st = ms_tensor_uniform_(t, 0, 1); break;
  case 5: st = ms_tensor_normal_(t, 0, 1); break;
  }
  if (st != MS_OK) return ms_tensor_release(t), bind_raise(L);
  t = bind_apply_factory_options(L, t, o, fname);
  return bind_push_result(L, t);
}

static int l_zeros_like(lua_State *L) { return like_factory(L, "zeros_like", 0, 2); }
static int l_ones_like(lua_State *L) { return like_factory(L, "ones_like", 1, 2); }
static int l_full_like(lua_State *L) { return like_factory(L, "full_like", 2, 3); }
static int l_empty_like(lua_State *L) { return like_factory(L, "empty_like", 3, 2); }
static int l_rand_like(lua_State *L) { return like_factory(L, "rand_like", 4, 2); }
static int l_randn_like(lua_State *L) { return like_factory(L, "randn_like", 5, 2); }

static int l_randint_like(lua_State *L) {
  ms_tensor *src = ms_lua_check_tensor(L, 1, "randint_like");
  int64_t low = 0, high;
  int optidx = 3;
  if (lua_type(L, 3) == LUA_TNUMBER) {
    low = bind_check_integer(L, 2, "randint_like", "low");
    high = bind_check_integer(L, 3, "randint_like", "high");
    optidx = 4;
  } else {
    high = bind_check_integer(L, 2, "randint_like", "high");
  }
  ms_lua_factory_opts o = bind_factory_options(L, optidx, "randint_like", src->dtype);
  if (!o.has_device) o.device = ms_tensor_device(src);
  ms_tensor *t = ms_tensor_new_empty(src->ndim, src->shape, o.dtype);
  if (!t) return bind_raise(L);
  if (ms_tensor_randint_(t, low, high) != MS_OK) return ms_tensor_release(t), bind_raise(L);
  t = bind_apply_factory_options(L, t, o, "randint_like");
  return bind_push_result(L, t);
}

void bind_open_create(lua_State *L) {
  static const luaL_Reg fns[] = {
      {"tensor", l_tensor},         {"frombuffer", l_frombuffer},         {"from_file", l_from_file},         {"zeros", l_zeros},           {"ones", l_ones},
      {"empty", l_empty},           {"full", l_full},             {"arange", l_arange},
      {"linspace", l_linspace},     {"eye", l_eye},               {"rand", l_rand},
      {"randn", l_randn},           {"randint", l_randint},       {"randperm", l_randperm},
      {"zeros_like", l_zeros_like}, {"ones_like", l_ones_like},   {"full_like", l_full_like},
      {"empty_like", l_empty_like}, {"rand_like", l_rand_like},   {"randn_like", l_randn_like},
      {"randint_like", l_randint_like}, {NULL, NULL}};
  lua_pushvalue(L, -2);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
  bind_register_both(L, "bernoulli", l_bernoulli);
  bind_register_both(L, "multinomial", l_multinomial);
}
