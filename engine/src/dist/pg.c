/* pg.c: the process-group interface: the world, groups, argument checks shared by every
 * backend, MS_DIST_DEBUG, waiting on work with a timeout, and the "self" backend (a world of
 * one, where every collective is a copy or nothing). */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/pg_internal.h"
#include "moonshard/cuda.h"

static ms_pg *g_world;      /* owned reference while initialized */
static ms_pg *g_live;       /* every group not yet released, to destroy with the world */
static const char *g_backend;
/* The watchdog: a wait longer than this fails, naming the ranks that have not arrived. Well under
 * PyTorch's 1800 s: a stuck job should say so while someone still watches it. */
#define MS_DIST_DEFAULT_TIMEOUT 300.0
static double g_timeout = MS_DIST_DEFAULT_TIMEOUT;
static bool g_debug, g_order_check;
static _Thread_local const char *g_origin_unit, *g_origin_phase; /* ms_dist_set_origin */

const char *ms_dist_op_name(ms_dist_op op) {
  static const char *const names[] = {"sum", "avg", "max", "min", "product"};
  return op >= 0 && op < MS_DIST_OP_COUNT ? names[op] : "?";
}

const char *coll_name(ms_coll_kind k) {
  static const char *const names[] = {"all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
                                      "broadcast", "reduce", "barrier"};
  return k >= 0 && k <= MS_COLL_BARRIER ? names[k] : "?";
}

double dist_timeout(void) { return g_timeout; }

double dist_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void dist_backoff(int polls) {
  if (polls < 1000) return; /* spin first: most collectives finish within microseconds */
  struct timespec ts = {0, polls < 10000 ? 20000 : 200000};
  nanosleep(&ts, NULL);
}

/* ---- groups -------------------------------------------------------------------------------- */

ms_pg *pg_alloc(const struct ms_pg_ops *ops, int rank, int size, const int *global_ranks, void *impl) {
  ms_pg *pg = calloc(1, sizeof *pg);
  int *gr = malloc(sizeof *gr * (size_t)(size > 0 ? size : 1));
  if (!pg || !gr) {
    free(pg), free(gr);
    ms_error(MS_ERR_MEMORY, "new_group: out of memory");
    return NULL;
  }
  for (int i = 0; i < size; i++) gr[i] = global_ranks ? global_ranks[i] : i;
  pg->ops = ops, pg->rank = rank, pg->size = size, pg->global_ranks = gr, pg->impl = impl;
  atomic_init(&pg->refcount, 1);
  pg->alive = true;
  pg->next = g_live, g_live = pg;
  return pg;
}

/* Frees the backend part once: at destroy of the world or at the last release. */
static void pg_kill(ms_pg *pg) {
  if (!pg->alive) return;
  pg->alive = false;
  if (pg->ops->destroy) pg->ops->destroy(pg);
  pg->impl = NULL;
}

void ms_pg_retain(ms_pg *pg) {
  if (pg) atomic_fetch_add(&pg->refcount, 1);
}

void ms_pg_release(ms_pg *pg) {
  if (!pg || atomic_fetch_sub(&pg->refcount, 1) != 1) return;
  pg_kill(pg);
  for (ms_pg **p = &g_live; *p; p = &(*p)->next)
    if (*p == pg) {
      *p = pg->next;
      break;
    }
  free(pg->global_ranks);
  free(pg);
}

int ms_pg_rank(const ms_pg *pg) { return pg->rank; }
int ms_pg_size(const ms_pg *pg) { return pg->size; }
int ms_pg_global_rank(const ms_pg *pg, int r) { return r >= 0 && r < pg->size ? pg->global_ranks[r] : -1; }

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

