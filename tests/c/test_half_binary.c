/* test_half_binary.c: binary ops on bfloat16 and float16 CPU tensors, which the CPU kernel
 * computes a block at a time in float32 (kernels/cpu/elementwise.c, binary_half), give bit for
 * bit what widening both operands to float32, computing there and rounding once gives: every
 * binary op, contiguous, broadcast and strided operands, a number or 0-dim operand on either
 * side, in place, and the autograd walk's gradient sums. The inputs hold NaNs (quiet and
 * signalling), infinities, zeros, subnormals, the largest finite values, and sums that fall
 * exactly halfway between two 16-bit values (the rounding ties). */
#include "half_bits.h"

/* a op b as widening both operands, computing in float32 and rounding to rd gives (comparisons:
 * their bool result). */
static ms_tensor *reference(ms_binary_op op, ms_operand a, ms_operand b, ms_dtype dt) {
  ms_operand wa = widened(a, dt), wb = widened(b, dt);
  ms_tensor *r = ms_binary(op, wa, wb);
  ms_tensor_release(wa.tensor);
  ms_tensor_release(wb.tensor);
  if (!r || r->dtype == MS_BOOL) return r;
  ms_tensor *rounded = ms_tensor_to_dtype(r, dt);
  ms_tensor_release(r);
  return rounded;
}

static void report(bool ok, ms_binary_op op, ms_dtype dt, const char *what) {
  if (!ok) fprintf(stderr, "%s on %s, %s: differs from widen-compute-round\n", ms_binary_op_name(op), ms_dtype_name(dt), what);
  CHECK(ok);
}

static void check_op(ms_binary_op op, ms_operand a, ms_operand b, ms_dtype dt, const char *what) {
  ms_tensor *got = ms_binary(op, a, b), *want = reference(op, a, b, dt);
  report(same_bits(got, want), op, dt, what);
  ms_tensor_release(got);
  ms_tensor_release(want);
}

/* c op= b, c a copy of a (or of its transpose, then transposed back: a strided view), against
 * the out-of-place reference on c. */
static void check_inplace(ms_binary_op op, ms_tensor *a, ms_operand b, ms_dtype dt, bool strided, const char *what) {
  ms_tensor *c;
  if (strided) {
    ms_tensor *at = ms_tensor_transpose(a, 0, 1), *copy = ms_tensor_contiguous(at);
    c = ms_tensor_transpose(copy, 0, 1);
    ms_tensor_release(at);
    ms_tensor_release(copy);
  } else {
    c = ms_tensor_clone(a);
  }
  /* from c's own values: a strided copy of a 16-bit tensor quiets signalling NaNs */
  ms_tensor *want = reference(op, ms_operand_tensor(c), b, dt);
  report(ms_binary_(op, c, b) == MS_OK && same_bits(c, want), op, dt, what);
  ms_tensor_release(c);
  ms_tensor_release(want);
}

