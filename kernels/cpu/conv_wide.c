/* conv_wide.c: float32 convolution with unit stride over "wide" output rows, on the SGEMM
 * micro-kernel. Computing every column of an output row up to the input's width W (not just
 * OW), column p' = oh*W + ow' of the column matrix's row k = (c, i, j) reads x[koff[k] + p']:
 * each row of a packed NR-column panel is one contiguous copy, and the KW-1 extra columns per
 * row are computed and dropped. Padding is a zero-bordered copy of each sample. The input
 * gradient is the same computation: a correlation of the fully padded gout with the flipped,
 * transposed weight.
 *
 * Letters: a "source" sample (CS, HS, WS) sits at (PT, PL) in a zero plane (HP, WP); the output
 * is (O, OH, OW) with OH = HP - (KH-1)*DH, OW = WP - (KW-1)*DW; K = CS*KH*KW, Kb = K (+1 bias).
 * Where the borders allow, rows overlap by their borders (WP = WS + PL; wide_init). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "kernels/cpu/conv_gemm.h"
#include "kernels/cpu/conv_geom.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/gemm_ukr.h"

typedef struct wide_job {
  const float *src;
  int64_t n, cs, hs, ws, pt, pl, hp, wp;
  int64_t o, oh, ow, kh, kw, dh, dw;
  int64_t K, Kb, opad, rchunks, kc; /* kc: contraction block of the direct path */
  int mr, nr; /* the tile: the GEMM's, or conv_ukr_avx2.c's where direct */
  bool padded;
  bool stream; /* the output dwarfs the caches: written around them */
  bool direct; /* AVX2: B read in place by ms_k_conv_ukr_avx2, the bias seeding the sums */
  const int64_t *koff, *kid; /* row offsets into a sample; kid: those of a packed panel */
  const float *bias; /* direct: opad values (zeros without a bias) */
  const float *ap; /* the packed A: O rows (to a multiple of MR) of Kb */
  float *out;
  ms_k_sgemm_tile t;
  _Atomic int failed;
} wide_job;

/* The zero-bordered copy of source sample n, with `slack` zeros after it for the wide rows'
 * reads past the plane. */
static void pad_sample(const wide_job *j, int64_t n, int64_t slack, float *dst) {
  const float *s = j->src + n * j->cs * j->hs * j->ws;
  memset(dst, 0, sizeof(float) * (size_t)(j->cs * j->hp * j->wp + slack));
  for (int64_t c = 0; c < j->cs; c++)
    for (int64_t r = 0; r < j->hs; r++)
      memcpy(dst + (c * j->hp + r + j->pt) * j->wp + j->pl, s + (c * j->hs + r) * j->ws,
             sizeof(float) * (size_t)j->ws);
}

/* dst (Kb x nr) = columns [p0, p0 + nr) of the wide column matrix of the sample at xs, of
 * which len floats may be read; anything past them reads as zero. */
static void pack_panel(const wide_job *j, const float *xs, int64_t len, int64_t p0, float *dst) {
  const int nr = j->nr;
  for (int64_t k = 0; k < j->K; k++, dst += nr) {
    int64_t at = j->koff[k] + p0;
    if (at + nr <= len) {
      memcpy(dst, xs + at, (size_t)nr * sizeof(float));
    } else {
      for (int q = 0; q < nr; q++) dst[q] = at + q < len ? xs[at + q] : 0.0f;
    }
  }
  if (j->Kb > j->K)
    for (int q = 0; q < nr; q++) dst[q] = 1.0f;
}

/* dst[0, n) = src[0, n); with `stream`, bypassing the caches (where the CPU can): an output far
 * larger than the caches is not read again soon, and plain stores would first read each line. */
