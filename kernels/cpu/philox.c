/* philox.c: the counter-based generator (Philox 4x32-10, Salmon et al., SC'11) and the fills
 * built on it. Every output element is a pure function of (seed, offset, element index), so a
 * fill gives the same numbers for any thread count or chunking, and a CUDA body can match it. */
#include "kernels/kernel_table.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/philox_x8.h"

#include <math.h>

/* Blocks of this many elements go to one task: enough work to amortise a dispatch. */
#define PHILOX_GRAIN_BLOCKS 2048

static const double TWO_PI = 6.283185307179586476925286766559;

void ms_k_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r > 0) { /* the key is bumped between rounds, not before the first */
      k0 += MS_PHILOX_W0;
      k1 += MS_PHILOX_W1;
    }
    uint64_t p0 = (uint64_t)MS_PHILOX_M0 * c0, p1 = (uint64_t)MS_PHILOX_M1 * c2;
    c0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    c1 = (uint32_t)p1;
    c2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c3 = (uint32_t)p0;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* The block numbered `offset + b`: counter {low, high word of that number, 0, 0}, key = seed. */
static void philox_block(uint64_t seed, uint64_t offset, int64_t b, uint32_t out[4]) {
  uint64_t n = offset + (uint64_t)b;
  const uint32_t ctr[4] = {(uint32_t)n, (uint32_t)(n >> 32), 0, 0};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  ms_k_philox4x32_10(ctr, key, out);
}

/* The 64-bit draw of lane k (0 or 1) of a block: words 2k (low half) and 2k+1 (high half). */
static inline uint64_t word64(const uint32_t w[4], int k) {
  return (uint64_t)w[2 * k] | (uint64_t)w[2 * k + 1] << 32;
}

/* [0, 1) from the top 24 / 53 bits, exactly representable in the target type. */
static inline float unit_f32(uint32_t x) { return (float)(x >> 8) * 0x1p-24f; }
static inline double unit_f64(uint64_t x) { return (double)(x >> 11) * 0x1p-53; }

/* ---- the shared driver: a range of blocks, each expanded into up to `lanes` elements --------- */

typedef void (*block_fn)(const void *args, const uint32_t w[4], int64_t first, int count);
/* Optional: eight whole blocks from the AVX2 generator at once (word k of block i in x8[k][i]),
 * their elements starting at `first`; NULL: each block goes through block_fn. */
typedef void (*block8_fn)(const void *args, const uint32_t x8[4][8], int64_t first);

typedef struct fill_job {
  uint64_t seed, offset;
  int64_t n;
  int lanes;       /* elements per block */
  block_fn fn;
  block8_fn fn8;
  const void *args;
} fill_job;

static void emit(const fill_job *j, int64_t b, const uint32_t w[4]) {
  int64_t first = b * j->lanes, left = j->n - first;
  j->fn(j->args, w, first, left < j->lanes ? (int)left : j->lanes);
}

static void fill_range(void *arg, int64_t begin, int64_t end) {
  const fill_job *j = arg;
  uint32_t w[4];
  int64_t b = begin;
  if (ms_k_cpu_avx2())
    for (uint32_t x8[4][8]; b + 8 <= end; b += 8) {
      ms_k_philox_x8_avx2(j->seed, j->offset + (uint64_t)b, x8);
      if (j->fn8 && (b + 8) * j->lanes <= j->n) {
        j->fn8(j->args, x8, b * j->lanes);
        continue;
      }
      for (int i = 0; i < 8; i++) {
        for (int k = 0; k < 4; k++) w[k] = x8[k][i];
        emit(j, b + i, w);
      }
    }
  for (; b < end; b++) {
    philox_block(j->seed, j->offset, b, w);
    emit(j, b, w);
  }
}

static void fill_blocks8(uint64_t seed, uint64_t offset, int64_t n, int lanes, block_fn fn, block8_fn fn8,
                         const void *args) {
  if (n <= 0) return;
  fill_job j = {seed, offset, n, lanes, fn, fn8, args};
  ms_k_parallel_for(ms_k_philox_blocks(n, lanes), PHILOX_GRAIN_BLOCKS, fill_range, &j);
}

static void fill_blocks(uint64_t seed, uint64_t offset, int64_t n, int lanes, block_fn fn,
                        const void *args) {
  fill_blocks8(seed, offset, n, lanes, fn, NULL, args);
}

/* ---- uniform --------------------------------------------------------------------------------- */

typedef struct { float *out; float low, high; } uni_f32;
typedef struct { double *out; double low, high; } uni_f64;

