/* elementwise.c: binary and unary maps, clamp and where over strided rows in the three compute
 * dtypes (float32, float64, int64), and on bfloat16 and float16 through float32 a block at a time.
 * LOOP writes each op once: a unit-stride form the compiler vectorises, a broadcast-scalar form,
 * and the general strided form. */
#include <math.h>
#include <stdbool.h>

#include "kernels/kernel_table.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/elementwise_avx512.h"

/* Expects o, x, y (pointers) and n, so, sa, sb in scope; EXPR reads X and Y. */
#define LOOP(EXPR)                                                                          \
  do {                                                                                      \
    if (so == 1 && sa == 1 && sb == 1) {                                                    \
      for (int64_t i = 0; i < n; i++) { __typeof__(*x) X = x[i], Y = y[i]; (void)Y; o[i] = (EXPR); } \
    } else if (so == 1 && sa == 1 && sb == 0) {                                             \
      __typeof__(*x) Y = y[0];                                                              \
      (void)Y;                                                                              \
      for (int64_t i = 0; i < n; i++) { __typeof__(*x) X = x[i]; o[i] = (EXPR); }           \
    } else {                                                                                \
      for (int64_t i = 0; i < n; i++) {                                                     \
        __typeof__(*x) X = x[i * sa], Y = y[i * sb];                                        \
        (void)Y;                                                                            \
        o[i * so] = (EXPR);                                                                 \
      }                                                                                     \
    }                                                                                       \
  } while (0)

/* PyTorch's maximum/minimum propagate NaN. */
#define MAXNAN(X, Y) ((X) != (X) ? (X) : (Y) != (Y) ? (Y) : (X) > (Y) ? (X) : (Y))
#define MINNAN(X, Y) ((X) != (X) ? (X) : (Y) != (Y) ? (Y) : (X) < (Y) ? (X) : (Y))

static int64_t ipow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, b = (uint64_t)base; /* unsigned: overflow wraps instead of being undefined */
  for (; e; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return (int64_t)r;
}

/* Comparisons and logical ops: any compute dtype in, bool out. */
#define COMPARE(T)                                                                          \
  static void compare_##T(ms_k_binop op, int64_t n, uint8_t *o, int64_t so, const T *x,     \
                          int64_t sa, const T *y, int64_t sb) {                            \
    switch (op) {                                                                           \
    case MS_K_EQ: LOOP(X == Y); break;                                                      \
    case MS_K_NE: LOOP(X != Y); break;                                                      \
    case MS_K_LT: LOOP(X < Y); break;                                                       \
    case MS_K_LE: LOOP(X <= Y); break;                                                      \
    case MS_K_GT: LOOP(X > Y); break;                                                       \
    case MS_K_GE: LOOP(X >= Y); break;                                                      \
    case MS_K_LOGICAL_AND: LOOP(X != 0 && Y != 0); break;                                           \
    case MS_K_LOGICAL_OR: LOOP(X != 0 || Y != 0); break;                                            \
    case MS_K_ADD: case MS_K_SUB: case MS_K_MUL: case MS_K_DIV: case MS_K_POW:              \
    case MS_K_MAXIMUM: case MS_K_MINIMUM: break; /* arithmetic: see arith_* */              \
    }                                                                                       \
  }
COMPARE(float)
COMPARE(double)
COMPARE(int64_t)

/* noipa: binary_half must run this very code (GCC otherwise specialises a copy for its unit-stride
 * output, which may order the operands of a vector add the other way: with two NaNs, the result
 * is the first's, so its sign and payload would differ from the whole-tensor path's). */
__attribute__((noipa)) static void arith_f32(ms_k_binop op, int64_t n, float *o, int64_t so, const float *x,
                                             int64_t sa, const float *y, int64_t sb) {
  switch (op) {
  case MS_K_ADD: LOOP(X + Y); break;
  case MS_K_SUB: LOOP(X - Y); break;
  case MS_K_MUL: LOOP(X * Y); break;
  case MS_K_DIV: LOOP(X / Y); break;
  case MS_K_POW: LOOP(powf(X, Y)); break;
  case MS_K_MAXIMUM: LOOP(MAXNAN(X, Y)); break;
  case MS_K_MINIMUM: LOOP(MINNAN(X, Y)); break;
  case MS_K_EQ: case MS_K_NE: case MS_K_LT: case MS_K_LE: case MS_K_GT: case MS_K_GE:
  case MS_K_LOGICAL_AND: case MS_K_LOGICAL_OR: break; /* bool results: see compare_* */
  }
}

