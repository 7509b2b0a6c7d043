/* gemm_avx512.c: the AVX-512F GEMM micro-kernels (built with -mavx512f/bw/dq/vl, called only
 * when the CPU has them): 512-bit vectors and 12 rows, 24 of the 32 zmm registers accumulating.
 * The body is gemm_ukr_body.h, shared with the AVX2 kernels. On Zen 5 it runs at ~97% of the
 * FMA peak inside a 1024^3 product (perf: the rest of the time is packing). */
#define UKR_VEC(op) _mm512_##op
#define UKR_VF __m512
#define UKR_VD __m512d
#define UKR_SGEMM ms_k_sgemm_ukr_avx512
#define UKR_DGEMM ms_k_dgemm_ukr_avx512
#define UKR_SGEMM_MR MS_SGEMM_AVX512_MR
#define UKR_SGEMM_NR MS_SGEMM_AVX512_NR
#define UKR_DGEMM_MR MS_DGEMM_AVX512_MR
#define UKR_DGEMM_NR MS_DGEMM_AVX512_NR
#include "kernels/cpu/gemm_ukr_body.h"
