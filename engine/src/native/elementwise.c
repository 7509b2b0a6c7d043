/* native/elementwise.c: binary and unary elementwise ops with broadcasting and PyTorch's type
 * promotion, clamp, where and masked_fill. Operands are converted to the compute dtype (float32,
 * float64 or int64; bfloat16 and float16 stay as they are: every device's kernels compute them in
 * float32 and round once), the kernel runs over broadcast rows, and the result is cast to the
 * result dtype if it differs. Native:
 * nothing here records a graph (autograd/grad_elementwise.c and grad_unary.c do). */
#include <math.h>
#include <stdlib.h>

#include "native/dispatch.h"
#include "native/native.h"
#include "tensor_iter.h"

/* Rows generated from the op lists (ops.h): every op has a name, and its kernel op is the
 * kernel enumerator of the same name (an op without one is an undeclared identifier). */
#define BINARY_ROW(id, name, node) [MS_OP_##id] = {name, node},
#define KERNEL_ROW(id, ...) [MS_OP_##id] = MS_K_##id,
#define INFO_ROW(id, name, node, dtypes, saves, domain) \
  [MS_OP_##id] = {name, node, MS_UNARY_##dtypes, MS_UNARY_SAVES_##saves, MS_DOMAIN_##domain},
static const ms_binary_op_info binary_info[] = {MS_BINARY_OP_LIST(BINARY_ROW)};
static const ms_unary_op_info unary_info[] = {MS_UNARY_OP_LIST(INFO_ROW)};
static const ms_k_binop kernel_binop[] = {MS_BINARY_OP_LIST(KERNEL_ROW)};
static const ms_k_unop kernel_unop[] = {MS_UNARY_OP_LIST(KERNEL_ROW)};
#undef BINARY_ROW
#undef KERNEL_ROW
#undef INFO_ROW
_Static_assert(sizeof kernel_binop / sizeof *kernel_binop == MS_BINARY_OP_COUNT, "binary op rows");
_Static_assert(sizeof kernel_unop / sizeof *kernel_unop == MS_UNARY_OP_COUNT, "unary op rows");
_Static_assert(sizeof unary_info / sizeof *unary_info == MS_UNARY_OP_COUNT, "unary op rows");
_Static_assert(sizeof binary_info / sizeof *binary_info == MS_BINARY_OP_COUNT, "binary op rows");

const char *ms_binary_op_name(ms_binary_op op) { return binary_info[op].name; }
const ms_binary_op_info *ms_binary_op_get_info(ms_binary_op op) { return &binary_info[op]; }
const char *ms_unary_op_name(ms_unary_op op) { return unary_info[op].name; }
const ms_unary_op_info *ms_unary_op_get_info(ms_unary_op op) { return &unary_info[op]; }

static bool is_comparison(ms_binary_op op) { return op >= MS_OP_EQ; }

/* The kernels write the compute dtype; the result dtype may be narrower (float16, int32, ...).
 * Takes over `out` (NULL passes through). */
static ms_tensor *cast_result(ms_tensor *out, ms_dtype rd) {
  if (!out || out->dtype == rd) return out;
  ms_tensor *cast = native_to_dtype(out, rd);
  ms_tensor_release(out);
  return cast;
}

static void operand_type(ms_operand o, ms_dtype *dt, ms_operand_kind *kind) {
  if (o.tensor) {
    *dt = o.tensor->dtype;
    *kind = o.tensor->ndim > 0 ? MS_OPERAND_TENSOR : MS_OPERAND_ZERO_DIM;
  } else {
    *dt = o.scalar_dtype;
    *kind = MS_OPERAND_SCALAR;
  }
}

/* The dtype both operands are brought to before the op (PyTorch's result_type). */
static ms_dtype common_dtype(ms_operand a, ms_operand b) {
  ms_dtype da, db;
  ms_operand_kind ka, kb;
  operand_type(a, &da, &ka);
  operand_type(b, &db, &kb);
  return ms_dtype_promote(da, ka, db, kb);
}

static bool is_half(ms_dtype dt) { return dt == MS_BFLOAT16 || dt == MS_FLOAT16; }

/* The operand as a tensor of dtype cd broadcast to (ndim, shape): a new reference. Beside a
 * 16-bit cd (binary_compute_dtype) an operand not already of that dtype (a number, a 0-dim
 * tensor of another dtype) is float32, as widening the whole op would make it: rounding it to 16
 * bits first could change the result. */
static ms_tensor *prepare_operand(ms_operand o, ms_dtype cd, int ndim, const int64_t *shape) {
  if (is_half(cd) && !(o.tensor && o.tensor->dtype == cd)) cd = MS_FLOAT32;
  ms_tensor *t = o.tensor ? native_to_dtype(o.tensor, cd) : ms_tensor_new_scalar(o.value, cd);
  if (!t) return NULL;
  ms_tensor *b = native_expand(t, ndim, shape);
  ms_tensor_release(t);
  return b;
}

/* The kernels of the output's device (ops[0]) for op `name`, and the geometry of the nops
 * operands over the output's shape. An operand on another device than the output is a number
 * there (the rule of binary_device and where_device: a 0-dim CPU tensor beside CUDA tensors, as
 * in PyTorch): its data is NULL and num[k] holds its value, read once on the host. */
static ms_status elementwise_geom(const char *name, int nops, ms_tensor *const *ops, native_kernels *nk,
                                  ms_iter *it, ms_k_scalar *num) {
  ms_device dev = ms_tensor_device(ops[0]);
  if (native_kernels_for(name, dev, nk) != MS_OK) return MS_ERR_RUNTIME;
  iter_init(it, ops[0]->ndim, ops[0]->shape, nops, ops);
  for (int k = 1; k < nops; k++) {
    num[k] = (ms_k_scalar){0, 0};
    if (ms_device_equal(ms_tensor_device(ops[k]), dev)) continue;
    num[k] = (ms_k_scalar){ms_tensor_get_flat(ops[k], 0), ms_tensor_get_flat_int(ops[k], 0)};
    it->data[k] = NULL;
  }
  return MS_OK;
}

/* out (of the compute dtype, or bool for comparisons) = a op b, all of out's shape, on out's
 * device. */
static ms_status run_binary(ms_binary_op op, ms_dtype cd, ms_tensor *out, ms_tensor *a, ms_tensor *b) {
  native_kernels nk;
  ms_iter it;
  ms_k_scalar num[3];
  if (elementwise_geom(binary_info[op].name, 3, (ms_tensor *[]){out, a, b}, &nk, &it, num) != MS_OK) return MS_ERR_RUNTIME;
  return native_kernel_status(&nk, nk.k->binary(&nk.x, &it, kernel_binop[op], (ms_k_dtype)cd, &num[1], &num[2]));
}

/* The device a binary op runs on, with its operands' data checked: where the tensors are, and
 * when one is on a CUDA device, a 0-dim CPU tensor counts as a number there (as in PyTorch). */
static ms_status binary_device(const char *name, ms_tensor *a, ms_tensor *b, ms_device *dev) {
  ms_tensor *main = a && (a->ndim > 0 || !b || ms_tensor_device(a).type == MS_CUDA) ? a : b;
  ms_tensor *other = main == a ? b : a;
  *dev = ms_tensor_device(main);
  if (other && !(other->ndim == 0 && ms_tensor_device(other).type == MS_CPU) &&
      ms_check_same_device(name, 2, (ms_tensor *[]){a, b}) != MS_OK)
    return MS_ERR_ARG;
  for (int k = 0; k < 2; k++) {
    ms_tensor *t = k ? b : a;
    if (!t) continue;
    ms_status st = ms_tensor_device(t).type == MS_CPU && dev->type == MS_CPU ? ms_tensor_check_data(name, t)
                                                                             : ms_tensor_check_data_any(name, t);
    if (st != MS_OK) return st;
  }
  return MS_OK;
}

/* Result dtype of op on operands whose common dtype is `common`. */
static ms_dtype binary_result_dtype(ms_binary_op op, ms_dtype common) {
  if (is_comparison(op)) return MS_BOOL;
  if (op == MS_OP_DIV) return ms_dtype_to_floating(common); /* true division */
  return common;
}

/* The dtype the kernel takes op's operands in: divisions of integers compute in float32. The
 * kernels take bfloat16 and float16 as they are and compute them in float32 (the CPU a block at
 * a time, CUDA per element): the values of widening whole tensors, without the extra passes and
 * temporaries. */
static ms_dtype half_or_compute_dtype(ms_dtype dt) { return is_half(dt) ? dt : compute_dtype(dt); }

static ms_dtype binary_compute_dtype(ms_binary_op op, ms_dtype common) {
  return half_or_compute_dtype(op == MS_OP_DIV ? ms_dtype_to_floating(common) : common);
}

static ms_dtype operand_dtype(ms_operand o) { return o.tensor ? o.tensor->dtype : o.scalar_dtype; }

/* The combinations PyTorch refuses rather than computing something surprising. */
static ms_status check_binary_operands(ms_binary_op op, ms_operand a, ms_operand b, ms_dtype common) {
  const char *name = binary_info[op].name;
  if (op == MS_OP_SUB && (operand_dtype(a) == MS_BOOL || operand_dtype(b) == MS_BOOL))
    return ms_error(MS_ERR_ARG, "%s: subtraction with a bool operand is not supported (to invert a "
                    "mask use logical_not; for two masks, ne is their exclusive or)", name);
  if (op == MS_OP_POW && common == MS_BOOL)
    return ms_error(MS_ERR_ARG, "%s: not supported for two bool operands", name);
  /* Only a plain number exponent is checked, as in PyTorch: a tensor exponent gives 0 instead. */
  if (op == MS_OP_POW && !b.tensor && !ms_dtype_is_floating(common) && b.value < 0)
    return ms_error(MS_ERR_ARG, "%s: integers to negative integer powers are not allowed (exponent "
                    "%g, dtype %s); convert with :float() first", name, b.value, ms_dtype_name(common));
  return MS_OK;
}

/* PyTorch computes x ** 0.5 and x ** -0.5 as sqrt and rsqrt, which differ from pow() on -inf
 * and -0; results must not depend on which way the exponent was written. */
static bool pow_is_root(ms_binary_op op, ms_operand b, ms_dtype common) {
  return op == MS_OP_POW && !b.tensor && ms_dtype_is_floating(common) && (b.value == 0.5 || b.value == -0.5);
}

static ms_tensor *pow_root(ms_tensor *a, double e, ms_dtype common) {
  ms_tensor *in = native_to_dtype(a, common);
  ms_tensor *out = in ? native_unary(e > 0 ? MS_OP_SQRT : MS_OP_RSQRT, in) : NULL;
  ms_tensor_release(in);
  return out;
}

ms_tensor *native_binary(ms_binary_op op, ms_operand a, ms_operand b) {
  const char *name = binary_info[op].name;
  if (!a.tensor && !b.tensor) return ms_error(MS_ERR_ARG, "%s: expected at least one tensor operand", name), NULL;
  ms_device dev;
  if (binary_device(name, a.tensor, b.tensor, &dev) != MS_OK) return NULL;
  if (check_binary_operands(op, a, b, common_dtype(a, b)) != MS_OK) return NULL;
  if (pow_is_root(op, b, common_dtype(a, b))) return pow_root(a.tensor, b.value, common_dtype(a, b));
  int ndim = 0;
  int64_t shape[MS_MAX_DIMS];
  const ms_tensor *ta = a.tensor ? a.tensor : b.tensor, *tb = b.tensor ? b.tensor : a.tensor;
  if (broadcast_shapes(name, ta->ndim, ta->shape, tb->ndim, tb->shape, &ndim, shape) != MS_OK) return NULL;
  ms_dtype common = common_dtype(a, b), cd = binary_compute_dtype(op, common);
  ms_dtype rd = binary_result_dtype(op, common);
  ms_tensor *pa = prepare_operand(a, cd, ndim, shape), *pb = prepare_operand(b, cd, ndim, shape);
  ms_dtype kernel_out = is_comparison(op) ? MS_BOOL : cd;
  ms_tensor *out = pa && pb ? ms_tensor_new_empty_on(dev, ndim, shape, kernel_out) : NULL;
  if (out && run_binary(op, cd, out, pa, pb) != MS_OK) ms_tensor_release(out), out = NULL;
  ms_tensor_release(pa);
  ms_tensor_release(pb);
  return cast_result(out, rd);
}

/* Whether a result of dtype `from` may be written into a tensor of dtype `to` (PyTorch's
 * can_cast: never from floating to integral, never from anything else to bool). */
static bool can_cast(ms_dtype from, ms_dtype to) {
  if (ms_dtype_is_floating(from) && !ms_dtype_is_floating(to)) return false;
  if (from != MS_BOOL && to == MS_BOOL) return false;
  return true;
}

static ms_status check_inplace_dtype(const char *name, ms_dtype result, const ms_tensor *a) {
  if (can_cast(result, a->dtype)) return MS_OK;
  return ms_error(MS_ERR_ARG, "%s_: result type %s can't be cast to the desired output type %s",
                  name, ms_dtype_name(result), ms_dtype_name(a->dtype));
}

/* Writes `result` (a temporary of a's shape) into a and releases it. */
static ms_status store_into(ms_tensor *a, ms_tensor *result) {
  if (!result) return MS_ERR_MEMORY;
  ms_status st = native_copy_(a, result);
  ms_tensor_release(result);
  return st;
}

ms_status native_binary_check_(ms_binary_op op, ms_tensor *a, ms_operand b) {
  const char *name = binary_info[op].name;
  ms_dtype common = common_dtype(ms_operand_tensor(a), b), rd = binary_result_dtype(op, common);
  if (check_binary_operands(op, ms_operand_tensor(a), b, common) != MS_OK) return MS_ERR_ARG;
  if (check_inplace_dtype(name, rd, a) != MS_OK) return MS_ERR_ARG;
  if (b.tensor) {
    int ndim;
    int64_t shape[MS_MAX_DIMS];
    char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
    if (broadcast_shapes(name, a->ndim, a->shape, b.tensor->ndim, b.tensor->shape, &ndim, shape))
      return MS_ERR_ARG;
    if (ndim != a->ndim)
      return ms_error(MS_ERR_ARG, "%s_: output with shape %s doesn't match the broadcast shape %s", name,
                      ms_shape_str(a->ndim, a->shape, b1, sizeof b1), ms_shape_str(ndim, shape, b2, sizeof b2));
    for (int d = 0; d < ndim; d++)
      if (shape[d] != a->shape[d])
        return ms_error(MS_ERR_ARG, "%s_: output with shape %s doesn't match the broadcast shape %s", name,
                        ms_shape_str(a->ndim, a->shape, b1, sizeof b1), ms_shape_str(ndim, shape, b2, sizeof b2));
  }
  return MS_OK;
}

ms_status native_binary_(ms_binary_op op, ms_tensor *a, ms_operand b) {
  const char *name = binary_info[op].name;
  if (native_binary_check_(op, a, b) != MS_OK) return MS_ERR_ARG;
  ms_dtype common = common_dtype(ms_operand_tensor(a), b);
  ms_device dev;
  if (binary_device(name, a, b.tensor, &dev) != MS_OK) return MS_ERR_RUNTIME;
  ms_dtype cd = binary_compute_dtype(op, common);
  bool direct = a->dtype == cd && !is_comparison(op) && !pow_is_root(op, b, common) &&
                (!b.tensor || b.tensor->storage != a->storage);
  if (!direct) return store_into(a, native_binary(op, ms_operand_tensor(a), b));
  if (!ms_device_equal(dev, ms_tensor_device(a))) /* a 0-dim CPU a cannot take CUDA results */
    return ms_check_same_device(name, 2, (ms_tensor *[]){a, b.tensor});
  ms_tensor *pb = prepare_operand(b, cd, a->ndim, a->shape);
  if (!pb) return MS_ERR_MEMORY;
  ms_status st = run_binary(op, cd, a, a, pb);
  ms_tensor_release(pb);
  if (st == MS_OK) ms_tensor_bump_version(a);
  return st;
}

/* Ops that exist on integers without leaving them (neg, abs, ...); the rest go to floating. */
static bool unary_keeps_integers(ms_unary_op op) {
  return unary_info[op].dtypes != MS_UNARY_FLOATING && unary_info[op].dtypes != MS_UNARY_FLOATING_ONLY;
}

static ms_dtype unary_result_dtype(ms_unary_op op, ms_dtype in) {
  if (unary_info[op].dtypes == MS_UNARY_LOGICAL) return MS_BOOL;
  /* bool: sign stays bool, square counts in int64 (PyTorch's rules) */
  if (in == MS_BOOL && op != MS_OP_SIGN) return unary_keeps_integers(op) ? MS_INT64 : MS_FLOAT32;
  return unary_keeps_integers(op) ? in : ms_dtype_to_floating(in);
}

/* PyTorch refuses the integer-only ops on bool rather than guess (negating a mask is a bug to
 * report), and its activations on anything but floating point. */
static ms_status check_unary_input(ms_unary_op op, const ms_tensor *a) {
  const char *name = unary_info[op].name;
  if (unary_info[op].dtypes == MS_UNARY_FLOATING_ONLY && !ms_dtype_is_floating(a->dtype))
    return ms_error(MS_ERR_ARG, "%s: expected a floating-point input, got %s (convert with :float())", name,
                    ms_dtype_name(a->dtype));
  if (a->dtype == MS_BOOL && unary_info[op].dtypes == MS_UNARY_INTEGER) {
    if (op == MS_OP_NEG)
      return ms_error(MS_ERR_ARG, "neg: negation of a bool tensor is not supported (to invert a mask "
                      "use logical_not)");
    return ms_error(MS_ERR_ARG, "%s: not supported for bool tensors (convert with :long() or :float())", name);
  }
  return ms_tensor_check_data_any(name, a);
}

/* out = op(a) in compute dtype cd, a of out's shape on out's device. */
static ms_status run_unary(ms_unary_op op, ms_dtype cd, ms_tensor *out, ms_tensor *a) {
  native_kernels nk;
  ms_iter it;
  ms_k_scalar num[2];
  if (elementwise_geom(unary_info[op].name, 2, (ms_tensor *[]){out, a}, &nk, &it, num) != MS_OK) return MS_ERR_RUNTIME;
  return native_kernel_status(&nk, nk.k->unary(&nk.x, &it, kernel_unop[op], (ms_k_dtype)cd));
}

/* The dtype the kernel computes op in: bfloat16 and float16 as they are (the kernels compute in
 * float32 and round once; relu on bfloat16 is exact on its bits); an integer or bool input to a
 * floating op (exp of int64) in float64, rounded once to its float32 result, so that every
 * device gives the correctly rounded value (CUDA's expf and glibc's differ in the last bit;
 * their float64 functions round alike); everything else in the compute dtype of its result (of
 * its input for logical_not, whose result is bool). */
static ms_dtype unary_compute_dtype(ms_unary_op op, const ms_tensor *a) {
  if (op == MS_OP_LOGICAL_NOT) return compute_dtype(a->dtype);
  if (is_half(a->dtype)) return a->dtype;
  ms_dtype rd = unary_result_dtype(op, a->dtype);
  if (!ms_dtype_is_floating(a->dtype) && ms_dtype_is_floating(rd)) return MS_FLOAT64;
  return compute_dtype(rd);
}

ms_tensor *native_unary(ms_unary_op op, ms_tensor *a) {
  if (check_unary_input(op, a) != MS_OK) return NULL;
  ms_dtype rd = unary_result_dtype(op, a->dtype), cd = unary_compute_dtype(op, a);
  ms_tensor *in = native_to_dtype(a, cd);
  ms_dtype kernel_out = op == MS_OP_LOGICAL_NOT ? MS_BOOL : cd;
  ms_tensor *out = in ? ms_tensor_new_empty_on(ms_tensor_device(a), a->ndim, a->shape, kernel_out) : NULL;
  if (out && run_unary(op, cd, out, in) != MS_OK) ms_tensor_release(out), out = NULL;
  ms_tensor_release(in);
  return cast_result(out, rd);
}

/* a = op(a) by the kernel writing over a's own elements, where a is a contiguous CPU tensor that
 * the kernel computes in (float32, float64, bfloat16, float16): nothing to allocate and copy
 * back. False, having done nothing, where that does not hold. (CPU only is this fast path's rule,
 * not a kernel choice: the kernel comes from the table; elsewhere the general path gives the same
 * values.) */
bool native_unary_over_itself(ms_unary_op op, ms_tensor *a) {
  if (op == MS_OP_LOGICAL_NOT || ms_tensor_device(a).type != MS_CPU || !ms_tensor_is_contiguous(a) ||
      unary_result_dtype(op, a->dtype) != a->dtype || unary_compute_dtype(op, a) != a->dtype)
    return false;
  if (run_unary(op, a->dtype, a, a) != MS_OK) return ms_error_clear(), false; /* the CPU's cannot fail */
  ms_tensor_bump_version(a);
  return true;
}

ms_status native_unary_check_(ms_unary_op op, ms_tensor *a) {
  ms_status st = check_unary_input(op, a);
  if (st != MS_OK) return st;
  return check_inplace_dtype(unary_info[op].name, unary_result_dtype(op, a->dtype), a);
}

ms_status native_unary_(ms_unary_op op, ms_tensor *a) {
  ms_status st = native_unary_check_(op, a);
  if (st != MS_OK) return st;
  if (native_unary_over_itself(op, a)) return MS_OK;
  return store_into(a, native_unary(op, a));
}

/* The one-pass relu gradient (the relu_backward slot) where g and y are contiguous floats of one
 * shape, dtype and device (the training loop's case, in float32 or mixed precision's 16-bit
 * floats): one kernel where the general path launches two; NULL otherwise, with no error set,
 * and the caller takes the general path. */
static ms_tensor *relu_backward_contiguous(ms_tensor *g, ms_tensor *y, bool may_overwrite_g) {
  ms_device dev = ms_tensor_device(g);
  if (!ms_device_equal(dev, ms_tensor_device(y)) || dev.type == MS_META || g->dtype != y->dtype ||
      !ms_dtype_is_floating(g->dtype) || g->ndim != y->ndim ||
      !ms_tensor_is_contiguous(g) || !ms_tensor_is_contiguous(y))
    return NULL;
  for (int d = 0; d < g->ndim; d++)
    if (g->shape[d] != y->shape[d]) return NULL;
  native_kernels nk;
  ms_tensor *gx = may_overwrite_g ? (ms_tensor_retain(g), g) : ms_tensor_new_empty_on(dev, g->ndim, g->shape, g->dtype);
  if (gx && (native_kernels_for("relu backward", dev, &nk) != MS_OK ||
             native_kernel_status(&nk, nk.k->relu_backward(&nk.x, (ms_k_dtype)g->dtype, ms_tensor_numel(g),
                                                           ms_tensor_data(y), ms_tensor_data(g),
                                                           ms_tensor_data(gx))) != MS_OK))
    ms_tensor_release(gx), gx = NULL;
  if (!gx) ms_error_clear();
  return gx;
}

ms_tensor *native_relu_backward(ms_tensor *g, ms_tensor *y, bool may_overwrite_g) {
  ms_tensor *fast = relu_backward_contiguous(g, y, may_overwrite_g);
  if (fast) return fast;
  /* where, not a product: an infinite gradient must not become NaN at 0 */
  ms_tensor *pos = native_binary(MS_OP_GT, ms_operand_tensor(y), ms_operand_number(0, MS_FLOAT64));
  ms_tensor *r = pos ? native_where(pos, ms_operand_tensor(g), ms_operand_number(0, MS_INT64)) : NULL;
  ms_tensor_release(pos);
  return r;
}

/* out = a clamped to [lo, hi] (either NULL: no bound) in compute dtype cd, on out's device. */
static ms_status run_clamp(ms_dtype cd, ms_tensor *out, ms_tensor *a, const double *lo, const double *hi) {
  native_kernels nk;
  ms_iter it;
  ms_k_scalar num[2];
  if (elementwise_geom("clamp", 2, (ms_tensor *[]){out, a}, &nk, &it, num) != MS_OK) return MS_ERR_RUNTIME;
  return native_kernel_status(&nk, nk.k->clamp(&nk.x, &it, (ms_k_dtype)cd, lo, hi));
}

/* A bound that is not a whole number lifts an integer tensor to float32, and a bool tensor
 * clamped by integers counts in int64, as PyTorch promotes a tensor with a plain number. (The
 * Lua binding lifts integer tensors itself for bounds written as floats, like 2.0.) */
static ms_dtype clamp_result_dtype(const ms_tensor *a, const double *lo, const double *hi) {
  bool fractional = (lo && *lo != floor(*lo)) || (hi && *hi != floor(*hi));
  if (fractional) return ms_dtype_to_floating(a->dtype);
  return a->dtype == MS_BOOL ? MS_INT64 : a->dtype;
}

/* The bound as the result dtype holds it: PyTorch converts the number to the tensor's dtype
 * first, so -1 bounds a uint8 tensor as 255 and a float16 bound is rounded to float16. */
static double bound_in(ms_dtype dt, double v) {
  unsigned char one[8];
  double back;
  ms_k_fill(1, one, (ms_k_dtype)dt, 1, v);
  ms_k_cast(1, &back, MS_K_F64, 1, one, (ms_k_dtype)dt, 1);
  return back;
}

ms_tensor *native_clamp(ms_tensor *a, const double *min, const double *max) {
  if (!min && !max) return ms_error(MS_ERR_ARG, "clamp: at least one of min and max must be given"), NULL;
  if (ms_tensor_check_data_any("clamp", a) != MS_OK) return NULL;
  ms_dtype rd = clamp_result_dtype(a, min, max), cd = half_or_compute_dtype(rd);
  double lo_v = min ? bound_in(rd, *min) : 0, hi_v = max ? bound_in(rd, *max) : 0;
  const double *lo = min ? &lo_v : NULL, *hi = max ? &hi_v : NULL;
  ms_tensor *in = native_to_dtype(a, cd);
  ms_tensor *out = in ? ms_tensor_new_empty_on(ms_tensor_device(a), a->ndim, a->shape, cd) : NULL;
  if (out && run_clamp(cd, out, in, lo, hi) != MS_OK) ms_tensor_release(out), out = NULL;
  ms_tensor_release(in);
  return cast_result(out, rd);
}

ms_status native_clamp_check_(ms_tensor *a, const double *min, const double *max) {
  return check_inplace_dtype("clamp", clamp_result_dtype(a, min, max), a);
}

ms_status native_clamp_(ms_tensor *a, const double *min, const double *max) {
  if (native_clamp_check_(a, min, max) != MS_OK) return MS_ERR_ARG;
  return store_into(a, native_clamp(a, min, max));
}

/* out = cond ? a : b in compute dtype cd, all of out's shape, on out's device. */
static ms_status run_where(ms_dtype cd, ms_tensor *out, ms_tensor *cond, ms_tensor *a, ms_tensor *b) {
  native_kernels nk;
  ms_iter it;
  ms_k_scalar num[4];
  if (elementwise_geom("where", 4, (ms_tensor *[]){out, cond, a, b}, &nk, &it, num) != MS_OK) return MS_ERR_RUNTIME;
  return native_kernel_status(&nk, nk.k->where(&nk.x, &it, (ms_k_dtype)cd, &num[2], &num[3]));
}

/* where runs on cond's device; a 0-dim CPU a or b beside a CUDA cond is a number there, as in
 * the binary ops. Every tensor's data must be present. */
static ms_status where_device(ms_tensor *cond, ms_tensor *a, ms_tensor *b) {
  bool cuda = ms_tensor_device(cond).type == MS_CUDA;
  ms_tensor *ts[3] = {cond, a, b};
  for (int k = 0; k < 3; k++) {
    ms_tensor *t = ts[k];
    if (!t) continue;
    bool number = cuda && t->ndim == 0 && ms_tensor_device(t).type == MS_CPU;
    if (k > 0 && !number && ms_check_same_device("where", 2, (ms_tensor *[]){cond, t}) != MS_OK) return MS_ERR_ARG;
    if (ms_tensor_check_data_any("where", t) != MS_OK) return MS_ERR_RUNTIME;
  }
  return MS_OK;
}

ms_tensor *native_where(ms_tensor *cond, ms_operand a, ms_operand b) {
  if (where_device(cond, a.tensor, b.tensor) != MS_OK) return NULL;
  if (cond->dtype != MS_BOOL)
    return ms_error(MS_ERR_ARG, "where: condition must be a bool tensor, got %s", ms_dtype_name(cond->dtype)), NULL;
  int ndim = cond->ndim;
  int64_t shape[MS_MAX_DIMS], so_far[MS_MAX_DIMS];
  for (int d = 0; d < ndim; d++) shape[d] = cond->shape[d];
  ms_tensor *both[2] = {a.tensor, b.tensor};
  for (int k = 0; k < 2; k++) {
    if (!both[k]) continue;
    /* a copy: broadcasting reads its inputs while it writes its output */
    for (int d = 0; d < ndim; d++) so_far[d] = shape[d];
    if (broadcast_shapes("where", ndim, so_far, both[k]->ndim, both[k]->shape, &ndim, shape)) return NULL;
  }
  ms_dtype rd = common_dtype(a, b), cd = half_or_compute_dtype(rd);
  ms_tensor *pc = native_expand(cond, ndim, shape);
  ms_tensor *pa = prepare_operand(a, cd, ndim, shape), *pb = prepare_operand(b, cd, ndim, shape);
  ms_tensor *out = pc && pa && pb ? ms_tensor_new_empty_on(ms_tensor_device(cond), ndim, shape, cd) : NULL;
  if (out && run_where(cd, out, pc, pa, pb) != MS_OK) ms_tensor_release(out), out = NULL;
  ms_tensor_release(pc);
  ms_tensor_release(pa);
  ms_tensor_release(pb);
  return cast_result(out, rd);
}

ms_tensor *native_masked_fill(ms_tensor *a, ms_tensor *mask, double value) {
  if (mask->dtype != MS_BOOL)
    return ms_error(MS_ERR_ARG, "masked_fill: mask must be a bool tensor, got %s", ms_dtype_name(mask->dtype)), NULL;
  if (ms_tensor_check_data_any("masked_fill", a) != MS_OK) return NULL; /* where checks the devices */
  /* Out of place, the mask may broadcast the tensor (a (3,) row under a (2, 3) mask), as in
   * PyTorch; the value takes the tensor's dtype. */
  return native_where(mask, ms_operand_number(value, a->dtype), ms_operand_tensor(a));
}

ms_tensor *native_masked_fill_mask_(ms_tensor *a, ms_tensor *mask) {
  if (mask->dtype != MS_BOOL)
    return ms_error(MS_ERR_ARG, "masked_fill_: mask must be a bool tensor, got %s", ms_dtype_name(mask->dtype)), NULL;
  ms_tensor *m = native_expand(mask, a->ndim, a->shape);
  if (!m) {
    char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
    ms_error(MS_ERR_ARG, "masked_fill_: mask of shape %s does not broadcast to the tensor's shape %s",
             ms_shape_str(mask->ndim, mask->shape, b1, sizeof b1), ms_shape_str(a->ndim, a->shape, b2, sizeof b2));
  }
  return m;
}

ms_status native_masked_fill_(ms_tensor *a, ms_tensor *mask, double value) {
  ms_tensor *m = native_masked_fill_mask_(a, mask);
  if (!m) return MS_ERR_ARG;
  ms_tensor *filled = native_where(m, ms_operand_number(value, a->dtype), ms_operand_tensor(a));
  ms_tensor_release(m);
  return store_into(a, filled);
}
