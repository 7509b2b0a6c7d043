/* flat_param.c: the FlatParameter of an FSDP unit (moonshard/fsdp.h): packing the original
 * parameters, their pieces of the local shard and the pieces' grads, gathering and releasing the
 * full buffer, and the post-backward bookkeeping; the collectives on gradients are in
 * flat_param_comm.c, mixed precision in flat_param_mp.c. */
#include <stdlib.h>
#include <string.h>

#include "moonshard/autograd.h"
#include "moonshard/fsdp.h"
#include "moonshard/ops.h"
#include "moonshard/pinned.h"
#include "fsdp/fsdp_internal.h"
#include "native/native.h"

/* ---- creation ---------------------------------------------------------------------------------- */

static ms_status check_params(ms_tensor *const *params, int n) {
  if (n <= 0) return ms_error(MS_ERR_ARG, "fsdp: a unit needs at least one parameter, got %d", n);
  for (int i = 0; i < n; i++) {
    if (!params[i]) return ms_error(MS_ERR_ARG, "fsdp: parameter %d is NULL", i);
    if (!ms_device_equal(ms_tensor_device(params[i]), ms_tensor_device(params[0]))) {
      char a[MS_DEVICE_STR_LEN], b[MS_DEVICE_STR_LEN];
      return ms_error(MS_ERR_ARG, "fsdp: parameter %d is on %s, expected %s like parameter 0 (move the module "
                      "to one device first, or pass device_id)", i, ms_device_str(ms_tensor_device(params[i]), a, sizeof a),
                      ms_device_str(ms_tensor_device(params[0]), b, sizeof b));
    }
    if (!ms_dtype_is_floating(params[i]->dtype) || params[i]->dtype != params[0]->dtype)
      return ms_error(MS_ERR_ARG, "fsdp: parameter %d has dtype %s, expected %s like parameter 0 "
                      "(a unit flattens parameters of one floating dtype)", i,
                      ms_dtype_name(params[i]->dtype), ms_dtype_name(params[0]->dtype));
  }
  return MS_OK;
}

/* A view of s with a contiguous layout of the given shape at offset (elements). */
static ms_tensor *contiguous_view(ms_storage *s, ms_dtype dt, int ndim, const int64_t *shape,
                                  int64_t offset) {
  int64_t strides[MS_MAX_DIMS], step = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = step;
    step *= shape[d] > 0 ? shape[d] : 1;
  }
  return ms_tensor_new_view(s, dt, ndim, shape, strides, offset);
}

/* A 1-D tensor of n elements over a fresh storage of the given memory category on device d, or
 * in page-locked host memory (pinned: cpu_offload's shards, which the gathers copy from). */
static ms_tensor *new_flat_on(ms_device d, bool pinned, int64_t n, ms_dtype dt, ms_mem_category cat) {
  size_t nbytes = (size_t)(n > 0 ? n : 1) * ms_dtype_size(dt);
  ms_storage *s = pinned ? ms_storage_new_pinned(nbytes, cat) : ms_storage_new_on(d, nbytes, cat);
  if (!s) return NULL;
  ms_tensor *t = contiguous_view(s, dt, 1, &n, 0);
  ms_storage_release(s);
  return t;
}

/* Full, compute and communication buffers: on the unit's device. */
static ms_tensor *new_flat(const ms_flat_param *fp, int64_t n, ms_dtype dt, ms_mem_category cat) {
  return new_flat_on(fp->device, false, n, dt, cat);
}

/* The shard and its grad: on the device, or with cpu_offload in page-locked host memory. */
static ms_tensor *new_shard_flat(const ms_flat_param *fp, int64_t n, ms_dtype dt, ms_mem_category cat) {
  return new_flat_on(fp->offload ? (ms_device){MS_CPU, 0} : fp->device, fp->offload, n, dt, cat);
}

/* Copies the originals' values into the full buffer (zero padding: the padded tail is summed in
 * reductions and must stay a neutral value). */
