/* cuda_nn.c: the NN ops (softmax, losses, pooling, activations, embedding, norms) on CUDA
 * tensors: each makes the tensors' device current and queues the kernel
 * of kernels/cuda/ on its stream; the NN files (engine/src/nn/, optim/) keep every check and
 * call here at their dispatch points. */
#include "cuda_internal.h"
#include "cuda_ops.h"
#include "kernels/kernels_cuda.h"

/* The device of t made current; its stream. */
static void *data_or_null(ms_tensor *t) { return t ? ms_tensor_data(t) : NULL; }

ms_status ms_cuda_softmax(ms_tensor *x, ms_tensor *y, int64_t outer, int64_t C, int64_t inner, int log) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("softmax", y, &s) != MS_OK) return MS_ERR_RUNTIME;
  return ms_cuda_check("softmax", (cudaError_t)ms_kc_softmax((ms_k_dtype)x->dtype, outer, C, inner,
                                                             ms_tensor_data(x), ms_tensor_data(y), log, s));
}

ms_status ms_cuda_softmax_backward(ms_tensor *y, ms_tensor *g, ms_tensor *gx, int64_t outer, int64_t C,
                                   int64_t inner, int log) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("softmax backward", gx, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_softmax_backward((ms_k_dtype)y->dtype, outer, C, inner, ms_tensor_data(y),
                                   ms_tensor_data(g), ms_tensor_data(gx), log, s);
  return ms_cuda_check("softmax backward", (cudaError_t)err);
}

ms_status ms_cuda_nll_rows(const ms_k_nll_args *a, ms_tensor *logp, ms_tensor *nll, ms_tensor *wt,
                           ms_tensor *smooth) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("nll_loss", nll, &s) != MS_OK) return MS_ERR_RUNTIME;
  ms_k_bad_value *bad = ms_cuda_bad_value_slot();
  if (!bad) return MS_ERR_RUNTIME;
  int err = ms_kc_nll_rows((ms_k_dtype)logp->dtype, a, ms_tensor_data(logp), ms_tensor_data(nll),
                           ms_tensor_data(wt), data_or_null(smooth), bad, s);
  return ms_cuda_check("nll_loss", (cudaError_t)err);
}

