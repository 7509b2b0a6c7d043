/* attention_avx512.h: private to kernels/cpu. The AVX-512 body attention.c hands its rows of
 * exponentials to (attention_avx512.c). */
#ifndef MS_ATTENTION_AVX512_H
#define MS_ATTENTION_AVX512_H

#include <stdint.h>

/* row[t] = exp(row[t] - shift) for the first n rounded down to a multiple of 16 (attention.c's
 * exp_row_f32 with fused multiply-adds); returns that count (the caller does the rest). */
int64_t ms_k_attention_exp_row_avx512(float *row, int64_t n, float shift);

#endif
