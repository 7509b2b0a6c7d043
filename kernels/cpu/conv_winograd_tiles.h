/* conv_winograd_tiles.h: private to kernels/cpu. The ISA-neutral part of running a block of
 * Winograd F(2x2, 3x3) tiles (conv_winograd.h has the letters): where a block's tiles read and
 * write (tile_map), the source as they read it (src_view), and the block loop itself, which calls
 * the ISA's input and output transforms. The AVX2 and AVX-512 bodies (conv_winograd_avx2.c,
 * conv_winograd_avx512.c) differ only in those two transforms, so the rest lives here once. */
#ifndef MS_CONV_WINOGRAD_TILES_H
#define MS_CONV_WINOGRAD_TILES_H

#include "kernels/cpu/conv_winograd.h"

/* A block's tiles (all of one sample): where each reads its patch in the source view (see
 * src_view) and writes its top-left output, and which quads of them lie side by side in a row. */
typedef struct ms_k_wino_map {
  int64_t src[MS_WINO_TB_MAX]; /* patch offset in the view's channel 0 */
  int64_t dst[MS_WINO_TB_MAX]; /* top-left output offset in the sample's channel 0 */
  unsigned char full[MS_WINO_TB_MAX]; /* bit 0: the second output column exists; bit 1: the row */
  unsigned char iquad[MS_WINO_TB_MAX / 4]; /* four patches two columns apart in one row */
  unsigned char oquad[MS_WINO_TB_MAX / 4]; /* four full tiles side by side in one output row */
  int nn; /* tiles in the block; positions up to the next multiple of NR read zeros */
} ms_k_wino_map;

/* The source as the patches read it: the sample itself where every patch lies inside, else a
 * zero-bordered copy (in the thread's MS_K_BUF_CONV_A slot) of HP = 2 * tiles_h + 2 rows of
 * WP = 2 * tiles_w + 2, so that no patch needs bounds checks. */
typedef struct ms_k_wino_view {
  const float *base;
  int64_t rs, cs; /* row and channel strides */
  int64_t n; /* the sample it shows, -1 for none yet */
} ms_k_wino_view;

/* An ISA's two transforms. input: V of the block's positions [0, qend) (a multiple of NR; tiles
 * past m->nn read zeros) into the packed B panels v (xi's panels vstride apart). output: the
 * inverse transform of the slice of `rows` output channels from o0, whose 16 products are
 * mb[xi * mstride + r * tb + q], into the sample's output planes out (channel o0 + r at
 * out + (o0 + r) * plane), bias added. */
typedef struct ms_k_wino_isa {
  void (*input)(const ms_k_wino_job *j, const ms_k_wino_view *sv, const ms_k_wino_map *m, int qend, float *v);
  void (*output)(const ms_k_wino_job *j, const ms_k_wino_map *m, int64_t o0, int64_t rows, const float *mb,
                 float *out);
} ms_k_wino_isa;

/* The blocks [begin, end) of the job's items (sample, block of its tiles) with the ISA's
 * transforms: the body of an ISA's ms_k_parallel_for function. */
void ms_k_wino_blocks(ms_k_wino_job *j, int64_t begin, int64_t end, const ms_k_wino_isa *isa);

/* Asks for the block's patch rows of one channel (base: the channel in the view): from memory,
 * where the source is far larger than the caches, the prefetchers alone left the reads waiting. */
static inline void ms_k_wino_prefetch_rows(const ms_k_wino_view *sv, const ms_k_wino_map *m, const float *base) {
  const int64_t span0 = m->src[0], span1 = m->src[m->nn - 1] + 3 * sv->rs + 4;
  for (int64_t off = span0; off < span1; off += 16) __builtin_prefetch(base + off, 0, 3);
}

#endif
