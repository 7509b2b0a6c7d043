/* pool.c: 2-D max and average pooling on the CPU, forward and backward. Planes (one per sample
 * and channel) are independent, so the pool splits them; max pooling records each winner's
 * index in the same pass, which is all its backward needs. Values are read as double (exact for
 * float32) so one body serves both dtypes; max pooling also takes bfloat16, a plane at a time
 * through its float32 bodies. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/gemm_ukr.h"
#include "kernels/cpu/pool_avx2.h"

static inline double load(const void *p, int64_t i, bool f64) {
  return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static inline void store(void *p, int64_t i, bool f64, double v) {
  if (f64) ((double *)p)[i] = v;
  else ((float *)p)[i] = (float)v;
}

typedef struct pool_job {
  ms_k_dtype dt; /* F32 or F64; max pooling also BF16 */
  bool avx2;     /* the 2x2 float32 rows may use pool_avx2.c */
  const ms_k_pool2d_geom *g;
  const ms_k_pool_windows *win;
  const void *in;
  void *out;
  const int64_t *cidx;
  int64_t *idx;
  _Atomic int failed; /* a bfloat16 plane buffer could not be allocated */
} pool_job;

/* Planes per parallel piece: enough work to be worth a thread. */
static int64_t plane_grain(const ms_k_pool2d_geom *g) {
  int64_t work = g->oh * g->ow * (g->kh * g->kw > 0 ? g->kh * g->kw : 1);
  return work >= 16384 ? 1 : 16384 / (work + 1) + 1;
}

/* The window taps k in [*lo, *hi) of a dilated window starting at s that land in [0, n). */
static void taps(int64_t s, int64_t k, int64_t d, int64_t n, int64_t *lo, int64_t *hi) {
  int64_t a = s >= 0 ? 0 : (-s + d - 1) / d, b = n - 1 - s < 0 ? 0 : (n - 1 - s) / d + 1;
  *lo = a;
  *hi = b < k ? (b > a ? b : a) : k;
}

/* One plane (in: H x W, out and idx: OH x OW, indices flat within the plane). Inlined with a
 * constant f64, so each dtype gets its own loop without a per-element branch. */
static inline __attribute__((always_inline)) void max_forward_plane(const ms_k_pool2d_geom *g, const void *in,
                                                                    void *out, int64_t *idx, bool f64) {
  for (int64_t oh = 0; oh < g->oh; oh++) {
    int64_t h0 = oh * g->sh - g->ph, ilo, ihi;
    taps(h0, g->kh, g->dh, g->h, &ilo, &ihi);
    for (int64_t ow = 0; ow < g->ow; ow++) {
      int64_t w0 = ow * g->sw - g->pw, klo, khi, at = -1;
      taps(w0, g->kw, g->dw, g->w, &klo, &khi);
      double best = -INFINITY;
      for (int64_t i = ilo; i < ihi; i++) {
        int64_t row = (h0 + i * g->dh) * g->w + w0;
        for (int64_t k = klo; k < khi; k++) {
          double v = load(in, row + k * g->dw, f64);
          if (at < 0 || v > best || isnan(v)) best = v, at = row + k * g->dw; /* NaN sticks, as in PyTorch */
        }
      }
      store(out, oh * g->ow + ow, f64, best);
      if (idx) idx[oh * g->ow + ow] = at;
    }
  }
}

/* The common 2x2 window, stride 2, no padding or dilation, in float32: one pass over each pair
 * of input rows, branch-free selects (the compiler turns them into blends or cmovs) in PyTorch's
 * scan order (row-major; a later value wins when greater or NaN), indices only when wanted. */
static bool is_2x2(const ms_k_pool2d_geom *g) {
  return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 &&
         g->dh == 1 && g->dw == 1;
}

/* t ? x : y for t = 0 or -1, on the bits: branch-free, so the loop below vectorises. */
static inline float select_f32(int32_t t, float x, float y) {
  union { float f; int32_t u; } a = {x}, b = {y}, r;
  r.u = (a.u & t) | (b.u & ~t);
  return r.f;
}

