/* test_threadpool.c: the kernel thread pool. parallel_for covers [0, n) exactly once in at most
 * nthreads ranges of at least `grain`; teams run truly concurrently; nested calls, several user
 * threads at once and a fork after use all complete; thread-count settings behave. */
#define _GNU_SOURCE
#include "kernels/kernels.h"
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANGES 64

typedef struct {
  _Atomic int *hits;
  _Atomic int nranges;
  int64_t lens[MAX_RANGES];
} cover_ctx;

static void cover_range(void *ctx, int64_t b, int64_t e) {
  cover_ctx *c = ctx;
  int r = atomic_fetch_add(&c->nranges, 1);
  if (r < MAX_RANGES) c->lens[r] = e - b;
  for (int64_t i = b; i < e; i++) atomic_fetch_add(&c->hits[i], 1);
}

/* One parallel_for; returns 1 if every index was hit once, in at most `threads` ranges, each of at
 * least `grain` (or the single whole range). */
static int check_cover(int64_t n, int64_t grain, int threads) {
  cover_ctx c = {calloc(n ? n : 1, sizeof(_Atomic int)), 0, {0}};
  ms_k_parallel_for(n, grain, cover_range, &c);
  int ok = 1, nr = atomic_load(&c.nranges);
  for (int64_t i = 0; i < n; i++) ok &= atomic_load(&c.hits[i]) == 1;
  ok &= n == 0 ? nr == 0 : nr >= 1 && nr <= threads && nr <= MAX_RANGES;
  for (int r = 0; r < nr && r < MAX_RANGES; r++) ok &= nr == 1 || c.lens[r] >= grain;
  if (!ok)
    fprintf(stderr, "  parallel_for n=%lld grain=%lld threads=%d: %d ranges\n", (long long)n,
            (long long)grain, threads, nr);
  free(c.hits);
  return ok;
}

static void test_parallel_for_cover(void) {
  const int64_t ns[] = {0, 1, 2, 3, 7, 64, 1000, 100003};
  const int64_t grains[] = {0, 1, 2, 7, 64, 1000, 1 << 20};
  for (int threads = 1; threads <= 4; threads++) {
    ms_k_set_num_threads(threads);
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
      for (size_t b = 0; b < sizeof grains / sizeof grains[0]; b++)
        CHECK(check_cover(ns[a], grains[b], threads));
  }
}

/* With enough work per piece, a 2-thread pool really splits in two. */
static void test_parallel_for_splits(void) {
  ms_k_set_num_threads(2);
  cover_ctx c = {calloc(1000, sizeof(_Atomic int)), 0, {0}};
  ms_k_parallel_for(1000, 10, cover_range, &c);
  CHECK(atomic_load(&c.nranges) == 2);
  CHECK(c.lens[0] == 500 && c.lens[1] == 500);
  free(c.hits);
}

typedef struct {
  _Atomic int seen[8];
  _Atomic int bad_nt;
  pthread_t caller;
  _Atomic int caller_is_zero;
  _Atomic int arrived;
  _Atomic int concurrent;
} team_ctx;

static void team_member(void *ctx, int t, int nt) {
  team_ctx *c = ctx;
  if (t >= 0 && t < 8) atomic_fetch_add(&c->seen[t], 1);
  if (nt != atomic_load(&c->bad_nt)) atomic_store(&c->bad_nt, -1);
  if (t == 0) atomic_store(&c->caller_is_zero, pthread_equal(pthread_self(), c->caller));
  /* Rendezvous: each member waits (up to 5 s) for all others, which only works if they run at
   * the same time on different threads. */
  atomic_fetch_add(&c->arrived, 1);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    if (atomic_load(&c->arrived) == nt) {
      atomic_fetch_add(&c->concurrent, 1);
      break;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (t1.tv_sec - t0.tv_sec > 5) break;
  }
}

static void test_team(void) {
  for (int nt = 1; nt <= 4; nt++) {
    team_ctx c = {.caller = pthread_self()};
    atomic_store(&c.bad_nt, nt);
    ms_k_parallel_team(nt, team_member, &c);
    int once = 1;
    for (int t = 0; t < 8; t++) once &= atomic_load(&c.seen[t]) == (t < nt);
    CHECK(once);
    CHECK(atomic_load(&c.bad_nt) == nt);
    CHECK(atomic_load(&c.caller_is_zero));
    CHECK(atomic_load(&c.concurrent) == nt);
  }
  /* Zero or negative sizes mean a team of one, never a crash. */
  team_ctx c = {.caller = pthread_self()};
  atomic_store(&c.bad_nt, 1);
  ms_k_parallel_team(0, team_member, &c);
  CHECK(atomic_load(&c.seen[0]) == 1 && atomic_load(&c.bad_nt) == 1);
}

