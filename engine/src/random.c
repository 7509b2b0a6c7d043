/* random.c: the process-wide generator state (a seed and an offset counted in Philox blocks) and
 * the random tensor ops on either device. Each op reserves the blocks it will read by advancing the
 * offset, so consecutive calls get fresh numbers and re-seeding replays the same sequence. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "moonshard/checked.h"
#include "moonshard/random.h"
#include "native/dispatch.h"
#include "native/native.h"
#include "meta_log.h"
#include "random_state.h"

/* The same default as PyTorch's, so an unseeded run is still reproducible. */
#define MS_DEFAULT_SEED 67280421310721ULL

/* A mutex rather than two atomics: a reservation must read a seed and an offset that belong to
 * the same ms_manual_seed, and it is taken once per op, never per element. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_seed = MS_DEFAULT_SEED;
static uint64_t g_offset;

void ms_manual_seed(uint64_t seed) {
  pthread_mutex_lock(&g_lock);
  g_seed = seed;
  g_offset = 0;
  pthread_mutex_unlock(&g_lock);
}

uint64_t ms_initial_seed(void) {
  pthread_mutex_lock(&g_lock);
  uint64_t s = g_seed;
  pthread_mutex_unlock(&g_lock);
  return s;
}

void ms_random_get_state(uint64_t *seed, uint64_t *offset) {
  pthread_mutex_lock(&g_lock);
  *seed = g_seed;
  *offset = g_offset;
  pthread_mutex_unlock(&g_lock);
}

void ms_random_set_state(uint64_t seed, uint64_t offset) {
  pthread_mutex_lock(&g_lock);
  g_seed = seed;
  g_offset = offset;
  pthread_mutex_unlock(&g_lock);
}

/* The blocks the calling thread's CUDA graph capture has counted so far (on: capturing). A
 * replay then reserves them all at once from the generator, as the eager ops would one by one. */
static _Thread_local struct { bool on; uint64_t blocks; } capture;

void random_capture_begin(void) { capture.on = true, capture.blocks = 0; }

uint64_t random_capture_end(void) {
  capture.on = false;
  return capture.blocks;
}

bool random_capturing(void) { return capture.on; }

void random_reserve(int64_t blocks, uint64_t *seed, uint64_t *offset) {
  pthread_mutex_lock(&g_lock);
  *seed = g_seed;
  if (capture.on) {
    *offset = capture.blocks;
    capture.blocks += (uint64_t)blocks;
  } else {
    *offset = g_offset;
    g_offset += (uint64_t)blocks;
  }
  pthread_mutex_unlock(&g_lock);
}

/* A draw on the CPU inside a capture would read graph-relative offsets as absolute ones: the
 * same numbers at every step. */
static ms_status check_not_captured(const char *op, ms_device dev) {
  if (!random_capturing() || dev.type != MS_CPU) return MS_OK;
  return ms_error(MS_ERR_RUNTIME, "%s: a random draw on the CPU while a CUDA graph is being captured "
                  "(a captured step draws on the GPU only; draw on the CPU outside the step)", op);
}

/* ---- filling any tensor from a kernel that writes a contiguous buffer ----------------------- */

/* Writes out's values (contiguous, of the compute dtype, on the kernels' device) from block
 * `offset` on; returns the kernel's code. */
typedef int (*gen_fn)(const native_kernels *nk, const void *args, uint64_t seed, uint64_t offset,
                      ms_tensor *out);

static bool is_meta(const ms_tensor *t) { return ms_tensor_device(t).type == MS_META; }

/* The arguments of uniform_ (low, high) and normal_ (mean, std). */
typedef struct { double a, b; } two_doubles;

/* Generates from block `offset` on straight into t when it is contiguous and of the compute dtype
 * `cdt`; otherwise into a contiguous temporary on t's device that is converted into t by copy_. */
static ms_status fill_at(const char *op, ms_tensor *t, ms_dtype cdt, gen_fn fn, const void *args,
                         uint64_t seed, uint64_t offset) {
  native_kernels nk;
  if (native_kernels_for(op, ms_tensor_device(t), &nk) != MS_OK) return MS_ERR_RUNTIME;
  if (t->dtype == cdt && ms_tensor_is_contiguous(t)) {
    ms_status st = native_kernel_status(&nk, fn(&nk, args, seed, offset, t));
    if (st == MS_OK) ms_tensor_bump_version(t);
    return st;
  }
  ms_tensor *tmp = ms_tensor_new_empty_on(ms_tensor_device(t), t->ndim, t->shape, cdt);
  if (!tmp) return MS_ERR_MEMORY;
  ms_status st = native_kernel_status(&nk, fn(&nk, args, seed, offset, tmp));
  if (st == MS_OK) st = native_copy_(t, tmp); /* bumps t's version; recorded by no path */
  ms_tensor_release(tmp);
  return st;
}

