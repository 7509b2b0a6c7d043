/* pg_internal.h (private to engine/src/dist): what a backend implements. pg.c checks every
 * argument and then hands a backend one normalised collective (ms_coll); the backend issues it
 * and returns a work whose progress it reports through ms_work_ops. */
#ifndef MS_DIST_PG_INTERNAL_H
#define MS_DIST_PG_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "moonshard/dist.h"

typedef enum ms_coll_kind {
  MS_COLL_ALL_REDUCE,
  MS_COLL_ALL_GATHER,
  MS_COLL_REDUCE_SCATTER,
  MS_COLL_BROADCAST,
  MS_COLL_REDUCE,
  MS_COLL_BARRIER,
} ms_coll_kind;

const char *coll_name(ms_coll_kind k);

/* One checked collective. For the single-tensor ops in == out. count is the elements each rank
 * contributes (all_gather: numel(in); reduce_scatter: numel(out)). root is a group rank. */
typedef struct ms_coll {
  ms_coll_kind kind;
  ms_tensor *out, *in;
  ms_dist_op op;
  int root;
  int64_t count;
} ms_coll;

typedef struct ms_work_ops {
  /* 1 done, 0 still running, -1 failed (error set). Never blocks. */
  int (*test)(void *impl);
  /* After test said done: finishing touches (averaging, converting back). */
  ms_status (*complete)(void *impl);
  void (*free)(void *impl);
  /* complete() alone makes later device work wait for the collective (nccl: the compute stream
   * waits for its event): a wait then queues that and returns, never polling test() from the
   * host, so a step's collectives leave the host free to run ahead (and can be graph-captured,
   * where test()'s event query is not allowed). Hangs then surface at the next host wait. */
  bool stream_ordered;
} ms_work_ops;

struct ms_pg_ops {
  const char *name;
  ms_status (*issue)(ms_pg *pg, const ms_coll *c, ms_work **work);
  /* MS_DIST_DEBUG: every member checks that all agree on (kind, dtype, count, op, root, seq,
   * unit, phase). */
  ms_status (*check)(ms_pg *pg, const ms_coll *c, uint64_t seq);
  /* A subgroup of world (sorted world ranks); collective over the whole world. */
  ms_pg *(*new_group)(ms_pg *world, const int *ranks, int n);
  void (*destroy)(ms_pg *pg); /* frees the backend part (impl) */
  /* Optional, for the watchdog (DESIGN: a hang becomes a message). Called every few ms while a
   * wait on call seq of pg lasts `waited` seconds: MS_OK to go on waiting, or an error when a
   * member can never arrive (it left the job). */
  ms_status (*watch)(ms_pg *pg, uint64_t seq, ms_coll_kind kind, double waited);
  /* Optional: at the timeout, writes which members have not arrived at call seq, and where the
   * others are, into buf. */
  void (*missing)(ms_pg *pg, uint64_t seq, char *buf, size_t len);
};

struct ms_pg {
  const struct ms_pg_ops *ops;
  atomic_int refcount;
  int rank, size;   /* rank -1: this process is not a member */
  int *global_ranks; /* size entries */
  void *impl;
  uint64_t seq;     /* collectives issued on this group, for MS_DIST_DEBUG */
  bool alive;       /* false once ms_dist_destroy ran */
  ms_pg *next;      /* the list of live groups */
};

/* A group with the common fields set (refcount 1, alive); global_ranks copied (NULL: 0..size-1). */
ms_pg *pg_alloc(const struct ms_pg_ops *ops, int rank, int size, const int *global_ranks, void *impl);
/* A work from a backend's pending impl, or an already finished one (ops NULL). */
ms_work *work_new(const ms_work_ops *ops, void *impl);
/* Names the collective a work belongs to, for the timeout message. */
void work_label(ms_work *w, const char *name, uint64_t seq);
/* Lets the watchdog ask pg (retained by the work) about the other members while w waits. */
void work_watch(ms_work *w, ms_pg *pg, ms_coll_kind kind);
/* The origin the calling thread's collectives carry now (ms_dist_set_origin; NULL: none). */
void dist_origin(const char **unit, const char **phase);
/* Whether collectives exchange their signatures alongside (the default; MS_DIST_DEBUG=1 checks
 * before issuing instead, MS_DIST_DEBUG=off checks nothing). */
bool dist_order_check(void);
/* Seconds every wait may take before it fails (the watchdog's timeout). */
double dist_timeout(void);
/* Sleeps briefly, growing with the number of polls so far (keeps latency low at first). */
void dist_backoff(int polls);
double dist_now(void);

#ifdef MS_HAVE_MPI
ms_status pg_mpi_init(ms_pg **world);
void pg_mpi_leaving(void); /* ms_dist_leaving for the mpi backend */
#endif
#if defined(MS_HAVE_MPI) && defined(MS_HAVE_NCCL)
ms_status pg_nccl_init(ms_pg **world); /* pg_nccl.c: MPI carries the NCCL id */
/* Whether every rank of the MPI world has a GPU of its own (collective; starts MPI). */
ms_status pg_nccl_usable(bool *yes);
#endif

#endif
