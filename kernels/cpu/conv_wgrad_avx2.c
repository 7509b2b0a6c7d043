/* conv_wgrad_avx2.c: the float32 weight (and bias) gradient of a convolution with unit column
 * stride and no padding, as dot products, with no packing: with those, row k = (c, i, j) of the
 * column matrix over one output row is a contiguous slice of x, and gout's rows are contiguous,
 * so a 3 x 4 tile of gW^T (3 column-matrix rows by 4 output channels) is 12 vector dot products
 * read straight from both tensors. Built with -mavx2 -mfma; called only where the CPU has both.
 *
 * Letters as conv_gemm.c: K = C*KH*KW, P = OH*OW; acc is gW^T (K x O, row k at acc + k*O). */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/conv_gemm.h"
#include "kernels/cpu/conv_geom.h"
#include "kernels/cpu/gemm_ukr.h"

enum { KT = 3, OT = 4 };

typedef struct wg_job {
  const ms_k_conv2d_geom *g;
  const float *x, *gout;
  const int64_t *koff;
  int64_t K, P;
  bool bias;
  float *part[MS_CONV_WGRAD_MAX_TEAM]; /* per-member sums: gW^T then the bias's O values */
  int team;
  _Atomic int failed;
} wg_job;

/* The lane sums of a, b, c, d, in that order. */
static inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

/* Three x vectors against four gout vectors: 12 multiply-adds, each gout vector loaded once. */
#define WG_STEP(LOADX, LOADG)                                                                      \
  do {                                                                                             \
    __m256 a0 = LOADX(x0 + v), a1 = LOADX(x1 + v), a2 = LOADX(x2 + v), b;                          \
    b = LOADG(g0 + v), c00 = _mm256_fmadd_ps(a0, b, c00), c10 = _mm256_fmadd_ps(a1, b, c10),       \
    c20 = _mm256_fmadd_ps(a2, b, c20);                                                             \
    b = LOADG(g1 + v), c01 = _mm256_fmadd_ps(a0, b, c01), c11 = _mm256_fmadd_ps(a1, b, c11),       \
    c21 = _mm256_fmadd_ps(a2, b, c21);                                                             \
    b = LOADG(g2 + v), c02 = _mm256_fmadd_ps(a0, b, c02), c12 = _mm256_fmadd_ps(a1, b, c12),       \
    c22 = _mm256_fmadd_ps(a2, b, c22);                                                             \
    b = LOADG(g3 + v), c03 = _mm256_fmadd_ps(a0, b, c03), c13 = _mm256_fmadd_ps(a1, b, c13),       \
    c23 = _mm256_fmadd_ps(a2, b, c23);                                                             \
  } while (0)
#define WG_LOADU(p) _mm256_loadu_ps(p)
#define WG_LOADM(p) _mm256_maskload_ps((p), tail)

/* out[r * 4 + s] = sum over the sample's output pixels of x row xr[r] times gout row gr[s]. A
 * tile that is short of rows or channels repeats its last one (the caller drops the repeats). */
static void tile_3x4(const wg_job *j, const float *const xr[KT], const float *const gr[OT], __m256i tail,
                     float out[KT * OT]) {
  const ms_k_conv2d_geom *g = j->g;
  const int64_t ow = g->ow, full = ow / 8 * 8, xstep = g->sh * g->w;
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00,
         c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00;
  for (int64_t oh = 0; oh < g->oh; oh++) {
    const float *x0 = xr[0] + oh * xstep, *x1 = xr[1] + oh * xstep, *x2 = xr[2] + oh * xstep;
    const float *g0 = gr[0] + oh * ow, *g1 = gr[1] + oh * ow, *g2 = gr[2] + oh * ow, *g3 = gr[3] + oh * ow;
    int64_t v = 0;
    for (; v < full; v += 8) WG_STEP(WG_LOADU, WG_LOADU);
    if (v < ow) WG_STEP(WG_LOADM, WG_LOADM); /* masked lanes read nothing and add zero */
  }
  _mm_storeu_ps(out, hsum4(c00, c01, c02, c03));
  _mm_storeu_ps(out + 4, hsum4(c10, c11, c12, c13));
  _mm_storeu_ps(out + 8, hsum4(c20, c21, c22, c23));
}

/* The sum of n floats. */
static float sum_row(const float *s, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(s + i));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  h = _mm_hadd_ps(h, h), h = _mm_hadd_ps(h, h);
  float r = _mm_cvtss_f32(h);
  for (; i < n; i++) r += s[i];
  return r;
}

/* One sample's contribution to acc. Channels outermost: a tile's four gout rows stay in L1 while
 * x (smaller, and read three taps at a time from the same lines) streams from L2. */
static void sample_grad(const wg_job *j, const float *xs, const float *gs, __m256i tail, float *acc) {
  const ms_k_conv2d_geom *g = j->g;
  const int64_t K = j->K, O = g->o;
  float t[KT * OT];
  for (int64_t o0 = 0; o0 < O; o0 += OT) {
    int os = (int)(O - o0 < OT ? O - o0 : OT);
    const float *gr[OT];
    for (int s = 0; s < OT; s++) gr[s] = gs + (o0 + (s < os ? s : os - 1)) * j->P;
    for (int64_t k0 = 0; k0 < K; k0 += KT) {
      int kr = (int)(K - k0 < KT ? K - k0 : KT);
      const float *xr[KT];
      for (int r = 0; r < KT; r++) xr[r] = xs + j->koff[k0 + (r < kr ? r : kr - 1)];
      tile_3x4(j, xr, gr, tail, t);
      for (int r = 0; r < kr; r++)
        for (int s = 0; s < os; s++) acc[(k0 + r) * O + o0 + s] += t[r * OT + s];
    }
  }
  if (j->bias)
    for (int64_t o = 0; o < O; o++) acc[K * O + o] += sum_row(gs + o * j->P, j->P);
}

static void member(void *ctx, int t, int nt) {
  wg_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  size_t n_acc = (size_t)((j->K + 1) * g->o);
  if (t == 0) j->team = nt;
  float *acc = ms_k_thread_buffer(MS_K_BUF_CONV_T, n_acc * sizeof(float));
  j->part[t] = acc;
  if (!acc) {
    j->failed = 1;
    return;
  }
  memset(acc, 0, n_acc * sizeof(float));
  int64_t rem = g->ow % 8;
  __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  int64_t q = g->n / nt, r = g->n % nt;
  int64_t nb = t * q + (t < r ? t : r), ne = nb + q + (t < r ? 1 : 0);
  for (int64_t n = nb; n < ne; n++)
    sample_grad(j, j->x + n * g->c * g->h * g->w, j->gout + n * g->o * j->P, tail, acc);
}

int ms_k_conv2d_weight_grad_dot_avx2(const ms_k_conv2d_geom *g, const float *x, const float *gout, float *gw,
                                     float *gb) {
  const int64_t *koff = ms_k_conv_row_offsets(g);
  if (!koff) return -1;
  wg_job j;
  memset(&j, 0, sizeof j);
  j.g = g, j.x = x, j.gout = gout, j.koff = koff, j.bias = gb != NULL;
  j.K = g->c * g->kh * g->kw, j.P = g->oh * g->ow;
  ms_k_parallel_team(ms_k_conv_wgrad_team(g), member, &j);
  if (j.failed) return -1;
  ms_k_conv_wgrad_reduce(g, j.part, j.team, gw, gb);
  return 0;
}
