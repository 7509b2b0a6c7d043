/* fsdp_runtime.c: FSDP's per-step runtime (moonshard/fsdp_runtime.h): the root's execution-order
 * record that prefetching follows, each unit's pre- and post-forward, the pre-backward hook on a
 * unit's outputs and the root's finalize-backward callback. The flat parameters themselves
 * (gathers, reductions, the post-backward hooks) are flat_param*.c's; this file only decides
 * when they run, and nothing there calls back here except through fp->on_grads_done. */
#include <stdio.h>
#include <stdlib.h>

#include "moonshard/autograd.h"
#include "moonshard/fsdp_runtime.h"
#include "fsdp/fsdp_internal.h"

/* Units in the order they ran (a unit run twice in one forward is listed twice). */
typedef struct exec_order {
  ms_flat_param **at;
  int n, cap;
} exec_order;

struct ms_fsdp_state {
  int refs; /* the caller's, one per hook left on a forward's outputs, one per queued callback */
  int n;
  ms_flat_param **units; /* retained */
  ms_flat_param *root_unit;
  bool in_forward; /* from root_pre_forward to root_post_forward (stale after a failed forward:
                    * harmless, the next root_pre_forward sets it again) */
  bool started;    /* an iteration began: units record their order */
  bool queued;     /* finalize_backward is queued for the running backward */
  exec_order fwd, bwd, fwd_prev, bwd_prev;
};

/* ---- the execution order ---------------------------------------------------------------------- */

static bool order_has(const exec_order *o, const ms_flat_param *fp) {
  for (int i = 0; i < o->n; i++)
    if (o->at[i] == fp) return true;
  return false;
}

static ms_status order_push(exec_order *o, ms_flat_param *fp) {
  if (o->n == o->cap) {
    int cap = o->cap ? 2 * o->cap : 8;
    ms_flat_param **at = realloc(o->at, sizeof *at * (size_t)cap);
    if (!at) return ms_error(MS_ERR_MEMORY, "fsdp: recording the execution order: out of memory");
    o->at = at, o->cap = cap;
  }
  o->at[o->n++] = fp;
  return MS_OK;
}

/* Starts an iteration's record; the last one that recorded anything is what prefetch follows. */
static void order_begin(exec_order *now, exec_order *prev) {
  if (now->n == 0) return;
  exec_order t = *prev;
  *prev = *now;
  *now = t;
  now->n = 0;
}

/* The unit after fp in the previous iteration's order that has not run yet in this one (a unit
 * that already ran would be gathered for nothing, and hold values the optimizer is about to
 * change); NULL when none. */
static ms_flat_param *next_pending(const exec_order *prev, const exec_order *now, const ms_flat_param *fp) {
  for (int i = 0; i < prev->n; i++) {
    if (prev->at[i] != fp) continue;
    for (int j = i + 1; j < prev->n; j++)
      if (!order_has(now, prev->at[j])) return prev->at[j];
    return NULL;
  }
  return NULL;
}

/* Records fp's pre-backward once per iteration; *next: the unit to prefetch, if any. */
static ms_status record_backward(ms_flat_param *fp, ms_flat_param **next) {
  ms_fsdp_state *s = fp->root;
  *next = NULL;
  if (!s || !s->started || order_has(&s->bwd, fp)) return MS_OK;
  ms_status st = order_push(&s->bwd, fp);
  if (st == MS_OK) *next = next_pending(&s->bwd_prev, &s->bwd, fp);
  return st;
}

/* ---- the root ---------------------------------------------------------------------------------- */

static void state_release(ms_fsdp_state *s) {
  if (!s || --s->refs > 0) return;
  for (int i = 0; i < s->n; i++) {
    if (s->units[i]->root == s) s->units[i]->root = NULL;
    ms_flat_param_free(s->units[i]);
  }
  free(s->units);
  exec_order *orders[] = {&s->fwd, &s->bwd, &s->fwd_prev, &s->bwd_prev};
  for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) free(orders[i]->at);
  free(s);
}

void ms_fsdp_state_free(ms_fsdp_state *root) { state_release(root); }

ms_fsdp_state *ms_fsdp_state_new(ms_flat_param *const *units, int n, ms_flat_param *root_unit) {
  const char *f = "ms_fsdp_state_new";
  if (n < 0 || (n > 0 && !units))
    return ms_error(MS_ERR_ARG, "%s: bad argument #1 (units): expected an array of %d units, got %s", f, n,
                    n < 0 ? "a negative count" : "NULL"), NULL;
  bool found = root_unit == NULL;
  for (int i = 0; i < n; i++) {
    if (!units[i]) return ms_error(MS_ERR_ARG, "%s: bad argument #1 (units): unit %d is NULL", f, i), NULL;
    found = found || units[i] == root_unit;
  }
  if (!found)
    return ms_error(MS_ERR_ARG, "%s: bad argument #3 (root_unit): expected NULL or one of the units, got "
                    "another unit", f), NULL;
  ms_fsdp_state *s = calloc(1, sizeof *s);
  ms_flat_param **list = calloc((size_t)(n > 0 ? n : 1), sizeof *list);
  if (!s || !list) {
    free(s);
    free(list);
    return ms_error(MS_ERR_MEMORY, "%s: out of memory", f), NULL;
  }
  s->units = list;
  s->refs = 1, s->n = n, s->root_unit = root_unit;
  for (int i = 0; i < n; i++) {
    s->units[i] = ms_flat_param_retain(units[i]);
    units[i]->root = s;
  }
  return s;
}

