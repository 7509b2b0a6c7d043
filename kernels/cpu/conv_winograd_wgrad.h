/* conv_winograd_wgrad.h: private to kernels/cpu. The float32 weight (and bias) gradient of a 3x3
 * stride-1 convolution by Winograd F(3x3, 2x2) (conv_winograd_wgrad.c drives, the AVX2 transforms
 * are in conv_winograd_wgrad_avx2.c). conv.c chooses it where AVX2 runs.
 *
 * Letters: a tile is a 2x2 block of one sample's gout (rows 2ty.., columns 2tx..; past the edge
 * it reads zeros) with the 4x4 block of x its 3x3 taps reach (from row 2ty - ph, column 2tx - pw);
 * TH x TW tiles a sample. xi (0..15) is a point of the 4x4 transform domain. A group is up to 8
 * tiles of one tile row, the unit the transforms (8 channels at a time, one per AVX2 lane) and
 * the threads work on. */
#ifndef MS_CONV_WINOGRAD_WGRAD_H
#define MS_CONV_WINOGRAD_WGRAD_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* Whether the geometry is one this path computes (3x3, unit stride and dilation, groups 1,
 * padding 0..2) and where it is faster than the direct paths (channels enough: O * C >= 2048). */
bool ms_k_conv2d_wino_wgrad_ok(const ms_k_conv2d_geom *g);
/* gw (overwritten) and, when gb is not NULL, gb (overwritten) from x and gout; 0, or -1 when a
 * work buffer could not be allocated. The caller checks the geometry (its shape part of _ok)
 * and that AVX2 may run. */
int ms_k_conv2d_weight_grad_wino(const ms_k_conv2d_geom *g, const float *x, const float *gout, float *gw,
                                 float *gb);

/* A block: up to MS_K_WINO_KC tiles in up to MS_K_WINO_GROUPS groups (each up to 8 tiles of one
 * tile row of sample n, starting at tile tx0; toff: its first tile's place in the block). */
#define MS_K_WINO_KC 48
#define MS_K_WINO_GROUPS 32
typedef struct ms_k_wino_group {
  int64_t n, ty, tx0, toff;
  int nv;
} ms_k_wino_group;
typedef struct ms_k_wino_block {
  int ng;
  int64_t kc;
  ms_k_wino_group gr[MS_K_WINO_GROUPS];
} ms_k_wino_block;

/* Where a block's transformed tiles go: the panels the SGEMM micro-kernel reads, per point xi
 * A (gout: rows O rounded up to mr, in panels of mr) at a + xi * xs_a, xs_a >= rows * kc + 8
 * (the 8: room for whole-vector stores past the last panel), and B (x: cols C rounded up to nr,
 * in panels of nr) at b + xi * cols * kc. */
typedef struct ms_k_wino_panels {
  int mr, nr;
  int64_t rows, cols, xs_a;
  float *a, *b;
} ms_k_wino_panels;
/* conv_winograd_wgrad_avx2.c: block b transformed into p (channels past O or C as zeros). When
 * bias is not NULL, each tile's gout sum is added to bias[l * (rows + 8) + o] (l: the tile's
 * place in its group): the bias gradient, in a fixed order. */
void ms_k_wino_wgrad_pack(const ms_k_conv2d_geom *g, const float *x, const float *gout,
                          const ms_k_wino_block *b, const ms_k_wino_panels *p, float *bias);

#endif