ms_pg *ms_pg_new_group(const int *ranks, int n) {
  ms_pg *world = ms_pg_world();
  if (!world) return NULL;
  int *sorted = malloc(sizeof *sorted * (size_t)(n > 0 ? n : 1));
  if (!sorted) return ms_error(MS_ERR_MEMORY, "new_group: out of memory"), NULL;
  memcpy(sorted, ranks, sizeof *sorted * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_int);
  for (int i = 0; i < n; i++) {
    if (sorted[i] < 0 || sorted[i] >= world->size) {
      ms_error(MS_ERR_ARG, "new_group: rank %d is not in the world (ranks are 0..%d)", sorted[i], world->size - 1);
      return free(sorted), NULL;
    }
    if (i && sorted[i] == sorted[i - 1]) {
      ms_error(MS_ERR_ARG, "new_group: rank %d is listed twice", sorted[i]);
      return free(sorted), NULL;
    }
  }
  ms_pg *pg = world->ops->new_group(world, sorted, n);
  free(sorted);
  return pg;
}

/* ---- the world ----------------------------------------------------------------------------- */

bool ms_dist_is_initialized(void) { return g_world != NULL; }
const char *ms_dist_backend(void) { return g_world ? g_backend : NULL; }

ms_pg *ms_pg_world(void) {
  if (!g_world)
    ms_error(MS_ERR_RUNTIME, "the default process group is not initialized: call "
                             "ms.distributed.init_process_group first");
  return g_world;
}

int ms_dist_local_rank(void) {
  const char *s = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (!s) s = getenv("LOCAL_RANK"); /* torchrun's name, for scripts launched some other way */
  return s ? atoi(s) : 0;
}

static const struct ms_pg_ops self_ops;

/* "auto": a world of one without a launcher ("self" moves CPU and CUDA tensors alike); under
 * mpirun nccl where every rank has a GPU of its own (DESIGN.md "Distributed"), else mpi. */
static ms_status auto_backend(const char **backend) {
  *backend = getenv("OMPI_COMM_WORLD_SIZE") ? "mpi" : "self";
#if defined(MS_HAVE_MPI) && defined(MS_HAVE_NCCL)
  bool nccl = false; /* every rank asks, with a GPU or not: the answer is collective */
  if (strcmp(*backend, "mpi") == 0 && pg_nccl_usable(&nccl) != MS_OK) return MS_ERR_RUNTIME;
  if (nccl) *backend = "nccl";
#endif
  return MS_OK;
}

static ms_status init_backend(const char *backend) {
  if (strcmp(backend, "auto") == 0 && auto_backend(&backend) != MS_OK) return MS_ERR_RUNTIME;
  if (strcmp(backend, "self") == 0) {
    g_world = pg_alloc(&self_ops, 0, 1, NULL, NULL);
    g_backend = "self";
    return g_world ? MS_OK : MS_ERR_MEMORY;
  }
  if (strcmp(backend, "mpi") == 0) {
#ifdef MS_HAVE_MPI
    g_backend = "mpi";
    return pg_mpi_init(&g_world);
#else
    return ms_error(MS_ERR_RUNTIME, "init_process_group: the mpi backend is not built (CMake found no MPI)");
#endif
  }
  if (strcmp(backend, "nccl") == 0) {
#if defined(MS_HAVE_MPI) && defined(MS_HAVE_NCCL)
    g_backend = "nccl";
    return pg_nccl_init(&g_world);
#else
    return ms_error(MS_ERR_RUNTIME, "init_process_group: the nccl backend is not built (it needs CUDA, "
                                    "NCCL and MPI; this build lacks %s)",
#ifndef MS_HAVE_NCCL
                    "NCCL or CUDA"
#else
                    "MPI"
#endif
    );
#endif
  }
  return ms_error(MS_ERR_ARG, "init_process_group: unknown backend '%s' (expected \"mpi\", \"self\", "
                              "\"auto\" or \"nccl\")", backend);
}

/* The timeout when init_process_group names none: $MS_DIST_TIMEOUT (seconds, for scripts that
 * cannot be edited), else the default. */
