/* threadpool.c: the one process-wide pool of persistent worker threads behind ms_k_parallel_for
 * and ms_k_parallel_team. Workers are created on first use, spin briefly after each job (so
 * back-to-back kernels dispatch in well under a microsecond) and then sleep on a condition variable
 * (so an idle process burns no CPU). One region runs at a time; any other caller runs serially. */
#define _GNU_SOURCE
#include "kernels/kernels.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* More threads than this in one team is never useful on a CPU node; it bounds the static slots. */
#define POOL_MAX_WORKERS 255
/* How long a worker polls for its next job (and the caller for the team's end) before sleeping:
 * long enough to bridge the gaps between the kernels of one step (waking a sleeping thread costs
 * 10-100+ us, more in a VM), short enough not to steal an oversubscribed core (several MPI ranks
 * on one machine) for long. Measured in time, since a pause instruction takes 10 to 140 cycles
 * depending on the core. */
#define POOL_SPIN_NS 100000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Called on each poll; true once the spinning time is used up (the clock is read every 64). */
static int spin_over(int i, int64_t *start) {
  cpu_relax();
  if ((i & 63) != 63) return 0;
  int64_t t = now_ns();
  if (*start == 0) *start = t;
  return t - *start > POOL_SPIN_NS;
}

/* One per worker, on its own cache line so that posting to one does not disturb another. */
typedef struct {
  _Alignas(64) _Atomic unsigned seq; /* bumped by the dispatcher to hand this worker a job */
  _Atomic int sleeping;              /* set while the worker waits on cv (under pool.mu) */
  pthread_cond_t cv;
} worker_slot;

static struct {
  pthread_mutex_t region; /* held by the caller that owns the workers for one region */
  pthread_mutex_t mu;     /* guards the sleep/wake handshakes */
  pthread_cond_t done_cv;
  _Atomic int caller_sleeping;
  _Atomic int pending; /* workers still running the current job */
  int nworkers;        /* threads created so far; only grows (changed under region) */
  /* The current job: written by the dispatcher before it bumps a slot's seq (release), read by
   * the worker after it sees the bump (acquire), and not rewritten until pending is 0. */
  ms_k_team_fn fn;
  void *ctx;
  int team;
  worker_slot slots[POOL_MAX_WORKERS];
} pool = {.region = PTHREAD_MUTEX_INITIALIZER,
          .mu = PTHREAD_MUTEX_INITIALIZER,
          .done_cv = PTHREAD_COND_INITIALIZER};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Atomic int g_num_threads;     /* 0 until ms_k_set_num_threads: then the default */
static int g_default_threads;         /* set once by pool_init */
static _Thread_local int tl_in_region; /* a worker, or a caller inside its own region */

/* ---- settings ------------------------------------------------------------------------------ */

/* A positive integer from the environment, else 0. */
static long env_count(const char *name) {
  const char *env = getenv(name);
  if (env == NULL || *env == '\0') return 0;
  char *end;
  long v = strtol(env, &end, 10);
  return *end == '\0' && v >= 1 ? v : 0;
}

/* MS_NUM_THREADS, else the cores shared among the ranks an MPI launcher started on this node
 * (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS): N ranks that each spawn a
 * thread per core would oversubscribe every core N times over. */
static int read_default_threads(void) {
  long v = env_count("MS_NUM_THREADS");
  if (v >= 1 && v <= POOL_MAX_WORKERS + 1) return (int)v;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  long local = env_count("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local == 0) local = env_count("MPI_LOCALNRANKS");
  if (local > 1) cores /= local;
  if (cores < 1) return 1;
  return cores > POOL_MAX_WORKERS + 1 ? POOL_MAX_WORKERS + 1 : (int)cores;
}

/* A forked child has none of the parent's workers: start over with an empty pool. The locks are
 * re-initialised because another parent thread may have held them at the moment of fork. */
static void pool_after_fork_child(void) {
  pthread_mutex_init(&pool.region, NULL);
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.done_cv, NULL);
  atomic_store(&pool.caller_sleeping, 0);
  atomic_store(&pool.pending, 0);
  for (int w = 0; w < pool.nworkers; w++) {
    atomic_store(&pool.slots[w].seq, 0);
    atomic_store(&pool.slots[w].sleeping, 0);
    pthread_cond_init(&pool.slots[w].cv, NULL);
  }
  pool.nworkers = 0;
}

static void pool_init(void) {
  g_default_threads = read_default_threads();
  for (int w = 0; w < POOL_MAX_WORKERS; w++) pthread_cond_init(&pool.slots[w].cv, NULL);
  pthread_atfork(NULL, NULL, pool_after_fork_child);
}

int ms_k_default_num_threads(void) {
  pthread_once(&pool_once, pool_init);
  return g_default_threads;
}

void ms_k_set_num_threads(int n) {
  if (n < 1) n = 1; /* never abort on bad input: a team of one is always valid */
  if (n > POOL_MAX_WORKERS + 1) n = POOL_MAX_WORKERS + 1;
  atomic_store_explicit(&g_num_threads, n, memory_order_relaxed);
}

int ms_k_get_num_threads(void) {
  int n = atomic_load_explicit(&g_num_threads, memory_order_relaxed);
  return n ? n : ms_k_default_num_threads();
}

/* ---- workers ------------------------------------------------------------------------------- */

