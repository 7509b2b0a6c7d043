/* flat_param_comm.c: an FSDP unit's collectives as asynchronous work (moonshard/fsdp.h): the
 * all-gather of the compute buffer (issued ahead for prefetching), the gradient reduction
 * (reduce-scatter or all-reduce, then HYBRID_SHARD's all-reduce across nodes) finished at the end
 * of backward by the root's finisher (ms_flat_param_finish_backward), and the counters the bench
 * reads.
 *
 * Progress. Open MPI 4.1 (no asynchronous progress thread: ompi_info says "OMPI progress: no")
 * advances a non-blocking collective only inside MPI calls. Measured with
 * bench/mpi_progress.lua on this 2-core machine, 2 ranks, fc1's 4.7 MB all-gather (alone
 * 4-5 ms), issued and followed by ~20 ms of matmuls: with no MPI call during the computation
 * the wait left afterwards was 2.5-5.4 ms (median of 30, three runs), i.e. nothing overlapped;
 * testing the request every ~1 ms left 0 ms (every ~10 ms: 0-6 ms). So ms_fsdp_progress tests
 * every in-flight collective, and FSDP calls it often: at each unit's pre-forward and
 * pre-backward (fsdp_runtime.c), before each module of a unit when forward_prefetch is on
 * (fsdp.lua), in each parameter's post-accumulate hook (flat_param.c), and between any two
 * nodes of a backward walk (ms_autograd_set_progress_fn). A progress thread
 * was not chosen: with one compute thread per rank on 2 cores it would take cycles from the
 * computation, and it would need MPI_THREAD_MULTIPLE. End-to-end step times on this shared machine vary 3x between
 * runs (bench/fsdp_overlap.lua), too noisy to show the gain; the bench of issue 7
 * should measure it on a quiet machine. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "fsdp/fsdp_internal.h"
#include "native/native.h"
#include "moonshard/ops.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the units with work in flight ------------------------------------------------------------ */

static ms_flat_param *g_inflight; /* only the thread running the training loop issues collectives */

static void track(ms_flat_param *fp) {
  if (fp->inflight) return;
  fp->inflight = true;
  fp->inflight_next = g_inflight, g_inflight = fp;
}

static void untrack_if_idle(ms_flat_param *fp) {
  if (!fp->inflight || fp->gather_work || fp->reduce_work) return;
  for (ms_flat_param **p = &g_inflight; *p; p = &(*p)->inflight_next)
    if (*p == fp) {
      *p = fp->inflight_next;
      break;
    }
  fp->inflight = false, fp->inflight_next = NULL;
}

/* Tests without blocking (a completed test finishes the work: its error, if any, stays in the
 * handle for the wait). One pointer test when nothing is in flight. */
void ms_fsdp_progress(void) {
  for (ms_flat_param *fp = g_inflight; fp; fp = fp->inflight_next) {
    if (fp->gather_work) ms_work_is_completed(fp->gather_work);
    if (fp->reduce_work) ms_work_is_completed(fp->reduce_work);
  }
}

/* Waits for *w, counting the time blocked when it was not already done; frees it. */
static ms_status wait_work(ms_flat_param *fp, ms_work **w) {
  ms_status st = MS_OK;
  if (!ms_work_is_completed(*w)) {
    double t0 = now();
    st = ms_work_wait(*w);
    fp->stats.waits++;
    fp->stats.wait_seconds += now() - t0;
  } else {
    st = ms_work_wait(*w); /* returns the stored result */
  }
  if (st != MS_OK && !ms_work_is_completed(*w)) return st; /* timed out: leave it, never free a busy buffer */
  ms_work_free(*w);
  *w = NULL;
  untrack_if_idle(fp);
  return st;
}

void ms_flat_param_stats_reset(ms_flat_param *fp) { fp->stats = (ms_fsdp_comm_stats){0}; }

