/* optim_avx512.c: the float32 Adadelta, Adam/AdamW and SGD steps in AVX-512, eight elements per
 * vector (built with the AVX-512 flags, called by optim.c only when the GEMM runs AVX-512). The
 * bodies are optim_*_body.h: the same bits as the AVX2 and the staged paths. */
#include "kernels/cpu/optim_avx2.h"

#define OPT_VEC(op) _mm512_##op
#define OPT_VD __m512d
#define OPT_LANES 8
#define OPT_LOAD(ptr) _mm512_cvtps_pd(_mm256_loadu_ps(ptr))
#define OPT_STORE(ptr, v) _mm256_storeu_ps((ptr), _mm512_cvtpd_ps(v))
/* optim.c's max_nan: a where a is NaN or a > b, else b */
#define OPT_MAX_NAN(a, b)                                                                          \
  _mm512_mask_blend_pd(_mm512_cmp_pd_mask((a), (a), _CMP_UNORD_Q) | _mm512_cmp_pd_mask((a), (b), _CMP_GT_OQ), (b), (a))
#define OPT_ADADELTA ms_k_adadelta_f32_avx512
#define OPT_ADAM ms_k_adam_f32_avx512
#define OPT_SGD ms_k_sgd_f32_avx512
#include "kernels/cpu/optim_adadelta_body.h"
#include "kernels/cpu/optim_adam_body.h"
#include "kernels/cpu/optim_sgd_body.h"
