/* conv_gemm.h: private to kernels/cpu. The float32 groups-1 convolutions on GEMM-shaped kernels
 * that conv.c chooses among: the implicit GEMM (conv_gemm.c, any shape), the wide rows
 * (conv_wide.c, unit stride) and the direct weight gradient (conv_wgrad_avx2.c). */
#ifndef MS_CONV_GEMM_H
#define MS_CONV_GEMM_H

#include <stdbool.h>

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

/* conv_wide.c: unit stride (any padding and dilation) over wide output rows; the input gradient
 * as a correlation of the padded gout with the flipped weight (padding at most (KH-1)*DH). */
bool ms_k_conv2d_wide_forward_ok(const ms_k_conv2d_geom *g);
int ms_k_conv2d_forward_wide(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *b,
                             float *out);
bool ms_k_conv2d_wide_input_grad_ok(const ms_k_conv2d_geom *g);
int ms_k_conv2d_input_grad_wide(const ms_k_conv2d_geom *g, const float *w, const float *gout, float *gx);

/* conv_ukr_avx2.c: c (MR x NR, row stride ldc) = a (a packed MR-row panel, k groups of MR) times
 * B, whose row p is the NR floats at xs + koff[p], plus bias (MR values, one per row) or, when
 * bias is NULL, plus c's own values. */
#define MS_CONV_UKR_MR 4
#define MS_CONV_UKR_NR 24
void ms_k_conv_ukr_avx2(int64_t k, const float *a, const float *xs, const int64_t *koff, const float *bias,
                        float *c, int64_t ldc);

/* conv_wgrad_avx2.c: gw and gb (may be NULL) as dot products read straight from x and gout, for
 * unit column stride without padding; AVX2 only. */
int ms_k_conv2d_weight_grad_dot_avx2(const ms_k_conv2d_geom *g, const float *x, const float *gout, float *gw,
                                     float *gb);

#endif