static ms_status default_timeout(double *timeout_s) {
  const char *env = getenv("MS_DIST_TIMEOUT");
  *timeout_s = MS_DIST_DEFAULT_TIMEOUT;
  if (!env || !*env) return MS_OK;
  char *end;
  double v = strtod(env, &end);
  if (*end != '\0' || !(v > 0) || v > 1e9)
    return ms_error(MS_ERR_ARG, "init_process_group: MS_DIST_TIMEOUT must be a number of seconds > 0, got '%s'", env);
  *timeout_s = v;
  return MS_OK;
}

ms_status ms_dist_init(const char *backend, double timeout_s) {
  if (g_world)
    return ms_error(MS_ERR_RUNTIME, "init_process_group: already initialized (backend %s); call "
                                    "destroy_process_group first", g_backend);
  if (!(timeout_s >= 0) || timeout_s > 1e9)
    return ms_error(MS_ERR_ARG, "init_process_group: timeout must be a number of seconds in [0, 1e9], got %g",
                    timeout_s);
  if (timeout_s == 0 && default_timeout(&timeout_s) != MS_OK) return MS_ERR_ARG;
  g_timeout = timeout_s;
  /* MS_DIST_DEBUG: unset, "" or "0": the default, each call's signature checked alongside it
   * (cheap, see pg_mpi.c); "off": no check; anything else: checked before each call (blocking) */
  const char *dbg = getenv("MS_DIST_DEBUG");
  bool off = dbg && strcmp(dbg, "off") == 0;
  g_debug = dbg && *dbg && strcmp(dbg, "0") != 0 && !off;
  g_order_check = !g_debug && !off;
  return init_backend(backend);
}

ms_status ms_dist_destroy(void) {
  if (!g_world) return ms_error(MS_ERR_RUNTIME, "destroy_process_group: not initialized");
  for (ms_pg *pg = g_live; pg; pg = pg->next) pg_kill(pg);
  ms_pg_release(g_world);
  g_world = NULL;
  return MS_OK;
}

void ms_dist_leaving(void) {
#ifdef MS_HAVE_MPI
  pg_mpi_leaving(); /* whatever the backend: nccl's ranks talk through MPI too */
#endif
}

/* ---- work ---------------------------------------------------------------------------------- */

struct ms_work {
  const ms_work_ops *ops; /* NULL once finished */
  void *impl;
  ms_status status;
  char *msg;        /* the error of a failed wait, repeated by later waits */
  const char *name; /* the collective, for the timeout message */
  uint64_t seq;
  ms_pg *pg;        /* retained: asked about the other members while waiting (NULL: not asked) */
  ms_coll_kind kind;
};

ms_work *work_new(const ms_work_ops *ops, void *impl) {
  ms_work *w = calloc(1, sizeof *w);
  if (!w) {
    if (ops && ops->free) ops->free(impl);
    ms_error(MS_ERR_MEMORY, "collective: out of memory");
    return NULL;
  }
  w->ops = ops, w->impl = impl;
  return w;
}

void work_label(ms_work *w, const char *name, uint64_t seq) { w->name = name, w->seq = seq; }

void work_watch(ms_work *w, ms_pg *pg, ms_coll_kind kind) {
  if (!pg->ops->watch) return;
  ms_pg_retain(pg);
  w->pg = pg, w->kind = kind;
}

/* The watchdog's verdict: the call, how long it waited, and who has not arrived. */
static ms_status timed_out(const ms_work *w) {
  char missing[1024] = "";
  if (w->pg && w->pg->ops->missing) w->pg->ops->missing(w->pg, w->seq, missing, sizeof missing);
  return ms_error(MS_ERR_RUNTIME, "%s: watchdog: call #%llu on %s waited %g s%s%s (the limit is "
                  "init_process_group's timeout option, or $MS_DIST_TIMEOUT; does a rank skip a collective? "
                  "MS_DIST_DEBUG=1 checks every call)", w->name ? w->name : "collective", (unsigned long long)w->seq,
                  w->pg && w->pg == g_world ? "the world" : "its group", g_timeout, *missing ? ": " : "", missing);
}

