/* test_autograd_callbacks.c: ms_autograd_queue_callback, the end-of-backward primitive FSDP
 * finishes its reductions with: callbacks run once, in queue order, after the walk (so every
 * leaf gradient is there), also after a failed walk (whose error wins), a failing one becomes
 * backward's error while the rest still run, and queueing outside a backward is an error; and
 * ms_autograd_set_progress_fn, called between the walk's nodes (FSDP's collectives progress). */
#include "moonshard/moonshard.h"
#include "test.h"

typedef struct record {
  int order[8];
  int count;
  ms_tensor *leaf; /* whose grad must be complete when a callback runs */
  bool grad_seen;
} record;

typedef struct step {
  record *rec;
  int id;
  bool fail, requeue;
  bool walk_failed; /* what ms_autograd_walk_failed said when it ran */
} step;

static ms_status cb(void *ctx) {
  step *s = ctx;
  record *r = s->rec;
  r->order[r->count++] = s->id;
  r->grad_seen = r->leaf->grad != NULL;
  s->walk_failed = ms_autograd_walk_failed();
  if (s->requeue) {
    s->requeue = false;
    return ms_autograd_queue_callback(cb, s); /* joins the end of the queue */
  }
  return s->fail ? ms_error(MS_ERR_RUNTIME, "callback %d failed", s->id) : MS_OK;
}

/* A post-accumulate hook queueing the callbacks given in ctx (a NULL-terminated list). */
static ms_status queue_all(void *ctx, ms_tensor *param) {
  (void)param;
  for (step **s = ctx; *s; s++)
    if (ms_autograd_queue_callback(cb, *s) != MS_OK) return MS_ERR_RUNTIME;
  return MS_OK;
}

static ms_tensor *leaf(void) {
  ms_tensor *t = ms_tensor_new_full(1, (int64_t[]){3}, MS_FLOAT64, 2.0);
  t->requires_grad = true;
  return t;
}

/* sum(a * b) backward, with the hook (queueing `steps`) on a. */
static ms_status run(ms_tensor *a, ms_tensor *b, step **steps) {
  int h = ms_tensor_register_post_accumulate_hook(a, queue_all, steps, NULL);
  ms_tensor *p = ms_binary(MS_OP_MUL, ms_operand_tensor(a), ms_operand_tensor(b));
  ms_tensor *s = ms_reduce(MS_RED_SUM, p, (ms_reduce_opts){.all = true});
  ms_status st = ms_backward(s, NULL, false);
  ms_tensor_release(s), ms_tensor_release(p);
  ms_tensor_remove_hook(a, h);
  return st;
}

static void test_order_and_timing(void) {
  ms_tensor *a = leaf(), *b = leaf();
  record r = {.leaf = b};
  step s1 = {&r, 1, false, true, false}, s2 = {&r, 2, false, false, false};
  CHECK(run(a, b, (step *[]){&s1, &s2, NULL}) == MS_OK);
  /* a's hook fires before b's grad may exist; the callbacks run after the whole walk */
  CHECK(r.count == 3 && r.order[0] == 1 && r.order[1] == 2 && r.order[2] == 1);
  CHECK(r.grad_seen);
  ms_tensor_release(a), ms_tensor_release(b);
}

static void test_failure(void) {
  ms_tensor *a = leaf(), *b = leaf();
  record r = {.leaf = b};
  step s1 = {&r, 1, true, false, false}, s2 = {&r, 2, false, false, false};
  CHECK(run(a, b, (step *[]){&s1, &s2, NULL}) != MS_OK);
  CHECK_ERROR_HAS("callback 1 failed");
  CHECK(r.count == 2 && r.order[1] == 2); /* the rest still ran, each may release what it holds */
  CHECK(!s2.walk_failed);
  /* the next backward starts with an empty queue */
  r.count = 0;
  s1.fail = false;
  CHECK(run(a, b, (step *[]){&s2, NULL}) == MS_OK);
  CHECK(r.count == 1 && r.order[0] == 2);
  ms_tensor_release(a), ms_tensor_release(b);
}

/* A tensor hook that queues `steps` and then fails the walk. */
static ms_status queue_then_fail(void *ctx, ms_tensor *grad, ms_tensor **replace) {
  (void)grad, (void)replace;
  if (queue_all(ctx, NULL) != MS_OK) return MS_ERR_RUNTIME;
  return ms_error(MS_ERR_RUNTIME, "the walk failed here");
}

static void test_failed_walk(void) {
  ms_tensor *a = leaf(), *b = leaf();
  record r = {.leaf = b};
  step s1 = {&r, 1, true, false, false}, s2 = {&r, 2, false, false, false};
  ms_tensor *p = ms_binary(MS_OP_MUL, ms_operand_tensor(a), ms_operand_tensor(b));
  ms_tensor *s = ms_reduce(MS_RED_SUM, p, (ms_reduce_opts){.all = true});
  CHECK(ms_tensor_register_hook(p, queue_then_fail, (step *[]){&s1, &s2, NULL}, NULL) > 0);
  CHECK(ms_backward(s, NULL, false) != MS_OK);
  CHECK_ERROR_HAS("the walk failed here"); /* not callback 1's */
  CHECK(r.count == 2 && r.order[0] == 1 && r.order[1] == 2); /* queued work is still finished */
  CHECK(s1.walk_failed && s2.walk_failed);
  CHECK(!ms_autograd_walk_failed()); /* only while such callbacks run */
  ms_tensor_release(s), ms_tensor_release(p);
  ms_tensor_release(a), ms_tensor_release(b);
}

static void test_outside_backward(void) {
  record r = {0};
  step s = {&r, 1, false, false, false};
  CHECK(ms_autograd_queue_callback(cb, &s) != MS_OK);
  CHECK_ERROR_HAS("no backward is running");
  CHECK(ms_autograd_queue_callback(NULL, &s) != MS_OK);
  CHECK_ERROR_HAS("autograd_queue_callback");
  CHECK(r.count == 0);
}

static int g_progress_calls;
static void count_progress(void) { g_progress_calls++; }

/* sum(exp(a) * b) is three nodes above a's accumulator: the progress function runs before each
 * node the walk runs, and not at all once unset. */
static void test_progress_fn(void) {
  ms_tensor *a = leaf(), *b = leaf();
  for (int round = 0; round < 2; round++) {
    ms_autograd_set_progress_fn(round == 0 ? count_progress : NULL);
    g_progress_calls = 0;
    ms_tensor *e = ms_unary(MS_OP_EXP, a), *p = ms_binary(MS_OP_MUL, ms_operand_tensor(e), ms_operand_tensor(b));
    ms_tensor *s = ms_reduce(MS_RED_SUM, p, (ms_reduce_opts){.all = true});
    CHECK(ms_backward(s, NULL, false) == MS_OK);
    CHECK(g_progress_calls == (round == 0 ? 5 : 0)); /* sum, mul, exp, and the two accumulators */
    ms_tensor_release(s), ms_tensor_release(p), ms_tensor_release(e);
  }
  ms_tensor_release(a), ms_tensor_release(b);
}

int main(void) {
  test_progress_fn();
  test_order_and_timing();
  test_failure();
  test_failed_walk();
  test_outside_backward();
  return ms_test_finish();
}
