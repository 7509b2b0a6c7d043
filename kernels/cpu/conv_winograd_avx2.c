/* conv_winograd_avx2.c: the AVX2 transforms of a block of Winograd F(2x2, 3x3) tiles
 * (conv_winograd.h has the letters; the block loop around them, with the 16 GEMMs
 * M[xi] = U[xi] V[xi] over the source channels per MR-row slice of the output channels, is in
 * conv_winograd_tiles.c): the input transform V = B^T d B of each 4x4 patch, eight tiles to a
 * vector, written straight into the packed B-panel layout of the SGEMM micro-kernel; the inverse
 * transform A^T M A of a slice (still in L1) into the output, bias added there.
 * B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]. */
#include <immintrin.h>

#include "kernels/cpu/conv_winograd_tiles.h"

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
static void input_transform(const ms_k_wino_job *j, const ms_k_wino_view *sv, const ms_k_wino_map *m, int qend,
                            float *v) {
  static const _Alignas(16) float zeros[16] = {0};
  const int nr = j->t.nr;
  const int64_t xs = j->vstride, rs = sv->rs;
  const float *base = sv->base;
  for (int64_t c = 0; c < j->cs; c++, base += sv->cs) {
    if (c + 2 < j->cs) ms_k_wino_prefetch_rows(sv, m, base + 2 * sv->cs); /* two channels ahead */
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
static void output_transform8(const ms_k_wino_job *j, const ms_k_wino_map *m, int q, int64_t o, const float *mq,
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

/* The slice of `rows` output channels from o0, eight tiles at a time. */
static void output_transform(const ms_k_wino_job *j, const ms_k_wino_map *m, int64_t o0, int64_t rows,
                             const float *mb, float *out) {
  const int64_t plane = j->oh * j->ow, mstride = j->t.mr * j->tb;
  for (int64_t r = 0; r < rows; r++)
    for (int q = 0; q < m->nn; q += 8)
      output_transform8(j, m, q, o0 + r, mb + r * j->tb + q, mstride, out + (o0 + r) * plane);
}

void ms_k_wino_blocks_avx2(void *job, int64_t begin, int64_t end) {
  static const ms_k_wino_isa isa = {input_transform, output_transform};
  ms_k_wino_blocks(job, begin, end, &isa);
}
