/* test_tensor.c: the engine's core objects from C, as a host program sees them: storage
 * lifetime and re-materialization, views sharing storage, external data, refcounts, memory
 * statistics, and error messages. */
#include <stdlib.h>

#include "moonshard/moonshard.h"
#include "test.h"

static int deleter_calls;
static void count_deleter(void *data, void *ctx) {
  (void)data;
  deleter_calls++;
  CHECK(ctx == (void *)&deleter_calls);
}

static void test_storage_release_and_materialize(void) {
  ms_memory_stats before = ms_memory_stats_get();
  ms_tensor *t = ms_tensor_new_full(2, (int64_t[]){4, 8}, MS_FLOAT32, 3.0);
  ms_tensor *v = ms_tensor_narrow(t, 1, 2, 4); /* a view across the release */
  CHECK(ms_memory_stats_get().current - before.current == 4 * 8 * 4);
  ms_storage_release_data(t->storage);
  CHECK(!ms_storage_is_materialized(v->storage));
  CHECK(ms_tensor_data(v) == NULL);
  CHECK(ms_memory_stats_get().current == before.current);
  /* ops on released data fail with a message instead of touching freed memory */
  CHECK(ms_unary(MS_OP_EXP, v) == NULL);
  CHECK_ERROR_HAS("released");
  CHECK(ms_storage_materialize(t->storage) == MS_OK);
  CHECK(ms_tensor_fill_(t, 5.0) == MS_OK);
  CHECK(ms_tensor_get_flat(v, 3) == 5.0);
  CHECK(v->offset == 2 && v->strides[0] == 8);
  ms_tensor_release(v);
  ms_tensor_release(t);
  CHECK(ms_memory_stats_get().current == before.current);
}

static void test_views_share_storage(void) {
  ms_tensor *t = ms_tensor_new_arange(0, 12, 1, MS_FLOAT32);
  ms_tensor *m = ms_tensor_view(t, 2, (int64_t[]){3, 4});
  ms_tensor *tr = ms_tensor_transpose(m, 0, 1);
  CHECK(m->storage == t->storage && tr->storage == t->storage);
  CHECK(!ms_tensor_is_contiguous(tr));
  ms_tensor_set_flat(tr, 1, 100); /* tr[0][1] is m[1][0], t[4] */
  CHECK(ms_tensor_get_flat(t, 4) == 100);
  /* a transposed view cannot be flattened without a copy: view refuses, reshape copies */
  CHECK(ms_tensor_view(tr, 1, (int64_t[]){12}) == NULL);
  CHECK_ERROR_HAS("use reshape");
  ms_tensor *r = ms_tensor_reshape(tr, 1, (int64_t[]){-1});
  CHECK(r && r->storage != t->storage && r->shape[0] == 12);
  CHECK(ms_tensor_get_flat(r, 1) == 4 + 96); /* 100 */
  ms_tensor *row = ms_tensor_select(m, 0, 0);
  ms_tensor *e = ms_tensor_expand(row, 2, (int64_t[]){5, 4});
  CHECK(e && e->strides[0] == 0 && e->shape[0] == 5 && e->storage == t->storage);
  ms_tensor_release(e), ms_tensor_release(row);
  ms_tensor_release(r), ms_tensor_release(tr), ms_tensor_release(m), ms_tensor_release(t);
}

static void test_external_data(void) {
  float buf[6] = {1, 2, 3, 4, 5, 6};
  deleter_calls = 0;
  ms_tensor *t = ms_tensor_new_from_data(buf, MS_FLOAT32, 2, (int64_t[]){2, 3}, count_deleter, &deleter_calls);
  ms_tensor *s = ms_reduce(MS_RED_SUM, t, (ms_reduce_opts){.all = true});
  CHECK_NEAR(ms_tensor_get_flat(s, 0), 21, 0);
  CHECK(ms_binary_(MS_OP_MUL, t, ms_operand_number(2, MS_INT64)) == MS_OK);
  CHECK(buf[5] == 12); /* written in place, no copy */
  ms_tensor *v = ms_tensor_select(t, 0, 1);
  ms_tensor_release(t);
  CHECK(deleter_calls == 0); /* the view still holds the storage */
  ms_tensor_release(v);
  CHECK(deleter_calls == 1);
  ms_tensor_release(s);
}

static void test_refcounts(void) {
  ms_tensor *t = ms_tensor_new_zeros(1, (int64_t[]){3}, MS_INT64);
  ms_tensor_retain(t);
  CHECK(atomic_load(&t->refcount) == 2);
  ms_tensor_release(t);
  ms_tensor *c = ms_tensor_contiguous(t); /* already contiguous: the same object, retained */
  CHECK(c == t && atomic_load(&t->refcount) == 2);
  ms_tensor_release(c);
  ms_tensor_release(t);
  ms_tensor_release(NULL); /* allowed */
}

static void test_versions(void) {
  ms_tensor *t = ms_tensor_new_zeros(1, (int64_t[]){4}, MS_FLOAT32);
  ms_tensor *v = ms_tensor_narrow(t, 0, 1, 2);
  int v0 = ms_tensor_version(t);
  CHECK(ms_tensor_fill_(v, 1) == MS_OK);
  CHECK(ms_tensor_version(t) == v0 + 1); /* shared by every view */
  CHECK(ms_binary_(MS_OP_ADD, t, ms_operand_number(1, MS_INT64)) == MS_OK);
  CHECK(ms_tensor_version(v) == v0 + 2);
  ms_tensor_release(v), ms_tensor_release(t);
}