/* Reserves the blocks first on every path, so the stream of numbers depends neither on t's
 * layout nor its device; a meta t only records the draw (kind, with the two doubles of args). */
static ms_status fill_with(const char *op, ms_tensor *t, ms_dtype cdt, int lanes, gen_fn fn,
                           const void *args, meta_kind kind) {
  int64_t n = ms_tensor_numel(t);
  if (n == 0) return MS_OK;
  if (!is_meta(t)) { /* the device's error before any block is taken */
    native_kernels nk;
    if (native_kernels_for(op, ms_tensor_device(t), &nk) != MS_OK) return MS_ERR_RUNTIME;
    if (check_not_captured(op, ms_tensor_device(t)) != MS_OK) return MS_ERR_RUNTIME;
  }
  uint64_t seed, offset;
  random_reserve(ms_k_philox_blocks(n, lanes), &seed, &offset);
  if (is_meta(t)) {
    const two_doubles *ab = args;
    return meta_record(t, kind, ab->a, ab->b, seed, offset);
  }
  return fill_at(op, t, cdt, fn, args, seed, offset);
}

static ms_status check_floating(const char *op, const ms_tensor *t) {
  if (ms_dtype_is_floating(t->dtype)) return MS_OK;
  return ms_error(MS_ERR_ARG, "%s: expected a floating tensor, got %s", op,
                  ms_dtype_name(t->dtype));
}

/* A floating fill's target: any tensor with data, or a meta tensor (whose draw is recorded). */
static ms_status check_target(const char *op, const ms_tensor *t) {
  return is_meta(t) ? MS_OK : ms_tensor_check_data_any(op, t);
}

/* bfloat16 and float16 are generated in float32, then rounded by the copy. */
static ms_dtype float_compute_dtype(ms_dtype dt) {
  return dt == MS_FLOAT64 ? MS_FLOAT64 : MS_FLOAT32;
}

/* ---- uniform_ ------------------------------------------------------------------------------- */

static int gen_uniform(const native_kernels *nk, const void *args, uint64_t seed, uint64_t offset,
                       ms_tensor *out) {
  const two_doubles *r = args;
  return nk->k->philox_uniform(&nk->x, (ms_k_dtype)out->dtype, seed, offset, ms_tensor_numel(out),
                               ms_tensor_data(out), r->a, r->b);
}

/* The kernel computes low + (high - low) * u in the compute dtype: every term must be finite. */
static bool uniform_fits(ms_dtype cdt, double low, double high) {
  if (cdt == MS_FLOAT64) return isfinite(high - low);
  float lo = (float)low, hi = (float)high;
  return isfinite(lo) && isfinite(hi) && isfinite(hi - lo);
}

ms_status ms_tensor_uniform_(ms_tensor *t, double low, double high) {
  ms_status st = check_floating("uniform_", t);
  if (st || (st = check_target("uniform_", t))) return st;
  if (!isfinite(low) || !isfinite(high) || !(low <= high))
    return ms_error(MS_ERR_ARG, "uniform_: expected finite low <= high, got low = %g, high = %g",
                    low, high);
  two_doubles r = {low, high};
  ms_dtype cdt = float_compute_dtype(t->dtype);
  if (!uniform_fits(cdt, low, high))
    return ms_error(MS_ERR_ARG, "uniform_: the interval [%g, %g) is too wide for %s (its width "
                    "must be finite in the compute dtype %s)", low, high,
                    ms_dtype_name(t->dtype), ms_dtype_name(cdt));
  return fill_with("uniform_", t, cdt, cdt == MS_FLOAT64 ? 2 : 4, gen_uniform, &r, META_UNIFORM);
}

/* ---- normal_ -------------------------------------------------------------------------------- */

static int gen_normal(const native_kernels *nk, const void *args, uint64_t seed, uint64_t offset,
                      ms_tensor *out) {
  const two_doubles *r = args;
  return nk->k->philox_normal(&nk->x, (ms_k_dtype)out->dtype, seed, offset, ms_tensor_numel(out),
                              ms_tensor_data(out), r->a, r->b);
}

ms_status ms_tensor_normal_(ms_tensor *t, double mean, double std) {
  ms_status st = check_floating("normal_", t);
  if (st || (st = check_target("normal_", t))) return st;
  if (!isfinite(mean))
    return ms_error(MS_ERR_ARG, "normal_: expected a finite mean, got %g", mean);
  if (!(std >= 0) || !isfinite(std))
    return ms_error(MS_ERR_ARG, "normal_: expected std >= 0 (and finite), got %g", std);
  two_doubles r = {mean, std};
  ms_dtype cdt = float_compute_dtype(t->dtype);
  return fill_with("normal_", t, cdt, cdt == MS_FLOAT64 ? 2 : 4, gen_normal, &r, META_NORMAL);
}

