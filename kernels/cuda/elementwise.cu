// elementwise.cu: binary and unary maps, clamp and where over strided, broadcast operands in the
// three compute dtypes and in bfloat16 / float16, with the formulas of kernels/cpu/elementwise.c
// (NaN propagation, wrapping int64, sign(NaN) = 0, round half to even), one launch for the whole
// tensor. 16-bit operands are read as they are, computed in float32 and rounded once into the
// output (common.cuh's conversions are ms_k_cast's): the bits of the CPU's widen-compute-round
// wherever the float32 result is the same (every op but the transcendental ones, whose CUDA
// functions may differ from glibc's in the last float32 bit; see unary). The math functions are
// the accurate ones (expf, not __expf): the build uses no fast-math flags, so x / y and sqrtf
// are IEEE round-to-nearest and subnormals are kept, as on the CPU.
#include "common.cuh"

using namespace mskc;

// Device switches are out of the host compiler's -Wswitch: a new op must get a case below.
static_assert(MS_K_BINOP_COUNT == 15, "a binary op was added or removed: update arith and compare");
static_assert(MS_K_UNOP_COUNT == 21, "a unary op was added or removed: update unary");

template <typename T> __device__ inline T maxnan(T x, T y) { return x != x ? x : y != y ? y : x > y ? x : y; }
template <typename T> __device__ inline T minnan(T x, T y) { return x != x ? x : y != y ? y : x < y ? x : y; }

__device__ inline int64_t ipow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, b = (uint64_t)base;
  for (; e; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return (int64_t)r;
}

__device__ inline float arith(ms_k_binop op, float x, float y) {
  switch (op) {
  case MS_K_ADD: return x + y;
  case MS_K_SUB: return x - y;
  case MS_K_MUL: return x * y;
  case MS_K_DIV: return x / y;
  case MS_K_POW: return powf(x, y);
  case MS_K_MAXIMUM: return maxnan(x, y);
  case MS_K_MINIMUM: return minnan(x, y);
  case MS_K_EQ: case MS_K_NE: case MS_K_LT: case MS_K_LE: case MS_K_GT: case MS_K_GE:
  case MS_K_LOGICAL_AND: case MS_K_LOGICAL_OR: break; // bool results: see compare
  }
  return 0;
}

__device__ inline double arith(ms_k_binop op, double x, double y) {
  switch (op) {
  case MS_K_ADD: return x + y;
  case MS_K_SUB: return x - y;
  case MS_K_MUL: return x * y;
  case MS_K_DIV: return x / y;
  case MS_K_POW: return pow(x, y);
  case MS_K_MAXIMUM: return maxnan(x, y);
  case MS_K_MINIMUM: return minnan(x, y);
  case MS_K_EQ: case MS_K_NE: case MS_K_LT: case MS_K_LE: case MS_K_GT: case MS_K_GE:
  case MS_K_LOGICAL_AND: case MS_K_LOGICAL_OR: break; // bool results: see compare
  }
  return 0;
}

__device__ inline int64_t arith(ms_k_binop op, int64_t x, int64_t y) {
  switch (op) {
  case MS_K_ADD: return (int64_t)((uint64_t)x + (uint64_t)y);
  case MS_K_SUB: return (int64_t)((uint64_t)x - (uint64_t)y);
  case MS_K_MUL: return (int64_t)((uint64_t)x * (uint64_t)y);
  case MS_K_POW: return ipow(x, y);
  case MS_K_MAXIMUM: return x > y ? x : y;
  case MS_K_MINIMUM: return x < y ? x : y;
  case MS_K_DIV: break; // true division: the engine sends it to a floating dtype
  case MS_K_EQ: case MS_K_NE: case MS_K_LT: case MS_K_LE: case MS_K_GT: case MS_K_GE:
  case MS_K_LOGICAL_AND: case MS_K_LOGICAL_OR: break; // bool results: see compare
  }
  return 0;
}

