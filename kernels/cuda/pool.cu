// pool.cu: 2-D max pooling forward (one thread per output element, recording the winner as the
// CPU does: padding never wins, a NaN sticks) and backward (gradients scattered to the winners
// with atomics: overlapping windows may share one); average pooling over the engine's explicit
// windows (avg_pool2d and adaptive_avg_pool2d), forward and a gathering backward.
// bfloat16 and float16 (lowp.cuh) compare and sum in float32 and round each stored value once, as
// the CPU's 16-bit max pooling (kernels/cpu/pool.c) and a widened float32 average pool do.
#include "lowp.cuh"

using namespace mskc;

template <typename S>
__global__ void max_pool_forward_kernel(ms_k_pool2d_geom g, int64_t total, const S *x, S *out, int64_t *idx) {
  typedef acc_t<S> A;
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
    int64_t pl = o / (g.oh * g.ow), r = o % (g.oh * g.ow), oh = r / g.ow, ow = r % g.ow;
    const S *plane = x + pl * g.h * g.w;
    int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw, at = -1;
    A best = -INFINITY;
    for (int64_t i = 0; i < g.kh; i++) {
      int64_t ih = h0 + i * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      for (int64_t k = 0; k < g.kw; k++) {
        int64_t iw = w0 + k * g.dw;
        if (iw < 0 || iw >= g.w) continue;
        A v = ld(plane[ih * g.w + iw]);
        if (at < 0 || v > best || v != v) best = v, at = ih * g.w + iw; // NaN sticks, as in PyTorch
      }
    }
    out[o] = st<S>(best); // a 16-bit winner widened and rounded back: its own bits
    idx[o] = at;
  }
}

// gx is float32 for 16-bit gout (summed there, rounded by round_kernel), else gout's type.
template <typename S>
__global__ void max_pool_backward_kernel(ms_k_pool2d_geom g, int64_t total, const S *gout, const int64_t *idx,
                                         acc_t<S> *gx) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
    int64_t at = idx[o];
    if (at < 0) continue;
    int64_t pl = o / (g.oh * g.ow);
    atomicAdd(gx + pl * g.h * g.w + at, ld(gout[o]));
  }
}

template <typename S>
__global__ void round_kernel(int64_t n, const float *in, S *out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = st<S>(in[i]);
}

extern "C" int ms_k_cuda_max_pool2d(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                                    const void *x, void *out, int64_t *indices) {
  int64_t total = g->planes * g->oh * g->ow;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S,
                    max_pool_forward_kernel<S><<<blocks_for(total), kThreads, 0, s>>>(*g, total, (const S *)x,
                                                                                      (S *)out, indices));
  return launch_status();
}

// The scatter of a 16-bit gradient: a float32 buffer of the input's size from the exec's scratch
// memory sums the windows' gradients (one rounding per element afterwards, as the CPU's
// bfloat16 backward, which scatters into a float32 plane); a bfloat16 atomicAdd would round
// after every addition.
template <typename S>
static int max_pool_backward_lowp(const ms_k_exec *ex, const ms_k_pool2d_geom *g, const S *gout,
                                  const int64_t *indices, S *gx) {
  cudaStream_t s = (cudaStream_t)ex->stream;
  int64_t n = g->planes * g->h * g->w, total = g->planes * g->oh * g->ow;
  size_t bytes = (size_t)n * sizeof(float);
  float *acc = (float *)ex->scratch_alloc(ex->device, bytes > 0 ? bytes : 1);
  if (!acc) return MS_K_ERR_NO_MEMORY;
  cudaError_t err = cudaMemsetAsync(acc, 0, bytes, s);
  if (err == cudaSuccess && total > 0)
    max_pool_backward_kernel<S><<<blocks_for(total), kThreads, 0, s>>>(*g, total, gout, indices, acc);
  if (err == cudaSuccess && (err = cudaGetLastError()) == cudaSuccess && n > 0)
    round_kernel<S><<<blocks_for(n), kThreads, 0, s>>>(n, acc, gx);
  if (err == cudaSuccess) err = cudaGetLastError();
  ex->scratch_free(ex->device, acc, bytes > 0 ? bytes : 1); // stream-ordered: reused after these kernels
  return (int)err;
}

extern "C" int ms_k_cuda_max_pool2d_backward(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                                             const void *gout, const int64_t *indices, void *gx) {
  if (dt == MS_K_BF16) return max_pool_backward_lowp(ex, g, (const bf16 *)gout, indices, (bf16 *)gx);
  if (dt == MS_K_F16) return max_pool_backward_lowp(ex, g, (const f16 *)gout, indices, (f16 *)gx);
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

// 16-bit: the double sum divided, rounded to float32 then to 16 bits, as a widened float32
// average pool rounded back gives.
template <typename S>
__global__ void avg_pool_forward_kernel(ms_k_pool2d_geom g, ms_k_pool_windows w, int64_t total, const S *x, S *out) {
  typedef acc_t<S> A;
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
    int64_t pl = o / (g.oh * g.ow), r = o % (g.oh * g.ow), oh = r / g.ow, ow = r % g.ow;
    const S *plane = x + pl * g.h * g.w;
    double sum = 0;
    for (int64_t ih = w.hs[oh]; ih < w.he[oh]; ih++)
      for (int64_t iw = w.ws[ow]; iw < w.we[ow]; iw++) sum += ld(plane[ih * g.w + iw]);
    out[o] = st<S>((A)(sum / (double)(w.hdiv[oh] * w.wdiv[ow])));
  }
}

// One thread per input element gathers the windows covering it, in the CPU's order (output
// rows, then columns) and with its rounding after each addition (in float32 for 16-bit, rounded
// once at the end): no atomics, the CPU's bits.
template <typename S>
__global__ void avg_pool_backward_kernel(ms_k_pool2d_geom g, ms_k_pool_windows w, int64_t total, const S *gout, S *gx) {
  typedef acc_t<S> A;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    int64_t pl = e / (g.h * g.w), r = e % (g.h * g.w), ih = r / g.w, iw = r % g.w;
    const S *go = gout + pl * g.oh * g.ow;
    A acc = 0;
    for (int64_t oh = 0; oh < g.oh; oh++) {
      if (ih < w.hs[oh] || ih >= w.he[oh]) continue;
      for (int64_t ow = 0; ow < g.ow; ow++) {
        if (iw < w.ws[ow] || iw >= w.we[ow]) continue;
        acc = (A)((double)acc + (double)ld(go[oh * g.ow + ow]) / (double)(w.hdiv[oh] * w.wdiv[ow]));
      }
    }
    gx[e] = st<S>(acc);
  }
}

extern "C" int ms_k_cuda_avg_pool2d(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                                    const ms_k_pool_windows *win, const void *x, void *out) {
  int64_t total = g->planes * g->oh * g->ow;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S,
                    avg_pool_forward_kernel<S><<<blocks_for(total), kThreads, 0, s>>>(*g, *win, total, (const S *)x,
                                                                                      (S *)out));
  return launch_status();
}

extern "C" int ms_k_cuda_avg_pool2d_backward(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_pool2d_geom *g,
                                             const ms_k_pool_windows *win, const void *gout, void *gx) {
  int64_t total = g->planes * g->h * g->w;
  if (total == 0) return 0;
  cudaStream_t s = (cudaStream_t)ex->stream;
  MSKC_FLOAT_SWITCH(dt, S,
                    avg_pool_backward_kernel<S><<<blocks_for(total), kThreads, 0, s>>>(*g, *win, total,
                                                                                       (const S *)gout, (S *)gx));
  return launch_status();
}
