/* l_math.c: elementwise math, comparisons, in-place forms, where/masked_fill, reductions,
 * matrix products, conversions and element access, as functions (ms.add(a, b)) and methods
 * (a:add(b)). Indices that reductions return are 1-based, like every index in Lua. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "moonshard/pinned.h"
#include "ms_lua.h"

/* ---- binary ---------------------------------------------------------------------------------------- */

static void operand_type(ms_operand o, ms_dtype *dt, ms_operand_kind *kind) {
  *dt = o.tensor ? o.tensor->dtype : o.scalar_dtype;
  *kind = !o.tensor ? MS_OPERAND_SCALAR : o.tensor->ndim > 0 ? MS_OPERAND_TENSOR : MS_OPERAND_ZERO_DIM;
}

/* alpha * b in the dtype a + b would have (PyTorch scales inside the op, so alpha never changes
 * the result dtype); a new reference in *scaled, or b itself when it is a number. */
static ms_operand scale_operand(lua_State *L, ms_binary_op op, ms_operand a, ms_operand b, double alpha,
                                bool alpha_int, const char *fname, ms_tensor **scaled) {
  ms_dtype da, db;
  ms_operand_kind ka, kb;
  operand_type(a, &da, &ka);
  operand_type(b, &db, &kb);
  ms_dtype common = ms_dtype_promote(da, ka, db, kb);
  if (!alpha_int && !ms_dtype_is_floating(common))
    bind_error(L, "%s: alpha must be an integer for %s operands, got %f", fname, ms_dtype_name(common), alpha);
  *scaled = NULL;
  /* a bool subtraction is left unscaled for the engine to refuse */
  if (alpha == 1 || (op == MS_OP_SUB && (da == MS_BOOL || db == MS_BOOL))) return b;
  if (!b.tensor) {
    bool is_float = b.scalar_dtype == MS_FLOAT64 || !alpha_int;
    return ms_operand_number(b.value * alpha, is_float ? MS_FLOAT64 : MS_INT64);
  }
  ms_tensor *bc = ms_tensor_to_dtype(b.tensor, common);
  ms_operand factor = ms_operand_number(alpha, alpha_int ? MS_INT64 : MS_FLOAT64);
  ms_tensor *prod = bc ? ms_binary(MS_OP_MUL, ms_operand_tensor(bc), factor) : NULL;
  *scaled = prod ? ms_tensor_to_dtype(prod, common) : NULL; /* bool * 2 counts in int64 */
  ms_tensor_release(bc);
  ms_tensor_release(prod);
  if (!*scaled) bind_raise(L);
  return ms_operand_tensor(*scaled);
}

/* add(a, b, {alpha=}) and sub: a + alpha * b, as torch.add. */
static int add_sub(lua_State *L, ms_binary_op op, const char *fname, bool inplace) {
  static const char *const known[] = {"alpha", NULL};
  ms_operand a = bind_check_operand(L, 1, fname, "input");
  ms_operand b = bind_check_operand(L, 2, fname, "other");
  double alpha = 1;
  ms_lua_opts opts = bind_check_opts(L, 3, fname, known);
  bool alpha_int = true; /* a Lua integer, or none */
  if (bind_opt_number(opts, "alpha", &alpha)) {
    lua_getfield(L, 3, "alpha");
    alpha_int = lua_isinteger(L, -1);
    lua_pop(L, 1);
  }
  ms_tensor *scaled = NULL;
  if (inplace) a = ms_operand_tensor(ms_lua_check_tensor(L, 1, fname));
  b = scale_operand(L, op, a, b, alpha, alpha_int, fname, &scaled);
  if (!inplace) {
    ms_tensor *r = ms_binary(op, a, b);
    ms_tensor_release(scaled);
    return bind_push_result(L, r);
  }
  ms_tensor *self = ms_lua_check_tensor(L, 1, fname);
  ms_status st = ms_binary_(op, self, b);
  ms_tensor_release(scaled);
  bind_check_status(L, st);
  lua_settop(L, 1);
  return 1;
}

static int l_add(lua_State *L) { return add_sub(L, MS_OP_ADD, "add", false); }
static int l_sub(lua_State *L) { return add_sub(L, MS_OP_SUB, "sub", false); }
static int l_add_(lua_State *L) { return add_sub(L, MS_OP_ADD, "add_", true); }
static int l_sub_(lua_State *L) { return add_sub(L, MS_OP_SUB, "sub_", true); }

/* An in-place form's name for messages: the op's name and "_". */
#define MS_INPLACE_NAME_LEN 64

