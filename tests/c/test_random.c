/* test_random.c: the Philox generator and the random tensor ops: known-answer vectors, the
 * counter scheme (element i depends on seed, offset and i only), reproducibility across seeds,
 * calls and thread counts, the statistics of each distribution, dtypes, and error messages. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "moonshard/moonshard.h"
#include "test.h"

#define BIG 1000000

static ms_tensor *vec(int64_t n, ms_dtype dt) { return ms_tensor_new_empty(1, &n, dt); }

/* Whether two tensors of the same dtype and size hold the same bytes. */
static bool same_bytes(const ms_tensor *a, const ms_tensor *b) {
  size_t bytes = (size_t)ms_tensor_numel(a) * ms_dtype_size(a->dtype);
  return ms_tensor_numel(a) == ms_tensor_numel(b) &&
         memcmp(ms_tensor_data(a), ms_tensor_data(b), bytes) == 0;
}

static void moments(const ms_tensor *t, double *mean, double *var, double *lo, double *hi) {
  int64_t n = ms_tensor_numel(t);
  double s = 0, s2 = 0;
  *lo = INFINITY, *hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    double v = ms_tensor_get_flat(t, i);
    s += v, s2 += v * v;
    if (v < *lo) *lo = v;
    if (v > *hi) *hi = v;
  }
  *mean = s / (double)n;
  *var = s2 / (double)n - *mean * *mean;
}

/* ---- the generator itself ------------------------------------------------------------------ */

static void test_known_answers(void) {
  /* Random123's tests/kat_vectors, the three "philox4x32 10" lines */
  static const uint32_t in[3][6] = {
      {0, 0, 0, 0, 0, 0},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0}};
  static const uint32_t want[3][4] = {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
                                      {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
                                      {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};
  for (int v = 0; v < 3; v++) {
    uint32_t out[4];
    ms_k_philox4x32_10(in[v], in[v] + 4, out);
    CHECK(memcmp(out, want[v], sizeof out) == 0);
  }
}

/* Element i of a float32 uniform is the top 24 bits of word i % 4 of block offset + i / 4. */
static void test_counter_scheme(void) {
  uint64_t seed = 0x0123456789abcdefULL, offset = 7;
  float got[11];
  ms_k_philox_uniform_f32(seed, offset, 11, got, 0.0f, 1.0f);
  for (int i = 0; i < 11; i++) {
    uint64_t b = offset + (uint64_t)i / 4;
    uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), 0, 0}, key[2] = {(uint32_t)seed,
                                                                          (uint32_t)(seed >> 32)};
    uint32_t w[4];
    ms_k_philox4x32_10(ctr, key, w);
    CHECK(got[i] == (float)(w[i % 4] >> 8) * 0x1p-24f);
  }
  /* a fill starting at a later block continues the same stream */
  float tail[3];
  ms_k_philox_uniform_f32(seed, offset + 2, 3, tail, 0.0f, 1.0f);
  CHECK(memcmp(tail, got + 8, sizeof tail) == 0);
  int64_t r[5], r2[2];
  ms_k_philox_randint_i64(seed, 0, 5, r, -10, 10);
  ms_k_philox_randint_i64(seed, 1, 2, r2, -10, 10); /* two 64-bit lanes per block */
  CHECK(r[2] == r2[0] && r[3] == r2[1]);
  CHECK(ms_k_philox_blocks(0, 4) == 0 && ms_k_philox_blocks(9, 4) == 3);
}

/* Word k of block b, from the scalar generator: the reference for the batched fills. */
static uint32_t ref_word(uint64_t seed, uint64_t b, int k) {
  uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), 0, 0};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, w[4];
  ms_k_philox4x32_10(ctr, key, w);
  return w[k];
}

/* Fills generate eight blocks at a time where the CPU allows: every length (whole batches and
 * tails), offsets across the counter's 32-bit carry, and Bernoulli's threshold at its edges must
 * give the scalar generator's bits. */