static void copy_row(float *dst, const float *src, int64_t n, bool stream) {
#ifdef __SSE2__
  if (stream) {
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 15); i++) _mm_stream_si32((int *)(dst + i), ((const int *)src)[i]);
    for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
    for (; i < n; i++) _mm_stream_si32((int *)(dst + i), ((const int *)src)[i]);
    return;
  }
  /* inline: rows are short (26 floats for the seed's conv1), and a memcpy call per row cost
   * more than the 1-channel convolution itself */
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(dst + i, _mm_loadu_ps(src + i));
  for (; i < n; i++) dst[i] = src[i];
#else
  (void)stream;
  memcpy(dst, src, sizeof(float) * (size_t)n);
#endif
}

/* Item = (sample, chunk of output rows): the chunk's wide rows into a tile buffer, then their
 * first OW columns into out (or, where OW = WP, whole tiles straight into out). */
static void wide_range(void *ctx, int64_t begin, int64_t end) {
  wide_job *j = ctx;
  const int mr = j->mr, nr = j->nr;
  const float zero = 0.0f, one = 1.0f;
  int64_t plane = j->cs * j->hp * j->wp, slack = (j->kw - 1) * j->dw + nr;
  int64_t rows_max = (j->oh + j->rchunks - 1) / j->rchunks;
  int64_t ldw = (rows_max * j->wp + nr - 1) / nr * nr;
  float *bp = ms_k_thread_buffer(MS_K_BUF_CONV_B, sizeof(float) * (size_t)(j->Kb * nr));
  float *wout = ms_k_thread_buffer(MS_K_BUF_CONV_T, sizeof(float) * (size_t)(j->opad * ldw));
  float *pad = j->padded ? ms_k_thread_buffer(MS_K_BUF_CONV_A, sizeof(float) * (size_t)(plane + slack)) : NULL;
  if (!bp || !wout || (j->padded && !pad)) {
    j->failed = 1;
    return;
  }
  int64_t last_n = -1;
  for (int64_t it = begin; it < end; it++) {
    int64_t n = it / j->rchunks, ch = it % j->rchunks;
    int64_t r0 = ch * j->oh / j->rchunks, r1 = (ch + 1) * j->oh / j->rchunks;
    const float *xs;
    int64_t len;
    if (j->padded) {
      if (n != last_n) pad_sample(j, n, slack, pad), last_n = n;
      xs = pad, len = plane + slack;
    } else {
      xs = j->src + n * plane, len = (j->n - n) * plane; /* reads may run into the next sample */
    }
    int64_t c0 = r0 * j->wp, ncol = (r1 - r0) * j->wp, ofull = j->o / mr * mr, qfull = ncol / nr * nr;
    /* Where every computed column is kept, the wide rows are the output's rows: whole tiles go
     * straight into it (no copy), only the ragged ones through wout. */
    bool in_place = j->direct && !j->stream && j->ow == j->wp;
    float *oplane = j->out + n * j->o * j->oh * j->ow + c0;
    for (int64_t q0 = 0; q0 < ncol; q0 += nr) {
      int64_t p0 = c0 + q0;
      if (!j->direct) {
        pack_panel(j, xs, len, p0, bp);
        for (int64_t o0 = 0; o0 < j->o; o0 += mr)
          j->t.ukr(j->Kb, &one, j->ap + o0 * j->Kb, bp, &zero, wout + o0 * ldw + q0, ldw, 1);
        continue;
      }
      const float *bs = xs + p0;
      const int64_t *ko = j->koff;
      if (j->koff[j->K - 1] + p0 + nr > len) /* the batch's last panels: packed, zero past x */
        pack_panel(j, xs, len, p0, bp), bs = bp, ko = j->kid;
      for (int64_t k0 = 0; k0 < j->K; k0 += j->kc) {
        int64_t kn = j->K - k0 < j->kc ? j->K - k0 : j->kc;
        for (int64_t o0 = 0; o0 < j->o; o0 += mr) {
          bool direct_out = in_place && o0 < ofull && q0 < qfull;
          ms_k_conv_ukr_avx2(kn, j->ap + o0 * j->K + k0 * mr, bs, ko + k0, k0 ? NULL : j->bias + o0,
                             direct_out ? oplane + o0 * j->oh * j->ow + q0 : wout + o0 * ldw + q0,
                             direct_out ? j->oh * j->ow : ldw);
        }
      }
    }
    if (in_place) {
      for (int64_t o = 0; o < j->o; o++) {
        int64_t from = o < ofull ? qfull : 0;
        copy_row(oplane + o * j->oh * j->ow + from, wout + o * ldw + from, ncol - from, false);
      }
      continue;
    }
    for (int64_t o = 0; o < j->o; o++)
      for (int64_t r = r0; r < r1; r++)
        copy_row(j->out + ((n * j->o + o) * j->oh + r) * j->ow, wout + o * ldw + (r - r0) * j->wp, j->ow,
                 j->stream);
  }
#ifdef __SSE2__
  if (j->stream) _mm_sfence(); /* the streamed rows are visible before the pool's join */
#endif
}

