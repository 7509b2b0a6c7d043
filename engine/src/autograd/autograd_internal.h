/* autograd_internal.h (engine-internal): what the rest of the engine needs from autograd
 * beyond the public header: hook records and the tensor-side cleanup. */
#ifndef MS_AUTOGRAD_INTERNAL_H
#define MS_AUTOGRAD_INTERNAL_H

#include "moonshard/autograd.h"

typedef enum { MS_HOOK_GRAD, MS_HOOK_POST_ACCUMULATE } ms_hook_kind;

struct ms_hook {
  int handle;
  ms_hook_kind kind;
  int output_nr; /* for hooks on a node's output */
  ms_grad_hook_fn grad_fn;
  ms_post_accumulate_fn post_fn;
  void *ctx;
  ms_hook_ctx_free free_ctx;
  struct ms_hook *next;
};

/* The AccumulateGrad node of a leaf that requires grad (a new reference), created on demand. */
ms_node *autograd_grad_accumulator(ms_tensor *leaf);
/* Runs the grad hooks in `list` (those for output_nr, or all when output_nr < 0) on *grad,
 * replacing *grad (releasing the old) when a hook returns a replacement. */
ms_status autograd_run_grad_hooks(struct ms_hook *list, int output_nr, ms_tensor **grad);
/* Frees the node's saved tensors and context (the graph's memory after backward). */
void node_release_saved(ms_node *node);

#endif