static void arith_f64(ms_k_binop op, int64_t n, double *o, int64_t so, const double *x,
                      int64_t sa, const double *y, int64_t sb) {
  switch (op) {
  case MS_K_ADD: LOOP(X + Y); break;
  case MS_K_SUB: LOOP(X - Y); break;
  case MS_K_MUL: LOOP(X * Y); break;
  case MS_K_DIV: LOOP(X / Y); break;
  case MS_K_POW: LOOP(pow(X, Y)); break;
  case MS_K_MAXIMUM: LOOP(MAXNAN(X, Y)); break;
  case MS_K_MINIMUM: LOOP(MINNAN(X, Y)); break;
  case MS_K_EQ: case MS_K_NE: case MS_K_LT: case MS_K_LE: case MS_K_GT: case MS_K_GE:
  case MS_K_LOGICAL_AND: case MS_K_LOGICAL_OR: break; /* bool results: see compare_* */
  }
}

/* Integer arithmetic wraps like PyTorch's (two's complement), computed unsigned to stay defined. */
static void arith_i64(ms_k_binop op, int64_t n, int64_t *o, int64_t so, const int64_t *x,
                      int64_t sa, const int64_t *y, int64_t sb) {
  switch (op) {
  case MS_K_ADD: LOOP((int64_t)((uint64_t)X + (uint64_t)Y)); break;
  case MS_K_SUB: LOOP((int64_t)((uint64_t)X - (uint64_t)Y)); break;
  case MS_K_MUL: LOOP((int64_t)((uint64_t)X * (uint64_t)Y)); break;
  case MS_K_POW: LOOP(ipow(X, Y)); break;
  case MS_K_MAXIMUM: LOOP(X > Y ? X : Y); break;
  case MS_K_MINIMUM: LOOP(X < Y ? X : Y); break;
  case MS_K_DIV: break; /* true division: the engine sends it to a floating dtype */
  case MS_K_EQ: case MS_K_NE: case MS_K_LT: case MS_K_LE: case MS_K_GT: case MS_K_GE:
  case MS_K_LOGICAL_AND: case MS_K_LOGICAL_OR: break; /* bool results: see compare_* */
  }
}

static bool is_half(ms_k_dtype dt) { return dt == MS_K_BF16 || dt == MS_K_F16; }

/* ---- 16-bit floats, widened a block at a time ----
 * bfloat16 and float16 have no arithmetic here: each block of the row is widened into float32 on
 * the stack, computed by the float32 loops above and rounded once (ms_k_cast) into the output.
 * The values are those of widening whole tensors, computing and rounding back, bit for bit,
 * without that way's three extra passes over memory and two temporaries (5% of a bfloat16 GPT
 * step). Strided and broadcast rows take the same path (ms_k_cast gathers them); a broadcast
 * input is widened once. An input may be float32 instead of dt (in[k]): a number beside a 16-bit
 * tensor, which must not be rounded to 16 bits before the op. */
enum { HALF_BLOCK = 512 }; /* three float32 blocks: 6 KB of stack, in L1 */

/* The m elements of input p (dtype t, stride s) as float32 in buf (one when s is 0); returns the
 * stride to read buf with. */
static int64_t widen_block(float *buf, int64_t m, const char *p, ms_k_dtype t, int64_t s) {
  ms_k_cast(s ? m : 1, buf, MS_K_F32, 1, p, t, s);
  return s != 0;
}

static void binary_half(ms_k_binop op, ms_k_dtype dt, const ms_k_dtype in[2], int64_t n, void *out,
                        int64_t so, const void *a, int64_t sa, const void *b, int64_t sb) {
  float fa[HALF_BLOCK], fb[HALF_BLOCK], fo[HALF_BLOCK];
  int64_t ea = (int64_t)ms_k_dtype_size(in[0]), eb = (int64_t)ms_k_dtype_size(in[1]);
  int64_t eo = op >= MS_K_EQ ? 1 : 2; /* bool or dt */
  for (int64_t i = 0; i < n; i += HALF_BLOCK) {
    int64_t m = n - i < HALF_BLOCK ? n - i : HALF_BLOCK;
    /* block i is read whole before it is written: out may be a itself (add_) */
    int64_t ka = widen_block(fa, m, (const char *)a + i * sa * ea, in[0], sa);
    int64_t kb = widen_block(fb, m, (const char *)b + i * sb * eb, in[1], sb);
    char *o = (char *)out + i * so * eo;
    if (op >= MS_K_EQ) {
      compare_float(op, m, (uint8_t *)o, so, fa, ka, fb, kb);
    } else {
      arith_f32(op, m, fo, 1, fa, ka, fb, kb);
      ms_k_cast(m, o, dt, so, fo, MS_K_F32, 1);
    }
  }
}

