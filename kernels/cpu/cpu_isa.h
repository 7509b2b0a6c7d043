/* cpu_isa.h: private to kernels/cpu. Which instruction-set bodies may run, detected once
 * (cpu_isa.c): every ISA question in kernels/cpu asks here. MS_GEMM_ISA (generic, avx2) may force
 * a lower level than the CPU's, so tests can run every path on one machine; it never raises it. */
#ifndef MS_CPU_ISA_H
#define MS_CPU_ISA_H

#include <stdbool.h>

/* Levels in order: each includes the ones before it. AVX2 means AVX2 and FMA; AVX512 means F, BW,
 * DQ and VL (the *_avx512.c files are built with all four). */
typedef enum { MS_K_ISA_PORTABLE, MS_K_ISA_AVX2, MS_K_ISA_AVX512, MS_K_ISA_COUNT } ms_k_isa;

/* Extensions asked about on their own; each is reported only where its level may run. */
typedef enum {
  MS_K_ISA_F16C = 1,        /* cast_f16c.c: with AVX2 (every AVX2 CPU has it) */
  MS_K_ISA_AVX512_BF16 = 2, /* *_bf16_avx512.c: vdpbf16ps (CPUID leaf 7.1), with AVX-512 */
} ms_k_isa_feature;

ms_k_isa ms_k_cpu_isa(void);
bool ms_k_cpu_has(ms_k_isa_feature f);
/* The level's name as MS_GEMM_ISA spells it: "generic", "avx2", "avx512". */
const char *ms_k_isa_name(ms_k_isa isa);

/* Whether the AVX2 bodies (*_avx2.c) may run. */
static inline bool ms_k_cpu_avx2(void) { return ms_k_cpu_isa() >= MS_K_ISA_AVX2; }
/* Whether the AVX-512 bodies (*_avx512.c) may run. */
static inline bool ms_k_cpu_avx512(void) { return ms_k_cpu_isa() >= MS_K_ISA_AVX512; }
/* Whether the AVX-512 BF16 bodies (*_bf16_avx512.c) may run. */
static inline bool ms_k_cpu_avx512_bf16(void) { return ms_k_cpu_has(MS_K_ISA_AVX512_BF16); }
/* Whether cast_f16c.c may run. */
static inline bool ms_k_cpu_f16c(void) { return ms_k_cpu_has(MS_K_ISA_F16C); }

#endif
