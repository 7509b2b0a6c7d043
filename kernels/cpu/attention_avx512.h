/* attention_avx512.h: private to kernels/cpu. The AVX-512 body attention.c hands its rows of
 * exponentials and maxima to (attention_avx512.c). */
#ifndef MS_ATTENTION_AVX512_H
#define MS_ATTENTION_AVX512_H

#include <stdint.h>

/* row[t] = exp(row[t] - shift) for t < n (attention.c's exp_sum_f32 with fused multiply-adds);
 * returns their sum. */
float ms_k_attention_exp_sum_avx512(float *row, int64_t n, float shift);
/* The largest of row[0 .. n) (-inf for n = 0). */
float ms_k_attention_max_avx512(const float *row, int64_t n);

#endif