static void test_batched_fills_match_scalar(void) {
  const uint64_t seed = 0xfeedface12345678ULL;
  const uint64_t offsets[] = {0, 5, 0xfffffffcULL, 0x1fffffff9ULL};
  const double ps[] = {0.0, 1.0, 0.5, 0.3, 1e-12, 0x1p-32, 0x1p-33, 1.0 - 0x1p-53, 0.75};
  enum { MAXN = 150 };
  float u[MAXN];
  uint8_t m[MAXN];
  for (size_t o = 0; o < sizeof offsets / sizeof *offsets; o++)
    for (int64_t n = 1; n <= MAXN; n += 7) {
      ms_k_philox_uniform_f32(seed, offsets[o], n, u, 0.0f, 1.0f);
      bool ok = true;
      for (int64_t i = 0; i < n; i++) {
        uint32_t w = ref_word(seed, offsets[o] + (uint64_t)i / 4, (int)(i % 4));
        ok &= u[i] == (float)(w >> 8) * 0x1p-24f;
      }
      CHECK(ok);
      for (size_t q = 0; q < sizeof ps / sizeof *ps; q++) {
        ms_k_philox_bernoulli(seed, offsets[o], n, &ps[q], 0, m);
        ok = true;
        for (int64_t i = 0; i < n; i++) {
          uint32_t w = ref_word(seed, offsets[o] + (uint64_t)i / 4, (int)(i % 4));
          ok &= m[i] == ((double)w * 0x1p-32 < ps[q]);
        }
        CHECK(ok);
      }
    }
}

/* Ops reserve whole blocks: after a 10-element float32 fill (3 blocks), the next fill starts at
 * element 12 of the same stream, and a float64 fill after that at block 5. */
static void test_offsets_advance(void) {
  ms_manual_seed(99);
  CHECK(ms_initial_seed() == 99);
  ms_tensor *a = vec(10, MS_FLOAT32), *b = vec(7, MS_FLOAT32), *c = vec(3, MS_FLOAT64);
  ms_tensor *big = vec(40, MS_FLOAT32);
  CHECK(ms_tensor_uniform_(a, 0, 1) == MS_OK);
  CHECK(ms_tensor_uniform_(b, 0, 1) == MS_OK);
  CHECK(ms_tensor_uniform_(c, 0, 1) == MS_OK);
  ms_manual_seed(99);
  CHECK(ms_tensor_uniform_(big, 0, 1) == MS_OK);
  const float *pb = ms_tensor_data(big);
  CHECK(memcmp(ms_tensor_data(a), pb, 10 * sizeof(float)) == 0);
  CHECK(memcmp(ms_tensor_data(b), pb + 12, 7 * sizeof(float)) == 0);
  double want[3];
  ms_k_philox_uniform_f64(99, 5, 3, want, 0, 1);
  CHECK(memcmp(ms_tensor_data(c), want, sizeof want) == 0);
  ms_tensor_release(a), ms_tensor_release(b), ms_tensor_release(c), ms_tensor_release(big);
}

static void test_reproducible(void) {
  ms_tensor *a = vec(1000, MS_FLOAT32), *b = vec(1000, MS_FLOAT32), *c = vec(1000, MS_FLOAT32);
  ms_manual_seed(42);
  ms_tensor_uniform_(a, 0, 1);
  ms_tensor_uniform_(c, 0, 1); /* the next call */
  ms_manual_seed(42);
  ms_tensor_uniform_(b, 0, 1);
  CHECK(same_bytes(a, b));
  CHECK(!same_bytes(a, c));
  ms_manual_seed(43);
  ms_tensor_uniform_(b, 0, 1);
  CHECK(!same_bytes(a, b));
  ms_tensor_release(a), ms_tensor_release(b), ms_tensor_release(c);
}

/* Every op under one seed, for comparing runs with different thread counts. */
static void fill_all(ms_tensor **t) {
  ms_manual_seed(7);
  t[0] = vec(BIG, MS_FLOAT32), ms_tensor_uniform_(t[0], -1, 1);
  t[1] = vec(BIG + 3, MS_FLOAT64), ms_tensor_normal_(t[1], 0, 1);
  t[2] = vec(BIG + 1, MS_INT64), ms_tensor_randint_(t[2], 0, 1000);
  ms_tensor *p = ms_tensor_new_full(1, (int64_t[]){BIG}, MS_FLOAT32, 0.5);
  t[3] = ms_tensor_new_bernoulli(p);
  ms_tensor_release(p);
  t[4] = vec(BIG + 2, MS_FLOAT32), ms_tensor_normal_(t[4], 0, 1);
}

