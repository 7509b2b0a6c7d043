/* cpu_isa.c: the CPU's instruction sets, detected once per process (cpu_isa.h). */
#include "kernels/cpu/cpu_isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

static const char *const isa_names[MS_K_ISA_COUNT] = {
    [MS_K_ISA_PORTABLE] = "generic", [MS_K_ISA_AVX2] = "avx2", [MS_K_ISA_AVX512] = "avx512"};

#ifdef MS_NO_X86_KERNELS
/* Built without the x86 bodies (x86_absent.h): the portable kernels, whatever the CPU. */
static ms_k_isa detect_level(void) { return MS_K_ISA_PORTABLE; }
#else
static ms_k_isa detect_level(void) {
  ms_k_isa best = MS_K_ISA_PORTABLE;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = MS_K_ISA_AVX2;
  /* The AVX-512 files are built with BW/DQ/VL too, so the compiler may use any of them. That the
   * OS saves the zmm state is implied: libgcc reports avx512f only when XCR0 enables it. */
  if (best == MS_K_ISA_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    best = MS_K_ISA_AVX512;
  /* MS_GEMM_ISA may force a lower level (to test each on one machine), never a higher one. */
  const char *env = getenv("MS_GEMM_ISA");
  for (int i = 0; env && i < (int)best; i++)
    if (strcmp(env, isa_names[i]) == 0) return (ms_k_isa)i;
  return best;
}
#endif

/* The level in bits 0-1, the features above it, and KNOWN once detected. */
enum { LEVEL_MASK = 3, FEATURE_SHIFT = 2, KNOWN = 1 << 8 };
_Static_assert(MS_K_ISA_COUNT - 1 <= LEVEL_MASK, "the levels fit in LEVEL_MASK");

static int detect(void) {
  ms_k_isa level = detect_level();
  int features = 0;
#ifndef MS_NO_X86_KERNELS
  __builtin_cpu_init();
  if (level >= MS_K_ISA_AVX2 && __builtin_cpu_supports("f16c")) features |= MS_K_ISA_F16C;
  if (level >= MS_K_ISA_AVX512 && __builtin_cpu_supports("avx512bf16")) features |= MS_K_ISA_AVX512_BF16;
#endif
  return KNOWN | features << FEATURE_SHIFT | (int)level;
}

static int isa_bits(void) {
  static _Atomic int bits; /* 0 until detected; racing first calls compute the same value */
  int v = atomic_load_explicit(&bits, memory_order_relaxed);
  if (!v) {
    v = detect();
    atomic_store_explicit(&bits, v, memory_order_relaxed);
  }
  return v;
}

ms_k_isa ms_k_cpu_isa(void) { return (ms_k_isa)(isa_bits() & LEVEL_MASK); }

bool ms_k_cpu_has(ms_k_isa_feature f) { return (isa_bits() >> FEATURE_SHIFT & (int)f) != 0; }

const char *ms_k_isa_name(ms_k_isa isa) { return isa_names[isa]; }

const char *ms_k_gemm_isa(void) { return ms_k_isa_name(ms_k_cpu_isa()); }
