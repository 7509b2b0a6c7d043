/* conv_small_avx512.c: direct AVX-512 forward, input and weight gradients for convolutions with a
 * few input channels, unit stride and no padding (the seed's conv1: 1 -> 32 channels, 3x3, 28x28 ->
 * 26x26). There K = C*KH*KW is 9: the GEMM-shaped paths spend as much on packing and on copying
 * wide rows as on the products, and ran at 12-28% of peak. Here the products read gout in place,
 * x through small per-chunk copies (below), and write out directly.
 *
 * All three work in the output's compact layout (position p = oh*OW + ow), where gout and out
 * are read and written with whole vectors. The forward and the weight gradient read x through
 * per-chunk copies shifted by each kernel column (shift_rows), so that a tap's input for a run
 * of positions is one contiguous run too.
 * - forward: 32 positions (2 zmm) by 8 output channels: per tap two loads of the shifted copies
 *   and 8 broadcast weights, 16 FMAs; items (sample, chunk of rows) split over the pool, each
 *   output element written by one item, so the result does not depend on the threads;
 * - weight gradient: 3 output channels by 9 taps, 27 zmm sums (with a bias, 4 by 5 and the
 *   bias's 4) over every position of a team member's samples, chunk of output rows by chunk;
 *   lanes are reduced once at the end and members' sums added in member order (deterministic
 *   per team size);
 * - input gradient: per tap, the sum over o of w times gout in gout's own layout (32 positions
 *   by 9 taps in registers), then each gx row added from the taps' rows at their shifts; items
 *   (sample, input channel), each gx plane written by one.
 * Measured on a 231 GFLOP/s peak (Zen 5, one thread, conv1, best of 7, outputs reused), batch
 * 8 (in L2) and 64: forward 144-149 and 140-145 (two threads: 260 and 280-290, 56-63% of 455);
 * input gradient 160 and 140-144 (the GEMM-shaped path it replaced ran 14); weight gradient
 * 173 and 142-158, with the bias 159 and 128-140 (with the column matrix copied out per chunk
 * it read 136 and 121-134, with the bias 123 and 108-114).
 * At batch 64 out or gout (5.5 MB) lives in L3 (~90 GB/s on one core here) when it is reused;
 * ops_bench's conv2d_fwd_fresh line, whose outputs are new to the caches as a training step's
 * are, reads the forward at 65-75% of this (9 multiply-adds per float written).
 * Built with the AVX-512 flags; called only where ms_k_conv_small_avx512_ok (conv_small.h) says.
 *
 * Letters as conv_gemm.c: K = C*KH*KW taps, P = OH*OW. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/conv_geom.h"
#include "kernels/cpu/conv_small.h"
#include "kernels/cpu/gemm_ukr.h"
#include "kernels/cpu/lanes_avx512.h"

/* WOB x WKT: the most channels and taps of a weight gradient tile (3 x 9, or 4 x 5 with the
 * bias) */
enum { OB = MS_CONV_SMALL_OB, WOB = 4, WKT = 9 };

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- forward ---------------------------------------------------------------------------------- */

/* A sample's output rows are walked in chunks of at most SHIFT_SPAN positions. Each chunk first
 * copies its input rows once per kernel column jj, shifted and compacted to OW columns:
 * shifted[c][jj][r * OW + ow] = x[c][r0 + r][ow + jj]. Tap (c, i, jj) of the chunk's compact
 * output position p then reads shifted[c][jj][p + i * OW]: one contiguous run in the output's
 * own layout, so every load and store is whole and the output needs no compaction. Walked in
 * the wide layout instead (W positions a row, the KW-1 extra ones dropped by a compressing
 * masked store; 93% of the lanes used against 96%, and items of one channel block), conv1's
 * forward ran 1-6% slower on one thread and ~10% on two (batch 8, in L2, best of 5: 134-135
 * against 136-144 GFLOP/s; two threads 233 against 260). The copies
 * (conv1: 9 KB a sample) are read by every block of 8 channels. */
