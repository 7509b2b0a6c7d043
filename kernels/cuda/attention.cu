// attention.cu: scaled dot product attention on the GPU with kernel_table.h's semantics (the CPU's
// kernels/cpu/attention.c). A plain fused form: one thread block per query row (forward, dQ) or
// key row (dK, dV), an online softmax over the other side, dot products as block sums. Nothing of
// size L x S is stored; the backward recomputes each weight from the saved logsumexp.
// bfloat16 and float16 operands (lowp.cuh: storage S, arithmetic A = float32) are widened as they
// are read; the logsumexp and delta are float32, and out, dQ, dK, dV accumulate in float32
// buffers from the exec's scratch memory, each element rounded once at the end (as the CPU's
// bfloat16 attention sums in float32). For float and double, the accumulators are the outputs
// themselves and the arithmetic is as before.
#include "lowp.cuh"

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

template <typename S>
__device__ acc_t<S> dot(const S *a, const S *b, int64_t n, acc_t<S> *sh) {
  acc_t<S> part = 0;
  for (int64_t d = threadIdx.x; d < n; d += blockDim.x) part += ld(a[d]) * ld(b[d]);
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

// The scaled, masked score of (b, i, j) from its dot product (-inf: masked); an additive mask
// has the operands' storage type S.
template <typename S>
__device__ acc_t<S> masked_score(const ms_k_attn_geom &g, const void *mask, int64_t b, int64_t i, int64_t j,
                                 acc_t<S> dotv) {
  typedef acc_t<S> T;
  if (g.causal && j > i) return -INFINITY;
  T s = dotv * (T)g.scale;
  int64_t off = mask_offset(g, b) + i * g.msi + j * g.msj;
  if (g.mask_kind == MS_K_ATTN_MASK_BOOL && !((const uint8_t *)mask)[off]) return -INFINITY;
  if (g.mask_kind == MS_K_ATTN_MASK_ADD) s += ld(((const S *)mask)[off]);
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

// One block per row (b, i): acc (out itself, or float32 scratch for 16-bit) accumulates, rescaled
// as the running max grows; out gets each element once at the end.
template <typename S>
__global__ void forward_kernel(ms_k_attn_geom g, const S *q, const S *k, const S *v, const void *mask, S *out,
                               acc_t<S> *acc, acc_t<S> *lse) {
  typedef acc_t<S> T;
  __shared__ T sh[32];
  int64_t row = blockIdx.x, b = row / g.L, i = row % g.L;
  const S *qi = q + row * g.E;
  T *o = acc + row * g.Ev;
  for (int64_t d = threadIdx.x; d < g.Ev; d += blockDim.x) o[d] = 0;
  T m = -INFINITY, l = 0;
  int64_t jend = g.causal && i + 1 < g.S ? i + 1 : g.S;
  for (int64_t j = 0; j < jend; j++) {
    T s = masked_score<S>(g, mask, b, i, j, dot(qi, k + (b * g.S + j) * g.E, g.E, sh));
    if (s == -INFINITY) continue;
    T mx = s > m ? s : m, alpha = dexp(m - mx), p = dexp(s - mx);
    l = l * alpha + p, m = mx;
    T pz = p * keep_factor<T>(g, b, i, j);
    const S *vj = v + (b * g.S + j) * g.Ev;
    for (int64_t d = threadIdx.x; d < g.Ev; d += blockDim.x) o[d] = o[d] * alpha + pz * ld(vj[d]);
  }
  T inv = l > 0 ? 1 / l : 0;
  for (int64_t d = threadIdx.x; d < g.Ev; d += blockDim.x) out[row * g.Ev + d] = st<S>(o[d] * inv);
  if (threadIdx.x == 0) lse[row] = l > 0 ? m + dlog(l) : -INFINITY;
}

// dS of (b, i, j) and dropout's P z, from the saved logsumexp and delta of row (b, i).
template <typename S>
__device__ void weight_grads(const ms_k_attn_geom &g, const void *mask, const S *q, const S *k, const S *v,
                             const S *gout, acc_t<S> lse, acc_t<S> delta, int64_t b, int64_t i, int64_t j,
                             acc_t<S> *sh, acc_t<S> *ds, acc_t<S> *pz) {
  typedef acc_t<S> T;
  T s = masked_score<S>(g, mask, b, i, j, dot(q + (b * g.L + i) * g.E, k + (b * g.S + j) * g.E, g.E, sh));
  T dp = dot(gout + (b * g.L + i) * g.Ev, v + (b * g.S + j) * g.Ev, g.Ev, sh);
  T p = s == -INFINITY || lse == -INFINITY ? (T)0 : dexp(s - lse), z = keep_factor<T>(g, b, i, j);
  *ds = p * (dp * z - delta), *pz = p * z;
}

// acc's n elements rounded into out (16-bit); for float and double acc is out: nothing to do.
template <typename S>
__device__ void round_out(int64_t n, const acc_t<S> *acc, S *out) {
  if ((const void *)acc == (const void *)out) return;
  for (int64_t d = threadIdx.x; d < n; d += blockDim.x) out[d] = st<S>(acc[d]);
}

// One block per query row: delta = gout . out, then dQ = scale sum_j dS k_j (accumulated in gacc).
template <typename S>
__global__ void dq_kernel(ms_k_attn_geom g, const S *q, const S *k, const S *v, const void *mask, const S *out,
                          const acc_t<S> *lse, const S *gout, acc_t<S> *delta, acc_t<S> *gacc, S *gq) {
  typedef acc_t<S> T;
  __shared__ T sh[32];
  int64_t row = blockIdx.x, b = row / g.L, i = row % g.L;
  T dl = dot(gout + row * g.Ev, out + row * g.Ev, g.Ev, sh);
  if (threadIdx.x == 0) delta[row] = dl;
  T *gqi = gacc + row * g.E;
  for (int64_t d = threadIdx.x; d < g.E; d += blockDim.x) gqi[d] = 0;
  int64_t jend = g.causal && i + 1 < g.S ? i + 1 : g.S;
  for (int64_t j = 0; j < jend; j++) {
    T ds, pz;
    weight_grads<S>(g, mask, q, k, v, gout, lse[row], dl, b, i, j, sh, &ds, &pz);
    const S *kj = k + (b * g.S + j) * g.E;
    for (int64_t d = threadIdx.x; d < g.E; d += blockDim.x) gqi[d] += (T)g.scale * ds * ld(kj[d]);
  }
  round_out<S>(g.E, gqi, gq + row * g.E);
}

// One block per key row (after dq_kernel wrote delta): dK = scale sum_i dS q_i, dV = sum_i P z gout_i
// (accumulated in kacc and vacc).
template <typename S>
__global__ void dkv_kernel(ms_k_attn_geom g, const S *q, const S *k, const S *v, const void *mask,
                           const acc_t<S> *lse, const S *gout, const acc_t<S> *delta, acc_t<S> *kacc,
                           acc_t<S> *vacc, S *gk, S *gv) {
  typedef acc_t<S> T;
  __shared__ T sh[32];
  int64_t row = blockIdx.x, b = row / g.S, j = row % g.S;
  T *gkj = kacc + row * g.E, *gvj = vacc + row * g.Ev;
  for (int64_t d = threadIdx.x; d < g.E; d += blockDim.x) gkj[d] = 0;
  for (int64_t d = threadIdx.x; d < g.Ev; d += blockDim.x) gvj[d] = 0;
  for (int64_t i = g.causal ? j : 0; i < g.L; i++) {
    T ds, pz;
    weight_grads<S>(g, mask, q, k, v, gout, lse[b * g.L + i], delta[b * g.L + i], b, i, j, sh, &ds, &pz);
    const S *qi = q + (b * g.L + i) * g.E, *goi = gout + (b * g.L + i) * g.Ev;
    for (int64_t d = threadIdx.x; d < g.E; d += blockDim.x) gkj[d] += (T)g.scale * ds * ld(qi[d]);
    for (int64_t d = threadIdx.x; d < g.Ev; d += blockDim.x) gvj[d] += pz * ld(goi[d]);
  }
  round_out<S>(g.E, gkj, gk + row * g.E);
  round_out<S>(g.Ev, gvj, gv + row * g.Ev);
}

// The float32 accumulators of 16-bit outputs: n elements each, from the exec's scratch memory
// (stream-ordered: given back after the kernels that use them are queued); for float and double
// the outputs themselves.
template <typename S>
struct accumulators {
  const ms_k_exec *ex;
  size_t bytes;
  void *p;
};

template <typename S>
static acc_t<S> *acc_for(accumulators<S> *a, int64_t n, void *out) {
  if (sizeof(S) == sizeof(acc_t<S>)) return (acc_t<S> *)out;
  a->bytes = (size_t)(n > 0 ? n : 1) * sizeof(acc_t<S>);
  a->p = a->ex->scratch_alloc(a->ex->device, a->bytes);
  return (acc_t<S> *)a->p;
}

template <typename S>
static void acc_free(accumulators<S> *a) {
  if (a->p) a->ex->scratch_free(a->ex->device, a->p, a->bytes);
}

template <typename S>
int forward(const ms_k_exec *ex, const ms_k_attn_geom *g, const void *q, const void *k, const void *v,
            const void *mask, void *out, void *lse) {
  if (g->nb * g->L == 0) return 0;
  accumulators<S> a = {ex, 0, NULL};
  acc_t<S> *acc = acc_for(&a, g->nb * g->L * g->Ev, out);
  if (!acc) return MS_K_ERR_NO_MEMORY;
  forward_kernel<S><<<(unsigned)(g->nb * g->L), kAttnThreads, 0, (cudaStream_t)ex->stream>>>(
      *g, (const S *)q, (const S *)k, (const S *)v, mask, (S *)out, acc, (acc_t<S> *)lse);
  int err = launch_status();
  acc_free(&a);
  return err;
}

template <typename S>
int backward(const ms_k_exec *ex, const ms_k_attn_geom *g, const void *q, const void *k, const void *v,
             const void *mask, const void *out, const void *lse, const void *gout, void *delta, void *gq,
             void *gk, void *gv) {
  typedef acc_t<S> T;
  cudaStream_t s = (cudaStream_t)ex->stream;
  accumulators<S> aq = {ex, 0, NULL}, ak = {ex, 0, NULL}, av = {ex, 0, NULL};
  int err = 0;
  if (g->nb * g->L > 0) {
    T *qacc = acc_for(&aq, g->nb * g->L * g->E, gq);
    if (!qacc) return MS_K_ERR_NO_MEMORY;
    dq_kernel<S><<<(unsigned)(g->nb * g->L), kAttnThreads, 0, s>>>(*g, (const S *)q, (const S *)k, (const S *)v,
                                                                  mask, (const S *)out, (const T *)lse,
                                                                  (const S *)gout, (T *)delta, qacc, (S *)gq);
    err = launch_status();
    acc_free(&aq);
    if (err) return err;
  }
  if (g->nb * g->S > 0) {
    T *kacc = acc_for(&ak, g->nb * g->S * g->E, gk), *vacc = kacc ? acc_for(&av, g->nb * g->S * g->Ev, gv) : NULL;
    if (vacc)
      dkv_kernel<S><<<(unsigned)(g->nb * g->S), kAttnThreads, 0, s>>>(*g, (const S *)q, (const S *)k, (const S *)v,
                                                                     mask, (const T *)lse, (const S *)gout,
                                                                     (const T *)delta, kacc, vacc, (S *)gk, (S *)gv);
    err = vacc ? launch_status() : MS_K_ERR_NO_MEMORY;
    acc_free(&ak), acc_free(&av);
  }
  return err;
}

} // namespace

extern "C" int ms_k_cuda_attention(const ms_k_exec *x, ms_k_dtype dt, const ms_k_attn_geom *g, const void *q,
                                   const void *k, const void *v, const void *mask, void *out, void *lse) {
  MSKC_FLOAT_SWITCH(dt, S, return forward<S>(x, g, q, k, v, mask, out, lse));
  return 0; // unreachable: every case returns
}

extern "C" int ms_k_cuda_attention_backward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_attn_geom *g,
                                            const void *q, const void *k, const void *v, const void *mask,
                                            const void *out, const void *lse, const void *gout, void *delta,
                                            void *gq, void *gk, void *gv) {
  MSKC_FLOAT_SWITCH(dt, S, return backward<S>(x, g, q, k, v, mask, out, lse, gout, delta, gq, gk, gv));
  return 0; // unreachable: every case returns
}
