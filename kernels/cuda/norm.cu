// norm.cu: layer_norm and batch_norm forward and backward with the formulas of
// kernels/cpu/nn_ops_body.h: one block per row (layer norm) or channel (batch norm) sums in
// double through shared memory, then writes its elements in the element type as the CPU does.
// A 16-bit x (lowp.cuh: storage S, arithmetic in A = float32) comes with float32 parameters,
// statistics and parameter gradients, as kernels/cpu/nn_ops_half.h takes them; each stored
// 16-bit value is rounded once. For float and double, A is S and nothing changes.
#include "lowp.cuh"

using namespace mskc;

// Grid of one block per item (rows or channels), capped as blocks_for caps element grids.
inline unsigned grid_for(int64_t items) { return (unsigned)(items < 65535 * 8 ? (items > 0 ? items : 1) : 65535 * 8); }

// ---- layer norm: rows of M x N ----

template <typename S>
__global__ void layer_norm_kernel(int64_t M, int64_t N, const S *x, const acc_t<S> *w, const acc_t<S> *b, double eps,
                                  S *y, acc_t<S> *mean, acc_t<S> *rstd) {
  typedef acc_t<S> A;
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const S *xr = x + r * N;
    double s = 0, ss = 0;
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) s += ld(xr[c]);
    double mu = block_sum(s) / (double)N;
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) ss += ((double)ld(xr[c]) - mu) * ((double)ld(xr[c]) - mu);
    ss = block_sum(ss);
    A m = (A)mu, rs = (A)(1.0 / sqrt(ss / (double)N + eps));
    if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) {
      A v = (ld(xr[c]) - m) * rs;
      y[r * N + c] = st<S>((w ? v * w[c] : v) + (b ? b[c] : (A)0));
    }
  }
}

template <typename S>
__global__ void layer_norm_backward_kernel(int64_t M, int64_t N, const S *x, const S *g, const acc_t<S> *mean,
                                           const acc_t<S> *rstd, const acc_t<S> *w, S *gx) {
  typedef acc_t<S> A;
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const S *xr = x + r * N, *gr = g + r * N;
    double s1 = 0, s2 = 0;
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) {
      A gh = w ? ld(gr[c]) * w[c] : ld(gr[c]);
      s1 += gh, s2 += (double)gh * (ld(xr[c]) - mean[r]) * rstd[r];
    }
    s1 = block_sum(s1);
    s2 = block_sum(s2);
    A m1 = (A)(s1 / (double)N), m2 = (A)(s2 / (double)N);
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x) {
      A gh = w ? ld(gr[c]) * w[c] : ld(gr[c]), xh = (ld(xr[c]) - mean[r]) * rstd[r];
      gx[r * N + c] = st<S>(rstd[r] * (gh - m1 - xh * m2));
    }
  }
}

// One thread per column, rows in order: neighbouring threads read neighbouring columns.
template <typename S>
__global__ void layer_norm_param_kernel(int64_t M, int64_t N, const S *x, const S *g, const acc_t<S> *mean,
                                        const acc_t<S> *rstd, acc_t<S> *gw, acc_t<S> *gb) {
  typedef acc_t<S> A;
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < N; c += (int64_t)gridDim.x * blockDim.x) {
    double sw = 0, sb = 0;
    for (int64_t r = 0; r < M; r++) {
      A gv = ld(g[r * N + c]);
      sw += (double)gv * (ld(x[r * N + c]) - mean[r]) * rstd[r], sb += gv;
    }
    if (gw) gw[c] = (A)sw;
    if (gb) gb[c] = (A)sb;
  }
}

extern "C" int ms_k_cuda_layer_norm(const ms_k_exec *ex, ms_k_dtype dt, int64_t M, int64_t N, const void *x,
                                    const void *w, const void *b, double eps, void *y, void *mean,
                                    void *rstd) {
  if (M == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S, typedef acc_t<S> A;
                    layer_norm_kernel<S><<<grid_for(M), kThreads, 0, s>>>(M, N, (const S *)x, (const A *)w,
                                                                          (const A *)b, eps, (S *)y, (A *)mean,
                                                                          (A *)rstd));
  return launch_status();
}

extern "C" int ms_k_cuda_layer_norm_backward(const ms_k_exec *ex, ms_k_dtype dt, int64_t M, int64_t N,
                                             const void *x, const void *g, const void *mean, const void *rstd,
                                             const void *w, void *gx, void *gw, void *gb) {
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (gx && M > 0) {
    MSKC_FLOAT_SWITCH(dt, S, typedef acc_t<S> A;
                      layer_norm_backward_kernel<S><<<grid_for(M), kThreads, 0, s>>>(M, N, (const S *)x, (const S *)g,
                                                                                     (const A *)mean, (const A *)rstd,
                                                                                     (const A *)w, (S *)gx));
    int err = launch_status();
    if (err) return err;
  }
  if ((gw || gb) && N > 0) {
    MSKC_FLOAT_SWITCH(dt, S, typedef acc_t<S> A;
                      layer_norm_param_kernel<S><<<blocks_for(N), kThreads, 0, s>>>(M, N, (const S *)x, (const S *)g,
                                                                                    (const A *)mean, (const A *)rstd,
                                                                                    (A *)gw, (A *)gb));
  }
  return launch_status();
}