static int binary(lua_State *L, ms_binary_op op) {
  const char *fname = ms_binary_op_name(op);
  ms_operand a = bind_check_operand(L, 1, fname, "input");
  ms_operand b = bind_check_operand(L, 2, fname, "other");
  bind_check_end(L, 3, fname);
  return bind_push_result(L, ms_binary(op, a, b));
}

static int binary_(lua_State *L, ms_binary_op op) {
  char fname[MS_INPLACE_NAME_LEN];
  snprintf(fname, sizeof fname, "%s_", ms_binary_op_name(op));
  ms_tensor *self = ms_lua_check_tensor(L, 1, fname);
  ms_operand other = bind_check_operand(L, 2, fname, "other");
  bind_check_end(L, 3, fname);
  bind_check_status(L, ms_binary_(op, self, other));
  lua_settop(L, 1);
  return 1;
}

/* The binary ops of the engine's table other than add and sub (which take alpha), bound by
 * looping over it (bind_open_math): the op rides in the closure's upvalue. */
static ms_binary_op upvalue_binary_op(lua_State *L) { return (ms_binary_op)lua_tointeger(L, lua_upvalueindex(1)); }
static int l_binary(lua_State *L) { return binary(L, upvalue_binary_op(L)); }
static int l_binary_(lua_State *L) { return binary_(L, upvalue_binary_op(L)); }

/* ---- unary ------------------------------------------------------------------------------------------ */

/* A tensor at 1 and nothing after it (x:relu("x") must not pass as x:relu()). */
static ms_tensor *check_only_tensor(lua_State *L, const char *fname) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  bind_check_end(L, 2, fname);
  return t;
}

static int unary(lua_State *L, ms_unary_op op) {
  return bind_push_result(L, ms_unary(op, check_only_tensor(L, ms_unary_op_name(op))));
}

static int unary_(lua_State *L, ms_unary_op op) {
  char fname[MS_INPLACE_NAME_LEN];
  snprintf(fname, sizeof fname, "%s_", ms_unary_op_name(op));
  bind_check_status(L, ms_unary_(op, check_only_tensor(L, fname)));
  lua_settop(L, 1);
  return 1;
}

/* Every unary op of the engine's table, bound by looping over it (bind_open_math): the op
 * rides in the closure's upvalue. */
static ms_unary_op upvalue_unary_op(lua_State *L) { return (ms_unary_op)lua_tointeger(L, lua_upvalueindex(1)); }
static int l_unary(lua_State *L) { return unary(L, upvalue_unary_op(L)); }
static int l_unary_(lua_State *L) { return unary_(L, upvalue_unary_op(L)); }

/* clamp(t, min, max) with either nil, or clamp(t, {min=, max=}). */
static int clamp(lua_State *L, bool inplace) {
  const char *fname = inplace ? "clamp_" : "clamp";
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  double lo, hi;
  bool has_lo, has_hi, float_bound; /* a Lua float bound (2.0 too) promotes as a float */
  if (lua_istable(L, 2)) {
    static const char *const known[] = {"min", "max", NULL};
    ms_lua_opts o = bind_check_opts(L, 2, fname, known);
    has_lo = bind_opt_number(o, "min", &lo);
    has_hi = bind_opt_number(o, "max", &hi);
    lua_getfield(L, 2, "min");
    lua_getfield(L, 2, "max");
    float_bound = (has_lo && !lua_isinteger(L, -2)) || (has_hi && !lua_isinteger(L, -1));
    lua_pop(L, 2);
  } else {
    has_lo = !lua_isnoneornil(L, 2), has_hi = !lua_isnoneornil(L, 3);
    if (has_lo && lua_type(L, 2) != LUA_TNUMBER) bind_arg_error(L, 2, fname, "min", "a number or nil");
    if (has_hi && lua_type(L, 3) != LUA_TNUMBER) bind_arg_error(L, 3, fname, "max", "a number or nil");
    bind_check_end(L, 4, fname);
    lo = lua_tonumber(L, 2), hi = lua_tonumber(L, 3);
    float_bound = (has_lo && !lua_isinteger(L, 2)) || (has_hi && !lua_isinteger(L, 3));
  }
  const double *plo = has_lo ? &lo : NULL, *phi = has_hi ? &hi : NULL;
  /* The engine sees only doubles; a whole-number float bound still makes an integer tensor's
   * result float32, as torch.clamp(int_tensor, 2.0) does. */
  if (float_bound && !ms_dtype_is_floating(t->dtype)) {
    if (inplace)
      return bind_error(L, "%s: result type float32 can't be cast to the desired output type %s", fname,
                        ms_dtype_name(t->dtype));
    ms_tensor *f = ms_tensor_to_dtype(t, MS_FLOAT32);
    ms_tensor *r = f ? ms_clamp(f, plo, phi) : NULL;
    ms_tensor_release(f);
    return bind_push_result(L, r);
  }
  if (!inplace) return bind_push_result(L, ms_clamp(t, plo, phi));
  bind_check_status(L, ms_clamp_(t, plo, phi));
  lua_settop(L, 1);
  return 1;
}

