// nn_ops.cu: softmax and log_softmax (forward and backward), dropout's masked scale (its mask is
// random.cu's), and the negative log likelihood rows and gradient, with
// the formulas of kernels/cpu/nn_ops_body.h. One thread per row or position: the rows of the
// models this serves are short (classes), so a row never needs a block of its own.
#include "lowp.cuh"

using namespace mskc;

__device__ inline float dexp(float v) { return expf(v); }
__device__ inline double dexp(double v) { return exp(v); }
__device__ inline float dlog(float v) { return logf(v); }
__device__ inline double dlog(double v) { return log(v); }

// Storage S, arithmetic in A = acc_t<S> (lowp.cuh): a 16-bit row is widened as it is read and
// each output rounded once, as kernels/cpu/nn_ops_half.h runs the float32 row body. The softmax
// numerators are recomputed for the write rather than kept in y (a 16-bit y would round them
// twice); for float and double the values are those the CPU body stores and scales, bit for bit.
template <typename S>
__global__ void softmax_kernel(int64_t rows, int64_t C, int64_t inner, const S *x, S *y, int is_log) {
  typedef acc_t<S> A;
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = (r / inner) * C * inner + r % inner, s = inner;
    const S *xr = x + base;
    S *yr = y + base;
    A m = -INFINITY;
    for (int64_t c = 0; c < C; c++) {
      A v = ld(xr[c * s]);
      m = (v > m || v != v) ? v : m;
    }
    double sum = 0;
    for (int64_t c = 0; c < C; c++) sum += dexp(ld(xr[c * s]) - m);
    if (is_log) {
      A lse = m + dlog((A)sum);
      for (int64_t c = 0; c < C; c++) yr[c * s] = st<S>(ld(xr[c * s]) - lse);
    } else {
      A inv = (A)(1.0 / sum);
      for (int64_t c = 0; c < C; c++) yr[c * s] = st<S>(dexp(ld(xr[c * s]) - m) * inv);
    }
  }
}

template <typename S>
__global__ void softmax_backward_kernel(int64_t rows, int64_t C, int64_t inner, const S *y, const S *g,
                                        S *gx, int is_log) {
  typedef acc_t<S> A;
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = (r / inner) * C * inner + r % inner, s = inner;
    const S *yr = y + base, *gr = g + base;
    S *o = gx + base;
    double sum = 0;
    if (is_log) {
      for (int64_t c = 0; c < C; c++) sum += ld(gr[c * s]);
      for (int64_t c = 0; c < C; c++) o[c * s] = st<S>(ld(gr[c * s]) - dexp(ld(yr[c * s])) * (A)sum);
    } else {
      for (int64_t c = 0; c < C; c++) sum += ld(gr[c * s]) * ld(yr[c * s]);
      for (int64_t c = 0; c < C; c++) o[c * s] = st<S>(ld(yr[c * s]) * (ld(gr[c * s]) - (A)sum));
    }
  }
}

extern "C" int ms_k_cuda_softmax(const ms_k_exec *ex, ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner,
                                 const void *x, void *y, int log) {
  int64_t rows = outer * inner;
  if (rows == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S,
                    softmax_kernel<S><<<blocks_for(rows), kThreads, 0, s>>>(rows, C, inner, (const S *)x, (S *)y, log));
  return launch_status();
}

extern "C" int ms_k_cuda_softmax_backward(const ms_k_exec *ex, ms_k_dtype dt, int64_t outer, int64_t C,
                                          int64_t inner, const void *y, const void *g, void *gx, int log) {
  int64_t rows = outer * inner;
  if (rows == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S,
                    softmax_backward_kernel<S><<<blocks_for(rows), kThreads, 0, s>>>(rows, C, inner, (const S *)y,
                                                                                     (const S *)g, (S *)gx, log));
  return launch_status();
}

template <typename T>
__global__ void masked_scale_kernel(int64_t n, const T *x, const uint8_t *m, T scale, T *y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = m[i] ? x[i] * scale : (T)0;
}

