// attention.cu: scaled dot product attention on the GPU with kernel_table.h's semantics (the CPU's
// kernels/cpu/attention.c). A plain fused form: one thread block per query row (forward, dQ) or
// key row (dK, dV), an online softmax over the other side, dot products as block sums. Nothing of
// size L x S is stored; the backward recomputes each weight from the saved logsumexp.
#include "common.cuh"

using namespace mskc;

namespace {

constexpr int kAttnThreads = 128;

__device__ inline float dexp(float v) { return expf(v); }
__device__ inline double dexp(double v) { return exp(v); }
__device__ inline float dlog(float v) { return logf(v); }
__device__ inline double dlog(double v) { return log(v); }

// The sum of every thread's v, returned to all threads (sh: one slot per warp).
template <typename T>
__device__ T block_sum(T v, T *sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads(); // the previous call's readers are done with sh
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  T t = 0;
  for (int w = 0; w < (int)(blockDim.x >> 5); w++) t += sh[w];
  return t;
}

template <typename T>
__device__ T dot(const T *a, const T *b, int64_t n, T *sh) {
  T part = 0;
  for (int64_t d = threadIdx.x; d < n; d += blockDim.x) part += a[d] * b[d];
  return block_sum(part, sh);
}

__device__ int64_t mask_offset(const ms_k_attn_geom &g, int64_t b) {
  int64_t off = 0;
  for (int d = g.nbatch - 1; d >= 0; d--) {
    off += (b % g.bshape[d]) * g.mstride[d];
    b /= g.bshape[d];
  }
  return off;
}

// The scaled, masked score of (b, i, j) from its dot product (-inf: masked).
template <typename T>
__device__ T masked_score(const ms_k_attn_geom &g, const void *mask, int64_t b, int64_t i, int64_t j, T dotv) {
  if (g.causal && j > i) return -INFINITY;
  T s = dotv * (T)g.scale;
  int64_t off = mask_offset(g, b) + i * g.msi + j * g.msj;
  if (g.mask_kind == MS_K_ATTN_MASK_BOOL && !((const uint8_t *)mask)[off]) return -INFINITY;
  if (g.mask_kind == MS_K_ATTN_MASK_ADD) s += ((const T *)mask)[off];
  return s;
}

// Dropout's factor of (b, i, j): ms_k_philox_bernoulli's word (b L + i) S + j against keep_below.
template <typename T>
__device__ T keep_factor(const ms_k_attn_geom &g, int64_t b, int64_t i, int64_t j) {
  if (g.dropout_p <= 0) return 1;
  uint64_t e = (uint64_t)((b * g.L + i) * g.S + j);
  uint32_t w[4];
  philox(g.seed, g.offset + e / 4, w);
  return w[e % 4] < g.keep_below ? (T)(1 / (1 - g.dropout_p)) : (T)0;
}

// One block per row (b, i): out accumulates in place, rescaled as the running max grows.
template <typename T>
__global__ void forward_kernel(ms_k_attn_geom g, const T *q, const T *k, const T *v, const void *mask, T *out,
                               T *lse) {
  __shared__ T sh[32];
  int64_t row = blockIdx.x, b = row / g.L, i = row % g.L;
  const T *qi = q + row * g.E;
  T *o = out + row * g.Ev;
  for (int64_t d = threadIdx.x; d < g.Ev; d += blockDim.x) o[d] = 0;
  T m = -INFINITY, l = 0;
  int64_t jend = g.causal && i + 1 < g.S ? i + 1 : g.S;
  for (int64_t j = 0; j < jend; j++) {
    T s = masked_score<T>(g, mask, b, i, j, dot(qi, k + (b * g.S + j) * g.E, g.E, sh));
    if (s == -INFINITY) continue;
    T mx = s > m ? s : m, alpha = dexp(m - mx), p = dexp(s - mx);
    l = l * alpha + p, m = mx;
    T pz = p * keep_factor<T>(g, b, i, j);
    const T *vj = v + (b * g.S + j) * g.Ev;
    for (int64_t d = threadIdx.x; d < g.Ev; d += blockDim.x) o[d] = o[d] * alpha + pz * vj[d];
  }
  T inv = l > 0 ? 1 / l : 0;
  for (int64_t d = threadIdx.x; d < g.Ev; d += blockDim.x) o[d] *= inv;
  if (threadIdx.x == 0) lse[row] = l > 0 ? m + dlog(l) : -INFINITY;
}

// dS of (b, i, j) and dropout's P z, from the saved logsumexp and delta of row (b, i).
template <typename T>
__device__ void weight_grads(const ms_k_attn_geom &g, const void *mask, const T *q, const T *k, const T *v,
                             const T *gout, T lse, T delta, int64_t b, int64_t i, int64_t j, T *sh, T *ds,
                             T *pz) {
  T s = masked_score<T>(g, mask, b, i, j, dot(q + (b * g.L + i) * g.E, k + (b * g.S + j) * g.E, g.E, sh));
  T dp = dot(gout + (b * g.L + i) * g.Ev, v + (b * g.S + j) * g.Ev, g.Ev, sh);
  T p = s == -INFINITY || lse == -INFINITY ? (T)0 : dexp(s - lse), z = keep_factor<T>(g, b, i, j);
  *ds = p * (dp * z - delta), *pz = p * z;
}

// One block per query row: delta = gout . out, then dQ = scale sum_j dS k_j.
template <typename T>
__global__ void dq_kernel(ms_k_attn_geom g, const T *q, const T *k, const T *v, const void *mask, const T *out,
                          const T *lse, const T *gout, T *delta, T *gq) {
  __shared__ T sh[32];
  int64_t row = blockIdx.x, b = row / g.L, i = row % g.L;
  T dl = dot(gout + row * g.Ev, out + row * g.Ev, g.Ev, sh);
  if (threadIdx.x == 0) delta[row] = dl;
  T *gqi = gq + row * g.E;
  for (int64_t d = threadIdx.x; d < g.E; d += blockDim.x) gqi[d] = 0;
  int64_t jend = g.causal && i + 1 < g.S ? i + 1 : g.S;
  for (int64_t j = 0; j < jend; j++) {
    T ds, pz;
    weight_grads<T>(g, mask, q, k, v, gout, lse[row], dl, b, i, j, sh, &ds, &pz);
    const T *kj = k + (b * g.S + j) * g.E;
    for (int64_t d = threadIdx.x; d < g.E; d += blockDim.x) gqi[d] += (T)g.scale * ds * kj[d];
  }
}

// One block per key row (after dq_kernel wrote delta): dK = scale sum_i dS q_i, dV = sum_i P z gout_i.
template <typename T>
__global__ void dkv_kernel(ms_k_attn_geom g, const T *q, const T *k, const T *v, const void *mask, const T *lse,
                           const T *gout, const T *delta, T *gk, T *gv) {
  __shared__ T sh[32];
  int64_t row = blockIdx.x, b = row / g.S, j = row % g.S;
  T *gkj = gk + row * g.E, *gvj = gv + row * g.Ev;
  for (int64_t d = threadIdx.x; d < g.E; d += blockDim.x) gkj[d] = 0;
  for (int64_t d = threadIdx.x; d < g.Ev; d += blockDim.x) gvj[d] = 0;
  for (int64_t i = g.causal ? j : 0; i < g.L; i++) {
    T ds, pz;
    weight_grads<T>(g, mask, q, k, v, gout, lse[b * g.L + i], delta[b * g.L + i], b, i, j, sh, &ds, &pz);
    const T *qi = q + (b * g.L + i) * g.E, *goi = gout + (b * g.L + i) * g.Ev;
    for (int64_t d = threadIdx.x; d < g.E; d += blockDim.x) gkj[d] += (T)g.scale * ds * qi[d];
    for (int64_t d = threadIdx.x; d < g.Ev; d += blockDim.x) gvj[d] += pz * goi[d];
  }
}

template <typename T>
int forward(const ms_k_exec *ex, const ms_k_attn_geom *g, const void *q, const void *k, const void *v,
            const void *mask, void *out, void *lse) {
  if (g->nb * g->L == 0) return 0;
  forward_kernel<T><<<(unsigned)(g->nb * g->L), kAttnThreads, 0, (cudaStream_t)ex->stream>>>(
      *g, (const T *)q, (const T *)k, (const T *)v, mask, (T *)out, (T *)lse);
  return launch_status();
}

template <typename T>
int backward(const ms_k_exec *ex, const ms_k_attn_geom *g, const void *q, const void *k, const void *v,
             const void *mask, const void *out, const void *lse, const void *gout, void *delta, void *gq,
             void *gk, void *gv) {
  cudaStream_t s = (cudaStream_t)ex->stream;
  if (g->nb * g->L > 0) {
    dq_kernel<T><<<(unsigned)(g->nb * g->L), kAttnThreads, 0, s>>>(*g, (const T *)q, (const T *)k, (const T *)v,
                                                                  mask, (const T *)out, (const T *)lse,
                                                                  (const T *)gout, (T *)delta, (T *)gq);
    int err = launch_status();
    if (err) return err;
  }
  if (g->nb * g->S > 0) {
    dkv_kernel<T><<<(unsigned)(g->nb * g->S), kAttnThreads, 0, s>>>(*g, (const T *)q, (const T *)k, (const T *)v,
                                                                   mask, (const T *)lse, (const T *)gout,
                                                                   (const T *)delta, (T *)gk, (T *)gv);
    return launch_status();
  }
  return 0;
}

} // namespace

extern "C" int ms_k_cuda_attention(const ms_k_exec *x, ms_k_dtype dt, const ms_k_attn_geom *g, const void *q,
                                   const void *k, const void *v, const void *mask, void *out, void *lse) {
  return dt == MS_K_F64 ? forward<double>(x, g, q, k, v, mask, out, lse)
                        : forward<float>(x, g, q, k, v, mask, out, lse);
}

extern "C" int ms_k_cuda_attention_backward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_attn_geom *g,
                                            const void *q, const void *k, const void *v, const void *mask,
                                            const void *out, const void *lse, const void *gout, void *delta,
                                            void *gq, void *gk, void *gv) {
  return dt == MS_K_F64 ? backward<double>(x, g, q, k, v, mask, out, lse, gout, delta, gq, gk, gv)
                        : backward<float>(x, g, q, k, v, mask, out, lse, gout, delta, gq, gk, gv);
}