static void uniform_f32_block(const void *a, const uint32_t w[4], int64_t first, int count) {
  const uni_f32 *u = a;
  for (int k = 0; k < count; k++) {
    float v = u->low + (u->high - u->low) * unit_f32(w[k]);
    /* rounding of the product can land on high itself; keep the interval half-open */
    u->out[first + k] = v < u->high ? v : nextafterf(u->high, u->low);
  }
}

static void uniform_f64_block(const void *a, const uint32_t w[4], int64_t first, int count) {
  const uni_f64 *u = a;
  for (int k = 0; k < count; k++) {
    double v = u->low + (u->high - u->low) * unit_f64(word64(w, k));
    u->out[first + k] = v < u->high ? v : nextafter(u->high, u->low);
  }
}

void ms_k_philox_uniform_f32(uint64_t seed, uint64_t offset, int64_t n, float *out, float low,
                             float high) {
  if (!(low < high)) { /* an empty interval: PyTorch gives low */
    for (int64_t i = 0; i < n; i++) out[i] = low;
    return;
  }
  uni_f32 u = {out, low, high};
  fill_blocks(seed, offset, n, 4, uniform_f32_block, &u);
}

void ms_k_philox_uniform_f64(uint64_t seed, uint64_t offset, int64_t n, double *out, double low,
                             double high) {
  if (!(low < high)) {
    for (int64_t i = 0; i < n; i++) out[i] = low;
    return;
  }
  uni_f64 u = {out, low, high};
  fill_blocks(seed, offset, n, 2, uniform_f64_block, &u);
}

/* ---- normal (Box-Muller: one pair of uniforms gives one pair of normals) --------------------- */

typedef struct { float *out; double mean, std; } nrm_f32;
typedef struct { double *out; double mean, std; } nrm_f64;

/* u1 in (0, 1] so that log(u1) is finite; u2 in [0, 1). */
static inline void box_muller(double u1, double u2, double z[2]) {
  double r = sqrt(-2.0 * log(u1)), t = TWO_PI * u2;
  z[0] = r * cos(t);
  z[1] = r * sin(t);
}

static void normal_f32_block(const void *a, const uint32_t w[4], int64_t first, int count) {
  const nrm_f32 *p = a;
  double z[4];
  /* 32-bit uniforms computed in double reach 6.6 sigma in the tails, not 5.8 as 24 bits would */
  box_muller(((double)w[0] + 1.0) * 0x1p-32, (double)w[1] * 0x1p-32, z);
  box_muller(((double)w[2] + 1.0) * 0x1p-32, (double)w[3] * 0x1p-32, z + 2);
  for (int k = 0; k < count; k++) p->out[first + k] = (float)(p->mean + p->std * z[k]);
}

static void normal_f64_block(const void *a, const uint32_t w[4], int64_t first, int count) {
  const nrm_f64 *p = a;
  double z[2];
  box_muller(1.0 - unit_f64(word64(w, 0)), unit_f64(word64(w, 1)), z);
  for (int k = 0; k < count; k++) p->out[first + k] = p->mean + p->std * z[k];
}

void ms_k_philox_normal_f32(uint64_t seed, uint64_t offset, int64_t n, float *out, double mean,
                            double std) {
  nrm_f32 p = {out, mean, std};
  fill_blocks(seed, offset, n, 4, normal_f32_block, &p);
}

void ms_k_philox_normal_f64(uint64_t seed, uint64_t offset, int64_t n, double *out, double mean,
                            double std) {
  nrm_f64 p = {out, mean, std};
  fill_blocks(seed, offset, n, 2, normal_f64_block, &p);
}

/* ---- integers -------------------------------------------------------------------------------- */

typedef struct { int64_t *out; int64_t low; uint64_t range; } rint_args;

