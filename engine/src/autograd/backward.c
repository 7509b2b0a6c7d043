/* backward.c: the backward walk. It finds every node reachable from the root, counts how many
 * edges lead into each, then runs nodes whose inputs are complete, latest-created first, summing
 * the gradients that meet at a node before running it. Grad mode is off during the walk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_internal.h"
#include "moonshard/ops.h"
#include "native/native.h"

static atomic_ullong walk_counter;

/* ---- callbacks queued for the end of the running backward ------------------------------------ */

typedef struct callback_list {
  struct callback_item {
    ms_status (*fn)(void *ctx);
    void *ctx;
  } *items;
  int count, cap;
  bool walk_failed; /* set before the callbacks run after a failed walk */
} callback_list;

static _Thread_local callback_list *running_callbacks; /* the innermost backward's queue */

ms_status ms_autograd_queue_callback(ms_status (*fn)(void *ctx), void *ctx) {
  callback_list *l = running_callbacks;
  if (!fn) return ms_error(MS_ERR_ARG, "autograd_queue_callback: fn must be a function, got NULL");
  if (!l)
    return ms_error(MS_ERR_RUNTIME, "autograd_queue_callback: no backward is running on this thread "
                    "(callbacks are queued from hooks during a backward)");
  if (l->count == l->cap) {
    int cap = l->cap ? 2 * l->cap : 8;
    struct callback_item *items = realloc(l->items, (size_t)cap * sizeof *items);
    if (!items) return ms_error(MS_ERR_MEMORY, "autograd_queue_callback: out of memory");
    l->items = items, l->cap = cap;
  }
  l->items[l->count++] = (struct callback_item){fn, ctx};
  return MS_OK;
}

static void (*_Atomic progress_fn)(void);

void ms_autograd_set_progress_fn(void (*fn)(void)) { atomic_store(&progress_fn, fn); }

bool ms_autograd_walk_failed(void) { return running_callbacks && running_callbacks->walk_failed; }

/* Runs every queued callback (including those queued by callbacks); keeps the first error. */
static ms_status run_callbacks(callback_list *l, ms_status st) {
  char first[1024] = "";
  l->walk_failed = st != MS_OK;
  if (st != MS_OK) snprintf(first, sizeof first, "%s", ms_error_last()); /* the walk's error wins */
  for (int i = 0; i < l->count; i++) {
    ms_status r = l->items[i].fn(l->items[i].ctx);
    if (r != MS_OK && st == MS_OK) {
      st = r;
      snprintf(first, sizeof first, "%s", ms_error_last());
    }
  }
  if (first[0]) ms_error(st, "%s", first);
  return st;
}

/* A growable array of nodes, used as the discovery stack, the visited list and the heap. */
typedef struct node_list {
  ms_node **items;
  int64_t count, cap;
} node_list;

static ms_status list_push(node_list *l, ms_node *n) {
  if (l->count == l->cap) {
    int64_t cap = l->cap ? 2 * l->cap : 64;
    ms_node **items = realloc(l->items, (size_t)cap * sizeof *items);
    if (!items) return ms_error(MS_ERR_MEMORY, "backward: out of memory walking the graph");
    l->items = items, l->cap = cap;
  }
  l->items[l->count++] = n;
  return MS_OK;
}

/* ---- the ready queue: a max-heap on creation order ------------------------------------------- */

static ms_status heap_push(node_list *h, ms_node *n) {
  if (list_push(h, n) != MS_OK) return MS_ERR_MEMORY;
  for (int64_t i = h->count - 1; i > 0;) {
    int64_t parent = (i - 1) / 2;
    if (h->items[parent]->sequence >= h->items[i]->sequence) break;
    ms_node *t = h->items[parent];
    h->items[parent] = h->items[i], h->items[i] = t;
    i = parent;
  }
  return MS_OK;
}

static ms_node *heap_pop(node_list *h) {
  ms_node *top = h->items[0];
  h->items[0] = h->items[--h->count];
  for (int64_t i = 0;;) {
    int64_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->count && h->items[l]->sequence > h->items[m]->sequence) m = l;
    if (r < h->count && h->items[r]->sequence > h->items[m]->sequence) m = r;
    if (m == i) break;
    ms_node *t = h->items[m];
    h->items[m] = h->items[i], h->items[i] = t;
    i = m;
  }
  return top;
}

/* ---- nested walks ------------------------------------------------------------------------------
 * A node's walk state (walk, dependencies, grad_buf) lives on the node. A backward run from inside
 * a node's backward (a custom Function's, as checkpointing's recompute) may reach nodes that the
 * enclosing walk has not run yet (a parameter's AccumulateGrad used inside and outside the
 * checkpoint): their state is set aside while the inner walk uses them and put back after, so each
 * walk keeps its own counts and half-summed gradients, as PyTorch's per-GraphTask state. */

typedef struct walk_frame {
  uint64_t id;
  struct walk_frame *outer;
} walk_frame;

static _Thread_local walk_frame *running_walks; /* innermost first */

