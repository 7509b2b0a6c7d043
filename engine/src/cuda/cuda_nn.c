/* cuda_nn.c: the NN ops (softmax, dropout, losses, pooling, activations, embedding, norms), the
 * random fills and the optimizer steps on CUDA tensors: each makes the tensors' device current and queues the kernel
 * of kernels/cuda/ on its stream; the NN files (engine/src/nn/, optim/) keep every check and
 * call here at their dispatch points. */
#include "cuda_internal.h"
#include "cuda_ops.h"
#include "kernels/kernels_cuda.h"

/* The device of t made current; its stream. */
static void *data_or_null(ms_tensor *t) { return t ? ms_tensor_data(t) : NULL; }

ms_status ms_cuda_bernoulli_mask(ms_tensor *mask, uint64_t seed, uint64_t offset, double keep) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("dropout", mask, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_philox_bernoulli(seed, offset, ms_tensor_numel(mask), keep, ms_tensor_data(mask), s);
  return ms_cuda_check("dropout", (cudaError_t)err);
}

/* The fills below: out contiguous, of the compute dtype, on its CUDA device. */
ms_status ms_cuda_philox_uniform(ms_tensor *out, uint64_t seed, uint64_t offset, double low, double high) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("uniform_", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_philox_uniform((ms_k_dtype)out->dtype, seed, offset, ms_tensor_numel(out),
                                 ms_tensor_data(out), low, high, s);
  return ms_cuda_check("uniform_", (cudaError_t)err);
}

ms_status ms_cuda_philox_normal(ms_tensor *out, uint64_t seed, uint64_t offset, double mean, double std) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("normal_", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_philox_normal((ms_k_dtype)out->dtype, seed, offset, ms_tensor_numel(out),
                                ms_tensor_data(out), mean, std, s);
  return ms_cuda_check("normal_", (cudaError_t)err);
}

ms_status ms_cuda_philox_randint(ms_tensor *out, uint64_t seed, uint64_t offset, int64_t low, int64_t high) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("randint_", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_philox_randint_i64(seed, offset, ms_tensor_numel(out), ms_tensor_data(out), low, high, s);
  return ms_cuda_check("randint_", (cudaError_t)err);
}

ms_status ms_cuda_philox_bernoulli(ms_tensor *out, uint64_t seed, uint64_t offset, ms_tensor *p) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("bernoulli", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_philox_bernoulli_p(seed, offset, ms_tensor_numel(out), ms_tensor_data(p), 1,
                                     ms_tensor_data(out), s);
  return ms_cuda_check("bernoulli", (cudaError_t)err);
}

ms_status ms_cuda_masked_scale(ms_tensor *x, ms_tensor *mask, double scale, ms_tensor *y) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("dropout", y, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_masked_scale((ms_k_dtype)y->dtype, ms_tensor_numel(y), ms_tensor_data(x),
                               ms_tensor_data(mask), scale, ms_tensor_data(y), s);
  return ms_cuda_check("dropout", (cudaError_t)err);
}

/* ---- optimizer steps: the grad is contiguous; unused state tensors are NULL ---- */

ms_status ms_cuda_adadelta_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg,
                                ms_tensor *acc_delta, const ms_k_adadelta_hp *hp) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("adadelta_step", param, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_adadelta_step((ms_k_dtype)param->dtype, ms_tensor_numel(param), ms_tensor_data(param),
                                ms_tensor_data(grad), ms_tensor_data(square_avg), ms_tensor_data(acc_delta), hp, s);
  return ms_cuda_check("adadelta_step", (cudaError_t)err);
}

ms_status ms_cuda_sgd_step(ms_tensor *param, ms_tensor *grad, ms_tensor *momentum_buffer, const ms_k_sgd_hp *hp) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("sgd_step", param, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_sgd_step((ms_k_dtype)param->dtype, ms_tensor_numel(param), ms_tensor_data(param),
                           ms_tensor_data(grad), data_or_null(momentum_buffer), hp, s);
  return ms_cuda_check("sgd_step", (cudaError_t)err);
}

ms_status ms_cuda_adam_step(ms_tensor *param, ms_tensor *grad, ms_tensor *exp_avg, ms_tensor *exp_avg_sq,
                            ms_tensor *max_exp_avg_sq, const ms_k_adam_hp *hp) {
  const char *op = hp->decoupled ? "adamw_step" : "adam_step";
  cudaStream_t s;
  if (ms_cuda_use_tensor(op, param, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_adam_step((ms_k_dtype)param->dtype, ms_tensor_numel(param), ms_tensor_data(param),
                            ms_tensor_data(grad), ms_tensor_data(exp_avg), ms_tensor_data(exp_avg_sq),
                            data_or_null(max_exp_avg_sq), hp, s);
  return ms_cuda_check(op, (cudaError_t)err);
}

ms_status ms_cuda_adagrad_step(ms_tensor *param, ms_tensor *grad, ms_tensor *state_sum, const ms_k_adagrad_hp *hp) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("adagrad_step", param, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_adagrad_step((ms_k_dtype)param->dtype, ms_tensor_numel(param), ms_tensor_data(param),
                               ms_tensor_data(grad), ms_tensor_data(state_sum), hp, s);
  return ms_cuda_check("adagrad_step", (cudaError_t)err);
}

ms_status ms_cuda_rmsprop_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg, ms_tensor *grad_avg,
                               ms_tensor *momentum_buffer, const ms_k_rmsprop_hp *hp) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("rmsprop_step", param, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_rmsprop_step((ms_k_dtype)param->dtype, ms_tensor_numel(param), ms_tensor_data(param),
                               ms_tensor_data(grad), ms_tensor_data(square_avg), data_or_null(grad_avg),
                               data_or_null(momentum_buffer), hp, s);
  return ms_cuda_check("rmsprop_step", (cudaError_t)err);
}