static inline __attribute__((always_inline)) void max2x2_plane(const pool_job *j, const float *in, float *out,
                                                               int64_t *idx, bool with_idx) {
  const ms_k_pool2d_geom *g = j->g;
  for (int64_t oh = 0; oh < g->oh; oh++) {
    const float *restrict r0 = in + 2 * oh * g->w, *restrict r1 = r0 + g->w;
    float *restrict o = out + oh * g->ow;
    int64_t *restrict ix = with_idx ? idx + oh * g->ow : NULL;
    const int64_t base = 2 * oh * g->w, W = g->w, OW = g->ow; /* locals: stores cannot alias them */
    int64_t ow = j->avx2 ? ms_k_max2x2_row_avx2(r0, r1, OW, o, ix, base, W) : 0;
    for (; ow < OW; ow++) {
      float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
      int32_t tb = -(int32_t)((b > a) | (b != b)); /* | not ||: no branch */
      float m = select_f32(tb, b, a);
      int32_t tc = -(int32_t)((c > m) | (c != c));
      m = select_f32(tc, c, m);
      int32_t td = -(int32_t)((d > m) | (d != d));
      o[ow] = select_f32(td, d, m);
      if (with_idx) { /* the winner's tap 0..3 */
        int32_t tap = tb & 1;
        tap = (tc & 2) | (~tc & tap);
        tap = (td & 3) | (~td & tap);
        ix[ow] = base + 2 * ow + (int64_t)(tap >> 1) * W + (tap & 1);
      }
    }
  }
}

/* One float32 plane by the fastest body that takes it. */
static void max_forward_plane_f32(const pool_job *j, const float *in, float *out, int64_t *idx) {
  if (!is_2x2(j->g)) max_forward_plane(j->g, in, out, idx, false);
  else if (idx) max2x2_plane(j, in, out, idx, true);
  else max2x2_plane(j, in, out, idx, false);
}

/* bfloat16 planes go through the float32 bodies a plane at a time, widened into and narrowed
 * from the thread's buffers (in L1 or L2 for the usual planes), never as a whole float32 copy of
 * the tensor; a maximum is one of its inputs, so the narrowing is exact. */
static bool bf16_plane_buffers(const ms_k_pool2d_geom *g, float **a, float **b) {
  *a = ms_k_thread_buffer(MS_K_BUF_POOL_A, sizeof(float) * (size_t)(g->h * g->w));
  *b = ms_k_thread_buffer(MS_K_BUF_POOL_B, sizeof(float) * (size_t)(g->oh * g->ow));
  return *a && *b;
}

static void max_forward_range(void *ctx, int64_t begin, int64_t end) {
  pool_job *j = ctx;
  const ms_k_pool2d_geom *g = j->g;
  int64_t hw = g->h * g->w, ohw = g->oh * g->ow;
  float *xin = NULL, *xout = NULL;
  if (j->dt == MS_K_BF16 && !bf16_plane_buffers(g, &xin, &xout)) {
    j->failed = 1;
    return;
  }
  for (int64_t pl = begin; pl < end; pl++) {
    int64_t *idx = j->idx ? j->idx + pl * ohw : NULL;
    if (j->dt == MS_K_F64) {
      max_forward_plane(g, (const double *)j->in + pl * hw, (double *)j->out + pl * ohw, idx, true);
    } else if (j->dt == MS_K_F32) {
      max_forward_plane_f32(j, (const float *)j->in + pl * hw, (float *)j->out + pl * ohw, idx);
    } else {
      ms_k_cast(hw, xin, MS_K_F32, 1, (const uint16_t *)j->in + pl * hw, MS_K_BF16, 1);
      max_forward_plane_f32(j, xin, xout, idx);
      ms_k_cast(ohw, (uint16_t *)j->out + pl * ohw, MS_K_BF16, 1, xout, MS_K_F32, 1);
    }
  }
}

int ms_k_max_pool2d_forward(ms_k_dtype dt, const ms_k_pool2d_geom *g, const void *x, void *out,
                            int64_t *indices) {
  pool_job j = {.dt = dt, .avx2 = ms_k_cpu_avx2(), .g = g, .in = x, .out = out, .idx = indices};
  ms_k_parallel_for(g->planes, plane_grain(g), max_forward_range, &j);
  return j.failed ? -1 : 0;
}

/* One float64 plane's gradient: zeros, then each winner's gradient added at its index. */
static void max_backward_plane_f64(const ms_k_pool2d_geom *g, double *gx, const double *go, const int64_t *at) {
  memset(gx, 0, sizeof(double) * (size_t)(g->h * g->w));
  for (int64_t o = 0; o < g->oh * g->ow; o++)
    if (at[o] >= 0) gx[at[o]] += go[o];
}

/* The same in float32 (each plane's winners are distinct for non-overlapping windows, but
 * overlapping ones may repeat: hence +=). */
