// optim.cu: fused optimizer steps on the device (SGD, Adam/AdamW, Adadelta, Adagrad, RMSprop), one
// thread per element, and the multi-tensor (foreach) steps of SGD, Adam/AdamW and Adadelta, one
// launch per list of tensors, with the formulas of kernels/cpu/optim.c computed in double and rounded
// once per stored value (so float32 state matches the CPU's to the rounding of the last
// operation). State arrays an option does not use are NULL and never touched.
#include "common.cuh"

using namespace mskc;

__device__ inline double effective_grad(double g, double p, int maximize, double weight_decay) {
  if (maximize) g = -g;
  return weight_decay != 0 ? g + weight_decay * p : g;
}

// torch.maximum: NaN propagates from either side.
__device__ inline double max_nan(double a, double b) { return a != a || a > b ? a : b; }

// The per-element updates of SGD, Adam/AdamW and Adadelta, each a struct of its numbers (v: the
// MS_K_*_SLOTS values of kernel_table.h, filled on the host by ms_k_*_slots) and its flags, so
// that the single-tensor kernels and the list kernel run the same code. Arrays: the parameter,
// its gradient, then up to three states (NULL where unused).
struct SgdStep {
  static constexpr int kSlots = MS_K_SGD_SLOTS;
  double v[kSlots];
  int nesterov, maximize, init_buffer;
  template <typename T>
  __device__ void operator()(int64_t i, T *p, const T *g, T *buf, T *, T *) const {
    const double momentum = v[MS_K_SGD_MOMENTUM];
    double pi = p[i], d = effective_grad(g[i], pi, maximize, v[MS_K_SGD_WEIGHT_DECAY]);
    if (buf) {
      double b = init_buffer ? d : (double)buf[i] * momentum + (1 - v[MS_K_SGD_DAMPENING]) * d;
      buf[i] = (T)b;
      d = nesterov ? d + momentum * b : b;
    }
    p[i] = (T)(pi + -v[MS_K_SGD_LR] * d);
  }
};

struct AdamStep {
  static constexpr int kSlots = MS_K_ADAM_SLOTS;
  double v[kSlots];
  int maximize; // amsgrad: vmax is not NULL
  template <typename T>
  __device__ void operator()(int64_t i, T *p, const T *g, T *m, T *sq, T *vmax) const {
    const double beta1 = v[MS_K_ADAM_BETA1], beta2 = v[MS_K_ADAM_BETA2];
    double pi = p[i], gi = effective_grad(g[i], pi, maximize, v[MS_K_ADAM_L2]);
    pi *= v[MS_K_ADAM_DECAY];
    double mi = (double)m[i] * beta1 + (1 - beta1) * gi;
    double vi = (double)sq[i] * beta2 + (1 - beta2) * gi * gi, vv = vi;
    m[i] = (T)mi, sq[i] = (T)vi;
    if (vmax) vv = max_nan(vmax[i], vi), vmax[i] = (T)vv;
    double denom = sqrt(vv) / v[MS_K_ADAM_BC2_SQRT] + v[MS_K_ADAM_EPS];
    p[i] = (T)(pi + -v[MS_K_ADAM_STEP_SIZE] * mi / denom);
  }
};

struct AdadeltaStep {
  static constexpr int kSlots = MS_K_ADADELTA_SLOTS;
  double v[kSlots];
  int maximize;
  template <typename T>
  __device__ void operator()(int64_t i, T *p, const T *g, T *sq, T *acc, T *) const {
    const double rho = v[MS_K_ADADELTA_RHO], eps = v[MS_K_ADADELTA_EPS];
    double pi = p[i], gi = effective_grad(g[i], pi, maximize, v[MS_K_ADADELTA_WEIGHT_DECAY]);
    double s = (double)sq[i] * rho + (1 - rho) * gi * gi;
    double std = sqrt(s + eps);
    double delta = sqrt((double)acc[i] + eps) / std * gi;
    sq[i] = (T)s;
    acc[i] = (T)((double)acc[i] * rho + (1 - rho) * delta * delta);
    p[i] = (T)(pi + -v[MS_K_ADADELTA_LR] * delta);
  }
};

static SgdStep sgd_of(const ms_k_sgd_hp *hp) {
  SgdStep st;
  ms_k_sgd_slots(hp, st.v);
  st.nesterov = hp->nesterov, st.maximize = hp->maximize, st.init_buffer = hp->init_buffer;
  return st;
}

static AdamStep adam_of(const ms_k_adam_hp *hp) {
  AdamStep st;
  ms_k_adam_slots(hp, st.v);
  st.maximize = hp->maximize;
  return st;
}

static AdadeltaStep adadelta_of(const ms_k_adadelta_hp *hp) {
  AdadeltaStep st;
  ms_k_adadelta_slots(hp, st.v);
  st.maximize = hp->maximize;
  return st;
}

template <typename T, typename Step>
__global__ void step_kernel(int64_t n, T *a0, const T *a1, T *a2, T *a3, T *a4, Step st) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    st(i, a0, a1, a2, a3, a4);
}

template <typename Step>
static int launch_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *a0, const void *a1, void *a2,
                       void *a3, void *a4, const Step &st) {
  if (n <= 0) return 0;
  cudaStream_t s = (cudaStream_t)x->stream;
  if (dt == MS_K_F64)
    step_kernel<double, Step><<<blocks_for(n), kThreads, 0, s>>>(n, (double *)a0, (const double *)a1, (double *)a2,
                                                                 (double *)a3, (double *)a4, st);
  else
    step_kernel<float, Step><<<blocks_for(n), kThreads, 0, s>>>(n, (float *)a0, (const float *)a1, (float *)a2,
                                                                (float *)a3, (float *)a4, st);
  return launch_status();
}