typedef struct fwd_job {
  const ms_k_conv2d_geom *g;
  const float *x, *wp, *b; /* wp: the weight as [O / 8][K][8], a block's 8 channels per tap */
  float *out;
  int64_t K, P, blocks;
  int64_t rows, chunks, span; /* output rows a chunk, chunks a sample, a chunk's positions in pairs */
  int64_t sh;                 /* floats of one shifted copy, with a zero tail for the last pair */
  bool stream; /* the output dwarfs the caches: each block's planes are written around them */
  _Atomic int failed;
} fwd_job;

/* acc + w * x (one rounding, as _mm512_fmadd_ps) with acc's register as the destination. For
 * the forward's tap loop GCC 12 picks the form that overwrites the broadcast weight and then
 * copies sums between registers (vmovaps), which take FP pipe slots from the FMAs: conv1's
 * forward ran 7-8% slower (138-143 against 150-154 GFLOP/s, one thread, in cache). */
static ALWAYS_INLINE __m512 fma_into(__m512 acc, __m512 w, __m512 x) {
  __asm__("vfmadd231ps %[w], %[x], %[acc]" : [acc] "+v"(acc) : [x] "v"(x), [w] "v"(w));
  return acc;
}

/* A chunk's shifted copies (input rows [r0, r0 + nrows + KH - 1) of sample xs), sh floats
 * apart, each followed by zeros: the forward's last pair and the weight gradient's last vector
 * read into them. Shared by the forward and the weight gradient. */
static void shift_rows(const ms_k_conv2d_geom *g, int64_t sh, const float *xs, int64_t r0, int64_t nrows,
                       float *shifted) {
  int64_t in_rows = nrows + g->kh - 1;
  for (int64_t c = 0; c < g->c; c++)
    for (int64_t jj = 0; jj < g->kw; jj++) {
      float *d = shifted + (c * g->kw + jj) * sh;
      const float *src = xs + (c * g->h + r0) * g->w + jj;
      for (int64_t r = 0; r < in_rows; r++, d += g->ow, src += g->w)
        for (int64_t q = 0; q < g->ow; q += 16) {
          __mmask16 m = ms_k_lanes16(g->ow - q);
          _mm512_mask_storeu_ps(d + q, m, _mm512_maskz_loadu_ps(m, src + q));
        }
      memset(d, 0, sizeof(float) * (size_t)(sh - in_rows * g->ow));
    }
}

/* Output rows a chunk takes (at most SHIFT_SPAN positions, at least one row), and the floats of
 * one of its shifted copies: its input rows plus a zero tail of a vector pair, rounded up to
 * whole cache lines so that every copy starts on one (a tap's first row then reads whole lines:
 * conv1 at batch 64, one thread, best of 7, 2-3% faster both ways). */
enum { SHIFT_SPAN = 1024 }; /* the forward's 8 staged planes of a chunk fill 32 KB */
static int64_t shift_chunk_rows(const ms_k_conv2d_geom *g) {
  int64_t rows = SHIFT_SPAN / g->ow;
  return rows < 1 ? 1 : rows > g->oh ? g->oh : rows;
}
static int64_t shift_copy_floats(const ms_k_conv2d_geom *g, int64_t rows) {
  return ((rows + g->kh - 1) * g->ow + 32 + 15) / 16 * 16;
}

/* Positions [q, q + 32) of a chunk (its shifted copies at s) for the 8 channels of weight block
 * wp, bias (NULL: none), into o + r * ld + q for channel r, lanes m0 and m1 of the two vectors
 * stored. KH and KW are constants where inlined with them, so the tap loops unroll. */
