/* test_half_maps.c: unary ops, clamp and where on bfloat16 and float16 CPU tensors, which the CPU
 * kernels compute a block at a time in float32 (kernels/cpu/elementwise.c: unary_half,
 * clamp_half, where_half) instead of widening whole tensors, give bit for bit what widening to
 * float32, computing there and rounding once gives: every unary op, contiguous, transposed and
 * broadcast (stride 0) inputs, in place over itself and into a strided view; clamp with one or
 * two bounds, bounds that 16 bits cannot hold, min > max; where with tensors, numbers and 0-dim
 * tensors on either side, broadcast and transposed; masked_fill. The inputs hold quiet and
 * signalling NaNs, infinities, -0, subnormals and the largest finite values (half_bits.h). */
#include "half_bits.h"

static ms_tensor *widen(ms_tensor *t) { return ms_tensor_to_dtype(t, MS_FLOAT32); }

/* r (a float32 or bool result) rounded to dt; takes over r. */
static ms_tensor *rounded(ms_tensor *r, ms_dtype dt) {
  if (!r || r->dtype == MS_BOOL) return r;
  ms_tensor *back = ms_tensor_to_dtype(r, dt);
  ms_tensor_release(r);
  return back;
}

static void expect(ms_tensor *got, ms_tensor *want, ms_dtype dt, const char *what, const char *how) {
  bool ok = same_bits(got, want);
  if (!ok) fprintf(stderr, "%s on %s, %s: differs from widen-compute-round\n", what, ms_dtype_name(dt), how);
  CHECK(ok);
  ms_tensor_release(got);
  ms_tensor_release(want);
}

static void check_unary(ms_unary_op op, ms_tensor *a, ms_dtype dt, const char *how) {
  ms_tensor *wa = widen(a);
  expect(ms_unary(op, a), rounded(ms_unary(op, wa), dt), dt, ms_unary_op_name(op), how);
  ms_tensor_release(wa);
}

/* op_ on a copy of a: contiguous (the kernel writes over its input) or a strided view. */
static void check_unary_inplace(ms_unary_op op, ms_tensor *a, ms_dtype dt, bool strided) {
  ms_tensor *c;
  if (strided) {
    ms_tensor *at = ms_tensor_transpose(a, 0, 1), *copy = ms_tensor_contiguous(at);
    c = ms_tensor_transpose(copy, 0, 1);
    ms_tensor_release(at);
    ms_tensor_release(copy);
  } else {
    c = ms_tensor_clone(a);
  }
  ms_tensor *wc = widen(c), *want = rounded(ms_unary(op, wc), dt);
  CHECK(ms_unary_(op, c) == MS_OK);
  ms_tensor_retain(c);
  expect(c, want, dt, ms_unary_op_name(op), strided ? "in place, strided" : "in place");
  ms_tensor_release(wc);
  ms_tensor_release(c);
}

/* A bound as dt holds it: clamp rounds its bounds to the tensor's dtype first (as PyTorch). */
static double in_dtype(double v, ms_dtype dt) {
  ms_tensor *t = ms_tensor_new_scalar(v, dt);
  double r = ms_tensor_get_flat(t, 0);
  ms_tensor_release(t);
  return r;
}

static void check_clamp(ms_tensor *a, ms_dtype dt, const double *lo, const double *hi, const char *how) {
  double l = lo ? in_dtype(*lo, dt) : 0, h = hi ? in_dtype(*hi, dt) : 0;
  ms_tensor *wa = widen(a);
  expect(ms_clamp(a, lo, hi), rounded(ms_clamp(wa, lo ? &l : NULL, hi ? &h : NULL), dt), dt, "clamp", how);
  ms_tensor *c = ms_tensor_clone(a);
  CHECK(ms_clamp_(c, lo, hi) == MS_OK);
  ms_tensor_retain(c);
  expect(c, rounded(ms_clamp(wa, lo ? &l : NULL, hi ? &h : NULL), dt), dt, "clamp_", how);
  ms_tensor_release(c);
  ms_tensor_release(wa);
}

static void check_where(ms_tensor *cond, ms_operand a, ms_operand b, ms_dtype dt, const char *how) {
  ms_operand wa = widened(a, dt), wb = widened(b, dt);
  expect(ms_where(cond, a, b), rounded(ms_where(cond, wa, wb), dt), dt, "where", how);
  ms_tensor_release(wa.tensor);
  ms_tensor_release(wb.tensor);
}