ms_status ms_flat_param_set_inter_group(ms_flat_param *fp, ms_pg *inter) {
  if (!inter) return ms_error(MS_ERR_ARG, "fsdp: HYBRID_SHARD needs an inter-node group, got NULL");
  if (ms_pg_rank(inter) < 0)
    return ms_error(MS_ERR_ARG, "fsdp: HYBRID_SHARD: this process is not a member of the inter-node group");
  if (fp->strategy == MS_FSDP_NO_SHARD)
    return ms_error(MS_ERR_ARG, "fsdp: an inter-node group needs a sharded strategy, got NO_SHARD");
  ms_pg_retain(inter);
  ms_pg_release(fp->inter);
  fp->inter = inter;
  return MS_OK;
}

/* ---- all-gather of the compute buffer --------------------------------------------------------- */

bool ms_flat_param_compute_gathered(const ms_flat_param *fp) {
  return fp->gather_work != NULL || ms_storage_is_materialized(fp->compute);
}

/* NO_SHARD keeps `full` on every rank; with mixed precision the compute buffer is its cast. */
static ms_status cast_full(ms_flat_param *fp) {
  if (!ms_flat_param_mixed(fp)) return MS_OK;
  ms_status st = ms_storage_materialize(fp->compute);
  if (st != MS_OK) return st;
  int version = atomic_load(&fp->compute->version);
  st = native_copy_(fp->compute_flat, fp->full_flat);
  atomic_store(&fp->compute->version, version);
  return st;
}

ms_status ms_flat_param_gather_compute_async(ms_flat_param *fp, bool prefetch, bool backward) {
  if (fp->strategy == MS_FSDP_NO_SHARD) return prefetch ? MS_OK : cast_full(fp);
  if (ms_flat_param_compute_gathered(fp)) return MS_OK;
  ms_status st = ms_storage_materialize(fp->compute);
  if (st != MS_OK) return st;
  fp->gather_version = atomic_load(&fp->compute->version);
  /* the shard in param dtype: the collective moves the low-precision bytes (the work keeps it) */
  ms_tensor *in = fsdp_shard_on_device(fp, fp->param_dtype);
  ms_dist_set_origin(fp->name, backward ? "backward all-gather" : "forward all-gather");
  st = in ? ms_pg_all_gather(fp->pg, fp->compute_flat, in, &fp->gather_work) : MS_ERR_RUNTIME;
  ms_dist_set_origin(NULL, NULL);
  ms_tensor_release(in);
  if (st != MS_OK) return st;
  track(fp);
  fp->stats.allgather_calls++;
  fp->stats.prefetch_calls += prefetch;
  fp->stats.allgather_bytes += fp->padded * (int64_t)ms_dtype_size(fp->param_dtype);
  return MS_OK;
}

ms_status ms_flat_param_gather_compute(ms_flat_param *fp, bool backward) {
  if (!fp->gather_work) {
    if (ms_storage_is_materialized(fp->compute) && fp->strategy != MS_FSDP_NO_SHARD) return MS_OK;
    ms_status st = ms_flat_param_gather_compute_async(fp, false, backward);
    if (st != MS_OK || !fp->gather_work) return st;
  }
  ms_status st = wait_work(fp, &fp->gather_work);
  /* the gather's completion bumped the version; it restored values, it did not write new ones */
  atomic_store(&fp->compute->version, fp->gather_version);
  return st;
}

void ms_flat_param_release_compute(ms_flat_param *fp) {
  if (fp->strategy == MS_FSDP_NO_SHARD) return;
  if (fp->gather_work && ms_flat_param_gather_compute(fp, false) != MS_OK && fp->gather_work) return; /* still busy */
  ms_storage_release_data(fp->compute);
  if (ms_flat_param_mixed(fp)) ms_storage_release_data(fp->full);
}

/* ---- gradients -------------------------------------------------------------------------------- */

/* Zeroes flat[at, at + len) (a missing grad, the gaps and the padding). */
static ms_status zero_range(ms_tensor *flat, int64_t at, int64_t len) {
  if (len <= 0) return MS_OK;
  ms_tensor *dst = native_narrow(flat, 0, at, len);
  ms_status st = dst ? native_zero_(dst) : MS_ERR_RUNTIME;
  ms_tensor_release(dst);
  return st;
}

