/* elementwise_avx512.h: private to kernels/cpu. The AVX-512 bodies elementwise.c hands unit-stride
 * runs to (elementwise_avx512.c). */
#ifndef MS_ELEMENTWISE_AVX512_H
#define MS_ELEMENTWISE_AVX512_H

#include <stdint.h>

/* relu on the first n rounded down to a multiple of 32 bfloat16 elements, bit for bit as
 * elementwise.c's scalar loop; returns that count (the caller does the rest). */
int64_t ms_k_relu_bf16_avx512(int64_t n, uint16_t *out, const uint16_t *x);

#endif
