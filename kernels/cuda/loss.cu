// loss.cu: the negative log likelihood's kernels with the formulas of kernels/cpu/nn_ops_body.h:
// per-position terms (nll_rows), their sums (nll_reduce), both in one launch where no smoothing
// is asked (nll_loss: the seed's loss), and the gradient (nll_backward). One thread per position:
// the rows of the models this serves are short (classes). Four floating dtypes (lowp.cuh);
// 16-bit terms are computed in float32 and rounded once where stored.
#include "lowp.cuh"

using namespace mskc;

namespace {

__device__ inline float dexp(float v) { return expf(v); }
__device__ inline double dexp(double v) { return exp(v); }

// The first bad target wins; the engine raises it at its next wait for the device.
__device__ void report_bad_target(ms_k_bad_value *bad, int64_t t, const ms_k_nll_args &a) {
  if (atomicCAS(&bad->code, MS_K_BAD_NONE, MS_K_BAD_TARGET) != MS_K_BAD_NONE) return;
  bad->value = t, bad->limit = a.C, bad->base = a.base;
  __threadfence_system();
}

// Position p's class weight and its weighted nll (0 and 0 when ignored; NaN and 0 for a target
// out of range, reported).
template <typename S>
__device__ inline void nll_term(const ms_k_nll_args &a, const S *logp, int64_t p, ms_k_bad_value *bad,
                                acc_t<S> *nll, acc_t<S> *wt) {
  using A = acc_t<S>;
  int64_t n = p / a.inner, i = p % a.inner, t = a.target[p], k = t - a.base;
  *nll = 0, *wt = 0;
  if (t == a.ignore_index) return;
  if (k < 0 || k >= a.C) {
    report_bad_target(bad, t, a);
    *nll = (A)NAN;
    return;
  }
  A wk = a.weight ? ld(*((const S *)a.weight + k)) : (A)1;
  *nll = -wk * ld(logp[n * a.C * a.inner + i + k * a.inner]), *wt = wk;
}

template <typename S>
__global__ void nll_rows_kernel(ms_k_nll_args a, const S *logp, S *nll, S *wt, S *smooth, ms_k_bad_value *bad) {
  using A = acc_t<S>;
  const S *w = (const S *)a.weight;
  int64_t positions = a.N * a.inner;
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < positions; p += (int64_t)gridDim.x * blockDim.x) {
    A tn, tw;
    nll_term(a, logp, p, bad, &tn, &tw);
    nll[p] = st<S>(tn), wt[p] = st<S>(tw);
    if (!smooth) continue;
    int64_t t = a.target[p], k = t - a.base;
    if (t == a.ignore_index || k < 0 || k >= a.C) {
      smooth[p] = st<S>(t == a.ignore_index ? (A)0 : (A)NAN);
      continue;
    }
    const S *row = logp + (p / a.inner) * a.C * a.inner + p % a.inner;
    double s = 0;
    for (int64_t c = 0; c < a.C; c++) s -= (double)(w ? ld(w[c]) : (A)1) * ld(row[c * a.inner]);
    smooth[p] = st<S>((A)s);
  }
}

// The three sums of one block's threads (each thread's share strided by blockDim), tree-summed in
// shared memory: the order both nll_reduce and nll_loss use, so they agree bit for bit.
__device__ inline void block_sums3(double v[3]) {
  __shared__ double part[3][kThreads];
  for (int k = 0; k < 3; k++) part[k][threadIdx.x] = v[k];
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      for (int k = 0; k < 3; k++) part[k][threadIdx.x] += part[k][threadIdx.x + half];
    __syncthreads();
  }
  for (int k = 0; k < 3; k++) v[k] = part[k][0];
}

template <typename S>
__device__ inline void write_loss(const double v[3], double s, int64_t C, int mean, S *out, double *sw) {
  using A = acc_t<S>;
  double r = (1 - s) * v[0] + s / (double)C * v[2];
  *out = st<S>((A)(mean ? r / v[1] : r));
  *sw = v[1];
}

template <typename S>
__global__ void nll_reduce_kernel(int64_t n, const S *nll, const S *wt, const S *smooth, double s, int64_t C,
                                  int mean, S *out, double *sw) {
  double v[3] = {0, 0, 0};
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    v[0] += (double)ld(nll[i]), v[1] += (double)ld(wt[i]);
    if (smooth) v[2] += (double)ld(smooth[i]);
  }
  block_sums3(v);
  if (threadIdx.x == 0) write_loss(v, s, C, mean, out, sw);
}

// nll_rows then nll_reduce without smoothing, in one block: each position's work is a load, so
// one block serves any batch; the terms are summed as nll_reduce sums the stored ones.
template <typename S>
__global__ void nll_loss_kernel(ms_k_nll_args a, const S *logp, int mean, S *out, double *sw, ms_k_bad_value *bad) {
  using A = acc_t<S>;
  double v[3] = {0, 0, 0};
  for (int64_t p = threadIdx.x; p < a.N * a.inner; p += blockDim.x) {
    A tn, tw;
    nll_term(a, logp, p, bad, &tn, &tw);
    v[0] += (double)tn, v[1] += (double)tw;
  }
  block_sums3(v);
  if (threadIdx.x == 0) write_loss(v, 0, a.C, mean, out, sw);
}

