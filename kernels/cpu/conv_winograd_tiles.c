/* conv_winograd_tiles.c: the ISA-neutral part of a block of Winograd F(2x2, 3x3) tiles
 * (conv_winograd_tiles.h): the source view, the tile map and the block loop around the ISA's
 * transforms and the SGEMM micro-kernel. Plain C: it runs the same for every ISA. */
#include <string.h>

#include "kernels/cpu/conv_winograd_tiles.h"
#include "kernels/cpu/line_feed.h"

static bool view_direct(const ms_k_wino_job *j) {
  return j->pt == 0 && j->pl == 0 && 2 * j->tiles_h + 2 <= j->hs && 2 * j->tiles_w + 2 <= j->ws;
}

static int view_sample(const ms_k_wino_job *j, int64_t n, ms_k_wino_view *v) {
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
static void map_block(const ms_k_wino_job *j, const ms_k_wino_view *v, int64_t t0, ms_k_wino_map *m) {
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

/* The output lines a slice of `rows` channels will write, asked for before its GEMMs run: each
 * store would otherwise wait for its line from memory. */
static void prefetch_out(const ms_k_wino_job *j, const ms_k_wino_map *m, const float *out, int64_t rows,
                         int64_t plane) {
  for (int64_t r = 0; r < rows; r++, out += plane)
    for (int q = 0; q < m->nn; q += 8) {
      int last = q + 7 < m->nn ? q + 7 : m->nn - 1;
      for (int64_t y = 0; y < 2; y++) {
        __builtin_prefetch(out + m->dst[q] + y * j->ow, 0, 3);
        __builtin_prefetch(out + m->dst[last] + y * j->ow + 1, 0, 3);
      }
    }
}

/* One block: V, then per MR-row slice of the output channels its 16 products, which stay in L1
 * for the inverse transform (V, in L2, is read once per slice). */
static void run_block(ms_k_wino_job *j, const ms_k_wino_view *sv, const ms_k_wino_map *m, float *v, float *mb,
                      float *out, const ms_k_wino_isa *isa, ms_k_line_feed *feed) {
  const int mr = j->t.mr, nr = j->t.nr;
  const float zero = 0.0f, one = 1.0f;
  const int64_t tb = j->tb, vstride = j->vstride, ustride = j->opad * j->cs, mstride = mr * tb;
  const int64_t plane_out = j->oh * j->ow;
  int panels = (m->nn + nr - 1) / nr;
  isa->input(j, sv, m, panels * nr, v);
  for (int64_t o0 = 0; o0 < j->o; o0 += mr) {
    int64_t rows = j->o - o0 < mr ? j->o - o0 : mr;
    prefetch_out(j, m, out + o0 * plane_out, rows, plane_out);
    for (int xi = 0; xi < 16; xi++)
      for (int p = 0; p < panels; p++) {
        if (feed) ms_k_feed_some(feed); /* the next sample, while the FMAs run */
        j->t.ukr(j->cs, &one, j->u + xi * ustride + o0 * j->cs, v + xi * vstride + p * j->cs * nr, &zero,
                 mb + xi * mstride + p * nr, tb, 1);
      }
    isa->output(j, m, o0, rows, mb, out);
  }
}

/* Sample n + 1's source (one contiguous run), if this member goes on to it, asked for over the
 * GEMM calls of sample n's blocks from item `it` on (line_feed.h): its padded copy or its input
 * transform then reads from L2. */
static void feed_next_sample(const ms_k_wino_job *j, int64_t n, int64_t it, int64_t end, int64_t bps,
                             ms_k_line_feed *f) {
  ms_k_feed_reset(f);
  if ((n + 1) * bps >= end) return;
  const int64_t sample = j->cs * j->hs * j->ws, blocks = (n + 1) * bps - it;
  const int64_t calls = (j->o + j->t.mr - 1) / j->t.mr * 16 * ((j->tb + j->t.nr - 1) / j->t.nr);
  ms_k_feed_add(f, j->src + (n + 1) * sample, sizeof(float) * (size_t)sample);
  ms_k_feed_pace(f, blocks * calls);
}

/* Items are (sample, block of its tiles): blocks never span samples, so a sample's view is made
 * once per run of its blocks. */
void ms_k_wino_blocks(ms_k_wino_job *j, int64_t begin, int64_t end, const ms_k_wino_isa *isa) {
  const int64_t tb = j->tb, per = j->tiles_h * j->tiles_w, bps = (per + tb - 1) / tb;
  float *v = ms_k_thread_buffer(MS_K_BUF_CONV_B, sizeof(float) * (size_t)(16 * j->vstride));
  float *mb = ms_k_thread_buffer(MS_K_BUF_CONV_T, sizeof(float) * (size_t)(16 * j->t.mr * tb));
  if (!v || !mb) {
    j->failed = 1;
    return;
  }
  ms_k_line_feed *feed = ms_k_thread_buffer(MS_K_BUF_CONV_FEED, sizeof(ms_k_line_feed));
  ms_k_wino_map map;
  ms_k_wino_view sv = {.n = -1};
  for (int64_t it = begin; it < end; it++) {
    int64_t n = it / bps;
    if (n != sv.n && feed) feed_next_sample(j, n, it, end, bps, feed);
    if (view_sample(j, n, &sv) != 0) {
      j->failed = 1;
      return;
    }
    map_block(j, &sv, it % bps * tb, &map);
    run_block(j, &sv, &map, v, mb, j->out + n * j->o * j->oh * j->ow, isa, feed);
  }
}
