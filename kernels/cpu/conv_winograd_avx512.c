/* conv_winograd_avx512.c: the AVX-512 transforms of a block of Winograd F(2x2, 3x3) tiles, the
 * same contract and arithmetic as conv_winograd_avx2.c (so the same results) with sixteen tiles to
 * a vector instead of eight: on AVX-512 the SGEMM's B panel is 32 tiles wide, two vectors, and the
 * transforms were the largest cost of the seed's conv2 after the GEMMs (conv_winograd_tiles.c runs
 * the block loop around them). Stride-2 patch columns are split by one two-source permute per
 * column for 16 tiles; the outputs go out in runs of tiles side by side, by masked stores (so
 * ragged edges need no scalar code).
 * B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]. */
#include <immintrin.h>

#include "kernels/cpu/conv_winograd_tiles.h"

#define GROUP 16 /* tiles to a vector */

/* Row r of 16 patches split into columns, tiles 0..15 in the vector: d[k] = column k. */

/* Columns 0..3 of 16 patches from their quads' columns 0..7 (a[h]) and 2..9 (c[h]) as a quad
 * side by side reads them: two quads to a vector, and column k of all 16 tiles picked from two
 * such vectors by one permute (the even or odd of their 32 values). */
static inline void split_cols(const __m256 a[4], const __m256 c[4], __m512 d[4]) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  __m512 a01 = _mm512_insertf32x8(_mm512_castps256_ps512(a[0]), a[1], 1);
  __m512 a23 = _mm512_insertf32x8(_mm512_castps256_ps512(a[2]), a[3], 1);
  __m512 c01 = _mm512_insertf32x8(_mm512_castps256_ps512(c[0]), c[1], 1);
  __m512 c23 = _mm512_insertf32x8(_mm512_castps256_ps512(c[2]), c[3], 1);
  d[0] = _mm512_permutex2var_ps(a01, even, a23), d[1] = _mm512_permutex2var_ps(a01, odd, a23);
  d[2] = _mm512_permutex2var_ps(c01, even, c23), d[3] = _mm512_permutex2var_ps(c01, odd, c23);
}

/* Where the four quads each lie side by side (s[h]: the row of quad h's first patch): two reads
 * a quad. */
static inline void quads_row(const float *const s[4], __m512 d[4]) {
  __m256 a[4], c[4];
  for (int h = 0; h < 4; h++) a[h] = _mm256_loadu_ps(s[h]), c[h] = _mm256_loadu_ps(s[h] + 2);
  split_cols(a, c, d);
}

/* Row r's columns 0..7 (a) and 2..9 (c) of the quad at q, as a side-by-side quad's would read:
 * for a quad broken by a row end (or the block's end: zeros past m->nn), each patch's four
 * columns read alone and their halves joined. */
static inline void quad_cols(const float *row, const ms_k_wino_map *m, int q, __m256 *a, __m256 *c) {
  if (m->iquad[q / 4]) {
    *a = _mm256_loadu_ps(row + m->src[q]), *c = _mm256_loadu_ps(row + m->src[q] + 2);
    return;
  }
  __m128 x[4];
  for (int l = 0; l < 4; l++) x[l] = q + l < m->nn ? _mm_loadu_ps(row + m->src[q + l]) : _mm_setzero_ps();
  *a = _mm256_set_m128(_mm_movelh_ps(x[2], x[3]), _mm_movelh_ps(x[0], x[1]));
  *c = _mm256_set_m128(_mm_movehl_ps(x[3], x[2]), _mm_movehl_ps(x[1], x[0]));
}

/* Anywhere (row: the view's row r of the channel): quad by quad. */
static inline void any_row(const float *row, const ms_k_wino_map *m, int q, __m512 d[4]) {
  __m256 a[4], c[4];
  for (int h = 0; h < 4; h++) quad_cols(row, m, q + 4 * h, &a[h], &c[h]);
  split_cols(a, c, d);
}

