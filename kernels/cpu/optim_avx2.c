/* optim_avx2.c: the float32 Adadelta, Adam/AdamW and SGD steps in AVX2, four elements per vector
 * (built with -mavx2 -mfma, called by optim.c only when the CPU has them). The bodies are
 * optim_*_body.h. */
#include "kernels/cpu/optim_avx2.h"

#define OPT_VEC(op) _mm256_##op
#define OPT_VD __m256d
#define OPT_LANES 4
#define OPT_LOAD(ptr) _mm256_cvtps_pd(_mm_loadu_ps(ptr))
#define OPT_STORE(ptr, v) _mm_storeu_ps((ptr), _mm256_cvtpd_ps(v))
/* optim.c's max_nan: a where a is NaN or a > b, else b */
#define OPT_MAX_NAN(a, b)                                                                          \
  _mm256_blendv_pd((b), (a), _mm256_or_pd(_mm256_cmp_pd((a), (a), _CMP_UNORD_Q), _mm256_cmp_pd((a), (b), _CMP_GT_OQ)))
#define OPT_ADADELTA ms_k_adadelta_f32_avx2
#define OPT_ADAM ms_k_adam_f32_avx2
#define OPT_SGD ms_k_sgd_f32_avx2
#include "kernels/cpu/optim_adadelta_body.h"
#include "kernels/cpu/optim_adam_body.h"
#include "kernels/cpu/optim_sgd_body.h"
