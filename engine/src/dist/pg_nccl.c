/* pg_nccl.c: the "nccl" backend on CUDA tensors. MPI starts the ranks and carries rank 0's
 * ncclUniqueId to the others; each group has one communicator (subgroups are split from the
 * world's) and its own stream: a collective waits for the work queued so far on the tensors'
 * compute stream (an event), runs on the group's stream, and its work is done when the event
 * recorded after it has fired; later compute waits for that event too. Each rank drives the GPU
 * numbered by its local rank (modulo the GPUs it sees), as one process per GPU is the rule. */
#include <mpi.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "dist/pg_internal.h"

typedef struct nccl_group {
  ncclComm_t comm;
  MPI_Comm mpi; /* the same ranks, for the barrier */
  int device;
  cudaStream_t stream;
} nccl_group;

typedef struct nccl_work {
  cudaEvent_t done;
  int device;
  ms_tensor *out, *in; /* kept alive until the collective has finished with them */
} nccl_work;

static const struct ms_pg_ops nccl_ops;

static ms_status nccl_fail(const char *fname, ncclResult_t r) {
  return ms_error(MS_ERR_RUNTIME, "%s: NCCL error: %s%s%s", fname, ncclGetErrorString(r),
                  ncclGetLastError(NULL) && *ncclGetLastError(NULL) ? ": " : "",
                  ncclGetLastError(NULL) ? ncclGetLastError(NULL) : "");
}

static bool nccl_type(ms_dtype dt, ncclDataType_t *t) {
  switch (dt) {
  case MS_FLOAT32: *t = ncclFloat32; return true;
  case MS_FLOAT64: *t = ncclFloat64; return true;
  case MS_BFLOAT16: *t = ncclBfloat16; return true;
  case MS_FLOAT16: *t = ncclFloat16; return true;
  case MS_INT64: *t = ncclInt64; return true;
  case MS_INT32: *t = ncclInt32; return true;
  case MS_UINT8: case MS_BOOL: *t = ncclUint8; return true;
  default: return false;
  }
}

/* bool follows PyTorch: sum and max are "any", product and min are "all". */
static ncclRedOp_t nccl_op(ms_dist_op op, ms_dtype dt) {
  if (dt == MS_BOOL) return op == MS_DIST_SUM || op == MS_DIST_MAX ? ncclMax : ncclMin;
  switch (op) {
  case MS_DIST_AVG: return ncclAvg;
  case MS_DIST_MAX: return ncclMax;
  case MS_DIST_MIN: return ncclMin;
  case MS_DIST_PRODUCT: return ncclProd;
  default: return ncclSum;
  }
}

static int work_test(void *impl) {
  nccl_work *w = impl;
  if (cuda_use("collective", w->device) != MS_OK) return -1;
  cudaError_t e = cudaEventQuery(w->done);
  if (e == cudaErrorNotReady) return (void)cudaGetLastError(), 0;
  return cuda_check("collective", e) == MS_OK ? 1 : -1;
}

/* Compute queued after this point reads the results only after the collective wrote them. */
static ms_status work_complete(void *impl) {
  nccl_work *w = impl;
  if (cuda_use("collective", w->device) != MS_OK) return MS_ERR_RUNTIME;
  return cuda_check("collective", cudaStreamWaitEvent(cuda_raw_stream(w->device), w->done, 0));
}

static void work_free(void *impl) {
  nccl_work *w = impl;
  if (cuda_use("collective", w->device) == MS_OK) cudaEventDestroy(w->done);
  ms_tensor_release(w->out);
  if (w->in != w->out) ms_tensor_release(w->in);
  free(w);
}

static const ms_work_ops nccl_work_ops = {work_test, work_complete, work_free, true};

/* Synchronizes this rank's GPU work, then every rank meets on MPI. */
static ms_status barrier(ms_pg *pg, ms_work **work) {
  nccl_group *g = pg->impl;
  if (cuda_check("barrier", cudaStreamSynchronize(cuda_raw_stream(g->device))) != MS_OK ||
      cuda_check("barrier", cudaStreamSynchronize(g->stream)) != MS_OK)
    return MS_ERR_RUNTIME;
  int rc = MPI_Barrier(g->mpi);
  if (rc != MPI_SUCCESS) return ms_error(MS_ERR_RUNTIME, "barrier: MPI_Barrier failed (%d)", rc);
  *work = work_new(NULL, NULL);
  return *work ? MS_OK : MS_ERR_MEMORY;
}

