/* memory.h: the allocator every tensor byte goes through, with statistics per device and per
 * category (current and peak bytes), exposed to Lua as ms.memory_stats(). */
#ifndef MOONSHARD_MEMORY_H
#define MOONSHARD_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "moonshard/export.h"

typedef enum ms_mem_category {
  MS_MEM_OTHER = 0, /* tensors not yet claimed by a role: activations, temporaries */
  MS_MEM_PARAMS,
  MS_MEM_GRADS,
  MS_MEM_OPTIMIZER,
  MS_MEM_ACTIVATIONS,
  MS_MEM_COMM,
  MS_MEM_CATEGORY_COUNT
} ms_mem_category;

typedef struct ms_memory_stats {
  int64_t current;     /* bytes held now */
  int64_t peak;        /* most bytes ever held at once (since the last reset) */
  int64_t allocations; /* number of allocations made */
  int64_t cached;      /* freed large blocks kept for reuse (not in current) */
  int64_t cache_bound; /* the most the cache may hold now: proportional to the work (block_cache.c) */
  int64_t by_category[MS_MEM_CATEGORY_COUNT];
} ms_memory_stats;

/* The category's name as the statistics print it. */
MS_API const char *ms_mem_category_name(ms_mem_category c);
/* 64-byte aligned, counted; NULL (with an error set) when the system has no memory. */
MS_API void *ms_mem_alloc(size_t nbytes, ms_mem_category category);
MS_API void ms_mem_free(void *p, size_t nbytes, ms_mem_category category);
/* Statistics of the CPU (device_index is for CUDA devices, later). */
MS_API ms_memory_stats ms_memory_stats_get(void);
MS_API void ms_memory_reset_peak(void);
/* Returns the cached blocks to the system. */
MS_API void ms_memory_empty_cache(void);

#endif