// ---- batch norm: channel c of (N, C, inner) holds x[(n * C + c) * inner + i] ----

// Element k of channel c's count = N * inner elements, as an offset into x.
__device__ inline int64_t channel_at(int64_t C, int64_t inner, int64_t c, int64_t k) {
  return ((k / inner) * C + c) * inner + k % inner;
}

template <typename S>
__global__ void batch_norm_stats_kernel(int64_t N, int64_t C, int64_t inner, const S *x, acc_t<S> *mean,
                                        acc_t<S> *var) {
  typedef acc_t<S> A;
  int64_t count = N * inner;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double s = 0, ss = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) s += ld(x[channel_at(C, inner, c, k)]);
    double mu = block_sum(s) / (double)count;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      double d = (double)ld(x[channel_at(C, inner, c, k)]) - mu;
      ss += d * d;
    }
    ss = block_sum(ss);
    if (threadIdx.x == 0) mean[c] = (A)mu, var[c] = (A)(ss / (double)count);
  }
}

template <typename S>
__global__ void batch_norm_apply_kernel(int64_t total, int64_t C, int64_t inner, const S *x, const acc_t<S> *mean,
                                        const acc_t<S> *invstd, const acc_t<S> *w, const acc_t<S> *b, S *y) {
  typedef acc_t<S> A;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = (i / inner) % C;
    A scale = w ? w[c] * invstd[c] : invstd[c];
    A shift = (b ? b[c] : (A)0) - mean[c] * scale;
    y[i] = st<S>(ld(x[i]) * scale + shift);
  }
}

// Training: gx = w invstd (g - mean(g) - xhat mean(g xhat)); evaluation: gx = g w invstd.
template <typename S>
__global__ void batch_norm_backward_kernel(int64_t N, int64_t C, int64_t inner, const S *x, const S *g,
                                           const acc_t<S> *mean, const acc_t<S> *invstd, const acc_t<S> *w,
                                           int training, S *gx, acc_t<S> *gw, acc_t<S> *gb) {
  typedef acc_t<S> A;
  int64_t count = N * inner;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double a = 0, ax = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      int64_t at = channel_at(C, inner, c, k);
      a += ld(g[at]);
      ax += (double)ld(g[at]) * (ld(x[at]) - mean[c]);
    }
    double sg = block_sum(a), sgx = block_sum(ax) * invstd[c];
    if (threadIdx.x == 0) {
      if (gw) gw[c] = (A)sgx;
      if (gb) gb[c] = (A)sg;
    }
    if (!gx) continue;
    A k = w ? w[c] * invstd[c] : invstd[c], is = invstd[c], mu = mean[c];
    A mg = training ? (A)(sg / (double)count) : (A)0, mgx = training ? (A)(sgx / (double)count) : (A)0;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
      int64_t at = channel_at(C, inner, c, e);
      gx[at] = st<S>(k * (ld(g[at]) - mg - (ld(x[at]) - mu) * is * mgx));
    }
  }
}

extern "C" int ms_k_cuda_batch_norm_stats(const ms_k_exec *ex, ms_k_dtype dt, int64_t N, int64_t C,
                                          int64_t inner, const void *x, void *mean, void *var) {
  if (C == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S, typedef acc_t<S> A;
                    batch_norm_stats_kernel<S><<<grid_for(C), kThreads, 0, s>>>(N, C, inner, (const S *)x, (A *)mean,
                                                                                (A *)var));
  return launch_status();
}

extern "C" int ms_k_cuda_batch_norm_apply(const ms_k_exec *ex, ms_k_dtype dt, int64_t N, int64_t C,
                                          int64_t inner, const void *x, const void *mean, const void *invstd,
                                          const void *w, const void *b, void *y) {
  int64_t total = N * C * inner;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S, typedef acc_t<S> A;
                    batch_norm_apply_kernel<S><<<blocks_for(total), kThreads, 0, s>>>(total, C, inner, (const S *)x,
                                                                                      (const A *)mean,
                                                                                      (const A *)invstd, (const A *)w,
                                                                                      (const A *)b, (S *)y));
  return launch_status();
}

extern "C" int ms_k_cuda_batch_norm_backward(const ms_k_exec *ex, ms_k_dtype dt, int64_t N, int64_t C,
                                             int64_t inner, const void *x, const void *g, const void *mean,
                                             const void *invstd, const void *w, int training, void *gx,
                                             void *gw, void *gb) {
  if (C == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S, typedef acc_t<S> A;
                    batch_norm_backward_kernel<S><<<grid_for(C), kThreads, 0, s>>>(N, C, inner, (const S *)x,
                                                                                   (const S *)g, (const A *)mean,
                                                                                   (const A *)invstd, (const A *)w,
                                                                                   training, (S *)gx, (A *)gw,
                                                                                   (A *)gb));
  return launch_status();
}