/* The compute views' grads packed like their values in reduce dtype (zeros for padding and
 * missing grads, written only there: the copies cover the rest); the views' grads are dropped
 * once copied: the shard's grad is the only one that stays. */
static ms_tensor *pack_grads(ms_flat_param *fp) {
  ms_tensor *flat = fsdp_new_flat(fp, fp->padded, fp->reduce_dtype, MS_MEM_COMM);
  ms_status st = flat ? MS_OK : MS_ERR_RUNTIME;
  int64_t done = 0; /* flat[0, done) is written */
  for (int i = 0; st == MS_OK && i < fp->nparams; i++) {
    ms_tensor *p = fp->compute_params[i], *g = p->grad;
    if (!g) continue;
    int64_t len = ms_tensor_numel(p);
    st = zero_range(flat, done, fp->offsets[i] - done);
    ms_tensor *dst = st == MS_OK ? native_narrow(flat, 0, fp->offsets[i], len) : NULL;
    ms_tensor *src = dst ? native_reshape(g, 1, &len) : NULL;
    st = src ? native_copy_(dst, src) : MS_ERR_RUNTIME;
    ms_tensor_release(src);
    ms_tensor_release(dst);
    done = fp->offsets[i] + len;
    p->grad = NULL;
    ms_tensor_release(g);
  }
  if (st == MS_OK) st = zero_range(flat, done, fp->padded - done);
  if (st != MS_OK) ms_tensor_release(flat), flat = NULL;
  return flat;
}

/* Adds g (any floating dtype) into shard->grad, or makes a grads-category copy when there is none.
 * With cpu_offload g comes to the host first (the copy waits for the reduction: the compute
 * stream waited for it when the work completed). */
static ms_status accumulate_shard_grad(ms_flat_param *fp, ms_tensor *g) {
  ms_tensor *sg = fp->shard->grad;
  ms_tensor *host = fp->offload ? native_to_device(g, (ms_device){MS_CPU, 0}) : (ms_tensor_retain(g), g);
  if (!host) return MS_ERR_RUNTIME;
  if (sg) {
    ms_status st = native_binary_(MS_OP_ADD, sg, ms_operand_tensor(host));
    ms_tensor_release(host);
    return st;
  }
  sg = fsdp_new_shard_flat(fp, fp->shard_numel, fp->grad_dtype, MS_MEM_GRADS);
  ms_status st = sg ? native_copy_(sg, host) : MS_ERR_RUNTIME;
  ms_tensor_release(host);
  if (st == MS_OK) fp->shard->grad = sg;
  else ms_tensor_release(sg);
  return st;
}

static ms_status issue_reduce(ms_flat_param *fp, ms_tensor *flat) {
  int64_t bytes = ms_tensor_numel(flat) * (int64_t)ms_dtype_size(fp->reduce_dtype);
  ms_status st;
  ms_dist_set_origin(fp->name, fp->strategy == MS_FSDP_NO_SHARD ? "grad all-reduce" : "grad reduce-scatter");
  if (fp->strategy == MS_FSDP_NO_SHARD) {
    ms_tensor_retain(flat);
    fp->reduce_out = flat;
    st = ms_pg_all_reduce(fp->pg, flat, MS_DIST_AVG, &fp->reduce_work);
  } else {
    fp->reduce_out = fsdp_new_flat(fp, fp->shard_numel, fp->reduce_dtype, MS_MEM_COMM);
    st = fp->reduce_out ? ms_pg_reduce_scatter(fp->pg, fp->reduce_out, flat, MS_DIST_AVG, &fp->reduce_work)
                        : MS_ERR_RUNTIME;
  }
  ms_dist_set_origin(NULL, NULL);
  if (st != MS_OK) {
    ms_tensor_release(fp->reduce_out);
    fp->reduce_out = NULL;
    return st;
  }
  fp->reduce_stage = 1;
  track(fp);
  fp->stats.reduce_calls++;
  fp->stats.reduce_bytes += bytes;
  return MS_OK;
}

