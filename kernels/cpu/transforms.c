/* transforms.c: the data transforms' loops. Single-threaded on purpose: they run inside the
 * DataLoader's worker threads, which already use the cores, and the pool is not re-entrant. */
#include "kernels/kernels.h"

void ms_k_u8_lut_f32(int64_t n, const uint8_t *in, const float *lut, float *out) {
  for (int64_t i = 0; i < n; i++) out[i] = lut[in[i]];
}

/* One channel's run of `inner` values through the whole chain; the float casts keep every
 * intermediate in float32 (no wider evaluation), so the result equals separate passes. */
static void normalize_run(int64_t inner, const float *in, float *out, int nsteps, int64_t C,
                          const float *mean, const float *std) {
  for (int64_t i = 0; i < inner; i++) {
    float y = in[i];
    for (int s = 0; s < nsteps; s++) {
      y = (float)(y - mean[s * C]);
      y = (float)(y / std[s * C]);
    }
    out[i] = y;
  }
}

void ms_k_normalize_chain_f32(int64_t outer, int64_t C, int64_t inner, const float *in, float *out,
                              int nsteps, const float *mean, const float *std) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < C; c++) {
      int64_t at = (o * C + c) * inner;
      normalize_run(inner, in + at, out + at, nsteps, C, mean + c, std + c);
    }
}
