/* checked.h: overflow-checked int64 arithmetic for every size, stride, offset and byte count
 * that comes from user input (shapes, kernel sizes, paddings, counts, file headers). Each
 * returns true with *out set when the exact result fits in int64, false (*out unspecified)
 * when it does not, so the caller can name its function and argument in the error. The limit
 * on a tensor's element count (MS_MAX_NUMEL) keeps its byte count (at most 8 bytes an element)
 * representable too. */
#ifndef MOONSHARD_CHECKED_H
#define MOONSHARD_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

/* The most elements a tensor may have: numel * 8 bytes still fits in int64. */
#define MS_MAX_NUMEL (INT64_MAX / 8)

static inline bool ms_add_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool ms_sub_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_sub_overflow(a, b, out); }
static inline bool ms_mul_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* The product of n non-negative sizes (a shape's numel). False for a negative size, or when the
 * product with zeros counted as ones exceeds MS_MAX_NUMEL: then every contiguous stride of the
 * shape fits too, even for an empty tensor. */
static inline bool ms_numel_i64(int n, const int64_t *sizes, int64_t *out) {
  int64_t span = 1;
  bool empty = false;
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) return false;
    if (sizes[i] == 0) empty = true;
    else if (!ms_mul_i64(span, sizes[i], &span) || span > MS_MAX_NUMEL) return false;
  }
  *out = empty ? 0 : span;
  return true;
}

/* a * b + c for sizes (all non-negative), bounded by MS_MAX_NUMEL like a tensor's numel. */
static inline bool ms_mul_add_size(int64_t a, int64_t b, int64_t c, int64_t *out) {
  int64_t p;
  return ms_mul_i64(a, b, &p) && ms_add_i64(p, c, out) && *out <= MS_MAX_NUMEL;
}

#endif
