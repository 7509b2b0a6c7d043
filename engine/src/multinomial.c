/* multinomial.c: indices drawn from rows of non-negative weights (torch.multinomial), composed of
 * the native ops on the weights' device, so a CUDA tensor draws on the GPU with the numbers the
 * CPU would draw (one Philox generator for every device). Weights are read in float64.
 *   - without replacement (and any single draw): every category gets the key
 *     log(E) - log(w), E = -log(1 - u) an exponential draw; the k smallest keys are k distinct
 *     categories drawn one after another with probability w / (sum of those left), the
 *     exponential races' property. Zero weights get +inf and are never drawn.
 *   - with replacement, k > 1: u * (row total) located in the running sums: the count of running
 *     sums <= it is the category (a zero weight repeats the sum before it: never drawn). */
#include <math.h>
#include <stdio.h>

#include "moonshard/checked.h"
#include "moonshard/error.h"
#include "moonshard/random.h"
#include "moonshard/sampling.h"
#include "native/native.h"
#include "meta_log.h"
#include "random_state.h"

#define OP "multinomial"

/* The value of r (one element, any device) on the host; r is released. */
static ms_status take_value(ms_tensor *r, double *v) {
  ms_tensor *h = r ? native_to_device(r, (ms_device){MS_CPU, 0}) : NULL;
  if (h) *v = ms_tensor_get_flat(h, 0);
  ms_tensor_release(r), ms_tensor_release(h);
  return h ? MS_OK : MS_ERR_MEMORY;
}

static ms_tensor *reduce_all(ms_reduce_op op, ms_tensor *t) {
  return t ? native_reduce(op, t, (ms_reduce_opts){.all = true}) : NULL;
}

/* Reads op over all of f(w) (released) into *v. */
static ms_status value_of(ms_reduce_op op, ms_tensor *fw, double *v) {
  ms_tensor *r = reduce_all(op, fw);
  ms_tensor_release(fw);
  return take_value(r, v);
}

static ms_tensor *compare(ms_binary_op op, ms_tensor *w, double v) {
  return native_binary(op, ms_operand_tensor(w), ms_operand_number(v, MS_FLOAT64));
}

/* "row 3 of input" or "input" (1-D), for messages. */
static const char *where_row(char *buf, size_t len, bool rows, double row, int64_t base) {
  if (rows) snprintf(buf, len, "row %lld of input", (long long)row + (long long)base);
  else snprintf(buf, len, "input");
  return buf;
}

/* Every weight finite and >= 0; w is float64. */
static ms_status check_values(ms_tensor *w) {
  double nan, lo, hi;
  ms_status st = value_of(MS_RED_ANY, native_binary(MS_OP_NE, ms_operand_tensor(w), ms_operand_tensor(w)), &nan);
  if (st != MS_OK) return st;
  if (nan) return ms_error(MS_ERR_ARG, OP ": input has a NaN weight (expected non-negative finite weights)");
  if ((st = value_of(MS_RED_MIN, (ms_tensor_retain(w), w), &lo)) != MS_OK) return st;
  if (lo < 0) return ms_error(MS_ERR_ARG, OP ": input has a negative weight (%g; expected non-negative finite weights)", lo);
  if ((st = value_of(MS_RED_MAX, (ms_tensor_retain(w), w), &hi)) != MS_OK) return st;
  if (isinf(hi)) return ms_error(MS_ERR_ARG, OP ": input has an infinite weight (expected non-negative finite weights)");
  return MS_OK;
}