ms_status ms_cuda_nll_reduce(ms_tensor *nll, ms_tensor *wt, ms_tensor *smooth, double s, int64_t C, bool mean,
                             ms_tensor *out, ms_tensor *sw) {
  cudaStream_t st;
  if (ms_cuda_use_tensor("nll_loss", out, &st) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_nll_reduce((ms_k_dtype)nll->dtype, ms_tensor_numel(nll), ms_tensor_data(nll), ms_tensor_data(wt),
                             data_or_null(smooth), s, C, mean, ms_tensor_data(out), ms_tensor_data(sw), st);
  return ms_cuda_check("nll_loss", (cudaError_t)err);
}

ms_status ms_cuda_nll_backward(const ms_k_nll_args *a, ms_tensor *logp, ms_tensor *g, int64_t gs,
                               double nll_scale, double smooth_scale, double smoothing, ms_tensor *gx) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("nll_loss backward", gx, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_nll_backward((ms_k_dtype)gx->dtype, a, data_or_null(logp), ms_tensor_data(g), gs,
                               nll_scale, smooth_scale, smoothing, ms_tensor_data(gx), s);
  return ms_cuda_check("nll_loss backward", (cudaError_t)err);
}

ms_status ms_cuda_max_pool2d(const ms_k_pool2d_geom *g, ms_tensor *x, ms_tensor *out, ms_tensor *indices) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("max_pool2d", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_max_pool2d_forward((ms_k_dtype)x->dtype, g, ms_tensor_data(x), ms_tensor_data(out),
                                     ms_tensor_data(indices), s);
  return ms_cuda_check("max_pool2d", (cudaError_t)err);
}

ms_status ms_cuda_max_pool2d_backward(const ms_k_pool2d_geom *g, ms_tensor *gout, ms_tensor *indices,
                                      ms_tensor *gx) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("max_pool2d backward", gx, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_max_pool2d_backward((ms_k_dtype)gx->dtype, g, ms_tensor_data(gout), ms_tensor_data(indices),
                                      ms_tensor_data(gx), s);
  return ms_cuda_check("max_pool2d backward", (cudaError_t)err);
}

/* ---- activations, embedding, normalization ---- */

ms_status ms_cuda_activation(const char *op, ms_k_act act, ms_tensor *x, ms_tensor *y) {
  cudaStream_t s;
  if (ms_cuda_use_tensor(op, y, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_activation(act, (ms_k_dtype)x->dtype, ms_tensor_numel(x), ms_tensor_data(x), ms_tensor_data(y), s);
  return ms_cuda_check(op, (cudaError_t)err);
}

ms_status ms_cuda_activation_backward(const char *op, ms_k_act act, ms_tensor *x, ms_tensor *g, ms_tensor *gx) {
  cudaStream_t s;
  if (ms_cuda_use_tensor(op, gx, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_activation_backward(act, (ms_k_dtype)x->dtype, ms_tensor_numel(x), ms_tensor_data(x),
                                      ms_tensor_data(g), ms_tensor_data(gx), s);
  return ms_cuda_check(op, (cudaError_t)err);
}

ms_status ms_cuda_embedding(ms_tensor *idx, int64_t base, ms_tensor *w, ms_tensor *out) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("embedding", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_embedding((ms_k_dtype)w->dtype, ms_tensor_numel(idx), w->shape[1], ms_tensor_data(idx), base,
                            ms_tensor_data(w), ms_tensor_data(out), s);
  return ms_cuda_check("embedding", (cudaError_t)err);
}

ms_status ms_cuda_embedding_backward(ms_tensor *idx, int64_t base, int64_t padding_idx, ms_tensor *g, ms_tensor *gw) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("embedding backward", gw, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_embedding_backward((ms_k_dtype)gw->dtype, ms_tensor_numel(idx), gw->shape[1], ms_tensor_data(idx),
                                     base, padding_idx, ms_tensor_data(g), ms_tensor_data(gw), s);
  return ms_cuda_check("embedding backward", (cudaError_t)err);
}

ms_status ms_cuda_layer_norm(int64_t M, int64_t N, ms_tensor *x, ms_tensor *w, ms_tensor *b, double eps,
                             ms_tensor *y, ms_tensor *mean, ms_tensor *rstd) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("layer_norm", y, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_layer_norm((ms_k_dtype)x->dtype, M, N, ms_tensor_data(x), data_or_null(w), data_or_null(b), eps,
                             ms_tensor_data(y), ms_tensor_data(mean), ms_tensor_data(rstd), s);
  return ms_cuda_check("layer_norm", (cudaError_t)err);
}

ms_status ms_cuda_layer_norm_backward(int64_t M, int64_t N, ms_tensor *x, ms_tensor *g, ms_tensor *mean,
                                      ms_tensor *rstd, ms_tensor *w, ms_tensor *gx, ms_tensor *gw, ms_tensor *gb) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("layer_norm backward", x, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_layer_norm_backward((ms_k_dtype)x->dtype, M, N, ms_tensor_data(x), ms_tensor_data(g),
                                      ms_tensor_data(mean), ms_tensor_data(rstd), data_or_null(w), data_or_null(gx),
                                      data_or_null(gw), data_or_null(gb), s);
  return ms_cuda_check("layer_norm backward", (cudaError_t)err);
}

ms_status ms_cuda_batch_norm_stats(int64_t N, int64_t C, int64_t inner, ms_tensor *x, ms_tensor *mean,
                                   ms_tensor *var) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("batch_norm", x, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_batch_norm_stats((ms_k_dtype)x->dtype, N, C, inner, ms_tensor_data(x), ms_tensor_data(mean),
                                   ms_tensor_data(var), s);
  return ms_cuda_check("batch_norm", (cudaError_t)err);
}

ms_status ms_cuda_batch_norm_apply(int64_t N, int64_t C, int64_t inner, ms_tensor *x, ms_tensor *mean,
                                   ms_tensor *invstd, ms_tensor *w, ms_tensor *b, ms_tensor *y) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("batch_norm", y, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_batch_norm_apply((ms_k_dtype)x->dtype, N, C, inner, ms_tensor_data(x), ms_tensor_data(mean),
                                   ms_tensor_data(invstd), data_or_null(w), data_or_null(b), ms_tensor_data(y), s);
  return ms_cuda_check("batch_norm", (cudaError_t)err);
}

ms_status ms_cuda_batch_norm_backward(int64_t N, int64_t C, int64_t inner, ms_tensor *x, ms_tensor *g,
                                      ms_tensor *mean, ms_tensor *invstd, ms_tensor *w, int training, ms_tensor *gx,
                                      ms_tensor *gw, ms_tensor *gb) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("batch_norm backward", x, &s) != MS_OK) return MS_ERR_RUNTIME;
  int err = ms_kc_batch_norm_backward((ms_k_dtype)x->dtype, N, C, inner, ms_tensor_data(x), ms_tensor_data(g),
                                      ms_tensor_data(mean), ms_tensor_data(invstd), data_or_null(w), training,
                                      data_or_null(gx), data_or_null(gw), data_or_null(gb), s);
  return ms_cuda_check("batch_norm backward", (cudaError_t)err);
}

/* ---- average pooling: the host's windows travel to the device in one int64 buffer ---- */

/* *buf (new reference) holds the six window arrays on t's device; *dw points into it. */
static ms_status upload_windows(const ms_k_pool2d_geom *g, const ms_k_pool_windows *w,
                                const ms_tensor *t, ms_tensor **buf, ms_k_pool_windows *dw) {
  int64_t len = 3 * (g->oh + g->ow);
  ms_device dev = ms_tensor_device(t);
  *buf = ms_tensor_new_empty_on(dev, 1, &len, MS_INT64);
  if (!*buf) return MS_ERR_MEMORY;
  int64_t *d = ms_tensor_data(*buf);
  const int64_t *src[6] = {w->hs, w->he, w->hdiv, w->ws, w->we, w->wdiv};
  const int64_t *at[6];
  for (int k = 0; k < 6; k++) {
    int64_t n = k < 3 ? g->oh : g->ow;
    at[k] = d;
    if (ms_cuda_memcpy(d, dev.index, src[k], 0, (size_t)n * sizeof(int64_t), MS_CUDA_H2D) != MS_OK) {
      ms_tensor_release(*buf), *buf = NULL;
      return MS_ERR_RUNTIME; /* the copy's own message stands */
    }
    d += n;
  }
  *dw = (ms_k_pool_windows){at[0], at[1], at[2], at[3], at[4], at[5]};
  return MS_OK;
}

ms_status ms_cuda_avg_pool2d(const ms_k_pool2d_geom *g, const ms_k_pool_windows *win, ms_tensor *x, ms_tensor *out) {
  cudaStream_t s;
  ms_tensor *buf;
  ms_k_pool_windows dw;
  if (ms_cuda_use_tensor("avg_pool2d", out, &s) != MS_OK || upload_windows(g, win, out, &buf, &dw) != MS_OK)
    return MS_ERR_RUNTIME;
  int err = ms_kc_avg_pool2d_forward((ms_k_dtype)x->dtype, g, &dw, ms_tensor_data(x), ms_tensor_data(out), s);
  ms_tensor_release(buf); /* the allocator reuses it in stream order, after the kernel */
  return ms_cuda_check("avg_pool2d", (cudaError_t)err);
}

ms_status ms_cuda_avg_pool2d_backward(const ms_k_pool2d_geom *g, const ms_k_pool_windows *win, ms_tensor *gout,
                                      ms_tensor *gx) {
  cudaStream_t s;
  ms_tensor *buf;
  ms_k_pool_windows dw;
  if (ms_cuda_use_tensor("avg_pool2d backward", gx, &s) != MS_OK ||
      upload_windows(g, win, gx, &buf, &dw) != MS_OK)
    return MS_ERR_RUNTIME;
  int err = ms_kc_avg_pool2d_backward((ms_k_dtype)gx->dtype, g, &dw, ms_tensor_data(gout), ms_tensor_data(gx), s);
  ms_tensor_release(buf);
  return ms_cuda_check("avg_pool2d backward", (cudaError_t)err);
}
