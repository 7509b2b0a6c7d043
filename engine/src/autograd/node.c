/* node.c: autograd nodes and their edges, saved tensors with version checks, grad mode, hooks,
 * and the AccumulateGrad node that moves gradients into a leaf's .grad. */
#include <stdlib.h>
#include <string.h>

#include "autograd_internal.h"
#include "grad_util.h"
#include "moonshard/ops.h"
#include "tensor_internal.h"

static _Thread_local bool grad_mode_off; /* off-by-default flag: grad mode starts on */
static atomic_ullong next_sequence;
static atomic_int next_hook_handle = 1;

bool ms_grad_enabled(void) { return !grad_mode_off; }

bool ms_grad_set_enabled(bool enabled) {
  bool prev = !grad_mode_off;
  grad_mode_off = !enabled;
  return prev;
}

bool ms_autograd_wants(int n, ms_tensor *const *inputs) {
  if (grad_mode_off) return false;
  for (int i = 0; i < n; i++)
    if (inputs[i] && inputs[i]->requires_grad) return true;
  return false;
}

bool ms_tensor_is_leaf(const ms_tensor *t) { return t->grad_fn == NULL; }

void ms_node_retain(ms_node *node) { atomic_fetch_add(&node->refcount, 1); }

static void free_hooks(struct ms_hook *h) {
  while (h) {
    struct ms_hook *next = h->next;
    if (h->free_ctx) h->free_ctx(h->ctx);
    free(h);
    h = next;
  }
}

void node_release_saved(ms_node *node) {
  for (int i = 0; i < node->num_saved; i++) {
    ms_tensor_release(node->saved[i].tensor);
    node->saved[i].tensor = NULL;
  }
  if (node->free_ctx && node->ctx) node->free_ctx(node->ctx);
  node->ctx = NULL;
  node->released = true;
}

/* Nodes form a DAG owned from the outputs towards the inputs, so a long chain is released with
 * an explicit stack (linked through release_next): recursion could overflow the C stack. */
void ms_node_release(ms_node *node) {
  if (!node || atomic_fetch_sub(&node->refcount, 1) != 1) return;
  node->release_next = NULL;
  ms_node *stack = node; /* nodes whose count reached zero: each is pushed exactly once */
  while (stack) {
    node = stack;
    stack = node->release_next;
    node_release_saved(node);
    free_hooks(node->pre_hooks);
    for (int k = 0; k < MS_NODE_MAX_OUTPUTS; k++) ms_tensor_release(node->grad_buf[k]);
    if (node->variable) {
      node->variable->grad_accumulator = NULL;
      ms_tensor_release(node->variable);
    }
    for (int i = 0; i < node->num_inputs; i++) {
      ms_node *child = node->next[i].node;
      if (child && atomic_fetch_sub(&child->refcount, 1) == 1) child->release_next = stack, stack = child;
    }
    free(node->next);
    free(node->owned_name);
    free(node);
  }
}

/* The tensor core's destructor hook: frees what autograd hung on a tensor. */
static void tensor_free(ms_tensor *t) {
  ms_node_release(t->grad_fn);
  free_hooks(t->hooks);
  ms_tensor_release(t->grad_base);
}

/* Installs tensor_free before a tensor can get autograd state: every grad_fn comes from a node
 * made here, every grad_base sits beside a grad_fn, and hooks come from hook_new. Once: a plain
 * load after that. */
static void install_tensor_free(void) {
  static atomic_bool installed;
  if (atomic_load_explicit(&installed, memory_order_acquire)) return;
  tensor_set_autograd_free(tensor_free);
  atomic_store_explicit(&installed, true, memory_order_release);
}

static ms_node *node_alloc(const char *name, ms_backward_fn backward, int n) {
  install_tensor_free();
  ms_node *node = calloc(1, sizeof *node);
  ms_edge *next = n ? calloc((size_t)n, sizeof *next) : NULL;
  if (!node || (n && !next)) {
    free(node), free(next);
    ms_error(MS_ERR_MEMORY, "autograd: out of memory recording %s", name);
    return NULL;
  }
  atomic_init(&node->refcount, 1);
  node->name = name;
  node->backward = backward;
  node->sequence = atomic_fetch_add(&next_sequence, 1);
  node->num_inputs = n;
  node->next = next;
  return node;
}

ms_node *ms_node_new(const char *name, ms_backward_fn backward, int n, ms_tensor *const *inputs) {
  ms_node *node = node_alloc(name, backward, n);
  if (!node) return NULL;
  for (int i = 0; i < n; i++) {
    ms_tensor *t = inputs[i];
    if (!t || !t->requires_grad) continue;
    if (t->grad_fn) {
      ms_node_retain(t->grad_fn);
      node->next[i] = (ms_edge){t->grad_fn, t->output_nr};
    } else if (!(node->next[i].node = autograd_grad_accumulator(t))) {
      ms_node_release(node);
      return NULL;
    }
  }
  return node;
}

