// nn_ops.cu: softmax and log_softmax (forward and backward) and a convolution's channel bias, with
// the formulas of kernels/cpu/nn_ops_body.h (dropout's kernels: dropout.cu; the negative log
// likelihood's: loss.cu). One thread per row or position: the rows of the
// models this serves are short (classes), so a row never needs a block of its own.
#include "common.cuh"

using namespace mskc;

__device__ inline float dexp(float v) { return expf(v); }
__device__ inline double dexp(double v) { return exp(v); }
__device__ inline float dlog(float v) { return logf(v); }
__device__ inline double dlog(double v) { return log(v); }

template <typename T>
__global__ void softmax_kernel(int64_t rows, int64_t C, int64_t inner, const T *x, T *y, int is_log) {
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = (r / inner) * C * inner + r % inner, s = inner;
    const T *xr = x + base;
    T *yr = y + base;
    T m = -INFINITY;
    for (int64_t c = 0; c < C; c++) m = (xr[c * s] > m || xr[c * s] != xr[c * s]) ? xr[c * s] : m;
    double sum = 0;
    if (is_log) {
      for (int64_t c = 0; c < C; c++) sum += dexp(xr[c * s] - m);
      T lse = m + dlog((T)sum);
      for (int64_t c = 0; c < C; c++) yr[c * s] = xr[c * s] - lse;
    } else {
      for (int64_t c = 0; c < C; c++) sum += (yr[c * s] = dexp(xr[c * s] - m));
      T inv = (T)(1.0 / sum);
      for (int64_t c = 0; c < C; c++) yr[c * s] *= inv;
    }
  }
}

template <typename T>
__global__ void softmax_backward_kernel(int64_t rows, int64_t C, int64_t inner, const T *y, const T *g,
                                        T *gx, int is_log) {
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = (r / inner) * C * inner + r % inner, s = inner;
    const T *yr = y + base, *gr = g + base;
    T *o = gx + base;
    double sum = 0;
    if (is_log) {
      for (int64_t c = 0; c < C; c++) sum += gr[c * s];
      for (int64_t c = 0; c < C; c++) o[c * s] = gr[c * s] - dexp(yr[c * s]) * (T)sum;
    } else {
      for (int64_t c = 0; c < C; c++) sum += gr[c * s] * yr[c * s];
      for (int64_t c = 0; c < C; c++) o[c * s] = yr[c * s] * (gr[c * s] - (T)sum);
    }
  }
}

extern "C" int ms_k_cuda_softmax(const ms_k_exec *ex, ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner,
                                 const void *x, void *y, int log) {
  int64_t rows = outer * inner;
  if (rows == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64) softmax_kernel<double><<<blocks_for(rows), kThreads, 0, s>>>(rows, C, inner, (const double *)x, (double *)y, log);
  else softmax_kernel<float><<<blocks_for(rows), kThreads, 0, s>>>(rows, C, inner, (const float *)x, (float *)y, log);
  return launch_status();
}

extern "C" int ms_k_cuda_softmax_backward(const ms_k_exec *ex, ms_k_dtype dt, int64_t outer, int64_t C,
                                          int64_t inner, const void *y, const void *g, void *gx, int log) {
  int64_t rows = outer * inner;
  if (rows == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    softmax_backward_kernel<double><<<blocks_for(rows), kThreads, 0, s>>>(rows, C, inner, (const double *)y, (const double *)g, (double *)gx, log);
  else
    softmax_backward_kernel<float><<<blocks_for(rows), kThreads, 0, s>>>(rows, C, inner, (const float *)y, (const float *)g, (float *)gx, log);
  return launch_status();
}

template <typename T>
__global__ void channel_bias_add_kernel(int64_t total, int64_t c, int64_t hw, T *y, const T *b) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
    y[i] += b[(i / hw) % c];
}

extern "C" int ms_kc_channel_bias_add(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, void *y, const void *b,
                                      void *stream) {
  int64_t total = n * c * hw;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  if (dt == MS_K_F64) channel_bias_add_kernel<double><<<blocks_for(total), kThreads, 0, s>>>(total, c, hw, (double *)y, (const double *)b);
  else channel_bias_add_kernel<float><<<blocks_for(total), kThreads, 0, s>>>(total, c, hw, (float *)y, (const float *)b);
  return launch_status();
}

// One block a channel: its threads stride over the channel's n * hw elements, then a tree sum in
// shared memory.
template <typename T>
__global__ void channel_sum_kernel(int64_t n, int64_t c, int64_t hw, const T *g, T *gb) {
  __shared__ double part[kThreads];
  int64_t ch = blockIdx.x, count = n * hw;
  double acc = 0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) acc += (double)g[(k / hw) * c * hw + ch * hw + k % hw];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) gb[ch] = (T)part[0];
}

extern "C" int ms_kc_channel_sum(ms_k_dtype dt, int64_t n, int64_t c, int64_t hw, const void *g, void *gb,
                                 void *stream) {
  if (c == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  unsigned blocks = (unsigned)c; /* channels: far below the grid limit for any conv */
  if (dt == MS_K_F64) channel_sum_kernel<double><<<blocks, kThreads, 0, s>>>(n, c, hw, (const double *)g, (double *)gb);
  else channel_sum_kernel<float><<<blocks, kThreads, 0, s>>>(n, c, hw, (const float *)g, (float *)gb);
  return launch_status();
}