static void test_thread_independent(void) {
  int saved = ms_get_num_threads();
  ms_tensor *one[5], *two[5], *four[5];
  ms_set_num_threads(1), fill_all(one);
  ms_set_num_threads(2), fill_all(two);
  ms_set_num_threads(4), fill_all(four);
  ms_set_num_threads(saved);
  for (int k = 0; k < 5; k++) {
    CHECK(same_bytes(one[k], two[k]));
    CHECK(same_bytes(one[k], four[k]));
    ms_tensor_release(one[k]), ms_tensor_release(two[k]), ms_tensor_release(four[k]);
  }
}

/* Concurrent callers each get their own blocks: 4 threads x 100 one-block fills take 400. */
static void *reserve_many(void *arg) {
  (void)arg;
  ms_tensor *t = vec(4, MS_FLOAT32);
  for (int i = 0; i < 100; i++) ms_tensor_uniform_(t, 0, 1);
  ms_tensor_release(t);
  return NULL;
}

static void test_thread_safe_reservation(void) {
  ms_manual_seed(5);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, reserve_many, NULL);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  ms_tensor *t = vec(4, MS_FLOAT32);
  ms_tensor_uniform_(t, 0, 1);
  float want[4];
  ms_k_philox_uniform_f32(5, 400, 4, want, 0, 1);
  CHECK(memcmp(ms_tensor_data(t), want, sizeof want) == 0);
  ms_tensor_release(t);
}

/* ---- distributions --------------------------------------------------------------------------- */

static void test_uniform_stats(ms_dtype dt) {
  ms_tensor *t = vec(BIG, dt);
  ms_manual_seed(1);
  CHECK(ms_tensor_uniform_(t, -2, 3) == MS_OK);
  double mean, var, lo, hi;
  moments(t, &mean, &var, &lo, &hi);
  CHECK(lo >= -2 && hi < 3);
  CHECK(lo < -1.99 && hi > 2.99);
  CHECK_NEAR(mean, 0.5, 0.01);         /* sd of the mean: 0.0014 */
  CHECK_NEAR(var, 25.0 / 12, 0.015);   /* sd of the variance: 0.0019 */
  ms_tensor_release(t);
}

static void test_normal_stats(ms_dtype dt) {
  ms_tensor *t = vec(BIG, dt);
  ms_manual_seed(2);
  CHECK(ms_tensor_normal_(t, 0, 1) == MS_OK);
  double mean, var, lo, hi;
  moments(t, &mean, &var, &lo, &hi);
  CHECK_NEAR(mean, 0, 0.006);
  CHECK_NEAR(var, 1, 0.01);
  int64_t within = 0;
  for (int64_t i = 0; i < BIG; i++) within += fabs(ms_tensor_get_flat(t, i)) < 1;
  CHECK_NEAR((double)within / BIG, 0.682689, 0.003); /* the shape, not only two moments */
  CHECK(ms_tensor_normal_(t, 3, 2) == MS_OK);
  moments(t, &mean, &var, &lo, &hi);
  CHECK_NEAR(mean, 3, 0.012);
  CHECK_NEAR(sqrt(var), 2, 0.01);
  ms_tensor_release(t);
}

static void test_randint_stats(void) {
  ms_tensor *t = vec(BIG, MS_INT64);
  ms_manual_seed(3);
  CHECK(ms_tensor_randint_(t, -3, 7) == MS_OK);
  int64_t count[10] = {0}, bad = 0;
  const int64_t *v = ms_tensor_data(t);
  for (int64_t i = 0; i < BIG; i++) {
    if (v[i] < -3 || v[i] >= 7) bad++;
    else count[v[i] + 3]++;
  }
  CHECK(bad == 0);
  for (int k = 0; k < 10; k++) CHECK_NEAR((double)count[k], BIG / 10.0, 2000); /* sd 300 */
  /* the widest span wraps through int64 overflow without undefined behaviour */
  CHECK(ms_tensor_randint_(t, INT64_MIN, INT64_MAX) == MS_OK);
  int64_t neg = 0;
  for (int64_t i = 0; i < BIG; i++) neg += v[i] < 0;
  CHECK_NEAR((double)neg / BIG, 0.5, 0.005);
  ms_tensor_release(t);
}

