/* half_bits.h: what the 16-bit CPU kernel tests share (test_half_binary.c, test_half_maps.c):
 * random bfloat16 / float16 bit patterns rich in special values, a bit-for-bit comparison, and
 * operands widened for the references. */
#ifndef MS_TEST_HALF_BITS_H
#define MS_TEST_HALF_BITS_H

#include "moonshard/moonshard.h"
#include "test.h"

enum { ROWS = 70, COLS = 1000 }; /* 70,000 elements: split over threads mid-row; rows end mid-block */

static uint32_t next_bits(void) { return (uint32_t)((ms_test_uniform() + 1.0) * 2147483648.0); }

/* A 16-bit pattern of dt: one in eight a special value, half the rest from a narrow exponent
 * range (sums of two such are often ties), the others any bits at all. */
static uint16_t pattern(ms_dtype dt) {
  static const uint16_t bf[] = {0x7fc0, 0x7f81, 0xffc1, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001,
                                0x807f, 0x0080, 0x7f7f, 0xff7f, 0x3f80, 0x3b80};
  static const uint16_t h[] = {0x7e00, 0x7c01, 0xfe03, 0x7c00, 0xfc00, 0x0000, 0x8000, 0x0001,
                               0x83ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0x1000};
  uint32_t r = next_bits(), kind = r % 8, sign = (r >> 3) & 1, mant = r >> 4;
  bool b16 = dt == MS_BFLOAT16;
  if (kind == 0) return b16 ? bf[mant % 14] : h[mant % 14];
  if (kind >= 5) return (uint16_t)(mant & 0xffff);
  uint32_t e = mant % 3; /* exponents around 1.0 */
  return b16 ? (uint16_t)(sign << 15 | (126 + e) << 7 | (mant >> 2 & 0x7f))
             : (uint16_t)(sign << 15 | (14 + e) << 10 | (mant >> 2 & 0x3ff));
}

static ms_tensor *random_half(ms_dtype dt, int64_t r, int64_t c) {
  ms_tensor *t = ms_tensor_new_empty(2, (int64_t[]){r, c}, dt);
  uint16_t *p = ms_tensor_data(t);
  for (int64_t i = 0; i < r * c; i++) p[i] = pattern(dt);
  return t;
}

static bool same_bits(ms_tensor *got, ms_tensor *want) {
  if (!got || !want || got->dtype != want->dtype || got->ndim != want->ndim) return false;
  for (int d = 0; d < got->ndim; d++)
    if (got->shape[d] != want->shape[d]) return false;
  ms_tensor *g = ms_tensor_contiguous(got), *w = ms_tensor_contiguous(want);
  bool same = memcmp(ms_tensor_data(g), ms_tensor_data(w), (size_t)ms_tensor_numel(g) * ms_dtype_size(g->dtype)) == 0;
  if (!same && ms_dtype_size(g->dtype) == 2) { /* the first few differences, for the report */
    const uint16_t *x = ms_tensor_data(g), *y = ms_tensor_data(w);
    for (int64_t i = 0, shown = 0; i < ms_tensor_numel(g) && shown < 3; i++)
      if (x[i] != y[i]) fprintf(stderr, "  [%lld] got %04x want %04x\n", (long long)i, x[i], y[i]), shown++;
  }
  ms_tensor_release(g);
  ms_tensor_release(w);
  return same;
}

/* The operand widened to float32 where it is a tensor of dt. New reference in o.tensor. */
static ms_operand widened(ms_operand o, ms_dtype dt) {
  if (o.tensor) o.tensor = o.tensor->dtype == dt ? ms_tensor_to_dtype(o.tensor, MS_FLOAT32) : (ms_tensor_retain(o.tensor), o.tensor);
  return o;
}

#endif