static ALWAYS_INLINE void fwd_pair(const fwd_job *j, const float *s, const float *wp, const float *bias, float *o,
                                   int64_t ld, int64_t q, __mmask16 m0, __mmask16 m1, int kh, int kw) {
  const ms_k_conv2d_geom *g = j->g;
  __m512 a0[OB], a1[OB];
#pragma GCC unroll 8
  for (int r = 0; r < OB; r++) a0[r] = a1[r] = _mm512_setzero_ps();
  for (int64_t c = 0; c < g->c; c++)
    for (int i = 0; i < kh; i++)
      for (int jj = 0; jj < kw; jj++, wp += OB) {
        const float *xr = s + (c * kw + jj) * j->sh + i * g->ow + q;
        __m512 x0 = _mm512_loadu_ps(xr), x1 = _mm512_loadu_ps(xr + 16);
#pragma GCC unroll 8
        for (int r = 0; r < OB; r++) {
          __m512 wr = _mm512_set1_ps(wp[r]);
          a0[r] = fma_into(a0[r], wr, x0);
          a1[r] = fma_into(a1[r], wr, x1);
        }
      }
  /* The bias after the products, as conv_ukr_avx2.c (see its comment: the rounding the float32
   * FSDP-equals-one-process tests were written against). */
#pragma GCC unroll 8
  for (int r = 0; r < OB; r++) {
    if (bias) {
      __m512 br = _mm512_set1_ps(bias[r]);
      a0[r] = _mm512_add_ps(a0[r], br), a1[r] = _mm512_add_ps(a1[r], br);
    }
    _mm512_mask_storeu_ps(o + r * ld + q, m0, a0[r]);
    _mm512_mask_storeu_ps(o + r * ld + q + 16, m1, a1[r]);
  }
}

/* The chunk's len positions for one block of 8 channels, into o (channel r at o + r * ld). */
static ALWAYS_INLINE void fwd_block(const fwd_job *j, const float *s, const float *wp, const float *bias, float *o,
                                    int64_t ld, int64_t len, int kh, int kw) {
  int64_t q = 0;
  for (; q + 32 <= len; q += 32) fwd_pair(j, s, wp, bias, o, ld, q, 0xffff, 0xffff, kh, kw);
  if (q < len)
    fwd_pair(j, s, wp, bias, o, ld, q, ms_k_lanes16(len - q), len - q > 16 ? ms_k_lanes16(len - q - 16) : 0, kh, kw);
}

/* dst[0, n) = src[0, n) with non-temporal stores where dst is 64-byte aligned: plain stores to
 * an output far larger than the caches would first read every line from memory. */
static void stream_copy(float *dst, const float *src, int64_t n) {
  int64_t head = (int64_t)((64 - ((uintptr_t)dst & 63)) & 63) / (int64_t)sizeof(float), i = 0;
  if (head > n) head = n;
  if (head) _mm512_mask_storeu_ps(dst, ms_k_lanes16(head), _mm512_loadu_ps(src)), i = head;
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
  if (i < n) {
    __mmask16 m = ms_k_lanes16(n - i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, src + i));
  }
}

/* One (sample, chunk of rows): every block into out, or when streaming, into buf (8 runs of
 * span floats: in L1) and from there around the caches. */
static ALWAYS_INLINE void fwd_item(const fwd_job *j, int64_t item, float *shifted, float *buf, int kh, int kw) {
  const ms_k_conv2d_geom *g = j->g;
  int64_t n = item / j->chunks, r0 = item % j->chunks * j->rows;
  int64_t nrows = g->oh - r0 < j->rows ? g->oh - r0 : j->rows, len = nrows * g->ow;
  shift_rows(g, j->sh, j->x + n * g->c * g->h * g->w, r0, nrows, shifted);
  for (int64_t blk = 0; blk < j->blocks; blk++) {
    const float *wp = j->wp + blk * OB * j->K, *bias = j->b ? j->b + blk * OB : NULL;
    float *out = j->out + (n * g->o + blk * OB) * j->P + r0 * g->ow;
    if (!j->stream) {
      fwd_block(j, shifted, wp, bias, out, j->P, len, kh, kw);
    } else if (len == j->P) {
      /* the block's 8 planes are one run of out: staged as there and written as one (8 runs,
       * with a shared line written in two halves between each, ran at 70 GFLOP/s against 95:
       * conv1 at batch 1000) */
      fwd_block(j, shifted, wp, bias, buf, j->P, len, kh, kw);
      stream_copy(out, buf, OB * j->P);
    } else {
      fwd_block(j, shifted, wp, bias, buf, j->span, len, kh, kw);
      for (int r = 0; r < OB; r++) stream_copy(out + r * j->P, buf + r * j->span, len);
    }
  }
}

