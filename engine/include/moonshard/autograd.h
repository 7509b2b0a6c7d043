/* autograd.h: the dynamic graph. An op whose inputs require grad (and grad mode is on) records
 * a node: its backward function, edges to the nodes that produced its inputs, and the tensors it
 * saved. ms_backward walks the nodes in reverse creation order and accumulates leaf gradients
 * into t->grad. Hooks are C callbacks, so the distributed layer can use them natively; the Lua
 * face wraps Lua functions in them.
 *
 * How an op records itself (engine/src/autograd/grad_*.c; a C host's own op does the same): the
 * computation records nothing (the engine's native ops; a host computes with grad mode off),
 * then the node is made when an input wants a gradient:
 *
 *   ms_tensor *out = compute(a, b);           // records nothing
 *   if (out && ms_autograd_wants(2, (ms_tensor *[]){a, b})) {
 *     ms_node *n = ms_node_new("MulBackward0", mul_backward, 2, (ms_tensor *[]){a, b});
 *     ms_node_save(n, a); ms_node_save(n, b);
 *     ms_node_attach(n, out, 0);              // out->grad_fn = n (retained)
 *     ms_node_release(n);                     // the recording's own reference
 *   }
 */
#ifndef MOONSHARD_AUTOGRAD_H
#define MOONSHARD_AUTOGRAD_H

#include <stdbool.h>
#include <stdint.h>

#include "moonshard/export.h"
#include "moonshard/tensor.h"

/* ---- grad mode (thread-local, on by default) -------------------------------------------------- */
/* Whether grad mode is on (on this thread). */
MS_API bool ms_grad_enabled(void);
/* Sets grad mode and returns the previous value, for scoped restore. */
MS_API bool ms_grad_set_enabled(bool enabled);

/* ---- nodes ------------------------------------------------------------------------------------ */
typedef struct ms_node ms_node;

typedef struct ms_edge {
  ms_node *node; /* owned reference; NULL when that input needs no gradient */
  int input_nr;  /* which output of `node` the input was */
} ms_edge;

/* Computes the gradients of the node's inputs from the gradient of its output(s).
 * grad_out[k] is the gradient of output k (never NULL: missing ones are zeros, unless the node
 * sets takes_missing_grads). It writes a new reference (or NULL for "no gradient") into
 * grad_in[i] for each input i whose edge has a node; it may leave the others NULL. Returns MS_OK or an error (with ms_error set). */
typedef ms_status (*ms_backward_fn)(ms_node *self, ms_tensor *const *grad_out, ms_tensor **grad_in);

/* A hook on the gradient flowing into a node's output k (tensor hooks) or into a leaf: may
 * replace it by storing a new reference in *replace (leave NULL to keep it). */
typedef ms_status (*ms_grad_hook_fn)(void *ctx, ms_tensor *grad, ms_tensor **replace);
/* Runs after a leaf's .grad has been updated by backward (per-parameter post-accumulate hook). */
typedef ms_status (*ms_post_accumulate_fn)(void *ctx, ms_tensor *param);
typedef void (*ms_hook_ctx_free)(void *ctx);

typedef struct ms_saved {
  ms_tensor *tensor; /* owned reference */
  int version;       /* its storage version when saved: a later in-place write is an error */
} ms_saved;

#define MS_NODE_MAX_OUTPUTS 4
#define MS_NODE_MAX_SAVED 8

struct ms_node {
  atomic_int refcount;
  const char *name;        /* PyTorch's grad_fn name: "MulBackward0" */
  ms_backward_fn backward;
  uint64_t sequence;       /* creation order: later nodes run first */
  int num_inputs;
  ms_edge *next;           /* num_inputs edges */
  int num_outputs;
  /* shape and dtype of each output, to make zero gradients for outputs nobody used */
  int out_ndim[MS_NODE_MAX_OUTPUTS];
  int64_t out_shape[MS_NODE_MAX_OUTPUTS][MS_MAX_DIMS];
  ms_dtype out_dtype[MS_NODE_MAX_OUTPUTS];
  /* the backward takes NULL for an output nobody used (and no tensor hook watches), instead of
   * a zero tensor made for it: split's, which zeroes that slot of its result only */
  bool takes_missing_grads;
  /* what the backward needs */
  int num_saved;
  ms_saved saved[MS_NODE_MAX_SAVED];
  double scalars[8];
  int64_t ints[2 * MS_MAX_DIMS + 8];
  void *ctx;               /* anything else, freed with free_ctx */
  void (*free_ctx)(void *ctx);
  bool released;           /* saved state freed by a backward without retain_graph */
  ms_tensor *variable;     /* AccumulateGrad only: the leaf (owned) */
  struct ms_hook *pre_hooks; /* tensor hooks of non-leaf outputs, by output number */
  /* the backward walk's scratch (engine/src/autograd/backward.c) */
  uint64_t walk;             /* which walk last visited this node */
  int dependencies;          /* edges from nodes of this walk not yet run */
  ms_tensor *grad_buf[MS_NODE_MAX_OUTPUTS];
  struct ms_node *release_next; /* ms_node_release's work list */
  char *owned_name;             /* a custom node's copy of its name (name points here) */
};

