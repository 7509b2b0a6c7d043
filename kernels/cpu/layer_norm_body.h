/* layer_norm_body.h: layer_norm_fast.h's functions, included once per ISA file after its vector
 * words (W float32 lanes, vf and vd vectors and their loads, stores and arithmetic) with SFX
 * naming the ISA. The rows themselves are layer_norm_rows.h, once per element type. */
#include <math.h>
#include <stdint.h>

#define ELEM float
#define LOAD vf_load
#define STORE vf_store
#define ESFX(name) name##_f32
#include "kernels/cpu/layer_norm_rows.h"
#undef ELEM
#undef LOAD
#undef STORE
#undef ESFX

#define ELEM uint16_t
#define LOAD vf_load_bf16
#define STORE vf_store_bf16
#define ESFX(name) name##_bf16
#include "kernels/cpu/layer_norm_rows.h"
#undef ELEM
#undef LOAD
#undef STORE
#undef ESFX

void SFX(ms_k_layer_norm_rows)(const ms_k_ln_args *a, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; r++) {
    if (a->bf16) ln_row_bf16(a, r);
    else ln_row_f32(a, r);
  }
}

void SFX(ms_k_layer_norm_backward_rows)(const ms_k_ln_args *a, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; r++) {
    if (a->bf16) ln_backward_row_bf16(a, r);
    else ln_backward_row_f32(a, r);
  }
}

/* Columns in blocks of LN_VCOLS, each summed over all rows (reading along rows) into float64
 * accumulators on the stack (4 KB: in L1 beside the rows' slices). */
enum { LN_VCOLS = 256 };

void SFX(ms_k_layer_norm_param_cols)(const ms_k_ln_args *a, int64_t begin, int64_t end) {
  double sw[LN_VCOLS], sb[LN_VCOLS];
  for (int64_t c0 = begin; c0 < end; c0 += LN_VCOLS) {
    int64_t n = end - c0 < LN_VCOLS ? end - c0 : LN_VCOLS;
    if (a->bf16) ln_param_block_bf16(a, c0, n, sw, sb);
    else ln_param_block_f32(a, c0, n, sw, sb);
    for (int64_t c = 0; c < n; c++) {
      if (a->gw) a->gw[c0 + c] = (float)sw[c];
      if (a->gb) a->gb[c0 + c] = (float)sb[c];
    }
  }
}
