/* activation_f32_avx512.c: activation_f32_body.h compiled for AVX-512 (16 lanes a loop step). */
#include "kernels/cpu/activation_f32.h"

#define SFX(name) name##_avx512
#include "kernels/cpu/activation_f32_body.h"
#undef SFX