static void work_finish(ms_work *w, ms_status st) {
  w->status = st;
  if (st != MS_OK) w->msg = strdup(ms_error_last());
  if (w->ops->free) w->ops->free(w->impl);
  w->ops = NULL, w->impl = NULL;
}

/* Waits for w, bounded by the watchdog's timeout, and fails early when the group says a member
 * left the job. On either failure the request stays pending (MPI cannot cancel a collective): the
 * caller must end the process, which a Lua error does on a rank (main.c). */
ms_status ms_work_wait(ms_work *w) {
  if (w->ops && w->ops->stream_ordered) work_finish(w, w->ops->complete(w->impl));
  double start = dist_now();
  for (int polls = 0; w->ops; polls++) {
    int r = w->ops->test(w->impl);
    if (r != 0) {
      work_finish(w, r < 0 ? MS_ERR_RUNTIME : w->ops->complete ? w->ops->complete(w->impl) : MS_OK);
      break;
    }
    double waited = dist_now() - start;
    if (w->pg && w->pg->alive && w->pg->ops->watch(w->pg, w->seq, w->kind, waited) != MS_OK) return MS_ERR_RUNTIME;
    if (waited > g_timeout) return timed_out(w);
    dist_backoff(polls);
  }
  if (w->status != MS_OK) return ms_error(w->status, "%s", w->msg ? w->msg : "collective failed");
  return MS_OK;
}

bool ms_work_is_completed(ms_work *w) {
  if (w->ops && w->ops->test(w->impl) != 0) ms_work_wait(w);
  return w->ops == NULL;
}

void ms_work_free(ms_work *w) {
  if (!w) return;
  if (w->ops && ms_work_wait(w) != MS_OK && w->ops) return; /* timed out: leak, never free a busy buffer */
  ms_pg_release(w->pg);
  free(w->msg);
  free(w);
}

/* ---- checks shared by every backend -------------------------------------------------------- */

static ms_status check_tensor(const char *fname, const char *what, const ms_tensor *t) {
  if (!t) return ms_error(MS_ERR_ARG, "%s: %s is missing", fname, what);
  if (!ms_tensor_is_contiguous(t)) return ms_error(MS_ERR_ARG, "%s: %s must be contiguous", fname, what);
  if (ms_tensor_numel(t) > INT_MAX)
    return ms_error(MS_ERR_ARG, "%s: %s has %lld elements, more than one collective moves (%d)",
                    fname, what, (long long)ms_tensor_numel(t), INT_MAX);
  /* nccl moves CUDA tensors, mpi CPU ones, self (one rank: copies at most) either */
  const char *backend = ms_dist_backend();
  bool nccl = backend && strcmp(backend, "nccl") == 0, cuda = ms_tensor_device(t).type == MS_CUDA;
  bool self = backend && strcmp(backend, "self") == 0;
  if (nccl != cuda && !self)
    return ms_error(MS_ERR_ARG, "%s: %s is a %s tensor but the %s backend works on %s tensors", fname, what,
                    cuda ? "CUDA" : "CPU", backend ? backend : "(none)", nccl ? "CUDA" : "CPU");
  return ms_tensor_check_data_any(fname, t);
}

static ms_status check_op(const char *fname, ms_dist_op op, ms_dtype dt) {
  if (op < 0 || op >= MS_DIST_OP_COUNT) return ms_error(MS_ERR_ARG, "%s: unknown reduce op %d", fname, (int)op);
  if (op == MS_DIST_AVG && dt == MS_BOOL)
    return ms_error(MS_ERR_ARG, "%s: op avg is not defined for bool tensors", fname);
  return MS_OK;
}

