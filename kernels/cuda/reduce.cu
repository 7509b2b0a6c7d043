// reduce.cu: row reductions (sum, mean, prod, max, min, argmax, argmin; var, std, norm) with the
// CPU's rules (kernels/cpu/reduce.c): one block per output row, each thread folding a strided
// share of the row, then a tree in shared memory that keeps the first extreme on ties. bfloat16
// and float16 rows are read as they are (their float32 values) and accumulate in double, as the
// CPU's widened rows do: a sum of 16-bit values is exact in double in any order while the span of
// their exponents plus log2 of the row's length stays under ~45 bits, so such sums (and means)
// match the CPU's bit for bit.
#include "common.cuh"

using namespace mskc;

struct partial {
  double f;    // floating sum / product / extreme
  int64_t i;   // int64 sum / product / extreme
  int64_t at;  // position of the extreme; -1: this share saw no element
};

template <typename T> __device__ inline bool is_nan(T v) { return v != v; }
template <typename ACC> __device__ constexpr bool is_float_acc() { return (ACC)0.5 != (ACC)0; }

// Whether candidate c beats the current b for max (want_max) or min: NaN beats everything but an
// earlier NaN; equal values keep the earlier position.
template <typename T>
__device__ inline bool beats(T c, int64_t ci, T b, int64_t bi, bool want_max) {
  if (bi < 0) return true;
  if (ci < 0) return false;
  bool cn = is_nan(c), bn = is_nan(b);
  if (cn || bn) return cn && (!bn || ci < bi);
  if (c == b) return ci < bi;
  return want_max ? c > b : c < b;
}

template <typename T> __device__ inline T value_of(const partial &p);
template <> __device__ inline double value_of<double>(const partial &p) { return p.f; }
template <> __device__ inline int64_t value_of<int64_t>(const partial &p) { return p.i; }
template <typename T> __device__ inline void set_value(partial &p, T v);
template <> __device__ inline void set_value<double>(partial &p, double v) { p.f = v; }
template <> __device__ inline void set_value<int64_t>(partial &p, int64_t v) { p.i = v; }

// ACC is double for floating inputs and int64_t for int64 ones.
template <typename T, typename ACC>
__global__ void reduce_rows_kernel(ms_k_redop op, ms_k_rows g, const T *src, int mean, char *out,
                                   ms_k_dtype out_dt, int64_t *indices) {
  __shared__ partial sh[kThreads];
  int64_t row = blockIdx.x;
  int64_t base = 0, rem = row;
  for (int d = g.ndim - 1; d >= 0; d--) base += (rem % g.shape[d]) * g.strides[d], rem /= g.shape[d];
  bool extreme = op == MS_K_RMAX || op == MS_K_RMIN || op == MS_K_RARGMAX || op == MS_K_RARGMIN;
  bool want_max = op == MS_K_RMAX || op == MS_K_RARGMAX;
  partial p = {0, 0, -1};
  ACC acc = op == MS_K_RPROD ? (ACC)1 : (ACC)0;
  for (int64_t j = threadIdx.x; j < g.n; j += blockDim.x) {
    T v = src[base + j * g.stride];
    if (extreme) {
      if (beats<ACC>((ACC)v, j, value_of<ACC>(p), p.at, want_max)) set_value<ACC>(p, (ACC)v), p.at = j;
    } else if (op == MS_K_RSUM) {
      acc = (ACC)(acc + (ACC)v);
    } else {
      acc = (ACC)(acc * (ACC)v);
    }
  }
  if (!extreme) set_value<ACC>(p, acc);
  sh[threadIdx.x] = p;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) {
      partial a = sh[threadIdx.x], b = sh[threadIdx.x + half];
      if (extreme) {
        if (beats<ACC>(value_of<ACC>(b), b.at, value_of<ACC>(a), a.at, want_max)) a = b;
      } else if (op == MS_K_RSUM) {
        set_value<ACC>(a, (ACC)(value_of<ACC>(a) + value_of<ACC>(b)));
      } else {
        set_value<ACC>(a, (ACC)(value_of<ACC>(a) * value_of<ACC>(b)));
      }
      sh[threadIdx.x] = a;
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  partial r = sh[0];
  char *o = out + row * elsize(out_dt);
  if (op == MS_K_RARGMAX || op == MS_K_RARGMIN) {
    store_i(o, out_dt, r.at);
  } else if (!is_float_acc<ACC>()) {
    store_i(o, out_dt, value_of<ACC>(r));
  } else {
    double v = (double)value_of<ACC>(r);
    store_f(o, out_dt, mean ? v / (double)g.n : v);
  }
  if (indices) indices[row] = r.at;
}

template <typename T, typename ACC>
static void launch(ms_k_redop op, const ms_k_rows *g, const void *src, int mean, void *out,
                   ms_k_dtype out_dt, int64_t *indices, cudaStream_t s) {
  reduce_rows_kernel<T, ACC><<<(unsigned)g->rows, kThreads, 0, s>>>(op, *g, (const T *)src, mean,
                                                                    (char *)out, out_dt, indices);
}

