/* activation_f32_body.h: the loops of activation_f32.h, included once per ISA with SFX naming
 * them. GELU(tanh)(x) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), since 1 + tanh(u)
 * = 2 sigmoid(2u): the same function as PyTorch's formula, without its cancellation for large
 * negative x. Every step is branch-free so each loop vectorises. An ISA file may bring its own
 * loops for GELU(tanh) and SiLU instead, defining ACT_GELU_TANH, ACT_GELU_TANH_BACKWARD, ACT_SILU
 * and ACT_SILU_BACKWARD before the include (activation_f32_avx512.c). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

#ifndef ACT_GELU_TANH
/* exp(x) with x clamped to [-87.3, 88.3], so the 2^n scale stays a normal float: Cephes' expf
 * polynomial on the reduced argument, scaled through the exponent bits. Finite everywhere (the
 * backward's E s products need that); below the range the tiny normal is as good as 0. */
static inline float SFX(exp_clamped)(float x) {
  float a = x > 88.3f ? 88.3f : x; /* single selects, not nested: GCC if-converts these for AVX2 */
  a = a < -87.3f ? -87.3f : a;
  a = a == a ? a : 0.0f; /* NaN: computed as 0 (converting NaN to an integer is undefined), returned as NaN */
  float fn = (a * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
  float r = a - fn * 0.693359375f + fn * 2.12194440e-4f;
  float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r +
             1.6666665459e-1f) * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)fn + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return x == x ? p * scale : x;
}

/* The same, inf above the range: a sigmoid of it is exactly 0 there, as tanh's formula gives
 * (GELU(-inf) = NaN and GELU of a large negative x = -0, PyTorch's values). */
static inline float SFX(exp_poly)(float x) { return x > 88.3f ? (float)INFINITY : SFX(exp_clamped)(x); }

static inline float SFX(sigmoid)(float z) { return 1.0f / (1.0f + SFX(exp_poly)(-z)); }

static void SFX(gelu_tanh)(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], u = GELU_K * (v + GELU_C * v * v * v);
    y[i] = v * SFX(sigmoid)(2.0f * u);
  }
}

/* d/dx x s(2u) = s + 2 x s (1 - s) u', u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2); with E = exp(-2u),
 * s = 1 / (1 + E) and 1 - s = E s, which keeps its digits where s is near 1 (1 - s would not) */
static void SFX(gelu_tanh_backward)(const float *x, const float *g, float *gx, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], v2 = v * v, u = GELU_K * (v + GELU_C * v2 * v);
    float e = SFX(exp_clamped)(-2.0f * u), s = 1.0f / (1.0f + e), du = GELU_K * (1.0f + 3.0f * GELU_C * v2);
    gx[i] = g[i] * s * (1.0f + 2.0f * v * (e * s) * du);
  }
}

static void SFX(silu)(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * SFX(sigmoid)(x[i]);
}

/* s (1 + x (1 - s)), 1 - s = E s as in gelu_tanh_backward */
static void SFX(silu_backward)(const float *x, const float *g, float *gx, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float e = SFX(exp_clamped)(-x[i]), s = 1.0f / (1.0f + e);
    gx[i] = g[i] * s * (1.0f + x[i] * (e * s));
  }
}

#define ACT_GELU_TANH SFX(gelu_tanh)
#define ACT_GELU_TANH_BACKWARD SFX(gelu_tanh_backward)
#define ACT_SILU SFX(silu)
#define ACT_SILU_BACKWARD SFX(silu_backward)
#endif

bool SFX(ms_k_activation_f32)(ms_k_act act, const float *x, float *y, int64_t n) {
  switch (act) {
  case MS_K_ACT_GELU_TANH: ACT_GELU_TANH(x, y, n); return true;
  case MS_K_ACT_SILU: ACT_SILU(x, y, n); return true;
  default: return false;
  }
}

bool SFX(ms_k_activation_backward_f32)(ms_k_act act, const float *x, const float *g, float *gx, int64_t n) {
  switch (act) {
  case MS_K_ACT_GELU_TANH: ACT_GELU_TANH_BACKWARD(x, g, gx, n); return true;
  case MS_K_ACT_SILU: ACT_SILU_BACKWARD(x, g, gx, n); return true;
  default: return false;
  }
}

#undef GELU_K
#undef GELU_C
#undef ACT_GELU_TANH
#undef ACT_GELU_TANH_BACKWARD
#undef ACT_SILU
#undef ACT_SILU_BACKWARD