/* Every row of w (float64, (rows, n)) with a positive weight, and (without replacement) k. */
static ms_status check_rows(ms_tensor *w, bool rows, int64_t k, bool replacement, int64_t base) {
  ms_tensor *pos = compare(MS_OP_GT, w, 0);
  ms_tensor *count = pos ? native_reduce(MS_RED_SUM, pos, (ms_reduce_opts){.dim = 1}) : NULL;
  ms_tensor_release(pos);
  if (!count) return MS_ERR_MEMORY;
  double fewest, at; /* the fewest positive weights of a row, and the first row with so few */
  ms_status st = value_of(MS_RED_ARGMIN, (ms_tensor_retain(count), count), &at);
  if (st == MS_OK) st = value_of(MS_RED_MIN, (ms_tensor_retain(count), count), &fewest);
  ms_tensor_release(count);
  if (st != MS_OK) return st;
  char buf[64];
  if (fewest == 0)
    return ms_error(MS_ERR_ARG, OP ": %s has no positive weight (its weights sum to 0)", where_row(buf, sizeof buf, rows, at, base));
  if (!replacement && fewest < (double)k)
    return ms_error(MS_ERR_ARG, OP ": cannot draw %lld samples without replacement from %s, which has %lld "
                    "categories of positive weight (replacement = true draws any number)", (long long)k,
                    where_row(buf, sizeof buf, rows, at, base), (long long)fewest);
  return MS_OK;
}

/* Uniform float64 numbers in [0, 1) of (rows, cols) on dev: from the global generator, or from
 * one of its own seeded with *seed (offset 0; the global one untouched). */
static ms_tensor *uniform(ms_device dev, int64_t rows, int64_t cols, const uint64_t *seed) {
  ms_tensor *u = ms_tensor_new_empty_on(dev, 2, (int64_t[]){rows, cols}, MS_FLOAT64);
  ms_status st = !u ? MS_ERR_MEMORY : seed ? random_replay(u, META_UNIFORM, 0, 1, *seed, 0) : ms_tensor_uniform_(u, 0, 1);
  if (st != MS_OK) ms_tensor_release(u), u = NULL;
  return u;
}

/* The keys log(E) - log(w), E = -log(1 - u): +inf where w is 0, finite or -inf elsewhere. */
static ms_tensor *race_keys(ms_tensor *w, ms_tensor *u) {
  ms_tensor *t[6] = {0};
  t[0] = native_unary(MS_OP_NEG, u);
  t[1] = t[0] ? native_unary(MS_OP_LOG1P, t[0]) : NULL;              /* log(1 - u) in [-36.8, 0] */
  t[2] = t[1] ? native_unary(MS_OP_NEG, t[1]) : NULL;                /* E */
  t[3] = t[2] ? native_unary(MS_OP_LOG, t[2]) : NULL;
  t[4] = t[3] ? native_unary(MS_OP_LOG, w) : NULL;
  t[5] = t[4] ? native_binary(MS_OP_SUB, ms_operand_tensor(t[3]), ms_operand_tensor(t[4])) : NULL;
  ms_tensor *pos = t[5] ? compare(MS_OP_GT, w, 0) : NULL;
  ms_tensor *keys = pos ? native_where(pos, ms_operand_tensor(t[5]), ms_operand_number(INFINITY, MS_FLOAT64)) : NULL;
  ms_tensor_release(pos);
  for (int i = 0; i < 6; i++) ms_tensor_release(t[i]);
  return keys;
}

/* k distinct categories per row (0-based, (rows, k) int64): the k smallest keys, first first. */
static ms_tensor *draw_distinct(ms_tensor *w, int64_t k, const uint64_t *seed) {
  ms_tensor *u = uniform(ms_tensor_device(w), w->shape[0], w->shape[1], seed);
  ms_tensor *keys = u ? race_keys(w, u) : NULL, *idx = NULL, *vals = NULL;
  ms_tensor_release(u);
  if (keys && k == 1) idx = native_reduce(MS_RED_ARGMIN, keys, (ms_reduce_opts){.dim = 1, .keepdim = true});
  else if (keys) native_topk(keys, k, 1, false, &vals, &idx); /* a row no longer than the device sorts */
  ms_tensor_release(keys), ms_tensor_release(vals);
  return idx;
}

