/* activation_f32.h: float32 GELU(tanh) and SiLU forward and backward over contiguous arrays,
 * through a sigmoid built on a polynomial exp (activation_f32_body.h) that the compiler
 * vectorises, instead of one libm tanhf/expf call per element. The AVX-512 build of the same
 * loops (activation_f32_avx512.c, _avx2.c) runs where the CPU has it. */
#ifndef MS_KERNELS_CPU_ACTIVATION_F32_H
#define MS_KERNELS_CPU_ACTIVATION_F32_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernel_table.h"

/* Computes act over x[0..n) into y (or its gradient g -> gx); false for an activation without a
 * fast path (the caller runs its portable loop). */
bool ms_k_activation_f32_fast(ms_k_act act, const float *x, float *y, int64_t n);
bool ms_k_activation_backward_f32_fast(ms_k_act act, const float *x, const float *g, float *gx, int64_t n);

/* The same over bfloat16 memory, widened in registers and rounded once on store (the float32
 * loop's values, rounded); false for an activation without it or where no such loop may run (the
 * caller widens blocks into float32). AVX-512 only. */
bool ms_k_activation_bf16_fast(ms_k_act act, const uint16_t *x, uint16_t *y, int64_t n);
bool ms_k_activation_backward_bf16_fast(ms_k_act act, const uint16_t *x, const uint16_t *g, uint16_t *gx, int64_t n);

bool ms_k_activation_f32_avx2(ms_k_act act, const float *x, float *y, int64_t n);
bool ms_k_activation_backward_f32_avx2(ms_k_act act, const float *x, const float *g, float *gx, int64_t n);
bool ms_k_activation_f32_avx512(ms_k_act act, const float *x, float *y, int64_t n);
bool ms_k_activation_backward_f32_avx512(ms_k_act act, const float *x, const float *g, float *gx, int64_t n);
bool ms_k_activation_bf16_avx512(ms_k_act act, const uint16_t *x, uint16_t *y, int64_t n);
bool ms_k_activation_backward_bf16_avx512(ms_k_act act, const uint16_t *x, const uint16_t *g, uint16_t *gx, int64_t n);

#endif
