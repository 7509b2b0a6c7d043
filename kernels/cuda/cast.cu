// cast.cu: strided conversion between element types and fills, on the device, with the CPU's
// conversion rules (kernels/cpu/cast.c) so a tensor converted on either device has the same bits.
#include "common.cuh"

using namespace mskc;

__global__ void cast_kernel(ms_k_geom g, int64_t n, char *dst, ms_k_dtype dt, const char *src,
                            ms_k_dtype st) {
  int ds = elsize(dt), ss = elsize(st);
  bool ints = !is_floating(dt) && !is_floating(st); // exact for large int64, as on the CPU
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    offsets<2>(g, i, off);
    char *d = dst + off[0] * ds;
    const char *s = src + off[1] * ss;
    if (ints) store_i(d, dt, load_i(s, st));
    else store_f(d, dt, load_f(s, st));
  }
}

// Same dtype: a plain element copy of 1, 2, 4 or 8 bytes.
template <typename T>
__global__ void copy_kernel(ms_k_geom g, int64_t n, T *dst, const T *src) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    offsets<2>(g, i, off);
    dst[off[0]] = src[off[1]];
  }
}

template <typename T>
__global__ void fill_kernel(ms_k_geom g, int64_t n, T *dst, T value) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[1];
    offsets<1>(g, i, off);
    dst[off[0]] = value;
  }
}

static int64_t numel(const ms_k_geom *g) {
  int64_t n = 1;
  for (int d = 0; d < g->ndim; d++) n *= g->shape[d];
  return n;
}

extern "C" int ms_k_cuda_cast(const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dt, ms_k_dtype st) {
  void *dst = g->data[0];
  const void *src = g->data[1];
  int64_t n = numel(g);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  unsigned nb = blocks_for(n);
  if (dt == st) {
    switch (elsize(dt)) {
    case 8: copy_kernel<<<nb, kThreads, 0, s>>>(*g, n, (uint64_t *)dst, (const uint64_t *)src); break;
    case 4: copy_kernel<<<nb, kThreads, 0, s>>>(*g, n, (uint32_t *)dst, (const uint32_t *)src); break;
    case 2: copy_kernel<<<nb, kThreads, 0, s>>>(*g, n, (uint16_t *)dst, (const uint16_t *)src); break;
    default: copy_kernel<<<nb, kThreads, 0, s>>>(*g, n, (uint8_t *)dst, (const uint8_t *)src); break;
    }
  } else {
    cast_kernel<<<nb, kThreads, 0, s>>>(*g, n, (char *)dst, dt, (const char *)src, st);
  }
  return launch_status();
}

extern "C" int ms_k_cuda_fill(const ms_k_exec *x, const ms_k_geom *g, const void *value) {
  void *dst = g->data[0];
  size_t es = g->elsize[0];
  int64_t n = numel(g);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  unsigned nb = blocks_for(n);
  switch (es) {
  case 8: fill_kernel<<<nb, kThreads, 0, s>>>(*g, n, (uint64_t *)dst, *(const uint64_t *)value); break;
  case 4: fill_kernel<<<nb, kThreads, 0, s>>>(*g, n, (uint32_t *)dst, *(const uint32_t *)value); break;
  case 2: fill_kernel<<<nb, kThreads, 0, s>>>(*g, n, (uint16_t *)dst, *(const uint16_t *)value); break;
  default: fill_kernel<<<nb, kThreads, 0, s>>>(*g, n, (uint8_t *)dst, *(const uint8_t *)value); break;
  }
  return launch_status();
}