/* The unit whose reduction was issued last (weak: fsdp_comm_free clears it). */
static ms_flat_param *g_last_reduce;

ms_status ms_flat_param_reduce_grads_async(ms_flat_param *fp) {
  /* a unit's second backward before the first's reduction ended (retain_graph): finish it first */
  ms_status st = ms_flat_param_wait_reduce(fp);
  if (st != MS_OK) return st;
  ms_tensor *flat = NULL;
  st = fsdp_sync_shard_grad(fp); /* before the result is added to shard->grad */
  if (st == MS_OK) st = (flat = pack_grads(fp)) ? issue_reduce(fp, flat) : MS_ERR_RUNTIME;
  ms_tensor_release(flat); /* the work holds its input */
  /* At most two reductions in flight, as PyTorch's post-backward stream: issuing this one
   * completes the previous unit's, which had a whole unit's backward to progress. Its packed
   * full-size input and its output are freed now, inside the backward: held to the end, every
   * unit's pair was live at once (12 x Linear(2048), 1 rank: the engine's peak 1000 MB, of
   * which 192 MB reduce outputs, against 769 MB of parameters, grads and Adam state). */
  ms_flat_param *prev = g_last_reduce;
  g_last_reduce = fp;
  if (st == MS_OK && prev && prev != fp) st = ms_flat_param_wait_reduce(prev);
  return st;
}

ms_status ms_flat_param_reduce_grads(ms_flat_param *fp) {
  ms_status st = ms_flat_param_reduce_grads_async(fp);
  return st == MS_OK ? ms_flat_param_wait_reduce(fp) : st;
}

ms_status ms_flat_param_wait_reduce(ms_flat_param *fp) {
  if (!fp->reduce_work) return MS_OK;
  ms_status st = wait_work(fp, &fp->reduce_work);
  if (st == MS_OK && fp->reduce_stage == 1 && fp->inter && ms_pg_size(fp->inter) > 1) {
    /* HYBRID_SHARD: the node's average, averaged over the nodes holding the same shard */
    ms_dist_set_origin(fp->name, "grad all-reduce across nodes");
    st = ms_pg_all_reduce(fp->inter, fp->reduce_out, MS_DIST_AVG, &fp->reduce_work);
    ms_dist_set_origin(NULL, NULL);
    if (st == MS_OK) {
      fp->reduce_stage = 2;
      track(fp);
      fp->stats.allreduce_calls++;
      fp->stats.reduce_bytes += ms_tensor_numel(fp->reduce_out) * (int64_t)ms_dtype_size(fp->reduce_dtype);
      st = wait_work(fp, &fp->reduce_work);
    }
  }
  if (fp->reduce_work) return st; /* timed out: the buffer stays with the work */
  if (st == MS_OK) {
    st = accumulate_shard_grad(fp, fp->reduce_out);
    if (st == MS_OK) st = fsdp_use_piece_grad_views(fp);
  }
  ms_tensor_release(fp->reduce_out);
  fp->reduce_out = NULL;
  fp->reduce_stage = 0;
  return st;
}

void fsdp_comm_free(ms_flat_param *fp) {
  if (g_last_reduce == fp) g_last_reduce = NULL;
  if (fp->gather_work) wait_work(fp, &fp->gather_work);
  if (fp->reduce_work) wait_work(fp, &fp->reduce_work);
  fp->gather_work = fp->reduce_work = NULL; /* a timed-out one is leaked with its buffers */
  fp->reduce_work = NULL;
  if (fp->inflight) {
    for (ms_flat_param **p = &g_inflight; *p; p = &(*p)->inflight_next)
      if (*p == fp) {
        *p = fp->inflight_next;
        break;
      }
  }
  ms_tensor_release(fp->reduce_out);
  fp->reduce_out = NULL;
  ms_pg_release(fp->inter);
  fp->inter = NULL;
}