/* V = B^T d B of 16 patches (d[r][k]: row r, column k) into their 16 B-panel rows vq[xi * xs]. */
static inline void store_v(__m512 d[4][4], float *vq, int64_t xs) {
  __m512 e[4][4];
  for (int r = 0; r < 4; r++) {
    e[r][0] = _mm512_sub_ps(d[r][0], d[r][2]), e[r][1] = _mm512_add_ps(d[r][1], d[r][2]);
    e[r][2] = _mm512_sub_ps(d[r][2], d[r][1]), e[r][3] = _mm512_sub_ps(d[r][1], d[r][3]);
  }
  for (int b = 0; b < 4; b++) {
    _mm512_store_ps(vq + (0 + b) * xs, _mm512_sub_ps(e[0][b], e[2][b]));
    _mm512_store_ps(vq + (4 + b) * xs, _mm512_add_ps(e[1][b], e[2][b]));
    _mm512_store_ps(vq + (8 + b) * xs, _mm512_sub_ps(e[2][b], e[1][b]));
    _mm512_store_ps(vq + (12 + b) * xs, _mm512_sub_ps(e[1][b], e[3][b]));
  }
}

/* V for the block's positions [0, qend), into the packed B panels. Channel by channel, so the
 * reads walk each channel's rows front to back (what the prefetchers follow). */
static void input_transform(const ms_k_wino_job *j, const ms_k_wino_view *sv, const ms_k_wino_map *m, int qend,
                            float *v) {
  const int nr = j->t.nr;
  const int64_t xs = j->vstride, rs = sv->rs;
  const float *base = sv->base;
  for (int64_t c = 0; c < j->cs; c++, base += sv->cs) {
    if (c + 2 < j->cs) ms_k_wino_prefetch_rows(sv, m, base + 2 * sv->cs); /* two channels ahead */
    for (int q = 0; q < qend; q += GROUP) {
      __m512 d[4][4];
      if (m->iquad[q / 4] & m->iquad[q / 4 + 1] & m->iquad[q / 4 + 2] & m->iquad[q / 4 + 3]) {
        const float *s[4] = {base + m->src[q], base + m->src[q + 4], base + m->src[q + 8], base + m->src[q + 12]};
        for (int r = 0; r < 4; r++) {
          quads_row(s, d[r]);
          for (int h = 0; h < 4; h++) s[h] += rs;
        }
      } else {
        for (int r = 0; r < 4; r++) any_row(base + r * rs, m, q, d[r]);
      }
      store_v(d, v + (q / nr) * j->cs * nr + c * nr + q % nr, xs);
    }
  }
}

/* Where a block's output rows go, eight tiles (a vector of their column pairs) at a time: runs of
 * tiles side by side in an output row, within a quad. A full quad is one 8-float store (two side
 * by side one 16-float store), any other run one masked store of its values (`pick` of the
 * vector's 16) moved to the front: runs across quads, compressed and masked, measured slower. */
typedef struct out_run {
  int t; /* the run's first tile */
  __mmask16 pick, store; /* its values in the vector; the first popcount(pick) lanes */
} out_run;

typedef struct out_plan {
  out_run run[MS_WINO_TB_MAX / 8][8];
  unsigned char runs[MS_WINO_TB_MAX / 8];
} out_plan;

static void plan_stores(const ms_k_wino_map *m, out_plan *p) {
  for (int q = 0; q < m->nn; q += 8) {
    out_run *run = p->run[q / 8];
    int k = -1, end = q + 8 < m->nn ? q + 8 : m->nn;
    for (int t = q; t < end; t++) {
      /* a tile without its second column ends its row, even where the next one's dst follows */
      bool joins = (t - q) % 4 && (m->full[t - 1] & 1) && m->dst[t] == m->dst[t - 1] + 2;
      if (!joins) run[++k] = (out_run){.t = t};
      run[k].pick |= (__mmask16)((1u | (m->full[t] & 1u) << 1) << 2 * (t - q));
    }
    /* two full quads side by side: one 16-float store */
    if (k == 1 && run[0].pick == 0xFF && run[1].pick == 0xFF00 && m->dst[run[1].t] == m->dst[run[0].t] + 8)
      k = 0, run[0].pick = 0xFFFF;
    for (int r = 0; r <= k; r++) run[r].store = (__mmask16)((1u << __builtin_popcount(run[r].pick)) - 1);
    p->runs[q / 8] = (unsigned char)(k + 1);
  }
}

