// nn_ops.cu: softmax and log_softmax (forward and backward) and a convolution's channel bias, with
// the formulas of kernels/cpu/nn_ops_body.h (dropout's kernels: dropout.cu; the negative log
// likelihood's: loss.cu). One thread per row or position: the rows of the
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
