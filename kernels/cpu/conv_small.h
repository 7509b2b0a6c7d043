/* conv_small.h: private to kernels/cpu. Direct AVX-512 float32 kernels for convolutions with a few
 * input channels (the seed's conv1: 1 -> 32 channels, 3x3, 28x28), which the GEMM-shaped paths
 * run at a fifth of peak: K = C*KH*KW is too short to amortise packing, and their wide rows
 * compute and drop KW-1 columns of every row (conv_small_avx512.c). */
#ifndef MS_CONV_SMALL_H
#define MS_CONV_SMALL_H

#include <stdbool.h>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/kernels.h"

/* Output channels per forward block; O must be a multiple of it. */
#define MS_CONV_SMALL_OB 8

/* Whether the direct kernels take g: float32 groups-1 unit-stride undilated unpadded convs of at
 * most 4 input channels, kernels up to 5x5, O a multiple of 8, and the AVX-512 GEMM ISA in use
 * (MS_GEMM_ISA=avx2 or generic keeps the older paths, so every ISA stays testable). Inline here,
 * not in the AVX-512 file, so that asking never runs an AVX-512 instruction. */
static inline bool ms_k_conv_small_avx512_ok(const ms_k_conv2d_geom *g) {
  return g->groups == 1 && g->c >= 1 && g->c <= 4 && g->kh >= 1 && g->kh <= 5 && g->kw >= 1 && g->kw <= 5 &&
         g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->ph == 0 && g->pw == 0 &&
         g->o % MS_CONV_SMALL_OB == 0 && ms_k_cpu_avx512();
}

/* The input gradient's scratch (conv_small_avx512.c) holds a plane per tap of this many floats:
 * the OH*OW outputs rounded up to pairs of vectors. */
static inline int64_t ms_k_conv_small_gin_plane(const ms_k_conv2d_geom *g) { return (g->oh * g->ow + 31) / 32 * 32; }

/* The input gradient's direct kernel is taken where that scratch stays within 1 MB a thread (a
 * single-channel plane of up to ~170 x 170 for 3x3); larger planes take the GEMM-shaped path. */
static inline bool ms_k_conv_small_input_grad_ok(const ms_k_conv2d_geom *g) {
  return ms_k_conv_small_avx512_ok(g) &&
         g->kh * g->kw * ms_k_conv_small_gin_plane(g) * (int64_t)sizeof(float) <= ((int64_t)1 << 20);
}

/* As ms_k_conv2d_forward_gemm / ms_k_conv2d_weight_grad_gemm (conv_gemm.h) for the shapes above:
 * 0, or -1 when a work buffer could not be allocated. */
int ms_k_conv2d_forward_small_avx512(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *b,
                                     float *out);
int ms_k_conv2d_input_grad_small_avx512(const ms_k_conv2d_geom *g, const float *w, const float *gout, float *gx);
int ms_k_conv2d_weight_grad_small_avx512(const ms_k_conv2d_geom *g, const float *x, const float *gout, float *gw,
                                         float *gb);

#endif