void ms_k_binary(ms_k_binop op, ms_k_dtype dt, int64_t n, void *out, int64_t so, const void *a,
                 int64_t sa, const void *b, int64_t sb) {
  if (is_half(dt)) {
    binary_half(op, dt, (const ms_k_dtype[2]){dt, dt}, n, out, so, a, sa, b, sb);
  } else if (op >= MS_K_EQ) {
    if (dt == MS_K_F32) compare_float(op, n, out, so, a, sa, b, sb);
    else if (dt == MS_K_F64) compare_double(op, n, out, so, a, sa, b, sb);
    else compare_int64_t(op, n, out, so, a, sa, b, sb);
  } else {
    if (dt == MS_K_F32) arith_f32(op, n, out, so, a, sa, b, sb);
    else if (dt == MS_K_F64) arith_f64(op, n, out, so, a, sa, b, sb);
    else arith_i64(op, n, out, so, a, sa, b, sb);
  }
}

/* Unary maps: LOOP with a dummy second operand aliased to the first. */
#define ULOOP(EXPR)                                                                         \
  do {                                                                                      \
    const int64_t sb = sa;                                                                  \
    const __typeof__(x) y = x;                                                              \
    LOOP(EXPR);                                                                             \
  } while (0)

/* sign(NaN) is 0, as PyTorch 1.13 gives on the CPU; infinities keep their sign. */
static inline float sign_f(float v) { return (float)((v > 0) - (v < 0)); }
static inline double sign_d(double v) { return (double)((v > 0) - (v < 0)); }

static void unary_f32(ms_k_unop op, int64_t n, float *o, int64_t so, const float *x, int64_t sa) {
  switch (op) {
  case MS_K_NEG: ULOOP(-X); break;
  case MS_K_ABS: ULOOP(fabsf(X)); break;
  case MS_K_EXP: ULOOP(expf(X)); break;
  case MS_K_LOG: ULOOP(logf(X)); break;
  case MS_K_SQRT: ULOOP(sqrtf(X)); break;
  case MS_K_RSQRT: ULOOP(1.0f / sqrtf(X)); break;
  case MS_K_TANH: ULOOP(tanhf(X)); break;
  case MS_K_SIGMOID: ULOOP(1.0f / (1.0f + expf(-X))); break;
  case MS_K_RELU: ULOOP(X > 0 ? X : (X == X ? 0.0f : X)); break;
  case MS_K_SIGN: ULOOP(sign_f(X)); break;
  case MS_K_FLOOR: ULOOP(floorf(X)); break;
  case MS_K_CEIL: ULOOP(ceilf(X)); break;
  case MS_K_ROUND: ULOOP(nearbyintf(X)); break; /* half to even, as PyTorch */
  case MS_K_SIN: ULOOP(sinf(X)); break;
  case MS_K_COS: ULOOP(cosf(X)); break;
  case MS_K_LOG1P: ULOOP(log1pf(X)); break;
  case MS_K_EXPM1: ULOOP(expm1f(X)); break;
  case MS_K_RECIPROCAL: ULOOP(1.0f / X); break;
  case MS_K_SQUARE: ULOOP(X * X); break;
  case MS_K_SOFTPLUS: ULOOP(X > 20.0f ? X : log1pf(expf(X))); break; /* PyTorch's threshold */
  case MS_K_LOGICAL_NOT: break; /* bool result: see logical_not */
  }
}

