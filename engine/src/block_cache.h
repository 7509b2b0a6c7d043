/* block_cache.h (engine-internal): a cache of large freed blocks by size class, so a training
 * step that frees and allocates the same activation sizes every iteration reuses memory that is
 * already mapped instead of paying page faults on fresh pages each time. */
#ifndef MS_BLOCK_CACHE_H
#define MS_BLOCK_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The size a block of nbytes is allocated with when it is large enough to cache (within 1/8
 * of a power of two, so nearby sizes share blocks), or 0 when it is not cached. */
size_t block_class(size_t nbytes);
/* A 64-byte-aligned block of at least class_bytes: a cached one of up to 5/4 of that, else a
 * fresh mapping; NULL when out of memory. */
void *block_alloc(size_t class_bytes);
/* Keeps p (from block_alloc) for reuse, or unmaps it when the cache is full. */
void block_free(void *p);
int64_t block_cache_bytes(void);
/* The most bytes the cache may hold now (block_cache.c says the rule). */
int64_t block_cache_bound(void);
/* Frees every cached block. */
void block_cache_empty(void);

#endif
