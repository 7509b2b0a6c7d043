/* test_block_cache.c: the cache of large freed blocks is bounded by the work (block_cache.c):
 * the blocks mapped (in use + cached) stay within 5/4 of the most ever in use at once, and a
 * request is served only by a cached block within 5/4 of its size, except that a request the
 * cache cannot serve while over that bound resizes the cached block nearest in size (keeping its
 * pages) instead of mapping a fresh one. Sizes are powers of two (their own size class) and
 * nothing else large is allocated in this program. */
#include <stdlib.h>
#include <string.h>

#include "moonshard/moonshard.h"
#include "test.h"

#define MB ((size_t)1 << 20)

static void *take(size_t n) { return ms_mem_alloc(n, MS_MEM_OTHER); }
static void give(void *p, size_t n) { ms_mem_free(p, n, MS_MEM_OTHER); }

/* A step of eight 1 MB blocks, then the same step again: the second is served from the cache. */
static void test_repeated_step_reuses(void) {
  void *p[8];
  for (int i = 0; i < 8; i++) p[i] = take(MB);
  for (int i = 0; i < 8; i++) give(p[i], MB);
  ms_memory_stats s = ms_memory_stats_get();
  CHECK(s.cached == (int64_t)(8 * MB));
  CHECK(s.cache_bound == (int64_t)(10 * MB)); /* 5/4 of the high-water mark, nothing in use */
  for (int i = 0; i < 8; i++) p[i] = take(MB);
  CHECK(ms_memory_stats_get().cached == 0);
  for (int i = 0; i < 8; i++) give(p[i], MB);
}

/* Then a step of other sizes: what it maps pushes the unused 1 MB blocks out, so in use + cached
 * never passes 5/4 of the high-water mark (with a fixed 256 MB bound the 8 MB stayed cached). */
static void test_other_sizes_evict(void) {
  void *p[4];
  for (int i = 0; i < 4; i++) {
    p[i] = take(2 * MB);
    ms_memory_stats s = ms_memory_stats_get();
    CHECK(s.current + s.cached <= (int64_t)(10 * MB));
  }
  for (int i = 0; i < 4; i++) give(p[i], 2 * MB);
  CHECK(ms_memory_stats_get().cached <= (int64_t)(10 * MB));
}

/* A 1 MB request does not take a cached 2 MB block (held long, it would waste half of it). */
static void test_fit_within_five_quarters(void) {
  ms_memory_empty_cache();
  void *big = take(2 * MB);
  give(big, 2 * MB);
  CHECK(ms_memory_stats_get().cached == (int64_t)(2 * MB));
  void *small = take(MB);
  CHECK(ms_memory_stats_get().cached == (int64_t)(2 * MB));
  give(small, MB);
  ms_memory_empty_cache();
  CHECK(ms_memory_stats_get().cached == 0);
}

/* With the cache full of marked 1 MB blocks, 2 MB requests held at once push the mapped total
 * over 5/4 of the high-water mark: those requests are served by resizing the cached blocks (each
 * starts with a block's mark, its first pages kept) and the total stays within the bound. */
static void test_miss_over_bound_resizes(void) {
  ms_memory_empty_cache();
  enum { N = 8 };
  void *p[N], *q[N];
  for (int i = 0; i < N; i++) p[i] = take(MB);
  for (int i = 0; i < N; i++) memset(p[i], 0x5a, 4096);
  for (int i = 0; i < N; i++) give(p[i], MB);
  int marked = 0;
  for (int i = 0; i < N; i++) {
    q[i] = take(2 * MB);
    unsigned char *c = q[i];
    marked += c[0] == 0x5a && c[4095] == 0x5a;
    ms_memory_stats s = ms_memory_stats_get();
    CHECK(s.cached <= s.cache_bound); /* in use + cached within 5/4 of the high-water mark */
  }
  CHECK(marked >= 1); /* a fresh mapping reads zeros: at least one was a resized cached block */
  for (int i = 0; i < N; i++) give(q[i], 2 * MB);
  ms_memory_empty_cache();
}

int main(void) {
  test_repeated_step_reuses();
  test_other_sizes_evict();
  test_fit_within_five_quarters();
  test_miss_over_bound_resizes(); /* last: it raises the high-water mark the others assume */
  return ms_test_finish();
}