static void test_bernoulli(void) {
  int64_t shape[2] = {1000, 1000};
  ms_tensor *p0 = ms_tensor_new_full(2, shape, MS_FLOAT32, 0);
  ms_tensor *p1 = ms_tensor_new_full(2, shape, MS_FLOAT64, 1);
  ms_tensor *p3 = ms_tensor_new_full(2, shape, MS_FLOAT32, 0.3);
  ms_tensor *b0 = ms_tensor_new_bernoulli(p0), *b1 = ms_tensor_new_bernoulli(p1);
  ms_tensor *b3 = ms_tensor_new_bernoulli(p3);
  CHECK(b0 && b1 && b3);
  CHECK(b3->dtype == MS_FLOAT32 && b1->dtype == MS_FLOAT64 && b3->ndim == 2 &&
        b3->shape[0] == 1000 && b3->shape[1] == 1000);
  double s0 = 0, s1 = 0, s3 = 0;
  int64_t other = 0;
  for (int64_t i = 0; i < BIG; i++) {
    double v = ms_tensor_get_flat(b3, i);
    s0 += ms_tensor_get_flat(b0, i), s1 += ms_tensor_get_flat(b1, i), s3 += v;
    other += v != 0 && v != 1;
  }
  CHECK(s0 == 0 && s1 == BIG && other == 0);
  CHECK_NEAR(s3 / BIG, 0.3, 0.003); /* sd 0.00046 */
  /* per-element probabilities, read through a non-contiguous (transposed) p */
  ms_tensor *mix = ms_tensor_new_zeros(2, (int64_t[]){2, 3}, MS_FLOAT16);
  ms_tensor_set_flat(mix, 1, 1), ms_tensor_set_flat(mix, 5, 1);
  ms_tensor *mt = ms_tensor_transpose(mix, 0, 1);
  ms_tensor *bm = ms_tensor_new_bernoulli(mt);
  CHECK(bm && bm->dtype == MS_FLOAT16 && bm->shape[0] == 3 && bm->shape[1] == 2);
  for (int64_t i = 0; i < 6; i++) CHECK(ms_tensor_get_flat(bm, i) == ms_tensor_get_flat(mt, i));
  ms_tensor_release(mix), ms_tensor_release(mt), ms_tensor_release(bm);
  ms_tensor_release(p0), ms_tensor_release(p1), ms_tensor_release(p3);
  ms_tensor_release(b0), ms_tensor_release(b1), ms_tensor_release(b3);
}

static bool is_permutation(const ms_tensor *t, int64_t n) {
  char *seen = calloc((size_t)n + 1, 1);
  bool ok = ms_tensor_numel(t) == n;
  for (int64_t i = 0; ok && i < n; i++) {
    int64_t v = ms_tensor_get_flat_int(t, i);
    ok = v >= 0 && v < n && !seen[v];
    if (ok) seen[v] = 1;
  }
  free(seen);
  return ok;
}

