/* grad_join.c: the public joins (cat, stack) and splits (split, chunk): the native op, then the
 * nodes; a join's gradient gives each input its piece of g, in its own dtype. */
#include <stdlib.h>
#include <string.h>

#include "grad_util.h"

/* ctx of CatBackward0 and StackBackward0: per input, its size along dim (cat) and dtype. */
typedef struct join_ctx {
  int n;
  int64_t *sizes;
  ms_dtype *dtypes;
} join_ctx;

static void join_ctx_free(void *p) {
  join_ctx *c = p;
  free(c->sizes), free(c->dtypes), free(c);
}

static join_ctx *join_ctx_new(ms_tensor *const *ts, int n, int dim) {
  join_ctx *c = calloc(1, sizeof *c);
  if (c) c->sizes = calloc((size_t)n, sizeof *c->sizes), c->dtypes = calloc((size_t)n, sizeof *c->dtypes);
  if (!c || !c->sizes || !c->dtypes) {
    if (c) join_ctx_free(c);
    ms_error(MS_ERR_MEMORY, "autograd: out of memory recording a join of %d tensors", n);
    return NULL;
  }
  c->n = n;
  for (int i = 0; i < n; i++) c->sizes[i] = ts[i]->ndim > dim ? ts[i]->shape[dim] : 0, c->dtypes[i] = ts[i]->dtype;
  return c;
}

/* The piece of g that input i produced: a narrow (cat) or a select (stack), converted. */
static ms_tensor *join_piece(ms_tensor *g, const ms_node *n, int i, int64_t at, bool stack) {
  const join_ctx *c = n->ctx;
  int dim = (int)n->ints[0];
  ms_tensor *p = stack ? native_select(g, dim, i) : native_narrow(g, dim, at, c->sizes[i]);
  ms_tensor *cast = p ? native_to_dtype(p, c->dtypes[i]) : NULL;
  ms_tensor_release(p);
  return cast;
}

static ms_status join_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi, bool stack) {
  const join_ctx *c = n->ctx;
  if (!c) /* the sizes went with the graph's saved state after the first backward */
    return ms_error(MS_ERR_RUNTIME, "backward: trying to backward through the graph a second time: "
                    "%s's saved state was freed by the first backward; pass {retain_graph=true} "
                    "to it if you need to backward twice", n->name);
  int64_t at = 0;
  for (int i = 0; i < c->n; at += c->sizes[i], i++)
    if (grad_needed(n, i) && !(gi[i] = join_piece(g[0], n, i, at, stack))) return MS_ERR_RUNTIME;
  return MS_OK;
}

static ms_status cat_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  return join_backward(n, g, gi, false);
}

static ms_status stack_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  return join_backward(n, g, gi, true);
}

static ms_status record_join(const char *name, ms_backward_fn fn, ms_tensor *const *ts, int n,
                             int dim, ms_tensor *out) {
  if (!out || !ms_autograd_wants(n, ts) || !ms_dtype_is_floating(out->dtype)) return MS_OK;
  ms_node *node = ms_node_new(name, fn, n, ts);
  join_ctx *c = node ? join_ctx_new(ts, n, dim) : NULL;
  if (node && !c) ms_node_release(node), node = NULL;
  if (node) {
    node->ctx = c, node->free_ctx = join_ctx_free;
    node->ints[0] = dim;
  }
  return grad_finish(node, out);
}

/* The joins record one node over all inputs; dim is normalised here, after the native op has
 * accepted it. */
ms_tensor *ms_tensor_cat(ms_tensor *const *ts, int n, int dim) {
  ms_tensor *out = native_cat(ts, n, dim);
  if (out && dim < 0) dim += out->ndim;
  return grad_kept(out, record_join("CatBackward0", cat_backward, ts, n, dim, out));
}

ms_tensor *ms_tensor_stack(ms_tensor *const *ts, int n, int dim) {
  ms_tensor *out = native_stack(ts, n, dim);
  if (out && dim < 0) dim += out->ndim;
  return grad_kept(out, record_join("StackBackward0", stack_backward, ts, n, dim, out));
}

/* ---- split, split with sizes and chunk: one node for the pieces, as PyTorch's SplitBackward0 --
 * Its backward writes each piece's gradient into its slot of one new tensor of the input's
 * shape and dtype; the slot of a piece that got no gradient is zeroed, that slot only (the node
 * takes missing gradients as NULL: no zero tensors are made for them). The input's shape is
 * the pieces' (out_shape) with their lengths along dim summed, so ints[0] (dim) is all it keeps.
 *
 * A node has at most MS_NODE_MAX_OUTPUTS outputs. More pieces are grouped, one way for any
 * count: a node takes the first MS_NODE_MAX_OUTPUTS - 1 pieces and, as its last output, the
 * rest of its input (a narrow view that nobody else sees), which the next node splits the
 * same way. The rest's gradient is then one more tensor, of the rest's size, copied into its
 * slot: up to 4 pieces (q, k, v) cost one allocation and a copy per piece. */