static void unary_f64(ms_k_unop op, int64_t n, double *o, int64_t so, const double *x, int64_t sa) {
  switch (op) {
  case MS_K_NEG: ULOOP(-X); break;
  case MS_K_ABS: ULOOP(fabs(X)); break;
  case MS_K_EXP: ULOOP(exp(X)); break;
  case MS_K_LOG: ULOOP(log(X)); break;
  case MS_K_SQRT: ULOOP(sqrt(X)); break;
  case MS_K_RSQRT: ULOOP(1.0 / sqrt(X)); break;
  case MS_K_TANH: ULOOP(tanh(X)); break;
  case MS_K_SIGMOID: ULOOP(1.0 / (1.0 + exp(-X))); break;
  case MS_K_RELU: ULOOP(X > 0 ? X : (X == X ? 0.0 : X)); break;
  case MS_K_SIGN: ULOOP(sign_d(X)); break;
  case MS_K_FLOOR: ULOOP(floor(X)); break;
  case MS_K_CEIL: ULOOP(ceil(X)); break;
  case MS_K_ROUND: ULOOP(nearbyint(X)); break;
  case MS_K_SIN: ULOOP(sin(X)); break;
  case MS_K_COS: ULOOP(cos(X)); break;
  case MS_K_LOG1P: ULOOP(log1p(X)); break;
  case MS_K_EXPM1: ULOOP(expm1(X)); break;
  case MS_K_RECIPROCAL: ULOOP(1.0 / X); break;
  case MS_K_SQUARE: ULOOP(X * X); break;
  case MS_K_SOFTPLUS: ULOOP(X > 20.0 ? X : log1p(exp(X))); break;
  case MS_K_LOGICAL_NOT: break; /* bool result: see logical_not */
  }
}

static void unary_i64(ms_k_unop op, int64_t n, int64_t *o, int64_t so, const int64_t *x,
                      int64_t sa) {
  switch (op) {
  case MS_K_NEG: ULOOP((int64_t)(0 - (uint64_t)X)); break;
  case MS_K_ABS: ULOOP(X < 0 ? (int64_t)(0 - (uint64_t)X) : X); break;
  case MS_K_RELU: ULOOP(X > 0 ? X : 0); break;
  case MS_K_SIGN: ULOOP((X > 0) - (X < 0)); break;
  case MS_K_FLOOR: case MS_K_CEIL: case MS_K_ROUND: ULOOP(X); break;
  case MS_K_SQUARE: ULOOP((int64_t)((uint64_t)X * (uint64_t)X)); break;
  case MS_K_LOGICAL_NOT: break; /* bool result: see logical_not */
  case MS_K_EXP: case MS_K_LOG: case MS_K_SQRT: case MS_K_RSQRT: case MS_K_TANH: case MS_K_SIGMOID:
  case MS_K_SIN: case MS_K_COS: case MS_K_LOG1P: case MS_K_EXPM1: case MS_K_RECIPROCAL:
  case MS_K_SOFTPLUS:
    break; /* floating only: the engine converts first */
  }
}

static void logical_not(ms_k_dtype dt, int64_t n, uint8_t *o, int64_t so, const void *a, int64_t sa) {
  if (dt == MS_K_F32) { const float *x = a; ULOOP(X == 0); }
  else if (dt == MS_K_F64) { const double *x = a; ULOOP(X == 0); }
  else { const int64_t *x = a; ULOOP(X == 0); }
}

/* relu on bfloat16 bits, as widening, relu in float32 and rounding back would give: b in
 * [1, inf] (positive) stays, a NaN comes back quiet (as the rounding makes it), the rest is +0.
 * One pass instead of three: mixed precision's relu. */
static void relu_bf16(int64_t n, uint16_t *o, int64_t so, const uint16_t *x, int64_t sa) {
  int64_t i = so == 1 && sa == 1 && ms_k_cpu_avx512() ? ms_k_relu_bf16_avx512(n, o, x) : 0;
  for (; i < n; i++) {
    uint16_t b = x[i * sa];
    bool nan = (uint16_t)(b & 0x7fffu) > 0x7f80u;
    o[i * so] = nan ? (uint16_t)(b | 0x40u) : (uint16_t)(b - 1u) < 0x7f80u ? b : 0;
  }
}

/* A unary op on bfloat16 or float16 as binary_half does it: each block widened, computed by the
 * float32 loop and rounded once into out (which may be a itself: a block is read before it is
 * written). */