/* Both output rows of the eight tiles at q: top and bot hold their column pairs (tile l at 2l,
 * 2l + 1); a run's tiles share their tile row, so the first says whether the second row exists. */
static inline void store_eight(const ms_k_wino_job *j, const ms_k_wino_map *m, const out_plan *p, int q, __m512 top,
                               __m512 bot, float *out) {
  for (int k = 0; k < p->runs[q / 8]; k++) {
    const out_run *r = &p->run[q / 8][k];
    float *d = out + m->dst[r->t];
    bool two = m->full[r->t] & 2;
    if (r->pick == 0xFFFF) { /* eight full tiles side by side */
      _mm512_storeu_ps(d, top);
      if (two) _mm512_storeu_ps(d + j->ow, bot);
      continue;
    }
    if (r->pick == 0xFF || r->pick == 0xFF00) { /* a quad */
      _mm256_storeu_ps(d, r->pick == 0xFF ? _mm512_castps512_ps256(top) : _mm512_extractf32x8_ps(top, 1));
      __m256 b = r->pick == 0xFF ? _mm512_castps512_ps256(bot) : _mm512_extractf32x8_ps(bot, 1);
      if (two) _mm256_storeu_ps(d + j->ow, b);
      continue;
    }
    _mm512_mask_storeu_ps(d, r->store, _mm512_maskz_compress_ps(r->pick, top));
    if (two) _mm512_mask_storeu_ps(d + j->ow, r->store, _mm512_maskz_compress_ps(r->pick, bot));
  }
}

/* Output channel o of the 16 tiles at block position q from the slice's M (mq[xi * mstride]),
 * into the sample's output plane `out`; the same sums in the same order as the AVX2 body. */
static void output_transform16(const ms_k_wino_job *j, const ms_k_wino_map *m, const out_plan *p, int q,
                               int64_t o, const float *mq, int64_t mstride, float *out) {
  __m512 s0[4], s1[4];
  for (int b = 0; b < 4; b++) {
    __m512 m0 = _mm512_load_ps(mq + b * mstride), m1 = _mm512_load_ps(mq + (4 + b) * mstride);
    __m512 m2 = _mm512_load_ps(mq + (8 + b) * mstride), m3 = _mm512_load_ps(mq + (12 + b) * mstride);
    s0[b] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
    s1[b] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
  }
  __m512 bias = _mm512_set1_ps(j->bias ? j->bias[o] : 0.0f);
  __m512 y00 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0[0], s0[1]), s0[2]), bias);
  __m512 y01 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s0[1], s0[2]), s0[3]), bias);
  __m512 y10 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s1[0], s1[1]), s1[2]), bias);
  __m512 y11 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s1[1], s1[2]), s1[3]), bias);
  /* the column pairs interleaved: tiles 0..7 (lo) and 8..15 (hi) of each output row */
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
  store_eight(j, m, p, q, _mm512_permutex2var_ps(y00, lo, y01), _mm512_permutex2var_ps(y10, lo, y11), out);
  if (q + 8 < m->nn)
    store_eight(j, m, p, q + 8, _mm512_permutex2var_ps(y00, hi, y01), _mm512_permutex2var_ps(y10, hi, y11), out);
}

/* The slice of `rows` output channels from o0, sixteen tiles at a time. */
static void output_transform(const ms_k_wino_job *j, const ms_k_wino_map *m, int64_t o0, int64_t rows,
                             const float *mb, float *out) {
  const int64_t plane = j->oh * j->ow, mstride = j->t.mr * j->tb;
  out_plan p;
  plan_stores(m, &p);
  for (int64_t r = 0; r < rows; r++)
    for (int q = 0; q < m->nn; q += GROUP)
      output_transform16(j, m, &p, q, o0 + r, mb + r * j->tb + q, mstride, out + (o0 + r) * plane);
}

void ms_k_wino_blocks_avx512(void *job, int64_t begin, int64_t end) {
  static const ms_k_wino_isa isa = {input_transform, output_transform};
  ms_k_wino_blocks(job, begin, end, &isa);
}