/* NULL for a root or a unit: an error naming the function, never a crash. */
static ms_status check_object(const char *f, const void *p, const char *what) {
  return p ? MS_OK : ms_error(MS_ERR_ARG, "%s: bad argument #1 (%s): expected a %s, got NULL", f, what, what);
}

ms_status ms_fsdp_root_pre_forward(ms_fsdp_state *root) {
  if (check_object("ms_fsdp_root_pre_forward", root, "root") != MS_OK) return MS_ERR_ARG;
  order_begin(&root->fwd, &root->fwd_prev);
  order_begin(&root->bwd, &root->bwd_prev);
  root->started = true;
  for (int i = 0; i < root->n; i++) ms_flat_param_release(root->units[i]);
  root->in_forward = true;
  return MS_OK;
}

/* Every unit is finished even after an error, so that no collective is left writing into a
 * buffer; after a failed walk or a unit's error the rest only wait and clean up (the other ranks
 * may not start the same collectives). The first error is kept. */
static ms_status finalize_backward(void *ctx) {
  ms_fsdp_state *s = ctx;
  s->queued = false;
  ms_status st = MS_OK;
  char first[1024] = "";
  for (int i = 0; i < s->n; i++) {
    ms_status r = ms_flat_param_finish_backward(s->units[i], st != MS_OK || ms_autograd_walk_failed());
    if (r != MS_OK && st == MS_OK) st = r, snprintf(first, sizeof first, "%s", ms_error_last());
  }
  state_release(s); /* the queue's reference */
  if (st != MS_OK) ms_error(st, "%s", first);
  return st;
}

/* The hook on the root's outputs: the first gradient to arrive queues the finisher. */
static ms_status queue_finalize(void *ctx, ms_tensor *grad, ms_tensor **replace) {
  (void)grad, (void)replace;
  ms_fsdp_state *s = ctx;
  if (s->queued) return MS_OK;
  ms_status st = ms_autograd_queue_callback(finalize_backward, s);
  if (st != MS_OK) return st;
  s->refs++;
  s->queued = true;
  return MS_OK;
}

static void state_hook_free(void *ctx) { state_release(ctx); }

static bool any_requires_grad(ms_tensor *const *outs, int n) {
  for (int i = 0; i < n; i++)
    if (outs[i] && outs[i]->requires_grad) return true;
  return false;
}

static ms_status check_outputs(const char *f, ms_tensor *const *outs, int n) {
  if (n < 0 || (n > 0 && !outs))
    return ms_error(MS_ERR_ARG, "%s: bad argument #2 (outs): expected an array of %d tensors, got %s", f, n,
                    n < 0 ? "a negative count" : "NULL");
  for (int i = 0; i < n; i++)
    if (!outs[i]) return ms_error(MS_ERR_ARG, "%s: bad argument #2 (outs): output %d is NULL", f, i);
  return MS_OK;
}

ms_status ms_fsdp_root_post_forward(ms_fsdp_state *root, ms_tensor *const *outs, int n) {
  const char *f = "ms_fsdp_root_post_forward";
  if (check_object(f, root, "root") != MS_OK) return MS_ERR_ARG;
  root->in_forward = false;
  ms_status st = check_outputs(f, outs, n);
  for (int i = 0; st == MS_OK && i < n; i++) {
    if (!outs[i]->requires_grad) continue;
    root->refs++;
    if (!ms_tensor_register_hook(outs[i], queue_finalize, root, state_hook_free)) st = MS_ERR_RUNTIME;
  }
  return st;
}

/* ---- a unit ------------------------------------------------------------------------------------ */

/* Units of fp's root whose full buffers are gathered or being gathered, the root's own aside (it
 * stays gathered from forward through backward); NO_SHARD's are their shards. */
static int gathered_units(const ms_flat_param *fp) {
  const ms_fsdp_state *s = fp->root;
  int n = 0;
  for (int i = 0; s && i < s->n; i++) {
    const ms_flat_param *u = s->units[i];
    n += u != s->root_unit && u->strategy != MS_FSDP_NO_SHARD && ms_flat_param_compute_gathered(u);
  }
  return n;
}

static void note_gathered(ms_flat_param *fp) {
  int64_t n = gathered_units(fp);
  if (n > fp->stats.max_gathered) fp->stats.max_gathered = n;
}

/* Issues next's all-gather ahead of its use for fp, unless fp limits all-gathers and two units
 * are already gathered: the rate limiter bounds the full buffers held at once to two units. */