static ms_status pack_values(ms_flat_param *fp, ms_tensor *const *params) {
  ms_status st = native_zero_(fp->full_flat);
  for (int i = 0; st == MS_OK && i < fp->nparams; i++) {
    int64_t len = ms_tensor_numel(params[i]);
    ms_tensor *dst = native_narrow(fp->full_flat, 0, fp->offsets[i], len);
    ms_tensor *src = dst ? native_reshape(params[i], 1, &len) : NULL;
    st = src ? native_copy_(dst, src) : MS_ERR_RUNTIME;
    ms_tensor_release(src);
    ms_tensor_release(dst);
  }
  return st;
}

/* The replacement leaves: views of the full storage with the originals' geometry. */
static ms_status make_views(ms_flat_param *fp, ms_tensor *const *params) {
  for (int i = 0; i < fp->nparams; i++) {
    ms_tensor *v = contiguous_view(fp->full, fp->dtype, params[i]->ndim, params[i]->shape,
                                   fp->offsets[i]);
    if (!v) return MS_ERR_RUNTIME;
    v->requires_grad = params[i]->requires_grad;
    fp->params[i] = v;
  }
  return MS_OK;
}

/* The shard: NO_SHARD shares the full buffer (so the optimizer updates what forward reads);
 * otherwise a copy of slice `rank` in its own storage, counted as parameters. */
static ms_status make_shard(ms_flat_param *fp) {
  if (fp->strategy == MS_FSDP_NO_SHARD) {
    fp->shard = contiguous_view(fp->full, fp->dtype, 1, &fp->shard_numel, 0);
  } else {
    fp->shard = new_shard_flat(fp, fp->shard_numel, fp->dtype, MS_MEM_PARAMS);
    ms_tensor *slice = fp->shard ? native_narrow(fp->full_flat, 0, fp->rank * fp->shard_numel,
                                                    fp->shard_numel) : NULL;
    ms_status st = slice ? native_copy_(fp->shard, slice) : MS_ERR_RUNTIME;
    ms_tensor_release(slice);
    if (st != MS_OK) return st;
  }
  if (!fp->shard) return MS_ERR_RUNTIME;
  fp->shard->requires_grad = true;
  return MS_OK;
}

/* Piece i is the intersection of param i's range [o, o + n) with this rank's shard range
 * [r*S, (r+1)*S), as a view of the shard's storage; empty pieces sit at the clamped start. */
static ms_status make_pieces(ms_flat_param *fp) {
  fp->pieces = calloc((size_t)fp->nparams, sizeof *fp->pieces);
  fp->piece_offsets = calloc((size_t)fp->nparams, sizeof *fp->piece_offsets);
  if (!fp->pieces || !fp->piece_offsets) return ms_error(MS_ERR_MEMORY, "fsdp: out of memory");
  int64_t lo_shard = fp->strategy == MS_FSDP_NO_SHARD ? 0 : fp->rank * fp->shard_numel;
  int64_t hi_shard = lo_shard + fp->shard_numel;
  for (int i = 0; i < fp->nparams; i++) {
    int64_t o = fp->offsets[i], n = ms_tensor_numel(fp->params[i]);
    int64_t lo = o > lo_shard ? o : lo_shard, hi = o + n < hi_shard ? o + n : hi_shard;
    if (lo > o + n) lo = o + n;
    if (hi < lo) hi = lo;
    int64_t len = hi - lo, at = lo - lo_shard;
    if (at > fp->shard_numel) at = fp->shard_numel;
    fp->pieces[i] = contiguous_view(fp->shard->storage, fp->dtype, 1, &len, fp->shard->offset + at);
    if (!fp->pieces[i]) return MS_ERR_RUNTIME;
    fp->pieces[i]->requires_grad = fp->params[i]->requires_grad;
    fp->piece_offsets[i] = lo - o;
  }
  return MS_OK;
}