static void fwd_range(void *ctx, int64_t begin, int64_t end) {
  fwd_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  float *shifted = ms_k_thread_buffer(MS_K_BUF_CONV_A, sizeof(float) * (size_t)(g->c * g->kw * j->sh));
  float *buf = j->stream ? ms_k_thread_buffer(MS_K_BUF_CONV_T, sizeof(float) * (size_t)(OB * j->span + 32)) : NULL;
  if (!shifted || (j->stream && !buf)) {
    j->failed = 1;
    return;
  }
  bool k33 = g->kh == 3 && g->kw == 3; /* the seed's kernel, unrolled */
  for (int64_t it = begin; it < end; it++) {
    if (k33) fwd_item(j, it, shifted, buf, 3, 3);
    else fwd_item(j, it, shifted, buf, (int)g->kh, (int)g->kw);
  }
  if (j->stream) _mm_sfence(); /* the streamed planes are visible before the pool's join */
}

int ms_k_conv2d_forward_small_avx512(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *b,
                                     float *out) {
  fwd_job j = {.g = g, .x = x, .b = b, .out = out};
  j.K = g->c * g->kh * g->kw, j.P = g->oh * g->ow, j.blocks = g->o / OB;
  j.rows = shift_chunk_rows(g);
  j.chunks = (g->oh + j.rows - 1) / j.rows;
  j.span = (j.rows * g->ow + 31) / 32 * 32;
  j.sh = shift_copy_floats(g, j.rows);
  /* the weight per block of 8 channels, tap by tap: a tap's 8 broadcasts read one 32-byte run */
  float *wp = ms_k_thread_buffer(MS_K_BUF_CONV_W, sizeof(float) * (size_t)(g->o * j.K));
  if (!wp) return -1;
  for (int64_t o = 0; o < g->o; o++)
    for (int64_t k = 0; k < j.K; k++) wp[(o / OB * j.K + k) * OB + o % OB] = w[o * j.K + k];
  j.wp = wp;
  /* as conv_wide.c: past 32 MB (conv1 at batch 1000: 87 MB) the output is not read from the
   * caches again soon; below, it stays in L3 for the next layer */
  j.stream = g->n * g->o * j.P * (int64_t)sizeof(float) > ((int64_t)32 << 20);
  /* items of about 1 MFLOP at least; each output element is written by one item alone, so the
   * result does not depend on the threads */
  int64_t flops = 2 * j.K * g->o * j.rows * g->ow, want = 1 << 20;
  ms_k_parallel_for(g->n * j.chunks, flops >= want ? 1 : want / (flops + 1) + 1, fwd_range, &j);
  return j.failed ? -1 : 0;
}

/* Whether gout (n * O * OH * OW floats) outgrows what the caches keep of it between passes (a
 * core's share of L3 here): the gradients then prefetch it from memory ahead of their reads. */
static bool conv_small_far(const ms_k_conv2d_geom *g) {
  return g->n * g->o * g->oh * g->ow * (int64_t)sizeof(float) > ((int64_t)16 << 20);
}

/* ---- input gradient ---------------------------------------------------------------------------- */

/* gx[c] = sum over taps (i, j) of the plane S_ij shifted by (i, j), where S_ij = sum over o of
 * w[o, c, i, j] * gout[o]. The S planes are computed in gout's compact layout, 32 positions by
 * 9 taps at a time in registers, with whole loads of gout and whole stores into a scratch plane
 * per tap; a last pass adds each gx row from the taps' rows at their shifts, with masked loads
 * where a shift runs off a row. Added into one plane at each tap's shift instead (a read, add
 * and write of runs overlapping the run just written) it stalled on store-to-load forwarding
 * (conv1 at batch 64, one thread: 95 GFLOP/s), and reading gout with expanding loads into the
 * wide layout cost 12% more. */
enum { GT = 9 }; /* taps summed in registers at once: 9 x 2 vectors */

typedef struct gin_job {
  const ms_k_conv2d_geom *g;
  const float *w, *gout;
  float *gx;
  int64_t K, KK, P, pq; /* KK = KH*KW taps a channel; pq: a tap's plane, P rounded up to pairs */
  bool far;             /* gout outgrows the caches (conv_small_far) */
  _Atomic int failed;
} gin_job;

