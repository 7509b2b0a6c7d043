/* cuda_nn.c: the NN ops and optimizer steps on CUDA tensors: each makes the tensors' device
 * current and queues the kernel of kernels/cuda/ on its stream; the NN files
 * (engine/src/nn/, optim/) keep every check and call here at their dispatch points. */
#include "cuda_internal.h"
#include "cuda_ops.h"
#include "kernels/kernels_cuda.h"

/* The device of t made current; its stream. */
static ms_status use(const char *op, const ms_tensor *t, cudaStream_t *s) {
  int dev = ms_tensor_device(t).index;
  if (ms_cuda_use(op, dev) != MS_OK) return MS_ERR_RUNTIME;
  *s = ms_cuda_raw_stream(dev);
  return MS_OK;
}

static void *data_or_null(ms_tensor *t) { return t ? ms_tensor_data(t) : NULL; }

ms_status ms_cuda_softmax(ms_tensor *x, ms_tensor *y, int64_t outer, int64_t C, int64_t inner, int log) {
  cudaStream_t s;
  if (use("softmax", y, &s) != MS_OK) return MS_ERR_RUNTIME;
  return ms_cuda_check("softmax", (cudaError_t)ms_kc_softmax((ms_k_dtype)x->dtype, outer, C, inner,
                                                             ms_tensor_data(x), ms_tensor_data(y), log, s));
}

ms_status ms_cuda_softmax_backward(ms_tensor *y, ms_tensor *g, ms_tensor *gx, int64_t outer, int64_t C,
                                   int64_t inner, int log) {
  cudaStream_t s;
  if (use("softmax backward", gx, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_softmax_backward((ms_k_dtype)y->dtype, outer, C, inner, ms_tensor_data(y),
                                   ms_tensor_data(g), ms_tensor_data(gx), log, s);
  return ms_cuda_check("softmax backward", (cudaError_t)err);
}

ms_status ms_cuda_bernoulli_mask(ms_tensor *mask, uint64_t seed, uint64_t offset, double keep) {
  cudaStream_t s;
  if (use("dropout", mask, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_philox_bernoulli(seed, offset, ms_tensor_numel(mask), keep, ms_tensor_data(mask), s);
  return ms_cuda_check("dropout", (cudaError_t)err);
}

ms_status ms_cuda_masked_scale(ms_tensor *x, ms_tensor *mask, double scale, ms_tensor *y) {
  cudaStream_t s;
  if (use("dropout", y, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_masked_scale((ms_k_dtype)y->dtype, ms_tensor_numel(y), ms_tensor_data(x),
                               ms_tensor_data(mask), scale, ms_tensor_data(y), s);
  return ms_cuda_check("dropout", (cudaError_t)err);
}

ms_status ms_cuda_nll_rows(const ms_k_nll_args *a, ms_tensor *logp, ms_tensor *nll, ms_tensor *wt,
                           ms_tensor *smooth) {
  cudaStream_t s;
  if (use("nll_loss", nll, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_nll_rows((ms_k_dtype)logp->dtype, a, ms_tensor_data(logp), ms_tensor_data(nll),
                           ms_tensor_data(wt), data_or_null(smooth), s);
  return ms_cuda_check("nll_loss", (cudaError_t)err);
}

ms_status ms_cuda_nll_backward(const ms_k_nll_args *a, ms_tensor *logp, ms_tensor *g, int64_t gs,
                               double nll_scale, double smooth_scale, double smoothing, ms_tensor *gx) {
  cudaStream_t s;
  if (use("nll_loss backward", gx, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_nll_backward((ms_k_dtype)gx->dtype, a, data_or_null(logp), ms_tensor_data(g), gs,
                               nll_scale, smooth_scale, smoothing, ms_tensor_data(gx), s);
  return ms_cuda_check("nll_loss backward", (cudaError_t)err);
}

ms_status ms_cuda_max_pool2d(const ms_k_pool2d_geom *g, ms_tensor *x, ms_tensor *out, ms_tensor *indices) {
  cudaStream_t s;
  if (use("max_pool2d", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_max_pool2d_forward((ms_k_dtype)x->dtype, g, ms_tensor_data(x), ms_tensor_data(out),
                                     ms_tensor_data(indices), s);
  return ms_cuda_check("max_pool2d", (cudaError_t)err);
}

ms_status ms_cuda_max_pool2d_backward(const ms_k_pool2d_geom *g, ms_tensor *gout, ms_tensor *indices,
                                      ms_tensor *gx) {
  cudaStream_t s;
  if (use("max_pool2d backward", gx, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_max_pool2d_backward((ms_k_dtype)gx->dtype, g, ms_tensor_data(gout), ms_tensor_data(indices),
                                      ms_tensor_data(gx), s);
  return ms_cuda_check("max_pool2d backward", (cudaError_t)err);
}

ms_status ms_cuda_adadelta_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg,
                                ms_tensor *acc_delta, const ms_k_adadelta_hp *hp) {
  cudaStream_t s;
  if (use("adadelta_step", param, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_adadelta_step((ms_k_dtype)param->dtype, ms_tensor_numel(param), ms_tensor_data(param),
                                ms_tensor_data(grad), ms_tensor_data(square_avg), ms_tensor_data(acc_delta), hp, s);
  return ms_cuda_check("adadelta_step", (cudaError_t)err);
}
