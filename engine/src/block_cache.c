/* block_cache.c: large blocks are whole mappings of their own; freed ones are kept per size
 * class under one lock; a request takes the smallest cached block that fits within 5/4 of its
 * size. Room is made by unmapping cached blocks of other classes, largest first.
 *
 * The bound is proportional to the work: the large blocks the process maps (in use + cached)
 * stay within 5/4 of the most it ever had in use at once (its high-water mark); MS_CACHE_LIMIT_MB,
 * when set, caps the cache besides (0: no cache). No fixed cap by default: a GPT's step whose
 * activations outgrow it would unmap and fault them in again every step (GPT 12 x 768, batch
 * 4 x 256, one thread: 5.9 s a step under a 256 MB cap, 3.6 s without). A step that repeats the last one asks again
 * for the blocks it freed, so they fit under its own high-water mark: the cache costs no more
 * memory than the step's peak, where a fixed 256 MB sat on top of it (FSDP, 12 x Linear(2048),
 * 2 ranks: the process peak 781 MB with an engine peak of 528 MB). The 1/4 of slack keeps blocks
 * whose frees and reuses come in another order than last time, and sizes that a step asks for
 * beside each other (Adam's temporaries after SHARD_GRAD_OP's gathered units): with 1/8 they
 * were unmapped and faulted in again each step (SHARD_GRAD_OP, 2 ranks: 2.3-3.3 s a step against
 * 0.44 s with 1/4, same load). Only a request the cache cannot
 * serve adds mapped bytes, so only then is the bound checked; a free never exceeds it.
 *
 * A request the cache cannot serve while it is over the bound takes the cached block nearest in
 * size and resizes it (mremap keeps its resident pages: only growth is faulted in) instead of
 * unmapping a block and faulting a fresh one in whole: a step whose temporaries change size from
 * op to op (a bfloat16 Linear: float32 12 MB, 9 MB, 9 MB) otherwise re-faulted them every step. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, mremap */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "block_cache.h"

/* Smaller blocks come from malloc's own free lists. From 64 KB, not 256: glibc trims a freed
 * block of a few hundred KB off its heap's top and faults it in again at the next allocation,
 * so conv1's 200 KB input gradient (batch 64) ran 4x slower (0.7 against 0.18 ms a call, one
 * thread) whenever it landed there, a third of the time in page faults. */
#define MIN_CACHED (64u << 10)
#define MAX_CLASSES 128

typedef struct bucket {
  size_t size;
  void *head;
} bucket;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bucket buckets[MAX_CLASSES];
static int nbuckets;
static int64_t cached_bytes, limit_bytes = -1;
static int64_t live_bytes, high_water; /* large blocks handed out now, and the most at once */

size_t block_class(size_t nbytes) {
  if (nbytes < MIN_CACHED) return 0;
  size_t top = (size_t)1 << (63 - __builtin_clzll((unsigned long long)nbytes));
  size_t step = top / 8;
  return (nbytes + step - 1) / step * step;
}

