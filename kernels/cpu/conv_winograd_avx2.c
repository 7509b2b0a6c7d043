/* conv_winograd_avx2.c: one block of Winograd F(2x2, 3x3) tiles (conv_winograd.h has the letters):
 * the input transform V = B^T d B of each 4x4 patch, eight tiles to a vector, written straight into
 * the packed B-panel layout of the SGEMM micro-kernel; per MR-row slice of the output channels the
 * 16 GEMMs M[xi] = U[xi] V[xi] over the source channels; the inverse transform A^T M A of that
 * slice (still in L1) into the output, bias added there.
 * B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/conv_winograd.h"

/* A block's tiles (all of one sample): where each reads its patch in the source view (see
 * src_view) and writes its top-left output, and which quads of them lie side by side in a row. */
typedef struct tile_map {
  int64_t src[MS_WINO_TB_MAX]; /* patch offset in the view's channel 0 */
  int64_t dst[MS_WINO_TB_MAX]; /* top-left output offset in the sample's channel 0 */
  unsigned char full[MS_WINO_TB_MAX]; /* bit 0: the second output column exists; bit 1: the row */
  unsigned char iquad[MS_WINO_TB_MAX / 4]; /* four patches two columns apart in one row */
  unsigned char oquad[MS_WINO_TB_MAX / 4]; /* four full tiles side by side in one output row */
  int nn; /* tiles in the block; positions up to the next multiple of NR read zeros */
} tile_map;

/* The source as the patches read it: the sample itself where every patch lies inside, else a
 * zero-bordered copy (in the thread's MS_K_BUF_CONV_A slot) of HP = 2 * tiles_h + 2 rows of
 * WP = 2 * tiles_w + 2, so that no patch needs bounds checks. */
typedef struct src_view {
  const float *base;
  int64_t rs, cs; /* row and channel strides */
  int64_t n; /* the sample it shows, -1 for none yet */
} src_view;

static bool view_direct(const ms_k_wino_job *j) {
  return j->pt == 0 && j->pl == 0 && 2 * j->tiles_h + 2 <= j->hs && 2 * j->tiles_w + 2 <= j->ws;
}

static int view_sample(const ms_k_wino_job *j, int64_t n, src_view *v) {
  if (v->n == n) return 0;
  const float *s = j->src + n * j->cs * j->hs * j->ws;
  v->n = n;
  if (view_direct(j)) {
    v->base = s, v->rs = j->ws, v->cs = j->hs * j->ws;
    return 0;
  }
  int64_t hp = 2 * j->tiles_h + 2, wp = 2 * j->tiles_w + 2;
  float *pad = ms_k_thread_buffer(MS_K_BUF_CONV_A, sizeof(float) * (size_t)(j->cs * hp * wp));
  if (!pad) return -1;
  /* source rows and columns past the last patch are never read */
  int64_t rows = j->hs < hp - j->pt ? j->hs : hp - j->pt, cols = j->ws < wp - j->pl ? j->ws : wp - j->pl;
  /* only the border is zeroed: the plane is written once, in order */
  for (int64_t c = 0; c < j->cs; c++) {
    float *pc = pad + c * hp * wp;
    memset(pc, 0, sizeof(float) * (size_t)(j->pt * wp + j->pl));
    for (int64_t r = 0; r < rows; r++) {
      float *d = pc + (r + j->pt) * wp + j->pl;
      memcpy(d, s + (c * j->hs + r) * j->ws, sizeof(float) * (size_t)cols);
      memset(d + cols, 0, sizeof(float) * (size_t)(r + 1 < rows ? wp - cols : (hp - r - j->pt) * wp - cols - j->pl));
    }
  }
  v->base = pad, v->rs = wp, v->cs = hp * wp;
  return 0;
}