extern "C" int ms_k_cuda_reduce_rows(const ms_k_exec *x, const ms_k_rows *g, ms_k_redop op, ms_k_dtype dt,
                                     const void *src, int mean, void *out, ms_k_dtype out_dt,
                                     int64_t *indices) {
  if (g->rows == 0) return 0;
  if (g->rows > 0x7fffffff) return (int)cudaErrorInvalidConfiguration;
  cudaStream_t s = (cudaStream_t)x->stream;
  if (dt == MS_K_F32) launch<float, double>(op, g, src, mean, out, out_dt, indices, s);
  else if (dt == MS_K_F64) launch<double, double>(op, g, src, mean, out, out_dt, indices, s);
  else if (dt == MS_K_BF16) launch<bf16_el, double>(op, g, src, mean, out, out_dt, indices, s);
  else if (dt == MS_K_F16) launch<f16_el, double>(op, g, src, mean, out, out_dt, indices, s);
  else launch<int64_t, int64_t>(op, g, src, mean, out, out_dt, indices, s);
  return launch_status();
}

// ---- var, std and p-norms (ms_k_cuda_reduce_stat_rows) ----

// The max over the block, NaN winning (the p = inf norm of absolute values).
__device__ double block_max_nan(double v, double *sh) {
  __syncthreads();
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) {
      double a = sh[threadIdx.x], b = sh[threadIdx.x + half];
      sh[threadIdx.x] = (b > a || b != b) && a == a ? b : a;
    }
    __syncthreads();
  }
  return sh[0];
}

// One |v| term of a p-norm's sum, as the CPU's RPOWSUM.
__device__ inline double pow_term(double v, double p) {
  return p == 2 ? v * v : p == 1 ? v : p == 0 ? (double)(v != 0) : pow(v, p);
}

// Moments in two passes (mean, then squared deviations) instead of the CPU's Welford: the same
// value to rounding, and each pass is a plain block sum.
template <typename T>
__global__ void reduce_stat_kernel(ms_k_stat st, ms_k_rows g, const T *src, char *out, ms_k_dtype out_dt) {
  __shared__ double sh[kThreads];
  int64_t row = blockIdx.x, base = 0, rem = row;
  for (int d = g.ndim - 1; d >= 0; d--) base += (rem % g.shape[d]) * g.strides[d], rem /= g.shape[d];
  double r;
  if (st.op == MS_K_RMOMENTS) {
    double s = 0, ss = 0;
    for (int64_t j = threadIdx.x; j < g.n; j += blockDim.x) s += (double)src[base + j * g.stride];
    double mean = g.n > 0 ? block_sum(s) / (double)g.n : 0;
    for (int64_t j = threadIdx.x; j < g.n; j += blockDim.x) {
      double d = (double)src[base + j * g.stride] - mean;
      ss += d * d;
    }
    double m2 = block_sum(ss), dof = (double)g.n - st.correction;
    r = dof > 0 ? m2 / dof : NAN; // too few elements for the correction
    if (st.root) r = sqrt(r);
  } else if (isinf(st.p)) {
    double m = 0;
    for (int64_t j = threadIdx.x; j < g.n; j += blockDim.x) {
      double v = fabs((double)src[base + j * g.stride]);
      m = (v > m || v != v) && m == m ? v : m;
    }
    r = block_max_nan(m, sh);
  } else {
    double s = 0;
    for (int64_t j = threadIdx.x; j < g.n; j += blockDim.x) s += pow_term(fabs((double)src[base + j * g.stride]), st.p);
    s = block_sum(s);
    r = st.p == 0 || st.p == 1 ? s : st.p == 2 ? sqrt(s) : pow(s, 1.0 / st.p);
  }
  if (threadIdx.x == 0) store_f(out + row * elsize(out_dt), out_dt, r);
}

extern "C" int ms_k_cuda_reduce_stat_rows(const ms_k_exec *x, const ms_k_rows *g, const ms_k_stat *st,
                                          ms_k_dtype dt, const void *src, void *out, ms_k_dtype out_dt) {
  if (g->rows == 0) return 0;
  if (g->rows > 0x7fffffff) return (int)cudaErrorInvalidConfiguration;
  cudaStream_t s = (cudaStream_t)x->stream;
  unsigned rows = (unsigned)g->rows;
  char *o = (char *)out;
  if (dt == MS_K_F64) reduce_stat_kernel<double><<<rows, kThreads, 0, s>>>(*st, *g, (const double *)src, o, out_dt);
  else if (dt == MS_K_BF16) reduce_stat_kernel<bf16_el><<<rows, kThreads, 0, s>>>(*st, *g, (const bf16_el *)src, o, out_dt);
  else if (dt == MS_K_F16) reduce_stat_kernel<f16_el><<<rows, kThreads, 0, s>>>(*st, *g, (const f16_el *)src, o, out_dt);
  else reduce_stat_kernel<float><<<rows, kThreads, 0, s>>>(*st, *g, (const float *)src, o, out_dt);
  return launch_status();
}
