/* grad_join.c: the public joins (cat, stack) and splits (split, chunk): the native op, then the
 * nodes; a join's gradient gives each input its piece of g, in its own dtype. */
#include <stdlib.h>

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

/* ---- split and chunk: each piece records its own SplitBackward0 (its gradient is embedded back
 * at its offset), piece i starting at i * step along dim ---------------------------------------- */

static ms_tensor **record_pieces(ms_tensor *t, int dim, int64_t step, ms_tensor **parts, int count) {
  if (!parts || !ms_autograd_wants(1, &t)) return parts;
  if (dim < 0) dim += t->ndim;
  ms_status st = MS_OK;
  for (int i = 0; st == MS_OK && i < count; i++)
    st = grad_record_narrow("SplitBackward0", t, dim, (int64_t)i * step, parts[i]->shape[dim], parts[i]);
  if (st == MS_OK) return parts;
  for (int i = 0; i < count; i++) ms_tensor_release(parts[i]);
  free(parts);
  return NULL;
}

ms_tensor **ms_tensor_split(ms_tensor *t, int64_t size, int dim, int *count) {
  ms_tensor **parts = native_split(t, size, dim, count);
  return parts ? record_pieces(t, dim, size, parts, *count) : NULL;
}

ms_tensor **ms_tensor_chunk(ms_tensor *t, int chunks, int dim, int *count) {
  ms_tensor **parts = native_chunk(t, chunks, dim, count);
  if (!parts) return NULL;
  /* the pieces of a chunk are those of a split by their first one's size (all empty: at 0) */
  int d = dim < 0 ? dim + t->ndim : dim;
  return record_pieces(t, dim, parts[0]->shape[d], parts, *count);
}