/* The block of the view's sample from tile t0 (row-major over the sample's tile grid) on. */
static void map_block(const ms_k_wino_job *j, const src_view *v, int64_t t0, tile_map *m) {
  int64_t per = j->tiles_h * j->tiles_w, left = per - t0;
  m->nn = (int)(left < j->tb ? left : j->tb);
  int64_t th = t0 / j->tiles_w, tw = t0 % j->tiles_w;
  for (int q = 0; q < m->nn; q++) {
    m->src[q] = 2 * th * v->rs + 2 * tw;
    m->dst[q] = 2 * th * j->ow + 2 * tw;
    m->full[q] = (unsigned char)((2 * tw + 1 < j->ow) | (2 * th + 1 < j->oh) << 1);
    if (++tw == j->tiles_w) tw = 0, th++;
  }
  for (int q = 0; q < MS_WINO_TB_MAX; q += 4) {
    bool in = q + 4 <= m->nn, out = in;
    for (int l = 1; in && l < 4; l++) in = m->src[q + l] == m->src[q] + 2 * l;
    for (int l = 0; out && l < 4; l++) out = m->full[q + l] == 3 && m->dst[q + l] == m->dst[q] + 2 * l;
    m->iquad[q / 4] = in, m->oquad[q / 4] = out;
  }
}

/* Row r of eight patches split into columns, tiles 0..7 in the vector: d[k] = column k. */

/* Each half of the eight a quad side by side (patches two columns apart): a row is read whole
 * per quad (s0: tiles 0..3, s1: tiles 4..7) and split into even and odd columns. */
static inline void quad_rows(const float *s0, const float *s1, __m256 d[4]) {
  __m256 a = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s0)), _mm_loadu_ps(s1), 1);
  __m256 b = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s0 + 4)), _mm_loadu_ps(s1 + 4), 1);
  __m256 c = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s0 + 2)), _mm_loadu_ps(s1 + 2), 1);
  __m256 e = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s0 + 6)), _mm_loadu_ps(s1 + 6), 1);
  d[0] = _mm256_shuffle_ps(a, b, 0x88), d[1] = _mm256_shuffle_ps(a, b, 0xDD);
  d[2] = _mm256_shuffle_ps(c, e, 0x88), d[3] = _mm256_shuffle_ps(c, e, 0xDD);
}

/* Anywhere: each patch's row read on its own and the 4 x 4 blocks transposed. */
static inline void any_rows(const float *const rp[8], __m256 d[4]) {
  __m256 a0 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(rp[0])), _mm_loadu_ps(rp[4]), 1);
  __m256 a1 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(rp[1])), _mm_loadu_ps(rp[5]), 1);
  __m256 a2 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(rp[2])), _mm_loadu_ps(rp[6]), 1);
  __m256 a3 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(rp[3])), _mm_loadu_ps(rp[7]), 1);
  __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpacklo_ps(a2, a3);
  __m256 t2 = _mm256_unpackhi_ps(a0, a1), t3 = _mm256_unpackhi_ps(a2, a3);
  d[0] = _mm256_shuffle_ps(t0, t1, 0x44), d[1] = _mm256_shuffle_ps(t0, t1, 0xEE);
  d[2] = _mm256_shuffle_ps(t2, t3, 0x44), d[3] = _mm256_shuffle_ps(t2, t3, 0xEE);
}

/* V = B^T d B of eight patches (d[r][k]: row r, column k) into their 16 B-panel rows vq[xi * xs]. */
static inline void store_v(__m256 d[4][4], float *vq, int64_t xs) {
  __m256 e[4][4];
  for (int r = 0; r < 4; r++) {
    e[r][0] = _mm256_sub_ps(d[r][0], d[r][2]), e[r][1] = _mm256_add_ps(d[r][1], d[r][2]);
    e[r][2] = _mm256_sub_ps(d[r][2], d[r][1]), e[r][3] = _mm256_sub_ps(d[r][1], d[r][3]);
  }
  for (int b = 0; b < 4; b++) {
    _mm256_store_ps(vq + (0 + b) * xs, _mm256_sub_ps(e[0][b], e[2][b]));
    _mm256_store_ps(vq + (4 + b) * xs, _mm256_add_ps(e[1][b], e[2][b]));
    _mm256_store_ps(vq + (8 + b) * xs, _mm256_sub_ps(e[2][b], e[1][b]));
    _mm256_store_ps(vq + (12 + b) * xs, _mm256_sub_ps(e[1][b], e[3][b]));
  }
}