static ms_status layout(ms_flat_param *fp, ms_tensor *const *params, int n) {
  fp->nparams = n;
  fp->params = calloc((size_t)n, sizeof *fp->params);
  fp->offsets = calloc((size_t)n, sizeof *fp->offsets);
  fp->hook_handles = calloc((size_t)n, sizeof *fp->hook_handles);
  if (!fp->params || !fp->offsets || !fp->hook_handles) return ms_error(MS_ERR_MEMORY, "fsdp: out of memory");
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    fp->offsets[i] = total;
    total += ms_tensor_numel(params[i]);
    if (params[i]->requires_grad) fp->grads_expected++;
  }
  bool shard = fp->strategy != MS_FSDP_NO_SHARD;
  fp->numel = total;
  fp->padded = shard ? (total + fp->world - 1) / fp->world * fp->world : total;
  fp->shard_numel = shard ? fp->padded / fp->world : total;
  fp->grads_pending = fp->grads_expected;
  return MS_OK;
}

/* cpu_offload on the CPU is nothing to do (the shard is in host memory already); on a device
 * NO_SHARD has no shard apart from the full buffer the modules compute with. */
static ms_status set_offload(ms_flat_param *fp, bool offload_params) {
  fp->offload = offload_params && fp->device.type == MS_CUDA;
  if (fp->offload && fp->strategy == MS_FSDP_NO_SHARD)
    return ms_error(MS_ERR_ARG, "fsdp: cpu_offload (offload_params) needs a sharded strategy, got NO_SHARD");
  return MS_OK;
}

ms_flat_param *ms_flat_param_create(ms_tensor *const *params, int n, ms_pg *pg,
                                    ms_fsdp_strategy strategy, bool offload_params) {
  if (check_params(params, n) != MS_OK) return NULL;
  if (!pg && !(pg = ms_pg_world())) return NULL;
  ms_flat_param *fp = calloc(1, sizeof *fp);
  if (!fp) return ms_error(MS_ERR_MEMORY, "fsdp: out of memory"), NULL;
  fp->refs = 1;
  ms_pg_retain(pg);
  fp->pg = pg;
  fp->strategy = strategy;
  fp->world = ms_pg_size(pg);
  fp->rank = ms_pg_rank(pg);
  fp->dtype = params[0]->dtype;
  fp->device = ms_tensor_device(params[0]);
  ms_status st = fp->rank < 0 ? ms_error(MS_ERR_ARG, "fsdp: this process is not in the group")
                              : set_offload(fp, offload_params);
  if (st == MS_OK) st = layout(fp, params, n);
  if (st == MS_OK) st = (fp->full_flat = new_flat(fp, fp->padded, fp->dtype, MS_MEM_PARAMS)) ? MS_OK : MS_ERR_RUNTIME;
  if (st == MS_OK) {
    fp->full = fp->full_flat->storage;
    st = pack_values(fp, params);
  }
  if (st == MS_OK) st = make_shard(fp);
  if (st == MS_OK) st = make_views(fp, params);
  if (st == MS_OK) st = make_pieces(fp);
  if (st != MS_OK) return ms_flat_param_free(fp), NULL;
  /* without mixed precision the modules compute with `full` itself */
  fp->param_dtype = fp->reduce_dtype = fp->grad_dtype = fp->dtype;
  fp->compute = fp->full, fp->compute_flat = fp->full_flat, fp->compute_params = fp->params;
  ms_flat_param_release(fp);
  ms_autograd_set_progress_fn(ms_fsdp_progress); /* backwards move its collectives between nodes */
  return fp;
}

ms_flat_param *ms_flat_param_retain(ms_flat_param *fp) {
  fp->refs++; /* only the training loop's thread touches units */
  return fp;
}

