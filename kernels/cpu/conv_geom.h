/* conv_geom.h: private to kernels/cpu. What the convolution algorithms of every dtype share
 * (inline here, or in conv_common.c): which output positions see the input, whether the column
 * matrix is the input itself, where its rows read, packing weights, folding a column matrix back
 * into an image, and summing per-thread weight-gradient partials. */
#ifndef MS_CONV_GEOM_H
#define MS_CONV_GEOM_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* The output positions o in [0, osize) whose input position o*s + off lies in [0, isize):
 * [*lo, *hi). Integer division rounds toward zero, hence the sign cases. */
static inline void ms_k_conv_valid_range(int64_t off, int64_t s, int64_t isize, int64_t osize, int64_t *lo,
                                         int64_t *hi) {
  int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t h = isize - 1 - off < 0 ? 0 : (isize - 1 - off) / s + 1;
  if (h > osize) h = osize;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

/* Whether the column matrix is the input itself (1x1 kernel, unit stride, no padding). */
static inline bool ms_k_conv_is_pointwise(const ms_k_conv2d_geom *g) {
  return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* gxs (C, H, W) += the column matrix col (C*KH*KW, OH*OW) folded back, float32 or float64
 * (dt); what fell on padding is dropped. */
void ms_k_conv_col2im(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *col, void *gxs);

/* Rows k of the column matrix (K = C*KH*KW): t[k] where row k reads x relative to a column's
 * window, t[K + k] and t[2K + k] its row and column shifts. In the calling thread's
 * MS_K_BUF_CONV_K slot (nothing is allocated once warm); NULL when out of memory. */
int64_t *ms_k_conv_row_offsets(const ms_k_conv2d_geom *g);

/* Packs rows of an (R x L) row-major matrix m, with an optional extra column `last` (R values),
 * into micro-panels of mr rows (dst[panel][l * mr + r], rows past R zero). */
void ms_k_conv_pack_rows(const float *m, const float *last, int64_t R, int64_t L, int mr, float *dst);

/* The direct float32 weight-gradient kernels (conv_wgrad_avx2.c, conv_small_avx512.c): a team
 * member per sample at most and per ~4 MFLOP of work at least, at most MS_CONV_WGRAD_MAX_TEAM;
 * each member sums into part[m] gW^T (K x O, row k at k*O) then, with a bias, its O values. */
#define MS_CONV_WGRAD_MAX_TEAM 256
int ms_k_conv_wgrad_team(const ms_k_conv2d_geom *g);
/* gw (O x K) and, when not NULL, gb from the members' partials, summed in member order (the
 * same result for the same team size). */
void ms_k_conv_wgrad_reduce(const ms_k_conv2d_geom *g, float *const *part, int team, float *gw, float *gb);

#endif
