/* pg_mpi.c: the "mpi" backend (Open MPI) on CPU tensors. Every collective is issued
 * non-blocking (MPI_I*) so the async form is the only path; a blocking call just waits.
 * bfloat16/float16 travel as 16-bit words when nothing is computed on them and are reduced in
 * float32 (MPI has no such types); avg is a sum followed by a division. */
#define _DEFAULT_SOURCE /* on_exit: finalize only on a clean exit (see at_exit) */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/pg_internal.h"
#include "kernels/kernels.h"

typedef struct mpi_group {
  MPI_Comm comm;
  int64_t id;         /* the same on every rank: groups are made in one order over the world */
  uint64_t announced; /* 1 + the call this rank last told the members it waits in (0: none) */
} mpi_group;

static const struct ms_pg_ops mpi_ops;

static ms_status mpi_fail(const char *fname, int code) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  return ms_error(MS_ERR_RUNTIME, "%s: MPI error: %.*s", fname, len, msg);
}

/* ---- dtypes and ops ------------------------------------------------------------------------ */

/* The MPI type that moves dt's elements unchanged (16-bit floats as plain words). */
static MPI_Datatype mpi_type(ms_dtype dt) {
  switch (dt) {
  case MS_FLOAT32: return MPI_FLOAT;
  case MS_FLOAT64: return MPI_DOUBLE;
  case MS_BFLOAT16:
  case MS_FLOAT16: return MPI_UINT16_T;
  case MS_INT64: return MPI_INT64_T;
  case MS_INT32: return MPI_INT32_T;
  case MS_UINT8:
  case MS_BOOL: return MPI_UINT8_T;
  default: return MPI_DATATYPE_NULL;
  }
}

/* bool follows PyTorch: sum and max are "any", product and min are "all". */
static MPI_Op mpi_op(ms_dist_op op, ms_dtype dt) {
  if (dt == MS_BOOL) return op == MS_DIST_SUM || op == MS_DIST_MAX ? MPI_LOR : MPI_LAND;
  switch (op) {
  case MS_DIST_MAX: return MPI_MAX;
  case MS_DIST_MIN: return MPI_MIN;
  case MS_DIST_PRODUCT: return MPI_PROD;
  default: return MPI_SUM; /* avg divides afterwards */
  }
}

/* buf /= size for avg; integers truncate as C does. */
static void divide(void *buf, ms_dtype dt, int64_t n, int size) {
  for (int64_t i = 0; i < n; i++) switch (dt) {
    case MS_FLOAT32: ((float *)buf)[i] /= (float)size; break;
    case MS_FLOAT64: ((double *)buf)[i] /= size; break;
    case MS_INT64: ((int64_t *)buf)[i] /= size; break;
    case MS_INT32: ((int32_t *)buf)[i] /= size; break;
    case MS_UINT8: ((uint8_t *)buf)[i] /= (uint8_t)size; break;
    default: return;
    }
}

/* ---- work ---------------------------------------------------------------------------------- */

/* A pending request and what finishing it needs. The tensors are held so Lua's collector cannot
 * free a buffer MPI still writes. */
typedef struct mpi_work {
  MPI_Request req;
  const char *fname;
  ms_tensor *target; /* where the result belongs (retained; NULL: nothing to finish) */
  ms_tensor *result; /* where MPI put it: target itself or a float32/staging copy (owned) */
  ms_tensor *keep;   /* an input kept alive (owned) */
  int divide_by;     /* > 1 for avg */
  bool result_here;  /* this rank receives a result (reduce: only the root) */
  /* reduce_scatter: the other ranks' pieces of this rank's shard, to combine with its own */
  bool scatter;
  ms_tensor *pieces; /* where they arrived (owned); NULL: the one other rank's came into result */
  int me, nranks;
  int *counts;       /* MPI_Ialltoallv's four arrays, which must live until it completes */
  MPI_Op op;         /* how pieces are combined */
  /* the execution-order check (order_start): every rank's signature of this call, arriving
   * alongside it; compared before the call counts as done */
  MPI_Request sig_req;
  int64_t *sigs;
  ms_pg *pg; /* retained while sigs is pending, for the ranks' names */
} mpi_work;

static ms_status order_start(ms_pg *pg, const ms_coll *c, mpi_work *w);
static int order_test(mpi_work *w);

static int mpi_work_test(void *impl) {
  mpi_work *w = impl;
  if (w->sigs) {
    int r = order_test(w);
    if (r <= 0) return r;
  }
  int flag = 0, rc = MPI_Test(&w->req, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) return mpi_fail(w->fname, rc), -1;
  return flag;
}

/* The piece rank r sent for this rank's shard: its own from its input, the others' from where the
 * exchange put them (slots in rank order, its own left out). */
static const char *piece_of(const mpi_work *w, int r, size_t bytes) {
  if (r == w->me) return (const char *)ms_tensor_data(w->keep) + (size_t)r * bytes;
  if (!w->pieces) return ms_tensor_data(w->result);
  return (const char *)ms_tensor_data(w->pieces) + (size_t)(r < w->me ? r : r - 1) * bytes;
}