/* ---- randint_ ------------------------------------------------------------------------------- */

/* The integers a dtype holds exactly: floating types up to 2^(mantissa bits + 1). */
static void exact_int_range(ms_dtype dt, int64_t *lo, int64_t *hi) {
  switch (dt) {
  case MS_FLOAT32: *hi = (int64_t)1 << 24; break;
  case MS_FLOAT64: *hi = (int64_t)1 << 53; break;
  case MS_BFLOAT16: *hi = (int64_t)1 << 8; break;
  case MS_FLOAT16: *hi = (int64_t)1 << 11; break;
  case MS_INT32: *lo = INT32_MIN, *hi = INT32_MAX; return;
  case MS_UINT8: *lo = 0, *hi = 255; return;
  case MS_BOOL: *lo = 0, *hi = 1; return;
  default: *lo = INT64_MIN, *hi = INT64_MAX; return;
  }
  *lo = -*hi;
}

typedef struct { int64_t low, high; } two_ints;

static int gen_randint(const native_kernels *nk, const void *args, uint64_t seed, uint64_t offset,
                       ms_tensor *out) {
  const two_ints *r = args;
  return nk->k->philox_randint(&nk->x, seed, offset, ms_tensor_numel(out), ms_tensor_data(out),
                               r->low, r->high);
}

ms_status ms_tensor_randint_(ms_tensor *t, int64_t low, int64_t high) {
  if (ms_tensor_check_data_any("randint_", t)) return MS_ERR_RUNTIME;
  if (low >= high)
    return ms_error(MS_ERR_ARG, "randint_: low (%lld) must be less than high (%lld)",
                    (long long)low, (long long)high);
  int64_t lo, hi;
  exact_int_range(t->dtype, &lo, &hi);
  if (low < lo || high - 1 > hi)
    return ms_error(MS_ERR_ARG, "randint_: range [%lld, %lld) does not fit %s (which holds "
                    "%lld to %lld exactly)", (long long)low, (long long)high,
                    ms_dtype_name(t->dtype), (long long)lo, (long long)hi);
  two_ints r = {low, high};
  return fill_with("randint_", t, MS_INT64, 2, gen_randint, &r, META_FILL); /* never meta here */
}

/* ---- bernoulli ------------------------------------------------------------------------------- */

/* The flat index of the first value of v[0..n) outside [0, 1] (NaN included), or -1. */
static int64_t first_non_probability(const double *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!(v[i] >= 0 && v[i] <= 1)) return i;
  return -1;
}

/* p as a new contiguous float64 tensor on p's device whose values are all probabilities, or
 * NULL. A CUDA p is checked through one host copy, so the error can name the bad value. */
static ms_tensor *probabilities(ms_tensor *p) {
  ms_tensor *d = native_to_dtype(p, MS_FLOAT64);
  ms_tensor *c = d ? native_contiguous(d) : NULL;
  ms_tensor_release(d);
  if (!c) return NULL;
  ms_tensor *host = native_to_device(c, (ms_device){MS_CPU, 0}); /* c itself when on the CPU */
  if (!host) return ms_tensor_release(c), NULL;
  const double *v = ms_tensor_data(host);
  int64_t bad = first_non_probability(v, ms_tensor_numel(host));
  if (bad >= 0) {
    ms_error(MS_ERR_ARG, "bernoulli: expected probabilities in [0, 1], got %g at flat index %lld",
             v[bad], (long long)bad);
    ms_tensor_release(c);
    c = NULL;
  }
  ms_tensor_release(host);
  return c;
}

/* bits (uint8, contiguous, on prob's device) = one Bernoulli draw per probability. */
static ms_status draw_bits(ms_tensor *prob, ms_tensor *bits) {
  native_kernels nk;
  if (native_kernels_for("bernoulli", ms_tensor_device(bits), &nk) != MS_OK) return MS_ERR_RUNTIME;
  if (check_not_captured("bernoulli", ms_tensor_device(bits)) != MS_OK) return MS_ERR_RUNTIME;
  int64_t n = ms_tensor_numel(bits);
  uint64_t seed, offset;
  random_reserve(ms_k_philox_blocks(n, 4), &seed, &offset);
  return native_kernel_status(&nk, nk.k->philox_bernoulli_p(&nk.x, seed, offset, n, ms_tensor_data(prob),
                                                             1, ms_tensor_data(bits)));
}