static void check_dtype(ms_dtype dt) {
  ms_tensor *a = random_half(dt, ROWS, COLS), *b = random_half(dt, ROWS, COLS);
  ms_tensor *row_store = random_half(dt, 1, COLS), *col_store = random_half(dt, ROWS, 1);
  ms_tensor *row = ms_tensor_expand(row_store, 2, (int64_t[]){ROWS, COLS});
  ms_tensor *col = ms_tensor_expand(col_store, 2, (int64_t[]){ROWS, COLS});
  ms_tensor *bt_store = random_half(dt, COLS, ROWS), *bt = ms_tensor_transpose(bt_store, 0, 1);
  for (int k = 0; k < MS_UNARY_OP_COUNT; k++) {
    ms_unary_op op = (ms_unary_op)k;
    check_unary(op, a, dt, "contiguous");
    check_unary(op, bt, dt, "transposed");
    check_unary(op, row, dt, "broadcast row");
    check_unary(op, col, dt, "broadcast column (stride 0 rows)");
    if (op == MS_OP_LOGICAL_NOT) continue; /* bool result: not in place into a 16-bit tensor */
    check_unary_inplace(op, a, dt, false);
    check_unary_inplace(op, a, dt, true);
  }

  double lo = -0.5, hi = 1.5, odd_lo = 0.1, odd_hi = 1.0 / 3, big = 1e30;
  check_clamp(a, dt, &lo, &hi, "[-0.5, 1.5]");
  check_clamp(a, dt, &lo, NULL, "min only");
  check_clamp(a, dt, NULL, &hi, "max only");
  check_clamp(a, dt, &odd_lo, &odd_hi, "bounds 16 bits cannot hold");
  check_clamp(a, dt, &hi, &lo, "min > max");
  check_clamp(bt, dt, &lo, &big, "transposed, a bound past dt's range");

  ms_tensor *cond = ms_binary(MS_OP_GT, ms_operand_tensor(b), ms_operand_number(0, MS_INT64));
  ms_tensor *zero_dim = ms_tensor_new_scalar(0.3, dt), *zero_dim_f32 = ms_tensor_new_scalar(1.0 / 3, MS_FLOAT32);
  ms_operand A = ms_operand_tensor(a), B = ms_operand_tensor(b);
  check_where(cond, A, B, dt, "two tensors");
  check_where(cond, ms_operand_tensor(bt), A, dt, "transposed");
  check_where(cond, A, ms_operand_tensor(row), dt, "broadcast row");
  check_where(cond, ms_operand_number(0.1, MS_FLOAT64), A, dt, "number left");
  check_where(cond, A, ms_operand_number(-2.7, MS_FLOAT64), dt, "number right");
  check_where(cond, A, ms_operand_number(0.1, dt), dt, "number of the tensor's dtype (masked_fill's)");
  check_where(cond, ms_operand_tensor(zero_dim), A, dt, "0-dim of the same dtype");
  check_where(cond, A, ms_operand_tensor(zero_dim_f32), dt, "0-dim float32");
  ms_tensor *wa = widen(a);
  expect(ms_masked_fill(a, cond, 0.1), rounded(ms_masked_fill(wa, cond, 0.1), dt), dt, "masked_fill", "number 0.1");

  /* the rounding is once, to nearest even: 1 + 2^-8 in bfloat16 (2^-11 in float16) is a tie */
  uint16_t one = dt == MS_BFLOAT16 ? 0x3f80 : 0x3c00;
  ms_tensor *ones = ms_tensor_new_empty(1, (int64_t[]){1}, dt);
  ((uint16_t *)ms_tensor_data(ones))[0] = one;
  ms_tensor *tie = ms_where(cond, ms_operand_number(1 + (dt == MS_BFLOAT16 ? 0x1p-8 : 0x1p-11), MS_FLOAT64),
                            ms_operand_tensor(ones));
  bool all_one = true;
  ms_tensor *flat = ms_tensor_contiguous(tie);
  for (int64_t i = 0; i < ms_tensor_numel(flat); i++) all_one &= ((uint16_t *)ms_tensor_data(flat))[i] == one;
  CHECK(all_one);

  ms_tensor *objs[] = {a, b, row_store, col_store, row, col, bt_store, bt, cond, zero_dim, zero_dim_f32, wa, ones, tie, flat};
  for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) ms_tensor_release(objs[i]);
}

int main(void) {
  check_dtype(MS_BFLOAT16);
  check_dtype(MS_FLOAT16);
  printf("%d passed, %d failed\n", ms_test_passed, ms_test_failed);
  return ms_test_failed ? 1 : 0;
}
