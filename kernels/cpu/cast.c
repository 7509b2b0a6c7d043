/* cast.c: conversions between element types, including the 16-bit floating formats that the
 * CPU has no arithmetic for (they are widened to float32 and rounded back). */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cast_half.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/kernel_table.h"

float ms_k_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t ms_k_f32_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40); /* quiet NaN */
  bits += 0x7fffu + ((bits >> 16) & 1u); /* round to nearest, ties to even */
  return (uint16_t)(bits >> 16);
}

float ms_k_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: value is man * 2^-24 */
      float f = (float)man * 0x1p-24f;
      memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t ms_k_f32_to_f16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
  float a = fabsf(f);
  if (isnan(f)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00; /* rounds to infinity */
  if (a < 0x1p-14f) {                       /* subnormal or zero: multiples of 2^-24 */
    return sign | (uint16_t)lrintf(a * 0x1p24f);
  }
  uint32_t abits = bits & 0x7fffffffu;
  /* Re-bias the exponent and round the 23-bit mantissa to 10 bits, ties to even. */
  uint32_t r = abits + 0xfffu + ((abits >> 13) & 1u);
  return sign | (uint16_t)((r >> 13) - (112u << 10));
}

/* Loads one element widened: floating kinds to double, integral kinds to int64. */
static double load_f(const void *p, ms_k_dtype t) {
  switch (t) {
  case MS_K_F32: return *(const float *)p;
  case MS_K_F64: return *(const double *)p;
  case MS_K_BF16: return ms_k_bf16_to_f32(*(const uint16_t *)p);
  case MS_K_F16: return ms_k_f16_to_f32(*(const uint16_t *)p);
  case MS_K_I64: return (double)*(const int64_t *)p;
  case MS_K_I32: return *(const int32_t *)p;
  case MS_K_U8: return *(const uint8_t *)p;
  case MS_K_BOOL: return *(const uint8_t *)p != 0;
  }
  return 0;
}

static int64_t load_i(const void *p, ms_k_dtype t) {
  switch (t) {
  case MS_K_I64: return *(const int64_t *)p;
  case MS_K_I32: return *(const int32_t *)p;
  case MS_K_U8: return *(const uint8_t *)p;
  case MS_K_BOOL: return *(const uint8_t *)p != 0;
  default: return 0;
  }
}

/* double -> int64 without undefined behaviour for NaN or out-of-range values. */
static int64_t f_to_i64(double v) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)v;
}

static void store_i(void *p, ms_k_dtype t, int64_t v) {
  switch (t) {
  case MS_K_I64: *(int64_t *)p = v; break;
  case MS_K_I32: *(int32_t *)p = (int32_t)(uint32_t)v; break; /* wraps, as PyTorch does */
  case MS_K_U8: *(uint8_t *)p = (uint8_t)v; break;
  case MS_K_BOOL: *(uint8_t *)p = v != 0; break;
  default: break;
  }
}

static void store_f(void *p, ms_k_dtype t, double v) {
  switch (t) {
  case MS_K_F32: *(float *)p = (float)v; break;
  case MS_K_F64: *(double *)p = v; break;
  case MS_K_BF16: *(uint16_t *)p = ms_k_f32_to_bf16((float)v); break;
  case MS_K_F16: *(uint16_t *)p = ms_k_f32_to_f16((float)v); break;
  case MS_K_BOOL: *(uint8_t *)p = v != 0; break;
  default: store_i(p, t, f_to_i64(v)); break;
  }
}

static int is_floating(ms_k_dtype t) { return t <= MS_K_F16; }

/* 16-bit float <-> float32 without the double round trip of the general loop: mixed precision
 * converts every op's inputs and outputs. Contiguous runs go to the vector loops. */
static void half_to_f32(int64_t n, float *d, int64_t ds, const uint16_t *s, int64_t ss, ms_k_dtype st) {
  int64_t i = 0;
  if (st == MS_K_BF16 && ds == 1 && ss == 1)
    i = ms_k_cpu_avx512() ? ms_k_bf16_to_f32_avx512(n, d, s) : ms_k_cpu_avx2() ? ms_k_bf16_to_f32_avx2(n, d, s) : 0;
  if (st == MS_K_F16 && ds == 1 && ss == 1 && ms_k_cpu_f16c()) i = ms_k_f16_to_f32_f16c(n, d, s);
  if (st == MS_K_BF16)
    for (; i < n; i++) d[i * ds] = ms_k_bf16_to_f32(s[i * ss]);
  else
    for (; i < n; i++) d[i * ds] = ms_k_f16_to_f32(s[i * ss]);
}

static void f32_to_half(int64_t n, uint16_t *d, int64_t ds, ms_k_dtype dt, const float *s, int64_t ss) {
  int64_t i = 0;
  if (dt == MS_K_BF16 && ds == 1 && ss == 1)
    i = ms_k_cpu_avx512() ? ms_k_f32_to_bf16_avx512(n, d, s) : ms_k_cpu_avx2() ? ms_k_f32_to_bf16_avx2(n, d, s) : 0;
  if (dt == MS_K_F16 && ds == 1 && ss == 1 && ms_k_cpu_f16c()) i = ms_k_f32_to_f16_f16c(n, d, s);
  if (dt == MS_K_BF16)
    for (; i < n; i++) d[i * ds] = ms_k_f32_to_bf16(s[i * ss]);
  else
    for (; i < n; i++) d[i * ds] = ms_k_f32_to_f16(s[i * ss]);
}

