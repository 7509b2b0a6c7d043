/* test_fsdp_runtime.c: FSDP's per-step runtime from C (moonshard/fsdp_runtime.h) on the world of
 * one: bad arguments get errors naming the function and the argument; a unit is read through
 * its accessors; prefetching follows the order recorded on the previous iteration (forward and
 * BACKWARD_PRE); and the hooks a forward leaves keep the units and the root alive when the caller
 * drops them before backward. (examples/fsdp trains with it on 1 and 2 ranks.) */
#include "moonshard/autograd.h"
#include "moonshard/dist.h"
#include "moonshard/fsdp_runtime.h"
#include "moonshard/nn_ops.h"
#include "moonshard/ops.h"
#include "test.h"

static ms_tensor *param(int64_t rows, int64_t cols, double v) {
  int64_t shape[2] = {rows, cols};
  ms_tensor *t = ms_tensor_new_full_on((ms_device){MS_CPU, 0}, 2, shape, MS_FLOAT32, v);
  CHECK(t != NULL);
  if (t) t->requires_grad = true;
  return t;
}

/* Two FULL_SHARD units of one weight each: the root's (a, 4x3) and b (2x4) nested in it. */
typedef struct model {
  ms_flat_param *units[2];
  ms_fsdp_state *root;
} model;

static model make(bool forward_prefetch, ms_fsdp_backward_prefetch backward) {
  model m = {{NULL, NULL}, NULL};
  ms_tensor *w[2] = {param(4, 3, 0.5), param(2, 4, -0.25)};
  for (int u = 0; u < 2; u++) {
    m.units[u] = ms_flat_param_create(&w[u], 1, NULL, MS_FSDP_FULL_SHARD, false);
    CHECK(m.units[u] && ms_flat_param_install_hooks(m.units[u]) == MS_OK);
    CHECK(ms_fsdp_set_prefetch(m.units[u], forward_prefetch, backward) == MS_OK);
    ms_tensor_release(w[u]);
  }
  m.root = ms_fsdp_state_new(m.units, 2, m.units[0]);
  CHECK(m.root != NULL);
  return m;
}

/* One forward through the runtime; returns sum(b(a(x))) (new reference). */
static ms_tensor *forward(model *m) {
  int64_t shape[2] = {5, 3};
  ms_tensor *x = ms_tensor_new_full_on((ms_device){MS_CPU, 0}, 2, shape, MS_FLOAT32, 1.0);
  CHECK(ms_fsdp_root_pre_forward(m->root) == MS_OK && ms_fsdp_pre_forward(m->units[0]) == MS_OK);
  ms_tensor *h = ms_linear(x, ms_flat_param_compute_view(m->units[0], 0), NULL);
  CHECK(h && ms_fsdp_pre_forward(m->units[1]) == MS_OK);
  ms_tensor *y = ms_linear(h, ms_flat_param_compute_view(m->units[1], 0), NULL);
  CHECK(y && ms_fsdp_post_forward(m->units[1], &y, 1) == MS_OK && ms_fsdp_post_forward(m->units[0], &y, 1) == MS_OK);
  CHECK(ms_fsdp_root_post_forward(m->root, &y, 1) == MS_OK);
  ms_tensor *loss = ms_reduce(MS_RED_SUM, y, (ms_reduce_opts){.all = true});
  ms_tensor_release(y), ms_tensor_release(h), ms_tensor_release(x);
  return loss;
}

static void step(model *m) {
  ms_tensor *loss = forward(m);
  CHECK(loss && ms_backward(loss, NULL, false) == MS_OK);
  ms_tensor_release(loss);
}

static void free_model(model *m) {
  ms_fsdp_state_free(m->root);
  ms_flat_param_free(m->units[0]), ms_flat_param_free(m->units[1]);
}

