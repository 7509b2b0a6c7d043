/* fsdp_train.c: FSDP from a C host, no Lua. A 2-layer MLP (8 -> 16 -> 4) is wrapped into two
 * units (the root holding fc1, and fc2 nested in it) with the engine's runtime (moonshard/fsdp_runtime.h) and
 * trained with SGD on a fixed synthetic batch, each rank taking its slice of the batch. The same
 * model is trained alongside without FSDP on the whole batch: FSDP on any number of ranks must
 * give the same losses within 1e-5, and the loss must fall. Exits non-zero otherwise.
 *   fsdp_train            (one rank)     mpirun -n 2 fsdp_train */
#include <math.h>
#include <stdio.h>

#include <moonshard/dist.h>
#include <moonshard/fsdp_runtime.h>
#include <moonshard/moonshard.h>

enum { BATCH = 16, IN = 8, HID = 16, OUT = 4, STEPS = 8 };
static const int64_t shapes[4][2] = {{HID, IN}, {HID, 1}, {OUT, HID}, {OUT, 1}}; /* w1 b1 w2 b2 */

/* A deterministic tensor of n elements: every rank and both models start from the same values. */
static ms_tensor *filled(int ndim, const int64_t *shape, double scale, double phase, bool grad) {
  ms_tensor *t = ms_tensor_new_empty(ndim, shape, MS_FLOAT32);
  for (int64_t i = 0; t && i < ms_tensor_numel(t); i++) ms_tensor_set_flat(t, i, scale * sin(1.7 * (double)i + phase));
  if (t) t->requires_grad = grad;
  return t;
}

/* The model's forward on x; with FSDP (root != NULL) wrapped in the runtime's calls, p[] being
 * the units' compute views. Returns the logits (new reference), or NULL with an error. */
static ms_tensor *forward(ms_fsdp_state *root, ms_flat_param **units, ms_tensor **p, ms_tensor *x) {
  if (root && (ms_fsdp_root_pre_forward(root) != MS_OK || ms_fsdp_pre_forward(units[0]) != MS_OK)) return NULL;
  ms_tensor *z = ms_linear(x, p[0], p[1]);
  ms_tensor *h = z ? ms_unary(MS_OP_RELU, z) : NULL;
  ms_tensor_release(z);
  /* fc2's unit is freed after its forward (FULL_SHARD) and gathered again for its backward */
  if (!h || (root && ms_fsdp_pre_forward(units[1]) != MS_OK)) return ms_tensor_release(h), NULL;
  ms_tensor *y = ms_linear(h, p[2], p[3]);
  ms_tensor_release(h);
  if (y && root && (ms_fsdp_post_forward(units[1], &y, 1) != MS_OK || ms_fsdp_post_forward(units[0], &y, 1) != MS_OK ||
                    ms_fsdp_root_post_forward(root, &y, 1) != MS_OK))
    return ms_tensor_release(y), NULL;
  return y;
}

/* One step: forward, cross-entropy, backward, SGD on the given parameters (the FSDP pieces, or
 * the plain model's leaves), grads dropped as zero_grad(set_to_none) does. *loss: the loss. */
static ms_status step(ms_fsdp_state *root, ms_flat_param **units, ms_tensor **p, ms_tensor **opt, int nopt,
                      ms_tensor *x, ms_tensor *target, double *loss) {
  ms_tensor *logits = forward(root, units, p, x);
  ms_tensor *l = logits ? ms_cross_entropy(logits, target, NULL, -100, MS_REDUCTION_MEAN, 0.0, 0) : NULL;
  ms_status st = l ? ms_tensor_item(l, loss) : MS_ERR_RUNTIME;
  if (st == MS_OK) st = ms_backward(l, NULL, false);
  ms_sgd_options sgd = {.lr = 0.5};
  for (int i = 0; st == MS_OK && i < nopt; i++) {
    if (opt[i]->grad && ms_tensor_numel(opt[i]) > 0) st = ms_optim_sgd_step(opt[i], opt[i]->grad, NULL, false, &sgd);
    ms_tensor_release(opt[i]->grad);
    opt[i]->grad = NULL;
  }
  ms_tensor_release(l);
  ms_tensor_release(logits);
  return st;
}

/* The batch: x (BATCH x IN) and class targets; rows [lo, lo + n) of it. */
static void batch(int64_t lo, int64_t n, ms_tensor **x, ms_tensor **target) {
  int64_t xs[2] = {BATCH, IN};
  ms_tensor *all = filled(2, xs, 1.0, 0.3, false);
  *x = ms_tensor_narrow(all, 0, lo, n);
  ms_tensor_release(all);
  *target = ms_tensor_new_empty(1, &n, MS_INT64);
  for (int64_t i = 0; i < n; i++) ms_tensor_set_flat(*target, i, (double)((lo + i) * 7 % OUT));
}