/* Taps [t0, t0 + kt) of one channel of one sample (gout at gs; tap t of channel o at wc[o * K +
 * t]): S over every pair of vectors, into the taps' planes. kt is a constant where inlined. */
static ALWAYS_INLINE void gin_taps(const gin_job *j, const float *gs, const float *wc, int64_t t0, int kt,
                                   float *planes) {
  const ms_k_conv2d_geom *g = j->g;
  for (int64_t q = 0; q < j->P; q += 32) {
    /* the last pair stops at P: gout's next plane, or the tensor's end, lies past it. Spelt out,
     * not ms_k_lanes16: with it GCC laid out the o loop differently and this pass ran 5% slower
     * (conv1, one thread, best of 5: batch 8 153 against 162 GFLOP/s, batch 64 134 against 143). */
    __mmask16 m0 = j->P - q >= 16 ? 0xffff : (__mmask16)((1u << (j->P - q)) - 1);
    __mmask16 m1 = j->P - q >= 32 ? 0xffff : j->P - q <= 16 ? 0 : (__mmask16)((1u << (j->P - q - 16)) - 1);
    __m512 a0[GT], a1[GT];
#pragma GCC unroll 9
    for (int t = 0; t < kt; t++) a0[t] = a1[t] = _mm512_setzero_ps();
    const float *wo = wc + t0, *go = gs + q;
    for (int64_t o = 0; o < g->o; o++, wo += j->K, go += j->P) {
      __m512 g0 = _mm512_maskz_loadu_ps(m0, go), g1 = _mm512_maskz_loadu_ps(m1, go + 16);
#pragma GCC unroll 9
      for (int t = 0; t < kt; t++) {
        __m512 wt = _mm512_set1_ps(wo[t]);
        a0[t] = fma_into(a0[t], wt, g0);
        a1[t] = fma_into(a1[t], wt, g1);
      }
    }
#pragma GCC unroll 9
    for (int t = 0; t < kt; t++) {
      float *d = planes + (t0 + t) * j->pq + q;
      _mm512_store_ps(d, a0[t]);
      _mm512_store_ps(d + 16, a1[t]);
    }
  }
}

/* gx's plane: row y, column x = sum over taps (i, j) of S_ij[y - i][x - j] where inside S
 * (OH x OW). Loads are masked to the inside columns; a masked lane reads nothing. */
static void gin_sum_planes(const gin_job *j, const float *planes, float *gx) {
  const ms_k_conv2d_geom *g = j->g;
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t y = 0; y < g->h; y++)
    for (int64_t x0 = 0; x0 < g->w; x0 += 16) {
      __m512 s = _mm512_setzero_ps();
      for (int64_t i = 0; i < g->kh; i++) {
        int64_t r = y - i;
        if (r < 0 || r >= g->oh) continue;
        for (int64_t jj = 0; jj < g->kw; jj++) {
          __m512i col = _mm512_add_epi32(iota, _mm512_set1_epi32((int)(x0 - jj)));
          __mmask16 m = _mm512_cmpge_epi32_mask(col, _mm512_setzero_si512()) &
                        _mm512_cmplt_epi32_mask(col, _mm512_set1_epi32((int)g->ow));
          const float *src = planes + (i * g->kw + jj) * j->pq + r * g->ow + x0 - jj;
          s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, src));
        }
      }
      _mm512_mask_storeu_ps(gx + y * g->w + x0, ms_k_lanes16(g->w - x0), s);
    }
}

static void gin_range(void *ctx, int64_t begin, int64_t end) {
  gin_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  float *planes = ms_k_thread_buffer(MS_K_BUF_CONV_T, sizeof(float) * (size_t)(j->KK * j->pq));
  if (!planes) {
    j->failed = 1;
    return;
  }
  for (int64_t it = begin; it < end; it++) {
    int64_t n = it / g->c, c = it % g->c;
    const float *gs = j->gout + n * g->o * j->P, *wc = j->w + c * j->KK;
    if (j->far && c == 0) /* the next sample's gout into L2 while this one is summed */
      for (int64_t at = 0; at < g->o * j->P; at += 16) _mm_prefetch((const char *)(gs + g->o * j->P + at), _MM_HINT_T1);
    if (j->KK == 9) {
      gin_taps(j, gs, wc, 0, 9, planes); /* the seed's 3x3, unrolled */
    } else {
      int64_t t0 = 0;
      for (; j->KK - t0 >= GT; t0 += GT) gin_taps(j, gs, wc, t0, GT, planes);
      for (; t0 < j->KK; t0++) gin_taps(j, gs, wc, t0, 1, planes);
    }
    gin_sum_planes(j, planes, j->gx + it * g->h * g->w);
  }
}

