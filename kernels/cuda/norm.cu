// norm.cu: layer_norm and batch_norm forward and backward with the formulas of
// kernels/cpu/nn_ops_body.h: one block per row (layer norm) or channel (batch norm) sums in
// double through shared memory, then writes its elements in the element type as the CPU does.
#include "common.cuh"

using namespace mskc;

// Grid of one block per item (rows or channels), capped as blocks_for caps element grids.
inline unsigned grid_for(int64_t items) { return (unsigned)(items < 65535 * 8 ? (items > 0 ? items : 1) : 65535 * 8); }

// ---- layer norm: rows of M x N ----

template <typename T>
__global__ void layer_norm_kernel(int64_t M, int64_t N, const T *x, const T *w, const T *b, double eps, T *y, T *mean,
                                  T *rstd) {
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const T *xr = x + r * N;
    double s = 0, ss = 0;
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) s += xr[c];
    double mu = block_sum(s) / (double)N;
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) ss += ((double)xr[c] - mu) * ((double)xr[c] - mu);
    ss = block_sum(ss);
    T m = (T)mu, rs = (T)(1.0 / sqrt(ss / (double)N + eps));
    if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) {
      T v = (xr[c] - m) * rs;
      y[r * N + c] = (w ? v * w[c] : v) + (b ? b[c] : (T)0);
    }
  }
}

template <typename T>
__global__ void layer_norm_backward_kernel(int64_t M, int64_t N, const T *x, const T *g, const T *mean, const T *rstd,
                                           const T *w, T *gx) {
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const T *xr = x + r * N, *gr = g + r * N;
    double s1 = 0, s2 = 0;
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) {
      T gh = w ? gr[c] * w[c] : gr[c];
      s1 += gh, s2 += (double)gh * (xr[c] - mean[r]) * rstd[r];
    }
    s1 = block_sum(s1);
    s2 = block_sum(s2);
    T m1 = (T)(s1 / (double)N), m2 = (T)(s2 / (double)N);
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) {
      T gh = w ? gr[c] * w[c] : gr[c], xh = (xr[c] - mean[r]) * rstd[r];
      gx[r * N + c] = rstd[r] * (gh - m1 - xh * m2);
    }
  }
}

// One thread per column, rows in order: neighbouring threads read neighbouring columns.
template <typename T>
__global__ void layer_norm_param_kernel(int64_t M, int64_t N, const T *x, const T *g, const T *mean, const T *rstd,
                                        T *gw, T *gb) {
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < N; c += (int64_t)gridDim.x * blockDim.x) {
    double sw = 0, sb = 0;
    for (int64_t r = 0; r < M; r++) {
      T gv = g[r * N + c];
      sw += (double)gv * (x[r * N + c] - mean[r]) * rstd[r], sb += gv;
    }
    if (gw) gw[c] = (T)sw;
    if (gb) gb[c] = (T)sb;
  }
}

extern "C" int ms_k_cuda_layer_norm(const ms_k_exec *ex, ms_k_dtype dt, int64_t M, int64_t N, const void *x,
                                    const void *w, const void *b, double eps, void *y, void *mean,
                                    void *rstd) {
  if (M == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    layer_norm_kernel<double><<<grid_for(M), kThreads, 0, s>>>(M, N, (const double *)x, (const double *)w,
                                                               (const double *)b, eps, (double *)y, (double *)mean, (double *)rstd);
  else
    layer_norm_kernel<float><<<grid_for(M), kThreads, 0, s>>>(M, N, (const float *)x, (const float *)w,
                                                              (const float *)b, eps, (float *)y, (float *)mean, (float *)rstd);
  return launch_status();
}

extern "C" int ms_k_cuda_layer_norm_backward(const ms_k_exec *ex, ms_k_dtype dt, int64_t M, int64_t N,
                                             const void *x, const void *g, const void *mean, const void *rstd,
                                             const void *w, void *gx, void *gw, void *gb) {
  cudaStream_t s = (cudaStream_t)ex->stream;
  bool f64 = dt == MS_K_F64;
  if (gx && M > 0) {
    if (f64)
      layer_norm_backward_kernel<double><<<grid_for(M), kThreads, 0, s>>>(M, N, (const double *)x, (const double *)g,
                                                                          (const double *)mean, (const double *)rstd,
                                                                          (const double *)w, (double *)gx);
    else
      layer_norm_backward_kernel<float><<<grid_for(M), kThreads, 0, s>>>(M, N, (const float *)x, (const float *)g,
                                                                         (const float *)mean, (const float *)rstd,
                                                                         (const float *)w, (float *)gx);
    int err = launch_status();
    if (err) return err;
  }
  if ((gw || gb) && N > 0) {
    if (f64)
      layer_norm_param_kernel<double><<<blocks_for(N), kThreads, 0, s>>>(M, N, (const double *)x, (const double *)g,
                                                                         (const double *)mean, (const double *)rstd,
                                                                         (double *)gw, (double *)gb);
    else
      layer_norm_param_kernel<float><<<blocks_for(N), kThreads, 0, s>>>(M, N, (const float *)x, (const float *)g,
                                                                        (const float *)mean, (const float *)rstd,
                                                                        (float *)gw, (float *)gb);
  }
  return launch_status();
}

// ---- batch norm: channel c of (N, C, inner) holds x[(n * C + c) * inner + i] ----

// Element k of channel c's count = N * inner elements, as an offset into x.
__device__ inline int64_t channel_at(int64_t C, int64_t inner, int64_t c, int64_t k) {
  return ((k / inner) * C + c) * inner + k % inner;
}

template <typename T>
__global__ void batch_norm_stats_kernel(int64_t N, int64_t C, int64_t inner, const T *x, T *mean, T *var) {
  int64_t count = N * inner;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double s = 0, ss = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) s += x[channel_at(C, inner, c, k)];
    double mu = block_sum(s) / (double)count;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      double d = (double)x[channel_at(C, inner, c, k)] - mu;
      ss += d * d;
    }
    ss = block_sum(ss);
    if (threadIdx.x == 0) mean[c] = (T)mu, var[c] = (T)(ss / (double)count);
  }
}

