/* fsdp_runtime.h: FSDP's per-step runtime over the units' flat parameters (moonshard/fsdp.h),
 * as PyTorch's FullyShardedDataParallel runs it around each unit's forward: a C host (or the Lua
 * wrapper, lua/moonshard/fsdp.lua) calls
 *
 *   ms_fsdp_root_pre_forward(root)             once per forward, before any unit runs
 *   ms_fsdp_pre_forward(unit)                  before a unit's own computation
 *   ... the unit computes with its compute views (ms_flat_param_compute_view) ...
 *   ms_fsdp_post_forward(unit, outs, n)        after it, with the unit's output tensors
 *   ms_fsdp_root_post_forward(root, outs, n)   after the root unit, with the model's outputs
 *
 * and then ms_backward on a loss as usual: the hooks left on the outputs gather each unit again
 * when its backward starts (pre-backward), the units' post-accumulate hooks reduce the grads
 * (post-backward, ms_flat_param_install_hooks), and the root's end-of-backward callback waits for
 * every reduction and reshards (finalize backward) before ms_backward returns.
 *
 * Prefetching follows the execution order each iteration records (units in pre-forward order
 * and in pre-backward order): the first iteration prefetches nothing, later ones assume the
 * previous iteration's order, and only units not yet run in the current pass are prefetched.
 * Only the thread running the training loop may call these. */
#ifndef MOONSHARD_FSDP_RUNTIME_H
#define MOONSHARD_FSDP_RUNTIME_H

#include <stdbool.h>

#include "moonshard/export.h"
#include "moonshard/fsdp.h"

/* PyTorch's BackwardPrefetch: when a unit's backward begins (PRE) or once its grads are reduced
 * (POST), the next unit in backward order is gathered ahead. */
typedef enum ms_fsdp_backward_prefetch {
  MS_FSDP_PREFETCH_NONE = 0,
  MS_FSDP_BACKWARD_PRE,
  MS_FSDP_BACKWARD_POST
} ms_fsdp_backward_prefetch;

/* The root of a wrapped model: its units and their execution order. */
typedef struct ms_fsdp_state ms_fsdp_state;

/* A unit's prefetch options: forward_prefetch issues the next unit's all-gather (forward order)
 * in this unit's pre-forward; backward as above. Call before the first forward. */
MS_API ms_status ms_fsdp_set_prefetch(ms_flat_param *unit, bool forward_prefetch, ms_fsdp_backward_prefetch backward);
/* PyTorch's limit_all_gathers: a prefetch this unit would issue is skipped while two units' full
 * buffers (the root's aside: it stays gathered through the step) are already gathered; the unit
 * it skipped then gathers in its own pre-forward or pre-backward. */
MS_API ms_status ms_fsdp_set_limit_all_gathers(ms_flat_param *unit, bool limit);

/* The root over units[0..n) (each retained; the order in which the root's end of backward
 * finishes them), of which root_unit (NULL: none) is the root module's own unit, kept gathered
 * from its forward into backward (PyTorch 1.13). Every unit then records its execution order
 * into this root (a later root over a unit takes it over). NULL with an error on bad input. */
MS_API ms_fsdp_state *ms_fsdp_state_new(ms_flat_param *const *units, int n, ms_flat_param *root_unit);
/* Drops the caller's reference (NULL is fine): hooks of a backward not yet run keep it alive. */
MS_API void ms_fsdp_state_free(ms_fsdp_state *root);

/* A new iteration: the execution order recorded so far becomes the one prefetching follows, and
 * what is still gathered (a prefetch that found no use, a forward never backpropagated) is
 * released: it was gathered before the optimizer's step. */
MS_API ms_status ms_fsdp_root_pre_forward(ms_fsdp_state *root);
/* The unit's pre-forward: starts its count of pending grads, frees a shard grad no piece uses
 * any more, records it in its root's forward order, gathers its compute buffer (every forward:
 * the optimizer may have changed the shard; a prefetched gather is waited for) and, with
 * forward_prefetch, issues the next unit's gather. */
MS_API ms_status ms_fsdp_pre_forward(ms_flat_param *unit);
/* The unit's post-forward, given its outputs (tensors, borrowed; any that require grad get the
 * hook): FULL_SHARD frees the compute buffer (not the root unit's), as do the sharded strategies
 * when no output requires grad; each output requiring grad gets the pre-backward hook, which
 * records the backward order, gathers the unit again (issuing the next unit's gather first with
 * BACKWARD_PRE) and waits for it. NO_SHARD: nothing to do. */
MS_API ms_status ms_fsdp_post_forward(ms_flat_param *unit, ms_tensor *const *outs, int n);
/* The root's post-forward: the outputs requiring grad get the hook that queues, once per
 * backward, the root's finalize-backward callback (ms_autograd_queue_callback): per unit it
 * waits for the reduction, reduces a unit that got only some of its grads (the missing ones
 * count as zeros) and reshards; after a failed walk or a unit's error it only waits and cleans
 * up. Backward returns its first error. */
MS_API ms_status ms_fsdp_root_post_forward(ms_fsdp_state *root, ms_tensor *const *outs, int n);

#endif