static ms_status check_pair(const char *fname, const ms_tensor *out, const ms_tensor *in) {
  ms_status st = check_tensor(fname, "output", out);
  if (st == MS_OK) st = check_tensor(fname, "input", in);
  if (st == MS_OK && out->dtype != in->dtype)
    st = ms_error(MS_ERR_ARG, "%s: output is %s but input is %s (they must match)", fname,
                  ms_dtype_name(out->dtype), ms_dtype_name(in->dtype));
  if (st == MS_OK) st = ms_check_same_device(fname, 2, (ms_tensor *[]){(ms_tensor *)out, (ms_tensor *)in});
  return st;
}

/* A world rank turned into a rank of pg. */
static ms_status group_root(const char *fname, const char *what, ms_pg *pg, int world_rank, int *root) {
  for (int i = 0; i < pg->size; i++)
    if (pg->global_ranks[i] == world_rank) return *root = i, MS_OK;
  return ms_error(MS_ERR_ARG, "%s: %s %d is not a rank of the group", fname, what, world_rank);
}

void ms_dist_set_origin(const char *unit, const char *phase) { g_origin_unit = unit, g_origin_phase = phase; }
void dist_origin(const char **unit, const char **phase) { *unit = g_origin_unit, *phase = g_origin_phase; }
bool dist_order_check(void) { return g_order_check; }

/* Issues c on pg after the debug check; runs it to completion when work is NULL. */
static ms_status run(ms_pg *pg, const ms_coll *c, ms_work **work) {
  if (work) *work = NULL;
  if (!pg) return MS_ERR_RUNTIME; /* ms_pg_world set the error */
  if (!pg->alive) return ms_error(MS_ERR_RUNTIME, "%s: the process group was destroyed", coll_name(c->kind));
  if (pg->rank < 0) { /* not a member: nothing to do, as PyTorch */
    if (work && !(*work = work_new(NULL, NULL))) return MS_ERR_MEMORY;
    return MS_OK;
  }
  uint64_t seq = pg->seq++;
  if (g_debug && pg->ops->check) {
    ms_status st = pg->ops->check(pg, c, seq);
    if (st != MS_OK) return st;
  }
  ms_work *w = NULL;
  ms_status st = pg->ops->issue(pg, c, &w);
  if (st != MS_OK) return st;
  work_label(w, coll_name(c->kind), seq);
  work_watch(w, pg, c->kind);
  if (work) return *work = w, MS_OK;
  st = ms_work_wait(w);
  ms_work_free(w);
  return st;
}

static ms_pg *or_world(ms_pg *pg) { return pg ? pg : ms_pg_world(); }

ms_status ms_pg_all_reduce(ms_pg *pg, ms_tensor *t, ms_dist_op op, ms_work **work) {
  ms_status st = check_tensor("all_reduce", "tensor", t);
  if (st == MS_OK) st = check_op("all_reduce", op, t->dtype);
  if (st != MS_OK) return st;
  ms_coll c = {MS_COLL_ALL_REDUCE, t, t, op, 0, ms_tensor_numel(t)};
  return run(or_world(pg), &c, work);
}

ms_status ms_pg_all_gather(ms_pg *pg, ms_tensor *out, ms_tensor *in, ms_work **work) {
  const char *f = "all_gather_into_tensor";
  ms_status st = check_pair(f, out, in);
  if (st != MS_OK || !(pg = or_world(pg))) return st != MS_OK ? st : MS_ERR_RUNTIME;
  int64_t n = ms_tensor_numel(in), m = ms_tensor_numel(out), size = pg->rank < 0 ? 0 : pg->size;
  if (pg->rank >= 0 && m != size * n)
    return ms_error(MS_ERR_ARG, "%s: output has %lld elements, expected world_size (%lld) x input (%lld) = %lld",
                    f, (long long)m, (long long)size, (long long)n, (long long)(size * n));
  ms_coll c = {MS_COLL_ALL_GATHER, out, in, MS_DIST_SUM, 0, n};
  return run(pg, &c, work);
}

