// optim.cu: fused optimizer steps on the device, one thread per element, with the formulas of
// kernels/cpu/optim.c computed in double and rounded once per stored value (so float32 state
// matches the CPU's to the rounding of the last operation).
#include "common.cuh"

using namespace mskc;

__device__ inline double effective_grad(double g, double p, int maximize, double weight_decay) {
  if (maximize) g = -g;
  return weight_decay != 0 ? g + weight_decay * p : g;
}

template <typename T>
__global__ void adadelta_kernel(int64_t n, T *p, const T *g, T *sq, T *acc, ms_k_adadelta_hp hp) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    double pi = p[i], gi = effective_grad(g[i], pi, hp.maximize, hp.weight_decay);
    double s = (double)sq[i] * hp.rho + (1 - hp.rho) * gi * gi;
    double std = sqrt(s + hp.eps);
    double delta = sqrt((double)acc[i] + hp.eps) / std * gi;
    sq[i] = (T)s;
    acc[i] = (T)((double)acc[i] * hp.rho + (1 - hp.rho) * delta * delta);
    p[i] = (T)(pi + -hp.lr * delta);
  }
}

extern "C" int ms_kc_adadelta_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *square_avg,
                                   void *acc_delta, const ms_k_adadelta_hp *hp, void *stream) {
  if (n <= 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  if (dt == MS_K_F64)
    adadelta_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(n, (double *)param, (const double *)grad,
                                                               (double *)square_avg, (double *)acc_delta, *hp);
  else
    adadelta_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(n, (float *)param, (const float *)grad,
                                                              (float *)square_avg, (float *)acc_delta, *hp);
  return launch_status();
}
