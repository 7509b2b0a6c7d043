/* loader.h: the native half of the DataLoader. Given source tensors that share their first
 * dimension (an MNIST image tensor and its labels, a TensorDataset's tensors; or the rows of an
 * IDX file, read per batch instead of held in memory), the index lists
 * of one epoch's batches and an optional transform per source, it makes batch tensors: gather
 * the rows, apply the transform, hand them over in batch order. With num_workers > 0, worker
 * threads make batches ahead into a bounded queue while the caller trains; with 0, each batch
 * is made on the caller's thread when asked for. Either way the batches are identical.
 *
 * Indices are 0-based, as everywhere in the engine. One loader serves one pass over its
 * batches (one epoch); the Lua face creates one per iteration. */
#ifndef MOONSHARD_LOADER_H
#define MOONSHARD_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "moonshard/export.h"
#include "moonshard/idx.h"
#include "moonshard/tensor.h"

/* Turns a gathered batch (borrowed) into the batch handed out: a new reference, or NULL with
 * ms_error set. Called from worker threads, concurrently: it must be thread-safe. */
typedef ms_tensor *(*ms_loader_transform_fn)(void *ctx, ms_tensor *batch);

typedef struct ms_loader_source {
  ms_tensor *tensor;                /* borrowed by ms_loader_create, which keeps what it needs */
  ms_idx_rows *rows;                /* instead of tensor (which is then NULL): rows read from an
                                       IDX file per batch; borrowed, the loader keeps a reference */
  ms_loader_transform_fn transform; /* NULL: the gathered rows are the batch */
  void *ctx;                        /* the transform's; owned by the loader from create on */
  void (*free_ctx)(void *ctx);      /* may be NULL */
} ms_loader_source;

typedef struct ms_loader_config {
  int num_workers;     /* 0: batches are made synchronously by ms_loader_next */
  int prefetch_factor; /* batches each worker may have made ahead (>= 1) */
  bool pin_memory;     /* page-locked batches where CUDA is built and a GPU is present;
                          nothing to do in a CPU-only build */
} ms_loader_config;

#define MS_LOADER_MAX_SOURCES 8

typedef struct ms_loader ms_loader;

/* A loader over nsources sources for nbatches batches: batch k holds the rows
 * indices[offsets[k]] .. indices[offsets[k + 1] - 1] (offsets has nbatches + 1 entries, the
 * first 0). indices and offsets are copied. Every index is checked against the sources here,
 * so workers never meet a bad one. Starts the workers. On failure returns NULL with an error,
 * and has freed the sources' transform contexts all the same (so the caller never has to). */
MS_API ms_loader *ms_loader_create(const ms_loader_source *sources, int nsources, const int64_t *indices,
                                   const int64_t *offsets, int64_t nbatches, ms_loader_config cfg);

/* How many batches the loader yields in all. */
MS_API int64_t ms_loader_num_batches(const ms_loader *l);
/* The nsources it was created with. */
MS_API int ms_loader_num_sources(const ms_loader *l);

/* The next batch in order: out[s] receives a new reference for each source s. Blocks until the
 * batch is made. Returns MS_OK; MS_ERR_ARG with out untouched once every batch was handed out
 * (ms_loader_exhausted tells the two apart); or the error that making the batch raised, with
 * the worker's message (the batch is then skipped: the next call moves on). *batch receives
 * the 0-based number of the batch concerned (may be NULL). */
MS_API ms_status ms_loader_next(ms_loader *l, ms_tensor **out, int64_t *batch);
MS_API bool ms_loader_exhausted(const ms_loader *l);

/* Stops the workers (each finishes the batch in hand), joins them and frees everything,
 * batches made but not handed out included. NULL is fine. */
MS_API void ms_loader_destroy(ms_loader *l);

#endif
