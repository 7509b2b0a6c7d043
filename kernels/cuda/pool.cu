// pool.cu: 2-D max pooling forward (one thread per output element, recording the winner as the
// CPU does: padding never wins, a NaN sticks) and backward (gradients scattered to the winners
// with atomics: overlapping windows may share one); average pooling over the engine's explicit
// windows (avg_pool2d and adaptive_avg_pool2d), forward and a gathering backward.
#include "common.cuh"

using namespace mskc;

template <typename T>
__global__ void max_pool_forward_kernel(ms_k_pool2d_geom g, int64_t total, const T *x, T *out, int64_t *idx) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
    int64_t pl = o / (g.oh * g.ow), r = o % (g.oh * g.ow), oh = r / g.ow, ow = r % g.ow;
    const T *plane = x + pl * g.h * g.w;
    int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw, at = -1;
    T best = -INFINITY;
    for (int64_t i = 0; i < g.kh; i++) {
      int64_t ih = h0 + i * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      for (int64_t k = 0; k < g.kw; k++) {
        int64_t iw = w0 + k * g.dw;
        if (iw < 0 || iw >= g.w) continue;
        T v = plane[ih * g.w + iw];
        if (at < 0 || v > best || v != v) best = v, at = ih * g.w + iw; // NaN sticks, as in PyTorch
      }
    }
    out[o] = best;
    idx[o] = at;
  }
}

template <typename T>
__global__ void max_pool_backward_kernel(ms_k_pool2d_geom g, int64_t total, const T *gout, const int64_t *idx, T *gx) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
    int64_t at = idx[o];
    if (at < 0) continue;
    int64_t pl = o / (g.oh * g.ow);
    atomicAdd(gx + pl * g.h * g.w + at, gout[o]);
  }
}

extern "C" int ms_k_cuda_max_pool2d(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                                    const void *x, void *out, int64_t *indices) {
  int64_t total = g->planes * g->oh * g->ow;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    max_pool_forward_kernel<double><<<blocks_for(total), kThreads, 0, s>>>(*g, total, (const double *)x, (double *)out, indices);
  else
    max_pool_forward_kernel<float><<<blocks_for(total), kThreads, 0, s>>>(*g, total, (const float *)x, (float *)out, indices);
  return launch_status();
}

extern "C" int ms_k_cuda_max_pool2d_backward(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                                             const void *gout, const int64_t *indices, void *gx) {
  cudaStream_t s = (cudaStream_t)ex->stream;
  size_t es = dt == MS_K_F64 ? 8 : 4;
  cudaError_t err = cudaMemsetAsync(gx, 0, (size_t)(g->planes * g->h * g->w) * es, s);
  if (err != cudaSuccess) return (int)err;
  int64_t total = g->planes * g->oh * g->ow;
  if (total == 0) return 0;
  if (dt == MS_K_F64)
    max_pool_backward_kernel<double><<<blocks_for(total), kThreads, 0, s>>>(*g, total, (const double *)gout, indices, (double *)gx);
  else
    max_pool_backward_kernel<float><<<blocks_for(total), kThreads, 0, s>>>(*g, total, (const float *)gout, indices, (float *)gx);
  return launch_status();
}

// ---- average pooling over explicit windows (ms_k_pool_windows, device pointers) ----

template <typename T>
__global__ void avg_pool_forward_kernel(ms_k_pool2d_geom g, ms_k_pool_windows w, int64_t total, const T *x, T *out) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
    int64_t pl = o / (g.oh * g.ow), r = o % (g.oh * g.ow), oh = r / g.ow, ow = r % g.ow;
    const T *plane = x + pl * g.h * g.w;
    double sum = 0;
    for (int64_t ih = w.hs[oh]; ih < w.he[oh]; ih++)
      for (int64_t iw = w.ws[ow]; iw < w.we[ow]; iw++) sum += plane[ih * g.w + iw];
    out[o] = (T)(sum / (double)(w.hdiv[oh] * w.wdiv[ow]));
  }
}

// One thread per input element gathers the windows covering it, in the CPU's order (output
// rows, then columns) and with its rounding after each addition: no atomics, the CPU's bits.
template <typename T>
__global__ void avg_pool_backward_kernel(ms_k_pool2d_geom g, ms_k_pool_windows w, int64_t total, const T *gout, T *gx) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    int64_t pl = e / (g.h * g.w), r = e % (g.h * g.w), ih = r / g.w, iw = r % g.w;
    const T *go = gout + pl * g.oh * g.ow;
    T acc = 0;
    for (int64_t oh = 0; oh < g.oh; oh++) {
      if (ih < w.hs[oh] || ih >= w.he[oh]) continue;
      for (int64_t ow = 0; ow < g.ow; ow++) {
        if (iw < w.ws[ow] || iw >= w.we[ow]) continue;
        acc = (T)((double)acc + (double)go[oh * g.ow + ow] / (double)(w.hdiv[oh] * w.wdiv[ow]));
      }
    }
    gx[e] = acc;
  }
}

extern "C" int ms_k_cuda_avg_pool2d(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                                    const ms_k_pool_windows *win, const void *x, void *out) {
  int64_t total = g->planes * g->oh * g->ow;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    avg_pool_forward_kernel<double><<<blocks_for(total), kThreads, 0, s>>>(*g, *win, total, (const double *)x, (double *)out);
  else
    avg_pool_forward_kernel<float><<<blocks_for(total), kThreads, 0, s>>>(*g, *win, total, (const float *)x, (float *)out);
  return launch_status();
}

extern "C" int ms_k_cuda_avg_pool2d_backward(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                                             const ms_k_pool_windows *win, const void *gout, void *gx) {
  int64_t total = g->planes * g->h * g->w;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (dt == MS_K_F64)
    avg_pool_backward_kernel<double><<<blocks_for(total), kThreads, 0, s>>>(*g, *win, total, (const double *)gout, (double *)gx);
  else
    avg_pool_backward_kernel<float><<<blocks_for(total), kThreads, 0, s>>>(*g, *win, total, (const float *)gout, (float *)gx);
  return launch_status();
}
