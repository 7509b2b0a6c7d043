/* conv.c: 2-D convolution on the CPU, the one place that chooses the algorithm for a dtype, a
 * pass and a shape. Float32 with groups = 1, fastest first:
 *   - on AVX-512, unpadded unit-stride convs of at most 4 input channels: conv_small_avx512.c
 *     (all three passes; the input gradient where its scratch fits, conv_small.h);
 *   - 3x3 stride 1 with enough channels, on AVX2: Winograd (conv_winograd.c for the forward and
 *     the input gradient, conv_winograd_wgrad.c for the weight gradient);
 *   - other unit stride: conv_wide.c (forward, input gradient); unit column stride without
 *     padding, on AVX2: conv_wgrad_avx2.c (weight gradient);
 *   - the rest: the implicit GEMM (conv_gemm.c).
 * Float64 and grouped convs: im2col + GEMM (conv_im2col.c). Bfloat16 (groups = 1): per pass the
 * bf16 GEMM (conv_bf16.c) or the float32 kernels above on widened copies (here). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_table.h"
#include "kernels/cpu/conv_bf16.h"
#include "kernels/cpu/conv_gemm.h"
#include "kernels/cpu/conv_im2col.h"
#include "kernels/cpu/conv_small.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/conv_winograd_wgrad.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/gemm_ukr.h"

/* ---- float32, groups = 1 ------------------------------------------------------------------- */

static int forward_f32(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *b, float *out) {
  if (ms_k_conv_small_avx512_ok(g)) return ms_k_conv2d_forward_small_avx512(g, x, w, b, out);
  if (ms_k_conv2d_winograd_forward_ok(g)) return ms_k_conv2d_forward_winograd(g, x, w, b, out);
  if (ms_k_conv2d_wide_forward_ok(g)) return ms_k_conv2d_forward_wide(g, x, w, b, out);
  return ms_k_conv2d_forward_gemm(g, x, w, b, out);
}

static int input_grad_f32(const ms_k_conv2d_geom *g, const float *w, const float *gout, float *gx) {
  if (ms_k_conv_small_input_grad_ok(g)) return ms_k_conv2d_input_grad_small_avx512(g, w, gout, gx);
  if (ms_k_conv2d_winograd_input_grad_ok(g)) return ms_k_conv2d_input_grad_winograd(g, w, gout, gx);
  if (ms_k_conv2d_wide_input_grad_ok(g)) return ms_k_conv2d_input_grad_wide(g, w, gout, gx);
  return ms_k_conv2d_input_grad_gemm(g, w, gout, gx);
}

static int weight_grad_f32(const ms_k_conv2d_geom *g, const float *x, const float *gout, float *gw, float *gb) {
  if (ms_k_conv_small_avx512_ok(g)) return ms_k_conv2d_weight_grad_small_avx512(g, x, gout, gw, gb);
  if (ms_k_cpu_avx2() && ms_k_conv2d_wino_wgrad_ok(g)) return ms_k_conv2d_weight_grad_wino(g, x, gout, gw, gb);
  if (g->sw == 1 && g->ph == 0 && g->pw == 0 && ms_k_cpu_avx2())
    return ms_k_conv2d_weight_grad_dot_avx2(g, x, gout, gw, gb);
  return ms_k_conv2d_weight_grad_gemm(g, x, gout, gw, gb);
}

/* The float32 kernels compute the bias gradient alongside the weight's, so a bias gradient alone
 * goes to im2col. */
static int backward_f32(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *gout, float *gx,
                        float *gw, float *gb) {
  if (gx && input_grad_f32(g, w, gout, gx) != 0) return -1;
  return gw ? weight_grad_f32(g, x, gout, gw, gb) : 0;
}

/* ---- bfloat16, groups = 1: which way each pass goes ----------------------------------------- */

static _Atomic int forced_mode = -1; /* -1: not read from MS_CONV_BF16 yet */

void ms_k_conv2d_bf16_set_mode(ms_k_bconv_mode m) { atomic_store(&forced_mode, (int)m); }

static ms_k_bconv_mode bf16_mode(void) {
  int m = atomic_load(&forced_mode);
  if (m < 0) {
    const char *e = getenv("MS_CONV_BF16");
    m = !e                         ? MS_K_BCONV_AUTO
        : strcmp(e, "gemm") == 0  ? MS_K_BCONV_GEMM
        : strcmp(e, "widen") == 0 ? MS_K_BCONV_WIDEN
        : strcmp(e, "off") == 0   ? MS_K_BCONV_OFF
                                  : MS_K_BCONV_AUTO;
    atomic_store(&forced_mode, m);
  }
  return (ms_k_bconv_mode)m;
}

bool ms_k_conv2d_bf16_direct(void) { return ms_k_gemm_bf16_available() && bf16_mode() != MS_K_BCONV_OFF; }

enum { PASS_FWD, PASS_GIN, PASS_GW };

