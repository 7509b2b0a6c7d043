/* gemm_avx2.c: the AVX2 + FMA GEMM micro-kernels (built with -mavx2 -mfma, called only when the
 * CPU has both): 256-bit vectors, 12 ymm accumulators. The body is gemm_ukr_body.h. */
#define UKR_VEC(op) _mm256_##op
#define UKR_VF __m256
#define UKR_VD __m256d
#define UKR_SGEMM ms_k_sgemm_ukr_avx2
#define UKR_DGEMM ms_k_dgemm_ukr_avx2
#define UKR_SGEMM_MR MS_SGEMM_AVX2_MR
#define UKR_SGEMM_NR MS_SGEMM_AVX2_NR
#define UKR_DGEMM_MR MS_DGEMM_AVX2_MR
#define UKR_DGEMM_NR MS_DGEMM_AVX2_NR
#include "kernels/cpu/gemm_ukr_body.h"
