/* conv_winograd.h: private to kernels/cpu. Winograd F(2x2, 3x3) for float32 3x3 convolutions with
 * unit stride and dilation (forward, and the input gradient as the correlation of the padded gout
 * with the flipped, transposed weight): conv_winograd.c decides and transforms the weight,
 * conv_winograd_tiles.c runs the tile blocks around the transforms of conv_winograd_avx2.c or, where
 * the GEMM runs AVX-512, conv_winograd_avx512.c (AVX2 at least: the path is taken where it may run). */
#ifndef MS_CONV_WINOGRAD_H
#define MS_CONV_WINOGRAD_H

#include <stdbool.h>
#include <stddef.h> /* size_t, which gemm_ukr.h uses */
#include <stdint.h>

#include "kernels/cpu/gemm_ukr.h"
#include "kernels/kernels.h"

/* Whether the Winograd path serves this call: AVX2 may run, 3x3, stride 1, dilation 1, groups 1,
 * padding <= 2 and enough channels on both sides to pay for the transforms. */
bool ms_k_conv2d_winograd_forward_ok(const ms_k_conv2d_geom *g);
bool ms_k_conv2d_winograd_input_grad_ok(const ms_k_conv2d_geom *g);
/* As ms_k_conv2d_forward_gemm / _input_grad_gemm; they need only the geometry rules above (not
 * the channel counts) and AVX2, so tests call them on any shape. 0, or -1 when out of memory. */
int ms_k_conv2d_forward_winograd(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *b,
                                 float *out);
int ms_k_conv2d_input_grad_winograd(const ms_k_conv2d_geom *g, const float *w, const float *gout, float *gx);

/* ---- shared by the two files ------------------------------------------------------------------
 * Letters: a source sample (CS, HS, WS) sits at (PT, PL) in an implicit zero plane; the output is
 * (O, OH, OW). Output tile (TH, TW) of a sample covers output rows 2*TH + {0, 1} and columns
 * 2*TW + {0, 1} and reads the 4x4 source patch at (2*TH - PT, 2*TW - PL). Tiles are numbered
 * across the batch (n, th, tw) and processed in blocks of TB, a multiple of the tile's NR. */
#define MS_WINO_TB_MAX 256

typedef struct ms_k_wino_job {
  const float *src;
  int64_t n, cs, hs, ws, pt, pl;
  int64_t o, oh, ow;
  int64_t tiles_h, tiles_w, tiles; /* per sample: tiles_h x tiles_w; in all: tiles */
  int64_t tb, opad; /* tiles per block; O rounded up to the tile's MR */
  int64_t vstride; /* floats from one xi's B panels to the next's */
  const float *u; /* the transformed weight: [16][opad / MR][CS][MR] */
  const float *bias; /* O values, or NULL */
  float *out;
  ms_k_sgemm_tile t;
  _Atomic int failed;
} ms_k_wino_job;

/* ms_k_parallel_for bodies over blocks [begin, end) of the job's tiles: the same results, the
 * transforms eight tiles to a vector (AVX2) or sixteen (AVX-512: NR a multiple of 16). */
void ms_k_wino_blocks_avx2(void *job, int64_t begin, int64_t end);
void ms_k_wino_blocks_avx512(void *job, int64_t begin, int64_t end);

#endif
