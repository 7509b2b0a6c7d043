/* conv_im2col.h: private to kernels/cpu. The im2col + GEMM convolution (conv_im2col.c), float32
 * or float64, any groups. Arguments and results as ms_k_conv2d_forward / _backward. */
#ifndef MS_CONV_IM2COL_H
#define MS_CONV_IM2COL_H

#include "kernels/kernels.h"

int ms_k_conv2d_forward_im2col(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *x, const void *w,
                               const void *b, void *out);
int ms_k_conv2d_backward_im2col(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *x, const void *w,
                                const void *gout, void *gx, void *gw, void *gb);

#endif
