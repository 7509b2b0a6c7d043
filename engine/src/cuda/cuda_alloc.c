/* cuda_alloc.c: the caching allocator of device memory. Freed blocks are kept per device in
 * size classes (as the CPU block cache, engine/src/block_cache.c) and per stream, so a training
 * step that frees and allocates the same sizes every iteration never calls cudaMalloc/cudaFree
 * after the first one: both synchronize the device and cost milliseconds. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_internal.h"

/* A cached block: its pointer, size class and the stream its last user ran on. */
typedef struct cached_block {
  void *ptr;
  size_t size;
  cudaStream_t stream;
  struct cached_block *next;
} cached_block;

/* A block of a graph's private pool: live while a tensor holds it, else free for the same
 * graph's next capture-time allocation only. */
typedef struct graph_block {
  void *ptr;
  size_t size;
  bool live;
} graph_block;

/* A CUDA graph's private pool (cuda_internal.h): every block cudaMalloc'd while the graph was
 * captured, so that none is handed to eager code while a replay may still write it. */
struct cuda_graph_pool {
  int device;
  bool released; /* the graph is gone: blocks freed from now on go to the eager cache */
  graph_block *b;
  size_t n, cap;
  struct cuda_graph_pool *next;
};

typedef struct device_pool {
  pthread_mutex_t lock;
  cached_block *blocks; /* every cached block; short in practice: the step's distinct sizes */
  cuda_graph_pool *graphs; /* the private pools of live graphs, and released ones with live blocks */
  int64_t current, peak, allocations, cached, reserved, reserved_peak;
  int64_t by_category[MS_MEM_CATEGORY_COUNT];
} device_pool;

static device_pool pools[MS_CUDA_MAX_DEVICES];
static _Atomic int64_t total_current; /* all devices, read without the pools' locks */
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;

static void pools_init(void) {
  for (int i = 0; i < MS_CUDA_MAX_DEVICES; i++) pthread_mutex_init(&pools[i].lock, NULL);
}

/* Small sizes round to 512 bytes (cuBLAS and vector loads want aligned starts anyway); from
 * 1 MiB up, to an eighth of their power of two, so nearby sizes share blocks. */
static size_t size_class(size_t nbytes) {
  if (nbytes < 512) return 512;
  if (nbytes < (1u << 20)) return (nbytes + 511) & ~(size_t)511;
  size_t top = (size_t)1 << (63 - __builtin_clzll((unsigned long long)nbytes));
  size_t step = top / 8;
  return (nbytes + step - 1) / step * step;
}

/* Takes a cached block of exactly `size` for `stream` out of the pool; caller holds the lock. */
static void *take_cached(device_pool *p, size_t size, cudaStream_t stream) {
  for (cached_block **b = &p->blocks; *b; b = &(*b)->next)
    if ((*b)->size == size && (*b)->stream == stream) {
      cached_block *hit = *b;
      void *ptr = hit->ptr;
      *b = hit->next;
      free(hit);
      p->cached -= (int64_t)size;
      return ptr;
    }
  return NULL;
}

/* ---- graph pools: their blocks are few (one step's), so plain scans do ------------------------ */

/* A free block of exactly `size` in the pool, marked live; NULL if none. */
static void *graph_take(cuda_graph_pool *g, size_t size) {
  for (size_t i = 0; i < g->n; i++)
    if (!g->b[i].live && g->b[i].size == size) return g->b[i].live = true, g->b[i].ptr;
  return NULL;
}

/* Room for one more block, made before cudaMalloc: a capture may not cudaFree a block it
 * could not remember. */
static bool graph_room(cuda_graph_pool *g) {
  if (g->n < g->cap) return true;
  size_t cap = g->cap ? 2 * g->cap : 64;
  graph_block *b = realloc(g->b, cap * sizeof *b);
  if (!b) return false;
  g->b = b, g->cap = cap;
  return true;
}

/* The pool owning ptr and its index there; NULL if no graph's. */
static cuda_graph_pool *graph_owner(device_pool *p, void *ptr, size_t *at) {
  for (cuda_graph_pool *g = p->graphs; g; g = g->next)
    for (size_t i = 0; i < g->n; i++)
      if (g->b[i].ptr == ptr) return *at = i, g;
  return NULL;
}

