/* conv_common.c: the convolution pieces that more than one algorithm uses (conv_geom.h). */
#include <string.h>

#include "kernels/cpu/conv_geom.h"
#include "kernels/cpu/gemm_ukr.h" /* ms_k_thread_buffer */

void ms_k_conv_col2im(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *colv, void *gxv) {
  const char *col = colv;
  char *gxs = gxv;
  size_t es = dt == MS_K_F64 ? 8 : 4;
  int64_t P = g->oh * g->ow;
  for (int64_t c = 0; c < g->c; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        const char *row = col + (size_t)(((c * g->kh + i) * g->kw + j) * P) * es;
        int64_t lo, hi;
        ms_k_conv_valid_range(j * g->dw - g->pw, g->sw, g->w, g->ow, &lo, &hi);
        if (lo == hi) continue;
        for (int64_t oh = 0; oh < g->oh; oh++) {
          int64_t ih = oh * g->sh - g->ph + i * g->dh;
          if (ih < 0 || ih >= g->h) continue;
          char *dst = gxs + (size_t)((c * g->h + ih) * g->w + lo * g->sw + j * g->dw - g->pw) * es;
          const char *src = row + (size_t)(oh * g->ow + lo) * es;
          ms_k_binary(MS_K_ADD, dt, hi - lo, dst, g->sw, dst, g->sw, src, 1);
        }
      }
}

int64_t *ms_k_conv_row_offsets(const ms_k_conv2d_geom *g) {
  int64_t K = g->c * g->kh * g->kw;
  int64_t *t = ms_k_thread_buffer(MS_K_BUF_CONV_K, sizeof(int64_t) * (size_t)(3 * K + 1));
  if (!t) return NULL;
  for (int64_t c = 0, k = 0; c < g->c; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t jj = 0; jj < g->kw; jj++, k++) {
        t[k] = c * g->h * g->w + i * g->dh * g->w + jj * g->dw;
        t[K + k] = i * g->dh;
        t[2 * K + k] = jj * g->dw;
      }
  return t;
}

void ms_k_conv_pack_rows(const float *m, const float *last, int64_t R, int64_t L, int mr, float *dst) {
  int64_t Lb = L + (last ? 1 : 0);
  for (int64_t r0 = 0; r0 < R; r0 += mr, dst += mr * Lb)
    for (int r = 0; r < mr; r++) {
      bool in = r0 + r < R;
      for (int64_t l = 0; l < L; l++) dst[l * mr + r] = in ? m[(r0 + r) * L + l] : 0.0f;
      if (last) dst[L * mr + r] = in ? last[r0 + r] : 0.0f;
    }
}

int ms_k_conv_wgrad_team(const ms_k_conv2d_geom *g) {
  int64_t flops = 2 * g->c * g->kh * g->kw * g->o * g->oh * g->ow * g->n, nt = ms_k_get_num_threads();
  if (nt > flops / (4 << 20)) nt = flops / (4 << 20);
  if (nt > g->n) nt = g->n;
  if (nt > MS_CONV_WGRAD_MAX_TEAM) nt = MS_CONV_WGRAD_MAX_TEAM;
  return nt < 1 ? 1 : (int)nt;
}

void ms_k_conv_wgrad_reduce(const ms_k_conv2d_geom *g, float *const *part, int team, float *gw, float *gb) {
  int64_t K = g->c * g->kh * g->kw;
  for (int64_t o = 0; o < g->o; o++)
    for (int64_t k = 0; k <= K; k++) {
      if (k == K && !gb) break;
      float s = 0.0f;
      for (int m = 0; m < team; m++) s += part[m][k * g->o + o];
      if (k < K) gw[o * K + k] = s;
      else gb[o] = s;
    }
}