/* V for the block's positions [0, qend), into the packed B panels. Channel by channel, so the
 * reads walk each channel's rows front to back (what the prefetchers follow). */
static void input_transform(const ms_k_wino_job *j, const src_view *sv, const tile_map *m, int qend, float *v) {
  static const _Alignas(16) float zeros[16] = {0};
  const int nr = j->t.nr;
  const int64_t xs = j->vstride, rs = sv->rs;
  const float *base = sv->base;
  /* the block's rows of a channel: one span, asked for two channels ahead (from memory, where
   * the source is far larger than the caches, the prefetchers alone left the reads waiting) */
  const int64_t span0 = m->src[0], span1 = m->src[m->nn - 1] + 3 * rs + 4;
  for (int64_t c = 0; c < j->cs; c++, base += sv->cs) {
    if (c + 2 < j->cs)
      for (int64_t off = span0; off < span1; off += 16) _mm_prefetch((const char *)(base + 2 * sv->cs + off), _MM_HINT_T0);
    for (int q = 0; q < qend; q += 8) {
      float *vq = v + (q / nr) * j->cs * nr + c * nr + q % nr;
      __m256 d[4][4];
      if (m->iquad[q / 4] && m->iquad[q / 4 + 1]) {
        const float *s0 = base + m->src[q], *s1 = base + m->src[q + 4];
        for (int r = 0; r < 4; r++) quad_rows(s0 + r * rs, s1 + r * rs, d[r]);
      } else {
        /* tiles past nn read a row of zeros, again and again */
        const float *rp[8];
        int64_t step[8];
        for (int l = 0; l < 8; l++) {
          bool in = q + l < m->nn;
          rp[l] = in ? base + m->src[q + l] : zeros, step[l] = in ? rs : 0;
        }
        for (int r = 0; r < 4; r++) {
          any_rows(rp, d[r]);
          for (int l = 0; l < 8; l++) rp[l] += step[l];
        }
      }
      store_v(d, vq, xs);
    }
  }
}

/* Output channel o of the eight tiles at block position q from the slice's M (mq[xi * mstride]),
 * into the sample's output plane `out`. */
static void output_transform8(const ms_k_wino_job *j, const tile_map *m, int q, int64_t o, const float *mq,
                              int64_t mstride, float *out) {
  __m256 s0[4], s1[4];
  for (int b = 0; b < 4; b++) {
    __m256 m0 = _mm256_load_ps(mq + b * mstride), m1 = _mm256_load_ps(mq + (4 + b) * mstride);
    __m256 m2 = _mm256_load_ps(mq + (8 + b) * mstride), m3 = _mm256_load_ps(mq + (12 + b) * mstride);
    s0[b] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
    s1[b] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
  }
  __m256 bias = _mm256_set1_ps(j->bias ? j->bias[o] : 0.0f);
  __m256 y00 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0[0], s0[1]), s0[2]), bias);
  __m256 y01 = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(s0[1], s0[2]), s0[3]), bias);
  __m256 y10 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s1[0], s1[1]), s1[2]), bias);
  __m256 y11 = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(s1[1], s1[2]), s1[3]), bias);
  /* each output row of a quad of tiles side by side: 8 floats, the column pairs interleaved */
  __m256 lo = _mm256_unpacklo_ps(y00, y01), hi = _mm256_unpackhi_ps(y00, y01);
  __m256 top[2] = {_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31)};
  lo = _mm256_unpacklo_ps(y10, y11), hi = _mm256_unpackhi_ps(y10, y11);
  __m256 bot[2] = {_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31)};
  for (int h = 0; h < 2; h++) {
    int qh = q + 4 * h;
    if (m->oquad[qh / 4]) {
      _mm256_storeu_ps(out + m->dst[qh], top[h]);
      _mm256_storeu_ps(out + m->dst[qh] + j->ow, bot[h]);
      continue;
    }
    _Alignas(32) float t[2][8];
    _mm256_store_ps(t[0], top[h]), _mm256_store_ps(t[1], bot[h]);
    for (int l = 0; l < 4 && qh + l < m->nn; l++) {
      float *d = out + m->dst[qh + l];
      int full = m->full[qh + l];
      d[0] = t[0][2 * l];
      if (full & 1) d[1] = t[0][2 * l + 1];
      if (full & 2) {
        d[j->ow] = t[1][2 * l];
        if (full & 1) d[j->ow + 1] = t[1][2 * l + 1];
      }
    }
  }
}