void ms_flat_param_free(ms_flat_param *fp) {
  if (!fp || --fp->refs > 0) return;
  fsdp_comm_free(fp); /* first: in-flight collectives write into the buffers */
  for (int i = 0; fp->params && i < fp->nparams; i++) {
    if (!fp->params[i]) continue;
    /* the hooks point at fp: the views may outlive it in Lua tables */
    if (fp->hook_handles[i]) ms_tensor_remove_hook(fp->compute_params[i], fp->hook_handles[i]);
    ms_tensor_release(fp->params[i]);
  }
  for (int i = 0; fp->pieces && i < fp->nparams; i++) ms_tensor_release(fp->pieces[i]);
  free(fp->pieces);
  free(fp->piece_offsets);
  fsdp_mp_free(fp);
  free(fp->params);
  free(fp->offsets);
  free(fp->hook_handles);
  ms_tensor_release(fp->shard);
  ms_tensor_release(fp->full_flat);
  ms_pg_release(fp->pg);
  free(fp->name);
  free(fp);
}

ms_status ms_flat_param_set_name(ms_flat_param *fp, const char *name) {
  if (!name) name = "";
  size_t len = strlen(name) + 1;
  char *copy = malloc(len);
  if (!copy) return ms_error(MS_ERR_MEMORY, "fsdp: set_name: out of memory");
  memcpy(copy, name, len);
  free(fp->name);
  fp->name = copy;
  return MS_OK;
}

/* ---- reading a unit ---------------------------------------------------------------------------- */

void ms_flat_param_get_info(const ms_flat_param *fp, ms_flat_param_info *out) {
  *out = (ms_flat_param_info){
      .numel = fp->numel, .padded = fp->padded, .shard_numel = fp->shard_numel,
      .world = fp->world, .rank = fp->rank, .nparams = fp->nparams,
      .strategy = fp->strategy, .device = fp->device, .offloaded = fp->offload,
      .dtype = fp->dtype, .param_dtype = fp->param_dtype, .reduce_dtype = fp->reduce_dtype,
  };
}

ms_tensor *ms_flat_param_shard(const ms_flat_param *fp) { return fp->shard; }

static bool check_index(const ms_flat_param *fp, int i, const char *fn) {
  if (i >= 0 && i < fp->nparams) return true;
  ms_error(MS_ERR_ARG, "%s: bad argument #2 (i): expected a parameter index in [0, %d), got %d", fn,
           fp->nparams, i);
  return false;
}

ms_tensor *ms_flat_param_view(const ms_flat_param *fp, int i) {
  return check_index(fp, i, "ms_flat_param_view") ? fp->params[i] : NULL;
}

ms_tensor *ms_flat_param_compute_view(const ms_flat_param *fp, int i) {
  return check_index(fp, i, "ms_flat_param_compute_view") ? fp->compute_params[i] : NULL;
}

ms_tensor *ms_flat_param_piece(const ms_flat_param *fp, int i) {
  return check_index(fp, i, "ms_flat_param_piece") ? fp->pieces[i] : NULL;
}

int64_t ms_flat_param_piece_offset(const ms_flat_param *fp, int i) {
  return check_index(fp, i, "ms_flat_param_piece_offset") ? fp->piece_offsets[i] : -1;
}

const ms_fsdp_comm_stats *ms_flat_param_stats(const ms_flat_param *fp) { return &fp->stats; }

void ms_flat_param_set_no_sync(ms_flat_param *fp, bool on) { fp->no_sync = on; }

/* ---- gather and release ------------------------------------------------------------------------ */

/* Re-materializing the full buffer restores values that the views had when autograd saved them
 * (the shards only change in optimizer.step, after backward), so it is not a modification: the
 * collective's version bump is undone, or FULL_SHARD's gather for backward would make every
 * saved parameter look modified in place. */