/* Takes g out of the device's list and frees it: released, with no block left. */
static void graph_unlink(device_pool *p, cuda_graph_pool *g) {
  for (cuda_graph_pool **q = &p->graphs; *q; q = &(*q)->next)
    if (*q == g) {
      *q = g->next;
      break;
    }
  free(g->b);
  free(g);
}

/* Forgets block i of g (its memory now belongs elsewhere); frees g once released and empty. */
static void graph_drop(device_pool *p, cuda_graph_pool *g, size_t i) {
  g->b[i] = g->b[--g->n];
  if (g->released && g->n == 0) graph_unlink(p, g);
}

cuda_graph_pool *cuda_graph_pool_new(int index) {
  pthread_once(&pools_once, pools_init);
  cuda_graph_pool *g = calloc(1, sizeof *g);
  if (!g) return ms_error(MS_ERR_MEMORY, "CUDAGraph: out of memory"), NULL;
  g->device = index;
  device_pool *p = &pools[index];
  pthread_mutex_lock(&p->lock);
  g->next = p->graphs, p->graphs = g;
  pthread_mutex_unlock(&p->lock);
  return g;
}

void cuda_graph_pool_release(cuda_graph_pool *g) {
  if (!g) return;
  device_pool *p = &pools[g->device];
  pthread_mutex_lock(&p->lock);
  g->released = true;
  for (size_t i = g->n; i-- > 0;) /* backwards: the last entry moves into a freed slot */
    if (!g->b[i].live) {
      cudaFree(g->b[i].ptr); /* waits for replays still running */
      p->reserved -= (int64_t)g->b[i].size;
      g->b[i] = g->b[--g->n];
    }
  if (g->n == 0) graph_unlink(p, g);
  pthread_mutex_unlock(&p->lock);
}

/* Frees every cached block of device `index` to the driver; caller holds the lock. */
static void release_cached(device_pool *p) {
  cudaDeviceSynchronize(); /* a cached block may still be read by queued work */
  while (p->blocks) {
    cached_block *b = p->blocks;
    p->blocks = b->next;
    cudaFree(b->ptr);
    p->reserved -= (int64_t)b->size;
    free(b);
  }
  p->cached = 0;
}

static void account(device_pool *p, int64_t nbytes, ms_mem_category category) {
  p->current += nbytes;
  atomic_fetch_add(&total_current, nbytes);
  p->by_category[category] += nbytes;
  if (p->current > p->peak) p->peak = p->current;
}

void *ms_cuda_alloc(int index, size_t nbytes, ms_mem_category category) {
  if (cuda_use("alloc", index) != MS_OK) return NULL;
  pthread_once(&pools_once, pools_init);
  device_pool *p = &pools[index];
  size_t size = size_class(nbytes);
  cudaStream_t stream = cuda_raw_stream(index);
  cuda_graph_pool *graph = cuda_capture_pool(index); /* capturing: the graph's blocks only */
  pthread_mutex_lock(&p->lock);
  void *ptr = graph ? graph_take(graph, size) : take_cached(p, size, stream);
  if (!ptr && graph && !graph_room(graph)) {
    pthread_mutex_unlock(&p->lock);
    return ms_error(MS_ERR_MEMORY, "CUDA graph capture: out of host memory for the graph's block list"), NULL;
  }
  if (!ptr) {
    cudaError_t err = cudaMalloc(&ptr, size); /* allowed in a capture (relaxed mode) */
    /* give the cache back and try once more; not in a capture, where cudaFree cannot run */
    if (err == cudaErrorMemoryAllocation && p->blocks && !graph) {
      (void)cudaGetLastError();
      release_cached(p);
      err = cudaMalloc(&ptr, size);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      ms_error(MS_ERR_MEMORY, "CUDA out of memory: tried to allocate %zu bytes on cuda:%d (%s); "
               "%lld bytes in live tensors, %lld reserved by moonshard, %zu of %zu free on the device",
               nbytes, index, cudaGetErrorString(err), (long long)p->current, (long long)p->reserved,
               free_b, total_b);
      (void)cudaGetLastError();
      pthread_mutex_unlock(&p->lock);
      return NULL;
    }
    p->reserved += (int64_t)size;
    if (p->reserved > p->reserved_peak) p->reserved_peak = p->reserved;
    if (graph) graph->b[graph->n++] = (graph_block){ptr, size, true};
  }
  account(p, (int64_t)nbytes, category);
  p->allocations++;
  pthread_mutex_unlock(&p->lock);
  return ptr;
}

