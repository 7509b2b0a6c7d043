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
#include "moonshard/tensor.h"

typedef enum ms_fsdp_strategy {
  MS_FSDP_FULL_SHARD = 0, /* release the full buffer after forward and after backward */
  MS_FSDP_SHARD_GRAD_OP,  /* keep it from forward through backward, release after backward */
  MS_FSDP_NO_SHARD        /* every rank holds everything: the shard is the full buffer */
} ms_fsdp_strategy;

typedef struct ms_flat_param {
  ms_pg *pg; /* owned reference */
  ms_fsdp_strategy strategy;
  int world, rank;
  ms_dtype dtype;
  int64_t numel, padded, shard_numel; /* N, Np, S (NO_SHARD: S = Np = N) */
  ms_storage *full;                   /* Np elements, MS_MEM_PARAMS; released while sharded */
  ms_tensor *full_flat;               /* 1-D view of all of `full` (no grad) */
  ms_tensor *shard;                   /* S elements, leaf requiring grad */
  int nparams;
  ms_tensor **params; /* the replacement leaves: views of `full` with the originals' shapes */
  int64_t *offsets;   /* element offset of each in the full buffer */
  int *hook_handles;  /* post-accumulate hooks on params (0: none) */
  int grads_pending;  /* params requiring grad whose grad has not arrived in this backward */
  int grads_expected;
  /* The original parameters as the optimizer sees them (PyTorch's use_orig_params=True): piece i
   * is this rank's part of param i, a 1-D view of the shard (0 elements where the rank holds
   * none of it) with param i's requires_grad, starting at element piece_offsets[i] of the
   * flattened param. After a reduction each piece's grad is the matching view of shard->grad;
   * the optimizer updates the pieces, i.e. the shard, in place. */
  ms_tensor **pieces;
  int64_t *piece_offsets;
  bool no_sync; /* grads stay in params (accumulating) until a backward without no_sync */
} ms_flat_param;

/* Packs params[0..n) (borrowed; all of one floating dtype, on the CPU) into a new flat parameter
 * over pg (borrowed, retained; NULL = the world). Copies their values, keeps this rank's shard,
 * and makes the replacement views (fp->params) with the originals' requires_grad. For the
 * sharded strategies the full buffer is left released. NULL with an error on failure. */
ms_flat_param *ms_flat_param_create(ms_tensor *const *params, int n, ms_pg *pg,
                                    ms_fsdp_strategy strategy);
void ms_flat_param_free(ms_flat_param *fp); /* NULL is fine */

/* All-gathers the shards into the full buffer (materializing it). Never counts as a write for
 * autograd: see flat_param.c. NO_SHARD: nothing to do. */
ms_status ms_flat_param_gather(ms_flat_param *fp);
/* Copies this rank's slice of the (gathered) full buffer into the shard, after the views were
 * written (loading a state dict). NO_SHARD: nothing to do, the shard is the full buffer. */
ms_status ms_flat_param_update_shard(ms_flat_param *fp);
/* Frees the full buffer's bytes (sharded strategies only; views stay valid objects). */
void ms_flat_param_release(ms_flat_param *fp);
bool ms_flat_param_is_gathered(const ms_flat_param *fp);
/* Packs the params' grads (zeros where none), reduces them across ranks (average) into a
 * shard-sized gradient accumulated into shard->grad, and drops the params' grads. shard->grad
 * first takes what the pieces' grads say (none at all: start from zero; a piece without one:
 * its slice zeroed; one assigned by the user: copied in); after, the pieces' grads are views
 * of it (pieces of frozen params and empty pieces get none). */
ms_status ms_flat_param_reduce_grads(ms_flat_param *fp);
/* Registers native post-accumulate hooks: once every param requiring grad has its grad in a
 * backward, reduce_grads runs, then (sharded strategies) the full buffer is released. */
ms_status ms_flat_param_install_hooks(ms_flat_param *fp);
/* Starts a new count of pending grads (call at each forward). */
void ms_flat_param_reset_pending(ms_flat_param *fp);
/* End of a backward (run from the root's ms_autograd_queue_callback): a unit that received some
 * but not all of its grads reduces now, the missing ones counting as zeros (unless no_sync);
 * then the count restarts and the sharded strategies release the full buffer. */
ms_status ms_flat_param_finish_backward(ms_flat_param *fp);
/* Frees shard->grad when no piece holds a grad any more (optimizer.zero_grad() set them to
 * nil), so that memory is not held through the next forward; the next reduction starts from
 * zero either way. */
void ms_flat_param_drop_unused_grad(ms_flat_param *fp);

#endif