static void test_errors_name_op_and_shapes(void) {
  ms_tensor *a = ms_tensor_new_zeros(2, (int64_t[]){64, 784}, MS_FLOAT32);
  ms_tensor *b = ms_tensor_new_zeros(2, (int64_t[]){10, 3}, MS_FLOAT32);
  CHECK(ms_binary(MS_OP_ADD, ms_operand_tensor(a), ms_operand_tensor(b)) == NULL);
  CHECK_ERROR_HAS("add: shapes (64, 784) and (10, 3) do not broadcast");
  CHECK(ms_mm(a, b) == NULL);
  CHECK_ERROR_HAS("mm: shapes (64, 784) and (10, 3) cannot be multiplied");
  CHECK(ms_tensor_new_empty(1, (int64_t[]){-1}, MS_FLOAT32) == NULL);
  CHECK_ERROR_HAS("non-negative");
  CHECK(ms_tensor_new_empty(MS_MAX_DIMS + 1, (int64_t[MS_MAX_DIMS + 1]){0}, MS_FLOAT32) == NULL);
  CHECK_ERROR_HAS("dimensions");
  CHECK(ms_tensor_select(a, 0, 64) == NULL);
  CHECK_ERROR_HAS("index 64 is out of bounds for dimension 0 with size 64");
  ms_tensor *ints = ms_tensor_new_zeros(1, (int64_t[]){2}, MS_INT64);
  CHECK(ms_reduce(MS_RED_MEAN, ints, (ms_reduce_opts){.all = true}) == NULL);
  CHECK_ERROR_HAS("floating point");
  ms_tensor_release(ints);
  ms_tensor_release(a), ms_tensor_release(b);
}

/* split by a list of sizes: views of the sizes listed; sizes that are negative, that do not sum
 * to the dim's size, or none at all are refused with a message naming the argument. */
static void test_split_with_sizes(void) {
  ms_tensor *t = ms_tensor_new_zeros(2, (int64_t[]){2, 7}, MS_FLOAT32);
  ms_tensor **p = ms_tensor_split_with_sizes(t, (int64_t[]){3, 0, 4}, 3, -1);
  CHECK(p && p[0]->shape[1] == 3 && p[1]->shape[1] == 0 && p[2]->shape[1] == 4);
  CHECK(p && p[2]->offset == 3 && p[2]->storage == t->storage);
  for (int i = 0; p && i < 3; i++) ms_tensor_release(p[i]);
  free(p);
  CHECK(ms_tensor_split_with_sizes(t, (int64_t[]){3, -1, 5}, 3, 1) == NULL);
  CHECK_ERROR_HAS("split_sizes[1] must be non-negative, got -1");
  CHECK(ms_tensor_split_with_sizes(t, (int64_t[]){3, 3}, 2, 1) == NULL);
  CHECK_ERROR_HAS("must sum to dim 1's size 7");
  CHECK(ms_tensor_split_with_sizes(t, (int64_t[]){5, INT64_MAX}, 2, 1) == NULL);
  CHECK_ERROR_HAS("exceed");
  CHECK(ms_tensor_split_with_sizes(t, (int64_t[]){7}, 0, 1) == NULL);
  CHECK_ERROR_HAS("at least one size");
  CHECK(ms_tensor_split_with_sizes(t, (int64_t[]){7}, 1, 2) == NULL);
  CHECK_ERROR_HAS("dim out of range");
  ms_tensor_release(t);
}

static void test_dtype_names(void) {
  ms_dtype dt;
  CHECK(ms_dtype_from_name("torch.float64", &dt) && dt == MS_FLOAT64);
  CHECK(ms_dtype_from_name("long", &dt) && dt == MS_INT64);
  CHECK(!ms_dtype_from_name("float128", &dt));
  CHECK(ms_dtype_size(MS_BFLOAT16) == 2 && ms_dtype_size(MS_BOOL) == 1);
}

static void test_float64_matmul_against_naive_loop(void) {
  int64_t M = 37, K = 29, N = 41;
  ms_manual_seed(7);
  ms_tensor *a = ms_tensor_new_empty(2, (int64_t[]){M, K}, MS_FLOAT64);
  ms_tensor *b = ms_tensor_new_empty(2, (int64_t[]){N, K}, MS_FLOAT64);
  CHECK(ms_tensor_normal_(a, 0, 1) == MS_OK && ms_tensor_normal_(b, 0, 1) == MS_OK);
  ms_tensor *bt = ms_tensor_transpose(b, 0, 1); /* strided operand, no copy */
  ms_tensor *c = ms_mm(a, bt);
  double worst = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double want = 0;
      for (int64_t k = 0; k < K; k++) want += ms_tensor_get_flat(a, i * K + k) * ms_tensor_get_flat(b, j * K + k);
      double err = fabs(ms_tensor_get_flat(c, i * N + j) - want);
      worst = err > worst ? err : worst;
    }
  CHECK_NEAR(worst, 0, 1e-12);
  ms_tensor_release(c), ms_tensor_release(bt), ms_tensor_release(a), ms_tensor_release(b);
}

int main(void) {
  test_storage_release_and_materialize();
  test_views_share_storage();
  test_external_data();
  test_refcounts();
  test_versions();
  test_errors_name_op_and_shapes();
  test_split_with_sizes();
  test_dtype_names();
  test_float64_matmul_against_naive_loop();
  return ms_test_finish();
}
