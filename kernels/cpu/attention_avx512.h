/* attention_avx512.h: private to kernels/cpu. The AVX-512 bodies attention.c hands its rows of
 * exponentials to (attention_avx512.c) and its bfloat16 blocks' rounding (attention_bf16_avx512.c). */
#ifndef MS_ATTENTION_AVX512_H
#define MS_ATTENTION_AVX512_H

#include <stdint.h>

/* row[t] = exp(row[t] - shift) for the first n rounded down to a multiple of 16 (attention.c's
 * exp_row_f32 with fused multiply-adds); returns that count (the caller does the rest). */
int64_t ms_k_attention_exp_row_avx512(float *row, int64_t n, float shift);

/* rows x n floats (row stride ss) rounded to bfloat16 (row stride ds) with vcvtneps2bf16
 * (attention_bf16_avx512.c: only where the CPU has AVX512_BF16); subnormals become zero. */
void ms_k_attention_round_bf16(int64_t rows, int64_t n, const float *src, int64_t ss, uint16_t *dst, int64_t ds);

#endif
