/* optim_avx2.h: private to kernels/cpu. The vector optimizer loops (AVX2 and AVX-512) optim.c hands
 * float32 steps to. */
#ifndef MS_OPTIM_AVX2_H
#define MS_OPTIM_AVX2_H

#include <stdint.h>

#include "kernels/kernels.h"

/* Update the first n rounded down to a multiple of 4 (AVX2) or 8 (AVX-512) elements; return that
 * count (the caller does the rest). */
int64_t ms_k_adadelta_f32_avx2(const ms_k_adadelta_hp *hp, int64_t n, float *p, const float *g,
                               float *sq, float *acc);
int64_t ms_k_adadelta_f32_avx512(const ms_k_adadelta_hp *hp, int64_t n, float *p, const float *g,
                                 float *sq, float *acc);

#endif