int ms_k_conv2d_input_grad_small_avx512(const ms_k_conv2d_geom *g, const float *w, const float *gout, float *gx) {
  gin_job j = {.g = g, .w = w, .gout = gout, .gx = gx};
  j.KK = g->kh * g->kw, j.K = g->c * j.KK, j.P = g->oh * g->ow;
  j.pq = ms_k_conv_small_gin_plane(g);
  j.far = conv_small_far(g);
  int64_t flops = 2 * g->o * j.KK * j.P, want = 1 << 20;
  ms_k_parallel_for(g->n * g->c, flops >= want ? 1 : want / (flops + 1) + 1, gin_range, &j);
  return j.failed ? -1 : 0;
}

/* ---- weight (and bias) gradient ------------------------------------------------------------- */

/* A sample's output rows are walked in chunks, as the forward's: the chunk's input is copied
 * once per kernel column, shifted (shift_rows), and tap (c, i, jj) of the chunk's positions is
 * then one contiguous run of a copy, read in step with gout's. A column matrix copied out per
 * chunk instead (taps interleaved per vector, each tap's run gathered row by row first) cost a
 * quarter of the time (conv1, batch 64, one thread: 0.053 of 0.193 ms; without it the whole
 * takes 0.158-0.175). */
enum { MAX_TAPS = 4 * 5 * 5 }; /* conv_small.h: at most 4 channels of 5x5 */

typedef struct wg_job {
  const ms_k_conv2d_geom *g;
  const float *x, *gout;
  int64_t K, P, wob, wkt, kblocks, oblocks; /* wob x wkt: the tile (3 x 9 or 4 x 5) */
  int64_t rows, sh; /* output rows a chunk; the floats of one shifted copy */
  int64_t toff[MAX_TAPS + WKT]; /* tap k's run: at shifted + toff[k]; past K, tap 0's (dropped) */
  bool bias, far;   /* far: gout outgrows the caches (conv_small_far) */
  float *part[MS_CONV_WGRAD_MAX_TEAM]; /* per-member sums: gW^T (K x O), then the bias's O values */
  int team;
  _Atomic int failed;
} wg_job;

/* sums[r][t] (16 lanes each, kept in memory between chunks) += over the chunk's len positions:
 * gout channel r (at gs + r * P) times tap k0 + t of the shifted copies, for r < ob, t < kt; with
 * `bias`, also bsums[r] += gout channel r. ob, kt, bias and far are constants where inlined. Loaded
 * and stored whole, the lanes add in the order they would in registers. */