void ms_k_f32_to_bf16_block(int64_t m, int64_t n, uint16_t *dst, int64_t ds, int64_t dcs, const float *src,
                            int64_t ss) {
  int64_t (*run)(int64_t, uint16_t *, const float *) =
      dcs != 1 ? NULL : ms_k_cpu_avx512() ? ms_k_f32_to_bf16_avx512 : ms_k_cpu_avx2() ? ms_k_f32_to_bf16_avx2 : NULL;
  for (int64_t i = 0; i < m; i++) {
    uint16_t *d = dst + i * ds;
    const float *s = src + i * ss;
    int64_t j = run ? run(n, d, s) : 0;
    for (; j < n; j++) d[j * dcs] = ms_k_f32_to_bf16(s[j]);
  }
}

static int is_half(ms_k_dtype t) { return t == MS_K_BF16 || t == MS_K_F16; }

static const size_t elsize[] = {[MS_K_F32] = 4, [MS_K_F64] = 8, [MS_K_BF16] = 2, [MS_K_F16] = 2,
                                [MS_K_I64] = 8, [MS_K_I32] = 4, [MS_K_U8] = 1, [MS_K_BOOL] = 1};
_Static_assert(sizeof elsize / sizeof *elsize == MS_K_DTYPE_COUNT, "a size for every dtype");

size_t ms_k_dtype_size(ms_k_dtype dt) { return elsize[dt]; }

void ms_k_cast(int64_t n, void *dst, ms_k_dtype dt, int64_t ds, const void *src, ms_k_dtype st,
               int64_t ss) {
  char *d = dst;
  const char *s = src;
  size_t dsz = elsize[dt], ssz = elsize[st];
  if (dt == st && ds == 1 && ss == 1) {
    memcpy(dst, src, (size_t)n * dsz);
    return;
  }
  if (dt == MS_K_F32 && st == MS_K_F32) { /* strided float copies are the common case */
    float *o = dst;
    const float *a = src;
    for (int64_t i = 0; i < n; i++) o[i * ds] = a[i * ss];
    return;
  }
  if (dt == MS_K_F32 && is_half(st)) return half_to_f32(n, dst, ds, src, ss, st);
  if (is_half(dt) && st == MS_K_F32) return f32_to_half(n, dst, ds, dt, src, ss);
  if (!is_floating(dt) && !is_floating(st)) { /* stay exact for large int64 */
    for (int64_t i = 0; i < n; i++) store_i(d + i * ds * dsz, dt, load_i(s + i * ss * ssz, st));
    return;
  }
  for (int64_t i = 0; i < n; i++) store_f(d + i * ds * dsz, dt, load_f(s + i * ss * ssz, st));
}

void ms_k_fill(int64_t n, void *dst, ms_k_dtype dt, int64_t ds, double value) {
  unsigned char one[8];
  store_f(one, dt, value);
  char *d = dst;
  size_t sz = elsize[dt];
  if (dt == MS_K_F32) {
    float v = (float)value, *o = dst;
    for (int64_t i = 0; i < n; i++) o[i * ds] = v;
    return;
  }
  for (int64_t i = 0; i < n; i++) memcpy(d + i * ds * sz, one, sz);
}

typedef struct fill_bytes {
  const void *value;
  size_t size;
} fill_bytes;

static void fill_row(void *arg, int64_t n, char **p, const int64_t *s) {
  const fill_bytes *f = arg;
  switch (f->size) { /* typed stores, so the compiler vectorises the unit-stride rows */
  case 8: { uint64_t v; memcpy(&v, f->value, 8); for (int64_t i = 0; i < n; i++) ((uint64_t *)p[0])[i * s[0]] = v; break; }
  case 4: { uint32_t v; memcpy(&v, f->value, 4); for (int64_t i = 0; i < n; i++) ((uint32_t *)p[0])[i * s[0]] = v; break; }
  case 2: { uint16_t v; memcpy(&v, f->value, 2); for (int64_t i = 0; i < n; i++) ((uint16_t *)p[0])[i * s[0]] = v; break; }
  default: for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0] * (int64_t)f->size, f->value, f->size);
  }
}

int ms_k_cpu_fill(const ms_k_exec *x, const ms_k_geom *g, const void *value) {
  (void)x;
  fill_bytes f = {value, g->elsize[0]};
  ms_k_geom_run(g, fill_row, &f);
  return 0;
}

typedef struct cast_dtypes {
  ms_k_dtype dst, src;
} cast_dtypes;

static void cast_row(void *arg, int64_t n, char **p, const int64_t *s) {
  const cast_dtypes *c = arg;
  ms_k_cast(n, p[0], c->dst, s[0], p[1], c->src, s[1]);
}

int ms_k_cpu_cast(const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dst_dt, ms_k_dtype src_dt) {
  (void)x;
  cast_dtypes c = {dst_dt, src_dt};
  ms_k_geom_run(g, cast_row, &c);
  return 0;
}
