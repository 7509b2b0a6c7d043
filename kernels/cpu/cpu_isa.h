/* cpu_isa.h: private to kernels/cpu. Whether the AVX2 bodies (the *_avx2.c files) may run: the
 * CPU has AVX2 and FMA and MS_GEMM_ISA does not force the generic code (so tests can run the
 * portable paths on any machine); likewise the AVX-512 ones. gemm.c detects once; this only reads
 * its answer. */
#ifndef MS_CPU_ISA_H
#define MS_CPU_ISA_H

#include <string.h>

#include "kernels/kernels.h"

static inline int ms_k_cpu_avx2(void) { return strcmp(ms_k_gemm_isa(), "generic") != 0; }
/* Whether the AVX-512 bodies (*_avx512.c) may run: the GEMM itself runs AVX-512. */
static inline int ms_k_cpu_avx512(void) { return strcmp(ms_k_gemm_isa(), "avx512") == 0; }
/* Whether the AVX-512 BF16 bodies (*_bf16_avx512.c) may run: the AVX-512 ones may, and the CPU
 * has vdpbf16ps (CPUID leaf 7.1). That the OS saves the zmm state is already in the first: the
 * GEMM chose AVX-512 because libgcc reported avx512f, which it does only when XCR0 enables it. */
static inline int ms_k_cpu_avx512_bf16(void) {
  return ms_k_cpu_avx512() && __builtin_cpu_supports("avx512bf16");
}

/* Whether cast_f16c.c may run: the AVX2 bodies may and the CPU has F16C (every AVX2 CPU has). */
static inline int ms_k_cpu_f16c(void) { return ms_k_cpu_avx2() && __builtin_cpu_supports("f16c"); }

#endif