static int l_clamp(lua_State *L) { return clamp(L, false); }
static int l_clamp_(lua_State *L) { return clamp(L, true); }

/* where(cond, a, b) as torch.where; the method form x:where(cond, y) as Tensor.where. */
static int l_where(lua_State *L) {
  ms_tensor *cond = ms_lua_check_tensor(L, 1, "where");
  ms_operand a = bind_check_operand(L, 2, "where", "input");
  ms_operand b = bind_check_operand(L, 3, "where", "other");
  bind_check_end(L, 4, "where");
  return bind_push_result(L, ms_where(cond, a, b));
}

static int l_where_method(lua_State *L) {
  ms_operand self = bind_check_operand(L, 1, "where", "self");
  ms_tensor *cond = ms_lua_check_tensor(L, 2, "where");
  ms_operand other = bind_check_operand(L, 3, "where", "other");
  bind_check_end(L, 4, "where");
  return bind_push_result(L, ms_where(cond, self, other));
}

/* The last argument, a number (or boolean): nothing may follow it. */
static double check_scalar(lua_State *L, int idx, const char *fname, const char *what) {
  if (!lua_isboolean(L, idx) && lua_type(L, idx) != LUA_TNUMBER) bind_arg_error(L, idx, fname, what, "a number");
  bind_check_end(L, idx + 1, fname);
  return lua_isboolean(L, idx) ? lua_toboolean(L, idx) : lua_tonumber(L, idx);
}

static int l_masked_fill(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "masked_fill"), *mask = ms_lua_check_tensor(L, 2, "masked_fill");
  return bind_push_result(L, ms_masked_fill(t, mask, check_scalar(L, 3, "masked_fill", "value")));
}

static int l_masked_fill_(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "masked_fill_"), *mask = ms_lua_check_tensor(L, 2, "masked_fill_");
  bind_check_status(L, ms_masked_fill_(t, mask, check_scalar(L, 3, "masked_fill_", "value")));
  lua_settop(L, 1);
  return 1;
}

static int l_fill_(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "fill_");
  bind_check_status(L, ms_tensor_fill_(t, check_scalar(L, 2, "fill_", "value")));
  lua_settop(L, 1);
  return 1;
}

static int l_zero_(lua_State *L) {
  bind_check_status(L, ms_tensor_zero_(check_only_tensor(L, "zero_")));
  lua_settop(L, 1);
  return 1;
}

static int l_copy_(lua_State *L) {
  ms_tensor *dst = ms_lua_check_tensor(L, 1, "copy_"), *src = ms_lua_check_tensor(L, 2, "copy_");
  bind_check_end(L, 3, "copy_");
  bind_check_status(L, ms_tensor_copy_(dst, src));
  lua_settop(L, 1);
  return 1;
}

/* ---- reductions -------------------------------------------------------------------------------------- */

/* Reads (dim?, keepdim-or-options?) after the tensor: sum(), sum(2), sum(2, true),
 * sum(2, {keepdim=true}), sum({dim=2, keepdim=true}). */
static ms_reduce_opts reduce_args(lua_State *L, const ms_tensor *t, const char *fname, int *next_idx) {
  static const char *const known[] = {"dim", "keepdim", "correction", "unbiased", "p", NULL};
  ms_reduce_opts o = {.all = true, .correction = 1, .p = 2};
  int idx = 2;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    o.all = false;
    o.dim = bind_check_dim(L, idx++, t->ndim, fname, "dim");
  }
  if (lua_isboolean(L, idx)) o.keepdim = lua_toboolean(L, idx++);
  else if (lua_istable(L, idx)) {
    ms_lua_opts opts = bind_check_opts(L, idx, fname, known);
    lua_getfield(L, idx, "dim");
    if (!lua_isnil(L, -1)) o.all = false, o.dim = bind_check_dim(L, lua_gettop(L), t->ndim, fname, "dim");
    lua_pop(L, 1);
    bind_opt_bool(opts, "keepdim", &o.keepdim);
    bind_opt_integer(opts, "correction", &o.correction);
    bool unbiased;
    if (bind_opt_bool(opts, "unbiased", &unbiased)) o.correction = unbiased ? 1 : 0;
    bind_opt_number(opts, "p", &o.p);
    idx++;
  }
  if (next_idx) *next_idx = idx;
  else bind_check_end(L, idx, fname); /* x:sum("x") must not pass as x:sum() */
  return o;
}