// ---- multi-tensor steps: one launch over a list; each block updates one chunk of one tensor ----

constexpr int64_t kListChunk = 4096; // elements per block: 16 per thread

// The list as one kernel argument (about 2.7 KiB), with the first block of each tensor.
struct ListLaunch {
  int count;
  int64_t n[MS_K_LIST_MAX];
  int64_t first_block[MS_K_LIST_MAX + 1];
  void *arr[MS_K_LIST_ARRAYS][MS_K_LIST_MAX];
};

// hp_dev: the Step's numbers are read from device memory when the kernel runs (a captured step).
template <typename T, typename Step>
__global__ void list_kernel(ListLaunch l, Step by_value, const double *hp_dev) {
  Step st = by_value;
  if (hp_dev) {
#pragma unroll
    for (int k = 0; k < Step::kSlots; k++) st.v[k] = hp_dev[k];
  }
  const int64_t b = blockIdx.x;
  int t = 0; // the tensor of this block (tensors without elements have no blocks)
  while (t + 1 < l.count && l.first_block[t + 1] <= b) t++;
  const int64_t begin = (b - l.first_block[t]) * kListChunk;
  const int64_t end = l.n[t] - begin < kListChunk ? l.n[t] : begin + kListChunk;
  T *a0 = (T *)l.arr[0][t], *a2 = (T *)l.arr[2][t], *a3 = (T *)l.arr[3][t], *a4 = (T *)l.arr[4][t];
  const T *a1 = (const T *)l.arr[1][t];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) st(i, a0, a1, a2, a3, a4);
}

template <typename Step>
static int launch_list(const ms_k_exec *x, ms_k_dtype dt, const ms_k_tensor_list *l, const Step &st,
                       const double *hp_dev) {
  ListLaunch a;
  a.count = l->count;
  a.first_block[0] = 0;
  for (int t = 0; t < l->count; t++) {
    a.n[t] = l->n[t] > 0 ? l->n[t] : 0;
    a.first_block[t + 1] = a.first_block[t] + (a.n[t] + kListChunk - 1) / kListChunk;
    for (int k = 0; k < MS_K_LIST_ARRAYS; k++) a.arr[k][t] = l->arr[k][t];
  }
  const int64_t blocks = l->count > 0 ? a.first_block[l->count] : 0;
  if (blocks == 0) return 0;
  if (blocks > 0x7fffffff) return (int)cudaErrorInvalidConfiguration;
  cudaStream_t s = (cudaStream_t)x->stream;
  if (dt == MS_K_F64)
    list_kernel<double, Step><<<(unsigned)blocks, kThreads, 0, s>>>(a, st, hp_dev);
  else
    list_kernel<float, Step><<<(unsigned)blocks, kThreads, 0, s>>>(a, st, hp_dev);
  return launch_status();
}

extern "C" int ms_k_cuda_adadelta_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,
                                       void *square_avg, void *acc_delta, const ms_k_adadelta_hp *hp) {
  return launch_step(x, dt, n, param, grad, square_avg, acc_delta, NULL, adadelta_of(hp));
}

extern "C" int ms_k_cuda_sgd_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,
                                  void *momentum_buffer, const ms_k_sgd_hp *hp) {
  return launch_step(x, dt, n, param, grad, momentum_buffer, NULL, NULL, sgd_of(hp));
}

extern "C" int ms_k_cuda_adam_step(const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,
                                   void *exp_avg, void *exp_avg_sq, void *max_exp_avg_sq, const ms_k_adam_hp *hp) {
  return launch_step(x, dt, n, param, grad, exp_avg, exp_avg_sq, hp->amsgrad ? max_exp_avg_sq : NULL, adam_of(hp));
}

extern "C" int ms_k_cuda_sgd_step_list(const ms_k_exec *x, ms_k_dtype dt, const ms_k_tensor_list *l,
                                       const ms_k_sgd_hp *hp, const double *hp_dev) {
  return launch_list(x, dt, l, sgd_of(hp), hp_dev);
}

extern "C" int ms_k_cuda_adam_step_list(const ms_k_exec *x, ms_k_dtype dt, const ms_k_tensor_list *l,
                                        const ms_k_adam_hp *hp, const double *hp_dev) {
  return launch_list(x, dt, l, adam_of(hp), hp_dev);
}

extern "C" int ms_k_cuda_adadelta_step_list(const ms_k_exec *x, ms_k_dtype dt, const ms_k_tensor_list *l,
                                            const ms_k_adadelta_hp *hp, const double *hp_dev) {
  return launch_list(x, dt, l, adadelta_of(hp), hp_dev);
}

__global__ void write_slots_kernel(double *dst, ms_k_slots s) {
  if (threadIdx.x < MS_K_MAX_SLOTS) dst[threadIdx.x] = s.v[threadIdx.x];
}

extern "C" int ms_k_cuda_write_slots(const ms_k_exec *x, double *dst, const ms_k_slots *s) {
  write_slots_kernel<<<1, MS_K_MAX_SLOTS, 0, (cudaStream_t)x->stream>>>(dst, *s);
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