static int64_t limit(void) {
  if (limit_bytes < 0) {
    const char *env = getenv("MS_CACHE_LIMIT_MB");
    long long mb = env ? atoll(env) : -1;
    limit_bytes = !env ? INT64_MAX : mb < 0 ? 0 : mb > (INT64_MAX >> 20) ? INT64_MAX : mb << 20;
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

/* Every block starts with a header that keeps its own class (it may serve a smaller request)
 * and, while cached, the link to the next block of its class; 64 bytes keep the data aligned. */
typedef struct block_header {
  size_t size;
  void *next;
} block_header;
#define HEADER_BYTES 64

/* Mapped directly rather than through malloc: glibc serves large blocks from its heap once a
 * freed mapping has raised its dynamic mmap threshold, and heap holes it cannot trim stayed
 * resident, so memory the cache gave back was never returned. munmap returns it at once. */
static void *map_block(size_t class_bytes) {
  void *p = mmap(NULL, class_bytes + HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) return NULL;
  ((block_header *)p)->size = class_bytes;
  return (char *)p + HEADER_BYTES;
}

static void unmap_block(block_header *h) { munmap(h, h->size + HEADER_BYTES); }

/* The smallest cached class that fits, up to 5/4 of the request: a nearby size (a last, smaller
 * batch) reuses blocks the usual sizes left, instead of mapping a set of its own beside them.
 * Not up to twice, as before: long-lived tensors then settled in blocks twice their size (Adam's
 * 8 MB moments in FSDP's freed 16 MB full buffers: 12 x Linear(2048), 2 ranks, the process peak
 * 573 MB against 469 MB within 5/4 and a bound of 9/8, with the engine's live peak 432 MB). */
static bucket *fitting_bucket(size_t class_bytes) {
  bucket *best = NULL;
  for (int i = 0; i < nbuckets; i++) {
    bucket *b = &buckets[i];
    if (b->head && b->size >= class_bytes && b->size - class_bytes <= class_bytes / 4 && (!best || b->size < best->size))
      best = b;
  }
  return best;
}

static bool evict_for(int64_t need, int64_t bound, size_t keep_class, block_header **out);
static void unmap_list(block_header *h);

/* The cached bytes allowed now: the mapped total within 5/4 of the high-water mark of live
 * bytes (see the top of the file), and within MS_CACHE_LIMIT_MB when it is set. */
static int64_t cache_bound(void) {
  int64_t room = high_water + high_water / 4 - live_bytes;
  int64_t lim = limit();
  return room < 0 ? 0 : room < lim ? room : lim;
}

/* Takes the cached block whose class is nearest class_bytes out of the cache (NULL if empty). */
static block_header *take_nearest(size_t class_bytes) {
  bucket *best = NULL;
  size_t best_gap = SIZE_MAX;
  for (int i = 0; i < nbuckets; i++) {
    bucket *b = &buckets[i];
    size_t gap = b->size > class_bytes ? b->size - class_bytes : class_bytes - b->size;
    if (b->head && gap < best_gap) best = b, best_gap = gap;
  }
  if (!best) return NULL;
  block_header *h = best->head;
  best->head = h->next;
  cached_bytes -= (int64_t)h->size;
  return h;
}

/* h (taken from the cache) resized to class_bytes, its pages kept; NULL (h unmapped) if the
 * kernel refuses. */
static void *resize_block(block_header *h, size_t class_bytes) {
  void *p = mremap(h, h->size + HEADER_BYTES, class_bytes + HEADER_BYTES, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) {
    unmap_block(h);
    return NULL;
  }
  ((block_header *)p)->size = class_bytes;
  return (char *)p + HEADER_BYTES;
}

void *block_alloc(size_t class_bytes) {
  pthread_mutex_lock(&lock);
  bucket *b = fitting_bucket(class_bytes);
  block_header *h = b ? b->head : NULL, *evicted = NULL, *resized = NULL;
  if (h) {
    b->head = h->next;
    cached_bytes -= (int64_t)h->size;
    live_bytes += (int64_t)h->size;
  } else {
    live_bytes += (int64_t)class_bytes;
    if (live_bytes > high_water) high_water = live_bytes;
    if (cached_bytes > cache_bound()) resized = take_nearest(class_bytes); /* the cache must shrink anyway */
    evict_for(0, cache_bound(), 0, &evicted);
  }
  pthread_mutex_unlock(&lock);
  unmap_list(evicted);
  if (h) return (char *)h + HEADER_BYTES;
  void *p = resized ? resize_block(resized, class_bytes) : NULL;
  if (!p) p = map_block(class_bytes);
  if (!p) {
    pthread_mutex_lock(&lock);
    live_bytes -= (int64_t)class_bytes;
    pthread_mutex_unlock(&lock);
  }
  return p;
}

/* Makes room for `need` more cached bytes by taking blocks of other classes, largest first, onto
 * *out (unmapped by the caller, outside the lock). Without this a cache filled by sizes no longer
 * asked for (a batch-1000 evaluation before training at batch 64) unmapped every block of the
 * sizes in use, and each reuse faulted all its pages in again: relu's 9.4 MB output then ran at
 * a fifth of the copy rate, one page fault per 4 KB. keep_class 0 keeps none. Returns whether
 * the room was made. */
static bool evict_for(int64_t need, int64_t bound, size_t keep_class, block_header **out) {
  while (cached_bytes + need > bound) {
    bucket *victim = NULL;
    for (int i = 0; i < nbuckets; i++)
      if (buckets[i].head && buckets[i].size != keep_class &&
          (!victim || buckets[i].size > victim->size))
        victim = &buckets[i];
    if (!victim) return false;
    block_header *h = victim->head;
    victim->head = h->next;
    cached_bytes -= (int64_t)h->size;
    h->next = *out;
    *out = h;
  }
  return true;
}

static void unmap_list(block_header *h) {
  while (h) {
    block_header *next = h->next;
    unmap_block(h);
    h = next;
  }
}

void block_free(void *p) {
  block_header *h = (block_header *)((char *)p - HEADER_BYTES);
  block_header *evicted = NULL;
  pthread_mutex_lock(&lock);
  live_bytes -= (int64_t)h->size;
  bool kept = false;
  int64_t bound = cache_bound();
  if ((int64_t)h->size <= bound && evict_for((int64_t)h->size, bound, h->size, &evicted)) {
    bucket *b = find_bucket(h->size, true);
    if (b) {
      h->next = b->head;
      b->head = h;
      cached_bytes += (int64_t)h->size;
      kept = true;
    }
  }
  pthread_mutex_unlock(&lock);
  if (!kept) unmap_block(h);
  unmap_list(evicted);
}

int64_t block_cache_bound(void) {
  pthread_mutex_lock(&lock);
  int64_t n = cache_bound();
  pthread_mutex_unlock(&lock);
  return n;
}

int64_t block_cache_bytes(void) {
  pthread_mutex_lock(&lock);
  int64_t n = cached_bytes;
  pthread_mutex_unlock(&lock);
  return n;
}

void block_cache_empty(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nbuckets; i++)
    while (buckets[i].head) {
      block_header *h = buckets[i].head;
      buckets[i].head = h->next;
      unmap_block(h);
    }
  cached_bytes = 0;
  pthread_mutex_unlock(&lock);
}
