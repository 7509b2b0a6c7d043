// optim.cu: fused optimizer steps on the device (SGD, Adam/AdamW, Adadelta, Adagrad, RMSprop), one
// thread per element, with the formulas of kernels/cpu/optim.c computed in double and rounded
// once per stored value (so float32 state matches the CPU's to the rounding of the last
// operation). State arrays an option does not use are NULL and never touched.
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

extern "C" int ms_k_cuda_adadelta_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,
                                       void *square_avg, void *acc_delta, const ms_k_adadelta_hp *hp) {
  if (n <= 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  if (dt == MS_K_F64)
    adadelta_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(n, (double *)param, (const double *)grad,
                                                               (double *)square_avg, (double *)acc_delta, *hp);
  else
    adadelta_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(n, (float *)param, (const float *)grad,
                                                              (float *)square_avg, (float *)acc_delta, *hp);
  return launch_status();
}

// torch.maximum: NaN propagates from either side.
__device__ inline double max_nan(double a, double b) { return a != a || a > b ? a : b; }

template <typename T>
__global__ void sgd_kernel(int64_t n, T *p, const T *g, T *buf, ms_k_sgd_hp hp) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    double pi = p[i], d = effective_grad(g[i], pi, hp.maximize, hp.weight_decay);
    if (buf) {
      double b = hp.init_buffer ? d : (double)buf[i] * hp.momentum + (1 - hp.dampening) * d;
      buf[i] = (T)b;
      d = hp.nesterov ? d + hp.momentum * b : b;
    }
    p[i] = (T)(pi + -hp.lr * d);
  }
}

extern "C" int ms_k_cuda_sgd_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,
                                  void *momentum_buffer, const ms_k_sgd_hp *hp) {
  if (n <= 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  if (dt == MS_K_F64)
    sgd_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(n, (double *)param, (const double *)grad,
                                                          (double *)momentum_buffer, *hp);
  else
    sgd_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(n, (float *)param, (const float *)grad,
                                                         (float *)momentum_buffer, *hp);
  return launch_status();
}

// step_size and the square root of the second bias correction are computed once on the host,
// as the CPU kernel (and PyTorch, in Python) does.
template <typename T>
__global__ void adam_kernel(int64_t n, T *p, const T *g, T *m, T *v, T *vmax, ms_k_adam_hp hp, double step_size,
                            double bc2_sqrt) {
  const double decay = hp.decoupled ? 1 - hp.lr * hp.weight_decay : 1;
  const double l2 = hp.decoupled ? 0 : hp.weight_decay;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    double pi = p[i], gi = effective_grad(g[i], pi, hp.maximize, l2);
    pi *= decay;
    double mi = (double)m[i] * hp.beta1 + (1 - hp.beta1) * gi;
    double vi = (double)v[i] * hp.beta2 + (1 - hp.beta2) * gi * gi, vv = vi;
    m[i] = (T)mi, v[i] = (T)vi;
    if (vmax) vv = max_nan(vmax[i], vi), vmax[i] = (T)vv;
    double denom = sqrt(vv) / bc2_sqrt + hp.eps;
    p[i] = (T)(pi + -step_size * mi / denom);
  }
}

extern "C" int ms_k_cuda_adam_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,
                                   void *exp_avg, void *exp_avg_sq, void *max_exp_avg_sq, const ms_k_adam_hp *hp) {
  if (n <= 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  double step_size = hp->lr / (1 - pow(hp->beta1, hp->step)), bc2_sqrt = sqrt(1 - pow(hp->beta2, hp->step));
  void *vmax = hp->amsgrad ? max_exp_avg_sq : NULL;
  if (dt == MS_K_F64)
    adam_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(n, (double *)param, (const double *)grad, (double *)exp_avg,
                                                           (double *)exp_avg_sq, (double *)vmax, *hp, step_size, bc2_sqrt);
  else
    adam_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(n, (float *)param, (const float *)grad, (float *)exp_avg,
                                                          (float *)exp_avg_sq, (float *)vmax, *hp, step_size, bc2_sqrt);
  return launch_status();
}

// clr: the decayed learning rate of this step, computed on the host as on the CPU.
template <typename T>
__global__ void adagrad_kernel(int64_t n, T *p, const T *g, T *sum, ms_k_adagrad_hp hp, double clr) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    double pi = p[i], gi = effective_grad(g[i], pi, hp.maximize, hp.weight_decay);
    double si = (double)sum[i] + gi * gi;
    sum[i] = (T)si;
    p[i] = (T)(pi + -clr * gi / (sqrt(si) + hp.eps));
  }
}

extern "C" int ms_k_cuda_adagrad_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,
                                      void *state_sum, const ms_k_adagrad_hp *hp) {
  if (n <= 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  double clr = hp->lr / (1 + (hp->step - 1) * hp->lr_decay);
  if (dt == MS_K_F64)
    adagrad_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(n, (double *)param, (const double *)grad,
                                                              (double *)state_sum, *hp, clr);
  else
    adagrad_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(n, (float *)param, (const float *)grad,
                                                             (float *)state_sum, *hp, clr);
  return launch_status();
}

template <typename T>
__global__ void rmsprop_kernel(int64_t n, T *p, const T *g, T *sq, T *gavg, T *buf, ms_k_rmsprop_hp hp) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    double pi = p[i], gi = effective_grad(g[i], pi, hp.maximize, hp.weight_decay);
    double si = (double)sq[i] * hp.alpha + (1 - hp.alpha) * gi * gi, avg;
    sq[i] = (T)si;
    if (gavg) {
      double ga = (double)gavg[i] * hp.alpha + (1 - hp.alpha) * gi;
      gavg[i] = (T)ga;
      avg = sqrt(si - ga * ga);
    } else {
      avg = sqrt(si);
    }
    avg += hp.eps;
    if (buf) {
      double b = (double)buf[i] * hp.momentum + gi / avg;
      buf[i] = (T)b;
      p[i] = (T)(pi + -hp.lr * b);
    } else {
      p[i] = (T)(pi + -hp.lr * gi / avg);
    }
  }
}

extern "C" int ms_k_cuda_rmsprop_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,
                                      void *square_avg, void *grad_avg, void *momentum_buffer,
                                      const ms_k_rmsprop_hp *hp) {
  if (n <= 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  void *gavg = hp->centered ? grad_avg : NULL, *buf = hp->momentum > 0 ? momentum_buffer : NULL;
  if (dt == MS_K_F64)
    rmsprop_kernel<double><<<blocks_for(n), kThreads, 0, s>>>(n, (double *)param, (const double *)grad, (double *)square_avg,
                                                              (double *)gavg, (double *)buf, *hp);
  else
    rmsprop_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(n, (float *)param, (const float *)grad, (float *)square_avg,
                                                             (float *)gavg, (float *)buf, *hp);
  return launch_status();
}
