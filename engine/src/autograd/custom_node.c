/* custom_node.c: nodes whose backward is a host's callback (custom autograd Functions). The
 * callback and its context live in the node's ctx, so they are freed with the node's saved
 * state: a second backward through a freed node finds no ctx and says so, as for built-in ops. */
#include <stdlib.h>
#include <string.h>

#include "autograd_internal.h"

typedef struct custom_ctx {
  ms_custom_backward_fn fn;
  void *ctx;
  ms_hook_ctx_free free_ctx;
} custom_ctx;

static void custom_ctx_free(void *p) {
  custom_ctx *c = p;
  if (c->free_ctx) c->free_ctx(c->ctx);
  free(c);
}

static ms_status custom_backward(ms_node *self, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  custom_ctx *c = self->ctx;
  if (!c)
    return ms_error(MS_ERR_RUNTIME, "backward: trying to backward through the graph a second time: "
                    "%s's saved state was freed by the first backward; pass {retain_graph=true} to it "
                    "if you need to backward twice", self->name);
  return c->fn(c->ctx, self, grad_out, grad_in);
}

ms_node *ms_custom_node_new(const char *name, int n, ms_tensor *const *inputs, ms_custom_backward_fn fn,
                            void *ctx, ms_hook_ctx_free free_ctx) {
  custom_ctx *c = malloc(sizeof *c);
  char *copy = name ? malloc(strlen(name) + 1) : NULL;
  ms_node *node = c && copy && fn && n >= 0 ? ms_node_new(name, custom_backward, n, inputs) : NULL;
  if (!node) {
    if (!fn || !name || n < 0)
      ms_error(MS_ERR_ARG, "custom_node_new: expected a name, a backward function and n >= 0 inputs");
    else if (!c || !copy)
      ms_error(MS_ERR_MEMORY, "custom_node_new: out of memory recording %s", name);
    if (free_ctx) free_ctx(ctx);
    free(c), free(copy);
    return NULL;
  }
  strcpy(copy, name);
  node->owned_name = copy;
  node->name = copy;
  *c = (custom_ctx){fn, ctx, free_ctx};
  node->ctx = c;
  node->free_ctx = custom_ctx_free;
  return node;
}