ms_status ms_flat_param_gather(ms_flat_param *fp) {
  if (fp->strategy == MS_FSDP_NO_SHARD) return MS_OK;
  if (fp->gather_work && !ms_flat_param_mixed(fp)) return ms_flat_param_gather_compute(fp, false); /* a prefetch */
  ms_status st = ms_storage_materialize(fp->full);
  if (st != MS_OK) return st;
  int version = atomic_load(&fp->full->version);
  ms_tensor *in = fsdp_shard_on_device(fp, fp->dtype);
  ms_dist_set_origin(fp->name, "full all-gather");
  st = in ? ms_pg_all_gather(fp->pg, fp->full_flat, in, NULL) : MS_ERR_RUNTIME;
  ms_dist_set_origin(NULL, NULL);
  ms_tensor_release(in);
  atomic_store(&fp->full->version, version);
  return st;
}

ms_status ms_flat_param_update_shard(ms_flat_param *fp) {
  if (fp->strategy == MS_FSDP_NO_SHARD) return MS_OK;
  if (!ms_flat_param_is_gathered(fp)) return ms_error(MS_ERR_RUNTIME, "fsdp: update_shard needs the full buffer gathered");
  ms_tensor *slice = native_narrow(fp->full_flat, 0, fp->rank * fp->shard_numel, fp->shard_numel);
  ms_status st = slice ? native_copy_(fp->shard, slice) : MS_ERR_RUNTIME;
  ms_tensor_release(slice);
  return st;
}

void ms_flat_param_release(ms_flat_param *fp) { ms_flat_param_release_compute(fp); }

bool ms_flat_param_is_gathered(const ms_flat_param *fp) { return ms_storage_is_materialized(fp->full); }

/* ---- the pieces' grads ------------------------------------------------------------------------- */

/* The view of base (shard-sized) that piece i covers (new reference). */
static ms_tensor *piece_view(ms_flat_param *fp, int i, ms_tensor *base) {
  ms_tensor *p = fp->pieces[i];
  int64_t len = ms_tensor_numel(p);
  int64_t at = p->offset - fp->shard->offset; /* the piece's place in the shard */
  return contiguous_view(base->storage, base->dtype, 1, &len, base->offset + at);
}

static bool any_piece_grad(const ms_flat_param *fp) {
  for (int i = 0; i < fp->nparams; i++)
    if (fp->pieces[i]->grad && ms_tensor_numel(fp->pieces[i]) > 0) return true;
  return false;
}

void ms_flat_param_drop_unused_grad(ms_flat_param *fp) {
  if (!fp->shard->grad || any_piece_grad(fp)) return;
  ms_tensor_release(fp->shard->grad);
  fp->shard->grad = NULL;
}

ms_status fsdp_sync_shard_grad(ms_flat_param *fp) {
  ms_flat_param_drop_unused_grad(fp);
  if (!any_piece_grad(fp)) return MS_OK;
  ms_tensor *sg = fp->shard->grad;
  if (!sg) {
    if (!(sg = new_shard_flat(fp, fp->shard_numel, fp->grad_dtype, MS_MEM_GRADS)) || native_zero_(sg) != MS_OK)
      return ms_tensor_release(sg), MS_ERR_RUNTIME;
    fp->shard->grad = sg;
  }
  ms_status st = MS_OK;
  for (int i = 0; st == MS_OK && i < fp->nparams; i++) {
    ms_tensor *g = fp->pieces[i]->grad;
    if (ms_tensor_numel(fp->pieces[i]) == 0) continue;
    ms_tensor *dst = piece_view(fp, i, sg);
    if (!dst) return MS_ERR_RUNTIME;
    if (!g) st = native_zero_(dst);
    else if (g->storage != dst->storage || g->offset != dst->offset || !ms_tensor_is_contiguous(g))
      st = native_copy_(dst, g); /* assigned by the user */
    ms_tensor_release(dst);
  }
  return st;
}

ms_status fsdp_use_piece_grad_views(ms_flat_param *fp) {
  for (int i = 0; i < fp->nparams; i++) {
    ms_tensor *p = fp->pieces[i];
    if (!p->requires_grad || ms_tensor_numel(p) == 0) continue;
    ms_tensor *v = piece_view(fp, i, fp->shard->grad);
    if (!v) return MS_ERR_RUNTIME;
    ms_tensor_release(p->grad);
    p->grad = v;
  }
  return MS_OK;
}

