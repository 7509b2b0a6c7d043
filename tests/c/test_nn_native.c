/* test_nn_native.c: the nn ops on both sides of issue 18's layering. The native nn ops
 * (engine/src/nn, nn/nn_native.h) compute and record nothing, even on tensors that require grad
 * with grad mode on, and hand back what their backward reads; the public ops over them
 * (engine/src/autograd/grad_<file>.c) record PyTorch's node, borrow their arguments, and give
 * the gradients the native backwards compute. */
#include "engine/src/nn/nn_native.h"
#include "moonshard/moonshard.h"
#include "test.h"

/* A float32 leaf of the given shape that requires grad, filled from the tests' sequence. */
static ms_tensor *leaf(int ndim, const int64_t *shape) {
  ms_tensor *t = ms_tensor_new_empty(ndim, shape, MS_FLOAT32);
  for (int64_t i = 0, n = ms_tensor_numel(t); i < n; i++) ms_tensor_set_flat(t, i, ms_test_uniform());
  t->requires_grad = true;
  return t;
}

/* out was computed and carries no graph. Releases out. */
static void check_plain(ms_tensor *out) {
  CHECK(out != NULL);
  if (!out) return;
  CHECK(!out->requires_grad && !out->grad_fn);
  ms_tensor_release(out);
}

/* out was computed and recorded as `node`. Releases out. */
static void check_recorded(ms_tensor *out, const char *node) {
  CHECK(out && out->requires_grad && out->grad_fn && strcmp(out->grad_fn->name, node) == 0);
  if (out && out->grad_fn && strcmp(out->grad_fn->name, node) != 0)
    fprintf(stderr, "  recorded %s, expected %s\n", out->grad_fn->name, node);
  ms_tensor_release(out);
}

static bool same_values(const ms_tensor *a, const ms_tensor *b) {
  if (!a || !b || ms_tensor_numel(a) != ms_tensor_numel(b)) return false;
  for (int64_t i = 0, n = ms_tensor_numel(a); i < n; i++)
    if (ms_tensor_get_flat(a, i) != ms_tensor_get_flat(b, i)) return false;
  return true;
}

static const int64_t one[2] = {1, 1}, two[2] = {2, 2}, zero[2] = {0, 0};

static void test_native_nn_ops_record_nothing(void) {
  CHECK(ms_grad_enabled());
  ms_tensor *x = leaf(2, (int64_t[]){4, 3}), *w = leaf(2, (int64_t[]){5, 3}), *b = leaf(1, (int64_t[]){5});
  ms_tensor *img = leaf(4, (int64_t[]){1, 2, 4, 4}), *cw = leaf(4, (int64_t[]){3, 2, 3, 3});
  ms_tensor *target = ms_tensor_new_zeros(1, (int64_t[]){4}, MS_INT64);
  check_plain(native_activation(MS_ACT_GELU, x));
  check_plain(native_softmax(x, -1, true));
  check_plain(native_linear(x, w, b));
  check_plain(native_conv2d(img, cw, NULL, one, one, one, 1));
  check_plain(native_mse_loss(x, x, MS_REDUCTION_MEAN));
  ms_tensor *mask, *idx;
  double scale;
  check_plain(native_dropout(x, 0.5, true, &mask, &scale));
  CHECK(mask && mask->dtype == MS_UINT8 && scale == 2 && !mask->requires_grad);
  ms_tensor_release(mask);
  ms_k_pool2d_geom g;
  ms_tensor *values;
  CHECK(native_max_pool2d(img, two, two, zero, one, false, true, &values, &idx, &g) == MS_OK);
  check_plain(values);
  CHECK(idx && idx->dtype == MS_INT64 && g.oh == 2 && g.ow == 2);
  ms_tensor_release(idx);
  native_norm_saved ns;
  check_plain(native_layer_norm(x, 1, (int64_t[]){3}, NULL, NULL, 1e-5, &ns));
  CHECK(ns.x && !ns.weight && ns.mean && ns.invstd && !ns.mean->requires_grad);
  native_norm_saved_release(&ns);
  native_nll_saved nll;
  check_plain(native_cross_entropy(x, target, NULL, -100, MS_REDUCTION_MEAN, 0.1, 0, &nll));
  CHECK(nll.target && nll.logp && !nll.weight && nll.C == 3 && nll.smoothing == 0.1);
  native_nll_saved_release(&nll);
  ms_tensor_release(target), ms_tensor_release(cw), ms_tensor_release(img);
  ms_tensor_release(b), ms_tensor_release(w), ms_tensor_release(x);
}