template <typename T> __device__ inline uint8_t compare(ms_k_binop op, T x, T y) {
  switch (op) {
  case MS_K_EQ: return x == y;
  case MS_K_NE: return x != y;
  case MS_K_LT: return x < y;
  case MS_K_LE: return x <= y;
  case MS_K_GT: return x > y;
  case MS_K_GE: return x >= y;
  case MS_K_LOGICAL_AND: return x != 0 && y != 0;
  case MS_K_LOGICAL_OR: return x != 0 || y != 0;
  case MS_K_ADD: case MS_K_SUB: case MS_K_MUL: case MS_K_DIV: case MS_K_POW: case MS_K_MAXIMUM:
  case MS_K_MINIMUM: break; // arithmetic: see arith
  }
  return 0;
}

template <typename T> __device__ inline T scalar_as(const ms_k_scalar &s);
template <> __device__ inline float scalar_as<float>(const ms_k_scalar &s) { return (float)s.f; }
template <> __device__ inline double scalar_as<double>(const ms_k_scalar &s) { return s.f; }
template <> __device__ inline int64_t scalar_as<int64_t>(const ms_k_scalar &s) { return s.i; }

// OUT is T for arithmetic and uint8_t (bool) for comparisons.
template <typename T, typename OUT>
__global__ void binary_kernel(ms_k_binop op, ms_k_geom g, int64_t n, OUT *out, const T *a,
                              ms_k_scalar sa, const T *b, ms_k_scalar sb) {
  T xa = scalar_as<T>(sa), xb = scalar_as<T>(sb);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[3];
    offsets<3>(g, i, off);
    T x = a ? a[off[1]] : xa, y = b ? b[off[2]] : xb;
    if constexpr (sizeof(OUT) == 1) out[off[0]] = compare(op, x, y);
    else out[off[0]] = arith(op, x, y);
  }
}

template <typename T>
static void launch_binary(ms_k_binop op, const ms_k_geom *g, int64_t n, void *out, const void *a,
                          ms_k_scalar sa, const void *b, ms_k_scalar sb, cudaStream_t s) {
  if (op >= MS_K_EQ)
    binary_kernel<T, uint8_t><<<blocks_for(n), kThreads, 0, s>>>(op, *g, n, (uint8_t *)out, (const T *)a, sa, (const T *)b, sb);
  else
    binary_kernel<T, T><<<blocks_for(n), kThreads, 0, s>>>(op, *g, n, (T *)out, (const T *)a, sa, (const T *)b, sb);
}

static int64_t numel(const ms_k_geom *g) {
  int64_t n = 1;
  for (int d = 0; d < g->ndim; d++) n *= g->shape[d];
  return n;
}

// ---- bfloat16 and float16 (dt): each input is dt or float32 (ms_k_binary's rule) ----

// One input of a 16-bit op: elements of dt (es 2) or float32 (es 4), or the number v (p NULL,
// rounded to float32 as the CPU's bind_numbers does).
struct half_in {
  const char *p;
  int es;
  float v;
  __device__ float at(int64_t off, ms_k_dtype dt) const {
    if (!p) return v;
    if (es == 4) return ((const float *)p)[off];
    return half_to_f32(((const uint16_t *)p)[off], dt);
  }
};

static half_in half_input(const ms_k_geom *g, int k, const ms_k_scalar *s) {
  return half_in{g->data[k], (int)g->elsize[k], g->data[k] ? 0.0f : (float)s->f};
}

// out (dt, or bool for comparisons) = a op b in float32, rounded once.
__global__ void binary_half_kernel(ms_k_binop op, ms_k_dtype dt, ms_k_geom g, int64_t n, char *out, half_in a,
                                   half_in b) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[3];
    offsets<3>(g, i, off);
    float x = a.at(off[1], dt), y = b.at(off[2], dt);
    if (op >= MS_K_EQ) ((uint8_t *)out)[off[0]] = compare(op, x, y);
    else ((uint16_t *)out)[off[0]] = f32_to_half(arith(op, x, y), dt);
  }
}

