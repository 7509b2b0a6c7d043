/* test_cast.c: ms_k_cast between float32 and the 16-bit floats is the scalar conversion's bit
 * pattern for every input (all 65536 16-bit patterns, float32 rounding ties, NaNs, subnormals,
 * overflow), contiguous (the vector loops, any length and alignment) or strided; relu's
 * backward on 16-bit floats passes g exactly where y > 0, and relu on bfloat16 bits is the
 * float32 relu rounded back. Once per kernel ISA (test_isa.h). */
#define _POSIX_C_SOURCE 200809L /* setenv and fork in test_isa.h */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "test.h"
#include "test_isa.h"

static float f32_of(uint32_t bits) {
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint32_t bits_of(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}

/* The scalar rounding itself, on values whose result is known. */
static void test_scalar_rounding(void) {
  CHECK(ms_k_f32_to_bf16(f32_of(0x3f808000u)) == 0x3f80); /* tie, even below: down */
  CHECK(ms_k_f32_to_bf16(f32_of(0x3f818000u)) == 0x3f82); /* tie, odd below: up */
  CHECK(ms_k_f32_to_bf16(f32_of(0x3f808001u)) == 0x3f81); /* past the tie: up */
  CHECK(ms_k_f32_to_bf16(f32_of(0x7f7fffffu)) == 0x7f80); /* FLT_MAX rounds to infinity */
  CHECK(ms_k_f32_to_bf16(f32_of(0x7f800001u)) == 0x7fc0); /* a signalling NaN comes back quiet */
  CHECK(ms_k_f32_to_bf16(f32_of(0xffc00000u)) == 0xffc0);
  CHECK(ms_k_f32_to_bf16(f32_of(0x00018000u)) == 0x0002); /* subnormals are kept */
  CHECK(ms_k_f32_to_bf16(-0.0f) == 0x8000);
}

/* Float32 inputs for the rounding: ties, NaNs, infinities, subnormals, then random patterns. */
static uint32_t *f32_patterns(int64_t *n) {
  static const uint32_t special[] = {0, 0x80000000u, 0x3f808000u, 0x3f818000u, 0xbf808000u, 0x7f7fffffu,
                                     0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u,
                                     0xffffffffu, 0x00008000u, 0x00018000u, 0x007fffffu, 0x477fefffu,
                                     0x477ff000u, 0x33800000u, 0x38800000u};
  int64_t ns = (int64_t)(sizeof special / sizeof special[0]), total = ns + (1 << 18);
  uint32_t *p = malloc(sizeof *p * (size_t)total);
  memcpy(p, special, sizeof special);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int64_t i = ns; i < total; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = (uint32_t)(s >> 16);
  }
  *n = total;
  return p;
}

static uint16_t to_half(ms_k_dtype dt, float f) { return dt == MS_K_BF16 ? ms_k_f32_to_bf16(f) : ms_k_f32_to_f16(f); }
static float from_half(ms_k_dtype dt, uint16_t h) { return dt == MS_K_BF16 ? ms_k_bf16_to_f32(h) : ms_k_f16_to_f32(h); }

/* Every offset and length up to 40 (vector bodies and tails, unaligned starts), then the whole
 * run contiguous and strided, both directions, against the scalar conversions. */