/* The public ops record PyTorch's node names and borrow their arguments. */
static void test_public_nn_ops_record(void) {
  ms_tensor *x = leaf(2, (int64_t[]){4, 3}), *w = leaf(2, (int64_t[]){5, 3}), *b = leaf(1, (int64_t[]){5});
  ms_tensor *img = leaf(4, (int64_t[]){1, 2, 4, 4}), *cw = leaf(4, (int64_t[]){3, 2, 3, 3});
  ms_tensor *target = ms_tensor_new_zeros(1, (int64_t[]){4}, MS_INT64);
  check_recorded(ms_gelu(x, false), "GeluBackward0");
  check_recorded(ms_silu(x), "SiluBackward0");
  check_recorded(ms_log_softmax(x, -1), "LogSoftmaxBackward0");
  check_recorded(ms_dropout(x, 0.5, true), "NativeDropoutBackward0");
  check_recorded(ms_linear(x, w, b), "AddmmBackward0");
  check_recorded(ms_linear(x, w, NULL), "MmBackward0");
  check_recorded(ms_layer_norm(x, 1, (int64_t[]){3}, NULL, NULL, 1e-5), "NativeLayerNormBackward0");
  check_recorded(ms_cross_entropy(x, target, NULL, -100, MS_REDUCTION_MEAN, 0, 0), "NllLossBackward0");
  check_recorded(ms_mse_loss(x, x, MS_REDUCTION_SUM), "MseLossBackward0");
  check_recorded(ms_conv2d(img, cw, NULL, one, one, one, 1), "ConvolutionBackward0");
  check_recorded(ms_max_pool2d(img, two, two, zero, one, false), "MaxPool2DWithIndicesBackward0");
  check_recorded(ms_avg_pool2d(img, two, two, zero, false, true), "AvgPool2DBackward0");
  check_recorded(ms_adaptive_avg_pool2d(img, 1, 1), "AdaptiveAvgPool2DBackward0");
  /* a 16-bit input: softmax runs it natively on the CPU (its own node, as PyTorch's); the
   * losses widen it and round back through recorded conversions */
  ms_tensor *h = ms_tensor_to_dtype(x, MS_FLOAT16);
  check_recorded(ms_softmax(h, 0), "SoftmaxBackward0");
  check_recorded(ms_cross_entropy(h, target, NULL, -100, MS_REDUCTION_MEAN, 0, 0), "ToCopyBackward0");
  ms_tensor_release(h);
  /* borrowed: each argument holds only the test's reference (the nodes are gone) */
  ms_tensor *args[] = {x, w, b, img, cw, target};
  for (int i = 0; i < 6; i++) CHECK(atomic_load(&args[i]->refcount) == 1);
  ms_tensor_release(target), ms_tensor_release(cw), ms_tensor_release(img);
  ms_tensor_release(b), ms_tensor_release(w), ms_tensor_release(x);
}

/* The backward the public op records is the native backward: conv2d's gradients through
 * ms_backward equal native_conv2d_backward's, bit for bit. */
static void test_backward_is_native(void) {
  ms_tensor *img = leaf(4, (int64_t[]){2, 2, 5, 4}), *cw = leaf(4, (int64_t[]){3, 2, 3, 2});
  ms_tensor *bias = leaf(1, (int64_t[]){3});
  ms_tensor *y = ms_conv2d(img, cw, bias, one, one, two, 1);
  ms_tensor *s = y ? ms_reduce(MS_RED_SUM, y, (ms_reduce_opts){.all = true}) : NULL;
  CHECK(s && ms_backward(s, NULL, false) == MS_OK);
  ms_tensor *ones = y ? ms_tensor_new_empty(y->ndim, y->shape, MS_FLOAT32) : NULL;
  for (int64_t i = 0; ones && i < ms_tensor_numel(ones); i++) ms_tensor_set_flat(ones, i, 1);
  ms_tensor *grads[3] = {NULL, NULL, NULL};
  CHECK(ones && native_conv2d_backward(img, cw, ones, one, one, two, 1, (bool[]){true, true, true}, grads) == MS_OK);
  CHECK(same_values(grads[0], img->grad) && same_values(grads[1], cw->grad) && same_values(grads[2], bias->grad));
  /* only the gradients asked for are made */
  ms_tensor *only_w[3] = {NULL, NULL, NULL};
  CHECK(ones && native_conv2d_backward(img, cw, ones, one, one, two, 1, (bool[]){false, true, false}, only_w) == MS_OK);
  CHECK(!only_w[0] && !only_w[2] && same_values(only_w[1], cw->grad));
  for (int i = 0; i < 3; i++) ms_tensor_release(grads[i]), ms_tensor_release(only_w[i]);
  ms_tensor_release(ones), ms_tensor_release(s), ms_tensor_release(y);
  ms_tensor_release(bias), ms_tensor_release(cw), ms_tensor_release(img);
}

/* The native ops keep the public errors: the op, the argument, what was expected. */
static void test_native_errors(void) {
  ms_tensor *x = leaf(2, (int64_t[]){4, 3});
  CHECK(native_conv2d(x, x, NULL, one, one, one, 1) == NULL);
  CHECK_ERROR_HAS("conv2d: input must be 4-D (N, C, H, W), got (4, 3)");
  ms_tensor *mask;
  double scale;
  CHECK(native_dropout(x, 1.5, true, &mask, &scale) == NULL && mask == NULL);
  CHECK_ERROR_HAS("dropout: probability has to be between 0 and 1, but got 1.5");
  CHECK(native_softmax(x, 2, true) == NULL);
  CHECK_ERROR_HAS("log_softmax");
  ms_tensor_release(x);
}

int main(void) {
  test_native_nn_ops_record_nothing();
  test_public_nn_ops_record();
  test_backward_is_native();
  test_native_errors();
  return ms_test_finish();
}