static int reduce(lua_State *L, ms_reduce_op op, const char *fname) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  return bind_push_result(L, ms_reduce(op, t, reduce_args(L, t, fname, NULL)));
}

static int l_sum(lua_State *L) { return reduce(L, MS_RED_SUM, "sum"); }
static int l_mean(lua_State *L) { return reduce(L, MS_RED_MEAN, "mean"); }
static int l_prod(lua_State *L) { return reduce(L, MS_RED_PROD, "prod"); }
static int l_var(lua_State *L) { return reduce(L, MS_RED_VAR, "var"); }
static int l_std(lua_State *L) { return reduce(L, MS_RED_STD, "std"); }
static int l_any(lua_State *L) { return reduce(L, MS_RED_ANY, "any"); }
static int l_all(lua_State *L) { return reduce(L, MS_RED_ALL, "all"); }

/* norm(t, p?, dim?, keepdim?) with p first as in torch.norm ("fro" is 2, "inf" infinity). */
static int l_norm(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "norm");
  double p = 2;
  bool p_given = lua_type(L, 2) == LUA_TSTRING || lua_type(L, 2) == LUA_TNUMBER;
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *s = lua_tostring(L, 2);
    if (strcmp(s, "fro") != 0 && strcmp(s, "inf") != 0)
      return bind_arg_error(L, 2, "norm", "p", "a number, \"fro\" or \"inf\"");
    p = strcmp(s, "inf") == 0 ? INFINITY : 2;
    lua_remove(L, 2);
  } else if (lua_type(L, 2) == LUA_TNUMBER) {
    p = lua_tonumber(L, 2);
    lua_remove(L, 2);
  }
  ms_reduce_opts o = reduce_args(L, t, "norm", NULL);
  if (p_given) o.p = p;
  return bind_push_result(L, ms_reduce(MS_RED_NORM, t, o));
}

static int arg_reduce(lua_State *L, ms_reduce_op op, const char *fname) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  return bind_push_result(L, bind_one_based(L, ms_reduce(op, t, reduce_args(L, t, fname, NULL))));
}

static int l_argmax(lua_State *L) { return arg_reduce(L, MS_RED_ARGMAX, "argmax"); }
static int l_argmin(lua_State *L) { return arg_reduce(L, MS_RED_ARGMIN, "argmin"); }

/* max(t) -> value; max(t, dim, keepdim?) -> values, indices (1-based); max(a, b) -> maximum. */
static int max_min(lua_State *L, ms_reduce_op op, ms_binary_op elementwise, const char *fname) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, fname);
  if (ms_lua_to_tensor(L, 2)) return binary(L, elementwise);
  ms_reduce_opts o = reduce_args(L, t, fname, NULL);
  if (o.all) return bind_push_result(L, ms_reduce(op, t, o));
  ms_tensor *values, *indices;
  bind_check_status(L, ms_reduce_with_indices(op, t, o.dim, o.keepdim, &values, &indices));
  ms_lua_push_tensor(L, values);
  ms_lua_push_tensor(L, bind_one_based(L, indices));
  return 2;
}

static int l_max(lua_State *L) { return max_min(L, MS_RED_MAX, MS_OP_MAXIMUM, "max"); }
static int l_min(lua_State *L) { return max_min(L, MS_RED_MIN, MS_OP_MINIMUM, "min"); }

/* ---- products and comparisons of whole tensors ------------------------------------------------------ */

/* Tensors at 1 and 2 and nothing after them. */
static void check_two_tensors(lua_State *L, const char *fname, ms_tensor **a, ms_tensor **b) {
  *a = ms_lua_check_tensor(L, 1, fname), *b = ms_lua_check_tensor(L, 2, fname);
  bind_check_end(L, 3, fname);
}