static void unary_half(ms_k_unop op, ms_k_dtype dt, int64_t n, void *out, int64_t so, const void *a,
                       int64_t sa) {
  float fa[HALF_BLOCK], fo[HALF_BLOCK];
  for (int64_t i = 0; i < n; i += HALF_BLOCK) {
    int64_t m = n - i < HALF_BLOCK ? n - i : HALF_BLOCK;
    int64_t ka = widen_block(fa, m, (const char *)a + i * sa * 2, dt, sa);
    unary_f32(op, m, fo, 1, fa, ka);
    ms_k_cast(m, (char *)out + i * so * 2, dt, so, fo, MS_K_F32, 1);
  }
}

void ms_k_unary(ms_k_unop op, ms_k_dtype dt, int64_t n, void *out, int64_t so, const void *a,
                int64_t sa) {
  if (op == MS_K_RELU && dt == MS_K_BF16) relu_bf16(n, out, so, a, sa);
  else if (op == MS_K_LOGICAL_NOT) logical_not(dt, n, out, so, a, sa);
  else if (is_half(dt)) unary_half(op, dt, n, out, so, a, sa);
  else if (dt == MS_K_F32) unary_f32(op, n, out, so, a, sa);
  else if (dt == MS_K_F64) unary_f64(op, n, out, so, a, sa);
  else unary_i64(op, n, out, so, a, sa);
}

/* min first, then max: with min > max everything becomes max, as in torch.clamp. NaN passes
 * through both comparisons untouched, as torch.clamp leaves it. */
#define CLAMP_LOOP(T)                                                                       \
  do {                                                                                      \
    T *o = out;                                                                             \
    const T *x = a;                                                                         \
    T l = lo ? (T)*lo : 0, h = hi ? (T)*hi : 0;                                             \
    int hl = lo != NULL, hh = hi != NULL;                                                   \
    ULOOP(hh && (hl && X < l ? l : X) > h ? h : (hl && X < l ? l : X));                   \
  } while (0)

/* clamp on 16-bit floats in float32 a block at a time, rounded back: the bits of widening first
 * (a signalling NaN comes back quiet, as the rounding makes it). */
static void clamp_half(ms_k_dtype dt, int64_t n, void *out, int64_t so, const void *a, int64_t sa,
                       const double *lo, const double *hi) {
  float fa[HALF_BLOCK], fo[HALF_BLOCK];
  for (int64_t i = 0; i < n; i += HALF_BLOCK) {
    int64_t m = n - i < HALF_BLOCK ? n - i : HALF_BLOCK;
    int64_t ka = widen_block(fa, m, (const char *)a + i * sa * 2, dt, sa);
    ms_k_clamp(MS_K_F32, m, fo, 1, fa, ka, lo, hi);
    ms_k_cast(m, (char *)out + i * so * 2, dt, so, fo, MS_K_F32, 1);
  }
}

void ms_k_clamp(ms_k_dtype dt, int64_t n, void *out, int64_t so, const void *a, int64_t sa,
                const double *lo, const double *hi) {
  if (is_half(dt)) clamp_half(dt, n, out, so, a, sa, lo, hi);
  else if (dt == MS_K_F32) CLAMP_LOOP(float);
  else if (dt == MS_K_F64) CLAMP_LOOP(double);
  else CLAMP_LOOP(int64_t);
}

/* Both inputs are read before the choice, so the compiler selects instead of branching on the
 * mask (a random mask mispredicts half the time: a float32 where of 3M elements took 15.7 ms,
 * 1 thread; 1.2 ms as a select). */
#define WHERE_LOOP(T)                                                                       \
  do {                                                                                      \
    T *o = out;                                                                             \
    const T *x = a, *y = b;                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                       \
      T xi = x[i * sa], yi = y[i * sb];                                                     \
      o[i * so] = cond[i * sc] ? xi : yi;                                                   \
    }                                                                                       \
  } while (0)

/* where into a 16-bit dt, each input dt or float32 (in[k], as binary_half's), selected in float32
 * a block at a time and rounded once: the bits of widening the inputs first. */
