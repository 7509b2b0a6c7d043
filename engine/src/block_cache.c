/* block_cache.c: large blocks are whole mappings of their own; freed ones are kept per size
 * class under one lock, up to a byte limit (MS_CACHE_LIMIT_MB, default 256), and unmapped
 * beyond it. A freed block stores the link to the next one of its class in its own first bytes. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "block_cache.h"

#define MIN_CACHED (256u << 10) /* smaller blocks come from malloc's own free lists */
#define MAX_CLASSES 128

typedef struct bucket {
  size_t size;
  void *head;
} bucket;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bucket buckets[MAX_CLASSES];
static int nbuckets;
static int64_t cached_bytes, limit_bytes = -1;

size_t ms_block_class(size_t nbytes) {
  if (nbytes < MIN_CACHED) return 0;
  size_t top = (size_t)1 << (63 - __builtin_clzll((unsigned long long)nbytes));
  size_t step = top / 8;
  return (nbytes + step - 1) / step * step;
}

static int64_t limit(void) {
  if (limit_bytes < 0) {
    const char *env = getenv("MS_CACHE_LIMIT_MB");
    long long mb = env ? atoll(env) : 256;
    limit_bytes = (mb < 0 ? 0 : mb) << 20;
  }
  return limit_bytes;
}

/* The bucket of a size, created when `create` (NULL when there is no room for another). */
static bucket *find_bucket(size_t size, bool create) {
  for (int i = 0; i < nbuckets; i++)
    if (buckets[i].size == size) return &buckets[i];
  if (!create || nbuckets == MAX_CLASSES) return NULL;
  buckets[nbuckets] = (bucket){size, NULL};
  return &buckets[nbuckets++];
}

/* Mapped directly rather than through malloc: glibc serves large blocks from its heap once a
 * freed mapping has raised its dynamic mmap threshold, and heap holes it cannot trim stayed
 * resident, so memory the cache gave back was never returned. munmap returns it at once. */
static void *map_block(size_t class_bytes) {
  void *p = mmap(NULL, class_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void *ms_block_alloc(size_t class_bytes) {
  pthread_mutex_lock(&lock);
  bucket *b = find_bucket(class_bytes, false);
  void *p = b ? b->head : NULL;
  if (p) {
    b->head = *(void **)p;
    cached_bytes -= (int64_t)class_bytes;
  }
  pthread_mutex_unlock(&lock);
  return p ? p : map_block(class_bytes);
}

void ms_block_free(void *p, size_t class_bytes) {
  pthread_mutex_lock(&lock);
  bool kept = false;
  if (cached_bytes + (int64_t)class_bytes <= limit()) {
    bucket *b = find_bucket(class_bytes, true);
    if (b) {
      *(void **)p = b->head;
      b->head = p;
      cached_bytes += (int64_t)class_bytes;
      kept = true;
    }
  }
  pthread_mutex_unlock(&lock);
  if (!kept) munmap(p, class_bytes);
}

int64_t ms_block_cache_bytes(void) {
  pthread_mutex_lock(&lock);
  int64_t n = cached_bytes;
  pthread_mutex_unlock(&lock);
  return n;
}

void ms_block_cache_empty(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nbuckets; i++)
    while (buckets[i].head) {
      void *p = buckets[i].head;
      buckets[i].head = *(void **)p;
      munmap(p, buckets[i].size);
    }
  cached_bytes = 0;
  pthread_mutex_unlock(&lock);
}
