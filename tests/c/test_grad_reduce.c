/* test_grad_reduce.c: gradients of the reductions that only C reaches: max and min over a dim
 * without indices (PyTorch's amax/amin: ties share the gradient evenly per row), and the
 * values/indices form, whose gradient must survive the caller shifting the indices in place. */
#include "moonshard/moonshard.h"
#include "test.h"

/* A (2, 3) float64 leaf that requires grad. */
static ms_tensor *leaf_2x3(const double *v) {
  ms_tensor *t = ms_tensor_new_empty(2, (int64_t[]){2, 3}, MS_FLOAT64);
  for (int i = 0; i < 6; i++) ms_tensor_set_flat(t, i, v[i]);
  t->requires_grad = true;
  return t;
}

/* Backpropagates sum(out) and checks the leaf's gradient against want (6 values). */
static void check_grad(ms_tensor *x, ms_tensor *out, const double *want) {
  ms_tensor *s = ms_reduce(MS_RED_SUM, out, (ms_reduce_opts){.all = true});
  CHECK(s && ms_backward(s, NULL, false) == MS_OK);
  CHECK(x->grad != NULL);
  for (int i = 0; x->grad && i < 6; i++) CHECK_NEAR(ms_tensor_get_flat(x->grad, i), want[i], 1e-12);
  ms_tensor_release(s);
}

static void test_amax_ties(void) {
  ms_tensor *x = leaf_2x3((double[]){1, 4, 4, -2, -2, -2});
  ms_tensor *m = ms_reduce(MS_RED_MAX, x, (ms_reduce_opts){.dim = 1});
  CHECK(m && m->grad_fn && strcmp(m->grad_fn->name, "AmaxBackward0") == 0);
  check_grad(x, m, (double[]){0, 0.5, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  ms_tensor_release(m);
  ms_tensor_release(x);
}

static void test_amin_keepdim(void) {
  ms_tensor *x = leaf_2x3((double[]){1, 4, 1, 0, 5, 6});
  ms_tensor *m = ms_reduce(MS_RED_MIN, x, (ms_reduce_opts){.dim = -2, .keepdim = true});
  CHECK(m && m->ndim == 2 && strcmp(m->grad_fn->name, "AminBackward0") == 0);
  check_grad(x, m, (double[]){0, 1, 1, 1, 0, 0});
  ms_tensor_release(m);
  ms_tensor_release(x);
}

static void test_indices_shifted(void) {
  ms_tensor *x = leaf_2x3((double[]){3, 1, 2, 0, 9, 9});
  ms_tensor *v = NULL, *idx = NULL;
  CHECK(ms_reduce_with_indices(MS_RED_MAX, x, 1, false, &v, &idx) == MS_OK);
  CHECK(strcmp(v->grad_fn->name, "MaxBackward0") == 0 && !idx->requires_grad);
  /* the Lua face does this to make them 1-based; the node must keep its own copy */
  CHECK(ms_binary_(MS_OP_ADD, idx, ms_operand_number(1, MS_INT64)) == MS_OK);
  int64_t second = ms_tensor_get_flat_int(idx, 1) - 1;
  double want[6] = {1, 0, 0, 0, 0, 0};
  want[3 + second] = 1;
  check_grad(x, v, want);
  ms_tensor_release(v), ms_tensor_release(idx), ms_tensor_release(x);
}

static void test_no_grad_records_nothing(void) {
  ms_tensor *x = leaf_2x3((double[]){1, 2, 3, 4, 5, 6});
  bool prev = ms_grad_set_enabled(false);
  ms_tensor *m = ms_reduce(MS_RED_MEAN, x, (ms_reduce_opts){.all = true});
  ms_tensor *u = ms_unary(MS_OP_EXP, x);
  ms_grad_set_enabled(prev);
  CHECK(m && !m->requires_grad && !m->grad_fn);
  CHECK(u && !u->requires_grad && !u->grad_fn);
  ms_tensor_release(m), ms_tensor_release(u), ms_tensor_release(x);
}

int main(void) {
  test_amax_ties();
  test_amin_keepdim();
  test_indices_shifted();
  test_no_grad_records_nothing();
  return ms_test_finish();
}