static int l_matmul(lua_State *L) {
  ms_tensor *a, *b;
  check_two_tensors(L, "matmul", &a, &b);
  return bind_push_result(L, ms_matmul(a, b));
}
static int l_mm(lua_State *L) {
  ms_tensor *a, *b;
  check_two_tensors(L, "mm", &a, &b);
  return bind_push_result(L, ms_mm(a, b));
}
static int l_bmm(lua_State *L) {
  ms_tensor *a, *b;
  check_two_tensors(L, "bmm", &a, &b);
  return bind_push_result(L, ms_bmm(a, b));
}
static int l_dot(lua_State *L) {
  ms_tensor *a, *b;
  check_two_tensors(L, "dot", &a, &b);
  if (a->ndim != 1 || b->ndim != 1 || a->shape[0] != b->shape[0])
    return bind_error(L, "dot: expected two 1-D tensors of the same length, got %s and %s",
                      bind_describe(L, 1), bind_describe(L, 2));
  return bind_push_result(L, ms_matmul(a, b));
}

/* addmm(input, a, b, {beta=1, alpha=1}) */
static int l_addmm(lua_State *L) {
  static const char *const known[] = {"beta", "alpha", NULL};
  ms_tensor *c = ms_lua_check_tensor(L, 1, "addmm"), *a = ms_lua_check_tensor(L, 2, "addmm");
  ms_tensor *b = ms_lua_check_tensor(L, 3, "addmm");
  ms_lua_opts o = bind_check_opts(L, 4, "addmm", known);
  double beta = 1, alpha = 1;
  bind_opt_number(o, "beta", &beta);
  bind_opt_number(o, "alpha", &alpha);
  return bind_push_result(L, ms_addmm(c, a, b, beta, alpha));
}

static int l_equal(lua_State *L) {
  ms_tensor *a, *b;
  check_two_tensors(L, "equal", &a, &b);
  lua_pushboolean(L, ms_equal(a, b));
  return 1;
}

static int l_allclose(lua_State *L) {
  static const char *const known[] = {"rtol", "atol", NULL};
  ms_tensor *a = ms_lua_check_tensor(L, 1, "allclose"), *b = ms_lua_check_tensor(L, 2, "allclose");
  ms_lua_opts o = bind_check_opts(L, 3, "allclose", known);
  double rtol = 1e-5, atol = 1e-8;
  bind_opt_number(o, "rtol", &rtol);
  bind_opt_number(o, "atol", &atol);
  bool close;
  bind_check_status(L, ms_allclose(a, b, rtol, atol, &close));
  lua_pushboolean(L, close);
  return 1;
}

/* ---- conversions and element access ------------------------------------------------------------------ */

static int convert(lua_State *L, ms_dtype dt, const char *fname) {
  return bind_push_result(L, ms_tensor_to_dtype(check_only_tensor(L, fname), dt));
}

static int l_float(lua_State *L) { return convert(L, MS_FLOAT32, "float"); }
static int l_double(lua_State *L) { return convert(L, MS_FLOAT64, "double"); }
static int l_half(lua_State *L) { return convert(L, MS_FLOAT16, "half"); }
static int l_bfloat16(lua_State *L) { return convert(L, MS_BFLOAT16, "bfloat16"); }
static int l_long(lua_State *L) { return convert(L, MS_INT64, "long"); }
static int l_int(lua_State *L) { return convert(L, MS_INT32, "int"); }
static int l_byte(lua_State *L) { return convert(L, MS_UINT8, "byte"); }
static int l_bool(lua_State *L) { return convert(L, MS_BOOL, "bool"); }

/* non_blocking = true in the options at idx (the table form's own, or a trailing table). */
static bool opt_non_blocking(lua_State *L, int idx) {
  static const char *const known[] = {"non_blocking", NULL};
  bool nb = false;
  bind_opt_bool(bind_check_opts(L, idx, "to", known), "non_blocking", &nb);
  return nb;
}

/* The table form {dtype =, device =, non_blocking =}. */
static bool to_table_options(lua_State *L, int idx, ms_dtype *dt, ms_device *dev) {
  static const char *const known[] = {"dtype", "device", "non_blocking", NULL};
  ms_lua_opts o = bind_check_opts(L, idx, "to", known);
  bool nb = false;
  bind_opt_dtype(o, "dtype", dt);
  bind_opt_bool(o, "non_blocking", &nb);
  if (lua_getfield(L, idx, "device") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING && !lua_isinteger(L, -1))
      bind_arg_error(L, idx, "to", "device", "a device name such as \"cpu\" or \"cuda:0\"");
    *dev = bind_check_device(L, lua_gettop(L), "to", "device");
  }
  lua_pop(L, 1);
  return nb;
}

/* to("float64"), to("cpu"), to("cuda:1"), to(1) (a CUDA device index, as torch), to({dtype=,
 * device=}), to(other_tensor) (its dtype and device); non_blocking = true in the table or in a
 * trailing one (to("cuda", {non_blocking = true})): a pinned CPU tensor is copied without
 * waiting, on the device's current stream (moonshard/pinned.h). */
