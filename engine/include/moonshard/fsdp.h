/* fsdp.h: the FlatParameter of one FSDP unit (DESIGN.md "FSDP"). A unit's original parameters
 * are packed, in registration order, into one flat buffer of N elements padded to
 * Np = ceil(N / W) * W; rank r keeps the contiguous slice [r*S, (r+1)*S) with S = Np / W as its
 * shard, a leaf requiring grad that the optimizer updates. Each original parameter is replaced
 * by a leaf view into the full (unsharded) buffer, so modules keep computing with them; the full
 * buffer's bytes are gathered before use and may be released in between. Gradients of the
 * original parameters are packed the same way and reduce-scattered (averaged) into shard->grad.
 * One collective per unit, never one per parameter. Counts are in elements. */
#ifndef MOONSHARD_FSDP_H
#define MOONSHARD_FSDP_H

#include <stdbool.h>
#include <stdint.h>

#include "moonshard/dist.h"
#include "moonshard/export.h"
#include "moonshard/tensor.h"

typedef enum ms_fsdp_strategy {
  MS_FSDP_FULL_SHARD = 0, /* release the full buffer after forward and after backward */
  MS_FSDP_SHARD_GRAD_OP,  /* keep it from forward through backward, release after backward */
  MS_FSDP_NO_SHARD        /* every rank holds everything: the shard is the full buffer */
} ms_fsdp_strategy;

/* Per-unit communication counters (flat_param_comm.c); a model's are the sum over its units. */
typedef struct ms_fsdp_comm_stats {
  int64_t allgather_calls;  /* all-gathers of the compute buffer (prefetched or not) */
  int64_t prefetch_calls;   /* of those, issued ahead of the unit's use */
  int64_t reduce_calls;     /* gradient reductions (reduce-scatter; NO_SHARD: all-reduce) */
  int64_t allreduce_calls;  /* HYBRID_SHARD's second stage, across replicas */
  int64_t allgather_bytes;  /* bytes of the gathered buffers (padded, param dtype) */
  int64_t reduce_bytes;     /* bytes of the reduced gradient buffers (reduce dtype), both stages */
  int64_t waits;            /* waits that found their collective unfinished */
  double wait_seconds;      /* time blocked in those waits: the exposed communication */
  int64_t max_gathered;     /* the most units' full buffers gathered at once (the root's aside),
                             * seen when this unit gathered or prefetched; a model's is the max */
} ms_fsdp_comm_stats;

/* One FSDP unit's flat parameter: opaque (engine/src/fsdp/fsdp_internal.h), read through the
 * functions below. Reference counted: the FSDP runtime (moonshard/fsdp_runtime.h) and the hooks
 * it leaves on a forward's outputs hold references, so a unit outlives what still needs it. */
typedef struct ms_flat_param ms_flat_param;

/* What a unit is made of and how it runs (ms_flat_param_get_info). */
typedef struct ms_flat_param_info {
  int64_t numel, padded, shard_numel; /* N, Np, S (NO_SHARD: S = Np = N) */
  int world, rank;                    /* in the unit's group */
  int nparams;                        /* original parameters flattened */
  ms_fsdp_strategy strategy;
  ms_device device;               /* the parameters' device: full, compute and comm buffers */
  bool offloaded;                 /* cpu_offload on a CUDA device: the shard in pinned host memory */
  ms_dtype dtype;                 /* the shard's (the original parameters') */
  ms_dtype param_dtype, reduce_dtype; /* mixed precision; both = dtype when it is off */
} ms_flat_param_info;

/* Packs params[0..n) (borrowed; all of one floating dtype, on one device) into a new flat
 * parameter over pg (borrowed, retained; NULL = the world; its backend must move tensors of that
 * device: nccl for CUDA). Copies their values, keeps this rank's shard, and makes the replacement
 * views (fp->params) with the originals' requires_grad. For the sharded strategies the full
 * buffer is left released. offload_params (PyTorch's CPUOffload): on a CUDA device the shard
 * and its grad live in page-locked host memory (the optimizer steps there), copied to the device
 * for each all-gather, the reduced grad copied back; on the CPU it changes nothing (the shard is
 * in host memory already). NULL with an error on failure. */
