// activation.cu: the activations of moonshard/op_list.h (GELU exact and tanh, SiLU, ...), forward
// and backward, one thread per element with the formulas of kernels/cpu/nn_ops_body.h; bfloat16
// and float16 (lowp.cuh) compute in float32 and round once, as kernels/cpu/nn_ops_half.h.
#include "lowp.cuh"

using namespace mskc;

// Device switches are out of the host compiler's -Wswitch: a new activation must get its cases.
static_assert(MS_K_ACT_COUNT == 4, "an activation was added or removed: update act_forward and act_backward");

__device__ inline float d_erf(float v) { return erff(v); }
__device__ inline double d_erf(double v) { return erf(v); }
__device__ inline float d_tanh(float v) { return tanhf(v); }
__device__ inline double d_tanh(double v) { return tanh(v); }
__device__ inline float d_exp(float v) { return expf(v); }
__device__ inline double d_exp(double v) { return exp(v); }

template <typename T>
__device__ inline T act_forward(ms_k_act act, T x) {
  const T k = (T)0.7978845608028654, c = (T)0.044715, inv_sqrt2 = (T)0.7071067811865476; // sqrt(2/pi)
  switch (act) {
  case MS_K_ACT_GELU: return (T)0.5 * x * ((T)1 + d_erf(x * inv_sqrt2));
  case MS_K_ACT_GELU_TANH: return (T)0.5 * x * ((T)1 + d_tanh(k * (x + c * x * x * x)));
  case MS_K_ACT_SILU: return x / ((T)1 + d_exp(-x));
  case MS_K_ACT_HARDSWISH: {
    T r = x + (T)3;
    return x * (r < (T)0 ? (T)0 : r > (T)6 ? (T)6 : r) / (T)6;
  }
  }
  return x; // not an activation: unreachable
}

template <typename T>
__device__ inline T act_backward(ms_k_act act, T x, T g) {
  const T k = (T)0.7978845608028654, c = (T)0.044715, inv_sqrt2 = (T)0.7071067811865476;
  const T inv_sqrt_2pi = (T)0.3989422804014327;
  switch (act) {
  case MS_K_ACT_GELU: {
    T cdf = (T)0.5 * ((T)1 + d_erf(x * inv_sqrt2)), pdf = inv_sqrt_2pi * d_exp((T)-0.5 * x * x);
    return g * (cdf + x * pdf);
  }
  case MS_K_ACT_GELU_TANH: {
    T x2 = x * x, th = d_tanh(k * (x + c * x2 * x)), dinner = k * ((T)1 + (T)3 * c * x2);
    return g * ((T)0.5 * ((T)1 + th) + (T)0.5 * x * ((T)1 - th * th) * dinner);
  }
  case MS_K_ACT_SILU: {
    T s = (T)1 / ((T)1 + d_exp(-x));
    return g * s * ((T)1 + x * ((T)1 - s));
  }
  case MS_K_ACT_HARDSWISH: return x < (T)-3 ? (T)0 : x <= (T)3 ? g * (x / (T)3 + (T)0.5) : g;
  }
  return g; // not an activation: unreachable
}

// g NULL: the forward (out = act(x)); otherwise the backward (out = g * act'(x)).
template <typename S>
__global__ void activation_kernel(ms_k_act act, int64_t n, const S *x, const S *g, S *out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = st<S>(g ? act_backward(act, ld(x[i]), ld(g[i])) : act_forward(act, ld(x[i])));
}

static int launch(ms_k_act act, ms_k_dtype dt, int64_t n, const void *x, const void *g, void *out, void *stream) {
  if (n <= 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  MSKC_FLOAT_SWITCH(dt, S,
                    activation_kernel<S><<<blocks_for(n), kThreads, 0, s>>>(act, n, (const S *)x, (const S *)g,
                                                                            (S *)out));
  return launch_status();
}

extern "C" int ms_k_cuda_activation(const ms_k_exec *ex, ms_k_act act, ms_k_dtype dt, int64_t n,
                                    const void *x, void *y) {
  return launch(act, dt, n, x, NULL, y, ex->stream);
}

extern "C" int ms_k_cuda_activation_backward(const ms_k_exec *ex, ms_k_act act, ms_k_dtype dt, int64_t n,
                                             const void *x, const void *g, void *gx) {
  return launch(act, dt, n, x, g, gx, ex->stream);
}