/* ---- post-backward ----------------------------------------------------------------------------- */

/* Counting arrivals rather than waiting for the end of backward lets the unit's reduction run
 * as soon as its gradients are complete, while earlier layers are still computing. */
static ms_status on_grad_ready(void *ctx, ms_tensor *param) {
  (void)param;
  ms_flat_param *fp = ctx;
  ms_fsdp_progress(); /* each parameter's grad is a chance to move in-flight collectives */
  if (--fp->grads_pending > 0) return MS_OK;
  fp->grads_pending = fp->grads_expected;
  ms_status st = fp->no_sync ? MS_OK : ms_flat_param_reduce_grads_async(fp);
  if (st == MS_OK) ms_flat_param_release(fp);
  if (st == MS_OK && fp->on_grads_done) st = fp->on_grads_done(fp); /* the runtime's BACKWARD_POST */
  return st;
}

ms_status ms_flat_param_install_hooks(ms_flat_param *fp) {
  for (int i = 0; i < fp->nparams; i++) { /* on the views that compute, hence get the grads */
    if (!fp->compute_params[i]->requires_grad || fp->hook_handles[i]) continue;
    fp->hook_handles[i] = ms_tensor_register_post_accumulate_hook(fp->compute_params[i], on_grad_ready, fp, NULL);
    if (!fp->hook_handles[i]) return MS_ERR_RUNTIME;
  }
  return MS_OK;
}

void ms_flat_param_reset_pending(ms_flat_param *fp) { fp->grads_pending = fp->grads_expected; }

/* The order matters: the reduction lands in shard->grad (and the pieces' grads become its views)
 * before a partial unit packs what is left, and buffers are freed only once no collective
 * writes into them. */
ms_status ms_flat_param_finish_backward(ms_flat_param *fp, bool cleanup_only) {
  ms_status st = ms_flat_param_wait_reduce(fp);
  bool partial = fp->grads_pending != fp->grads_expected;
  fp->grads_pending = fp->grads_expected;
  if (st == MS_OK && partial && !fp->no_sync && !cleanup_only) st = ms_flat_param_reduce_grads(fp);
  ms_flat_param_release(fp);
  return st;
}

/* ---- for the other flat_param_*.c files (fsdp_internal.h) --------------------------------------- */

ms_tensor *fsdp_new_flat(const ms_flat_param *fp, int64_t n, ms_dtype dt, ms_mem_category cat) {
  return new_flat(fp, n, dt, cat);
}

ms_tensor *fsdp_new_shard_flat(const ms_flat_param *fp, int64_t n, ms_dtype dt, ms_mem_category cat) {
  return new_shard_flat(fp, n, dt, cat);
}

/* The shard's bytes in dt on the unit's device: what an all-gather sends. A plain view, not the
 * leaf itself, so that nothing downstream records a graph node. With cpu_offload the page-locked
 * shard crosses without the host waiting (queued on the compute stream, which the collective's
 * stream waits for). */
ms_tensor *fsdp_shard_on_device(ms_flat_param *fp, ms_dtype dt) {
  ms_tensor *d = contiguous_view(fp->shard->storage, fp->dtype, 1, &fp->shard_numel, fp->shard->offset);
  if (d && fp->offload) {
    ms_tensor *moved = ms_tensor_to_device_opt(d, fp->device, true);
    ms_tensor_release(d);
    d = moved;
  }
  if (d && dt != d->dtype) {
    ms_tensor *cast = native_to_dtype(d, dt);
    ms_tensor_release(d);
    d = cast;
  }
  return d;
}

ms_tensor *fsdp_contiguous_view(ms_storage *s, ms_dtype dt, int ndim, const int64_t *shape, int64_t offset) {
  return contiguous_view(s, dt, ndim, shape, offset);
}