/* The measured choice per pass (1 thread, Zen 5, bench/conv_bf16_bench.lua, ms at batch 64 and
 * 1000, GEMM against widening in-kernel): the GEMM wins the forward (conv2 4.25 / 70 against
 * 4.63 / 73, conv1 0.26 / 4.5 against 0.33 / 5.7) and the input grad (conv2 5.0 / 86 against
 * 6.4 / 100, conv1 0.41 / 7.1 against 1.4 / 22), and the weight grad but for one case: a column
 * matrix of fewer rows than the 12-row tile (conv1's K = 9) over a gout past the caches, where the
 * GEMM packs gout^T's 32 rows at once from DRAM and the float32 kernel streams it (conv1 b1000:
 * 6.3-6.7 against 4.7-5.0 ms; b64: 0.22 against 0.27). */
static bool bf16_use_gemm(int pass, const ms_k_conv2d_geom *g) {
  ms_k_bconv_mode m = bf16_mode();
  if (m != MS_K_BCONV_AUTO) return m == MS_K_BCONV_GEMM;
  if (pass == PASS_GW && g->c * g->kh * g->kw < MS_BGEMM_AVX512_MR && g->n * g->o * g->oh * g->ow * 2 > (8 << 20))
    return false;
  return true;
}

/* ---- bfloat16 by widening: the float32 kernels on float32 copies ----------------------------
 * A chunk of samples at a time, in this thread's kept buffers: fresh batch-sized float copies
 * cost more in page faults than the convolution (conv2 at batch 1000: 800 ms against 90). */

static int64_t w_numel(const ms_k_conv2d_geom *g) { return g->o * g->c * g->kh * g->kw; }

static int64_t widen_chunk(const ms_k_conv2d_geom *g) {
  int64_t s = ms_k_get_num_threads() > 32 ? ms_k_get_num_threads() : 32;
  return s < g->n ? s : g->n;
}

static float *widen_into(int which, int64_t n, const uint16_t *src) {
  float *f = ms_k_thread_buffer(which, (size_t)(n + 16) * sizeof *f);
  if (f) ms_k_cast(n, f, MS_K_F32, 1, src, MS_K_BF16, 1);
  return f;
}

static void round_out(int64_t n, uint16_t *dst, const float *src) {
  ms_k_cast(n, dst, MS_K_BF16, 1, src, MS_K_F32, 1);
}

static int forward_widen(const ms_k_conv2d_geom *g, const uint16_t *x, const uint16_t *w, const uint16_t *b,
                         uint16_t *out) {
  float *wf = malloc((size_t)(w_numel(g) + 1) * sizeof *wf), *bf_ = b ? malloc((size_t)g->o * sizeof *bf_) : NULL;
  int rc = wf && (!b || bf_) ? 0 : -1;
  if (rc == 0) ms_k_cast(w_numel(g), wf, MS_K_F32, 1, w, MS_K_BF16, 1);
  if (rc == 0 && b) ms_k_cast(g->o, bf_, MS_K_F32, 1, b, MS_K_BF16, 1);
  int64_t S = widen_chunk(g), X = g->c * g->h * g->w, Y = g->o * g->oh * g->ow;
  for (int64_t s0 = 0; rc == 0 && s0 < g->n; s0 += S) {
    ms_k_conv2d_geom gc = *g;
    gc.n = g->n - s0 < S ? g->n - s0 : S;
    float *xf = widen_into(MS_K_BUF_BCONV_COL, gc.n * X, x + s0 * X);
    float *of = ms_k_thread_buffer(MS_K_BUF_BCONV_F32, (size_t)(gc.n * Y + 16) * sizeof *of);
    if (!xf || !of || forward_f32(&gc, xf, wf, bf_, of) != 0) rc = -1;
    else round_out(gc.n * Y, out + s0 * Y, of);
  }
  free(wf), free(bf_);
  return rc;
}

/* gx, or gw and gb (either may be NULL), through the float kernels; gw and gb sum the chunks'
 * float32 results in order, then round once. */