static void test_randperm(void) {
  ms_manual_seed(11);
  ms_tensor *p = ms_tensor_new_randperm(1000, MS_INT64);
  CHECK(p && p->dtype == MS_INT64 && is_permutation(p, 1000));
  int64_t fixed = 0;
  for (int64_t i = 0; i < 1000; i++) fixed += ms_tensor_get_flat_int(p, i) == i;
  CHECK(fixed < 10); /* expected 1 fixed point */
  ms_tensor *q = ms_tensor_new_randperm(1000, MS_INT64);
  CHECK(!same_bytes(p, q));
  ms_tensor_release(p), ms_tensor_release(q);
  ms_tensor *e = ms_tensor_new_randperm(0, MS_INT64);
  CHECK(e && ms_tensor_numel(e) == 0);
  ms_tensor_release(e);
  ms_tensor *f = ms_tensor_new_randperm(300, MS_FLOAT32);
  ms_tensor *i32 = ms_tensor_new_randperm(77, MS_INT32);
  CHECK(f && f->dtype == MS_FLOAT32 && is_permutation(f, 300));
  CHECK(i32 && i32->dtype == MS_INT32 && is_permutation(i32, 77));
  ms_tensor_release(f), ms_tensor_release(i32);
  /* each of 4 values leads a randperm(4) a quarter of the time */
  int64_t first[4] = {0};
  for (int k = 0; k < 40000; k++) {
    ms_tensor *r = ms_tensor_new_randperm(4, MS_INT64);
    first[ms_tensor_get_flat_int(r, 0)]++;
    ms_tensor_release(r);
  }
  for (int k = 0; k < 4; k++) CHECK_NEAR((double)first[k], 10000, 600); /* sd 87 */
}

/* ---- dtypes, layouts, versions -------------------------------------------------------------- */

/* Half-precision fills are the float32 stream rounded: same seed, same values within rounding. */
static void test_half_dtypes(ms_dtype dt, double rel) {
  ms_tensor *f = vec(4096, MS_FLOAT32), *h = vec(4096, dt);
  ms_manual_seed(12);
  ms_tensor_uniform_(f, 1, 2);
  ms_manual_seed(12);
  CHECK(ms_tensor_uniform_(h, 1, 2) == MS_OK);
  double worst = 0;
  for (int64_t i = 0; i < 4096; i++)
    worst = fmax(worst, fabs(ms_tensor_get_flat(h, i) - ms_tensor_get_flat(f, i)));
  CHECK(worst <= 2 * rel);
  CHECK(ms_tensor_normal_(h, 0, 1) == MS_OK);
  double mean, var, lo, hi;
  moments(h, &mean, &var, &lo, &hi);
  CHECK_NEAR(mean, 0, 0.1);
  CHECK_NEAR(var, 1, 0.15);
  ms_tensor_release(f), ms_tensor_release(h);
}

static void test_integer_targets(void) {
  ms_tensor *i32 = vec(10000, MS_INT32), *u8 = vec(10000, MS_UINT8), *f = vec(10000, MS_FLOAT32);
  CHECK(ms_tensor_randint_(i32, -100000, 100000) == MS_OK);
  CHECK(ms_tensor_randint_(u8, 0, 256) == MS_OK);
  CHECK(ms_tensor_randint_(f, -5, 5) == MS_OK);
  int bad = 0;
  for (int64_t i = 0; i < 10000; i++) {
    int64_t a = ms_tensor_get_flat_int(i32, i);
    double b = ms_tensor_get_flat(f, i);
    bad += a < -100000 || a >= 100000 || b < -5 || b >= 5 || b != floor(b);
  }
  CHECK(bad == 0);
  ms_manual_seed(13);
  ms_tensor_randint_(i32, 0, 50);
  ms_tensor *i64 = vec(10000, MS_INT64);
  ms_manual_seed(13);
  ms_tensor_randint_(i64, 0, 50);
  int differ = 0;
  for (int64_t i = 0; i < 10000; i++)
    differ += ms_tensor_get_flat_int(i32, i) != ms_tensor_get_flat_int(i64, i);
  CHECK(differ == 0);
  ms_tensor_release(i32), ms_tensor_release(u8), ms_tensor_release(f), ms_tensor_release(i64);
}