static void max_backward_scatter_f32(const ms_k_pool2d_geom *g, float *gx, const float *go, const int64_t *at) {
  memset(gx, 0, sizeof(float) * (size_t)(g->h * g->w));
  for (int64_t o = 0; o < g->oh * g->ow; o++)
    if (at[o] >= 0) gx[at[o]] += go[o];
}

/* The 2x2 stride-2 window in float32: each window's four input cells are written once, the
 * winner's gradient and three zeros, in order, instead of a memset of the plane followed by a
 * scatter (one pass over gx instead of two). 0.0f + g keeps the scatter's bits (-0 becomes +0).
 * Returns false, having written a partial plane, when an index is not in its window (indices
 * not made by the forward); the caller then redoes the plane by scatter. */
static bool max2x2_backward_plane(const pool_job *j, float *gx, const float *go, const int64_t *at) {
  const ms_k_pool2d_geom *g = j->g;
  const int64_t W = g->w, OW = g->ow, OH = g->oh;
  int bad = 0;
  for (int64_t oh = 0; oh < OH; oh++) {
    float *restrict r0 = gx + 2 * oh * W, *restrict r1 = r0 + W;
    const float *restrict gr = go + oh * OW;
    const int64_t *restrict ar = at + oh * OW;
    const int64_t base = 2 * oh * W;
    int64_t ow = j->avx2 ? ms_k_max2x2_backward_row_avx2(r0, r1, gr, ar, OW, base, W, &bad) : 0;
    for (; ow < OW; ow++) {
      int64_t t = ar[ow] - base - 2 * ow;
      float v = 0.0f + gr[ow];
      /* & and select_f32, not && and ?: : the winner is random, so branches would mispredict */
      bad |= (t != 0) & (t != 1) & (t != W) & (t != W + 1);
      r0[2 * ow] = select_f32(-(int32_t)(t == 0), v, 0.0f);
      r0[2 * ow + 1] = select_f32(-(int32_t)(t == 1), v, 0.0f);
      r1[2 * ow] = select_f32(-(int32_t)(t == W), v, 0.0f);
      r1[2 * ow + 1] = select_f32(-(int32_t)(t == W + 1), v, 0.0f);
    }
    for (int64_t w = 2 * OW; w < W; w++) r0[w] = r1[w] = 0.0f; /* an odd last column */
  }
  for (int64_t h = 2 * OH; h < g->h; h++) /* an odd last row */
    memset(gx + h * W, 0, sizeof(float) * (size_t)W);
  return !bad;
}

static void max_backward_plane_f32(const pool_job *j, float *gx, const float *go, const int64_t *at) {
  if (!is_2x2(j->g) || !max2x2_backward_plane(j, gx, go, at)) max_backward_scatter_f32(j->g, gx, go, at);
}

/* bfloat16: as the forward, a plane at a time through float32; the gradient is summed in float32
 * and rounded once (exact where windows do not overlap: each cell gets one gradient or none). */
static void max_backward_range(void *ctx, int64_t begin, int64_t end) {
  pool_job *j = ctx;
  const ms_k_pool2d_geom *g = j->g;
  int64_t hw = g->h * g->w, ohw = g->oh * g->ow;
  float *gxw = NULL, *gow = NULL;
  if (j->dt == MS_K_BF16 && !bf16_plane_buffers(g, &gxw, &gow)) {
    j->failed = 1;
    return;
  }
  for (int64_t pl = begin; pl < end; pl++) {
    const int64_t *at = j->cidx + pl * ohw;
    if (j->dt == MS_K_F64) {
      max_backward_plane_f64(g, (double *)j->out + pl * hw, (const double *)j->in + pl * ohw, at);
    } else if (j->dt == MS_K_F32) {
      max_backward_plane_f32(j, (float *)j->out + pl * hw, (const float *)j->in + pl * ohw, at);
    } else {
      ms_k_cast(ohw, gow, MS_K_F32, 1, (const uint16_t *)j->in + pl * ohw, MS_K_BF16, 1);
      max_backward_plane_f32(j, gxw, gow, at);
      ms_k_cast(hw, (uint16_t *)j->out + pl * hw, MS_K_BF16, 1, gxw, MS_K_F32, 1);
    }
  }
}

int ms_k_max_pool2d_backward(ms_k_dtype dt, const ms_k_pool2d_geom *g, const void *gout,
                             const int64_t *indices, void *gx) {
  pool_job j = {.dt = dt, .avx2 = ms_k_cpu_avx2(), .g = g, .in = gout, .out = gx, .cidx = indices};
  ms_k_parallel_for(g->planes, plane_grain(g), max_backward_range, &j);
  return j.failed ? -1 : 0;
}

