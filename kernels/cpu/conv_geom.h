/* conv_geom.h: private to kernels/cpu. What the convolution drivers of every dtype share
 * (conv.c, conv_bf16.c, conv_bf16_avx512.c): which output positions see the input, whether the
 * column matrix is the input itself, and folding a column matrix back into an image. */
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
 * (dt); what fell on padding is dropped (conv.c). */
void ms_k_conv_col2im(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *col, void *gxs);

#endif