/* result = piece 0 op (piece 1 op (... op piece n-1)): one fixed order on every rank, so shards
 * are deterministic. MPI_Reduce_local(in, inout) computes inout = in op inout, with MPI's own
 * vectorised loops for every type and op. With two ranks the other's piece arrived in result
 * itself and one pass adds this rank's: every predefined op is commutative, bit for bit, so
 * own op other equals piece 0 op piece 1 on both ranks. */
/* 16-bit floats: acc (float32) = piece (widened) when first, else piece op acc, a block at a
 * time through a small float32 buffer, with MPI's own loops. */
static ms_status combine_half(mpi_work *w, float *acc, int64_t count, const char *piece, bool first) {
  enum { BLOCK = 2048 };
  float buf[BLOCK];
  ms_k_dtype dt = (ms_k_dtype)w->keep->dtype;
  for (int64_t i = 0; i < count; i += BLOCK) {
    int64_t n = count - i < BLOCK ? count - i : BLOCK;
    const uint16_t *src = (const uint16_t *)piece + i;
    ms_k_cast(n, first ? acc + i : buf, MS_K_F32, 1, src, dt, 1);
    if (first) continue;
    int rc = MPI_Reduce_local(buf, acc + i, (int)n, MPI_FLOAT, w->op);
    if (rc != MPI_SUCCESS) return mpi_fail(w->fname, rc);
  }
  return MS_OK;
}

/* The same order as sum_pieces, for pieces of a 16-bit float combined in float32: the sums are
 * those of widening every piece first, bit for bit. */
static ms_status sum_half_pieces(mpi_work *w, int64_t count, size_t bytes) {
  float *acc = ms_tensor_data(w->result);
  int last = w->nranks - 1;
  ms_status st = combine_half(w, acc, count, piece_of(w, last, bytes), true);
  for (int r = w->nranks - 1; st == MS_OK && r >= 0; r--)
    if (r != last) st = combine_half(w, acc, count, piece_of(w, r, bytes), false);
  return st;
}

static ms_status sum_pieces(mpi_work *w) {
  int64_t count = ms_tensor_numel(w->result);
  size_t bytes = (size_t)count * ms_dtype_size(w->keep->dtype); /* a piece, in the dtype sent */
  char *acc = ms_tensor_data(w->result);
  if (count == 0) return MS_OK;
  if (ms_dtype_is_half(w->keep->dtype)) return sum_half_pieces(w, count, bytes);
  MPI_Datatype ty = mpi_type(w->result->dtype);
  int last = w->nranks - 1;
  if (w->pieces || w->nranks == 1) memcpy(acc, piece_of(w, last, bytes), bytes);
  else last = w->me == 0 ? 1 : 0; /* result holds the other rank's piece already */
  for (int r = w->nranks - 1; r >= 0; r--) {
    if (r == last) continue;
    int rc = MPI_Reduce_local(piece_of(w, r, bytes), acc, (int)count, ty, w->op);
    if (rc != MPI_SUCCESS) return mpi_fail(w->fname, rc);
  }
  return MS_OK;
}

static ms_status mpi_work_complete(void *impl) {
  mpi_work *w = impl;
  if (!w->target || !w->result_here) return MS_OK;
  if (w->scatter) {
    ms_status st = sum_pieces(w);
    if (st != MS_OK) return st;
  }
  if (w->divide_by > 1)
    divide(ms_tensor_data(w->result), w->result->dtype, ms_tensor_numel(w->result), w->divide_by);
  if (w->result != w->target) {
    ms_tensor *flat = ms_tensor_view(w->result, w->target->ndim, w->target->shape);
    ms_status st = flat ? ms_tensor_copy_(w->target, flat) : MS_ERR_MEMORY;
    ms_tensor_release(flat);
    if (st != MS_OK) return st;
  }
  ms_tensor_bump_version(w->target);
  return MS_OK;
}

static void mpi_work_free(void *impl) {
  mpi_work *w = impl;
  int done = 1, sig_done = 1;
  if (w->req != MPI_REQUEST_NULL) MPI_Test(&w->req, &done, MPI_STATUS_IGNORE);
  if (w->sig_req != MPI_REQUEST_NULL) MPI_Test(&w->sig_req, &sig_done, MPI_STATUS_IGNORE);
  if (!done || !sig_done) return; /* failed while MPI still moves data (an order mismatch): leaked */
  ms_pg_release(w->pg);
  free(w->sigs);
  ms_tensor_release(w->target);
  if (w->result != w->target) ms_tensor_release(w->result);
  ms_tensor_release(w->keep);
  ms_tensor_release(w->pieces);
  free(w->counts);
  free(w);
}

static const ms_work_ops mpi_work_ops = {mpi_work_test, mpi_work_complete, mpi_work_free, false};