static bool is_half(ms_k_dtype dt) { return dt == MS_K_BF16 || dt == MS_K_F16; }

// Contiguous 16-bit operands two elements at a time: one 32-bit load or store per pair instead of
// two 16-bit ones. Element 2j is the low half of word j (little-endian).
__device__ inline float2 unpack(uint32_t w, ms_k_dtype dt) {
  return make_float2(half_to_f32((uint16_t)w, dt), half_to_f32((uint16_t)(w >> 16), dt));
}
__device__ inline uint32_t pack(float lo, float hi, ms_k_dtype dt) {
  return (uint32_t)f32_to_half(lo, dt) | (uint32_t)f32_to_half(hi, dt) << 16;
}

// Whether pairs fit: n even and every tensor operand among the first nops one unit-stride run of
// 16-bit elements starting 4-byte aligned (a number operand, data NULL, fits anywhere).
static bool pairs_fit(const ms_k_geom *g, int nops, int64_t n) {
  if (g->ndim != 1 || n % 2) return false;
  for (int k = 0; k < nops; k++)
    if (g->data[k] && (g->elsize[k] != 2 || g->strides[k][0] != 1 || (uintptr_t)g->data[k] % 4)) return false;
  return true;
}

// binary_half_kernel's arithmetic (not comparisons: their output is bytes) on pairs; a NULL a or
// b is the number va or vb.
__global__ void binary_half_pairs(ms_k_binop op, ms_k_dtype dt, int64_t npairs, uint32_t *out, const uint32_t *a,
                                  float va, const uint32_t *b, float vb) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < npairs; j += (int64_t)gridDim.x * blockDim.x) {
    float2 x = a ? unpack(a[j], dt) : make_float2(va, va), y = b ? unpack(b[j], dt) : make_float2(vb, vb);
    out[j] = pack(arith(op, x.x, y.x), arith(op, x.y, y.y), dt);
  }
}

static void launch_binary_half(ms_k_binop op, ms_k_dtype dt, const ms_k_geom *g, int64_t n, const ms_k_scalar *sa,
                               const ms_k_scalar *sb, cudaStream_t s) {
  half_in a = half_input(g, 1, sa), b = half_input(g, 2, sb);
  if (op < MS_K_EQ && pairs_fit(g, 3, n))
    binary_half_pairs<<<blocks_for(n / 2), kThreads, 0, s>>>(op, dt, n / 2, (uint32_t *)g->data[0], (const uint32_t *)a.p,
                                                             a.v, (const uint32_t *)b.p, b.v);
  else
    binary_half_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, dt, *g, n, g->data[0], a, b);
}

extern "C" int ms_k_cuda_binary(const ms_k_exec *x, const ms_k_geom *g, ms_k_binop op, ms_k_dtype dt,
                                const ms_k_scalar *sa, const ms_k_scalar *sb) {
  void *out = g->data[0];
  const void *a = g->data[1], *b = g->data[2];
  int64_t n = numel(g);
  if (n == 0) return 0;
  ms_k_scalar za = a ? ms_k_scalar{0, 0} : *sa, zb = b ? ms_k_scalar{0, 0} : *sb;
  cudaStream_t s = (cudaStream_t)x->stream;
  if (is_half(dt)) launch_binary_half(op, dt, g, n, sa, sb, s);
  else if (dt == MS_K_F32) launch_binary<float>(op, g, n, out, a, za, b, zb, s);
  else if (dt == MS_K_F64) launch_binary<double>(op, g, n, out, a, za, b, zb, s);
  else launch_binary<int64_t>(op, g, n, out, a, za, b, zb, s);
  return launch_status();
}

