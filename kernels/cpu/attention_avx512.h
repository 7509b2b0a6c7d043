/* attention_avx512.h: private to kernels/cpu. The AVX-512 bodies attention.c hands its rows of
 * exponentials to (attention_avx512.c) and its bfloat16 blocks' rounding (attention_bf16_avx512.c). */
#ifndef MS_ATTENTION_AVX512_H
#define MS_ATTENTION_AVX512_H

#include <stdint.h>

/* row[t] = exp(row[t] - shift) for t < n (attention.c's exp_sum_f32 with fused multiply-adds);
 * returns their sum. */
float ms_k_attention_exp_sum_avx512(float *row, int64_t n, float shift);
/* The largest of row[0 .. n) (-inf for n = 0). */
float ms_k_attention_max_avx512(const float *row, int64_t n);

/* rows x n floats (row stride ss) rounded to bfloat16 (row stride ds) with vcvtneps2bf16
 * (attention_bf16_avx512.c: only where the CPU has AVX512_BF16); subnormals become zero. */
void ms_k_attention_round_bf16(int64_t rows, int64_t n, const float *src, int64_t ss, uint16_t *dst, int64_t ds);

#endif