static mpi_work *work_alloc(const char *fname, ms_tensor *target) {
  mpi_work *w = calloc(1, sizeof *w);
  if (!w) return ms_error(MS_ERR_MEMORY, "%s: out of memory", fname), NULL;
  w->req = w->sig_req = MPI_REQUEST_NULL, w->fname = fname, w->result_here = true;
  w->target = target, w->result = target;
  if (target) ms_tensor_retain(target);
  return w;
}

/* For reductions of 16-bit floats: the result is computed in a float32 copy of t. */
static ms_status stage_reduction(mpi_work *w, ms_tensor *t) {
  if (!ms_dtype_is_half(t->dtype)) return MS_OK;
  ms_tensor *flat = ms_tensor_view(t, 1, (int64_t[]){ms_tensor_numel(t)});
  w->result = flat ? ms_tensor_to_dtype(flat, MS_FLOAT32) : NULL;
  ms_tensor_release(flat);
  return w->result ? MS_OK : MS_ERR_MEMORY;
}

/* ---- the control channel: leaving and waiting, told outside any collective ----------------
 *
 * Why: MPI has no way to notice a peer that is gone without failing. A rank that ends normally
 * without joining a collective its peers wait in (os.exit(0), or its script returning) would sit
 * in MPI_Finalize and they in the collective until the watchdog's timeout; and at that timeout
 * MPI cannot say which rank is missing. So ranks tell each other, point to point on a duplicate
 * of the world that no collective uses:
 *   LEFT  - sent to every rank when a process ends with status 0 (ms_dist_leaving, from main.c
 *           before the Lua state closes, and again from the exit hook). A rank waiting on a
 *           call of a group the leaver belongs to fails one grace second later (the call may
 *           still complete from what the leaver sent) naming it; the Lua error ends that rank
 *           and mpirun the job. Ranks that all end normally never look at it: nobody waits.
 *   WAIT  - sent to the group's members once a wait has lasted ANNOUNCE seconds: "I have reached
 *           call seq of group id". At the timeout, the members without such word for this call
 *           (or a later one) are the ones that have not arrived: stopped, stuck, or computing.
 * Nothing is sent while collectives are fast. Messages are {type, group id, seq, kind}. */
enum { MSG_LEFT = 1, MSG_WAIT = 2, MSG_LEN = 4 };
#define LEFT_GRACE 1.0  /* seconds a wait goes on after a member left, for what it sent to land */
#define POLL_EVERY 0.01 /* seconds between looks at the channel while a wait lasts */

typedef struct peer_news {
  double left_at;            /* when its LEFT came (0: still here) */
  int64_t group, seq, kind;  /* its last WAIT (group -1: none) */
} peer_news;

typedef struct ctrl_msg {    /* a send in flight: MPI reads body until req completes */
  MPI_Request req;
  int64_t body[MSG_LEN];
} ctrl_msg;

static MPI_Comm g_ctrl = MPI_COMM_NULL;
static int g_me = -1, g_nranks;
static peer_news *g_news;    /* per world rank */
static ctrl_msg **g_out;     /* sends in flight */
static int g_nout, g_capout;
static int64_t g_next_group; /* ids are never reused, even across init/destroy */
static double g_last_poll;
static bool g_left;          /* LEFT already sent */

static ms_status ctrl_open(void) {
  if (g_ctrl != MPI_COMM_NULL) return MS_OK;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &g_ctrl);
  if (rc != MPI_SUCCESS) return mpi_fail("init_process_group", rc);
  MPI_Comm_set_errhandler(g_ctrl, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g_ctrl, &g_me), MPI_Comm_size(g_ctrl, &g_nranks);
  if (!(g_news = calloc((size_t)g_nranks, sizeof *g_news)))
    return ms_error(MS_ERR_MEMORY, "init_process_group: out of memory");
  for (int r = 0; r < g_nranks; r++) g_news[r].group = -1;
  return MS_OK;
}

/* Frees the sends that completed; with wait_s > 0 first waits that long for the others. */
static void ctrl_reap(double wait_s) {
  double until = dist_now() + wait_s;
  for (int polls = 0;; polls++) {
    int kept = 0;
    for (int i = 0; i < g_nout; i++) {
      int done = 0;
      if (MPI_Test(&g_out[i]->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) free(g_out[i]);
      else g_out[kept++] = g_out[i];
    }
    g_nout = kept;
    if (!g_nout || dist_now() >= until) return;
    dist_backoff(polls);
  }
}

/* Best effort: a message that cannot be sent only makes a later report less precise. */
static void ctrl_send(int to, int64_t type, int64_t group, uint64_t seq, int64_t kind) {
  ctrl_reap(0);
  if (g_nout == g_capout) {
    int cap = g_capout ? 2 * g_capout : 16;
    ctrl_msg **grown = realloc(g_out, sizeof *grown * (size_t)cap);
    if (!grown) return;
    g_out = grown, g_capout = cap;
  }
  ctrl_msg *m = malloc(sizeof *m);
  if (!m) return;
  m->body[0] = type, m->body[1] = group, m->body[2] = (int64_t)seq, m->body[3] = kind;
  if (MPI_Isend(m->body, MSG_LEN, MPI_INT64_T, to, 0, g_ctrl, &m->req) != MPI_SUCCESS) return free(m);
  g_out[g_nout++] = m;
}

/* Reads every message that came. */
static void ctrl_poll(void) {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, 0, g_ctrl, &flag, &st) != MPI_SUCCESS || !flag) return;
    int64_t b[MSG_LEN];
    if (MPI_Recv(b, MSG_LEN, MPI_INT64_T, st.MPI_SOURCE, 0, g_ctrl, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
    peer_news *n = &g_news[st.MPI_SOURCE];
    if (b[0] == MSG_LEFT && n->left_at == 0) n->left_at = dist_now();
    if (b[0] == MSG_WAIT) n->group = b[1], n->seq = b[2], n->kind = b[3];
  }
}