static void where_half(ms_k_dtype dt, const ms_k_dtype in[2], int64_t n, void *out, int64_t so,
                       const uint8_t *cond, int64_t sc, const void *a, int64_t sa, const void *b, int64_t sb) {
  float fa[HALF_BLOCK], fb[HALF_BLOCK], fo[HALF_BLOCK];
  int64_t ea = (int64_t)ms_k_dtype_size(in[0]), eb = (int64_t)ms_k_dtype_size(in[1]);
  for (int64_t i = 0; i < n; i += HALF_BLOCK) {
    int64_t m = n - i < HALF_BLOCK ? n - i : HALF_BLOCK;
    /* a broadcast input is spread over its block: the select loop then has unit strides */
    if (!widen_block(fa, m, (const char *)a + i * sa * ea, in[0], sa))
      for (int64_t j = 1; j < m; j++) fa[j] = fa[0];
    if (!widen_block(fb, m, (const char *)b + i * sb * eb, in[1], sb))
      for (int64_t j = 1; j < m; j++) fb[j] = fb[0];
    const uint8_t *c = cond + i * sc;
    if (sc == 1) /* written so that it vectorises (a blend) */
      for (int64_t j = 0; j < m; j++) fo[j] = c[j] ? fa[j] : fb[j];
    else
      ms_k_where(MS_K_F32, m, fo, 1, c, sc, fa, 1, fb, 1);
    ms_k_cast(m, (char *)out + i * so * 2, dt, so, fo, MS_K_F32, 1);
  }
}

void ms_k_where(ms_k_dtype dt, int64_t n, void *out, int64_t so, const uint8_t *cond, int64_t sc,
                const void *a, int64_t sa, const void *b, int64_t sb) {
  if (is_half(dt)) where_half(dt, (const ms_k_dtype[2]){dt, dt}, n, out, so, cond, sc, a, sa, b, sb);
  else if (dt == MS_K_F32) WHERE_LOOP(float);
  else if (dt == MS_K_F64) WHERE_LOOP(double);
  else WHERE_LOOP(int64_t);
}

/* Threaded over the pool in large pieces: the loop is memory-bound, so a piece must be big. */
typedef struct relu_bw_job {
  ms_k_dtype dt;
  const void *y, *g;
  void *gx;
} relu_bw_job;

/* A 16-bit float's bits b are > 0 when the sign is clear, b is not zero and not a NaN: b in
 * [1, inf], one unsigned compare. inf_bits: 0x7f80 (bfloat16) or 0x7c00 (float16). */
static void relu_bw_half(const uint16_t *y, const uint16_t *g, uint16_t *o, int64_t b, int64_t e, uint16_t inf_bits) {
  for (int64_t i = b; i < e; i++) {
    uint16_t gi = g[i];
    o[i] = (uint16_t)(y[i] - 1u) < inf_bits ? gi : 0;
  }
}

static void relu_bw_range(void *ctx, int64_t b, int64_t e) {
  const relu_bw_job *j = ctx;
  if (j->dt == MS_K_F64) {
    const double *y = j->y, *g = j->g;
    double *o = j->gx;
    for (int64_t i = b; i < e; i++) { /* both loads unconditional: the select vectorises */
      double gi = g[i];
      o[i] = y[i] > 0 ? gi : 0.0;
    }
  } else if (j->dt == MS_K_F32) {
    const float *y = j->y, *g = j->g;
    float *o = j->gx;
    for (int64_t i = b; i < e; i++) {
      float gi = g[i];
      o[i] = y[i] > 0 ? gi : 0.0f;
    }
  } else {
    relu_bw_half(j->y, j->g, j->gx, b, e, j->dt == MS_K_BF16 ? 0x7f80 : 0x7c00);
  }
}

void ms_k_relu_backward(ms_k_dtype dt, int64_t n, const void *y, const void *g, void *gx) {
  relu_bw_job j = {dt, y, g, gx};
  ms_k_parallel_for(n, 1 << 16, relu_bw_range, &j);
}

int ms_k_cpu_relu_backward(const ms_k_exec *x, ms_k_dtype dt, int64_t n, const void *y, const void *g, void *gx) {
  (void)x;
  ms_k_relu_backward(dt, n, y, g, gx);
  return 0;
}

/* ---- the table's bodies: the kernels above over the rows of a geometry ---- */

/* A number operand's value as the compute dtype holds it (F32, F64 or I64). */
typedef union number {
  float f;
  double d;
  int64_t i;
} number;

/* g with every number operand (data NULL) among operands first..first+1 turned into a stride-0
 * operand reading its value from num: g itself where there is none. */
