/* grad_util.h (engine-internal, autograd only): helpers every backward function uses, the
 * bookkeeping of in-place ops under autograd, and the record functions shared between the
 * grad_<family>.c files. Each of those files holds one op family: the public ops (the native op
 * of native/native.h, then the node when ms_autograd_wants), their record functions and their
 * derivatives, written with the native ops. Ownership as everywhere in the engine: arguments
 * are borrowed, returned tensors are new references. */
#ifndef MS_GRAD_UTIL_H
#define MS_GRAD_UTIL_H

#include "moonshard/autograd.h"
#include "moonshard/ops.h"
#include "native/native.h"

/* Sums grad over the dims that broadcasting added or expanded, giving a tensor of (ndim, shape)
 * (new reference). grad's shape must be a broadcast of shape. */
ms_tensor *grad_sum_to(ms_tensor *grad, int ndim, const int64_t *shape);
/* Whether a backward function may overwrite g, a gradient the walk handed it, instead of
 * allocating its result: nothing but the caller's own `refs` references hold g, nothing else
 * holds its storage, and it records no graph. Saves a buffer and its cache misses on the
 * memory-bound backwards (relu, dropout) and a copy when a leaf's first gradient arrives. */
bool grad_is_exclusive(const ms_tensor *g, int refs);
/* A derivative's intermediate results, released together at its end: the combinators that
 * build a formula borrow their arguments, and each result goes here as it is made. */
enum { MS_GRAD_TEMPS = 24 };
typedef struct ms_grad_temps {
  ms_tensor *t[MS_GRAD_TEMPS];
  int n;
} ms_grad_temps;
/* Keeps t (NULL passes through) for release with the others; t itself is returned. */
static inline ms_tensor *grad_temp(ms_grad_temps *s, ms_tensor *t) {
  if (!t) return NULL;
  if (s->n == MS_GRAD_TEMPS) { /* a formula longer than the list: a bug, reported, not a leak */
    ms_tensor_release(t);
    return ms_error(MS_ERR_RUNTIME, "backward: more than %d intermediate results", MS_GRAD_TEMPS), NULL;
  }
  return s->t[s->n++] = t;
}
static inline void grad_temps_release(ms_grad_temps *s) {
  while (s->n) ms_tensor_release(s->t[--s->n]);
}
/* The edge i of node needs a gradient. */
static inline bool grad_needed(const ms_node *node, int i) { return node->next[i].node != NULL; }
/* In-place ops under autograd: writes out's values into a and makes out's grad_fn a's, as if a
 * had been replaced by out (borrowed; NULL, a failed computation, passes its error on). Leaves
 * that require grad refuse (PyTorch's rule). `op` is the out-of-place name ("add"); messages
 * say "add_". */
ms_status grad_rebase_inplace(const char *op, ms_tensor *a, ms_tensor *out);
/* Attaches n as out's grad_fn (output 0) and drops the recording's reference; fails when the
 * node could not be made (n NULL, its error set). */
ms_status grad_finish(ms_node *n, ms_tensor *out);
/* A public op's result: out when its recording succeeded, else NULL (out released). */
static inline ms_tensor *grad_kept(ms_tensor *out, ms_status recorded) {
  if (recorded == MS_OK) return out;
  ms_tensor_release(out);
  return NULL;
}
/* Fails with PyTorch's message when a is a leaf requiring grad, or a view of one, and grad mode
 * is on. */
ms_status grad_check_inplace(const char *op, const ms_tensor *a);
/* t is a recorded view of a leaf that requires grad. */
bool grad_is_view_of_leaf(const ms_tensor *t);

/* ---- record functions: each takes the op's inputs and its result `out` (borrowed, may be NULL:
 * nothing to record), records a node on out when the inputs require grad, and says whether
 * that worked; the public op returns grad_kept(out, status). Those shared between files: -- */

/* narrow (grad_view.c); dim and start are already normalised (0-based, non-negative). */
ms_status grad_record_narrow(const char *name, ms_tensor *in, int dim, int64_t start,
                               int64_t length, ms_tensor *out);
/* out, made from in by a view op and given its node, remembers the tensor it views (in's base,
 * or in) so that an in-place write through out is recorded on that base; nothing when out
 * shares no storage with in (a reshape that copied). */
void grad_view_of(ms_tensor *in, ms_tensor *out);
/* Records an in-place write of out's values through `view` (which has a grad_base) on its base
 * (CopySlices) and makes view a view of the new base. */
ms_status grad_record_view_write(ms_tensor *view, ms_tensor *out);
/* A copy of a's values that stands for a in the graph (same grad_fn and output number), for
 * in-place ops whose node saves the input that the op is about to overwrite (new reference). */
ms_tensor *grad_inplace_original(ms_tensor *a);

#endif