static void test_bad_arguments(void) {
  model m = make(false, MS_FSDP_PREFETCH_NONE);
  CHECK(ms_fsdp_state_new(NULL, 2, NULL) == NULL);
  CHECK_ERROR_HAS("ms_fsdp_state_new: bad argument #1 (units)");
  CHECK(ms_fsdp_state_new(m.units, 1, m.units[1]) == NULL);
  CHECK_ERROR_HAS("bad argument #3 (root_unit): expected NULL or one of the units");
  CHECK(ms_fsdp_set_prefetch(m.units[0], false, (ms_fsdp_backward_prefetch)7) != MS_OK);
  CHECK_ERROR_HAS("ms_fsdp_set_prefetch: bad argument #3 (backward)");
  CHECK(ms_fsdp_pre_forward(NULL) != MS_OK);
  CHECK_ERROR_HAS("ms_fsdp_pre_forward: bad argument #1 (unit): expected a unit, got NULL");
  CHECK(ms_fsdp_root_pre_forward(NULL) != MS_OK);
  CHECK_ERROR_HAS("ms_fsdp_root_pre_forward: bad argument #1 (root)");
  CHECK(ms_fsdp_post_forward(m.units[0], NULL, 1) != MS_OK);
  CHECK_ERROR_HAS("ms_fsdp_post_forward: bad argument #2 (outs)");
  CHECK(ms_flat_param_piece(m.units[0], 1) == NULL);
  CHECK_ERROR_HAS("ms_flat_param_piece: bad argument #2 (i): expected a parameter index in [0, 1), got 1");
  CHECK(ms_flat_param_piece_offset(m.units[0], -1) == -1);
  ms_flat_param_info info;
  ms_flat_param_get_info(m.units[1], &info);
  CHECK(info.numel == 8 && info.nparams == 1 && info.world == 1 && info.strategy == MS_FSDP_FULL_SHARD);
  CHECK(info.dtype == MS_FLOAT32 && info.param_dtype == MS_FLOAT32 && !info.offloaded);
  free_model(&m);
}

/* Iteration 1 records the order and prefetches nothing; later ones prefetch b in a's
 * pre-forward, and (BACKWARD_PRE) a when b's backward begins: a is the root's unit, kept
 * gathered from forward into backward, so nothing is left to gather for it. */
static void test_prefetch_follows_the_recorded_order(void) {
  model m = make(true, MS_FSDP_BACKWARD_PRE);
  step(&m);
  CHECK(ms_flat_param_stats(m.units[1])->prefetch_calls == 0);
  CHECK(ms_flat_param_stats(m.units[1])->allgather_calls == 2); /* forward, and backward after the reshard */
  step(&m);
  step(&m);
  CHECK(ms_flat_param_stats(m.units[1])->prefetch_calls == 2);
  CHECK(ms_flat_param_stats(m.units[1])->allgather_calls == 6);
  CHECK(ms_flat_param_stats(m.units[0])->allgather_calls == 3 && ms_flat_param_stats(m.units[0])->prefetch_calls == 0);
  CHECK(ms_flat_param_stats(m.units[0])->reduce_calls == 3);
  free_model(&m);
}

/* The caller drops the root and the units between forward and backward: the hooks on the
 * outputs hold them, so the reductions still land in the pieces' grads. */
static void test_hooks_keep_units_alive(void) {
  model m = make(false, MS_FSDP_PREFETCH_NONE);
  ms_tensor *piece = ms_flat_param_piece(m.units[1], 0);
  ms_tensor_retain(piece);
  ms_tensor *loss = forward(&m);
  free_model(&m);
  CHECK(loss && ms_backward(loss, NULL, false) == MS_OK);
  CHECK(piece->grad != NULL && ms_tensor_numel(piece->grad) == 8);
  double g = 0;
  ms_tensor *g0 = piece->grad ? ms_tensor_narrow(piece->grad, 0, 0, 1) : NULL;
  CHECK(g0 && ms_tensor_item(g0, &g) == MS_OK);
  CHECK_NEAR(g, 5 * 3 * 0.5, 1e-6); /* d sum(b a x) / d b[0][0] = sum over rows of (a x)[0] */
  ms_tensor_release(g0);
  ms_tensor_release(loss);
  ms_tensor_release(piece);
}

/* A backward that reads parameters whose buffer was released (no pre-backward hook gathered them
 * again) fails naming the node, instead of reading freed memory. */
static void test_backward_through_a_released_buffer(void) {
  ms_tensor *w = param(2, 3, 0.5), *x = param(4, 3, 1.0);
  ms_flat_param *u = ms_flat_param_create(&w, 1, NULL, MS_FSDP_FULL_SHARD, false);
  ms_tensor_release(w);
  CHECK(u && ms_flat_param_gather_compute(u, false) == MS_OK);
  ms_tensor *y = u ? ms_linear(x, ms_flat_param_compute_view(u, 0), NULL) : NULL;
  ms_tensor *loss = y ? ms_reduce(MS_RED_SUM, y, (ms_reduce_opts){.all = true}) : NULL;
  ms_flat_param_release(u);
  CHECK(loss && ms_backward(loss, NULL, false) != MS_OK);
  CHECK(strstr(ms_error_last(), "saved for its gradient has had its storage released") != NULL);
  ms_tensor_release(loss), ms_tensor_release(y), ms_tensor_release(x);
  ms_flat_param_free(u);
}

int main(void) {
  CHECK(ms_dist_init("self", 0) == MS_OK);
  test_bad_arguments();
  test_prefetch_follows_the_recorded_order();
  test_hooks_keep_units_alive();
  test_backward_through_a_released_buffer();
  ms_dist_destroy();
  return ms_test_finish();
}
