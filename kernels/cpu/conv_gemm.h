/* conv_gemm.h: private to kernels/cpu. The implicit-GEMM float32 convolution (conv_gemm.c) that
 * conv.c dispatches to for groups = 1; conv.c's im2col path serves float64 and grouped convs. */
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

/* Packs rows of an (R x L) row-major matrix m, with an optional extra column `last` (R values),
 * into micro-panels of mr rows (dst[panel][l * mr + r], rows past R zero). */
void ms_k_conv_pack_rows(const float *m, const float *last, int64_t R, int64_t L, int mr, float *dst);

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

/* conv_wgrad_avx2.c: gw and gb (may be NULL) as dot products read straight from x and gout;
 * koff[k] is where column-matrix row k reads x relative to an output pixel's window. */
int ms_k_conv2d_weight_grad_dot_avx2(const ms_k_conv2d_geom *g, const int64_t *koff, const float *x,
                                     const float *gout, float *gw, float *gb);

#endif