extern "C" int ms_k_cuda_masked_scale(const ms_k_exec *x, ms_k_dtype dt, int64_t n, const void *in,
                                      const uint8_t *mask, double scale, void *y) {
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  if (dt == MS_K_F64) masked_scale_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(n, (const double *)in, mask, scale, (double *)y);
  else masked_scale_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(n, (const float *)in, mask, (float)scale, (float *)y);
  return launch_status();
}

__device__ void report_bad_target(ms_k_bad_value *bad, int64_t t, const ms_k_nll_args &a) {
  if (atomicCAS(&bad->code, MS_K_BAD_NONE, MS_K_BAD_TARGET) != MS_K_BAD_NONE) return;
  bad->value = t, bad->limit = a.C, bad->base = a.base;
  __threadfence_system();
}

template <typename T>
__global__ void nll_rows_kernel(ms_k_nll_args a, const T *logp, T *nll, T *wt, T *smooth,
                                ms_k_bad_value *bad) {
  const T *w = (const T *)a.weight;
  int64_t positions = a.N * a.inner;
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < positions; p += (int64_t)gridDim.x * blockDim.x) {
    int64_t n = p / a.inner, i = p % a.inner, t = a.target[p];
    const T *row = logp + n * a.C * a.inner + i;
    if (t == a.ignore_index) {
      nll[p] = 0, wt[p] = 0;
      if (smooth) smooth[p] = 0;
      continue;
    }
    int64_t k = t - a.base;
    if (k < 0 || k >= a.C) {
      report_bad_target(bad, t, a);
      nll[p] = (T)NAN, wt[p] = 0;
      if (smooth) smooth[p] = (T)NAN;
      continue;
    }
    T wk = w ? w[k] : (T)1;
    nll[p] = -wk * row[k * a.inner], wt[p] = wk;
    if (!smooth) continue;
    double s = 0;
    for (int64_t c = 0; c < a.C; c++) s -= (double)(w ? w[c] : (T)1) * row[c * a.inner];
    smooth[p] = (T)s;
  }
}

template <typename T>
__global__ void nll_reduce_kernel(int64_t n, const T *nll, const T *wt, const T *smooth, double s, int64_t C,
                                  int mean, T *out, double *sw) {
  __shared__ double part[3][kThreads];
  double sn = 0, sw_ = 0, ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sn += (double)nll[i], sw_ += (double)wt[i];
    if (smooth) ss += (double)smooth[i];
  }
  part[0][threadIdx.x] = sn, part[1][threadIdx.x] = sw_, part[2][threadIdx.x] = ss;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      for (int k = 0; k < 3; k++) part[k][threadIdx.x] += part[k][threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  double v = (1 - s) * part[0][0] + s / (double)C * part[2][0];
  out[0] = (T)(mean ? v / part[1][0] : v);
  *sw = part[1][0];
}

extern "C" int ms_k_cuda_nll_reduce(const ms_k_exec *ex, ms_k_dtype dt, int64_t n, const void *nll,
                                    const void *wt, const void *smooth, double s, int64_t C, int mean,
                                    void *out, double *sw) {
  cudaStream_t st = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    nll_reduce_kernel<double><<<1, kThreads, 0, st>>>(n, (const double *)nll, (const double *)wt,
                                                      (const double *)smooth, s, C, mean, (double *)out, sw);
  else
    nll_reduce_kernel<float><<<1, kThreads, 0, st>>>(n, (const float *)nll, (const float *)wt,
                                                     (const float *)smooth, s, C, mean, (float *)out, sw);
  return launch_status();
}