/* k categories per row drawn independently (0-based, (rows, k) int64), by the running sums. */
static ms_tensor *draw_repeated(ms_tensor *w, int64_t k, const uint64_t *seed) {
  int64_t rows = w->shape[0], n = w->shape[1], cells;
  if (!ms_mul_i64(rows, k, &cells) || !ms_mul_i64(cells, n, &cells))
    return ms_error(MS_ERR_ARG, OP ": %lld rows x %lld samples x %lld categories overflow int64",
                    (long long)rows, (long long)k, (long long)n), NULL;
  ms_tensor *t[7] = {0};
  t[0] = uniform(ms_tensor_device(w), rows, k, seed);
  t[1] = t[0] ? native_scan(MS_SCAN_CUMSUM, w, 1, false) : NULL;
  t[2] = t[1] ? native_narrow(t[1], 1, n - 1, 1) : NULL; /* the row's total, as the sums reach it */
  t[3] = t[2] ? native_binary(MS_OP_MUL, ms_operand_tensor(t[0]), ms_operand_tensor(t[2])) : NULL; /* < total */
  t[4] = t[3] ? native_reshape(t[3], 3, (int64_t[]){rows, k, 1}) : NULL;
  t[5] = t[4] ? native_reshape(t[1], 3, (int64_t[]){rows, 1, n}) : NULL;
  t[6] = t[5] ? native_binary(MS_OP_LE, ms_operand_tensor(t[5]), ms_operand_tensor(t[4])) : NULL;
  ms_tensor *idx = t[6] ? native_reduce(MS_RED_SUM, t[6], (ms_reduce_opts){.dim = 2}) : NULL;
  for (int i = 0; i < 7; i++) ms_tensor_release(t[i]);
  return idx;
}

static ms_status check_args(const ms_tensor *p, int64_t k, bool replacement) {
  if (ms_tensor_check_data_any(OP, p) != MS_OK) return MS_ERR_ARG;
  if (!ms_dtype_is_floating(p->dtype))
    return ms_error(MS_ERR_ARG, OP ": expected a floating tensor of weights (float32, float64, bfloat16 or "
                    "float16), got %s", ms_dtype_name(p->dtype));
  if (p->ndim != 1 && p->ndim != 2)
    return ms_error(MS_ERR_ARG, OP ": expected a 1-D tensor of weights or a 2-D tensor of rows of them, got %d "
                    "dims", p->ndim);
  int64_t n = p->shape[p->ndim - 1];
  if (n == 0) return ms_error(MS_ERR_ARG, OP ": input has no categories (its last dim has size 0)");
  if (k < 1) return ms_error(MS_ERR_ARG, OP ": num_samples must be at least 1, got %lld", (long long)k);
  if (!replacement && k > n)
    return ms_error(MS_ERR_ARG, OP ": cannot draw %lld samples without replacement from %lld categories "
                    "(num_samples must be at most %lld, or replacement = true)", (long long)k, (long long)n,
                    (long long)n);
  return MS_OK;
}

/* The checked draw from w (float64, (rows, n), rows > 0), positions counted from first. */
static ms_tensor *draw(ms_tensor *w, bool rows, int64_t k, bool replacement, int64_t first, const uint64_t *seed) {
  if (check_values(w) != MS_OK || check_rows(w, rows, k, replacement, first) != MS_OK) return NULL;
  ms_tensor *idx = replacement && k > 1 ? draw_repeated(w, k, seed) : draw_distinct(w, k, seed);
  ms_tensor *out = idx ? native_binary(MS_OP_ADD, ms_operand_tensor(idx), ms_operand_number((double)first, MS_INT64)) : NULL;
  ms_tensor_release(idx);
  return out;
}

ms_tensor *ms_tensor_new_multinomial(ms_tensor *p, int64_t num_samples, bool replacement, int64_t first,
                                     const uint64_t *seed) {
  if (check_args(p, num_samples, replacement) != MS_OK) return NULL;
  int64_t rows = p->ndim == 2 ? p->shape[0] : 1, n = p->shape[p->ndim - 1];
  if (rows == 0) return ms_tensor_new_empty_on(ms_tensor_device(p), 2, (int64_t[]){0, num_samples}, MS_INT64);
  ms_tensor *w64 = native_to_dtype(p, MS_FLOAT64);
  ms_tensor *w = w64 ? native_reshape(w64, 2, (int64_t[]){rows, n}) : NULL;
  ms_tensor *out = w ? draw(w, p->ndim == 2, num_samples, replacement, first, seed) : NULL;
  ms_tensor_release(w64), ms_tensor_release(w);
  ms_tensor *shaped = out && p->ndim == 1 ? native_reshape(out, 1, &num_samples) : (out ? (ms_tensor_retain(out), out) : NULL);
  ms_tensor_release(out);
  return shaped;
}
