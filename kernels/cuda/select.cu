// select.cu: gather / scatter (index_move), stable sort of rows (sort_rows) and running sums and
// products (scan_rows) with the CPU's rules (kernels/cpu/select.c). Written to be obviously
// right rather than fast: a thread walks one line (scatter) or one row (scan_rows) in order,
// as the CPU does (gather, whose writes never collide, takes a thread per element), so a repeated position keeps its last write and sums add in the CPU's order;
// sort_rows ranks each element against its row (stable by position), n^2 compares per row.
#include "common.cuh"
#include "kernels/cuda/lib_error.h"

using namespace mskc;

// ---- index_move: scatter one thread per line (the elements that differ only along dim) ----

template <typename T> __device__ inline void add_to(char *dst, const char *src) {
  *(T *)dst = (T)(*(T *)dst + *(const T *)src);
}

__global__ void index_move_kernel(ms_k_index_geom g, int64_t lines, int mode, ms_k_dtype dt,
                                  const int64_t *index, char *direct, char *indexed) {
  int es = elsize(dt);
  for (int64_t r0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r0 < lines;
       r0 += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = r0, io = 0, doff = 0, aoff = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
      if (d == g.dim) continue;
      int64_t c = r % g.shape[d];
      r /= g.shape[d];
      io += c * g.istride[d], doff += c * g.dstride[d], aoff += c * g.astride[d];
    }
    for (int64_t j = 0; j < g.shape[g.dim]; j++) {
      int64_t k = index[io + j * g.istride[g.dim]] - g.base;
      char *dp = direct + (doff + j * g.dstride[g.dim]) * es;
      char *ap = indexed + (aoff + k * g.astride[g.dim]) * es;
      if (mode == MS_K_SCATTER) memcpy(ap, dp, es);
      else if (dt == MS_K_F32) add_to<float>(ap, dp);
      else if (dt == MS_K_F64) add_to<double>(ap, dp);
      else *(int64_t *)ap = (int64_t)((uint64_t) * (int64_t *)ap + (uint64_t) * (const int64_t *)dp);
    }
  }
}

// gather: every output element is written once, so one thread per element (a 1-D gather is one
// line, which line-per-thread would run on a single thread).
__global__ void gather_kernel(ms_k_index_geom g, int64_t total, int es, const int64_t *index, char *direct,
                              const char *indexed) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = e, io = 0, doff = 0, aoff = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
      int64_t c = r % g.shape[d];
      r /= g.shape[d];
      io += c * g.istride[d], doff += c * g.dstride[d];
      if (d != g.dim) aoff += c * g.astride[d]; // along dim the index says where
    }
    int64_t k = index[io] - g.base;
    memcpy(direct + doff * es, indexed + (aoff + k * g.astride[g.dim]) * es, es);
  }
}

extern "C" int ms_k_cuda_index_move(const ms_k_exec *x, const ms_k_index_geom *g, int mode, ms_k_dtype dt,
                                    const int64_t *index, void *direct, void *indexed) {
  int64_t lines = 1;
  for (int d = 0; d < g->ndim; d++)
    if (d != g->dim) lines *= g->shape[d];
  if (lines == 0 || g->shape[g->dim] == 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  if (mode == MS_K_GATHER) {
    int64_t total = lines * g->shape[g->dim];
    gather_kernel<<<blocks_for(total), kThreads, 0, s>>>(*g, total, elsize(dt), index, (char *)direct,
                                                         (const char *)indexed);
  } else {
    index_move_kernel<<<blocks_for(lines), kThreads, 0, s>>>(*g, lines, mode, dt, index, (char *)direct,
                                                             (char *)indexed);
  }
  return launch_status();
}

// ---- sort_rows: each element's place is the number of row elements that come before it ----

__device__ inline int64_t row_offset(const ms_k_rows &g, int64_t r) {
  int64_t off = 0;
  for (int d = g.ndim - 1; d >= 0; d--) off += (r % g.shape[d]) * g.strides[d], r /= g.shape[d];
  return off;
}

// a strictly before b: ascending with NaN above every number, or its reverse (the CPU's rule)
template <typename T> __device__ inline bool before(T a, T b, int desc) {
  if (desc) return a != a ? b == b : a > b;
  return b != b ? a == a : a < b;
}

template <typename T>
__global__ void sort_rows_kernel(ms_k_rows g, const T *src, int desc, int64_t k, T *values, int64_t *indices) {
  int64_t total = g.rows * g.n;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = e / g.n, i = e % g.n;
    const T *row = src + row_offset(g, r);
    T v = row[i * g.stride];
    int64_t rank = 0;
    for (int64_t j = 0; j < g.n; j++) {
      T w = row[j * g.stride];
      // w goes first when it is strictly before v, or unordered with v and earlier (stability)
      rank += before(w, v, desc) || (j < i && !before(v, w, desc));
    }
    if (rank < k) values[r * k + rank] = v, indices[r * k + rank] = i;
  }
}