template <typename T>
__global__ void batch_norm_apply_kernel(int64_t total, int64_t C, int64_t inner, const T *x, const T *mean,
                                        const T *invstd, const T *w, const T *b, T *y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = (i / inner) % C;
    T scale = w ? w[c] * invstd[c] : invstd[c];
    T shift = (b ? b[c] : (T)0) - mean[c] * scale;
    y[i] = x[i] * scale + shift;
  }
}

// Training: gx = w invstd (g - mean(g) - xhat mean(g xhat)); evaluation: gx = g w invstd.
template <typename T>
__global__ void batch_norm_backward_kernel(int64_t N, int64_t C, int64_t inner, const T *x, const T *g, const T *mean,
                                           const T *invstd, const T *w, int training, T *gx, T *gw, T *gb) {
  int64_t count = N * inner;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double a = 0, ax = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      int64_t at = channel_at(C, inner, c, k);
      a += g[at];
      ax += (double)g[at] * (x[at] - mean[c]);
    }
    double sg = block_sum(a), sgx = block_sum(ax) * invstd[c];
    if (threadIdx.x == 0) {
      if (gw) gw[c] = (T)sgx;
      if (gb) gb[c] = (T)sg;
    }
    if (!gx) continue;
    T k = w ? w[c] * invstd[c] : invstd[c], is = invstd[c], mu = mean[c];
    T mg = training ? (T)(sg / (double)count) : (T)0, mgx = training ? (T)(sgx / (double)count) : (T)0;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
      int64_t at = channel_at(C, inner, c, e);
      gx[at] = k * (g[at] - mg - (x[at] - mu) * is * mgx);
    }
  }
}

extern "C" int ms_k_cuda_batch_norm_stats(const ms_k_exec *ex, ms_k_dtype dt, int64_t N, int64_t C,
                                          int64_t inner, const void *x, void *mean, void *var) {
  if (C == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    batch_norm_stats_kernel<double><<<grid_for(C), kThreads, 0, s>>>(N, C, inner, (const double *)x, (double *)mean, (double *)var);
  else
    batch_norm_stats_kernel<float><<<grid_for(C), kThreads, 0, s>>>(N, C, inner, (const float *)x, (float *)mean, (float *)var);
  return launch_status();
}

extern "C" int ms_k_cuda_batch_norm_apply(const ms_k_exec *ex, ms_k_dtype dt, int64_t N, int64_t C,
                                          int64_t inner, const void *x, const void *mean, const void *invstd,
                                          const void *w, const void *b, void *y) {
  int64_t total = N * C * inner;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    batch_norm_apply_kernel<double><<<blocks_for(total), kThreads, 0, s>>>(total, C, inner, (const double *)x,
                                                                           (const double *)mean, (const double *)invstd,
                                                                           (const double *)w, (const double *)b, (double *)y);
  else
    batch_norm_apply_kernel<float><<<blocks_for(total), kThreads, 0, s>>>(total, C, inner, (const float *)x,
                                                                          (const float *)mean, (const float *)invstd,
                                                                          (const float *)w, (const float *)b, (float *)y);
  return launch_status();
}

extern "C" int ms_k_cuda_batch_norm_backward(const ms_k_exec *ex, ms_k_dtype dt, int64_t N, int64_t C,
                                             int64_t inner, const void *x, const void *g, const void *mean,
                                             const void *invstd, const void *w, int training, void *gx,
                                             void *gw, void *gb) {
  if (C == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    batch_norm_backward_kernel<double><<<grid_for(C), kThreads, 0, s>>>(N, C, inner, (const double *)x, (const double *)g,
                                                                        (const double *)mean, (const double *)invstd,
                                                                        (const double *)w, training, (double *)gx,
                                                                        (double *)gw, (double *)gb);
  else
    batch_norm_backward_kernel<float><<<grid_for(C), kThreads, 0, s>>>(N, C, inner, (const float *)x, (const float *)g,
                                                                       (const float *)mean, (const float *)invstd,
                                                                       (const float *)w, training, (float *)gx,
                                                                       (float *)gw, (float *)gb);
  return launch_status();
}