// The accuracy of each op's CUDA function (CUDA C Programming Guide, "Mathematical Functions",
// maximum ulps from the correctly rounded float32 result) beside glibc's (under 1 ulp): exact ops
// give the CPU's bits; the others may differ in the last float32 bit, which a 16-bit result
// sees only when the float32 value falls next to a 16-bit rounding boundary. Integer inputs never
// come here: the engine computes them in double (unary's double overload) and rounds once, so
// they match the CPU exactly. No intrinsic (__expf, __logf, __fdividef) is used: each is less
// accurate than these functions over part of the range.
__device__ inline float unary(ms_k_unop op, float x) {
  switch (op) {
  case MS_K_NEG: return -x;                                     // exact
  case MS_K_ABS: return fabsf(x);                               // exact
  case MS_K_EXP: return expf(x);                                // 2 ulps
  case MS_K_LOG: return logf(x);                                // 1 ulp
  case MS_K_SQRT: return sqrtf(x);                              // IEEE (correctly rounded)
  case MS_K_RSQRT: return 1.0f / sqrtf(x);                      // two IEEE roundings, as the CPU's
  case MS_K_TANH: return tanhf(x);                              // 2 ulps
  case MS_K_SIGMOID: return 1.0f / (1.0f + expf(-x));           // expf's 2 ulps, then IEEE ops
  case MS_K_RELU: return x > 0 ? x : (x == x ? 0.0f : x);       // exact
  case MS_K_SIGN: return (float)((x > 0) - (x < 0));            // exact
  case MS_K_FLOOR: return floorf(x);                            // exact
  case MS_K_CEIL: return ceilf(x);                              // exact
  case MS_K_ROUND: return rintf(x);                             // exact, half to even
  case MS_K_SIN: return sinf(x);                                // 2 ulps
  case MS_K_COS: return cosf(x);                                // 2 ulps
  case MS_K_LOG1P: return log1pf(x);                            // 1 ulp
  case MS_K_EXPM1: return expm1f(x);                            // 1 ulp
  case MS_K_RECIPROCAL: return 1.0f / x;                        // IEEE
  case MS_K_SQUARE: return x * x;                               // IEEE
  case MS_K_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));   // PyTorch's threshold; expf, log1pf
  case MS_K_LOGICAL_NOT: break; // bool result: see unary_kernel
  }
  return 0;
}

// float64 (and the integer inputs of float ops, rounded once to float32 by the engine): CUDA's
// double functions are within 1 ulp (exp, log, tanh, log1p, expm1) or 2 (sin, cos) of the
// correctly rounded double, far below float32's rounding, so the float32 result is the CPU's.
__device__ inline double unary(ms_k_unop op, double x) {
  switch (op) {
  case MS_K_NEG: return -x;
  case MS_K_ABS: return fabs(x);
  case MS_K_EXP: return exp(x);
  case MS_K_LOG: return log(x);
  case MS_K_SQRT: return sqrt(x);
  case MS_K_RSQRT: return 1.0 / sqrt(x);
  case MS_K_TANH: return tanh(x);
  case MS_K_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case MS_K_RELU: return x > 0 ? x : (x == x ? 0.0 : x);
  case MS_K_SIGN: return (double)((x > 0) - (x < 0));
  case MS_K_FLOOR: return floor(x);
  case MS_K_CEIL: return ceil(x);
  case MS_K_ROUND: return rint(x);
  case MS_K_SIN: return sin(x);
  case MS_K_COS: return cos(x);
  case MS_K_LOG1P: return log1p(x);
  case MS_K_EXPM1: return expm1(x);
  case MS_K_RECIPROCAL: return 1.0 / x;
  case MS_K_SQUARE: return x * x;
  case MS_K_SOFTPLUS: return x > 20.0 ? x : log1p(exp(x));
  case MS_K_LOGICAL_NOT: break; // bool result: see unary_kernel
  }
  return 0;
}