void ms_cuda_free(int index, void *ptr, size_t nbytes, ms_mem_category category) {
  if (!ptr) return;
  device_pool *p = &pools[index];
  cached_block *b = malloc(sizeof *b);
  pthread_mutex_lock(&p->lock);
  account(p, -(int64_t)nbytes, category);
  size_t at = 0;
  cuda_graph_pool *graph = p->graphs ? graph_owner(p, ptr, &at) : NULL;
  if (graph && !graph->released) { /* stays the graph's: a replay writes it again */
    graph->b[at].live = false;
    pthread_mutex_unlock(&p->lock);
    free(b);
    return;
  }
  if (graph) graph_drop(p, graph, at); /* the graph is gone: an ordinary block from now on */
  if (b) {
    /* Stream order makes the reuse safe: the next user of this block on the same stream runs
     * after every kernel already queued there that reads it. */
    *b = (cached_block){ptr, size_class(nbytes), cuda_raw_stream(index), p->blocks};
    p->blocks = b;
    p->cached += (int64_t)b->size;
  } else { /* no room to remember it: hand it back (cudaFree waits for queued work) */
    cudaFree(ptr);
    p->reserved -= (int64_t)size_class(nbytes);
  }
  pthread_mutex_unlock(&p->lock);
}

ms_status ms_cuda_memory_stats_get(int index, ms_cuda_memory_stats *out) {
  if (ms_cuda_check_device("memory_stats", index) != MS_OK) return MS_ERR_RUNTIME;
  pthread_once(&pools_once, pools_init);
  device_pool *p = &pools[index];
  pthread_mutex_lock(&p->lock);
  out->mem.current = p->current;
  out->mem.peak = p->peak;
  out->mem.allocations = p->allocations;
  out->mem.cached = p->cached;
  for (int c = 0; c < MS_MEM_CATEGORY_COUNT; c++) out->mem.by_category[c] = p->by_category[c];
  out->reserved = p->reserved;
  out->reserved_peak = p->reserved_peak;
  pthread_mutex_unlock(&p->lock);
  return MS_OK;
}

int64_t ms_cuda_memory_current_total(void) { return atomic_load(&total_current); }

ms_status ms_cuda_reset_peak(int index) {
  if (ms_cuda_check_device("reset_peak_memory_stats", index) != MS_OK) return MS_ERR_RUNTIME;
  pthread_once(&pools_once, pools_init);
  device_pool *p = &pools[index];
  pthread_mutex_lock(&p->lock);
  p->peak = p->current;
  p->reserved_peak = p->reserved;
  pthread_mutex_unlock(&p->lock);
  return MS_OK;
}

ms_status ms_cuda_empty_cache(void) {
  int n = ms_cuda_device_count(); /* nothing was ever allocated without a device */
  pthread_once(&pools_once, pools_init);
  int prev = ms_cuda_current_device();
  if (n > 0 && cuda_refuse_in_capture("empty_cache", "it waits for the device") != MS_OK) return MS_ERR_RUNTIME;
  for (int i = 0; i < n; i++) {
    if (cuda_use("empty_cache", i) != MS_OK) return MS_ERR_RUNTIME;
    pthread_mutex_lock(&pools[i].lock);
    release_cached(&pools[i]);
    pthread_mutex_unlock(&pools[i].lock);
  }
  return n > 0 ? cuda_use("empty_cache", prev) : MS_OK;
}

/* ---- page-locked host blocks (moonshard/cuda.h) --------------------------------------------------
 * cudaHostAlloc maps and locks pages and costs about as much as cudaMalloc, so freed blocks are
 * kept by size class and handed out again (a DataLoader with pin_memory reuses a few blocks for a
 * whole epoch). A header in front of each block remembers the event recorded after the last copy
 * queued on it: a block whose copy has not run yet is never handed out again, so a non-blocking
 * copy from a batch that Lua freed at once still reads the batch's bytes. */

typedef struct host_block {
  size_t size;          /* the size class: bytes usable after the header */
  cudaEvent_t use;      /* recorded after the last queued copy from or to the block; NULL: none */
  int use_device;       /* the device of `use` */
  struct host_block *next; /* in the cache */
} host_block;

