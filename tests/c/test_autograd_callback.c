/* test_autograd_callback.c: ms_autograd_queue_callback: callbacks queued during a backward run
 * once, in queue order, after the graph walk (every leaf grad is there), including those queued
 * by callbacks; a failing one becomes backward's error; outside a backward queueing fails. */
#include "moonshard/moonshard.h"
#include "test.h"

static int order[8], norder;
static ms_tensor *g_leaf;
static bool leaf_had_grad;

static ms_status record(void *ctx) {
  order[norder++] = (int)(intptr_t)ctx;
  leaf_had_grad = g_leaf->grad != NULL;
  return MS_OK;
}

static ms_status queue_more(void *ctx) {
  order[norder++] = (int)(intptr_t)ctx;
  return ms_autograd_queue_callback(record, (void *)(intptr_t)99);
}

static ms_status fail(void *ctx) {
  (void)ctx;
  order[norder++] = -1;
  return ms_error(MS_ERR_RUNTIME, "callback says no");
}

/* A hook on the intermediate (runs during the walk) queues the callbacks. */
static int g_mode;
static ms_status queue_from_hook(void *ctx, ms_tensor *grad, ms_tensor **replace) {
  (void)ctx, (void)grad, (void)replace;
  ms_status st = ms_autograd_queue_callback(record, (void *)(intptr_t)1);
  if (st == MS_OK) st = ms_autograd_queue_callback(g_mode ? fail : queue_more, (void *)(intptr_t)2);
  if (st == MS_OK) st = ms_autograd_queue_callback(record, (void *)(intptr_t)3);
  return st;
}

static ms_status run_backward(int mode) {
  g_mode = mode, norder = 0, leaf_had_grad = false;
  g_leaf = ms_tensor_new_full(1, (int64_t[]){3}, MS_FLOAT32, 2.0);
  g_leaf->requires_grad = true;
  ms_tensor *y = ms_binary(MS_OP_MUL, ms_operand_tensor(g_leaf), ms_operand_tensor(g_leaf));
  CHECK(ms_tensor_register_hook(y, queue_from_hook, NULL, NULL) > 0);
  ms_tensor *g = ms_tensor_new_full(1, (int64_t[]){3}, MS_FLOAT32, 1.0);
  ms_status st = ms_backward(y, g, false);
  ms_tensor_release(g), ms_tensor_release(y), ms_tensor_release(g_leaf);
  return st;
}

int main(void) {
  CHECK(ms_autograd_queue_callback(record, NULL) != MS_OK);
  CHECK_ERROR_HAS("no backward is running");

  CHECK(run_backward(0) == MS_OK);
  CHECK(norder == 4);
  CHECK(order[0] == 1 && order[1] == 2 && order[2] == 3 && order[3] == 99);
  CHECK(leaf_had_grad); /* after the walk: the leaf's grad was accumulated */

  CHECK(run_backward(1) != MS_OK);
  CHECK_ERROR_HAS("callback says no");
  CHECK(norder == 3 && order[1] == -1 && order[2] == 3); /* the rest still ran */

  /* the queue belonged to that backward: nothing is left over */
  CHECK(ms_autograd_queue_callback(record, NULL) != MS_OK);
  return ms_test_finish();
}