static ms_status prefetch(ms_flat_param *fp, ms_flat_param *next, bool backward) {
  if (fp->limit_all_gathers && !ms_flat_param_compute_gathered(next) && gathered_units(fp) >= 2) return MS_OK;
  ms_status st = ms_flat_param_gather_compute_async(next, true, backward);
  note_gathered(fp);
  return st;
}

/* BACKWARD_POST: once the unit's grads are reduced, the next unit in backward order is gathered. */
static ms_status post_reduce_prefetch(ms_flat_param *fp) {
  ms_fsdp_state *s = fp->root;
  ms_flat_param *next = s && s->started ? next_pending(&s->bwd_prev, &s->bwd, fp) : NULL;
  return next ? prefetch(fp, next, true) : MS_OK;
}

ms_status ms_fsdp_set_prefetch(ms_flat_param *unit, bool forward_prefetch, ms_fsdp_backward_prefetch backward) {
  if (check_object("ms_fsdp_set_prefetch", unit, "unit") != MS_OK) return MS_ERR_ARG;
  if (backward != MS_FSDP_PREFETCH_NONE && backward != MS_FSDP_BACKWARD_PRE && backward != MS_FSDP_BACKWARD_POST)
    return ms_error(MS_ERR_ARG, "ms_fsdp_set_prefetch: bad argument #3 (backward): expected "
                    "MS_FSDP_PREFETCH_NONE, MS_FSDP_BACKWARD_PRE or MS_FSDP_BACKWARD_POST, got %d", (int)backward);
  unit->forward_prefetch = forward_prefetch;
  unit->backward_prefetch = backward;
  unit->on_grads_done = backward == MS_FSDP_BACKWARD_POST ? post_reduce_prefetch : NULL;
  return MS_OK;
}

ms_status ms_fsdp_set_limit_all_gathers(ms_flat_param *unit, bool limit) {
  if (check_object("ms_fsdp_set_limit_all_gathers", unit, "unit") != MS_OK) return MS_ERR_ARG;
  unit->limit_all_gathers = limit;
  return MS_OK;
}

ms_status ms_fsdp_pre_forward(ms_flat_param *unit) {
  if (check_object("ms_fsdp_pre_forward", unit, "unit") != MS_OK) return MS_ERR_ARG;
  ms_flat_param_reset_pending(unit);
  ms_flat_param_drop_unused_grad(unit);
  ms_fsdp_progress();
  ms_fsdp_state *s = unit->root;
  ms_flat_param *next = NULL;
  if (s && s->started) {
    ms_status st = order_push(&s->fwd, unit);
    if (st != MS_OK) return st;
    next = next_pending(&s->fwd_prev, &s->fwd, unit);
  }
  ms_status st = ms_flat_param_gather_compute(unit, false);
  note_gathered(unit);
  if (st == MS_OK && unit->forward_prefetch && next) st = prefetch(unit, next, false);
  return st;
}

/* The first gradient reaching an output of the unit means its backward is about to read the
 * saved parameter views: gather them back (FULL_SHARD freed them after forward), first issuing
 * the next unit's gather with BACKWARD_PRE. */
static ms_status pre_backward(void *ctx, ms_tensor *grad, ms_tensor **replace) {
  (void)grad, (void)replace;
  ms_flat_param *fp = ctx, *next = NULL;
  ms_fsdp_progress();
  ms_status st = record_backward(fp, &next);
  if (st == MS_OK && !ms_flat_param_compute_gathered(fp)) st = ms_flat_param_gather_compute_async(fp, false, true);
  note_gathered(fp);
  if (st == MS_OK && fp->backward_prefetch == MS_FSDP_BACKWARD_PRE && next) st = prefetch(fp, next, true);
  return st == MS_OK ? ms_flat_param_gather_compute(fp, true) : st;
}

static void unit_hook_free(void *ctx) { ms_flat_param_free(ctx); }

ms_status ms_fsdp_post_forward(ms_flat_param *unit, ms_tensor *const *outs, int n) {
  if (check_object("ms_fsdp_post_forward", unit, "unit") != MS_OK) return MS_ERR_ARG;
  ms_status st = check_outputs("ms_fsdp_post_forward", outs, n);
  if (st != MS_OK || unit->strategy == MS_FSDP_NO_SHARD) return st;
  bool backward = any_requires_grad(outs, n);
  /* the root keeps its parameters for the backward that follows at once (PyTorch 1.13) */
  bool is_root = unit->root && unit->root->in_forward && unit->root->root_unit == unit;
  bool reshard = unit->strategy == MS_FSDP_FULL_SHARD && !is_root;
  if (reshard || !backward) ms_flat_param_release(unit);
  for (int i = 0; st == MS_OK && i < n; i++) {
    if (!outs[i]->requires_grad) continue;
    if (!ms_tensor_register_hook(outs[i], pre_backward, ms_flat_param_retain(unit), unit_hook_free))
      st = MS_ERR_RUNTIME;
  }
  return st;
}