/* A transposed view is filled in its logical (row-major) order, like a contiguous tensor. */
static void test_non_contiguous(void) {
  ms_tensor *base = ms_tensor_new_zeros(2, (int64_t[]){3, 5}, MS_FLOAT64);
  ms_tensor *view = ms_tensor_transpose(base, 0, 1), *flat = vec(15, MS_FLOAT64);
  int v0 = ms_tensor_version(base);
  ms_manual_seed(14);
  CHECK(ms_tensor_normal_(view, 1, 3) == MS_OK);
  CHECK(ms_tensor_version(base) > v0);
  ms_manual_seed(14);
  ms_tensor_normal_(flat, 1, 3);
  int differ = 0;
  for (int64_t i = 0; i < 15; i++)
    differ += ms_tensor_get_flat(view, i) != ms_tensor_get_flat(flat, i);
  CHECK(differ == 0);
  int v1 = ms_tensor_version(flat);
  ms_tensor_uniform_(flat, 0, 1);
  CHECK(ms_tensor_version(flat) > v1);
  ms_tensor_release(base), ms_tensor_release(view), ms_tensor_release(flat);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void test_errors(void) {
  ms_tensor *i = vec(4, MS_INT64), *f = vec(4, MS_FLOAT32), *u8 = vec(4, MS_UINT8);
  CHECK(ms_tensor_uniform_(i, 0, 1) == MS_ERR_ARG);
  CHECK_ERROR_HAS("uniform_: expected a floating tensor, got int64");
  CHECK(ms_tensor_normal_(i, 0, 1) == MS_ERR_ARG);
  CHECK_ERROR_HAS("normal_: expected a floating tensor, got int64");
  CHECK(ms_tensor_uniform_(f, 2, 1) == MS_ERR_ARG);
  CHECK_ERROR_HAS("uniform_: expected finite low <= high, got low = 2, high = 1");
  CHECK(ms_tensor_uniform_(f, -1e30, 1e300) == MS_ERR_ARG);
  CHECK_ERROR_HAS("uniform_: the interval [-1e+30, 1e+300) is too wide for float32");
  CHECK(ms_tensor_normal_(f, 0, -1) == MS_ERR_ARG);
  CHECK_ERROR_HAS("normal_: expected std >= 0 (and finite), got -1");
  CHECK(ms_tensor_randint_(i, 5, 5) == MS_ERR_ARG);
  CHECK_ERROR_HAS("randint_: low (5) must be less than high (5)");
  CHECK(ms_tensor_randint_(u8, 0, 300) == MS_ERR_ARG);
  CHECK_ERROR_HAS("randint_: range [0, 300) does not fit uint8");
  ms_tensor *bad = ms_tensor_new_full(1, (int64_t[]){3}, MS_FLOAT32, 0.5);
  ms_tensor_set_flat(bad, 2, 1.5);
  CHECK(ms_tensor_new_bernoulli(bad) == NULL);
  CHECK_ERROR_HAS("bernoulli: expected probabilities in [0, 1], got 1.5 at flat index 2");
  CHECK(ms_tensor_new_bernoulli(i) == NULL);
  CHECK_ERROR_HAS("bernoulli: expected a floating tensor of probabilities, got int64");
  CHECK(ms_tensor_new_randperm(-1, MS_INT64) == NULL);
  CHECK_ERROR_HAS("randperm: n must be non-negative, got -1");
  CHECK(ms_tensor_new_randperm(300, MS_UINT8) == NULL);
  CHECK_ERROR_HAS("randperm: n (300) is too large for dtype uint8");
  CHECK(ms_tensor_new_randperm(2, MS_BOOL) == NULL);
  CHECK_ERROR_HAS("randperm: dtype bool is not supported");
  ms_tensor_release(i), ms_tensor_release(f), ms_tensor_release(u8), ms_tensor_release(bad);
}

int main(void) {
  test_known_answers();
  test_counter_scheme();
  test_batched_fills_match_scalar();
  test_offsets_advance();
  test_reproducible();
  test_thread_independent();
  test_thread_safe_reservation();
  test_uniform_stats(MS_FLOAT32);
  test_uniform_stats(MS_FLOAT64);
  test_normal_stats(MS_FLOAT32);
  test_normal_stats(MS_FLOAT64);
  test_randint_stats();
  test_bernoulli();
  test_randperm();
  test_half_dtypes(MS_BFLOAT16, 0x1p-7);
  test_half_dtypes(MS_FLOAT16, 0x1p-10);
  test_integer_targets();
  test_non_contiguous();
  test_errors();
  return ms_test_finish();
}