static bool enclosing_walk(uint64_t id) {
  for (walk_frame *f = running_walks; f; f = f->outer)
    if (f->id == id) return true;
  return false;
}

typedef struct aside_list {
  struct aside_item {
    ms_node *node;
    uint64_t walk;
    int dependencies;
    ms_tensor *grad_buf[MS_NODE_MAX_OUTPUTS];
  } *items;
  int64_t count, cap;
} aside_list;

static ms_status set_aside(aside_list *l, ms_node *n) {
  if (l->count == l->cap) {
    int64_t cap = l->cap ? 2 * l->cap : 16;
    struct aside_item *items = realloc(l->items, (size_t)cap * sizeof *items);
    if (!items) return ms_error(MS_ERR_MEMORY, "backward: out of memory walking the graph");
    l->items = items, l->cap = cap;
  }
  struct aside_item *it = &l->items[l->count++];
  it->node = n, it->walk = n->walk, it->dependencies = n->dependencies;
  memcpy(it->grad_buf, n->grad_buf, sizeof it->grad_buf);
  memset(n->grad_buf, 0, sizeof n->grad_buf);
  return MS_OK;
}

/* After the inner walk has dropped its own buffers. */
static void put_back(aside_list *l) {
  for (int64_t i = l->count - 1; i >= 0; i--) {
    struct aside_item *it = &l->items[i];
    it->node->walk = it->walk, it->node->dependencies = it->dependencies;
    memcpy(it->node->grad_buf, it->grad_buf, sizeof it->grad_buf);
  }
  free(l->items);
}

/* Claims n for this walk (its count from zero), setting an enclosing walk's state aside. */
static ms_status claim(ms_node *n, uint64_t walk, node_list *visited, aside_list *aside) {
  ms_status st = enclosing_walk(n->walk) ? set_aside(aside, n) : MS_OK;
  n->walk = walk;
  n->dependencies = 0;
  return st == MS_OK ? list_push(visited, n) : st;
}

/* Marks every node reachable from root with this walk and counts its incoming edges. */
static ms_status discover(ms_node *root, uint64_t walk, node_list *visited, aside_list *aside) {
  node_list stack = {0};
  ms_status st = claim(root, walk, visited, aside);
  if (st == MS_OK) st = list_push(&stack, root);
  while (st == MS_OK && stack.count) {
    ms_node *n = stack.items[--stack.count];
    for (int i = 0; st == MS_OK && i < n->num_inputs; i++) {
      ms_node *child = n->next[i].node;
      if (!child) continue;
      if (child->walk != walk) {
        st = claim(child, walk, visited, aside);
        if (st == MS_OK) st = list_push(&stack, child);
      }
      child->dependencies++;
    }
  }
  free(stack.items);
  return st;
}

/* grad in the dtype of output k of `to` (a new reference), as PyTorch's engine gives every
 * gradient its input's dtype: a 16-bit input's gradient computed in float32 comes back 16-bit. */
static ms_tensor *as_output_dtype(ms_tensor *grad, const ms_node *to, int k) {
  if (grad->dtype == to->out_dtype[k]) return ms_tensor_retain(grad), grad;
  return native_to_dtype(grad, to->out_dtype[k]);
}

/* Adds grad into the node's buffer for output k, checking its shape, in that output's dtype. */
static ms_status buffer_add(ms_node *from, int input, ms_node *to, int k, ms_tensor *grad) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  bool same = grad->ndim == to->out_ndim[k] &&
              memcmp(grad->shape, to->out_shape[k], sizeof(int64_t) * (size_t)grad->ndim) == 0;
  if (!same)
    return ms_error(MS_ERR_RUNTIME, "backward: %s returned a gradient of shape %s for its "
                    "input %d, which has shape %s", from->name,
                    ms_shape_str(grad->ndim, grad->shape, b1, sizeof b1), input + 1,
                    ms_shape_str(to->out_ndim[k], to->out_shape[k], b2, sizeof b2));
  ms_tensor *g = as_output_dtype(grad, to, k);
  if (!g) return MS_ERR_MEMORY;
  if (!to->grad_buf[k]) {
    to->grad_buf[k] = g;
    return MS_OK;
  }
  ms_tensor *sum = native_binary(MS_OP_ADD, ms_operand_tensor(to->grad_buf[k]), ms_operand_tensor(g));
  ms_tensor_release(g);
  if (!sum) return MS_ERR_MEMORY;
  ms_tensor_release(to->grad_buf[k]);
  to->grad_buf[k] = sum;
  return MS_OK;
}

/* Takes the node's gradient buffers as its grad_out (zeros for outputs nobody used, or NULL
 * for a node that takes missing gradients and has no tensor hooks: a hook sees a tensor) and
 * runs the tensor hooks registered on them. */