static void check_dtype(ms_dtype dt) {
  ms_tensor *a = random_half(dt, ROWS, COLS), *b = random_half(dt, ROWS, COLS);
  ms_tensor *row = random_half(dt, 1, COLS), *col = random_half(dt, ROWS, 1);
  ms_tensor *bt_store = random_half(dt, COLS, ROWS), *bt = ms_tensor_transpose(bt_store, 0, 1);
  ms_tensor *wide = random_half(dt, ROWS, 2 * COLS), *every_other = ms_tensor_new_view(
      wide->storage, dt, 2, (int64_t[]){ROWS, COLS}, (int64_t[]){2 * COLS, 2}, 1);
  ms_tensor *zero_dim = ms_tensor_new_scalar(0.3, dt), *zero_dim_f32 = ms_tensor_new_scalar(1.0 / 3, MS_FLOAT32);
  ms_tensor *zero_dim_f64 = ms_tensor_new_scalar(1e-3, MS_FLOAT64);
  /* the named ties: 1 + 2^-8 (bfloat16) or 2^-11 (float16) rounds down to 1, the next one up */
  uint16_t *pa = ms_tensor_data(a), *pb = ms_tensor_data(b);
  pa[0] = dt == MS_BFLOAT16 ? 0x3f80 : 0x3c00, pa[1] = (uint16_t)(pa[0] + 1);
  pb[0] = pb[1] = dt == MS_BFLOAT16 ? 0x3b80 : 0x1000;
  ms_operand A = ms_operand_tensor(a);
  for (int k = 0; k < MS_BINARY_OP_COUNT; k++) {
    ms_binary_op op = (ms_binary_op)k;
    check_op(op, A, ms_operand_tensor(b), dt, "contiguous");
    check_op(op, A, ms_operand_tensor(row), dt, "broadcast row");
    check_op(op, ms_operand_tensor(col), A, dt, "broadcast column");
    check_op(op, ms_operand_tensor(row), ms_operand_tensor(col), dt, "both broadcast");
    check_op(op, ms_operand_tensor(bt), A, dt, "transposed");
    check_op(op, A, ms_operand_tensor(every_other), dt, "stride 2");
    check_op(op, A, ms_operand_number(0.1, MS_FLOAT64), dt, "number right");
    check_op(op, ms_operand_number(-2.7, MS_FLOAT64), A, dt, "number left");
    check_op(op, A, ms_operand_number(3, MS_INT64), dt, "integer number");
    check_op(op, ms_operand_tensor(zero_dim), A, dt, "0-dim of the same dtype");
    check_op(op, A, ms_operand_tensor(zero_dim_f32), dt, "0-dim float32");
    check_op(op, ms_operand_tensor(zero_dim_f64), A, dt, "0-dim float64");
    if (op >= MS_OP_EQ) continue; /* no in-place comparisons into a 16-bit tensor */
    check_inplace(op, a, ms_operand_tensor(b), dt, false, "in place");
    check_inplace(op, a, ms_operand_tensor(row), dt, false, "in place, broadcast");
    check_inplace(op, a, ms_operand_tensor(bt), dt, true, "in place into a strided view");
    check_inplace(op, a, ms_operand_number(0.1, MS_FLOAT64), dt, false, "in place, number");
    check_inplace(op, a, ms_operand_tensor(zero_dim_f32), dt, true, "in place, 0-dim float32");
  }
  ms_tensor *wa = ms_tensor_to_dtype(a, MS_FLOAT32), *wb = ms_tensor_to_dtype(b, MS_FLOAT32);
  ms_tensor *sum = ms_binary(MS_OP_ADD, ms_operand_tensor(wa), ms_operand_tensor(wb));
  const uint32_t *bits = ms_tensor_data(sum);
  int64_t ties = 0;
  for (int64_t i = 0; i < ROWS * COLS; i++) /* finite sums exactly halfway between two 16-bit values */
    ties += (bits[i] & 0x7f800000u) != 0x7f800000u &&
            (dt == MS_BFLOAT16 ? (bits[i] & 0xffffu) == 0x8000u
                               : (bits[i] & 0x1fffu) == 0x1000u && (bits[i] & 0x7f800000u) >= 0x38800000u);
  CHECK(ties > 1000); /* the adds above rounded many ties */
  ms_tensor *got = ms_binary(MS_OP_ADD, A, ms_operand_tensor(b));
  const uint16_t *g = ms_tensor_data(got);
  CHECK(g[0] == pa[0] && g[1] == (uint16_t)(pa[0] + 2)); /* ties to even */
  ms_tensor *objs[] = {a, b, row, col, bt_store, bt, wide, every_other, zero_dim, zero_dim_f32, zero_dim_f64, wa, wb, sum, got};
  for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) ms_tensor_release(objs[i]);
}

/* A leaf's .grad accumulation (in place) and the walk's sum of two gradients meeting at one
 * tensor (out of place): x*a + x*b sends g*a and g*b to x. */
static void check_gradient_sums(ms_dtype dt) {
  ms_tensor *x = random_half(dt, ROWS, COLS), *a = random_half(dt, ROWS, COLS), *b = random_half(dt, ROWS, COLS);
  ms_tensor *g = random_half(dt, ROWS, COLS);
  ms_tensor *ga = ms_binary(MS_OP_MUL, ms_operand_tensor(g), ms_operand_tensor(a));
  ms_tensor *gb = ms_binary(MS_OP_MUL, ms_operand_tensor(g), ms_operand_tensor(b));
  ms_tensor *want = reference(MS_OP_ADD, ms_operand_tensor(ga), ms_operand_tensor(gb), dt);
  /* the walk runs the later node first: gb arrives first (a NaN sum keeps the first's payload) */
  ms_tensor *want_walk = reference(MS_OP_ADD, ms_operand_tensor(gb), ms_operand_tensor(ga), dt);

  ms_tensor *leaf = ms_tensor_new_empty(2, (int64_t[]){ROWS, COLS}, dt);
  CHECK(ms_tensor_accumulate_grad(leaf, ga) == MS_OK && ms_tensor_accumulate_grad(leaf, gb) == MS_OK);
  report(same_bits(leaf->grad, want), MS_OP_ADD, dt, "accumulate_grad");

  x->requires_grad = true;
  ms_tensor *xa = ms_binary(MS_OP_MUL, ms_operand_tensor(x), ms_operand_tensor(a));
  ms_tensor *xb = ms_binary(MS_OP_MUL, ms_operand_tensor(x), ms_operand_tensor(b));
  ms_tensor *y = ms_binary(MS_OP_ADD, ms_operand_tensor(xa), ms_operand_tensor(xb));
  CHECK(y && ms_backward(y, g, false) == MS_OK);
  report(same_bits(x->grad, want_walk), MS_OP_ADD, dt, "backward's gradient sum");
  ms_tensor *objs[] = {x, a, b, g, ga, gb, want, want_walk, leaf, xa, xb, y};
  for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) ms_tensor_release(objs[i]);
}

int main(void) {
  for (int i = 0; i < 2; i++) {
    ms_dtype dt = i ? MS_FLOAT16 : MS_BFLOAT16;
    check_dtype(dt);
    check_gradient_sums(dt);
  }
  printf("%d passed, %d failed\n", ms_test_passed, ms_test_failed);
  return ms_test_failed ? 1 : 0;
}