void pg_mpi_leaving(void) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  if (inited) MPI_Finalized(&finalized);
  if (!inited || finalized || g_ctrl == MPI_COMM_NULL || g_left) return;
  g_left = true;
  for (int r = 0; r < g_nranks; r++)
    if (r != g_me) ctrl_send(r, MSG_LEFT, 0, 0, 0);
}

/* Seconds a wait lasts before this rank tells the members it has arrived. */
static double announce_after(void) {
  double t = dist_timeout() / 10;
  return t < 1.0 ? t : 1.0;
}

static ms_status mpi_watch(ms_pg *pg, uint64_t seq, ms_coll_kind kind, double waited) {
  double now = dist_now();
  if (now - g_last_poll < POLL_EVERY) return MS_OK;
  g_last_poll = now;
  ctrl_poll();
  mpi_group *g = pg->impl;
  if (waited > announce_after() && g->announced != seq + 1) {
    g->announced = seq + 1;
    for (int i = 0; i < pg->size; i++)
      if (i != pg->rank) ctrl_send(pg->global_ranks[i], MSG_WAIT, g->id, seq, kind);
  }
  for (int i = 0; i < pg->size; i++) {
    const peer_news *n = &g_news[pg->global_ranks[i]];
    if (n->left_at > 0 && now - n->left_at > LEFT_GRACE)
      return ms_error(MS_ERR_RUNTIME, "%s: rank %d left the job (it ended without joining this call, #%llu on "
                      "its group) while rank %d waits in it; every rank must run the same collectives, and "
                      "call destroy_process_group before it ends", coll_name(kind), pg->global_ranks[i],
                      (unsigned long long)seq, g_me);
  }
  return MS_OK;
}

/* Appends printf-style text to buf[*n .. len). */
static void put(char *buf, size_t len, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *n, const char *fmt, ...) {
  if (*n >= len) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *n, len - *n, fmt, ap);
  va_end(ap);
  if (k > 0) *n += (size_t)k < len - *n ? (size_t)k : len - *n - 1;
}

static void mpi_missing(ms_pg *pg, uint64_t seq, char *buf, size_t len) {
  ctrl_poll();
  int64_t id = ((mpi_group *)pg->impl)->id;
  size_t n = 0;
  int missing = 0;
  for (int i = 0; i < pg->size; i++) {
    int r = pg->global_ranks[i];
    const peer_news *w = &g_news[r];
    if (i == pg->rank || (w->group == id && w->seq >= (int64_t)seq)) continue;
    put(buf, len, &n, "%srank %d has not arrived (", missing++ ? "; " : "", r);
    if (w->left_at > 0) put(buf, len, &n, "it left the job)");
    else if (w->group < 0) put(buf, len, &n, "no word from it: stopped, stuck, or computing without collectives)");
    else
      put(buf, len, &n, "last heard waiting in %s, call #%lld on %s)", coll_name((ms_coll_kind)w->kind),
          (long long)w->seq, w->group == id ? "this group" : "another group");
  }
  if (!missing) put(buf, len, &n, "every rank of the group has arrived");
}

/* ---- issuing ------------------------------------------------------------------------------- */

static bool overlaps(const ms_tensor *a, const ms_tensor *b) {
  const char *pa = ms_tensor_data(a), *pb = ms_tensor_data(b);
  size_t la = (size_t)ms_tensor_numel(a) * ms_dtype_size(a->dtype);
  size_t lb = (size_t)ms_tensor_numel(b) * ms_dtype_size(b->dtype);
  return la && lb && pa < pb + lb && pb < pa + la;
}

static int issue_all_reduce(ms_pg *pg, MPI_Comm comm, const ms_coll *c, mpi_work *w) {
  if (stage_reduction(w, c->out) != MS_OK) return -1;
  if (c->op == MS_DIST_AVG) w->divide_by = pg->size;
  MPI_Datatype ty = mpi_type(w->result->dtype);
  return MPI_Iallreduce(MPI_IN_PLACE, ms_tensor_data(w->result), (int)c->count, ty,
                        mpi_op(c->op, c->out->dtype), comm, &w->req);
}