ms_status ms_pg_reduce_scatter(ms_pg *pg, ms_tensor *out, ms_tensor *in, ms_dist_op op, ms_work **work) {
  const char *f = "reduce_scatter_tensor";
  ms_status st = check_pair(f, out, in);
  if (st == MS_OK) st = check_op(f, op, in->dtype);
  if (st != MS_OK || !(pg = or_world(pg))) return st != MS_OK ? st : MS_ERR_RUNTIME;
  int64_t n = ms_tensor_numel(out), m = ms_tensor_numel(in), size = pg->rank < 0 ? 0 : pg->size;
  if (pg->rank >= 0 && m != size * n)
    return ms_error(MS_ERR_ARG, "%s: input has %lld elements, expected world_size (%lld) x output (%lld) = %lld",
                    f, (long long)m, (long long)size, (long long)n, (long long)(size * n));
  ms_coll c = {MS_COLL_REDUCE_SCATTER, out, in, op, 0, n};
  return run(pg, &c, work);
}

ms_status ms_pg_broadcast(ms_pg *pg, ms_tensor *t, int src, ms_work **work) {
  ms_status st = check_tensor("broadcast", "tensor", t);
  if (st != MS_OK || !(pg = or_world(pg))) return st != MS_OK ? st : MS_ERR_RUNTIME;
  ms_coll c = {MS_COLL_BROADCAST, t, t, MS_DIST_SUM, 0, ms_tensor_numel(t)};
  if (pg->rank >= 0 && (st = group_root("broadcast", "src", pg, src, &c.root)) != MS_OK) return st;
  return run(pg, &c, work);
}

ms_status ms_pg_reduce(ms_pg *pg, ms_tensor *t, int dst, ms_dist_op op, ms_work **work) {
  ms_status st = check_tensor("reduce", "tensor", t);
  if (st == MS_OK) st = check_op("reduce", op, t->dtype);
  if (st != MS_OK || !(pg = or_world(pg))) return st != MS_OK ? st : MS_ERR_RUNTIME;
  ms_coll c = {MS_COLL_REDUCE, t, t, op, 0, ms_tensor_numel(t)};
  if (pg->rank >= 0 && (st = group_root("reduce", "dst", pg, dst, &c.root)) != MS_OK) return st;
  return run(pg, &c, work);
}

ms_status ms_pg_barrier(ms_pg *pg, ms_work **work) {
  ms_coll c = {MS_COLL_BARRIER, NULL, NULL, MS_DIST_SUM, 0, 0};
  return run(or_world(pg), &c, work);
}

/* ---- the self backend: one rank, so a collective is at most a copy ------------------------- */

static ms_status self_issue(ms_pg *pg, const ms_coll *c, ms_work **work) {
  (void)pg;
  if ((c->kind == MS_COLL_ALL_GATHER || c->kind == MS_COLL_REDUCE_SCATTER) && c->count > 0) {
    size_t nbytes = (size_t)c->count * ms_dtype_size(c->in->dtype);
    ms_device d = ms_tensor_device(c->out);
    if (d.type == MS_CPU) {
      memmove(ms_tensor_data(c->out), ms_tensor_data(c->in), nbytes);
    } else {
      ms_status st = ms_cuda_memcpy(ms_tensor_data(c->out), d.index, ms_tensor_data(c->in), d.index, nbytes, MS_CUDA_D2D);
      if (st != MS_OK) return st;
    }
  }
  if (c->kind != MS_COLL_BARRIER && c->kind != MS_COLL_BROADCAST) ms_tensor_bump_version(c->out);
  *work = work_new(NULL, NULL);
  return *work ? MS_OK : MS_ERR_MEMORY;
}

static ms_pg *self_new_group(ms_pg *world, const int *ranks, int n) {
  (void)world, (void)ranks;
  return pg_alloc(&self_ops, n == 1 ? 0 : -1, n, ranks, NULL);
}

static const struct ms_pg_ops self_ops = {.name = "self", .issue = self_issue, .new_group = self_new_group};