MS_API ms_flat_param *ms_flat_param_create(ms_tensor *const *params, int n, ms_pg *pg,
                                           ms_fsdp_strategy strategy, bool offload_params);
/* Drops the caller's reference (NULL is fine); the unit is freed with the last one. */
MS_API void ms_flat_param_free(ms_flat_param *fp);
MS_API ms_flat_param *ms_flat_param_retain(ms_flat_param *fp); /* a new reference; returns fp */
/* Names the unit (a copy of name: its module path in the model, the same on every rank): every
 * collective of the unit carries it and its phase as its origin (ms_dist_set_origin), which the
 * ranks compare (the execution order; dist.h, ms_dist_init). */
MS_API ms_status ms_flat_param_set_name(ms_flat_param *fp, const char *name);

/* ---- reading a unit ------------------------------------------------------------------------------ */
/* Fills *out with the unit's sizes, group, strategy, device and dtypes. */
MS_API void ms_flat_param_get_info(const ms_flat_param *fp, ms_flat_param_info *out);
/* The shard: S elements, a leaf requiring grad (borrowed). */
MS_API ms_tensor *ms_flat_param_shard(const ms_flat_param *fp);
/* Parameter i (0-based) of the unit, borrowed: the replacement view of the full buffer in dtype
 * (summon_full_params, state dicts), its view of the compute buffer (what forward computes
 * with: the same tensor without mixed precision, a param_dtype one with it), and this rank's
 * piece of it (a 1-D view of the shard: what the optimizer updates), which starts at element
 * ms_flat_param_piece_offset of the flattened parameter. NULL with an error for a bad i. */
MS_API ms_tensor *ms_flat_param_view(const ms_flat_param *fp, int i);
MS_API ms_tensor *ms_flat_param_compute_view(const ms_flat_param *fp, int i);
MS_API ms_tensor *ms_flat_param_piece(const ms_flat_param *fp, int i);
MS_API int64_t ms_flat_param_piece_offset(const ms_flat_param *fp, int i); /* -1 with an error for a bad i */
MS_API const ms_fsdp_comm_stats *ms_flat_param_stats(const ms_flat_param *fp);
/* While on, backwards leave the grads in the compute views, accumulating (model:no_sync()). */
MS_API void ms_flat_param_set_no_sync(ms_flat_param *fp, bool on);

/* All-gathers the shards into the full buffer (materializing it). Never counts as a write for
 * autograd: see flat_param.c. NO_SHARD: nothing to do. */
MS_API ms_status ms_flat_param_gather(ms_flat_param *fp);
/* Copies this rank's slice of the (gathered) full buffer into the shard, after the views were
 * written (loading a state dict). NO_SHARD: nothing to do, the shard is the full buffer. */
MS_API ms_status ms_flat_param_update_shard(ms_flat_param *fp);
/* Frees the full buffer's bytes, and the compute buffer's with mixed precision, after waiting for
 * an in-flight gather (sharded strategies only; views stay valid objects). */
MS_API void ms_flat_param_release(ms_flat_param *fp);
MS_API bool ms_flat_param_is_gathered(const ms_flat_param *fp);
/* Packs the compute views' grads (zeros where none), reduces them across ranks (average) into a
 * shard-sized gradient accumulated into shard->grad, and drops the views' grads; waits for it
 * (the asynchronous form is ms_flat_param_reduce_grads_async). shard->grad first takes what the
 * pieces' grads say (none at all: start from zero; a piece without one: its slice zeroed; one
 * assigned by the user: copied in); after, the pieces' grads are views of it (pieces of frozen
 * params and empty pieces get none). */
MS_API ms_status ms_flat_param_reduce_grads(ms_flat_param *fp);
/* Registers native post-accumulate hooks on the compute views: once every param requiring grad
 * has its grad in a backward, the reduction is issued (ms_flat_param_reduce_grads_async; none
 * under no_sync), then (sharded strategies) the buffers are released. The root's finisher waits
 * for it (ms_flat_param_finish_backward). */