static ms_status nccl_issue(ms_pg *pg, const ms_coll *c, ms_work **work) {
  const char *fname = coll_name(c->kind);
  nccl_group *g = pg->impl;
  *work = NULL;
  if (cuda_use(fname, g->device) != MS_OK) return MS_ERR_RUNTIME;
  if (c->kind == MS_COLL_BARRIER) return barrier(pg, work);
  ms_tensor *ts[2] = {c->out, c->in};
  for (int i = 0; i < 2; i++)
    if (ms_tensor_device(ts[i]).type != MS_CUDA || ms_tensor_device(ts[i]).index != g->device)
      return ms_error(MS_ERR_ARG, "%s: the nccl group of this rank works on cuda:%d; got a tensor on %s%d",
                      fname, g->device, ms_tensor_device(ts[i]).type == MS_CUDA ? "cuda:" : "cpu (",
                      ms_tensor_device(ts[i]).type == MS_CUDA ? ms_tensor_device(ts[i]).index : 0);
  ncclDataType_t type;
  if (!nccl_type(c->out->dtype, &type))
    return ms_error(MS_ERR_ARG, "%s: dtype %s has no NCCL type", fname, ms_dtype_name(c->out->dtype));
  if (c->op == MS_DIST_AVG && !ms_dtype_is_floating(c->out->dtype))
    return ms_error(MS_ERR_ARG, "%s: op avg of %s tensors is not supported by the nccl backend (use sum)",
                    fname, ms_dtype_name(c->out->dtype));
  nccl_work *w = calloc(1, sizeof *w);
  if (!w) return ms_error(MS_ERR_MEMORY, "%s: out of memory", fname);
  w->device = g->device;
  cudaEvent_t ready;
  cudaStream_t compute = cuda_raw_stream(g->device);
  if (cuda_check(fname, cudaEventCreateWithFlags(&ready, cudaEventDisableTiming)) != MS_OK) return free(w), MS_ERR_RUNTIME;
  ms_status st = cuda_check(fname, cudaEventCreateWithFlags(&w->done, cudaEventDisableTiming));
  if (st == MS_OK) st = cuda_check(fname, cudaEventRecord(ready, compute));
  if (st == MS_OK) st = cuda_check(fname, cudaStreamWaitEvent(g->stream, ready, 0));
  cudaEventDestroy(ready); /* the wait is queued; the event may go */
  if (st != MS_OK) return free(w), st;
  void *out = ms_tensor_data(c->out);
  const void *in = ms_tensor_data(c->in);
  size_t count = (size_t)c->count;
  ncclResult_t r = ncclSuccess;
  switch (c->kind) {
  case MS_COLL_ALL_REDUCE: r = ncclAllReduce(in, out, count, type, nccl_op(c->op, c->out->dtype), g->comm, g->stream); break;
  case MS_COLL_ALL_GATHER: r = ncclAllGather(in, out, count, type, g->comm, g->stream); break;
  case MS_COLL_REDUCE_SCATTER:
    r = ncclReduceScatter(in, out, count, type, nccl_op(c->op, c->out->dtype), g->comm, g->stream);
    break;
  case MS_COLL_BROADCAST: r = ncclBroadcast(in, out, count, type, c->root, g->comm, g->stream); break;
  case MS_COLL_REDUCE: r = ncclReduce(in, out, count, type, nccl_op(c->op, c->out->dtype), c->root, g->comm, g->stream); break;
  default: r = ncclInvalidArgument; break;
  }
  if (r != ncclSuccess) {
    cudaEventDestroy(w->done), free(w);
    return nccl_fail(fname, r);
  }
  if ((st = cuda_check(fname, cudaEventRecord(w->done, g->stream))) != MS_OK) {
    cudaStreamSynchronize(g->stream); /* never free what the collective may still touch */
    cudaEventDestroy(w->done), free(w);
    return st;
  }
  ms_tensor_retain(c->out), w->out = c->out;
  if (c->in != c->out) ms_tensor_retain(c->in);
  w->in = c->in;
  *work = work_new(&nccl_work_ops, w);
  return *work ? MS_OK : MS_ERR_MEMORY;
}

static nccl_group *group_new(int device) {
  nccl_group *g = calloc(1, sizeof *g);
  if (!g) return ms_error(MS_ERR_MEMORY, "init_process_group: out of memory"), NULL;
  g->device = device;
  g->mpi = MPI_COMM_NULL;
  if (cuda_check("init_process_group", cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking)) != MS_OK)
    return free(g), NULL;
  return g;
}

static void group_free(nccl_group *g) {
  if (!g) return;
  if (cuda_use("destroy_process_group", g->device) == MS_OK) {
    cudaStreamSynchronize(g->stream);
    if (g->comm) ncclCommDestroy(g->comm);
    cudaStreamDestroy(g->stream);
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g->mpi != MPI_COMM_NULL && !finalized) MPI_Comm_free(&g->mpi);
  free(g);
}

static void nccl_destroy(ms_pg *pg) { group_free(pg->impl); }

