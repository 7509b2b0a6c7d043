/* attention_bf16_avx512.h: private to kernels/cpu. The AVX512_BF16 body attention.c rounds its
 * bfloat16 row's blocks of weights with (attention_bf16_avx512.c). */
#ifndef MS_ATTENTION_BF16_AVX512_H
#define MS_ATTENTION_BF16_AVX512_H

#include <stdint.h>

/* rows x n floats (row stride ss) rounded to bfloat16 (row stride ds) with vcvtneps2bf16, only
 * where the CPU has AVX512_BF16; subnormals become zero. */
void ms_k_attention_round_bf16(int64_t rows, int64_t n, const float *src, int64_t ss, uint16_t *dst, int64_t ds);

#endif