// Cross entropy's gradient term of class c before the softmax part: the nll term (at the target)
// less the smoothing term.
template <typename S>
__device__ inline acc_t<S> smoothed_q(acc_t<S> at, acc_t<S> bv, const S *w,
                                                   int64_t c) {
  using A = acc_t<S>;
  return at - bv * (w ? ld(w[c]) : (A)1);
}

template <typename S>
__global__ void nll_backward_kernel(ms_k_nll_args a, const S *logp, const S *g, int64_t gs, const double *sw,
                                    double s0, double s1, double s2, S *gx) {
  using A = acc_t<S>;
  const S *w = (const S *)a.weight;
  int64_t positions = a.N * a.inner;
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < positions; p += (int64_t)gridDim.x * blockDim.x) {
    int64_t n = p / a.inner, i = p % a.inner, t = a.target[p], s = a.inner;
    S *row = gx + n * a.C * s + i;
    for (int64_t c = 0; c < a.C; c++) row[c * s] = st<S>((A)0);
    if (t == a.ignore_index) continue;
    int64_t k = t - a.base;
    if (k < 0 || k >= a.C) { /* the forward reported it; never write outside the row */
      for (int64_t c = 0; c < a.C; c++) row[c * s] = st<S>((A)NAN);
      continue;
    }
    // a device mean: g / sw in float64, rounded to the dtype once
    S g16;
    const S *gp_at = g + p * gs;
    if (sw) g16 = st<S>((A)((double)ld(*g) / *sw)), gp_at = &g16;
    A gp = ld(*gp_at), av = gp * (A)s0 * (A)(1 - s2), bv = gp * (A)s1 * (A)(s2 / (double)a.C);
    A first = -av * (w ? ld(w[k]) : (A)1);
    if (!logp) {
      row[k * s] = st<S>(first);
      continue;
    }
    // cross entropy: q_c is computed twice (for the sum, then for the result) rather than stored
    // between, so a 16-bit row is rounded once
    double sum = 0;
    for (int64_t c = 0; c < a.C; c++) sum += smoothed_q(c == k ? first : (A)0, bv, w, c);
    const S *lp = logp + n * a.C * s + i;
    for (int64_t c = 0; c < a.C; c++)
      row[c * s] = st<S>(smoothed_q(c == k ? first : (A)0, bv, w, c) - dexp(ld(lp[c * s])) * (A)sum);
  }
}

template <typename S>
int launch_rows(const ms_k_exec *ex, const ms_k_nll_args *a, const void *logp, void *nll, void *wt, void *smooth) {
  int64_t n = a->N * a->inner;
  nll_rows_kernel<S><<<blocks_for(n), kThreads, 0, (cudaStream_t)ex->stream>>>(
      *a, (const S *)logp, (S *)nll, (S *)wt, (S *)smooth, ex->bad);
  return launch_status();
}

template <typename S>
int launch_reduce(const ms_k_exec *ex, int64_t n, const void *nll, const void *wt, const void *smooth, double s,
                  int64_t C, int mean, void *out, double *sw) {
  nll_reduce_kernel<S><<<1, kThreads, 0, (cudaStream_t)ex->stream>>>(n, (const S *)nll, (const S *)wt,
                                                                      (const S *)smooth, s, C, mean, (S *)out, sw);
  return launch_status();
}

template <typename S>
int launch_loss(const ms_k_exec *ex, const ms_k_nll_args *a, const void *logp, int mean, void *out, double *sw) {
  nll_loss_kernel<S><<<1, kThreads, 0, (cudaStream_t)ex->stream>>>(*a, (const S *)logp, mean, (S *)out, sw, ex->bad);
  return launch_status();
}

template <typename S>
int launch_backward(const ms_k_exec *ex, const ms_k_nll_args *a, const void *logp, const void *g, int64_t gs,
                    const double *sw, double s0, double s1, double s2, void *gx) {
  int64_t n = a->N * a->inner;
  nll_backward_kernel<S><<<blocks_for(n), kThreads, 0, (cudaStream_t)ex->stream>>>(
      *a, (const S *)logp, (const S *)g, gs, sw, s0, s1, s2, (S *)gx);
  return launch_status();
}

} // namespace

extern "C" int ms_k_cuda_nll_rows(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_nll_args *a,
                                  const void *logp, void *nll, void *wt, void *smooth) {
  if (a->N * a->inner == 0) return 0;
  return MSKC_BY_DTYPE(dt, launch_rows, ex, a, logp, nll, wt, smooth);
}

extern "C" int ms_k_cuda_nll_reduce(const ms_k_exec *ex, ms_k_dtype dt, int64_t n, const void *nll,
                                    const void *wt, const void *smooth, double s, int64_t C, int mean,
                                    void *out, double *sw) {
  return MSKC_BY_DTYPE(dt, launch_reduce, ex, n, nll, wt, smooth, s, C, mean, out, sw);
}

extern "C" int ms_k_cuda_nll_loss(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_nll_args *a, const void *logp,
                                  int mean, void *out, double *sw) {
  return MSKC_BY_DTYPE(dt, launch_loss, ex, a, logp, mean, out, sw);
}

extern "C" int ms_k_cuda_nll_backward(const ms_k_exec *ex, ms_k_dtype dt, const ms_k_nll_args *a,
                                      const void *logp, const void *g, int64_t gs, const double *sw,
                                      double nll_scale, double smooth_scale, double smoothing, void *gx) {
  if (a->N * a->inner == 0) return 0;
  return MSKC_BY_DTYPE(dt, launch_backward, ex, a, logp, g, gs, sw, nll_scale, smooth_scale, smoothing, gx);
}
