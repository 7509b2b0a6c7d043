/* conv_gemm.h: private to kernels/cpu. The implicit-GEMM float32 convolution (conv_gemm.c) that
 * conv.c dispatches to for groups = 1; conv.c's im2col path serves float64 and grouped convs. */
#ifndef MS_CONV_GEMM_H
#define MS_CONV_GEMM_H

#include "kernels/kernels.h"

/* Each returns 0, or -1 when a work buffer could not be allocated. Arguments as
 * ms_k_conv2d_forward / _backward (b and gb may be NULL). */
int ms_k_conv2d_forward_gemm(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *b,
                             float *out);
/* gx (overwritten) from gout. */
int ms_k_conv2d_input_grad_gemm(const ms_k_conv2d_geom *g, const float *w, const float *gout, float *gx);
/* gw (overwritten) and, when gb is not NULL, gb (overwritten) from x and gout. */
int ms_k_conv2d_weight_grad_gemm(const ms_k_conv2d_geom *g, const float *x, const float *gout, float *gw,
                                 float *gb);

#endif
