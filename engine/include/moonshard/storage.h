/* storage.h: a refcounted block of bytes on one device. Its data may be released and
 * re-materialized (FSDP frees unsharded parameters after forward and gathers them again), so
 * views and saved tensors hold the storage object, never a raw data pointer. */
#ifndef MOONSHARD_STORAGE_H
#define MOONSHARD_STORAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moonshard/error.h"
#include "moonshard/export.h"
#include "moonshard/memory.h"

/* MS_META: shapes without data (PyTorch's "meta" device): its storages never hold bytes, and
 * every op that would read or write them fails (native_kernels_for); initialisers run on them are
 * recorded instead (moonshard/meta.h). */
typedef enum ms_device_type { MS_CPU = 0, MS_CUDA = 1, MS_META = 2 } ms_device_type;
typedef struct ms_device {
  ms_device_type type;
  int index; /* 0 for the CPU */
} ms_device;

/* Called when an external storage is freed: releases memory the engine does not own. */
typedef void (*ms_storage_deleter)(void *data, void *ctx);

typedef struct ms_storage {
  atomic_int refcount;
  ms_device device;
  ms_mem_category category; /* what the bytes are for, in the memory statistics */
  size_t nbytes;            /* the size the data has when materialized */
  void *data;               /* NULL while released */
  bool external;             /* data belongs to someone else; deleter (may be NULL) frees it */
  ms_storage_deleter deleter;
  void *deleter_ctx;
  atomic_int version; /* bumped by every in-place write through any view */
  /* A meta storage's recorded initialisers (engine/src/meta_log.c), or NULL, and the function that
   * frees them, handed down by meta_log.c so the storage knows nothing of their form. */
  struct ms_meta_log *meta_log;
  void (*meta_log_free)(struct ms_meta_log *log);
} ms_storage;

/* New storage of nbytes (uninitialised) on the CPU; NULL with an error on failure. */
MS_API ms_storage *ms_storage_new(size_t nbytes, ms_mem_category category);
/* The same on any device: CUDA bytes come from that device's caching allocator (moonshard/cuda.h). */
MS_API ms_storage *ms_storage_new_on(ms_device device, size_t nbytes, ms_mem_category category);
/* Wraps memory the caller owns, without copying; deleter (may be NULL) runs at the last release. */
MS_API ms_storage *ms_storage_new_external(void *data, size_t nbytes, ms_storage_deleter deleter, void *ctx);
MS_API void ms_storage_retain(ms_storage *s);
MS_API void ms_storage_release(ms_storage *s); /* NULL is fine */
/* Frees the bytes but keeps the object (and every view of it) alive. */
MS_API void ms_storage_release_data(ms_storage *s);
/* Allocates the bytes again after ms_storage_release_data (contents undefined). */
MS_API ms_status ms_storage_materialize(ms_storage *s);
static inline bool ms_storage_is_materialized(const ms_storage *s) { return s->data != NULL; }

#endif