int ms_node_save(ms_node *node, ms_tensor *t) {
  int i = node->num_saved++;
  ms_tensor_retain(t);
  node->saved[i] = (ms_saved){t, ms_tensor_version(t)};
  return i;
}

ms_tensor *ms_node_saved(ms_node *node, int i) {
  if (node->released)
    return ms_error(MS_ERR_RUNTIME, "backward: trying to backward through the graph a second time "
                    "(or to use saved tensors after they were freed): %s's saved tensors were "
                    "freed by the first backward; pass {retain_graph=true} to it if you need "
                    "to backward twice", node->name), NULL;
  ms_saved *s = &node->saved[i];
  if (ms_tensor_version(s->tensor) != s->version)
    return ms_error(MS_ERR_RUNTIME, "backward: a tensor that %s saved for its gradient has been "
                    "modified by an in-place operation (version %d, expected %d); clone it before "
                    "modifying it", node->name, ms_tensor_version(s->tensor), s->version), NULL;
  if (!ms_tensor_data(s->tensor) && ms_tensor_numel(s->tensor) > 0)
    return ms_error(MS_ERR_RUNTIME, "backward: a tensor that %s saved for its gradient has had its "
                    "storage released (as FSDP releases a unit's parameters between uses: the unit "
                    "must be gathered again before its backward)", node->name), NULL;
  return s->tensor;
}

void ms_node_attach(ms_node *node, ms_tensor *out, int k) {
  ms_node_retain(node);
  ms_node_release(out->grad_fn);
  out->grad_fn = node;
  out->output_nr = k;
  out->requires_grad = true;
  if (node->num_outputs < k + 1) node->num_outputs = k + 1;
  node->out_ndim[k] = out->ndim;
  memcpy(node->out_shape[k], out->shape, sizeof(int64_t) * (size_t)out->ndim);
  node->out_dtype[k] = out->dtype;
}

/* ---- hooks ------------------------------------------------------------------------------------ */

ms_status autograd_run_grad_hooks(struct ms_hook *list, int output_nr, ms_tensor **grad) {
  for (struct ms_hook *h = list; h; h = h->next) {
    if (h->kind != MS_HOOK_GRAD || (output_nr >= 0 && h->output_nr != output_nr)) continue;
    ms_tensor *replace = NULL;
    ms_status st = h->grad_fn(h->ctx, *grad, &replace);
    if (st != MS_OK) return st;
    if (replace) {
      ms_tensor_release(*grad);
      *grad = replace;
    }
  }
  return MS_OK;
}

static struct ms_hook *hook_new(ms_hook_kind kind, void *ctx, ms_hook_ctx_free free_ctx) {
  install_tensor_free();
  struct ms_hook *h = calloc(1, sizeof *h);
  if (!h) {
    if (free_ctx) free_ctx(ctx);
    ms_error(MS_ERR_MEMORY, "register_hook: out of memory");
    return NULL;
  }
  h->handle = atomic_fetch_add(&next_hook_handle, 1);
  h->kind = kind;
  h->ctx = ctx;
  h->free_ctx = free_ctx;
  return h;
}

/* Appends so hooks run in registration order. */
static void hook_append(struct ms_hook **list, struct ms_hook *h) {
  while (*list) list = &(*list)->next;
  *list = h;
}

int ms_tensor_register_hook(ms_tensor *t, ms_grad_hook_fn fn, void *ctx, ms_hook_ctx_free free_ctx) {
  if (!t->requires_grad) {
    if (free_ctx) free_ctx(ctx);
    ms_error(MS_ERR_ARG, "register_hook: cannot register a hook on a tensor that doesn't require grad");
    return 0;
  }
  struct ms_hook *h = hook_new(MS_HOOK_GRAD, ctx, free_ctx);
  if (!h) return 0;
  h->grad_fn = fn;
  h->output_nr = t->output_nr;
  hook_append(t->grad_fn ? &t->grad_fn->pre_hooks : &t->hooks, h);
  return h->handle;
}

int ms_tensor_register_post_accumulate_hook(ms_tensor *t, ms_post_accumulate_fn fn, void *ctx,
                                            ms_hook_ctx_free free_ctx) {
  if (!t->requires_grad || t->grad_fn) {
    if (free_ctx) free_ctx(ctx);
    ms_error(MS_ERR_ARG, "register_post_accumulate_grad_hook: only leaf tensors that require grad "
             "accumulate gradients");
    return 0;
  }
  struct ms_hook *h = hook_new(MS_HOOK_POST_ACCUMULATE, ctx, free_ctx);
  if (!h) return 0;
  h->post_fn = fn;
  hook_append(&t->hooks, h);
  return h->handle;
}

