/* test_loader.c: the native DataLoader (moonshard/loader.h) under conditions Lua cannot arrange:
 * a transform that sleeps a different time per batch, so workers finish out of order, must
 * still hand batches out in order and equal to the synchronous ones; an error in batch k comes
 * back for batch k only; destroying with batches in flight joins the workers and frees every
 * byte; bad indices are refused at creation. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdlib.h>
#include <time.h>

#include "moonshard/loader.h"
#include "moonshard/moonshard.h"
#include "test.h"

enum { ROWS = 40, COLS = 3 };

/* Sleeps (first value % 4) ms, so neighbouring batches finish in scrambled order, then
 * doubles; fails when the batch's first value is *ctx (a negative ctx never fails). */
static ms_tensor *slow_double(void *ctx, ms_tensor *batch) {
  float first = ((const float *)ms_tensor_data(batch))[0];
  struct timespec ts = {0, (long)((int)first % 4) * 1000000L};
  nanosleep(&ts, NULL);
  if ((float)*(const int *)ctx == first) {
    ms_error(MS_ERR_ARG, "slow_double: refusing batch starting at %g", (double)first);
    return NULL;
  }
  ms_tensor *out = ms_tensor_clone(batch);
  if (out)
    for (int64_t i = 0; i < ms_tensor_numel(out); i++) ms_tensor_set_flat(out, i, 2 * ms_tensor_get_flat(out, i));
  return out;
}

static ms_tensor *make_source(void) {
  ms_tensor *t = ms_tensor_new_arange(0, ROWS * COLS, 1, MS_FLOAT32);
  ms_tensor *v = ms_tensor_view(t, 2, (int64_t[]){ROWS, COLS});
  ms_tensor_release(t);
  return v;
}

/* Batches of 3 rows in a scrambled order: row r = (7 * j) % ROWS for position j. */
static int64_t make_batches(int64_t *idx, int64_t *off) {
  for (int j = 0; j < ROWS; j++) idx[j] = (7 * j) % ROWS;
  int64_t n = 0;
  for (off[0] = 0; off[n] < ROWS; n++) off[n + 1] = off[n] + 3 < ROWS ? off[n] + 3 : ROWS;
  return n;
}

static ms_loader *make_loader(ms_tensor *src, int *fail_at, int workers) {
  static int64_t idx[ROWS], off[ROWS + 1];
  int64_t n = make_batches(idx, off);
  ms_loader_source s[2] = {{.tensor = src, .transform = slow_double, .ctx = fail_at},
                           {.tensor = src}};
  return ms_loader_create(s, 2, idx, off, n, (ms_loader_config){.num_workers = workers, .prefetch_factor = 2});
}

/* Every batch of the loader: first values of source 0 into firsts; returns the count. */
static int drain(ms_loader *l, float *firsts, int *failed_batch) {
  ms_tensor *out[2];
  int64_t k;
  int n = 0;
  *failed_batch = -1;
  while (!ms_loader_exhausted(l)) {
    if (ms_loader_next(l, out, &k) != MS_OK) {
      *failed_batch = (int)k;
      firsts[n++] = -1;
      continue;
    }
    firsts[n++] = (float)ms_tensor_get_flat(out[0], 0);
    CHECK(ms_tensor_get_flat(out[0], 0) == 2 * ms_tensor_get_flat(out[1], 0));
    CHECK(out[1]->shape[1] == COLS);
    ms_tensor_release(out[0]), ms_tensor_release(out[1]);
  }
  return n;
}

static void test_order_and_errors(ms_tensor *src) {
  int never = -1, fail_at = 21 * COLS; /* batch 1 (0-based) starts at row 7 * 3 = 21 */
  float ref[ROWS], got[ROWS];
  int failed;
  ms_loader *l = make_loader(src, &never, 0);
  int n = drain(l, ref, &failed);
  ms_loader_destroy(l);
  CHECK(n == 14 && failed == -1);
  for (int w = 1; w <= 4; w++) {
    l = make_loader(src, &never, w);
    CHECK(drain(l, got, &failed) == n && failed == -1);
    for (int i = 0; i < n; i++) CHECK(got[i] == ref[i]);
    ms_loader_destroy(l);
    l = make_loader(src, &fail_at, w);
    CHECK(drain(l, got, &failed) == n);
    CHECK(failed == 1);
    CHECK_ERROR_HAS("slow_double: refusing batch starting at 63");
    for (int i = 0; i < n; i++) CHECK(i == 1 ? got[i] == -1 : got[i] == ref[i]);
    ms_loader_destroy(l);
  }
}

static void test_early_destroy(ms_tensor *src) {
  int never = -1;
  for (int w = 0; w <= 3; w++) {
    ms_loader *l = make_loader(src, &never, w);
    ms_tensor *out[2];
    CHECK(ms_loader_next(l, out, NULL) == MS_OK);
    ms_tensor_release(out[0]), ms_tensor_release(out[1]);
    ms_loader_destroy(l); /* workers busy or with batches queued */
  }
}

static void test_bad_input(ms_tensor *src) {
  int64_t idx[2] = {0, ROWS}, off[2] = {0, 2};
  ms_loader_source s = {.tensor = src};
  CHECK(ms_loader_create(&s, 1, idx, off, 1, (ms_loader_config){.prefetch_factor = 1}) == NULL);
  CHECK_ERROR_HAS("index 40 is out of range for a dataset of 40 rows");
  ms_tensor *other = ms_tensor_new_zeros(1, (int64_t[]){ROWS + 1}, MS_INT64);
  ms_loader_source two[2] = {{.tensor = src}, {.tensor = other}};
  idx[1] = 1;
  CHECK(ms_loader_create(two, 2, idx, off, 1, (ms_loader_config){.prefetch_factor = 1}) == NULL);
  CHECK_ERROR_HAS("source 2 has 41 rows, source 1 has 40");
  ms_tensor_release(other);
}

int main(void) {
  int64_t base = ms_memory_stats_get().current;
  ms_tensor *src = make_source();
  test_order_and_errors(src);
  test_early_destroy(src);
  test_bad_input(src);
  ms_tensor_release(src);
  CHECK(ms_memory_stats_get().current == base);
  return ms_test_finish();
}
