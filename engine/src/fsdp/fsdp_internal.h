/* fsdp_internal.h (private to engine/src/fsdp): the flat parameter's fields (moonshard/fsdp.h
 * keeps it opaque) and what the fsdp/ files share beyond the public headers: buffer helpers
 * of flat_param.c and each file's cleanup. */
#ifndef MS_FSDP_INTERNAL_H
#define MS_FSDP_INTERNAL_H

#include "moonshard/fsdp.h"
#include "moonshard/memory.h"

struct ms_flat_param {
  int refs; /* ms_flat_param_retain / ms_flat_param_free */
  ms_pg *pg; /* owned reference */
  ms_fsdp_strategy strategy;
  int world, rank;
  ms_dtype dtype;
  ms_device device; /* the parameters' device: full, compute and communication buffers live there */
  bool offload;     /* cpu_offload on a CUDA device: the shard and its grad in page-locked host memory */
  int64_t numel, padded, shard_numel; /* N, Np, S (NO_SHARD: S = Np = N) */
  ms_storage *full;                   /* Np elements, MS_MEM_PARAMS; released while sharded */
  ms_tensor *full_flat;               /* 1-D view of all of `full` (no grad) */
  ms_tensor *shard;                   /* S elements, leaf requiring grad */
  int nparams;
  ms_tensor **params; /* the replacement leaves: views of `full` with the originals' shapes */
  int64_t *offsets;   /* element offset of each in the full buffer */
  int *hook_handles;  /* post-accumulate hooks on compute_params (0: none) */
  int grads_pending;  /* params requiring grad whose grad has not arrived in this backward */
  int grads_expected;
  /* The original parameters as the optimizer sees them (PyTorch's use_orig_params=True): piece i
   * is this rank's part of param i, a 1-D view of the shard (0 elements where the rank holds
   * none of it) with param i's requires_grad, starting at element piece_offsets[i] of the
   * flattened param. After a reduction each piece's grad is the matching view of shard->grad;
   * the optimizer updates the pieces, i.e. the shard, in place. */
  ms_tensor **pieces;
  int64_t *piece_offsets;
  bool no_sync; /* grads stay in the compute views (accumulating) until a backward without it */
  /* communication (flat_param_comm.c) */
  ms_pg *inter;         /* HYBRID_SHARD: this shard's replicas on other nodes (owned), else NULL */
  ms_work *gather_work; /* the in-flight all-gather into `compute`, or NULL */
  int gather_version;   /* compute's version before it: re-gathering is not a write */
  ms_work *reduce_work; /* the in-flight gradient reduction (stage 1 or 2), or NULL */
  ms_tensor *reduce_out; /* where it lands: shard-sized (NO_SHARD: padded), reduce dtype */
  int reduce_stage;     /* 1: the reduce-scatter/all-reduce in flight; 2: the inter all-reduce */
  struct ms_flat_param *inflight_next; /* the list of units with work in flight */
  bool inflight;
  ms_fsdp_comm_stats stats;
  /* mixed precision (flat_param_mp.c): forward and backward compute in param_dtype from a
   * separate buffer; the shard and `full` (state dicts) stay in dtype */
  ms_dtype param_dtype, reduce_dtype; /* both = dtype when mixed precision is off */
  ms_dtype grad_dtype;                /* the shard's grad: dtype, or reduce_dtype with keep_low_precision_grads */
  ms_storage *compute;       /* the buffer modules compute with: `full`, or a param_dtype one */
  ms_tensor *compute_flat;   /* 1-D view of all of `compute` */
  ms_tensor **compute_params; /* its views: `params`, or param_dtype views (owned then) */
  char *name; /* the unit's stable name (its module path), the origin of its collectives; owned */
  /* the per-step runtime (fsdp_runtime.c): the root whose execution order the unit records (weak:
   * the root clears it when freed), the unit's place in that root's list, its prefetch options,
   * and what runs once the unit's grads have all arrived in a backward (BACKWARD_POST) */
  struct ms_fsdp_state *root;
  int root_index;
  bool forward_prefetch;
  int backward_prefetch; /* ms_fsdp_backward_prefetch */
  bool limit_all_gathers;
  ms_status (*on_grads_done)(ms_flat_param *fp);
};

/* A 1-D tensor of n elements over a fresh storage of the given memory category (new reference):
 * on the unit's device (full, compute and communication buffers), or where the shard lives
 * (the shard's grad: page-locked host memory with cpu_offload). */
ms_tensor *fsdp_new_flat(const ms_flat_param *fp, int64_t n, ms_dtype dt, ms_mem_category cat);
ms_tensor *fsdp_new_shard_flat(const ms_flat_param *fp, int64_t n, ms_dtype dt, ms_mem_category cat);
/* The shard, detached, in dt on the unit's device (new reference): the all-gathers' input. */
ms_tensor *fsdp_shard_on_device(ms_flat_param *fp, ms_dtype dt);
/* A view of s with a contiguous layout of the given shape at offset (elements; new reference). */
ms_tensor *fsdp_contiguous_view(ms_storage *s, ms_dtype dt, int ndim, const int64_t *shape, int64_t offset);

/* flat_param.c, the pieces' grads around a reduction: before packing, shard->grad is made to say
 * what the pieces' grads say (none at all: dropped; a piece without one: its slice zeroed; one
 * assigned by the user: copied in); after the result is added into it, each piece requiring
 * grad gets the matching view of it as its grad. */
ms_status fsdp_sync_shard_grad(ms_flat_param *fp);
ms_status fsdp_use_piece_grad_views(ms_flat_param *fp);

/* flat_param_comm.c: finishes in-flight collectives and drops what they hold (for free). */
void fsdp_comm_free(ms_flat_param *fp);
/* flat_param_mp.c: frees the param_dtype buffer and views (for free, after the hooks are gone). */
void fsdp_mp_free(ms_flat_param *fp);

#endif