static ms_status split_backward(ms_node *n, ms_tensor *const *g, ms_tensor **gi) {
  int dim = (int)n->ints[0], k0 = 0;
  while (k0 < n->num_outputs && !g[k0]) k0++;
  if (!grad_needed(n, 0) || k0 == n->num_outputs) return MS_OK; /* no piece got a gradient */
  int64_t shape[MS_MAX_DIMS];
  memcpy(shape, n->out_shape[0], sizeof shape);
  shape[dim] = 0;
  for (int k = 0; k < n->num_outputs; k++) shape[dim] += n->out_shape[k][dim];
  ms_tensor *gin = ms_tensor_new_empty_on(ms_tensor_device(g[k0]), n->out_ndim[0], shape, n->out_dtype[0]);
  ms_status st = gin ? MS_OK : MS_ERR_MEMORY;
  for (int64_t k = 0, at = 0; st == MS_OK && k < n->num_outputs; at += n->out_shape[k][dim], k++) {
    ms_tensor *slot = native_narrow(gin, dim, at, n->out_shape[k][dim]);
    st = !slot ? MS_ERR_RUNTIME : g[k] ? native_copy_(slot, g[k]) : native_zero_(slot);
    ms_tensor_release(slot);
  }
  if (st != MS_OK) ms_tensor_release(gin), gin = NULL;
  gi[0] = gin;
  return st;
}

/* One node over in (dim normalised) whose outputs are parts[0..count) then `rest` (NULL: none). */
static ms_status record_group(const char *name, ms_tensor *in, int dim, ms_tensor **parts, int count,
                              ms_tensor *rest) {
  ms_node *n = ms_node_new(name, split_backward, 1, &in);
  if (!n) return MS_ERR_MEMORY;
  n->ints[0] = dim;
  n->takes_missing_grads = true;
  for (int k = 0; k < count; k++) ms_node_attach(n, parts[k], k), grad_view_of(in, parts[k]);
  if (rest) ms_node_attach(n, rest, count), grad_view_of(in, rest);
  ms_node_release(n);
  return MS_OK;
}

/* Records the pieces of t along dim (consecutive from 0, covering it) on nodes of at most
 * MS_NODE_MAX_OUTPUTS outputs; on failure releases them and returns NULL. */
static ms_tensor **record_pieces(const char *name, ms_tensor *t, int dim, ms_tensor **parts, int count) {
  if (!parts || !ms_autograd_wants(1, &t) || !ms_dtype_is_floating(t->dtype)) return parts;
  if (dim < 0) dim += t->ndim;
  ms_tensor *in = t; /* the tensor the next node splits: t, then each rest */
  ms_tensor_retain(in);
  ms_status st = MS_OK;
  for (int i = 0; st == MS_OK && i < count;) {
    int here = count - i <= MS_NODE_MAX_OUTPUTS ? count - i : MS_NODE_MAX_OUTPUTS - 1;
    ms_tensor *rest = NULL;
    if (here < count - i) {
      int64_t at = 0;
      for (int k = i; k < i + here; k++) at += parts[k]->shape[dim];
      rest = native_narrow(in, dim, at, in->shape[dim] - at);
    }
    st = here < count - i && !rest ? MS_ERR_RUNTIME : record_group(name, in, dim, parts + i, here, rest);
    ms_tensor_release(in);
    in = rest, i += here;
  }
  ms_tensor_release(in);
  if (st == MS_OK) return parts;
  for (int i = 0; i < count; i++) ms_tensor_release(parts[i]);
  free(parts);
  return NULL;
}

ms_tensor **ms_tensor_split(ms_tensor *t, int64_t size, int dim, int *count) {
  ms_tensor **parts = native_split(t, size, dim, count);
  return parts ? record_pieces("SplitBackward0", t, dim, parts, *count) : NULL;
}

ms_tensor **ms_tensor_split_with_sizes(ms_tensor *t, const int64_t *sizes, int n, int dim) {
  ms_tensor **parts = native_split_with_sizes(t, sizes, n, dim);
  return record_pieces("SplitWithSizesBackward0", t, dim, parts, n);
}

/* torch.chunk is a split by the first piece's size: its grad_fn is SplitBackward0 too. */
ms_tensor **ms_tensor_chunk(ms_tensor *t, int chunks, int dim, int *count) {
  ms_tensor **parts = native_chunk(t, chunks, dim, count);
  return parts ? record_pieces("SplitBackward0", t, dim, parts, *count) : NULL;
}
