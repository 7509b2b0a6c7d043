/* gemm_mr8_avx512.c: an 8 x 32 AVX-512 float micro-kernel (16 zmm accumulators), the same body as
 * gemm_avx512.c's 12 x 32. For products whose row count is a multiple of 8 but not of 12, where
 * the 12-row tile pads: the Winograd convolutions' 16 GEMMs run over channel counts (conv2's 64
 * output and 32 input channels), which 12 rows pad by 12.5%. Per step it loads 10 values for 16
 * FMAs instead of 14 for 24: still bound by the FMAs on Zen 5 (two 512-bit loads a cycle). */
#define UKR_VEC(op) _mm512_##op
#define UKR_VF __m512
#define UKR_VD __m512d
#define UKR_SGEMM ms_k_sgemm_ukr_avx512_mr8
#define UKR_SGEMM_MR MS_SGEMM_AVX512_MR8
#define UKR_SGEMM_NR MS_SGEMM_AVX512_NR
#include "kernels/cpu/gemm_ukr_body.h"