/* Waits until the slot's seq differs from `seen`; returns the new value. The sleeping flag and the
 * seq are both seq_cst, so either the dispatcher sees sleeping and signals under mu, or the worker
 * sees the new seq before it waits: a post is never lost. */
static unsigned wait_for_job(worker_slot *s, unsigned seen) {
  int64_t start = 0;
  for (int i = 0;; i++) {
    unsigned q = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (q != seen) return q;
    if (spin_over(i, &start)) break;
  }
  unsigned q;
  pthread_mutex_lock(&pool.mu);
  atomic_store(&s->sleeping, 1);
  while ((q = atomic_load(&s->seq)) == seen) pthread_cond_wait(&s->cv, &pool.mu);
  atomic_store(&s->sleeping, 0);
  pthread_mutex_unlock(&pool.mu);
  return q;
}

static void finish_job(void) {
  if (atomic_fetch_sub(&pool.pending, 1) != 1) return;
  if (atomic_load(&pool.caller_sleeping)) {
    pthread_mutex_lock(&pool.mu);
    pthread_cond_broadcast(&pool.done_cv);
    pthread_mutex_unlock(&pool.mu);
  }
}

static void *worker_main(void *arg) {
  int w = (int)(intptr_t)arg;
  worker_slot *s = &pool.slots[w];
  tl_in_region = 1; /* anything a job calls in parallel runs serially here: no nesting */
  unsigned seen = 0;
  for (;;) {
    seen = wait_for_job(s, seen);
    pool.fn(pool.ctx, w + 1, pool.team);
    finish_job();
  }
  return NULL;
}

/* Creates workers until there are `want` (under region). Signals stay with the user's threads.
 * Returns how many exist, which is fewer only if the system refused a thread. */
static int ensure_workers(int want) {
  if (pool.nworkers >= want) return want;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  while (pool.nworkers < want) {
    pthread_t th;
    int w = pool.nworkers;
    atomic_store(&pool.slots[w].seq, 0);
    if (pthread_create(&th, NULL, worker_main, (void *)(intptr_t)w) != 0) break;
    pthread_detach(th);
    pool.nworkers++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return pool.nworkers < want ? pool.nworkers : want;
}

static void post_job(worker_slot *s) {
  atomic_fetch_add(&s->seq, 1);
  if (atomic_load(&s->sleeping)) {
    pthread_mutex_lock(&pool.mu);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&pool.mu);
  }
}

static void wait_for_team(void) {
  int64_t start = 0;
  for (int i = 0;; i++) {
    if (atomic_load_explicit(&pool.pending, memory_order_acquire) == 0) return;
    if (spin_over(i, &start)) break;
  }
  pthread_mutex_lock(&pool.mu);
  atomic_store(&pool.caller_sleeping, 1);
  while (atomic_load(&pool.pending) != 0) pthread_cond_wait(&pool.done_cv, &pool.mu);
  atomic_store(&pool.caller_sleeping, 0);
  pthread_mutex_unlock(&pool.mu);
}

/* Runs fn on a team of up to `team` threads, the caller being member 0; fn learns the real team
 * size from its nthreads argument. Falls back to a team of one when nested or when another caller
 * holds the pool (waiting for it could deadlock a caller that is itself part of that region). */
static void run_team(int team, ms_k_team_fn fn, void *ctx) {
  pthread_once(&pool_once, pool_init);
  if (team > POOL_MAX_WORKERS + 1) team = POOL_MAX_WORKERS + 1;
  if (team < 2 || tl_in_region || pthread_mutex_trylock(&pool.region) != 0) {
    fn(ctx, 0, 1);
    return;
  }
  team = ensure_workers(team - 1) + 1;
  if (team < 2) {
    pthread_mutex_unlock(&pool.region);
    fn(ctx, 0, 1);
    return;
  }
  pool.fn = fn;
  pool.ctx = ctx;
  pool.team = team;
  atomic_store(&pool.pending, team - 1);
  for (int w = 0; w < team - 1; w++) post_job(&pool.slots[w]);
  tl_in_region = 1;
  fn(ctx, 0, team);
  tl_in_region = 0;
  wait_for_team();
  pthread_mutex_unlock(&pool.region);
}

/* ---- public entry points ------------------------------------------------------------------- */

void ms_k_parallel_team(int nthreads, ms_k_team_fn fn, void *ctx) {
  run_team(nthreads, fn, ctx);
}

typedef struct {
  ms_k_range_fn fn;
  void *ctx;
  int64_t n;
} range_job;

/* Member t of a team of nt takes the t-th of nt contiguous, nearly equal pieces of [0, n). */
static void range_member(void *ctx, int t, int nt) {
  const range_job *j = ctx;
  int64_t q = j->n / nt, r = j->n % nt;
  int64_t begin = t * q + (t < r ? t : r);
  int64_t end = begin + q + (t < r ? 1 : 0);
  if (end > begin) j->fn(j->ctx, begin, end);
}

void ms_k_parallel_for(int64_t n, int64_t grain, ms_k_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t pieces = n / grain;
  int nt = ms_k_get_num_threads();
  if (pieces > nt) pieces = nt;
  if (pieces < 2 || tl_in_region) {
    fn(ctx, 0, n);
    return;
  }
  range_job job = {fn, ctx, n};
  run_team((int)pieces, range_member, &job);
}