int main(void) {
  if (ms_dist_init("auto", 60) != MS_OK) return fprintf(stderr, "fsdp_train: %s\n", ms_error_last()), 1;
  ms_pg *world = ms_pg_world();
  int rank = ms_pg_rank(world), size = ms_pg_size(world);
  if (BATCH % size != 0) return fprintf(stderr, "fsdp_train: %d ranks do not divide the batch\n", size), 1;
  ms_tensor *w[4], *ref[4];
  for (int i = 0; i < 4; i++) {
    int ndim = shapes[i][1] == 1 ? 1 : 2; /* biases are 1-D */
    w[i] = filled(ndim, shapes[i], 0.4, (double)i, true);
    ref[i] = filled(ndim, shapes[i], 0.4, (double)i, true);
  }
  /* the units: the root's own = {w1, b1}, fc2 = {w2, b2} (finished in this order at backward's end) */
  ms_flat_param *units[2] = {ms_flat_param_create(w, 2, NULL, MS_FSDP_FULL_SHARD, false),
                             ms_flat_param_create(w + 2, 2, NULL, MS_FSDP_FULL_SHARD, false)};
  ms_status st = units[0] && units[1] ? MS_OK : MS_ERR_RUNTIME;
  for (int u = 0; st == MS_OK && u < 2; u++) {
    st = ms_flat_param_set_name(units[u], u == 0 ? "(root)" : "fc2");
    if (st == MS_OK) st = ms_flat_param_install_hooks(units[u]);
    if (st == MS_OK) st = ms_fsdp_set_prefetch(units[u], true, MS_FSDP_BACKWARD_PRE);
  }
  ms_fsdp_state *root = st == MS_OK ? ms_fsdp_state_new(units, 2, units[0]) : NULL;
  ms_tensor *views[4], *pieces[4];
  for (int i = 0; root && i < 4; i++) {
    views[i] = ms_flat_param_compute_view(units[i / 2], i % 2);
    pieces[i] = ms_flat_param_piece(units[i / 2], i % 2);
  }
  ms_tensor *x, *target, *x_all, *target_all;
  int64_t rows = BATCH / size;
  batch(rank * rows, rows, &x, &target);
  batch(0, BATCH, &x_all, &target_all);
  double first = 0, last = 0, worst = 0;
  for (int s = 0; root && s < STEPS; s++) {
    double mine = 0, want = 0;
    st = step(root, units, views, pieces, 4, x, target, &mine);
    if (st == MS_OK) st = step(NULL, NULL, ref, ref, 4, x_all, target_all, &want);
    if (st != MS_OK) break;
    ms_tensor *avg = ms_tensor_new_full_on((ms_device){MS_CPU, 0}, 0, NULL, MS_FLOAT64, mine);
    st = ms_pg_all_reduce(world, avg, MS_DIST_AVG, NULL); /* the global batch's loss */
    if (st == MS_OK) st = ms_tensor_item(avg, &last);
    ms_tensor_release(avg);
    if (st != MS_OK) break;
    if (s == 0) first = last;
    if (fabs(last - want) > worst) worst = fabs(last - want);
    if (rank == 0) printf("step %d  loss %.6f  (without FSDP %.6f)\n", s + 1, last, want);
  }
  int bad = !root || st != MS_OK || !(last < first) || worst > 1e-5;
  if (rank == 0) {
    if (!root || st != MS_OK) fprintf(stderr, "fsdp_train: %s\n", ms_error_last());
    printf("%d rank(s): loss %.6f -> %.6f, largest gap to the model without FSDP %.2g: %s\n", size, first, last,
           worst, bad ? "FAILED" : "ok");
    for (int u = 0; root && u < 2; u++) {
      const ms_fsdp_comm_stats *c = ms_flat_param_stats(units[u]);
      printf("unit %s: %lld all-gathers (%lld prefetched), %lld reductions\n", u ? "fc2" : "(root)",
             (long long)c->allgather_calls, (long long)c->prefetch_calls, (long long)c->reduce_calls);
    }
  }
  ms_fsdp_state_free(root);
  for (int i = 0; i < 4; i++) ms_tensor_release(w[i]), ms_tensor_release(ref[i]);
  ms_flat_param_free(units[0]), ms_flat_param_free(units[1]);
  ms_tensor_release(x), ms_tensor_release(target), ms_tensor_release(x_all), ms_tensor_release(target_all);
  ms_dist_destroy();
  return bad;
}