static int issue_reduce(ms_pg *pg, MPI_Comm comm, const ms_coll *c, mpi_work *w) {
  if (stage_reduction(w, c->out) != MS_OK) return -1;
  w->result_here = pg->rank == c->root;
  if (c->op == MS_DIST_AVG) w->divide_by = pg->size;
  void *buf = ms_tensor_data(w->result);
  MPI_Datatype ty = mpi_type(w->result->dtype);
  return MPI_Ireduce(w->result_here ? MPI_IN_PLACE : buf, w->result_here ? buf : NULL, (int)c->count, ty,
                     mpi_op(c->op, c->out->dtype), c->root, comm, &w->req);
}

/* The input moves from a copy when it overlaps the output anywhere but its own slot. */
static int issue_all_gather(ms_pg *pg, MPI_Comm comm, const ms_coll *c, mpi_work *w) {
  size_t esize = ms_dtype_size(c->in->dtype);
  char *out = ms_tensor_data(c->out);
  const void *send = ms_tensor_data(c->in);
  if (c->count && send == out + (size_t)pg->rank * (size_t)c->count * esize) send = MPI_IN_PLACE;
  else if (overlaps(c->in, c->out)) {
    if (!(w->keep = ms_tensor_clone(c->in))) return -1;
    send = ms_tensor_data(w->keep);
  } else {
    ms_tensor_retain(c->in), w->keep = c->in;
  }
  MPI_Datatype ty = mpi_type(c->in->dtype);
  return MPI_Iallgather(send, (int)c->count, ty, out, (int)c->count, ty, comm, &w->req);
}

/* Reduce-scatter as an all-to-all of the pieces and a local sum when the work completes. Open
 * MPI 4.1's MPI_Ireduce_scatter_block (libnbc) reduces the whole tensor on one rank and scatters
 * it: ~0.3 GB/s between 2 ranks on one node, against ~1.5 GB/s for an all-gather. The exchange
 * moves only what each rank must receive (a rank's own piece stays where it is), and the sum
 * is a memory-bound loop. 16-bit floats travel as they are (MPI has no such type to sum) and
 * are summed in float32 on arrival (sum_half_pieces), then rounded once into the output: the
 * results of widening the whole input first, for half the bytes and no widened copy. */
static int issue_reduce_scatter(ms_pg *pg, MPI_Comm comm, const ms_coll *c, mpi_work *w) {
  ms_tensor *in = c->in;
  bool half = ms_dtype_is_half(in->dtype);
  /* an input overlapping the output would be overwritten before its own piece is read */
  if (overlaps(c->in, c->out)) {
    ms_tensor *flat = ms_tensor_view(in, 1, (int64_t[]){ms_tensor_numel(in)});
    w->keep = flat ? ms_tensor_clone(flat) : NULL;
    ms_tensor_release(flat);
    if (!w->keep) return -1;
  } else {
    ms_tensor_retain(in), w->keep = in;
  }
  if (half && !(w->result = ms_tensor_new_empty(1, (int64_t[]){c->count}, MS_FLOAT32))) return -1;
  int n = pg->size, me = pg->rank, count = (int)c->count;
  w->scatter = true, w->me = me, w->nranks = n, w->op = mpi_op(c->op, half ? MS_FLOAT32 : in->dtype);
  if (c->op == MS_DIST_AVG) w->divide_by = pg->size;
  /* the other ranks' pieces arrive beside the result, except one float piece, straight into it */
  if ((n > 2 || half) && !(w->pieces = ms_tensor_new_empty(1, (int64_t[]){c->count * (n - 1)}, w->keep->dtype)))
    return -1;
  if (!(w->counts = calloc(4 * (size_t)n, sizeof *w->counts)))
    return ms_error(MS_ERR_MEMORY, "%s: out of memory", w->fname), -1;
  int *scounts = w->counts, *sdispls = scounts + n, *rcounts = sdispls + n, *rdispls = rcounts + n;
  for (int r = 0; r < n; r++) {
    scounts[r] = rcounts[r] = r == me ? 0 : count;
    sdispls[r] = r * count;
    rdispls[r] = w->pieces && r != me ? (r < me ? r : r - 1) * count : 0;
  }
  MPI_Datatype ty = mpi_type(w->keep->dtype);
  void *recv = w->pieces ? ms_tensor_data(w->pieces) : ms_tensor_data(w->result);
  return MPI_Ialltoallv(ms_tensor_data(w->keep), scounts, sdispls, ty, recv, rcounts, rdispls, ty, comm, &w->req);
}

