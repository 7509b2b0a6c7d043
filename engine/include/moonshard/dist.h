/* dist.h: process groups and collectives on tensors (DESIGN.md "Distributed"). One interface,
 * ms_pg, over backends: "self" (a world of one, always built) and "mpi" (Open MPI, CPU tensors,
 * built when CMake finds MPI). Ranks are 0-based process ids, as in PyTorch. Every tensor must
 * be contiguous; counts are elements of the tensor's dtype, checked to match across arguments. */
#ifndef MOONSHARD_DIST_H
#define MOONSHARD_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include "moonshard/error.h"
#include "moonshard/export.h"
#include "moonshard/tensor.h"

typedef enum ms_dist_op {
  MS_DIST_SUM = 0,
  MS_DIST_AVG, /* sum, then divide by the group size (integers: truncating division) */
  MS_DIST_MAX,
  MS_DIST_MIN,
  MS_DIST_PRODUCT,
  MS_DIST_OP_COUNT
} ms_dist_op;

MS_API const char *ms_dist_op_name(ms_dist_op op); /* "sum", ... */

typedef struct ms_pg ms_pg;     /* a process group (refcounted) */
typedef struct ms_work ms_work; /* an issued collective: wait for it, then free it */

/* ---- the world ------------------------------------------------------------------------------ */
/* backend: "mpi", "self", "auto" (mpi when launched by mpirun, else self) or "nccl" (refused:
 * not built). timeout_s > 0 bounds every wait (the watchdog: an error naming the ranks that have
 * not arrived, never a hang); 0 = $MS_DIST_TIMEOUT, else 300 s. A wait also fails, naming the
 * rank, when a member of its group left the job (mpi). A second init without destroy is an error.
 * Checks that every rank makes the same call (kind, dtype, count, op, root, sequence number,
 * origin: ms_dist_set_origin), mpi backend, read from MS_DIST_DEBUG here: unset or "0" (the
 * default), each call's signature is exchanged alongside it and a mismatch fails the call on
 * every rank when it completes (the job should end: the mismatched data may have moved); "1"
 * (any other value), checked before each call, blocking, so that the ranks raise together and
 * stay usable; "off", no check. */
MS_API ms_status ms_dist_init(const char *backend, double timeout_s);
MS_API bool ms_dist_is_initialized(void);
/* This process ends normally: tells the other ranks, so that one waiting for it in a collective
 * fails at once naming this rank instead of at the timeout. Called by the exit hook and, before
 * the Lua state closes (its finalizers may wait on collectives), by the moonshard executable. */
MS_API void ms_dist_leaving(void);
/* The default group (borrowed), or NULL with an error when not initialized. */
MS_API ms_pg *ms_pg_world(void);
/* Destroys the world and every group made from it; groups still referenced become unusable.
 * MPI itself stays up (it cannot be restarted) and is finalized at a clean process exit. */
MS_API ms_status ms_dist_destroy(void);
MS_API const char *ms_dist_backend(void); /* "mpi", "self", or NULL when not initialized */
/* The rank on this node, from the launcher (OMPI_COMM_WORLD_LOCAL_RANK, else LOCAL_RANK), else 0. */
MS_API int ms_dist_local_rank(void);

/* ---- groups --------------------------------------------------------------------------------- */
/* Adds a reference to pg (released with ms_pg_release). */
MS_API void ms_pg_retain(ms_pg *pg);
MS_API void ms_pg_release(ms_pg *pg); /* NULL is fine */
/* This process's rank in the group, or -1 when it is not a member. */
MS_API int ms_pg_rank(const ms_pg *pg);
MS_API int ms_pg_size(const ms_pg *pg);
/* The global (world) rank of group rank r. */
MS_API int ms_pg_global_rank(const ms_pg *pg, int r);
/* A group of the given world ranks (any order; group ranks follow sorted order, as PyTorch).
 * Every world rank must call it with the same list. Non-members get a group whose rank is -1;
 * collectives on it do nothing (PyTorch's behaviour). New reference. */
MS_API ms_pg *ms_pg_new_group(const int *ranks, int n);

/* ---- collectives ---------------------------------------------------------------------------- */
/* Tags the collectives issued from now until the next call with their origin: a unit (a stable
 * name, e.g. an FSDP unit's module path) and a phase ("forward all-gather"). The check of
 * ms_dist_init compares them across ranks with each call's kind, dtype and count (the
 * execution order), and a mismatch names both ranks' units and phases. NULL clears. The strings are borrowed: keep
 * them alive until the next call. One per thread (the thread issuing collectives). */
MS_API void ms_dist_set_origin(const char *unit, const char *phase);
/* Each runs to completion when work is NULL; otherwise it is issued and *work receives a
 * handle (the tensors are kept alive by it until it is freed). */
MS_API ms_status ms_pg_all_reduce(ms_pg *pg, ms_tensor *t, ms_dist_op op, ms_work **work);
/* out has size x numel(in) elements: rank r's in lands at out[r*numel(in) ...]. */
MS_API ms_status ms_pg_all_gather(ms_pg *pg, ms_tensor *out, ms_tensor *in, ms_work **work);
/* in has size x numel(out) elements; out receives the reduction of slice `rank` of every in. */
MS_API ms_status ms_pg_reduce_scatter(ms_pg *pg, ms_tensor *out, ms_tensor *in, ms_dist_op op,
                                      ms_work **work);
/* src and dst are world ranks (as PyTorch), and must belong to the group. */
MS_API ms_status ms_pg_broadcast(ms_pg *pg, ms_tensor *t, int src, ms_work **work);
MS_API ms_status ms_pg_reduce(ms_pg *pg, ms_tensor *t, int dst, ms_dist_op op, ms_work **work);
MS_API ms_status ms_pg_barrier(ms_pg *pg, ms_work **work);

/* ---- work handles --------------------------------------------------------------------------- */
/* Waits (bounded by the init timeout) and finishes the op (averaging, dtype conversion back).
 * Waiting again returns the first result. */
MS_API ms_status ms_work_wait(ms_work *w);
MS_API bool ms_work_is_completed(ms_work *w); /* true once done (tests without blocking) */
MS_API void ms_work_free(ms_work *w);         /* waits first if still pending; NULL is fine */

#endif