static int l_to(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "to");
  ms_tensor *other = ms_lua_to_tensor(L, 2);
  ms_dtype dt = t->dtype;
  ms_device dev = ms_tensor_device(t);
  bool nb = false;
  if (other) {
    dt = other->dtype, dev = ms_tensor_device(other), nb = opt_non_blocking(L, 3);
  } else if (lua_istable(L, 2)) {
    nb = to_table_options(L, 2, &dt, &dev);
  } else if (lua_type(L, 2) == LUA_TSTRING) {
    if (!ms_device_parse(lua_tostring(L, 2), &dev) && !ms_dtype_from_name(lua_tostring(L, 2), &dt))
      return bind_arg_error(L, 2, "to", "dtype_or_device",
                            "a device (\"cpu\", \"cuda\", \"cuda:N\", \"meta\") or a dtype name (float32, "
                            "float64, bfloat16, float16, int64, int32, uint8, bool)");
    nb = opt_non_blocking(L, 3);
  } else if (lua_isinteger(L, 2)) {
    dev = bind_check_device(L, 2, "to", "device");
    nb = opt_non_blocking(L, 3);
  } else {
    return bind_arg_error(L, 2, "to", "dtype_or_device", "a dtype name, a device name, an options table or a tensor");
  }
  ms_tensor *moved = ms_tensor_to_device_opt(t, dev, nb);
  if (!moved) return bind_raise(L);
  ms_tensor *out = ms_tensor_to_dtype(moved, dt);
  ms_tensor_release(moved);
  return bind_push_result(L, out);
}

static int l_item(lua_State *L) {
  ms_tensor *t = check_only_tensor(L, "item");
  double v;
  bind_check_status(L, ms_tensor_item(t, &v));
  bind_push_element(L, t, 0);
  return 1;
}

static void push_nested(lua_State *L, const ms_tensor *t, int d, int64_t *flat) {
  if (d == t->ndim) {
    bind_push_element(L, t, (*flat)++);
    return;
  }
  lua_createtable(L, (int)t->shape[d], 0);
  for (int64_t i = 0; i < t->shape[d]; i++) {
    push_nested(L, t, d + 1, flat);
    lua_rawseti(L, -2, i + 1);
  }
}

static int l_tolist(lua_State *L) {
  ms_tensor *t = check_only_tensor(L, "tolist");
  bind_check_status(L, ms_tensor_check_data_any("tolist", t)); /* released, or meta */
  int64_t flat = 0;
  luaL_checkstack(L, t->ndim + 4, "tolist: tensor too deep");
  push_nested(L, t, 0, &flat);
  return 1;
}

/* ---- geometry queries --------------------------------------------------------------------------------- */

/* A dim of a tensor that has at least one (a 0-dim tensor has no size or stride to ask for). */
static int check_existing_dim(lua_State *L, const ms_tensor *t, const char *fname) {
  if (t->ndim == 0) bind_error(L, "%s: a 0-dim tensor has no dimensions (dim %s given)", fname, bind_describe(L, 2));
  return bind_check_dim(L, 2, t->ndim, fname, "dim");
}

static int l_size(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "size");
  bind_check_end(L, 3, "size");
  if (lua_isnoneornil(L, 2)) return bind_push_size(L, t->ndim, t->shape), 1;
  lua_pushinteger(L, t->shape[check_existing_dim(L, t, "size")]);
  return 1;
}

static int l_stride(lua_State *L) {
  ms_tensor *t = ms_lua_check_tensor(L, 1, "stride");
  bind_check_end(L, 3, "stride");
  if (!lua_isnoneornil(L, 2)) return lua_pushinteger(L, t->strides[check_existing_dim(L, t, "stride")]), 1;
  lua_createtable(L, t->ndim, 0);
  for (int d = 0; d < t->ndim; d++) lua_pushinteger(L, t->strides[d]), lua_rawseti(L, -2, d + 1);
  return 1;
}