static ALWAYS_INLINE void wg_tile(const wg_job *j, const float *gs, const float *shifted, int64_t len, int64_t k0,
                                  int ob, int kt, bool bias, bool far, float *sums, float *bsums) {
  __m512 acc[WOB][WKT], bacc[WOB];
  /* the planes' and taps' addresses in locals: recomputed from j in the loop they cost an
   * integer multiply per plane and vector, and spilled registers */
  const int64_t next = j->g->o * j->P;
  const float *gp[WOB], *xp[WKT];
#pragma GCC unroll 9
  for (int t = 0; t < kt; t++) xp[t] = shifted + j->toff[k0 + t];
#pragma GCC unroll 4
  for (int r = 0; r < ob; r++) {
    gp[r] = gs + r * j->P;
#pragma GCC unroll 9
    for (int t = 0; t < kt; t++) acc[r][t] = _mm512_load_ps(sums + (r * WKT + t) * 16);
    if (bias) bacc[r] = _mm512_load_ps(bsums + r * 16);
  }
  for (int64_t q = 0; q < len; q += 16) {
    /* the chunk's last vector stops at len: gout's next rows belong to another chunk or plane,
     * and the copies' next rows are other taps' (read, a lane of 0 times an infinity there
     * would make a NaN the sum never had) */
    __mmask16 m = ms_k_lanes16(len - q);
    __m512 gv[WOB];
#pragma GCC unroll 4
    for (int r = 0; r < ob; r++) {
      /* ob planes read side by side: each is fetched into L1 8 lines ahead, and where gout is
       * far (in memory) the same place of the next sample into L2 (an address past the tensor
       * is harmless to a prefetch). Near, that second prefetch cost 10-20%. */
      _mm_prefetch((const char *)(gp[r] + q + 128), _MM_HINT_T0);
      if (far) _mm_prefetch((const char *)(gp[r] + q + next), _MM_HINT_T1);
      gv[r] = _mm512_maskz_loadu_ps(m, gp[r] + q);
      if (bias) bacc[r] = _mm512_add_ps(bacc[r], gv[r]);
    }
#pragma GCC unroll 9
    for (int t = 0; t < kt; t++) {
      __m512 xt = _mm512_maskz_loadu_ps(m, xp[t] + q);
#pragma GCC unroll 4
      for (int r = 0; r < ob; r++) acc[r][t] = fma_into(acc[r][t], gv[r], xt); /* xt loaded once */
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < ob; r++) {
#pragma GCC unroll 9
    for (int t = 0; t < kt; t++) _mm512_store_ps(sums + (r * WKT + t) * 16, acc[r][t]);
    if (bias) _mm512_store_ps(bsums + r * 16, bacc[r]);
  }
}

/* Channels [o0, o0 + wob) by taps [k0, k0 + wkt) over one chunk (gout of its sample at gs, the
 * chunk's first position), and the bias's sums with the first tap block; a tap block short of
 * wkt reads tap 0's run again for the missing taps (wg_job's toff), whose sums are dropped. */
static ALWAYS_INLINE void wg_block_at(const wg_job *j, const float *gs, const float *shifted, int64_t len, int64_t o0,
                                      int64_t k0, bool far, float *sums, float *bsums) {
  int64_t ob = j->g->o - o0 < j->wob ? j->g->o - o0 : j->wob;
  const float *go = gs + o0 * j->P;
  float *bs = bsums + o0 * 16;
  if (j->wob == 4) { /* with the bias; ob is 4: O is a multiple of 8 (conv_small.h) */
    if (k0 == 0) wg_tile(j, go, shifted, len, k0, 4, 5, true, far, sums, bs);
    else if (j->K - k0 == 4) wg_tile(j, go, shifted, len, k0, 4, 4, false, far, sums, bs); /* 3x3's taps 5-8 */
    else wg_tile(j, go, shifted, len, k0, 4, 5, false, far, sums, bs);
  } else if (ob == 3) {
    wg_tile(j, go, shifted, len, k0, 3, 9, false, far, sums, bs);
  } else if (ob == 2) {
    wg_tile(j, go, shifted, len, k0, 2, 9, false, far, sums, bs);
  } else {
    wg_tile(j, go, shifted, len, k0, 1, 9, false, far, sums, bs);
  }
}

static void wg_block(const wg_job *j, const float *gs, const float *shifted, int64_t len, int64_t o0, int64_t k0,
                     float *sums, float *bsums) {
  if (j->far) wg_block_at(j, gs, shifted, len, o0, k0, true, sums, bsums);
  else wg_block_at(j, gs, shifted, len, o0, k0, false, sums, bsums);
}

/* The member's samples, chunk by chunk: lane sums per (channel block, tap block) in `sums`, then
 * the bias's O, reduced into acc (gW^T, then the bias) at the end. */
static void wg_member(void *ctx, int t, int nt) {
  wg_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  size_t n_acc = (size_t)((j->K + 1) * g->o), tile = WOB * WKT * 16;
  size_t n_sums = (size_t)(j->oblocks * j->kblocks) * tile + (size_t)g->o * 16;
  if (t == 0) j->team = nt;
  float *acc = ms_k_thread_buffer(MS_K_BUF_CONV_T, n_acc * sizeof(float));
  float *sums = ms_k_thread_buffer(MS_K_BUF_CONV_A, n_sums * sizeof(float));
  float *shifted = ms_k_thread_buffer(MS_K_BUF_CONV_B, (size_t)(g->c * g->kw * j->sh) * sizeof(float));
  j->part[t] = acc;
  if (!acc || !sums || !shifted) {
    j->failed = 1;
    return;
  }
  memset(sums, 0, n_sums * sizeof(float));
  float *bsums = sums + (size_t)(j->oblocks * j->kblocks) * tile;
  int64_t q = g->n / nt, r = g->n % nt;
  int64_t nb = t * q + (t < r ? t : r), ne = nb + q + (t < r ? 1 : 0);
  for (int64_t n = nb; n < ne; n++) {
    const float *xs = j->x + n * g->c * g->h * g->w;
    for (int64_t r0 = 0; r0 < g->oh; r0 += j->rows) {
      int64_t r1 = g->oh - r0 < j->rows ? g->oh : r0 + j->rows, len = (r1 - r0) * g->ow;
      const float *gs = j->gout + n * g->o * j->P + r0 * g->ow;
      shift_rows(g, j->sh, xs, r0, r1 - r0, shifted);
      for (int64_t ob = 0; ob < j->oblocks; ob++)
        for (int64_t kb = 0; kb < j->kblocks; kb++)
          wg_block(j, gs, shifted, len, ob * j->wob, kb * j->wkt, sums + (ob * j->kblocks + kb) * tile, bsums);
    }
  }
  for (int64_t ob = 0; ob < j->oblocks; ob++)
    for (int64_t kb = 0; kb < j->kblocks; kb++)
      for (int64_t rr = 0; rr < j->wob && ob * j->wob + rr < g->o; rr++)
        for (int64_t tt = 0; tt < j->wkt && kb * j->wkt + tt < j->K; tt++) {
          const float *s = sums + (ob * j->kblocks + kb) * tile + (rr * WKT + tt) * 16;
          acc[(kb * j->wkt + tt) * g->o + ob * j->wob + rr] = _mm512_reduce_add_ps(_mm512_load_ps(s));
        }
  if (j->bias)
    for (int64_t o = 0; o < g->o; o++) acc[j->K * g->o + o] = _mm512_reduce_add_ps(_mm512_load_ps(bsums + o * 16));
}

int ms_k_conv2d_weight_grad_small_avx512(const ms_k_conv2d_geom *g, const float *x, const float *gout, float *gw,
                                         float *gb) {
  wg_job j;
  memset(&j, 0, sizeof j);
  j.g = g, j.x = x, j.gout = gout, j.bias = gb != NULL;
  j.K = g->c * g->kh * g->kw, j.P = g->oh * g->ow;
  /* With the bias, tiles of 4 channels by 5 taps: the bias's 4 sums ride along in registers
   * (3 x 9 sums and 3 more do not fit in 32 beside the loaded vectors). 2 x 9 tiles with the
   * bias, or a pass of its own over gout, cost a fifth of the time (conv1 batch 64, one
   * thread: 117-121 GFLOP/s; 4 x 5: 136). */
  j.wob = j.bias ? 4 : 3, j.wkt = j.bias ? 5 : WKT;
  j.kblocks = (j.K + j.wkt - 1) / j.wkt, j.oblocks = (g->o + j.wob - 1) / j.wob;
  j.rows = shift_chunk_rows(g);
  j.sh = shift_copy_floats(g, j.rows);
  for (int64_t k = 0; k < j.kblocks * j.wkt; k++) {
    int64_t c = k / (g->kh * g->kw), i = k / g->kw % g->kh, jj = k % g->kw;
    j.toff[k] = k < j.K ? (c * g->kw + jj) * j.sh + i * g->ow : 0;
  }
  j.far = conv_small_far(g);
  ms_k_parallel_team(ms_k_conv_wgrad_team(g), wg_member, &j);
  if (j.failed) return -1;
  ms_k_conv_wgrad_reduce(g, j.part, j.team, gw, gb);
  return 0;
}
