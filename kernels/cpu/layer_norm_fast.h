/* layer_norm_fast.h: private to kernels/cpu. Layer norm's rows and parameter-gradient columns in
 * float32 or bfloat16 on AVX-512 or AVX2 vectors (layer_norm_body.h), for nn_ops.c's kernels.
 * bfloat16 is loaded and widened in registers and each result rounded once on store, so its
 * values are the float32 body's on the widened inputs, rounded: what nn_ops_half.h's widened
 * rows gave. The weight, bias, statistics and parameter gradients are float32 in both. */
#ifndef MS_KERNELS_CPU_LAYER_NORM_FAST_H
#define MS_KERNELS_CPU_LAYER_NORM_FAST_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ms_k_ln_args {
  int64_t M, C;          /* rows of C elements */
  bool bf16;             /* x, g, y and gx hold bfloat16; else float32 */
  const void *x, *g;     /* input; the output's gradient (backward) */
  const float *w, *b;    /* weight and bias, each may be NULL */
  const float *mean, *rstd; /* backward: the forward's statistics */
  double eps;
  void *y, *gx;          /* forward's output; the input's gradient */
  float *mean_out, *rstd_out; /* forward's statistics */
  float *gw, *gb;        /* parameter gradients (either may be NULL) */
} ms_k_ln_args;

/* Rows [begin, end): y, mean_out and rstd_out (forward) or gx (backward); columns [begin, end) of
 * gw and gb (each column summed over the M rows in row order, so the split does not change it).
 * False where no vector body may run (the caller runs its scalar body). */
bool ms_k_layer_norm_rows_fast(const ms_k_ln_args *a, int64_t begin, int64_t end);
bool ms_k_layer_norm_backward_rows_fast(const ms_k_ln_args *a, int64_t begin, int64_t end);
bool ms_k_layer_norm_param_cols_fast(const ms_k_ln_args *a, int64_t begin, int64_t end);

void ms_k_layer_norm_rows_avx512(const ms_k_ln_args *a, int64_t begin, int64_t end);
void ms_k_layer_norm_backward_rows_avx512(const ms_k_ln_args *a, int64_t begin, int64_t end);
void ms_k_layer_norm_param_cols_avx512(const ms_k_ln_args *a, int64_t begin, int64_t end);
void ms_k_layer_norm_rows_avx2(const ms_k_ln_args *a, int64_t begin, int64_t end);
void ms_k_layer_norm_backward_rows_avx2(const ms_k_ln_args *a, int64_t begin, int64_t end);
void ms_k_layer_norm_param_cols_avx2(const ms_k_ln_args *a, int64_t begin, int64_t end);

#endif
