/* optim_avx2.h: private to kernels/cpu. The vector optimizer loops (AVX2 and AVX-512) optim.c hands
 * float32 steps to. */
#ifndef MS_OPTIM_AVX2_H
#define MS_OPTIM_AVX2_H

#include <stdint.h>

#include "kernels/kernels.h"

/* Each updates the first n rounded down to a multiple of 4 (AVX2) or 8 (AVX-512) elements and
 * returns that count (the caller does the rest). */
int64_t ms_k_adadelta_f32_avx2(const ms_k_adadelta_hp *hp, int64_t n, float *p, const float *g,
                               float *sq, float *acc);
int64_t ms_k_adadelta_f32_avx512(const ms_k_adadelta_hp *hp, int64_t n, float *p, const float *g,
                                 float *sq, float *acc);
/* step_size and bias_correction2_sqrt as ms_k_adam_step computes them once per step; vmax is
 * read only when hp->amsgrad. */
int64_t ms_k_adam_f32_avx2(const ms_k_adam_hp *hp, double step_size, double bias_correction2_sqrt,
                           int64_t n, float *p, const float *g, float *m, float *v, float *vmax);
int64_t ms_k_adam_f32_avx512(const ms_k_adam_hp *hp, double step_size, double bias_correction2_sqrt,
                             int64_t n, float *p, const float *g, float *m, float *v, float *vmax);
/* buf is NULL without momentum. */
int64_t ms_k_sgd_f32_avx2(const ms_k_sgd_hp *hp, int64_t n, float *p, const float *g, float *buf);
int64_t ms_k_sgd_f32_avx512(const ms_k_sgd_hp *hp, int64_t n, float *p, const float *g, float *buf);

#endif
