/* activation_f32_avx2.c: activation_f32_body.h compiled for AVX2 and FMA (8 lanes a loop step). */
#include "kernels/cpu/activation_f32.h"

#define SFX(name) name##_avx2
#include "kernels/cpu/activation_f32_body.h"
#undef SFX
