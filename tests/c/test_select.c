/* test_select.c: the C face of gather, scatter, sort and cumsum: index base 0 (C's) and 1 (the Lua
 * face's) give the same result, errors count positions and dims in the caller's base, and a
 * gradient flows through gather from C. */
#include "moonshard/moonshard.h"
#include "test.h"

static ms_tensor *filled(int ndim, const int64_t *shape, ms_dtype dt, const double *v) {
  ms_tensor *t = ms_tensor_new_empty(ndim, shape, dt);
  for (int64_t i = 0; i < ms_tensor_numel(t); i++) ms_tensor_set_flat(t, i, v[i]);
  return t;
}

static void test_gather_bases(void) {
  ms_tensor *x = filled(2, (int64_t[]){2, 3}, MS_FLOAT64, (double[]){10, 20, 30, 40, 50, 60});
  ms_tensor *i0 = filled(2, (int64_t[]){2, 2}, MS_INT64, (double[]){2, 0, 1, 1});
  ms_tensor *i1 = filled(2, (int64_t[]){2, 2}, MS_INT64, (double[]){3, 1, 2, 2});
  ms_tensor *a = ms_gather(x, 1, i0, 0), *b = ms_gather(x, -1, i1, 1);
  CHECK(a && b && ms_equal(a, b));
  const double want[] = {30, 10, 50, 50};
  for (int k = 0; a && k < 4; k++) CHECK_NEAR(ms_tensor_get_flat(a, k), want[k], 0);
  /* out of range: the value and the dim in the caller's base */
  CHECK(ms_gather(x, 1, i1, 0) == NULL);
  CHECK_ERROR_HAS("index value 3 is out of range for dim 1 of size 3 (expected 0..2)");
  CHECK(ms_gather(x, 1, i0, 1) == NULL);
  CHECK_ERROR_HAS("index value 0 is out of range for dim 2 of size 3 (expected 1..3)");
  ms_tensor_release(a), ms_tensor_release(b), ms_tensor_release(i0), ms_tensor_release(i1), ms_tensor_release(x);
}

static void test_gather_grad(void) {
  ms_tensor *x = filled(1, (int64_t[]){3}, MS_FLOAT64, (double[]){1, 2, 3});
  x->requires_grad = true;
  ms_tensor *i = filled(1, (int64_t[]){4}, MS_INT64, (double[]){2, 2, 0, 2});
  ms_tensor *y = ms_gather(x, 0, i, 0);
  ms_tensor *s = y ? ms_reduce(MS_RED_SUM, y, (ms_reduce_opts){.all = true}) : NULL;
  CHECK(y && strcmp(y->grad_fn->name, "GatherBackward0") == 0);
  CHECK(s && ms_backward(s, NULL, false) == MS_OK && x->grad);
  const double want[] = {1, 0, 3};
  for (int k = 0; x->grad && k < 3; k++) CHECK_NEAR(ms_tensor_get_flat(x->grad, k), want[k], 0);
  ms_tensor_release(s), ms_tensor_release(y), ms_tensor_release(i), ms_tensor_release(x);
}

static void test_scatter_sort_scan(void) {
  ms_tensor *x = ms_tensor_new_zeros_on((ms_device){MS_CPU, 0}, 1, (int64_t[]){4}, MS_FLOAT32);
  ms_tensor *i = filled(1, (int64_t[]){3}, MS_INT64, (double[]){3, 0, 3});
  ms_tensor *src = filled(1, (int64_t[]){3}, MS_FLOAT32, (double[]){1, 2, 4});
  CHECK(ms_scatter_(x, 0, i, ms_operand_tensor(src), MS_SCATTER_ADD, 0) == MS_OK);
  const double added[] = {2, 0, 0, 5};
  for (int k = 0; k < 4; k++) CHECK_NEAR(ms_tensor_get_flat(x, k), added[k], 0);
  ms_tensor *v, *p;
  CHECK(ms_sort(x, 0, true, true, &v, &p) == MS_OK);
  const double order[] = {3, 0, 1, 2}; /* 0-based, the two zeros in their order */
  for (int k = 0; k < 4; k++) CHECK_NEAR(ms_tensor_get_flat(p, k), order[k], 0);
  ms_tensor *c = ms_scan(MS_SCAN_CUMSUM, x, 0);
  CHECK(c && ms_tensor_get_flat(c, 3) == 7);
  CHECK(ms_scatter(x, 0, i, ms_operand_number(1, MS_INT64), MS_SCATTER_ADD, 0) == NULL);
  CHECK_ERROR_HAS("scatter_add: src must be a tensor");
  ms_tensor_release(c), ms_tensor_release(v), ms_tensor_release(p);
  ms_tensor_release(src), ms_tensor_release(i), ms_tensor_release(x);
}

int main(void) {
  test_gather_bases();
  test_gather_grad();
  test_scatter_sort_scan();
  return ms_test_finish();
}