__device__ inline int64_t unary(ms_k_unop op, int64_t x) {
  switch (op) {
  case MS_K_NEG: return (int64_t)(0 - (uint64_t)x);
  case MS_K_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
  case MS_K_RELU: return x > 0 ? x : 0;
  case MS_K_SIGN: return (x > 0) - (x < 0);
  case MS_K_SQUARE: return (int64_t)((uint64_t)x * (uint64_t)x);
  case MS_K_FLOOR: case MS_K_CEIL: case MS_K_ROUND: return x;
  case MS_K_LOGICAL_NOT: break; // bool result: see unary_kernel
  case MS_K_EXP: case MS_K_LOG: case MS_K_SQRT: case MS_K_RSQRT: case MS_K_TANH: case MS_K_SIGMOID:
  case MS_K_SIN: case MS_K_COS: case MS_K_LOG1P: case MS_K_EXPM1: case MS_K_RECIPROCAL:
  case MS_K_SOFTPLUS:
    break; // floating only: the engine converts first
  }
  return 0;
}

template <typename T, typename OUT>
__global__ void unary_kernel(ms_k_unop op, ms_k_geom g, int64_t n, OUT *out, const T *a) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    offsets<2>(g, i, off);
    T x = a[off[1]];
    if constexpr (sizeof(OUT) == 1) out[off[0]] = x == 0; // logical_not
    else out[off[0]] = unary(op, x);
  }
}

template <typename T>
static void launch_unary(ms_k_unop op, const ms_k_geom *g, int64_t n, void *out, const void *a, cudaStream_t s) {
  if (op == MS_K_LOGICAL_NOT)
    unary_kernel<T, uint8_t><<<blocks_for(n), kThreads, 0, s>>>(op, *g, n, (uint8_t *)out, (const T *)a);
  else
    unary_kernel<T, T><<<blocks_for(n), kThreads, 0, s>>>(op, *g, n, (T *)out, (const T *)a);
}

// out = op(a) for 16-bit a and out of dtype dt: in float32, rounded once (relu too: a NaN comes
// back quiet and -0 becomes +0, as the CPU's relu on bfloat16 bits gives).
__global__ void unary_half_kernel(ms_k_unop op, ms_k_dtype dt, ms_k_geom g, int64_t n, uint16_t *out,
                                  const uint16_t *a) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    offsets<2>(g, i, off);
    out[off[0]] = f32_to_half(unary(op, half_to_f32(a[off[1]], dt)), dt);
  }
}

__global__ void unary_half_pairs(ms_k_unop op, ms_k_dtype dt, int64_t npairs, uint32_t *out, const uint32_t *a) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < npairs; j += (int64_t)gridDim.x * blockDim.x) {
    float2 x = unpack(a[j], dt);
    out[j] = pack(unary(op, x.x), unary(op, x.y), dt);
  }
}

extern "C" int ms_k_cuda_unary(const ms_k_exec *x, const ms_k_geom *g, ms_k_unop op, ms_k_dtype dt) {
  void *out = g->data[0];
  const void *a = g->data[1];
  int64_t n = numel(g);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  bool half = is_half(dt) && op != MS_K_LOGICAL_NOT; // the engine sends logical_not in float32
  if (half && pairs_fit(g, 2, n))
    unary_half_pairs<<<blocks_for(n / 2), kThreads, 0, s>>>(op, dt, n / 2, (uint32_t *)out, (const uint32_t *)a);
  else if (half)
    unary_half_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, dt, *g, n, (uint16_t *)out, (const uint16_t *)a);
  else if (dt == MS_K_F32) launch_unary<float>(op, g, n, out, a, s);
  else if (dt == MS_K_F64) launch_unary<double>(op, g, n, out, a, s);
  else launch_unary<int64_t>(op, g, n, out, a, s);
  return launch_status();
}

// ---- clamp and where: ms_k_clamp's and ms_k_where's semantics ----

// min first, then max (min > max gives max everywhere); NaN passes both comparisons untouched.
template <typename T>
__global__ void clamp_kernel(ms_k_geom g, int64_t n, T *out, const T *a, int hl, double lo, int hh, double hi) {
  T l = hl ? (T)lo : (T)0, h = hh ? (T)hi : (T)0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    offsets<2>(g, i, off);
    T x = a[off[1]], v = hl && x < l ? l : x;
    out[off[0]] = hh && v > h ? h : v;
  }
}

