/* memory.c: the counted allocator. Every tensor byte is allocated here so the statistics
 * (current, peak, per category) are exact and the Lua face can drive its collector by them.
 * Large blocks go through the size-class cache (block_cache.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "block_cache.h"
#include "moonshard/error.h"
#include "moonshard/memory.h"

static atomic_llong mem_current, mem_peak, mem_allocations;
static atomic_llong mem_by_category[MS_MEM_CATEGORY_COUNT];

static const char *category_names[MS_MEM_CATEGORY_COUNT] = {
    "other", "params", "grads", "optimizer", "activations", "comm"};

const char *ms_mem_category_name(ms_mem_category c) { return category_names[c]; }

static void raise_peak(long long now) {
  long long peak = atomic_load(&mem_peak);
  while (now > peak && !atomic_compare_exchange_weak(&mem_peak, &peak, now)) {
  }
}

/* The largest single allocation: the machine's memory, or MS_MAX_ALLOC_BYTES when set. A size
 * computed from absurd user input then fails here with a clear message, instead of reaching
 * the system allocator (whose failure may come only later, from the kernel's OOM killer). */
static size_t alloc_limit;
static pthread_once_t alloc_limit_once = PTHREAD_ONCE_INIT;

static void read_alloc_limit(void) {
  const char *env = getenv("MS_MAX_ALLOC_BYTES");
  char *end;
  unsigned long long v = env ? strtoull(env, &end, 10) : 0;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (env && *env && !*end && v > 0) alloc_limit = (size_t)v;
  else if (pages > 0 && page > 0) alloc_limit = (size_t)pages * (size_t)page;
  else alloc_limit = (size_t)1 << 46; /* 64 TB when the system will not say */
}

void *ms_mem_alloc(size_t nbytes, ms_mem_category category) {
  pthread_once(&alloc_limit_once, read_alloc_limit);
  if (nbytes > alloc_limit) {
    ms_error(MS_ERR_MEMORY, "out of memory: %zu bytes is more than one allocation may take (%zu bytes: the "
             "machine's memory, or MS_MAX_ALLOC_BYTES)", nbytes, alloc_limit);
    return NULL;
  }
  /* 64-byte alignment serves every SIMD width; aligned_alloc wants a multiple of it. */
  size_t cls = block_class(nbytes);
  size_t rounded = cls ? cls : (nbytes + 63) & ~(size_t)63;
  void *p = cls ? block_alloc(cls) : aligned_alloc(64, rounded ? rounded : 64);
  if (!p) {
    ms_error(MS_ERR_MEMORY, "out of memory: could not allocate %zu bytes", nbytes);
    return NULL;
  }
  long long now = atomic_fetch_add(&mem_current, (long long)nbytes) + (long long)nbytes;
  atomic_fetch_add(&mem_by_category[category], (long long)nbytes);
  atomic_fetch_add(&mem_allocations, 1);
  raise_peak(now);
  return p;
}

void ms_mem_free(void *p, size_t nbytes, ms_mem_category category) {
  if (!p) return;
  size_t cls = block_class(nbytes);
  if (cls)
    block_free(p);
  else
    free(p);
  atomic_fetch_sub(&mem_current, (long long)nbytes);
  atomic_fetch_sub(&mem_by_category[category], (long long)nbytes);
}

ms_memory_stats ms_memory_stats_get(void) {
  ms_memory_stats s;
  s.current = atomic_load(&mem_current);
  s.peak = atomic_load(&mem_peak);
  s.allocations = atomic_load(&mem_allocations);
  s.cached = block_cache_bytes();
  s.cache_bound = block_cache_bound();
  for (int c = 0; c < MS_MEM_CATEGORY_COUNT; c++) s.by_category[c] = atomic_load(&mem_by_category[c]);
  return s;
}

void ms_memory_empty_cache(void) { block_cache_empty(); }

void ms_memory_reset_peak(void) { atomic_store(&mem_peak, atomic_load(&mem_current)); }