static ms_status gather_grad_out(ms_node *n, ms_tensor **grad_out) {
  for (int k = 0; k < n->num_outputs; k++) {
    grad_out[k] = n->grad_buf[k];
    n->grad_buf[k] = NULL;
    if (!grad_out[k] && n->takes_missing_grads && !n->pre_hooks) continue;
    if (!grad_out[k] && !(grad_out[k] = ms_tensor_new_zeros(n->out_ndim[k], n->out_shape[k], n->out_dtype[k])))
      return MS_ERR_MEMORY;
    if (autograd_run_grad_hooks(n->pre_hooks, k, &grad_out[k]) != MS_OK) return MS_ERR_RUNTIME;
  }
  return MS_OK;
}

/* Runs one node and hands its input gradients on, queueing the nodes they complete. */
/* The next ready node, after letting in-flight work (FSDP's collectives) progress. */
static ms_node *next_node(node_list *ready) {
  void (*fn)(void) = atomic_load_explicit(&progress_fn, memory_order_relaxed);
  if (fn) fn();
  return heap_pop(ready);
}

static ms_status run_node(ms_node *n, node_list *ready, bool retain_graph) {
  ms_tensor *grad_out[MS_NODE_MAX_OUTPUTS] = {0};
  ms_tensor **grad_in = n->num_inputs ? calloc((size_t)n->num_inputs, sizeof *grad_in) : NULL;
  ms_status st = n->num_inputs && !grad_in ? ms_error(MS_ERR_MEMORY, "backward: out of memory") : MS_OK;
  if (st == MS_OK) st = gather_grad_out(n, grad_out);
  if (st == MS_OK) st = n->backward(n, grad_out, grad_in);
  for (int k = 0; k < MS_NODE_MAX_OUTPUTS; k++) ms_tensor_release(grad_out[k]);
  for (int i = 0; i < n->num_inputs; i++) {
    ms_edge e = n->next[i];
    ms_tensor *g = grad_in ? grad_in[i] : NULL;
    if (e.node && st == MS_OK && g) st = buffer_add(n, i, e.node, e.input_nr, g);
    ms_tensor_release(g); /* the buffer keeps its own reference */
    if (e.node && st == MS_OK && --e.node->dependencies == 0) st = heap_push(ready, e.node);
  }
  free(grad_in);
  if (!retain_graph) node_release_saved(n);
  return st;
}

static ms_tensor *root_gradient(ms_tensor *root, ms_tensor *grad) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  if (!grad) {
    if (ms_tensor_numel(root) != 1)
      return ms_error(MS_ERR_ARG, "backward: grad can be implicitly created only for scalar outputs; "
                      "this tensor has shape %s, so pass the gradient: t:backward(grad)",
                      ms_shape_str(root->ndim, root->shape, b1, sizeof b1)), NULL;
    return ms_tensor_new_full_on(ms_tensor_device(root), root->ndim, root->shape, root->dtype, 1.0);
  }
  if (grad->ndim != root->ndim || memcmp(grad->shape, root->shape, sizeof(int64_t) * (size_t)root->ndim))
    return ms_error(MS_ERR_ARG, "backward: grad has shape %s but the tensor has shape %s",
                    ms_shape_str(grad->ndim, grad->shape, b1, sizeof b1),
                    ms_shape_str(root->ndim, root->shape, b2, sizeof b2)), NULL;
  return native_to_dtype(grad, root->dtype);
}

ms_status ms_backward(ms_tensor *root, ms_tensor *grad, bool retain_graph) {
  if (!root->requires_grad)
    return ms_error(MS_ERR_ARG, "backward: the tensor does not require grad and has no grad_fn "
                    "(no input of the computation had requires_grad=true)");
  bool prev = ms_grad_set_enabled(false);
  ms_tensor *g = root_gradient(root, grad);
  ms_node *start = root->grad_fn;
  if (start) ms_node_retain(start);
  else start = autograd_grad_accumulator(root);
  node_list visited = {0}, ready = {0};
  aside_list aside = {0};
  callback_list callbacks = {0}, *outer = running_callbacks;
  running_callbacks = &callbacks;
  walk_frame frame = {atomic_fetch_add(&walk_counter, 1) + 1, running_walks};
  ms_status st = g && start ? MS_OK : MS_ERR_MEMORY;
  if (st == MS_OK) st = discover(start, frame.id, &visited, &aside);
  running_walks = &frame;
  if (st == MS_OK) {
    start->grad_buf[root->grad_fn ? root->output_nr : 0] = g;
    g = NULL;
    st = heap_push(&ready, start);
  }
  while (st == MS_OK && ready.count) st = run_node(next_node(&ready), &ready, retain_graph);
  /* after a failed walk too: a queued callback may hold work (an issued collective) to finish */
  st = run_callbacks(&callbacks, st);
  running_callbacks = outer;
  free(callbacks.items);
  for (int64_t i = 0; i < visited.count; i++) /* after an error: drop half-summed gradients */
    for (int k = 0; k < MS_NODE_MAX_OUTPUTS; k++) {
      ms_tensor_release(visited.items[i]->grad_buf[k]);
      visited.items[i]->grad_buf[k] = NULL;
    }
  running_walks = frame.outer;
  put_back(&aside);
  free(visited.items);
  free(ready.items);
  ms_tensor_release(g);
  ms_node_release(start);
  ms_grad_set_enabled(prev);
  return st;
}