/* High 64 bits of a * b, in 32-bit pieces so it needs no 128-bit type (CUDA has __umul64hi). */
static inline uint64_t mulhi64(uint64_t a, uint64_t b) {
  uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
  uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
  uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl;
  return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

static void randint_block(const void *a, const uint32_t w[4], int64_t first, int count) {
  const rint_args *r = a;
  for (int k = 0; k < count; k++) {
    /* multiply-shift maps 64 random bits onto [0, range) with bias below range / 2^64;
     * the sum is done unsigned because low + offset may pass through INT64 overflow */
    uint64_t v = (uint64_t)r->low + mulhi64(word64(w, k), r->range);
    r->out[first + k] = (int64_t)v;
  }
}

void ms_k_philox_randint_i64(uint64_t seed, uint64_t offset, int64_t n, int64_t *out, int64_t low,
                             int64_t high) {
  rint_args r = {out, low, (uint64_t)high - (uint64_t)low};
  fill_blocks(seed, offset, n, 2, randint_block, &r);
}

static void u64_block(const void *a, const uint32_t w[4], int64_t first, int count) {
  uint64_t *out = *(uint64_t *const *)a;
  for (int k = 0; k < count; k++) out[first + k] = word64(w, k);
}

void ms_k_philox_u64(uint64_t seed, uint64_t offset, int64_t n, uint64_t *out) {
  fill_blocks(seed, offset, n, 2, u64_block, &out);
}

/* ---- bernoulli ------------------------------------------------------------------------------- */

typedef struct { const double *p; int64_t ps; uint8_t *out; uint64_t thr; } bern_args;

static void bernoulli_block(const void *a, const uint32_t w[4], int64_t first, int count) {
  const bern_args *b = a;
  const double *p = b->p; /* locals: the byte stores below may alias the struct */
  const int64_t ps = b->ps;
  uint8_t *out = b->out;
  for (int k = 0; k < count; k++) {
    int64_t i = first + k;
    /* u < p with u in [0, 1) on a 2^-32 grid: p = 0 never fires, p = 1 always does */
    out[i] = (double)w[k] * 0x1p-32 < p[i * ps];
  }
}

/* One p for all (dropout): w * 2^-32 < p is w < thr for the integer thr = ceil(p * 2^32), so the
 * mask is the same bits without a conversion per element. */
static void bernoulli_block_scalar(const void *a, const uint32_t w[4], int64_t first, int count) {
  const bern_args *b = a;
  const uint64_t thr = b->thr;
  uint8_t *out = b->out + first;
  for (int k = 0; k < count; k++) out[k] = w[k] < thr;
}

static void bernoulli_block8(const void *a, const uint32_t x8[4][8], int64_t first) {
  const bern_args *b = a;
  ms_k_bernoulli_x8_avx2(x8, b->thr, b->out + first);
}

static uint64_t bernoulli_threshold(double p) {
  double t = ceil(p * 0x1p32); /* exact: a power-of-two scaling, then a whole number */
  if (!(t > 0)) return 0;      /* p <= 0 or NaN: (double)w < p is never true */
  return t > 0x1p33 ? (uint64_t)1 << 33 : (uint64_t)t;
}

void ms_k_philox_bernoulli(uint64_t seed, uint64_t offset, int64_t n, const double *p, int64_t ps,
                           uint8_t *out) {
  bern_args b = {p, ps, out, ps == 0 ? bernoulli_threshold(p[0]) : 0};
  if (ps == 0) fill_blocks8(seed, offset, n, 4, bernoulli_block_scalar, bernoulli_block8, &b);
  else fill_blocks(seed, offset, n, 4, bernoulli_block, &b);
}

/* ---- the table's random fills: the fills above, on the caller's thread and the pool as they
 * split themselves ---- */

int ms_k_cpu_philox_uniform(const ms_k_exec *x, ms_k_dtype dt, uint64_t seed, uint64_t offset,
                            int64_t n, void *out, double low, double high) {
  (void)x;
  if (dt == MS_K_F64)
    ms_k_philox_uniform_f64(seed, offset, n, out, low, high);
  else
    ms_k_philox_uniform_f32(seed, offset, n, out, (float)low, (float)high);
  return 0;
}

int ms_k_cpu_philox_normal(const ms_k_exec *x, ms_k_dtype dt, uint64_t seed, uint64_t offset,
                           int64_t n, void *out, double mean, double std) {
  (void)x;
  if (dt == MS_K_F64)
    ms_k_philox_normal_f64(seed, offset, n, out, mean, std);
  else
    ms_k_philox_normal_f32(seed, offset, n, out, mean, std);
  return 0;
}

int ms_k_cpu_philox_randint(const ms_k_exec *x, uint64_t seed, uint64_t offset, int64_t n,
                            int64_t *out, int64_t low, int64_t high) {
  (void)x;
  ms_k_philox_randint_i64(seed, offset, n, out, low, high);
  return 0;
}

int ms_k_cpu_philox_bernoulli(const ms_k_exec *x, uint64_t seed, uint64_t offset, int64_t n,
                              double p, uint8_t *out) {
  (void)x;
  ms_k_philox_bernoulli(seed, offset, n, &p, 0, out);
  return 0;
}

int ms_k_cpu_philox_bernoulli_p(const ms_k_exec *x, uint64_t seed, uint64_t offset, int64_t n,
                                const double *p, int64_t ps, uint8_t *out) {
  (void)x;
  ms_k_philox_bernoulli(seed, offset, n, p, ps, out);
  return 0;
}