static void check_half(ms_k_dtype dt) {
  int64_t n;
  uint32_t *src = f32_patterns(&n);
  uint16_t *h = malloc(sizeof *h * (size_t)n * 3);
  float *f = malloc(sizeof *f * (size_t)n * 3);
  int bad = 0;
  for (int off = 0; off < 4; off++)
    for (int64_t len = 0; len <= 40; len++) {
      memset(h, 0xab, sizeof *h * 48);
      ms_k_cast(len, h + off, dt, 1, src, MS_K_F32, 1);
      for (int64_t i = 0; i < len; i++) bad += h[off + i] != to_half(dt, f32_of(src[i]));
      bad += h[off + len] != 0xabab; /* nothing written past the run */
    }
  CHECK(bad == 0);
  bad = 0;
  ms_k_cast(n, h, dt, 1, src, MS_K_F32, 1);
  for (int64_t i = 0; i < n; i++) bad += h[i] != to_half(dt, f32_of(src[i]));
  CHECK(bad == 0);
  bad = 0;
  ms_k_cast(n / 3, h, dt, 3, src, MS_K_F32, 2);
  for (int64_t i = 0; i < n / 3; i++) bad += h[3 * i] != to_half(dt, f32_of(src[2 * i]));
  CHECK(bad == 0);

  /* widening: every 16-bit pattern, NaNs compared as bit patterns */
  uint16_t *all = malloc(sizeof *all * 65536);
  for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
  for (int off = 0; off < 3; off++) {
    bad = 0;
    ms_k_cast(65536 - off, f, MS_K_F32, 1, all + off, dt, 1);
    for (int i = 0; i < 65536 - off; i++) bad += bits_of(f[i]) != bits_of(from_half(dt, all[off + i]));
    CHECK(bad == 0);
  }
  bad = 0;
  ms_k_cast(65536 / 2, f, MS_K_F32, 3, all, dt, 2);
  for (int i = 0; i < 65536 / 2; i++) bad += bits_of(f[3 * i]) != bits_of(from_half(dt, all[2 * i]));
  CHECK(bad == 0);
  free(all), free(f), free(h), free(src);
}

/* relu's gradient on 16-bit floats: y over every pattern (zeros, negatives, NaNs, infinities),
 * g passed bit for bit where y > 0, +0 elsewhere; on 1 and 2 threads. */
static void check_relu_backward_half(ms_k_dtype dt) {
  uint16_t *y = malloc(2 * 65536), *g = malloc(2 * 65536), *gx = malloc(2 * 65536);
  for (int i = 0; i < 65536; i++) y[i] = (uint16_t)i, g[i] = (uint16_t)(i * 7919u + 13u);
  for (int t = 1; t <= 2; t++) {
    ms_k_set_num_threads(t);
    int bad = 0;
    ms_k_relu_backward(dt, 65536, y, g, gx);
    for (int i = 0; i < 65536; i++) bad += gx[i] != (from_half(dt, y[i]) > 0 ? g[i] : 0);
    CHECK(bad == 0);
  }
  ms_k_set_num_threads(1);
  free(y), free(g), free(gx);
}

/* relu on bfloat16 bits: what widening, float32 relu (NaN kept) and rounding back give, for
 * every pattern, contiguous and strided. */
static uint16_t relu_bf16_ref(uint16_t b) {
  float v = ms_k_bf16_to_f32(b);
  return ms_k_f32_to_bf16(v > 0 ? v : (v == v ? 0.0f : v));
}

static void check_relu_bf16(void) {
  uint16_t *x = malloc(2 * 65536), *y = malloc(2 * 2 * 65536);
  for (int i = 0; i < 65536; i++) x[i] = (uint16_t)i;
  int bad = 0;
  ms_k_unary(MS_K_RELU, MS_K_BF16, 65536, y, 1, x, 1);
  for (int i = 0; i < 65536; i++) bad += y[i] != relu_bf16_ref(x[i]);
  CHECK(bad == 0);
  bad = 0;
  ms_k_unary(MS_K_RELU, MS_K_BF16, 65536 / 3, y, 2, x, 3);
  for (int i = 0; i < 65536 / 3; i++) bad += y[2 * i] != relu_bf16_ref(x[3 * i]);
  CHECK(bad == 0);
  bad = 0; /* an odd start and length: the vector body's tail */
  ms_k_unary(MS_K_RELU, MS_K_BF16, 65536 - 41, y + 3, 1, x + 5, 1);
  for (int i = 0; i < 65536 - 41; i++) bad += y[3 + i] != relu_bf16_ref(x[5 + i]);
  CHECK(bad == 0);
  free(x), free(y);
}

static void run_isa(const char *isa) {
  (void)isa;
  check_half(MS_K_BF16);
  check_half(MS_K_F16);
  check_relu_backward_half(MS_K_BF16);
  check_relu_backward_half(MS_K_F16);
  check_relu_bf16();
}

int main(void) {
  test_scalar_rounding();
  ms_test_isa_in_child("generic", run_isa);
  ms_test_isa_in_child("avx2", run_isa);   /* falls back where the CPU lacks it */
  ms_test_isa_in_child("avx512", run_isa); /* likewise */
  return ms_test_finish();
}