extern "C" int ms_k_cuda_sort_rows(const ms_k_exec *x, const ms_k_rows *g, ms_k_dtype dt, const void *src,
                                   int descending, int64_t k, void *values, int64_t *indices) {
  if (g->rows == 0 || k == 0) return 0;
  if (g->n > MS_K_CUDA_SORT_MAX)
    return ms_kcu_fail("rows of more than %d elements cannot be sorted on CUDA (this row has %lld): "
                       "sort it on the CPU", MS_K_CUDA_SORT_MAX, (long long)g->n);
  cudaStream_t s = (cudaStream_t)x->stream;
  unsigned blocks = blocks_for(g->rows * g->n);
  if (dt == MS_K_F32) sort_rows_kernel<float><<<blocks, kThreads, 0, s>>>(*g, (const float *)src, descending, k, (float *)values, indices);
  else if (dt == MS_K_F64) sort_rows_kernel<double><<<blocks, kThreads, 0, s>>>(*g, (const double *)src, descending, k, (double *)values, indices);
  else sort_rows_kernel<int64_t><<<blocks, kThreads, 0, s>>>(*g, (const int64_t *)src, descending, k, (int64_t *)values, indices);
  return launch_status();
}

// ---- scan_rows: one thread per row, in the CPU's order and precision ----

template <typename T, typename ACC>
__global__ void scan_rows_kernel(ms_k_rows g, int prod, int reverse, const T *src, T *out) {
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < g.rows; r += (int64_t)gridDim.x * blockDim.x) {
    const T *row = src + row_offset(g, r);
    ACC acc = prod ? (ACC)1 : (ACC)0;
    for (int64_t s = 0; s < g.n; s++) {
      int64_t k = reverse ? g.n - 1 - s : s;
      ACC v = (ACC)row[k * g.stride];
      acc = prod ? (ACC)(acc * v) : (ACC)(acc + v);
      out[r * g.n + k] = (T)acc;
    }
  }
}

extern "C" int ms_k_cuda_scan_rows(const ms_k_exec *x, const ms_k_rows *g, int prod, int reverse, ms_k_dtype dt,
                                   const void *src, void *out) {
  if (g->rows == 0 || g->n == 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  unsigned blocks = blocks_for(g->rows);
  if (dt == MS_K_F32) scan_rows_kernel<float, double><<<blocks, kThreads, 0, s>>>(*g, prod, reverse, (const float *)src, (float *)out);
  else if (dt == MS_K_F64) scan_rows_kernel<double, double><<<blocks, kThreads, 0, s>>>(*g, prod, reverse, (const double *)src, (double *)out);
  else scan_rows_kernel<uint64_t, uint64_t><<<blocks, kThreads, 0, s>>>(*g, prod, reverse, (const uint64_t *)src, (uint64_t *)out);
  return launch_status();
}
