/* layer_norm_fast.c: the choice of layer_norm_fast.h's vector body (AVX-512, AVX2, else none:
 * the portable build keeps nn_ops_body.h's scalar loops). */
#include <stddef.h>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/layer_norm_fast.h"

typedef void (*ln_range_fn)(const ms_k_ln_args *a, int64_t begin, int64_t end);

static bool run_fast(ln_range_fn avx512, ln_range_fn avx2, const ms_k_ln_args *a, int64_t begin,
                     int64_t end) {
  ln_range_fn f = ms_k_cpu_avx512() ? avx512 : ms_k_cpu_avx2() ? avx2 : NULL;
  if (f) f(a, begin, end);
  return f != NULL;
}

bool ms_k_layer_norm_rows_fast(const ms_k_ln_args *a, int64_t begin, int64_t end) {
  return run_fast(ms_k_layer_norm_rows_avx512, ms_k_layer_norm_rows_avx2, a, begin, end);
}

bool ms_k_layer_norm_backward_rows_fast(const ms_k_ln_args *a, int64_t begin, int64_t end) {
  return run_fast(ms_k_layer_norm_backward_rows_avx512, ms_k_layer_norm_backward_rows_avx2, a, begin, end);
}

bool ms_k_layer_norm_param_cols_fast(const ms_k_ln_args *a, int64_t begin, int64_t end) {
  return run_fast(ms_k_layer_norm_param_cols_avx512, ms_k_layer_norm_param_cols_avx2, a, begin, end);
}