static ms_status mpi_issue(ms_pg *pg, const ms_coll *c, ms_work **work) {
  MPI_Comm comm = ((mpi_group *)pg->impl)->comm;
  const char *fname = coll_name(c->kind);
  mpi_work *w = work_alloc(fname, c->kind == MS_COLL_BARRIER ? NULL : c->out);
  if (!w) return MS_ERR_MEMORY;
  ms_status st = order_start(pg, c, w);
  if (st != MS_OK) return mpi_work_free(w), st;
  int rc;
  switch (c->kind) {
  case MS_COLL_ALL_REDUCE: rc = issue_all_reduce(pg, comm, c, w); break;
  case MS_COLL_REDUCE: rc = issue_reduce(pg, comm, c, w); break;
  case MS_COLL_ALL_GATHER: rc = issue_all_gather(pg, comm, c, w); break;
  case MS_COLL_REDUCE_SCATTER: rc = issue_reduce_scatter(pg, comm, c, w); break;
  case MS_COLL_BROADCAST:
    rc = MPI_Ibcast(ms_tensor_data(c->out), (int)c->count, mpi_type(c->out->dtype), c->root, comm, &w->req);
    w->result_here = pg->rank != c->root; /* only receivers see their tensor change */
    break;
  default: rc = MPI_Ibarrier(comm, &w->req); break;
  }
  if (rc != MPI_SUCCESS) {
    st = rc < 0 ? MS_ERR_MEMORY : mpi_fail(fname, rc); /* -1: staging failed, error set */
    mpi_work_free(w);
    return st;
  }
  return (*work = work_new(&mpi_work_ops, w)) ? MS_OK : MS_ERR_MEMORY;
}

/* ---- every rank makes the same call: the default check and MS_DIST_DEBUG=1's --------------- */

/* A call's signature, the same on every rank or an error. The origin (ms_dist_set_origin) rides
 * along as the hash of the full unit name and the text of both, cut to fit, for the message. */
enum { UNIT_CHARS = 48, PHASE_CHARS = 32, TEXT_WORDS = (UNIT_CHARS + PHASE_CHARS) / 8 };
enum { SIG_KIND, SIG_DTYPE, SIG_COUNT, SIG_OP, SIG_ROOT, SIG_SEQ, SIG_UNIT, SIG_TEXT, SIG_LEN = SIG_TEXT + TEXT_WORDS };

/* FNV-1a: a unit name longer than the text carried still compares in full. */
static int64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603u;
  for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return (int64_t)(h >> 1);
}

static void put_origin(int64_t *sig) {
  const char *unit, *phase;
  dist_origin(&unit, &phase);
  char *text = (char *)(sig + SIG_TEXT);
  memset(text, 0, UNIT_CHARS + PHASE_CHARS);
  snprintf(text, UNIT_CHARS, "%s", unit ? unit : "");
  snprintf(text + UNIT_CHARS, PHASE_CHARS, "%s", phase ? phase : "");
  sig[SIG_UNIT] = unit ? name_hash(unit) : 0;
}

/* " from unit 'fc1' (forward all-gather)", or nothing for a collective without an origin. */
static int describe_origin(const int64_t *s, char *buf, size_t len) {
  const char *unit = (const char *)(s + SIG_TEXT), *phase = unit + UNIT_CHARS;
  if (!*unit && !*phase) return 0;
  return snprintf(buf, len, " from unit '%.*s' (%.*s)", UNIT_CHARS, *unit ? unit : "?", PHASE_CHARS,
                  *phase ? phase : "?");
}

