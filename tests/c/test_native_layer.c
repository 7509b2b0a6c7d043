/* test_native_layer.c: the layering of issue 18 at run time. The native ops (engine/src/native)
 * compute and record nothing, even on tensors that require grad with grad mode on, while the
 * public ops over them record; and the tensor core frees autograd state only through the
 * function autograd installs (tensor_internal.h). */
#include "engine/src/native/native.h"
#include "engine/src/tensor_internal.h"
#include "moonshard/moonshard.h"
#include "test.h"

/* A (2, 3) float32 leaf that requires grad, holding 1..6. */
static ms_tensor *leaf(void) {
  ms_tensor *t = ms_tensor_new_empty(2, (int64_t[]){2, 3}, MS_FLOAT32);
  for (int i = 0; i < 6; i++) ms_tensor_set_flat(t, i, i + 1);
  t->requires_grad = true;
  return t;
}

/* out was computed, and carries no graph. Releases out. */
static void check_plain(ms_tensor *out) {
  CHECK(out != NULL);
  if (!out) return;
  CHECK(!out->requires_grad && !out->grad_fn && !out->grad_base);
  ms_tensor_release(out);
}

/* out was computed and recorded as `node`. Releases out. */
static void check_recorded(ms_tensor *out, const char *node) {
  CHECK(out && out->requires_grad && out->grad_fn && strcmp(out->grad_fn->name, node) == 0);
  ms_tensor_release(out);
}

static void test_native_ops_record_nothing(void) {
  CHECK(ms_grad_enabled());
  ms_tensor *x = leaf(), *w = leaf();
  ms_tensor *wt = native_transpose(w, 0, 1);
  check_plain(native_binary(MS_OP_MUL, ms_operand_tensor(x), ms_operand_number(2, MS_FLOAT64)));
  check_plain(native_unary(MS_OP_EXP, x));
  check_plain(native_clamp(x, &(double){2}, NULL));
  check_plain(native_reduce(MS_RED_SUM, x, (ms_reduce_opts){.all = true}));
  check_plain(native_mm(x, wt));
  check_plain(native_matmul(x, wt));
  check_plain(native_view(x, 1, (int64_t[]){6}));
  check_plain(native_select(x, 0, 1));
  check_plain(native_expand(x, 3, (int64_t[]){4, 2, 3}));
  check_plain(native_to_dtype(x, MS_FLOAT64));
  check_plain(native_clone(x));
  check_plain(native_cat((ms_tensor *[]){x, w}, 2, 0));
  /* in place on a leaf that requires grad: no refusal and no node (the public op refuses) */
  int version = ms_tensor_version(x);
  CHECK(native_binary_(MS_OP_ADD, x, ms_operand_number(1, MS_FLOAT64)) == MS_OK);
  CHECK(ms_tensor_version(x) == version + 1 && !x->grad_fn && ms_tensor_get_flat(x, 0) == 2);
  CHECK(ms_binary_(MS_OP_ADD, x, ms_operand_number(1, MS_FLOAT64)) != MS_OK);
  CHECK_ERROR_HAS("leaf tensor that requires grad");
  ms_tensor_release(wt), ms_tensor_release(w), ms_tensor_release(x);
}

static void test_public_ops_record(void) {
  ms_tensor *x = leaf(), *w = leaf();
  ms_tensor *wt = ms_tensor_transpose(w, 0, 1);
  check_recorded(ms_binary(MS_OP_MUL, ms_operand_tensor(x), ms_operand_number(2, MS_FLOAT64)), "MulBackward0");
  check_recorded(ms_unary(MS_OP_EXP, x), "ExpBackward0");
  check_recorded(ms_reduce(MS_RED_SUM, x, (ms_reduce_opts){.all = true}), "SumBackward0");
  check_recorded(ms_mm(x, wt), "MmBackward0");
  check_recorded(ms_tensor_view(x, 1, (int64_t[]){6}), "ViewBackward0");
  check_recorded(ms_tensor_to_dtype(x, MS_FLOAT64), "ToCopyBackward0");
  check_recorded(ms_tensor_cat((ms_tensor *[]){x, w}, 2, 0), "CatBackward0");
  ms_tensor_release(wt), ms_tensor_release(w), ms_tensor_release(x);
}

/* The gradient through public ops composed of native ones is unchanged: d/dx sum(exp(x) * x). */
static void test_gradient_through_layers(void) {
  ms_tensor *x = leaf();
  ms_tensor *e = ms_unary(MS_OP_EXP, x);
  ms_tensor *p = ms_binary(MS_OP_MUL, ms_operand_tensor(e), ms_operand_tensor(x));
  ms_tensor *s = ms_reduce(MS_RED_SUM, p, (ms_reduce_opts){.all = true});
  CHECK(s && ms_backward(s, NULL, false) == MS_OK && x->grad);
  for (int i = 0; x->grad && i < 6; i++) CHECK_NEAR(ms_tensor_get_flat(x->grad, i), exp(i + 1.0) * (i + 2.0), 1e-3);
  ms_tensor_release(s), ms_tensor_release(p), ms_tensor_release(e), ms_tensor_release(x);
}

/* ---- the destructor: through the installed function, and only for tensors with state -------- */

static ms_tensor_free_fn autograd_free;
static int frees;

static void counting_free(ms_tensor *t) {
  frees++;
  autograd_free(t);
}

static ms_status keep_grad(void *ctx, ms_tensor *grad, ms_tensor **replace) {
  (void)ctx, (void)grad, (void)replace;
  return MS_OK;
}

static void test_release_frees_through_installed_function(void) {
  ms_tensor *x = leaf();
  ms_tensor *y = ms_unary(MS_OP_EXP, x); /* autograd has made a node: its free is installed */
  autograd_free = tensor_set_autograd_free(counting_free);
  CHECK(autograd_free != NULL);
  ms_tensor *plain = ms_tensor_new_zeros(1, (int64_t[]){3}, MS_FLOAT32);
  ms_tensor_release(plain);
  CHECK(frees == 0); /* no autograd state: not called */
  ms_tensor *v = ms_tensor_view(x, 1, (int64_t[]){6}); /* grad_fn and grad_base */
  ms_tensor_release(v);
  CHECK(frees == 1);
  ms_tensor_release(y); /* grad_fn: its node goes too */
  CHECK(frees == 2);
  CHECK(ms_tensor_register_hook(x, keep_grad, NULL, NULL) > 0); /* hooks only */
  ms_tensor_release(x);
  CHECK(frees == 3);
  CHECK(tensor_set_autograd_free(autograd_free) == counting_free);
}

int main(void) {
  test_native_ops_record_nothing();
  test_public_ops_record();
  test_gradient_through_layers();
  test_release_frees_through_installed_function();
  return ms_test_finish();
}