static bool hook_unlink(struct ms_hook **list, int handle) {
  for (; *list; list = &(*list)->next)
    if ((*list)->handle == handle) {
      struct ms_hook *h = *list;
      *list = h->next;
      h->next = NULL;
      free_hooks(h);
      return true;
    }
  return false;
}

ms_status ms_tensor_remove_hook(ms_tensor *t, int handle) {
  if (hook_unlink(&t->hooks, handle) || (t->grad_fn && hook_unlink(&t->grad_fn->pre_hooks, handle)))
    return MS_OK;
  return ms_error(MS_ERR_ARG, "remove_hook: no hook with handle %d on this tensor", handle);
}

/* ---- leaves ----------------------------------------------------------------------------------- */

ms_status ms_tensor_accumulate_grad(ms_tensor *t, ms_tensor *grad) {
  ms_status st = MS_OK;
  if (!t->grad) {
    /* a private copy in the leaf's dtype: the incoming gradient may be shared or broadcast */
    ms_tensor *g = ms_tensor_new_empty_on(ms_tensor_device(t), t->ndim, t->shape, t->dtype);
    st = g ? native_copy_(g, grad) : MS_ERR_MEMORY;
    if (st == MS_OK) t->grad = g;
    else ms_tensor_release(g);
  } else {
    st = native_binary_(MS_OP_ADD, t->grad, ms_operand_tensor(grad));
  }
  return st;
}

/* The leaf's first gradient may be the incoming buffer itself (PyTorch's AccumulateGrad steals
 * it too) when no one else can see it and it has exactly the layout a copy would have. */
static bool can_steal(const ms_tensor *leaf, const ms_tensor *grad, int refs) {
  return !leaf->grad && grad_is_exclusive(grad, refs) && !grad->storage->external && grad->offset == 0 &&
         grad->dtype == leaf->dtype && ms_tensor_is_contiguous(grad) && grad->ndim == leaf->ndim &&
         memcmp(grad->shape, leaf->shape, sizeof(int64_t) * (size_t)leaf->ndim) == 0 &&
         grad->storage->nbytes == (size_t)ms_tensor_numel(grad) * ms_dtype_size(grad->dtype) &&
         ms_device_equal(ms_tensor_device(grad), ms_tensor_device(leaf));
}

static ms_status accumulate_backward(ms_node *self, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  (void)grad_in;
  ms_tensor *leaf = self->variable, *grad = grad_out[0];
  ms_tensor_retain(grad);
  ms_status st = autograd_run_grad_hooks(leaf->hooks, -1, &grad);
  /* references: the walk's (while grad is still its buffer) and this function's */
  if (st == MS_OK && can_steal(leaf, grad, grad == grad_out[0] ? 2 : 1)) {
    ms_tensor_retain(grad);
    leaf->grad = grad;
  } else if (st == MS_OK)
    st = ms_tensor_accumulate_grad(leaf, grad);
  ms_tensor_release(grad);
  for (struct ms_hook *h = leaf->hooks; st == MS_OK && h; h = h->next)
    if (h->kind == MS_HOOK_POST_ACCUMULATE) st = h->post_fn(h->ctx, leaf);
  return st;
}

ms_node *autograd_grad_accumulator(ms_tensor *leaf) {
  if (leaf->grad_accumulator) {
    ms_node_retain(leaf->grad_accumulator);
    return leaf->grad_accumulator;
  }
  ms_node *node = node_alloc("AccumulateGrad", accumulate_backward, 0);
  if (!node) return NULL;
  /* runs as soon as it is ready, as PyTorch's: its creation time depends on whether an earlier
   * graph still held it (the cache is weak, freed when the collector gets there), and FSDP's
   * post-accumulate hooks issue collectives that every rank must issue in the same order */
  node->sequence = UINT64_MAX;
  ms_tensor_retain(leaf);
  node->variable = leaf;
  node->num_outputs = 1;
  node->out_ndim[0] = leaf->ndim;
  memcpy(node->out_shape[0], leaf->shape, sizeof(int64_t) * (size_t)leaf->ndim);
  node->out_dtype[0] = leaf->dtype;
  leaf->grad_accumulator = node; /* weak: the node clears it when it dies */
  return node;
}


ms_tensor *ms_tensor_detach(ms_tensor *t) {
  return ms_tensor_new_view(t->storage, t->dtype, t->ndim, t->shape, t->strides, t->offset);
}