ms_tensor *ms_tensor_new_bernoulli(ms_tensor *p) {
  if (!ms_dtype_is_floating(p->dtype)) {
    ms_error(MS_ERR_ARG, "bernoulli: expected a floating tensor of probabilities, got %s",
             ms_dtype_name(p->dtype));
    return NULL;
  }
  if (ms_tensor_check_data_any("bernoulli", p)) return NULL;
  ms_tensor *prob = probabilities(p);
  if (!prob) return NULL;
  ms_tensor *bits = ms_tensor_new_empty_on(ms_tensor_device(p), p->ndim, p->shape, MS_UINT8);
  ms_tensor *out = NULL;
  if (bits && draw_bits(prob, bits) == MS_OK) out = native_to_dtype(bits, p->dtype);
  ms_tensor_release(bits);
  ms_tensor_release(prob);
  return out;
}

/* ---- randperm -------------------------------------------------------------------------------- */

/* Sorting by random 64-bit keys (ties, about n^2 / 2^65 likely, broken by index) is a uniform
 * permutation computed from per-element draws only, so a GPU radix sort can reproduce it. */
typedef struct { uint64_t key; int64_t index; } keyed;

static int keyed_cmp(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

/* Fills out[0..n) (int64) with the permutation drawn from Philox blocks starting at (seed,
 * offset); false if memory ran out. */
static bool random_permutation(int64_t n, int64_t first, uint64_t seed, uint64_t offset, int64_t *out) {
  keyed *k = malloc((size_t)(n ? n : 1) * sizeof *k);
  uint64_t *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
  if (!k || !keys) {
    free(k), free(keys);
    return false;
  }
  ms_k_philox_u64(seed, offset, n, keys);
  for (int64_t i = 0; i < n; i++) k[i] = (keyed){keys[i], i};
  qsort(k, (size_t)n, sizeof *k, keyed_cmp);
  for (int64_t i = 0; i < n; i++) out[i] = k[i].index + first;
  free(k), free(keys);
  return true;
}

static ms_tensor *randperm(int64_t n, int64_t first, ms_dtype dt, bool seeded, uint64_t seed) {
  if (n < 0) {
    ms_error(MS_ERR_ARG, "randperm: n must be non-negative, got %lld", (long long)n);
    return NULL;
  }
  int64_t lo, hi;
  exact_int_range(dt, &lo, &hi);
  if (dt == MS_BOOL) {
    ms_error(MS_ERR_ARG, "randperm: dtype bool is not supported");
    return NULL;
  }
  int64_t last;
  if (first < lo || !ms_add_i64(first, n - 1, &last) || last > hi) {
    ms_error(MS_ERR_ARG, "randperm: n (%lld) is too large for dtype %s (largest exact integer "
             "%lld)", (long long)n, ms_dtype_name(dt), (long long)hi);
    return NULL;
  }
  ms_tensor *idx = ms_tensor_new_empty(1, &n, MS_INT64);
  if (!idx) return NULL;
  uint64_t offset = 0;
  if (!seeded && check_not_captured("randperm", (ms_device){MS_CPU, 0}) != MS_OK) return ms_tensor_release(idx), NULL;
  if (!seeded) random_reserve(ms_k_philox_blocks(n, 2), &seed, &offset);
  if (!random_permutation(n, first, seed, offset, ms_tensor_data(idx))) {
    ms_tensor_release(idx);
    ms_error(MS_ERR_MEMORY, "randperm: out of memory for %lld sort keys", (long long)n);
    return NULL;
  }
  ms_tensor *out = native_to_dtype(idx, dt);
  ms_tensor_release(idx);
  return out;
}

ms_tensor *ms_tensor_new_randperm(int64_t n, ms_dtype dt) { return randperm(n, 0, dt, false, 0); }

ms_tensor *ms_tensor_new_randperm_seeded(int64_t n, ms_dtype dt, uint64_t seed) {
  return randperm(n, 0, dt, true, seed);
}

ms_tensor *ms_tensor_new_randperm_from(int64_t n, int64_t first, ms_dtype dt, const uint64_t *seed) {
  return randperm(n, first, dt, seed != NULL, seed ? *seed : 0);
}

/* ---- replaying a recorded draw (native/materialize.c) --------------------------------------------------- */

ms_status random_replay(ms_tensor *t, int kind, double a, double b, uint64_t seed, uint64_t offset) {
  two_doubles r = {a, b};
  ms_dtype cdt = float_compute_dtype(t->dtype);
  if (kind == META_UNIFORM) return fill_at("uniform_", t, cdt, gen_uniform, &r, seed, offset);
  return fill_at("normal_", t, cdt, gen_normal, &r, seed, offset);
}