template <typename T>
__global__ void nll_backward_kernel(ms_k_nll_args a, const T *logp, const T *g, int64_t gs, double s0,
                                    double s1, double s2, T *gx) {
  const T *w = (const T *)a.weight;
  int64_t positions = a.N * a.inner;
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < positions; p += (int64_t)gridDim.x * blockDim.x) {
    int64_t n = p / a.inner, i = p % a.inner, t = a.target[p], s = a.inner;
    T *row = gx + n * a.C * s + i;
    for (int64_t c = 0; c < a.C; c++) row[c * s] = 0;
    if (t == a.ignore_index) continue;
    int64_t k = t - a.base;
    if (k < 0 || k >= a.C) { /* the forward reported it; never write outside the row */
      for (int64_t c = 0; c < a.C; c++) row[c * s] = (T)NAN;
      continue;
    }
    T gp = g[p * gs], av = gp * (T)s0 * (T)(1 - s2), bv = gp * (T)s1 * (T)(s2 / (double)a.C);
    row[k * s] = -av * (w ? w[k] : (T)1);
    if (!logp) continue;
    double sum = 0;
    for (int64_t c = 0; c < a.C; c++) sum += (row[c * s] -= bv * (w ? w[c] : (T)1));
    const T *lp = logp + n * a.C * s + i;
    for (int64_t c = 0; c < a.C; c++) row[c * s] -= dexp(lp[c * s]) * (T)sum;
  }
}

extern "C" int ms_k_cuda_nll_rows(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_nll_args *a,
                                  const void *logp, void *nll, void *wt, void *smooth) {
  int64_t n = a->N * a->inner;
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    nll_rows_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(*a, (const double *)logp, (double *)nll,
                                                               (double *)wt, (double *)smooth, ex->bad);
  else
    nll_rows_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(*a, (const float *)logp, (float *)nll,
                                                              (float *)wt, (float *)smooth, ex->bad);
  return launch_status();
}

extern "C" int ms_k_cuda_nll_backward(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_nll_args *a,
                                      const void *logp, const void *g, int64_t gs, double nll_scale,
                                      double smooth_scale, double smoothing, void *gx) {
  int64_t n = a->N * a->inner;
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    nll_backward_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(*a, (const double *)logp, (const double *)g, gs,
                                                                   nll_scale, smooth_scale, smoothing, (double *)gx);
  else
    nll_backward_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(*a, (const float *)logp, (const float *)g, gs,
                                                                  nll_scale, smooth_scale, smoothing, (float *)gx);
  return launch_status();
}

// 16-bit: y[i] + b[c] in float32, rounded once (cuDNN has already rounded y once).
template <typename S>
__global__ void channel_bias_add_kernel(int64_t total, int64_t c, int64_t hw, S *y, const S *b) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = st<S>(ld(y[i]) + ld(b[(i / hw) % c]));
}

extern "C" int ms_kc_channel_bias_add(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, void *y, const void *b,
                                      void *stream) {
  int64_t total = n * c * hw;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  MSKC_FLOAT_SWITCH(dt, S,
                    channel_bias_add_kernel<S><<<blocks_for(total), kThreads, 0, s>>>(total, c, hw, (S *)y,
                                                                                      (const S *)b));
  return launch_status();
}

// One block a channel: its threads stride over the channel's n * hw elements, then a tree sum in
// shared memory (double for every dtype: a 16-bit gradient is rounded once, at the end).
template <typename S>
__global__ void channel_sum_kernel(int64_t n, int64_t c, int64_t hw, const S *g, S *gb) {
  __shared__ double part[kThreads];
  int64_t ch = blockIdx.x, count = n * hw;
  double acc = 0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) acc += (double)ld(g[(k / hw) * c * hw + ch * hw + k % hw]);
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) gb[ch] = st<S>((acc_t<S>)part[0]);
}

extern "C" int ms_kc_channel_sum(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, const void *g, void *gb,
                                 void *stream) {
  if (c == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  unsigned blocks = (unsigned)c; /* channels: far below the grid limit for any conv */
  MSKC_FLOAT_SWITCH(dt, S,
                    channel_sum_kernel<S><<<blocks, kThreads, 0, s>>>(n, c, hw, (const S *)g, (S *)gb));
  return launch_status();
}
