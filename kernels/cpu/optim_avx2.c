/* optim_avx2.c: the float32 Adadelta step in AVX2, four elements per vector (built with -mavx2
 * -mfma, called by optim.c only when the CPU has them). The body is optim_adadelta_body.h. */
#include "kernels/cpu/optim_avx2.h"

#define OPT_VEC(op) _mm256_##op
#define OPT_VD __m256d
#define OPT_LANES 4
#define OPT_LOAD(ptr) _mm256_cvtps_pd(_mm_loadu_ps(ptr))
#define OPT_STORE(ptr, v) _mm_storeu_ps((ptr), _mm256_cvtpd_ps(v))
#define OPT_ADADELTA ms_k_adadelta_f32_avx2
#include "kernels/cpu/optim_adadelta_body.h"