/* Fills the job's sizes and koff (in the caller's MS_K_BUF_CONV_K slot); false when out of memory. */
static bool wide_init(wide_job *j) {
  j->t = ms_k_sgemm_tile_get();
  j->direct = ms_k_cpu_avx2();
  j->mr = j->direct ? MS_CONV_UKR_MR : j->t.mr, j->nr = j->direct ? MS_CONV_UKR_NR : j->t.nr;
  j->K = j->cs * j->kh * j->kw;
  j->oh = j->hp - (j->kh - 1) * j->dh, j->ow = j->wp - (j->kw - 1) * j->dw;
  j->opad = (j->o + j->mr - 1) / j->mr * j->mr;
  j->padded = j->hp != j->hs || j->wp != j->ws;
  /* A row's right border shares the next row's left one (both zeros) where it is no wider and the
   * output fits in the row: the columns computed and dropped go (the input grad's 2 of 28 per row,
   * 7% of its products), and OW stays what the unshared width gave. */
  if (j->wp - j->ws - j->pl <= j->pl && j->ow <= j->ws + j->pl) j->wp = j->ws + j->pl;
  j->stream = j->n * j->o * j->oh * j->ow * (int64_t)sizeof(float) > ((int64_t)32 << 20);
  /* The rows of a B panel that one block of input channels reads (KH input rows, NR + KW-1
   * columns and a line of misalignment each) stay within half of L1 while A streams past. */
  int64_t chan_bytes = j->kh * (j->nr + (j->kw - 1) * j->dw + 16) * (int64_t)sizeof(float);
  int64_t cblk = 16384 / chan_bytes;
  j->kc = (cblk > 1 ? cblk : 1) * j->kh * j->kw;
  int64_t *t = ms_k_thread_buffer(MS_K_BUF_CONV_K, sizeof(int64_t) * (size_t)(2 * j->K + 1));
  if (!t) return false;
  for (int64_t c = 0, k = 0; c < j->cs; c++)
    for (int64_t i = 0; i < j->kh; i++)
      for (int64_t jj = 0; jj < j->kw; jj++, k++) {
        t[k] = (c * j->hp + i * j->dh) * j->wp + jj * j->dw;
        t[j->K + k] = k * j->nr;
      }
  j->koff = t, j->kid = t + j->K;
  /* enough items for every thread: split samples into row chunks when the batch is small */
  int64_t want = 4 * (int64_t)ms_k_get_num_threads();
  j->rchunks = j->n >= want ? 1 : (want + j->n - 1) / (j->n > 0 ? j->n : 1);
  if (j->rchunks > j->oh) j->rchunks = j->oh > 0 ? j->oh : 1;
  return true;
}

static int wide_run(wide_job *j) {
  int64_t flops = 2 * j->Kb * j->o * j->oh * j->wp / j->rchunks, want = 1 << 20;
  ms_k_parallel_for(j->n * j->rchunks, flops >= want ? 1 : want / (flops + 1) + 1, wide_range, j);
  return j->failed ? -1 : 0;
}

