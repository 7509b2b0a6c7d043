/* gemm_ukr.h: private to kernels/cpu. The GEMM micro-kernels each ISA file provides to the driver
 * in gemm.c, and the packed layouts they share. Not part of the kernel interface (kernels.h). */
#ifndef MS_GEMM_UKR_H
#define MS_GEMM_UKR_H

#include <stdint.h>

/* One MR x NR tile of C: c = alpha * a * b + beta * c, with beta == 0 meaning c is not read.
 * a is the packed A micro-panel: k groups of MR values (column p of the MR rows, contiguous).
 * b is the packed B micro-panel: k groups of NR values (row p of the NR columns, contiguous).
 * Both are 64-byte aligned. c has element strides rsc/csc; csc == 1 is the fast case.
 * alpha and beta come by pointer so that no vector register is tied up by them during the loop:
 * with 2*MR accumulators in flight, compilers would otherwise spill an accumulator at -O2. */
typedef void (*ms_k_sgemm_ukr)(int64_t k, const float *alpha, const float *a, const float *b,
                               const float *beta, float *c, int64_t rsc, int64_t csc);
typedef void (*ms_k_dgemm_ukr)(int64_t k, const double *alpha, const double *a, const double *b,
                               const double *beta, double *c, int64_t rsc, int64_t csc);

/* AVX2 + FMA (gemm_avx2.c): vectors along N, MR rows broadcast from A; 12 ymm accumulators. */
#define MS_SGEMM_AVX2_MR 6
#define MS_SGEMM_AVX2_NR 16
#define MS_DGEMM_AVX2_MR 6
#define MS_DGEMM_AVX2_NR 8
void ms_k_sgemm_ukr_avx2(int64_t k, const float *alpha, const float *a, const float *b,
                         const float *beta, float *c, int64_t rsc, int64_t csc);
void ms_k_dgemm_ukr_avx2(int64_t k, const double *alpha, const double *a, const double *b,
                         const double *beta, double *c, int64_t rsc, int64_t csc);

/* One float micro-panel of A (mm <= MR rows, k columns) or B (k rows, nn <= NR columns), packed
 * and zero-padded in the layout above from strides rs/cs; returns 0, packing nothing, for
 * strides it has no fast path for. AVX2 (gemm_pack_avx2.c): MR 6, NR 16. */
typedef int (*ms_k_spack_fn)(int64_t k, int64_t mn, const float *src, int64_t rs, int64_t cs,
                             float *dst);
int ms_k_spack_a_avx2(int64_t k, int64_t mm, const float *a, int64_t rs, int64_t cs, float *d);
int ms_k_spack_b_avx2(int64_t k, int64_t nn, const float *b, int64_t rs, int64_t cs, float *d);

/* AVX-512F (gemm_avx512.c): the same code with 512-bit vectors and twice the rows: 24 of the 32
 * zmm registers accumulate. */
#define MS_SGEMM_AVX512_MR 12
#define MS_SGEMM_AVX512_NR 32
#define MS_DGEMM_AVX512_MR 12
#define MS_DGEMM_AVX512_NR 16
void ms_k_sgemm_ukr_avx512(int64_t k, const float *alpha, const float *a, const float *b,
                           const float *beta, float *c, int64_t rsc, int64_t csc);
void ms_k_dgemm_ukr_avx512(int64_t k, const double *alpha, const double *a, const double *b,
                           const double *beta, double *c, int64_t rsc, int64_t csc);
/* An 8-row tile of the same width (gemm_mr8_avx512.c), for row counts 12 pads and 8 does not. */
#define MS_SGEMM_AVX512_MR8 8
void ms_k_sgemm_ukr_avx512_mr8(int64_t k, const float *alpha, const float *a, const float *b,
                               const float *beta, float *c, int64_t rsc, int64_t csc);
/* Its packers (gemm_pack_avx512.c): MR 12, NR 32, as ms_k_spack_fn. */
int ms_k_spack_a_avx512(int64_t k, int64_t mm, const float *a, int64_t rs, int64_t cs, float *d);
int ms_k_spack_b_avx512(int64_t k, int64_t nn, const float *b, int64_t rs, int64_t cs, float *d);