/* The output lines a slice of `rows` channels will write, asked for before its GEMMs run: each
 * store would otherwise wait for its line from memory. */
static void prefetch_out(const ms_k_wino_job *j, const tile_map *m, const float *out, int64_t rows, int64_t plane) {
  for (int64_t r = 0; r < rows; r++, out += plane)
    for (int q = 0; q < m->nn; q += 8) {
      int last = q + 7 < m->nn ? q + 7 : m->nn - 1;
      for (int64_t y = 0; y < 2; y++) {
        _mm_prefetch((const char *)(out + m->dst[q] + y * j->ow), _MM_HINT_T0);
        _mm_prefetch((const char *)(out + m->dst[last] + y * j->ow + 1), _MM_HINT_T0);
      }
    }
}

/* Items are (sample, block of its tiles): blocks never span samples, so a sample's view is made
 * once per run of its blocks. */
void ms_k_wino_blocks_avx2(void *ctx, int64_t begin, int64_t end) {
  ms_k_wino_job *j = ctx;
  const int mr = j->t.mr, nr = j->t.nr;
  const float zero = 0.0f, one = 1.0f;
  const int64_t tb = j->tb, vstride = j->vstride, ustride = j->opad * j->cs, mstride = mr * tb;
  const int64_t per = j->tiles_h * j->tiles_w, bps = (per + tb - 1) / tb, plane_out = j->oh * j->ow;
  float *v = ms_k_thread_buffer(MS_K_BUF_CONV_B, sizeof(float) * (size_t)(16 * vstride));
  float *mb = ms_k_thread_buffer(MS_K_BUF_CONV_T, sizeof(float) * (size_t)(16 * mstride));
  if (!v || !mb) {
    j->failed = 1;
    return;
  }
  tile_map map, *m = &map;
  src_view sv = {.n = -1};
  for (int64_t it = begin; it < end; it++) {
    int64_t n = it / bps, t0 = it % bps * tb;
    if (view_sample(j, n, &sv) != 0) {
      j->failed = 1;
      return;
    }
    map_block(j, &sv, t0, m);
    int panels = (m->nn + nr - 1) / nr, qend = panels * nr;
    input_transform(j, &sv, m, qend, v);
    float *out = j->out + n * j->o * plane_out;
    /* per MR-row slice of the output channels: its 16 products stay in L1 for the inverse
     * transform (V, in L2, is read once per slice) */
    for (int64_t o0 = 0; o0 < j->o; o0 += mr) {
      int64_t rows = j->o - o0 < mr ? j->o - o0 : mr;
      prefetch_out(j, m, out + o0 * plane_out, rows, plane_out);
      for (int xi = 0; xi < 16; xi++)
        for (int p = 0; p < panels; p++)
          j->t.ukr(j->cs, &one, j->u + xi * ustride + o0 * j->cs, v + xi * vstride + p * j->cs * nr, &zero,
                   mb + xi * mstride + p * nr, tb, 1);
      for (int64_t r = 0; r < rows; r++)
        for (int q = 0; q < m->nn; q += 8)
          output_transform8(j, m, q, o0 + r, mb + r * tb + q, mstride, out + (o0 + r) * plane_out);
    }
  }
}