#define HOST_HEADER 64 /* keeps the data 64-byte aligned, as the CPU allocator's */

static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static host_block *host_cache;
static int64_t host_live, host_cached;

static host_block *host_header(void *p) { return (host_block *)((char *)p - HOST_HEADER); }

/* Whether the block's last queued copy is done (true when it has none). */
static bool host_block_idle(host_block *b) {
  if (!b->use) return true;
  cudaError_t e = cudaEventQuery(b->use);
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError(); /* cudaErrorNotReady is no failure; a real one surfaces at the next call */
  return false;
}

static host_block *host_take_cached(size_t size) {
  for (host_block **b = &host_cache; *b; b = &(*b)->next)
    if ((*b)->size == size && host_block_idle(*b)) {
      host_block *hit = *b;
      *b = hit->next;
      host_cached -= (int64_t)size;
      return hit;
    }
  return NULL;
}

void *ms_cuda_host_alloc(size_t nbytes) {
  if (!ms_cuda_is_available())
    return ms_error(MS_ERR_RUNTIME, "pin_memory: page-locked memory needs CUDA: %s", ms_cuda_unavailable_reason()), NULL;
  size_t size = size_class(nbytes);
  pthread_mutex_lock(&host_lock);
  host_block *b = host_take_cached(size);
  pthread_mutex_unlock(&host_lock);
  if (!b) {
    void *raw = NULL;
    cudaError_t err = cudaHostAlloc(&raw, HOST_HEADER + size, cudaHostAllocPortable);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return ms_error(MS_ERR_MEMORY, "pin_memory: could not allocate %zu bytes of page-locked host memory: %s",
                      nbytes, cudaGetErrorString(err)), NULL;
    }
    b = raw;
    *b = (host_block){size, NULL, -1, NULL};
  }
  pthread_mutex_lock(&host_lock);
  host_live += (int64_t)size;
  pthread_mutex_unlock(&host_lock);
  return (char *)b + HOST_HEADER;
}

void ms_cuda_host_free(void *p) {
  if (!p) return;
  host_block *b = host_header(p);
  pthread_mutex_lock(&host_lock);
  host_live -= (int64_t)b->size;
  host_cached += (int64_t)b->size;
  b->next = host_cache, host_cache = b;
  pthread_mutex_unlock(&host_lock);
}

ms_status ms_cuda_host_record_use(void *p, int index) {
  host_block *b = host_header(p);
  if (cuda_use("pin_memory", index) != MS_OK) return MS_ERR_RUNTIME;
  pthread_mutex_lock(&host_lock);
  ms_status st = MS_OK;
  if (b->use && b->use_device != index) { /* an event is recorded only on its own device's streams */
    cudaEventSynchronize(b->use);
    cudaEventDestroy(b->use);
    b->use = NULL;
  }
  if (!b->use) {
    st = cuda_check("pin_memory", cudaEventCreateWithFlags(&b->use, cudaEventDisableTiming));
    b->use_device = index;
    if (st != MS_OK) b->use = NULL;
  }
  if (st == MS_OK) st = cuda_check("pin_memory", cudaEventRecord(b->use, cuda_raw_stream(index)));
  pthread_mutex_unlock(&host_lock);
  return st;
}

ms_status ms_cuda_host_memcpy_async(void *dst, int dst_index, const void *src, int src_index, size_t nbytes,
                                    ms_cuda_copy_kind kind) {
  if (kind == MS_CUDA_D2D) return ms_error(MS_ERR_ARG, "copy: a non-blocking copy goes between the host and a device");
  int dev = kind == MS_CUDA_H2D ? dst_index : src_index;
  if (nbytes == 0) return MS_OK;
  if (cuda_refuse_in_capture("copy", HOST_COPY_IN_CAPTURE) != MS_OK) return MS_ERR_RUNTIME;
  if (cuda_use("copy", dev) != MS_OK) return MS_ERR_RUNTIME;
  enum cudaMemcpyKind k = kind == MS_CUDA_H2D ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  return cuda_check("copy", cudaMemcpyAsync(dst, src, nbytes, k, cuda_raw_stream(dev)));
}

ms_status ms_cuda_host_stats(int64_t *live, int64_t *cached) {
  pthread_mutex_lock(&host_lock);
  *live = host_live, *cached = host_cached;
  pthread_mutex_unlock(&host_lock);
  return MS_OK;
}