MS_API ms_status ms_flat_param_install_hooks(ms_flat_param *fp);
/* Starts a new count of pending grads (call at each forward). */
MS_API void ms_flat_param_reset_pending(ms_flat_param *fp);
/* End of a backward (run from the root's ms_autograd_queue_callback, the one place a backward's
 * reductions are waited for): waits for the unit's in-flight reduction (the pieces' grads then
 * view shard->grad); a unit that received some but not all of its grads reduces now, the missing
 * ones counting as zeros (unless no_sync or cleanup_only); then the count restarts and the
 * sharded strategies release the buffers. cleanup_only (after a failed walk or an earlier
 * unit's error) starts no collective: other ranks may not be there to match it. */
MS_API ms_status ms_flat_param_finish_backward(ms_flat_param *fp, bool cleanup_only);
/* Frees shard->grad when no piece holds a grad any more (optimizer.zero_grad() set them to
 * nil), so that memory is not held through the next forward; the next reduction starts from
 * zero either way. */
MS_API void ms_flat_param_drop_unused_grad(ms_flat_param *fp);

/* ---- mixed precision (flat_param_mp.c) ------------------------------------------------------- */
/* Computes in param_dtype: a second full buffer and views in that dtype (fp->compute_params, which
 * the modules should use in forward) gathered from the shard cast to param_dtype (half the bytes
 * for 16-bit types); gradients are reduced in reduce_dtype and land in the shard's grad in
 * fp->dtype. Call right after create, before install_hooks. */
MS_API ms_status ms_flat_param_set_mixed_precision(ms_flat_param *fp, ms_dtype param_dtype, ms_dtype reduce_dtype);
MS_API bool ms_flat_param_mixed(const ms_flat_param *fp); /* compute buffer separate from `full` */
/* keep_low_precision_grads (PyTorch's MixedPrecision option): the shard's grad, and so each
 * piece's .grad, stays in reduce_dtype instead of being widened to the shard's dtype after the
 * reduction (half the grad memory with bfloat16; the optimizers widen such a grad for their update).
 * Set after ms_flat_param_set_mixed_precision, before any backward. */
MS_API ms_status ms_flat_param_set_keep_low_precision_grads(ms_flat_param *fp, bool keep);

/* ---- asynchronous communication (flat_param_comm.c) ----------------------------------------- */
/* HYBRID_SHARD: fp->pg shards inside a node; inter (borrowed, retained) holds the ranks with the
 * same shard on the other nodes, across which the reduced shard gradients are all-reduced (avg).
 * Must have this process as a member. */
MS_API ms_status ms_flat_param_set_inter_group(ms_flat_param *fp, ms_pg *inter);
/* Issues the all-gather of the compute buffer without waiting (prefetch: nothing when already
 * gathered or in flight). NO_SHARD with mixed precision: a local cast, done at once. backward:
 * for the unit's backward (its phase, checked across ranks), else for its forward. */
MS_API ms_status ms_flat_param_gather_compute_async(ms_flat_param *fp, bool prefetch, bool backward);
/* Makes the compute buffer ready: waits for its all-gather, issuing it first when none is in
 * flight and it is not gathered. */
MS_API ms_status ms_flat_param_gather_compute(ms_flat_param *fp, bool backward);
MS_API bool ms_flat_param_compute_gathered(const ms_flat_param *fp); /* gathered or in flight */
/* Frees the compute buffer (and `full`, when separate), waiting first for an in-flight gather. */
MS_API void ms_flat_param_release_compute(ms_flat_param *fp);
/* Syncs shard->grad with the pieces' grads, packs the compute views' grads in reduce_dtype and
 * issues their reduction (first finishing one still in flight); the caller waits for it with
 * ms_flat_param_wait_reduce or ms_flat_param_finish_backward. */
MS_API ms_status ms_flat_param_reduce_grads_async(ms_flat_param *fp);
/* Finishes the in-flight reduction (HYBRID: runs the second stage), adding the result into
 * shard->grad and pointing the pieces' grads at it. Nothing to do when none is in flight. */
MS_API ms_status ms_flat_param_wait_reduce(ms_flat_param *fp);
/* Tests every unit's in-flight collectives without blocking, which is what lets Open MPI's
 * non-blocking collectives progress while computation runs (see flat_param_comm.c). */
MS_API void ms_fsdp_progress(void);
MS_API void ms_flat_param_stats_reset(ms_flat_param *fp);

#endif
