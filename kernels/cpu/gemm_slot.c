/* gemm_slot.c: the CPU body of the kernel table's gemm slot: float32 and float64 on the packed
 * GEMM, bfloat16 (float32 or bfloat16 C) on the bfloat16 GEMM, integers on an exact loop. The engine has
 * settled the dtypes, so the body only routes. */
#include "kernels/kernel_table.h"

/* One element of dtype dt at p, as an int64 (ms_k_cast's conversion). */
static int64_t read_int(const char *p, ms_k_dtype dt) {
  int64_t v;
  ms_k_cast(1, &v, MS_K_I64, 1, p, dt, 1);
  return v;
}

static int64_t dtype_size(ms_k_dtype dt) {
  switch (dt) {
  case MS_K_F64: case MS_K_I64: return 8;
  case MS_K_F32: case MS_K_I32: return 4;
  case MS_K_BF16: case MS_K_F16: return 2;
  case MS_K_U8: case MS_K_BOOL: return 1;
  }
  return 1;
}

/* Integer products stay exact, wrapping like PyTorch's, in int64: alpha and beta arrive as whole
 * numbers, and nothing passes through a double that would round past 2^53. */
static void int_gemm(ms_k_dtype dt, int64_t M, int64_t N, int64_t K, double alpha, const char *a, int64_t rsa,
                     int64_t csa, const char *b, int64_t rsb, int64_t csb, double beta, char *c, int64_t rsc,
                     int64_t csc) {
  uint64_t ialpha = (uint64_t)(int64_t)alpha, ibeta = (uint64_t)(int64_t)beta;
  int64_t es = dtype_size(dt);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      uint64_t acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += (uint64_t)read_int(a + (i * rsa + k * csa) * es, dt) * (uint64_t)read_int(b + (k * rsb + j * csb) * es, dt);
      char *dst = c + (i * rsc + j * csc) * es;
      uint64_t prev = ibeta != 0 ? (uint64_t)read_int(dst, dt) : 0;
      int64_t v = (int64_t)(ialpha * acc + ibeta * prev);
      ms_k_cast(1, dst, dt, 1, &v, MS_K_I64, 1);
    }
}

int ms_k_cpu_gemm(const ms_k_exec *x, ms_k_dtype dt, ms_k_dtype cdt, int64_t M, int64_t N, int64_t K, double alpha,
                  const void *a, int64_t rsa, int64_t csa, const void *b, int64_t rsb, int64_t csb, double beta,
                  void *c, int64_t rsc, int64_t csc, const void *bias) {
  (void)x;
  bool floating = (dt == MS_K_F32 && cdt == MS_K_F32) || (dt == MS_K_F64 && cdt == MS_K_F64) ||
                  (dt == MS_K_BF16 && (cdt == MS_K_F32 || cdt == MS_K_BF16));
  if (bias && (!floating || beta != 0)) return 1; /* a case the engine never asks of the CPU */
  if (dt == MS_K_BF16 && cdt == MS_K_BF16)
    return ms_k_gemm_bf16_rounded(M, N, K, (float)alpha, a, rsa, csa, b, rsb, csb, (float)beta, c, rsc, csc, bias)
               ? 0 : MS_K_ERR_NO_MEMORY;
  if (bias)
    ms_k_gemm_bias(dt, M, N, K, alpha, a, rsa, csa, b, rsb, csb, c, rsc, csc, bias);
  else if (dt == MS_K_F32 && cdt == MS_K_F32)
    ms_k_sgemm(M, N, K, (float)alpha, a, rsa, csa, b, rsb, csb, (float)beta, c, rsc, csc);
  else if (dt == MS_K_F64 && cdt == MS_K_F64)
    ms_k_dgemm(M, N, K, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
  else if (dt == MS_K_BF16 && cdt == MS_K_F32)
    ms_k_gemm_bf16(M, N, K, (float)alpha, a, rsa, csa, b, rsb, csb, (float)beta, c, rsc, csc);
  else if (dt == cdt && dt != MS_K_BF16 && dt != MS_K_F16)
    int_gemm(dt, M, N, K, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
  else
    return 1; /* a pairing the engine never asks of the CPU */
  return 0;
}
