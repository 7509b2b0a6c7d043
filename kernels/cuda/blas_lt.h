/* blas_lt.h: the gemm slot's bias epilogue through cuBLASLt (blas_lt.c), for blas.c. */
#ifndef MS_KCU_BLAS_LT_H
#define MS_KCU_BLAS_LT_H

#include <cublas_api.h>
#include <stdint.h>

#include "kernels/kernel_table.h"

/* One column-major product D = alpha op(a) op(b) + bias (m x n, inner size k; beta 0, D = c):
 * cuBLAS's view of a row-major C, so bias has m elements (C's columns), contiguous, of dt. */
typedef struct ms_kcu_lt_gemm {
  ms_k_dtype dt;
  cublasOperation_t oa, ob;
  int64_t m, n, k, lda, ldb, ldc;
  const void *a, *b, *bias;
  void *c;
  double alpha;
} ms_kcu_lt_gemm;

/* What ms_kcu_lt_gemm_bias returns where cuBLASLt does not take the product (not loadable, no
 * algorithm for its types or alignments): nothing was launched; the caller takes its own path. */
enum { MS_KCU_LT_DECLINED = -2 };

/* 0, MS_KCU_LT_DECLINED, or a failure (ms_kcu_fail's MS_KCU_ERR_DETAIL) on the device's stream. */
int ms_kcu_lt_gemm_bias(const ms_kcu_lt_gemm *g, int device, void *stream);

#endif
