/* conv_bf16.h: private to kernels/cpu. The bfloat16 conv2d (groups = 1) that conv.c hands
 * MS_K_BF16 to: each pass either im2col (on the bf16 words) + ms_k_gemm_bf16 with float32 sums
 * (conv_bf16.c), or the input widened to float32 through the float kernels (conv.c); results
 * rounded to bf16 once. */
#ifndef MS_CONV_BF16_H
#define MS_CONV_BF16_H

#include "kernels/kernels.h"

/* The bf16 GEMM passes (conv_bf16.c); arguments as ms_k_conv2d_forward / _backward. Each returns
 * 0, or -1 when a work buffer could not be allocated. */
int ms_k_conv2d_bf16_forward_gemm(const ms_k_conv2d_geom *g, const uint16_t *x, const uint16_t *w,
                                  const uint16_t *b, uint16_t *out);
int ms_k_conv2d_bf16_input_grad_gemm(const ms_k_conv2d_geom *g, const uint16_t *w, const uint16_t *gout,
                                     uint16_t *gx);
/* gw and gb (either may be NULL) from x and gout. */
int ms_k_conv2d_bf16_weight_grad_gemm(const ms_k_conv2d_geom *g, const uint16_t *x, const uint16_t *gout,
                                      uint16_t *gw, uint16_t *gb);

/* Which way each pass goes: MS_K_BCONV_AUTO (the measured choice), or forced (tests, benches);
 * MS_K_BCONV_OFF leaves bfloat16 convs to the engine's widening. Read once from MS_CONV_BF16
 * (gemm, widen, off) unless set. conv.c chooses, so it keeps the mode. */
typedef enum { MS_K_BCONV_AUTO, MS_K_BCONV_GEMM, MS_K_BCONV_WIDEN, MS_K_BCONV_OFF } ms_k_bconv_mode;
void ms_k_conv2d_bf16_set_mode(ms_k_bconv_mode m);

/* conv_bf16_avx512.c. One 32-column panel of the column matrix in the bf16 GEMM's pair layout
 * (gemm_ukr.h): row r's 32 values start at base + off[r] (contiguous: unit stride, no padding);
 * what lies at or past `end` reads as zero. d is 64-byte aligned. */
void ms_k_bconv_pack_panel_avx512(int64_t k, const uint16_t *base, const int64_t *off,
                                  const uint16_t *end, uint16_t *d);
/* dst[r * ldd + i] = bf16(src[r * lds + i] + bias) for r < rows, i < n. */
void ms_k_bconv_round_avx512(int64_t rows, int64_t n, const float *src, int64_t lds, float bias,
                             uint16_t *dst, int64_t ldd);

/* An 8 x 32 tile of C (overwritten) from A packed 8 rows a pair and B as the bf16 GEMM packs it. */
void ms_k_bconv_ukr8_avx512(int64_t kp, const uint16_t *a, const uint16_t *b, float *c, int64_t rsc);

/* The column matrix (C*KH*KW, OH*OW) of one sample, for unit column stride (sw == 1); col has
 * room for 32 more elements, which it may overwrite. */
void ms_k_bconv_im2col_avx512(const ms_k_conv2d_geom *g, const uint16_t *xs, uint16_t *col);

/* gx (C, H, W) bf16 = one sample's column gradient (K, P) float32 folded back and rounded, for
 * unit stride (sh == sw == 1; any padding and dilation). */
void ms_k_bconv_col2im_s1_avx512(const ms_k_conv2d_geom *g, const float *col, uint16_t *gx);

#endif