/* ---- nesting: a parallel call inside a region runs serially on its thread -------------------- */

typedef struct {
  _Atomic int inner_calls, inner_total, inner_team_size;
} nest_ctx;

static void inner_range(void *ctx, int64_t b, int64_t e) {
  nest_ctx *c = ctx;
  atomic_fetch_add(&c->inner_calls, 1);
  atomic_fetch_add(&c->inner_total, (int)(e - b));
}

static void inner_team(void *ctx, int t, int nt) {
  nest_ctx *c = ctx;
  (void)t;
  atomic_fetch_add(&c->inner_team_size, nt);
}

static void outer_range(void *ctx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; i++) {
    ms_k_parallel_for(100, 1, inner_range, ctx);
    ms_k_parallel_team(4, inner_team, ctx);
  }
}

static void test_nested(void) {
  ms_k_set_num_threads(2);
  nest_ctx c = {0};
  ms_k_parallel_for(10, 1, outer_range, &c);
  CHECK(atomic_load(&c.inner_calls) == 10); /* one serial range per inner call */
  CHECK(atomic_load(&c.inner_total) == 1000);
  CHECK(atomic_load(&c.inner_team_size) == 10); /* inner teams are teams of one */
}

/* ---- settings -------------------------------------------------------------------------------- */

static void test_settings(void) {
  CHECK(ms_k_default_num_threads() >= 1);
  ms_k_set_num_threads(3);
  CHECK(ms_k_get_num_threads() == 3);
  ms_k_set_num_threads(0);
  CHECK(ms_k_get_num_threads() == 1);
  ms_k_set_num_threads(-5);
  CHECK(ms_k_get_num_threads() == 1);
  ms_k_set_num_threads(2);
  CHECK(ms_k_get_num_threads() == 2);
}

/* Runs fn in a forked child and returns its exit status (0 = its checks passed). */
static int in_child(int (*fn)(void *), void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) _exit(fn(arg));
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The default is read once, from MS_NUM_THREADS when valid, so each case needs a fresh process. */
static int child_default_threads(void *arg) {
  const char *value = arg;
  setenv("MS_NUM_THREADS", value, 1);
  int want = strcmp(value, "3") == 0 ? 3 : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (ms_k_default_num_threads() != want) return 1;
  return ms_k_get_num_threads() == want ? 0 : 2;
}

/* ---- several user threads at once ----------------------------------------------------------- */

static void *user_thread(void *arg) {
  int *ok = arg;
  for (int r = 0; r < 300; r++) *ok &= check_cover(1000 + r, 16, 2);
  return NULL;
}

static void test_concurrent_users(void) {
  ms_k_set_num_threads(2);
  pthread_t th[3];
  int ok[3] = {1, 1, 1};
  for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, user_thread, &ok[i]);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  CHECK(ok[0] && ok[1] && ok[2]);
}

#ifndef __SANITIZE_THREAD__
/* A child forked after the pool has started gets a fresh, working pool. */
static int child_after_fork(void *arg) {
  (void)arg;
  team_ctx c = {.caller = pthread_self()};
  atomic_store(&c.bad_nt, 2);
  ms_k_parallel_team(2, team_member, &c);
  if (atomic_load(&c.concurrent) != 2) return 1;
  return check_cover(5000, 1, 2) ? 0 : 2;
}
#endif

/* Many back-to-back regions, with and without a pause that lets the workers fall asleep, so both
 * the spinning and the sleeping hand-offs are exercised. */
static void test_many_regions(void) {
  ms_k_set_num_threads(2);
  int ok = 1;
  for (int r = 0; r < 20000; r++) ok &= check_cover(64, 1, 2);
  for (int r = 0; r < 20; r++) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    ok &= check_cover(64, 1, 2);
  }
  CHECK(ok);
}

int main(void) {
  CHECK(in_child(child_default_threads, "3") == 0);
  CHECK(in_child(child_default_threads, "zero") == 0);
  CHECK(in_child(child_default_threads, "0") == 0);
  test_settings();
  test_parallel_for_cover();
  test_parallel_for_splits();
  test_team();
  test_nested();
  test_concurrent_users();
  test_many_regions();
#ifndef __SANITIZE_THREAD__ /* ThreadSanitizer cannot start threads in a forked child */
  CHECK(in_child(child_after_fork, NULL) == 0);
#endif
  return ms_test_finish();
}
