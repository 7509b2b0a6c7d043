/* cast_half.h: private to kernels/cpu. The vector 16-bit float <-> float32 conversions cast.c hands
 * contiguous runs to: FSDP's bfloat16 mixed precision widens every op's inputs and rounds its
 * outputs, and those conversions one element at a time took three quarters of a training step. */
#ifndef MS_CAST_HALF_H
#define MS_CAST_HALF_H

#include <stdint.h>

/* Convert the first n rounded down to a multiple of 16 elements (8 in AVX2), bit for bit as
 * ms_k_bf16_to_f32 and ms_k_f32_to_bf16 (round to nearest even, NaNs kept quiet, subnormals
 * kept); return that count (the caller does the rest). */
int64_t ms_k_bf16_to_f32_avx512(int64_t n, float *dst, const uint16_t *src);
int64_t ms_k_f32_to_bf16_avx512(int64_t n, uint16_t *dst, const float *src);
int64_t ms_k_bf16_to_f32_avx2(int64_t n, float *dst, const uint16_t *src);
int64_t ms_k_f32_to_bf16_avx2(int64_t n, uint16_t *dst, const float *src);
/* float16 the same way (cast_f16c.c), 8 elements a step, bit for bit as ms_k_f16_to_f32 and
 * ms_k_f32_to_f16; only where ms_k_cpu_f16c() says. */
int64_t ms_k_f16_to_f32_f16c(int64_t n, float *dst, const uint16_t *src);
int64_t ms_k_f32_to_f16_f16c(int64_t n, uint16_t *dst, const float *src);

#endif