static int l_dim(lua_State *L) { return lua_pushinteger(L, check_only_tensor(L, "dim")->ndim), 1; }
static int l_numel(lua_State *L) { return lua_pushinteger(L, ms_tensor_numel(check_only_tensor(L, "numel"))), 1; }
static int l_is_contiguous(lua_State *L) {
  return lua_pushboolean(L, ms_tensor_is_contiguous(check_only_tensor(L, "is_contiguous"))), 1;
}
static int l_storage_offset(lua_State *L) {
  return lua_pushinteger(L, check_only_tensor(L, "storage_offset")->offset), 1;
}
static int l_element_size(lua_State *L) {
  return lua_pushinteger(L, (lua_Integer)ms_dtype_size(check_only_tensor(L, "element_size")->dtype)), 1;
}
static int l_is_floating_point(lua_State *L) {
  return lua_pushboolean(L, ms_dtype_is_floating(check_only_tensor(L, "is_floating_point")->dtype)), 1;
}

/* ms._op_info = {unary = {{name =, node =, dtypes =, saves =, domain =}, ...},
 * binary = {{name =, node =}, ...} (node nil: not differentiable), activation = {{name =, node =,
 * module =}, ...} (one per function), reduce = {{name =}, ...}, triangle = {{name =, node =},
 * ...}}: the engine's op tables as data, so that tests run every op (on every device, with its gradient) without a hand-copied list. */
/* Row i of the table on top: {name =, node =} (node nil when NULL). */
static void push_name_node(lua_State *L, int i, const char *name, const char *node) {
  lua_createtable(L, 0, 2);
  lua_pushstring(L, name), lua_setfield(L, -2, "name");
  if (node) lua_pushstring(L, node), lua_setfield(L, -2, "node");
  lua_rawseti(L, -2, i);
}

static void push_binary_info(lua_State *L) {
  lua_createtable(L, MS_BINARY_OP_COUNT, 0);
  for (int op = 0; op < MS_BINARY_OP_COUNT; op++) {
    const ms_binary_op_info *r = ms_binary_op_get_info((ms_binary_op)op);
    push_name_node(L, op + 1, r->name, r->node);
  }
}

/* The rows of MS_REDUCE_OP_LIST, which the engine names nowhere else (each binding is written
 * by hand, with its own arguments). */
static void push_reduce_info(lua_State *L) {
#define MS_X_RED_NAME(ID, NAME) NAME,
  static const char *const names[] = {MS_REDUCE_OP_LIST(MS_X_RED_NAME)};
#undef MS_X_RED_NAME
  lua_createtable(L, MS_REDUCE_OP_COUNT, 0);
  for (int op = 0; op < MS_REDUCE_OP_COUNT; op++) {
    lua_createtable(L, 0, 1);
    lua_pushstring(L, names[op]), lua_setfield(L, -2, "name");
    lua_rawseti(L, -2, op + 1);
  }
}

/* The rows of MS_TRIANGLE_OP_LIST: {name =, node =}. */
static void push_triangle_info(lua_State *L) {
  lua_createtable(L, MS_TRIANGLE_OP_COUNT, 0);
  for (int op = 0; op < MS_TRIANGLE_OP_COUNT; op++) {
    const ms_triangle_op_info *r = ms_triangle_op_get_info((ms_triangle_op)op);
    push_name_node(L, op + 1, r->name, r->node);
  }
}

static void push_op_info(lua_State *L) {
  static const char *const dtypes[] = {
      [MS_UNARY_INTEGER] = "integer", [MS_UNARY_INTEGER_OR_BOOL] = "integer_or_bool",
      [MS_UNARY_FLOATING] = "floating", [MS_UNARY_FLOATING_ONLY] = "floating_only",
      [MS_UNARY_LOGICAL] = "logical"};
  static const char *const saves[] = {
      [MS_UNARY_SAVES_NOTHING] = "nothing", [MS_UNARY_SAVES_INPUT] = "input", [MS_UNARY_SAVES_RESULT] = "result"};
  static const char *const domains[] = {
      [MS_DOMAIN_REAL] = "real", [MS_DOMAIN_POSITIVE] = "positive",
      [MS_DOMAIN_ABOVE_MINUS_ONE] = "above_minus_one", [MS_DOMAIN_STEP] = "step"};
  lua_createtable(L, 0, 3);
  push_binary_info(L);
  lua_setfield(L, -2, "binary");
  lua_createtable(L, MS_UNARY_OP_COUNT, 0);
  for (int op = 0; op < MS_UNARY_OP_COUNT; op++) {
    const ms_unary_op_info *r = ms_unary_op_get_info((ms_unary_op)op);
    lua_createtable(L, 0, 5);
    lua_pushstring(L, r->name), lua_setfield(L, -2, "name");
    lua_pushstring(L, r->node), lua_setfield(L, -2, "node");
    lua_pushstring(L, dtypes[r->dtypes]), lua_setfield(L, -2, "dtypes");
    lua_pushstring(L, saves[r->saves]), lua_setfield(L, -2, "saves");
    lua_pushstring(L, domains[r->domain]), lua_setfield(L, -2, "domain");
    lua_rawseti(L, -2, op + 1);
  }
  lua_setfield(L, -2, "unary");
  lua_createtable(L, MS_ACTIVATION_OP_COUNT, 0);
  for (int op = 0, n = 0; op < MS_ACTIVATION_OP_COUNT; op++) {
    const ms_activation_op_info *r = ms_activation_op_get_info((ms_activation_op)op);
    if (op > 0 && strcmp(r->name, ms_activation_op_get_info((ms_activation_op)(op - 1))->name) == 0)
      continue; /* a form of the row before (GELU_TANH: gelu's approximate = "tanh") */
    lua_createtable(L, 0, 3);
    lua_pushstring(L, r->name), lua_setfield(L, -2, "name");
    lua_pushstring(L, r->node), lua_setfield(L, -2, "node");
    lua_pushstring(L, r->module), lua_setfield(L, -2, "module");
    lua_rawseti(L, -2, ++n);
  }
  lua_setfield(L, -2, "activation");
  push_reduce_info(L);
  lua_setfield(L, -2, "reduce");
  push_triangle_info(L);
  lua_setfield(L, -2, "triangle");
}