static const ms_k_geom *bind_numbers(const ms_k_geom *g, ms_k_geom *local, int first, ms_k_dtype dt,
                                     const ms_k_scalar *const s[2], number num[2]) {
  if (g->data[first] && g->data[first + 1]) return g;
  *local = *g;
  for (int k = 0; k < 2; k++) {
    int op = first + k;
    if (local->data[op]) continue;
    if (dt == MS_K_F32 || is_half(dt)) num[k].f = (float)s[k]->f; /* float32 beside 16-bit: binary_half */
    else if (dt == MS_K_F64) num[k].d = s[k]->f;
    else num[k].i = s[k]->i;
    local->data[op] = (char *)&num[k];
    local->elsize[op] = 0;
    for (int d = 0; d < local->ndim; d++) local->strides[op][d] = 0;
  }
  return local;
}

typedef struct op_dtype {
  int op;
  ms_k_dtype dt;
} op_dtype;

typedef struct binary_dtypes {
  ms_k_binop op;
  ms_k_dtype dt, in[2]; /* in: the inputs' dtypes, which differ from dt only beside 16-bit dt */
} binary_dtypes;

static void binary_row(void *arg, int64_t n, char **p, const int64_t *s) {
  const binary_dtypes *c = arg;
  if (is_half(c->dt)) binary_half(c->op, c->dt, c->in, n, p[0], s[0], p[1], s[1], p[2], s[2]);
  else ms_k_binary(c->op, c->dt, n, p[0], s[0], p[1], s[1], p[2], s[2]);
}

int ms_k_cpu_binary(const ms_k_exec *x, const ms_k_geom *g, ms_k_binop op, ms_k_dtype dt,
                    const ms_k_scalar *sa, const ms_k_scalar *sb) {
  (void)x;
  ms_k_geom local;
  number num[2];
  g = bind_numbers(g, &local, 1, dt, (const ms_k_scalar *const[2]){sa, sb}, num);
  binary_dtypes c = {op, dt, {dt, dt}};
  /* beside 16-bit dt an input is dt (2 bytes) or float32 (4; a bound number: 0) */
  for (int k = 0; k < 2 && is_half(dt); k++) c.in[k] = g->elsize[1 + k] == 2 ? dt : MS_K_F32;
  ms_k_geom_run(g, binary_row, &c);
  return 0;
}

static void unary_row(void *arg, int64_t n, char **p, const int64_t *s) {
  const op_dtype *c = arg;
  ms_k_unary((ms_k_unop)c->op, c->dt, n, p[0], s[0], p[1], s[1]);
}

int ms_k_cpu_unary(const ms_k_exec *x, const ms_k_geom *g, ms_k_unop op, ms_k_dtype dt) {
  (void)x;
  op_dtype c = {(int)op, dt};
  ms_k_geom_run(g, unary_row, &c);
  return 0;
}

typedef struct clamp_bounds {
  ms_k_dtype dt;
  const double *lo, *hi;
} clamp_bounds;

static void clamp_row(void *arg, int64_t n, char **p, const int64_t *s) {
  const clamp_bounds *c = arg;
  ms_k_clamp(c->dt, n, p[0], s[0], p[1], s[1], c->lo, c->hi);
}

int ms_k_cpu_clamp(const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dt, const double *lo, const double *hi) {
  (void)x;
  clamp_bounds c = {dt, lo, hi};
  ms_k_geom_run(g, clamp_row, &c);
  return 0;
}

static void where_row(void *arg, int64_t n, char **p, const int64_t *s) {
  const binary_dtypes *c = arg;
  const uint8_t *cond = (const uint8_t *)p[1];
  if (is_half(c->dt)) where_half(c->dt, c->in, n, p[0], s[0], cond, s[1], p[2], s[2], p[3], s[3]);
  else ms_k_where(c->dt, n, p[0], s[0], cond, s[1], p[2], s[2], p[3], s[3]);
}

int ms_k_cpu_where(const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dt, const ms_k_scalar *sa,
                   const ms_k_scalar *sb) {
  (void)x;
  ms_k_geom local;
  number num[2];
  g = bind_numbers(g, &local, 2, dt, (const ms_k_scalar *const[2]){sa, sb}, num);
  binary_dtypes c = {0, dt, {dt, dt}}; /* op unused */
  for (int k = 0; k < 2 && is_half(dt); k++) c.in[k] = g->elsize[2 + k] == 2 ? dt : MS_K_F32;
  ms_k_geom_run(g, where_row, &c);
  return 0;
}