bool ms_k_conv2d_wide_forward_ok(const ms_k_conv2d_geom *g) {
  return g->groups == 1 && g->sh == 1 && g->sw == 1;
}

int ms_k_conv2d_forward_wide(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *b,
                             float *out) {
  wide_job j = {.src = x, .n = g->n, .cs = g->c, .hs = g->h, .ws = g->w, .pt = g->ph, .pl = g->pw,
                .hp = g->h + 2 * g->ph, .wp = g->w + 2 * g->pw, .o = g->o, .kh = g->kh, .kw = g->kw,
                .dh = g->dh, .dw = g->dw, .out = out};
  if (!wide_init(&j)) return -1;
  j.Kb = j.K + (b && !j.direct ? 1 : 0);
  float *ap = ms_k_thread_buffer(MS_K_BUF_CONV_W, sizeof(float) * (size_t)(j.opad * (j.Kb + 1)));
  if (!ap) return -1;
  ms_k_conv_pack_rows(w, j.direct ? NULL : b, g->o, j.K, j.mr, ap);
  float *bias = ap + j.opad * j.Kb;
  for (int64_t o = 0; o < j.opad; o++) bias[o] = b && o < g->o ? b[o] : 0.0f;
  j.ap = ap, j.bias = bias;
  return wide_run(&j);
}

bool ms_k_conv2d_wide_input_grad_ok(const ms_k_conv2d_geom *g) {
  return g->groups == 1 && g->sh == 1 && g->sw == 1 && g->ph <= (g->kh - 1) * g->dh &&
         g->pw <= (g->kw - 1) * g->dw;
}

int ms_k_conv2d_input_grad_wide(const ms_k_conv2d_geom *g, const float *w, const float *gout, float *gx) {
  /* gx[c, y, x] = sum over (o, i', j') of w[o, c, KH-1-i', KW-1-j'] * gpad[o, y + i'DH, x + j'DW],
   * gout sitting at ((KH-1)DH - PH, (KW-1)DW - PW) in gpad */
  wide_job j = {.src = gout, .n = g->n, .cs = g->o, .hs = g->oh, .ws = g->ow,
                .pt = (g->kh - 1) * g->dh - g->ph, .pl = (g->kw - 1) * g->dw - g->pw,
                .hp = g->h + (g->kh - 1) * g->dh, .wp = g->w + (g->kw - 1) * g->dw, .o = g->c, .kh = g->kh,
                .kw = g->kw, .dh = g->dh, .dw = g->dw, .out = gx};
  if (!wide_init(&j)) return -1;
  j.Kb = j.K;
  float *ap = ms_k_thread_buffer(MS_K_BUF_CONV_W, sizeof(float) * (size_t)(j.opad * (j.K + 1)));
  if (!ap) return -1;
  float *bias = ap + j.opad * j.K;
  for (int64_t o = 0; o < j.opad; o++) bias[o] = 0.0f;
  j.bias = bias;
  /* row panels of the flipped transpose: element (c, (o, i, jj)) in panel c / MR */
  int64_t kk = g->kh * g->kw, wk = g->c * kk;
  for (int64_t c0 = 0; c0 < j.opad; c0 += j.mr)
    for (int64_t k = 0, o = 0; o < g->o; o++)
      for (int64_t i = 0; i < g->kh; i++)
        for (int64_t jj = 0; jj < g->kw; jj++, k++)
          for (int r = 0; r < j.mr; r++) {
            int64_t c = c0 + r;
            ap[c0 * j.K + k * j.mr + r] =
                c < g->c ? w[o * wk + c * kk + (g->kh - 1 - i) * g->kw + (g->kw - 1 - jj)] : 0.0f;
          }
  j.ap = ap;
  return wide_run(&j);
}