/* ---- average pooling over explicit windows ------------------------------------------------ */

static inline __attribute__((always_inline)) void avg_forward_body(const pool_job *j, int64_t begin, int64_t end,
                                                                   bool f64) {
  const ms_k_pool2d_geom *g = j->g;
  const ms_k_pool_windows *w = j->win;
  for (int64_t pl = begin; pl < end; pl++) {
    int64_t base = pl * g->h * g->w, obase = pl * g->oh * g->ow;
    for (int64_t oh = 0; oh < g->oh; oh++)
      for (int64_t ow = 0; ow < g->ow; ow++) {
        double sum = 0;
        for (int64_t ih = w->hs[oh]; ih < w->he[oh]; ih++)
          for (int64_t iw = w->ws[ow]; iw < w->we[ow]; iw++) sum += load(j->in, base + ih * g->w + iw, f64);
        store(j->out, obase + oh * g->ow + ow, f64, sum / (double)(w->hdiv[oh] * w->wdiv[ow]));
      }
  }
}

static void avg_forward_range(void *ctx, int64_t begin, int64_t end) {
  const pool_job *j = ctx;
  if (j->dt == MS_K_F64) avg_forward_body(j, begin, end, true);
  else avg_forward_body(j, begin, end, false);
}

void ms_k_avg_pool2d_forward(ms_k_dtype dt, const ms_k_pool2d_geom *g, const ms_k_pool_windows *win,
                             const void *x, void *out) {
  pool_job j = {.dt = dt, .g = g, .win = win, .in = x, .out = out};
  ms_k_parallel_for(g->planes, plane_grain(g), avg_forward_range, &j);
}

static inline __attribute__((always_inline)) void avg_backward_body(const pool_job *j, int64_t begin, int64_t end,
                                                                    bool f64) {
  const ms_k_pool2d_geom *g = j->g;
  const ms_k_pool_windows *w = j->win;
  size_t es = f64 ? 8 : 4;
  for (int64_t pl = begin; pl < end; pl++) {
    int64_t base = pl * g->h * g->w, obase = pl * g->oh * g->ow;
    memset((char *)j->out + (size_t)base * es, 0, (size_t)(g->h * g->w) * es);
    for (int64_t oh = 0; oh < g->oh; oh++)
      for (int64_t ow = 0; ow < g->ow; ow++) {
        double v = load(j->in, obase + oh * g->ow + ow, f64) / (double)(w->hdiv[oh] * w->wdiv[ow]);
        for (int64_t ih = w->hs[oh]; ih < w->he[oh]; ih++)
          for (int64_t iw = w->ws[ow]; iw < w->we[ow]; iw++) {
            int64_t at = base + ih * g->w + iw;
            store(j->out, at, f64, load(j->out, at, f64) + v);
          }
      }
  }
}

static void avg_backward_range(void *ctx, int64_t begin, int64_t end) {
  const pool_job *j = ctx;
  if (j->dt == MS_K_F64) avg_backward_body(j, begin, end, true);
  else avg_backward_body(j, begin, end, false);
}

void ms_k_avg_pool2d_backward(ms_k_dtype dt, const ms_k_pool2d_geom *g,
                              const ms_k_pool_windows *win, const void *gout, void *gx) {
  pool_job j = {.dt = dt, .g = g, .win = win, .in = gout, .out = gx};
  ms_k_parallel_for(g->planes, plane_grain(g), avg_backward_range, &j);
}

/* ---- the CPU's slots of the kernel table (kernel_table.h): the kernels above, called as the
 * engine called them before the table. Max pooling returns -1 when a bfloat16 plane's work
 * buffer could not be had. ---- */

int ms_k_cpu_max_pool2d(const ms_k_exec *x, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                        const void *in, void *out, int64_t *indices) {
  (void)x;
  return ms_k_max_pool2d_forward(dt, g, in, out, indices);
}

int ms_k_cpu_max_pool2d_backward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                                 const void *gout, const int64_t *indices, void *gx) {
  (void)x;
  return ms_k_max_pool2d_backward(dt, g, gout, indices, gx);
}

int ms_k_cpu_avg_pool2d(const ms_k_exec *x, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                        const ms_k_pool_windows *win, const void *in, void *out) {
  (void)x;
  ms_k_avg_pool2d_forward(dt, g, win, in, out);
  return 0;
}

int ms_k_cpu_avg_pool2d_backward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                                 const ms_k_pool_windows *win, const void *gout, void *gx) {
  (void)x;
  ms_k_avg_pool2d_backward(dt, g, win, gout, gx);
  return 0;
}