/* Binds op (the closure's upvalue) under name and name_ (its in-place form), as a function and a
 * method. */
static void register_op(lua_State *L, const char *name, int op, lua_CFunction fn, lua_CFunction fn_) {
  char inplace[MS_INPLACE_NAME_LEN];
  snprintf(inplace, sizeof inplace, "%s_", name);
  lua_pushinteger(L, op);
  lua_pushcclosure(L, fn, 1);
  bind_register_value_both(L, name);
  lua_pushinteger(L, op);
  lua_pushcclosure(L, fn_, 1);
  bind_register_value_both(L, inplace);
}

/* Every op of the engine's unary and binary tables, so that an op added to a table is bound
 * without an edit here; add and sub take alpha and are bound by hand. */
static void register_table_ops(lua_State *L) {
  for (int op = 0; op < MS_UNARY_OP_COUNT; op++)
    register_op(L, ms_unary_op_name((ms_unary_op)op), op, l_unary, l_unary_);
  for (int op = 0; op < MS_BINARY_OP_COUNT; op++)
    if (op != MS_OP_ADD && op != MS_OP_SUB) register_op(L, ms_binary_op_name((ms_binary_op)op), op, l_binary, l_binary_);
}

void bind_open_math(lua_State *L) {
  static const struct { const char *name; lua_CFunction fn; } both[] = {
      {"add", l_add}, {"sub", l_sub}, {"add_", l_add_}, {"sub_", l_sub_},
      {"clamp", l_clamp}, {"clamp_", l_clamp_}, {"masked_fill", l_masked_fill},
      {"masked_fill_", l_masked_fill_}, {"fill_", l_fill_}, {"zero_", l_zero_}, {"copy_", l_copy_},
      {"sum", l_sum}, {"mean", l_mean}, {"prod", l_prod}, {"var", l_var}, {"std", l_std},
      {"norm", l_norm}, {"max", l_max}, {"min", l_min}, {"argmax", l_argmax}, {"argmin", l_argmin},
      {"any", l_any}, {"all", l_all},
      {"matmul", l_matmul}, {"mm", l_mm}, {"bmm", l_bmm}, {"dot", l_dot}, {"addmm", l_addmm},
      {"equal", l_equal}, {"allclose", l_allclose}, {"float", l_float}, {"double", l_double},
      {"half", l_half}, {"bfloat16", l_bfloat16}, {"long", l_long}, {"int", l_int},
      {"byte", l_byte}, {"bool", l_bool}, {"to", l_to}, {"item", l_item}, {"tolist", l_tolist},
      {"size", l_size}, {"stride", l_stride}, {"dim", l_dim}, {"numel", l_numel},
      {"is_contiguous", l_is_contiguous}, {"storage_offset", l_storage_offset},
      {"element_size", l_element_size}, {"is_floating_point", l_is_floating_point}};
  for (size_t i = 0; i < sizeof both / sizeof both[0]; i++) bind_register_both(L, both[i].name, both[i].fn);
  register_table_ops(L);
  push_op_info(L);
  lua_setfield(L, -3, "_op_info");
  lua_pushcfunction(L, l_where);
  lua_setfield(L, -3, "where");
  lua_pushcfunction(L, l_where_method);
  lua_setfield(L, -2, "where");
}