// The same on 16-bit elements, compared in float32 and rounded back (the CPU's widening bits: a
// signalling NaN comes back quiet).
__global__ void clamp_half_kernel(ms_k_dtype dt, ms_k_geom g, int64_t n, uint16_t *out, const uint16_t *a, int hl,
                                  float l, int hh, float h) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    offsets<2>(g, i, off);
    float x = half_to_f32(a[off[1]], dt), v = hl && x < l ? l : x;
    out[off[0]] = f32_to_half(hh && v > h ? h : v, dt);
  }
}

extern "C" int ms_k_cuda_clamp(const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dt, const double *lo,
                               const double *hi) {
  void *out = g->data[0];
  const void *a = g->data[1];
  int64_t n = numel(g);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  int hl = lo != NULL, hh = hi != NULL;
  double l = lo ? *lo : 0, h = hi ? *hi : 0;
  if (is_half(dt))
    clamp_half_kernel<<<blocks_for(n), kThreads, 0, s>>>(dt, *g, n, (uint16_t *)out, (const uint16_t *)a, hl, (float)l, hh,
                                                          (float)h);
  else if (dt == MS_K_F32) clamp_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(*g, n, (float *)out, (const float *)a, hl, l, hh, h);
  else if (dt == MS_K_F64) clamp_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(*g, n, (double *)out, (const double *)a, hl, l, hh, h);
  else clamp_kernel<int64_t><<<blocks_for(n), kThreads, 0, s>>>(*g, n, (int64_t *)out, (const int64_t *)a, hl, l, hh, h);
  return launch_status();
}

// A NULL a or b reads its scalar instead (a number operand, as in ms_k_cuda_binary).
template <typename T>
__global__ void where_kernel(ms_k_geom g, int64_t n, T *out, const uint8_t *cond, const T *a, ms_k_scalar sa,
                             const T *b, ms_k_scalar sb) {
  T xa = scalar_as<T>(sa), xb = scalar_as<T>(sb);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[4];
    offsets<4>(g, i, off);
    out[off[0]] = cond[off[1]] ? (a ? a[off[2]] : xa) : (b ? b[off[3]] : xb);
  }
}

// 16-bit out of dtype dt; a and b dt or float32 (half_in), the chosen one rounded once.
__global__ void where_half_kernel(ms_k_dtype dt, ms_k_geom g, int64_t n, uint16_t *out, const uint8_t *cond, half_in a,
                                  half_in b) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[4];
    offsets<4>(g, i, off);
    out[off[0]] = f32_to_half(cond[off[1]] ? a.at(off[2], dt) : b.at(off[3], dt), dt);
  }
}

extern "C" int ms_k_cuda_where(const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dt, const ms_k_scalar *sa,
                               const ms_k_scalar *sb) {
  void *out = g->data[0];
  const uint8_t *cond = (const uint8_t *)g->data[1];
  const void *a = g->data[2], *b = g->data[3];
  int64_t n = numel(g);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  ms_k_scalar za = a ? ms_k_scalar{0, 0} : *sa, zb = b ? ms_k_scalar{0, 0} : *sb;
  if (is_half(dt))
    where_half_kernel<<<blocks_for(n), kThreads, 0, s>>>(dt, *g, n, (uint16_t *)out, cond, half_input(g, 2, sa),
                                                          half_input(g, 3, sb));
  else if (dt == MS_K_F32)
    where_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(*g, n, (float *)out, cond, (const float *)a, za, (const float *)b, zb);
  else if (dt == MS_K_F64)
    where_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(*g, n, (double *)out, cond, (const double *)a, za, (const double *)b, zb);
  else
    where_kernel<int64_t><<<blocks_for(n), kThreads, 0, s>>>(*g, n, (int64_t *)out, cond, (const int64_t *)a, za, (const int64_t *)b, zb);
  return launch_status();
}