/* bfloat16 operands, float32 C (gemm_bf16_avx512.c, built with -mavx512bf16 too, called only
 * when ms_k_gemm_bf16_available()). vdpbf16ps multiplies pairs of bf16 and adds both products to
 * one float lane, so K is packed in pairs: per pair p, a holds MR 32-bit words (row i's A[i][2p]
 * in the low half, A[i][2p+1] in the high half: the word the kernel broadcasts) and b holds NR
 * (column j's B[2p][j], B[2p+1][j]: 16 columns a vector). An odd k pads the last pair's high
 * halves with zero. kp is the number of pairs; the rest is as for ms_k_sgemm_ukr. 12 x 32 as the
 * float tile: 24 zmm accumulators, 2 B vectors, 1 broadcast. */
typedef void (*ms_k_bgemm_ukr)(int64_t kp, const float *alpha, const uint16_t *a,
                               const uint16_t *b, const float *beta, float *c, int64_t rsc,
                               int64_t csc);
#define MS_BGEMM_AVX512_MR 12
#define MS_BGEMM_AVX512_NR 32
void ms_k_bgemm_ukr_avx512(int64_t kp, const float *alpha, const uint16_t *a, const uint16_t *b,
                           const float *beta, float *c, int64_t rsc, int64_t csc);
/* One bf16 micro-panel of A (mm <= MR rows) or B (nn <= NR columns) over k (any k: odd pads),
 * packed in the pair layout above; returns 0, packing nothing, for strides with no fast path. */
typedef int (*ms_k_bpack_fn)(int64_t k, int64_t mn, const uint16_t *src, int64_t rs, int64_t cs,
                             uint16_t *dst);
int ms_k_bpack_a_avx512(int64_t k, int64_t mm, const uint16_t *a, int64_t rs, int64_t cs,
                        uint16_t *d);
int ms_k_bpack_b_avx512(int64_t k, int64_t nn, const uint16_t *b, int64_t rs, int64_t cs,
                        uint16_t *d);

/* The largest tile any kernel uses, for the driver's edge-tile scratch. */
#define MS_GEMM_MAX_TILE (12 * 32)
#define MS_GEMM_MAX_NR 32

/* The float micro-kernel this CPU runs (gemm.c chooses it once), for callers in kernels/cpu that
 * pack their own panels (the implicit-GEMM convolution, attention), with the driver's vectorised
 * panel packers for it (NULL where there is none: pack in C). */
typedef struct ms_k_sgemm_tile {
  int mr, nr;
  ms_k_sgemm_ukr ukr;
  ms_k_spack_fn pack_a, pack_b;
} ms_k_sgemm_tile;
ms_k_sgemm_tile ms_k_sgemm_tile_get(void);
/* The one for products of m rows, for callers that pack A themselves: the default, or on AVX-512
 * the 8-row tile where m is a multiple of 8 and not of 12 (64 rows: 64 on 8, 72 on 12). */
ms_k_sgemm_tile ms_k_sgemm_tile_for_rows(int64_t m);

/* Per-thread work buffers, kept between calls (so a training step allocates nothing once warm)
 * and freed when their thread exits: a 64-byte aligned block of at least `size` bytes in slot
 * `which`, or NULL when out of memory. A slot's contents do not survive the next call for the
 * same slot on the same thread. */
enum {
  MS_K_BUF_GEMM_A, MS_K_BUF_GEMM_B, /* the GEMM driver's packed blocks, */
  MS_K_BUF_GEMM_C,                  /* and a bfloat16 C's float32 sums (the calling thread's) */
  MS_K_BUF_CONV_W, MS_K_BUF_CONV_B, MS_K_BUF_CONV_T, MS_K_BUF_CONV_A, /* conv_gemm.c, conv_wide.c */
  MS_K_BUF_CONV_K, /* the convolutions' column-matrix row offsets (the calling thread's) */
  MS_K_BUF_WGRAD_A, MS_K_BUF_WGRAD_B, MS_K_BUF_WGRAD_M, /* conv_winograd_wgrad.c: panels, sums, */
  MS_K_BUF_WGRAD_FEED, MS_K_BUF_CONV_FEED,              /* the next block's lines (line_feed.h) */
  MS_K_BUF_BCONV_COL, MS_K_BUF_BCONV_F32, MS_K_BUF_BCONV_GW, /* conv_bf16.c: columns, sums, */
  MS_K_BUF_BCONV_GB, MS_K_BUF_BCONV_GX,                      /* partials, widened input grad */
  MS_K_BUF_POOL_A, MS_K_BUF_POOL_B, /* pool.c: a bfloat16 plane's input and output in float32 */
  MS_K_BUF_ATTN_P, /* attention_f32.h, attention_bf16.h: a problem's packed panels */
  MS_K_BUF_COUNT
};
void *ms_k_thread_buffer(int which, size_t size);

#endif