/* Collective over the whole world: members get the split communicator, the others none. */
static ms_pg *nccl_new_group(ms_pg *world, const int *ranks, int n) {
  nccl_group *w = world->impl;
  int me = -1;
  for (int i = 0; i < n; i++)
    if (ranks[i] == world->rank) me = i;
  nccl_group *g = group_new(w->device);
  if (!g) return NULL;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommSplit(w->comm, me >= 0 ? 0 : NCCL_SPLIT_NOCOLOR, me >= 0 ? me : 0, &comm, NULL);
  int rc = MPI_Comm_split(w->mpi, me >= 0 ? 0 : MPI_UNDEFINED, me >= 0 ? me : 0, &g->mpi);
  if (r != ncclSuccess || rc != MPI_SUCCESS) {
    group_free(g);
    if (r != ncclSuccess) nccl_fail("new_group", r);
    else ms_error(MS_ERR_RUNTIME, "new_group: MPI_Comm_split failed (%d)", rc);
    return NULL;
  }
  g->comm = comm;
  ms_pg *pg = pg_alloc(&nccl_ops, me, n, ranks, g);
  if (!pg) group_free(g);
  return pg;
}

static const struct ms_pg_ops nccl_ops = {.name = "nccl", .issue = nccl_issue, .new_group = nccl_new_group,
                                          .destroy = nccl_destroy};

ms_status pg_nccl_init(ms_pg **world) {
  int ndev = ms_cuda_device_count();
  if (ndev == 0)
    return ms_error(MS_ERR_RUNTIME, "init_process_group: the nccl backend needs a CUDA device: %s",
                    ms_cuda_unavailable_reason());
  ms_pg *mpi_world = NULL; /* starts MPI (and its clean finalization) as the mpi backend does */
  if (pg_mpi_init(&mpi_world) != MS_OK) return MS_ERR_RUNTIME;
  ms_pg_release(mpi_world);
  int device = ms_dist_local_rank() % ndev;
  if (ms_cuda_set_device(device) != MS_OK) return MS_ERR_RUNTIME;
  nccl_group *g = group_new(device);
  if (!g) return MS_ERR_RUNTIME;
  int rank = 0, size = 1, rc = MPI_Comm_dup(MPI_COMM_WORLD, &g->mpi);
  if (rc == MPI_SUCCESS) MPI_Comm_rank(g->mpi, &rank), MPI_Comm_size(g->mpi, &size);
  /* every rank joins the broadcast, also when rank 0 could not make the id: the flag then says
   * so and all ranks fail with a message instead of waiting for rank 0 in ncclCommInitRank */
  struct { int ok; ncclUniqueId id; } shared;
  memset(&shared, 0, sizeof shared);
  ncclResult_t r = ncclSuccess;
  if (rc == MPI_SUCCESS && rank == 0) shared.ok = (r = ncclGetUniqueId(&shared.id)) == ncclSuccess;
  if (rc == MPI_SUCCESS) rc = MPI_Bcast(&shared, (int)sizeof shared, MPI_BYTE, 0, g->mpi);
  if (rc != MPI_SUCCESS) {
    group_free(g);
    return ms_error(MS_ERR_RUNTIME, "init_process_group: MPI failed while sharing the NCCL id (%d)", rc);
  }
  if (!shared.ok) {
    group_free(g);
    return rank == 0 ? nccl_fail("init_process_group", r)
                     : ms_error(MS_ERR_RUNTIME, "init_process_group: rank 0 could not create the NCCL id");
  }
  r = ncclCommInitRank(&g->comm, size, shared.id, rank);
  if (r != ncclSuccess) {
    group_free(g);
    return nccl_fail("init_process_group", r);
  }
  *world = pg_alloc(&nccl_ops, rank, size, NULL, g);
  if (!*world) group_free(g);
  return *world ? MS_OK : MS_ERR_MEMORY;
}

/* "auto" picks nccl only where every rank can drive a GPU of its own: CUDA usable and no more
 * ranks on its host than GPUs. Ranks must agree (or their groups would differ), so the answer
 * is the minimum over the world; this is collective and starts MPI. */
ms_status pg_nccl_usable(bool *yes) {
  ms_pg *mpi_world = NULL;
  if (pg_mpi_init(&mpi_world) != MS_OK) return MS_ERR_RUNTIME;
  ms_pg_release(mpi_world);
  const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  int ndev = ms_cuda_device_count(), local = ls ? atoi(ls) : 1;
  int mine = ndev > 0 && local <= ndev, all = 0;
  int rc = MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS)
    return ms_error(MS_ERR_RUNTIME, "init_process_group: backend \"auto\": MPI_Allreduce failed (%d)", rc);
  *yes = all != 0;
  return MS_OK;
}