/* True when grad mode is on and any of the n inputs (NULLs allowed) requires grad. */
MS_API bool ms_autograd_wants(int n, ms_tensor *const *inputs);
/* A new node (one reference, the caller's) with edges to the inputs' producers: their grad_fn,
 * or for leaves requiring grad their AccumulateGrad node. */
MS_API ms_node *ms_node_new(const char *name, ms_backward_fn backward, int n, ms_tensor *const *inputs);
/* Saves t (retained) with its current version. Returns its slot. */
MS_API int ms_node_save(ms_node *node, ms_tensor *t);
/* The saved tensor in slot i, or NULL with an error if the graph was freed or the tensor was
 * modified in place since it was saved. */
MS_API ms_tensor *ms_node_saved(ms_node *node, int i);
/* A node whose backward is a host's callback: a custom autograd Function (the Lua face's
 * ms.autograd.Function, PyTorch's torch.autograd.Function). fn gets the node's grad_out (one per
 * attached output, never NULL) and writes new references (or NULL) into grad_in, one per input,
 * as an ms_backward_fn does. The name is copied. ctx is freed with free_ctx with the node's saved
 * state (after a backward without retain_graph, or when the node dies); a backward through a
 * freed node is the "backward through the graph a second time" error. fn may run a backward of
 * its own (activation checkpointing's recompute). */
typedef ms_status (*ms_custom_backward_fn)(void *ctx, const ms_node *node, ms_tensor *const *grad_out,
                                           ms_tensor **grad_in);
/* The custom node described above (new reference), with edges to the n inputs' producers. */
MS_API ms_node *ms_custom_node_new(const char *name, int n, ms_tensor *const *inputs, ms_custom_backward_fn fn,
                                   void *ctx, ms_hook_ctx_free free_ctx);
/* Makes `node` the grad_fn of `out` as output number k (out then requires grad; it retains the
 * node). Attach every output, then release the recording's own reference. */
MS_API void ms_node_attach(ms_node *node, ms_tensor *out, int k);
MS_API void ms_node_retain(ms_node *node);
MS_API void ms_node_release(ms_node *node); /* NULL is fine */

/* ---- tensors ---------------------------------------------------------------------------------- */
/* A leaf tensor (no grad_fn) that requires grad, or any tensor without requires_grad. */
MS_API bool ms_tensor_is_leaf(const ms_tensor *t);
/* The same data, cut from the graph (new reference; shares storage). */
MS_API ms_tensor *ms_tensor_detach(ms_tensor *t);
/* Backpropagates from root. grad is d(something)/d(root), NULL meaning 1 for a one-element root.
 * With retain_graph false, every node's saved state is freed as the walk passes it. */
MS_API ms_status ms_backward(ms_tensor *root, ms_tensor *grad, bool retain_graph);
/* Queues fn(ctx) to run once after the graph walk of the ms_backward now running on this thread
 * (the innermost one when backwards nest), in queue order, before it returns; a callback may
 * queue more. Callbacks run after a failed walk too (the walk's error wins), so issued work is
 * always waited for; otherwise the first failing callback's error becomes backward's error (the
 * rest still run, so each can release what it holds). Outside a backward it is an error. What FSDP needs to wait
 * for its asynchronous gradient reductions before backward returns, as PyTorch's
 * Variable._execution_engine.queue_callback. */
MS_API ms_status ms_autograd_queue_callback(ms_status (*fn)(void *ctx), void *ctx);
/* Sets the function every backward walk calls between two nodes (NULL: none; one per process).
 * FSDP's: its asynchronous collectives advance only inside MPI calls, and a unit's backward is
 * many nodes long, so testing them between nodes lets the transfers overlap the computation
 * instead of waiting whole at the unit's end. It must be cheap when nothing is in flight. */
MS_API void ms_autograd_set_progress_fn(void (*fn)(void));
/* True while the callbacks of a backward whose walk failed run: a callback then only waits for
 * and releases what it holds, and starts no new collective (other ranks may not be there). */
MS_API bool ms_autograd_walk_failed(void);

/* Hooks; each returns a handle (> 0) for removal, or 0 with an error. The ctx is freed with
 * free_ctx (may be NULL) when the hook is removed or its node dies. */
MS_API int ms_tensor_register_hook(ms_tensor *t, ms_grad_hook_fn fn, void *ctx, ms_hook_ctx_free free_ctx);
MS_API int ms_tensor_register_post_accumulate_hook(ms_tensor *t, ms_post_accumulate_fn fn, void *ctx,
                                                   ms_hook_ctx_free free_ctx);
MS_API ms_status ms_tensor_remove_hook(ms_tensor *t, int handle);

/* Adds `grad` into t->grad (allocating it on first use), the way AccumulateGrad does. */
MS_API ms_status ms_tensor_accumulate_grad(ms_tensor *t, ms_tensor *grad);

#endif