static void describe_call(const ms_pg *pg, const int64_t *s, int r, char *buf, size_t len) {
  ms_coll_kind kind = (ms_coll_kind)s[SIG_KIND];
  int n = snprintf(buf, len, "rank %d called %s", pg->global_ranks[r], coll_name(kind));
  if (kind != MS_COLL_BARRIER && n >= 0 && (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, "(%s, %lld elements", ms_dtype_name((ms_dtype)s[SIG_DTYPE]),
                  (long long)s[SIG_COUNT]);
  if (s[SIG_OP] >= 0 && n >= 0 && (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, ", op %s", ms_dist_op_name((ms_dist_op)s[SIG_OP]));
  if ((kind == MS_COLL_BROADCAST || kind == MS_COLL_REDUCE) && n >= 0 && (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, ", %s %d", kind == MS_COLL_REDUCE ? "dst" : "src",
                  s[SIG_ROOT] >= 0 && s[SIG_ROOT] < pg->size ? pg->global_ranks[s[SIG_ROOT]] : -1);
  if (n >= 0 && (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, "%s as its call #%lld on this group", kind != MS_COLL_BARRIER ? ")" : "",
                  (long long)s[SIG_SEQ]);
  if (n >= 0 && (size_t)n < len) describe_origin(s, buf + n, len - (size_t)n);
}

/* Gathers len int64 from every rank of comm into all[0 .. size*len), bounded by the timeout.
 * all has one more slot at its end holding this rank's values: a timed-out request may still
 * read and write the block, which then stays allocated (the caller must exit anyway). */
static ms_status timed_allgather(MPI_Comm comm, int64_t *all, int len, int size, const char *fname,
                                 uint64_t seq, bool *leak) {
  *leak = false;
  mpi_work *w = work_alloc(fname, NULL);
  if (!w) return MS_ERR_MEMORY;
  int rc = MPI_Iallgather(all + (size_t)len * (size_t)size, len, MPI_INT64_T, all, len, MPI_INT64_T, comm, &w->req);
  if (rc != MPI_SUCCESS) return mpi_work_free(w), mpi_fail(fname, rc);
  ms_work *work = work_new(&mpi_work_ops, w);
  if (!work) return *leak = true, MS_ERR_MEMORY;
  work_label(work, fname, seq);
  ms_status st = ms_work_wait(work);
  if (st != MS_OK && !ms_work_is_completed(work)) return *leak = true, st;
  ms_work_free(work);
  return st;
}

static void sign(const ms_coll *c, uint64_t seq, int64_t *sig) {
  bool reduces = c->kind == MS_COLL_ALL_REDUCE || c->kind == MS_COLL_REDUCE || c->kind == MS_COLL_REDUCE_SCATTER;
  sig[SIG_KIND] = c->kind, sig[SIG_DTYPE] = c->in ? (int64_t)c->in->dtype : -1, sig[SIG_COUNT] = c->count;
  sig[SIG_OP] = reduces ? (int64_t)c->op : -1, sig[SIG_ROOT] = c->root, sig[SIG_SEQ] = (int64_t)seq;
  if (c->kind == MS_COLL_BARRIER) sig[SIG_DTYPE] = sig[SIG_OP] = -1;
  put_origin(sig);
}

/* Every rank's signature in all[0 .. size*SIG_LEN) equals rank 0's, or an error naming both. */
static ms_status compare(const ms_pg *pg, const int64_t *all, const char *fname, const char *check) {
  for (int r = 1; r < pg->size; r++) {
    if (memcmp(all, all + r * SIG_LEN, sizeof *all * SIG_LEN) == 0) continue;
    char a[512], b[512];
    describe_call(pg, all, 0, a, sizeof a);
    describe_call(pg, all + r * SIG_LEN, r, b, sizeof b);
    return ms_error(MS_ERR_RUNTIME, "%s: %s: ranks disagree: %s but %s", fname, check, a, b);
  }
  return MS_OK;
}

/* Every member gathers every member's signature and compares, so all of them raise the same
 * error together instead of deadlocking in a mismatched collective. */
static ms_status mpi_check(ms_pg *pg, const ms_coll *c, uint64_t seq) {
  int64_t *all = malloc(sizeof *all * SIG_LEN * (size_t)(pg->size + 1));
  if (!all) return ms_error(MS_ERR_MEMORY, "MS_DIST_DEBUG: out of memory");
  sign(c, seq, all + SIG_LEN * pg->size);
  bool leak;
  ms_status st = timed_allgather(((mpi_group *)pg->impl)->comm, all, SIG_LEN, pg->size, coll_name(c->kind),
                                 seq, &leak);
  if (leak) return st;
  if (st == MS_OK) st = compare(pg, all, coll_name(c->kind), "MS_DIST_DEBUG");
  free(all);
  return st;
}

/* The default execution-order check (dist_order_check; MS_DIST_DEBUG=1 checks before issuing
 * instead): the signatures travel in a small all-gather issued just before the call on the same
 * communicator and compared when it has arrived, before the call counts as done. Nothing waits
 * for it: the call stays asynchronous. A mismatch fails the call on every rank; the call itself
 * may still be moving data then, so its buffers are leaked (mpi_work_free) and the job should
 * end, as after a timeout. */
static ms_status order_start(ms_pg *pg, const ms_coll *c, mpi_work *w) {
  if (!dist_order_check() || pg->size < 2) return MS_OK;
  w->sigs = malloc(sizeof *w->sigs * SIG_LEN * (size_t)(pg->size + 1));
  if (!w->sigs) return ms_error(MS_ERR_MEMORY, "%s: out of memory", w->fname);
  int64_t *mine = w->sigs + SIG_LEN * pg->size;
  sign(c, pg->seq - 1, mine); /* run() counted this call already */
  int rc = MPI_Iallgather(mine, SIG_LEN, MPI_INT64_T, w->sigs, SIG_LEN, MPI_INT64_T, ((mpi_group *)pg->impl)->comm,
                          &w->sig_req);
  if (rc != MPI_SUCCESS) return mpi_fail(w->fname, rc);
  ms_pg_retain(pg);
  w->pg = pg;
  return MS_OK;
}

/* 1: the signatures agree, 0: not arrived yet, -1: a mismatch (error set). A mismatch stays one:
 * the signatures are kept and compared again at each test (a test's result may be dropped, as
 * ms_work_is_completed does before it waits). */
static int order_test(mpi_work *w) {
  if (w->sig_req != MPI_REQUEST_NULL) {
    int flag = 0, rc = MPI_Test(&w->sig_req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(w->fname, rc), -1;
    if (!flag) return 0;
  }
  if (compare(w->pg, w->sigs, w->fname, "execution order check") != MS_OK) return -1;
  free(w->sigs);
  w->sigs = NULL;
  ms_pg_release(w->pg);
  w->pg = NULL;
  return 1;
}

/* ---- groups and the world ------------------------------------------------------------------ */

static ms_pg *wrap_comm(MPI_Comm comm, const int *ranks, int n) {
  mpi_group *g = calloc(1, sizeof *g);
  if (!g) return ms_error(MS_ERR_MEMORY, "new_group: out of memory"), NULL;
  g->comm = comm, g->id = g_next_group++; /* counted on members and others alike */
  int rank = -1, size = n;
  if (comm != MPI_COMM_NULL) {
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN); /* errors become messages, not aborts */
    MPI_Comm_rank(comm, &rank), MPI_Comm_size(comm, &size);
  }
  ms_pg *pg = pg_alloc(&mpi_ops, rank, size, ranks, g);
  if (!pg) {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    free(g);
  }
  return pg;
}

/* FNV-1a over the sorted rank list: what every rank must agree on before the split. */
static int64_t ranks_hash(const int *ranks, int n) {
  uint64_t h = 1469598103934665603u;
  for (int i = 0; i < n; i++) h = (h ^ (uint64_t)(uint32_t)ranks[i]) * 1099511628211u;
  return (int64_t)(h >> 1);
}

/* A bounded handshake first: MPI_Comm_split has no timeout, so it only starts once every rank
 * has arrived, and with the same list. */
static ms_status agree_on_ranks(ms_pg *world, const int *ranks, int n) {
  int64_t *all = malloc(sizeof *all * 2 * (size_t)(world->size + 1));
  if (!all) return ms_error(MS_ERR_MEMORY, "new_group: out of memory");
  all[2 * world->size] = n, all[2 * world->size + 1] = ranks_hash(ranks, n);
  bool leak;
  ms_status st = timed_allgather(((mpi_group *)world->impl)->comm, all, 2, world->size, "new_group", 0, &leak);
  if (leak) return st;
  for (int r = 1; st == MS_OK && r < world->size; r++)
    if (all[2 * r] != all[0] || all[2 * r + 1] != all[1])
      st = ms_error(MS_ERR_ARG, "new_group: ranks disagree on the group: rank 0 passed %lld ranks, rank %d "
                    "passed %lld%s (every rank must pass the same list)", (long long)all[0], r,
                    (long long)all[2 * r], all[2 * r] == all[0] ? " different ones" : "");
  free(all);
  return st;
}

static ms_pg *mpi_new_group(ms_pg *world, const int *ranks, int n) {
  int me = world->rank, pos = -1;
  for (int i = 0; i < n; i++)
    if (ranks[i] == me) pos = i;
  if (agree_on_ranks(world, ranks, n) != MS_OK) return NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  /* split over the whole world: every rank calls new_group, as PyTorch requires */
  int rc = MPI_Comm_split(((mpi_group *)world->impl)->comm, pos >= 0 ? 0 : MPI_UNDEFINED, pos, &comm);
  if (rc != MPI_SUCCESS) return mpi_fail("new_group", rc), NULL;
  return wrap_comm(comm, ranks, n);
}

static void mpi_destroy(ms_pg *pg) {
  mpi_group *g = pg->impl;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && g->comm != MPI_COMM_NULL) MPI_Comm_free(&g->comm);
  free(g);
}

static const struct ms_pg_ops mpi_ops = {.name = "mpi", .issue = mpi_issue, .check = mpi_check,
                                         .new_group = mpi_new_group, .destroy = mpi_destroy,
                                         .watch = mpi_watch, .missing = mpi_missing};

/* A clean exit tells the others it leaves (see the control channel) and finalizes, as MPI
 * requires. A failing one must not: MPI_Finalize waits for every rank, which a rank stuck in a
 * collective never reaches; exiting non-zero without it makes mpirun end the whole job at once. */
static void at_exit(int status, void *arg) {
  (void)arg;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (status != 0 || finalized) return;
  pg_mpi_leaving();
  ctrl_reap(1.0); /* a stopped peer may never take its LEFT: finalizing then hangs anyway */
  MPI_Finalize();
}

ms_status pg_mpi_init(ms_pg **world) {
  int inited = 0, provided = 0, rc;
  MPI_Initialized(&inited);
  if (!inited) {
    /* SERIALIZED is enough: only the thread running Lua calls MPI */
    rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return ms_error(MS_ERR_RUNTIME, "init_process_group: MPI_Init_thread failed (%d)", rc);
    on_exit(at_exit, NULL);
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return ms_error(MS_ERR_RUNTIME, "init_process_group: MPI was already finalized");
  /* Open MPI reports a failed non-blocking collective on the world communicator (MPI_Test):
   * there too an error must become a message on this rank, not an abort of the job */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  ms_status st = ctrl_open();
  if (st != MS_OK) return st;
  MPI_Comm comm;
  if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm)) != MPI_SUCCESS) return mpi_fail("init_process_group", rc);
  *world = wrap_comm(comm, NULL, 0);
  return *world ? MS_OK : MS_ERR_MEMORY;
}