static int backward_widen(const ms_k_conv2d_geom *g, const uint16_t *x, const uint16_t *w, const uint16_t *gout,
                          uint16_t *gx, uint16_t *gw, uint16_t *gb) {
  int64_t S = widen_chunk(g), X = g->c * g->h * g->w, Y = g->o * g->oh * g->ow, WN = w_numel(g);
  float *wf = gx ? malloc((size_t)(WN + 1) * sizeof *wf) : NULL;
  float *gwacc = gw ? ms_k_thread_buffer(MS_K_BUF_BCONV_GW, (size_t)(2 * WN + 16) * sizeof *gwacc) : NULL;
  float *gbacc = gb ? ms_k_thread_buffer(MS_K_BUF_BCONV_GB, (size_t)(2 * g->o + 16) * sizeof *gbacc) : NULL;
  int rc = (!gx || wf) && (!gw || gwacc) && (!gb || gbacc) ? 0 : -1;
  if (rc == 0 && gx) ms_k_cast(WN, wf, MS_K_F32, 1, w, MS_K_BF16, 1);
  if (gw && gwacc) memset(gwacc, 0, (size_t)WN * sizeof *gwacc);
  if (gb && gbacc) memset(gbacc, 0, (size_t)g->o * sizeof *gbacc);
  for (int64_t s0 = 0; rc == 0 && s0 < g->n; s0 += S) {
    ms_k_conv2d_geom gc = *g;
    gc.n = g->n - s0 < S ? g->n - s0 : S;
    float *gof = widen_into(MS_K_BUF_BCONV_F32, gc.n * Y, gout + s0 * Y);
    float *xf = gw ? widen_into(MS_K_BUF_BCONV_COL, gc.n * X, x + s0 * X) : NULL;
    float *gxf = gx ? ms_k_thread_buffer(MS_K_BUF_BCONV_GX, (size_t)(gc.n * X + 16) * sizeof *gxf) : NULL;
    if (!gof || (gw && !xf) || (gx && !gxf) ||
        ms_k_conv2d_backward(MS_K_F32, &gc, xf, wf, gof, gxf, gw ? gwacc + WN : NULL, gb ? gbacc + g->o : NULL) !=
            0) {
      rc = -1;
      break;
    }
    if (gx) round_out(gc.n * X, gx + s0 * X, gxf);
    for (int64_t e = 0; gw && e < WN; e++) gwacc[e] += gwacc[WN + e];
    for (int64_t o = 0; gb && o < g->o; o++) gbacc[o] += gbacc[g->o + o];
  }
  if (rc == 0 && gw) round_out(WN, gw, gwacc);
  if (rc == 0 && gb) round_out(g->o, gb, gbacc);
  free(wf);
  return rc;
}

static int forward_bf16(const ms_k_conv2d_geom *g, const uint16_t *x, const uint16_t *w, const uint16_t *b,
                        uint16_t *out) {
  if (g->n == 0) return 0;
  if (!bf16_use_gemm(PASS_FWD, g)) return forward_widen(g, x, w, b, out);
  return ms_k_conv2d_bf16_forward_gemm(g, x, w, b, out);
}

static int backward_bf16(const ms_k_conv2d_geom *g, const uint16_t *x, const uint16_t *w, const uint16_t *gout,
                         uint16_t *gx, uint16_t *gw, uint16_t *gb) {
  bool gin_gemm = bf16_use_gemm(PASS_GIN, g), gw_gemm = bf16_use_gemm(PASS_GW, g);
  if (gx && g->n > 0 && !gin_gemm && !gw_gemm) /* one widening */
    return backward_widen(g, x, w, gout, gx, gw, gb);
  if (gx && g->n > 0) {
    int rc = gin_gemm ? ms_k_conv2d_bf16_input_grad_gemm(g, w, gout, gx)
                      : backward_widen(g, NULL, w, gout, gx, NULL, NULL);
    if (rc != 0) return -1;
  }
  if (!gw && !gb) return 0;
  if (gw_gemm) return ms_k_conv2d_bf16_weight_grad_gemm(g, x, gout, gw, gb);
  return backward_widen(g, x, w, gout, NULL, gw, gb);
}

/* ---- entry points ---------------------------------------------------------------------------- */

int ms_k_conv2d_forward(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *x, const void *w,
                        const void *b, void *out) {
  if (dt == MS_K_F32 && g->groups == 1) return forward_f32(g, x, w, b, out);
  if (dt == MS_K_BF16) return g->groups == 1 ? forward_bf16(g, x, w, b, out) : -1;
  return ms_k_conv2d_forward_im2col(dt, g, x, w, b, out);
}

int ms_k_conv2d_backward(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *x, const void *w,
                         const void *gout, void *gx, void *gw, void *gb) {
  if (dt == MS_K_BF16) return g->groups == 1 ? backward_bf16(g, x, w, gout, gx, gw, gb) : -1;
  if (dt == MS_K_F32 && g->groups == 1 && (gw || !gb)) return backward_f32(g, x, w, gout, gx, gw, gb);
  return ms_k_conv2d_backward_im2col(dt, g, x, w, gout, gx, gw, gb);
}

/* The kernel table's conv2d slots on the CPU: the algorithm choice above. Nonzero: the column
 * buffers could not be had. */
int ms_k_cpu_conv2d_forward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *xin,
                            const void *w, const void *b, void *y) {
  (void)x;
  return ms_k_conv2d_forward(dt, g, xin, w, b, y);
}

int ms_k_cpu_conv2d_backward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *xin,
                             const void *w, const void *gy, void *gx, void *gw, void *gb) {
  (void)x;
  return ms_k_conv2d_backward(dt, g, xin, w, gy, gx, gw, gb);
}
