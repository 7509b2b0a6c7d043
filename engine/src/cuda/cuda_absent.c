/* cuda_absent.c: the CUDA API of moonshard/cuda.h in a build without CUDA: no device, and every
 * request for one answers "built without CUDA" as an engine error. */
#include "moonshard/cuda.h"

static const char *const REASON = "this moonshard was built without CUDA (configure with -DMS_CUDA=ON "
                                  "on a machine with the CUDA toolkit)";

static ms_status absent(const char *op) {
  return ms_error(MS_ERR_RUNTIME, "%s: CUDA is not available: %s", op, REASON);
}

bool ms_cuda_is_available(void) { return false; }
int ms_cuda_device_count(void) { return 0; }
const char *ms_cuda_unavailable_reason(void) { return REASON; }
ms_status ms_cuda_check_device(const char *op, int index) { return (void)index, absent(op); }
ms_status ms_cuda_device_name(int index, char *buf, size_t len, int *major, int *minor) {
  (void)index, (void)len, (void)major, (void)minor;
  if (len) buf[0] = 0;
  return absent("get_device_name");
}
ms_status ms_cuda_set_device(int index) { return (void)index, absent("set_device"); }
int ms_cuda_current_device(void) { return 0; }
ms_status ms_cuda_synchronize(int index) { return (void)index, absent("synchronize"); }

void *ms_cuda_alloc(int index, size_t nbytes, ms_mem_category category) {
  (void)index, (void)nbytes, (void)category;
  return absent("alloc"), NULL;
}
/* Nothing can have been allocated, so nothing is freed. */
void ms_cuda_free(int index, void *p, size_t nbytes, ms_mem_category category) {
  (void)index, (void)p, (void)nbytes, (void)category;
}
ms_status ms_cuda_memory_stats_get(int index, ms_cuda_memory_stats *out) {
  (void)index, (void)out;
  return absent("memory_stats");
}
int64_t ms_cuda_memory_current_total(void) { return 0; }
ms_status ms_cuda_reset_peak(int index) { return (void)index, absent("reset_peak_memory_stats"); }
ms_status ms_cuda_empty_cache(void) { return MS_OK; } /* as PyTorch: a no-op without devices */

ms_status ms_cuda_memcpy(void *dst, int dst_index, const void *src, int src_index, size_t nbytes,
                         ms_cuda_copy_kind kind) {
  (void)dst, (void)dst_index, (void)src, (void)src_index, (void)nbytes, (void)kind;
  return absent("copy");
}

ms_cuda_stream *ms_cuda_stream_create(int index) { return (void)index, absent("Stream"), NULL; }
void ms_cuda_stream_destroy(ms_cuda_stream *s) { (void)s; }
ms_status ms_cuda_stream_synchronize(ms_cuda_stream *s) { return (void)s, absent("Stream.synchronize"); }
ms_status ms_cuda_set_stream(int index, ms_cuda_stream *s) { return (void)index, (void)s, absent("set_stream"); }
ms_cuda_stream *ms_cuda_current_stream(int index) { return (void)index, NULL; }

ms_cuda_event *ms_cuda_event_create(bool timing) { return (void)timing, absent("Event"), NULL; }
void ms_cuda_event_destroy(ms_cuda_event *e) { (void)e; }
ms_status ms_cuda_event_record(ms_cuda_event *e, ms_cuda_stream *s) { return (void)e, (void)s, absent("Event.record"); }
ms_status ms_cuda_event_synchronize(ms_cuda_event *e) { return (void)e, absent("Event.synchronize"); }
ms_status ms_cuda_event_query(ms_cuda_event *e, bool *done) { return (void)e, *done = true, absent("Event.query"); }
ms_status ms_cuda_event_elapsed_ms(ms_cuda_event *a, ms_cuda_event *b, float *ms) {
  return (void)a, (void)b, (void)ms, absent("Event.elapsed_time");
}

/* ---- engine/src/cuda/cuda_ops.h: unreachable without CUDA tensors, but never a crash ---- */
#include "cuda_ops.h"

ms_status ms_cuda_gemm(double alpha, ms_tensor *a, ms_tensor *b, double beta, ms_tensor *c) {
  return (void)alpha, (void)a, (void)b, (void)beta, (void)c, absent("mm");
}
ms_status ms_cuda_softmax(ms_tensor *x, ms_tensor *y, int64_t outer, int64_t C, int64_t inner, int log) {
  return (void)x, (void)y, (void)outer, (void)C, (void)inner, (void)log, absent("softmax");
}
ms_status ms_cuda_softmax_backward(ms_tensor *y, ms_tensor *g, ms_tensor *gx, int64_t outer, int64_t C,
                                   int64_t inner, int log) {
  return (void)y, (void)g, (void)gx, (void)outer, (void)C, (void)inner, (void)log, absent("softmax");
}
ms_status ms_cuda_bernoulli_mask(ms_tensor *mask, uint64_t seed, uint64_t offset, double keep) {
  return (void)mask, (void)seed, (void)offset, (void)keep, absent("dropout");
}
ms_status ms_cuda_masked_scale(ms_tensor *x, ms_tensor *mask, double scale, ms_tensor *y) {
  return (void)x, (void)mask, (void)scale, (void)y, absent("dropout");
}
ms_status ms_cuda_philox_uniform(ms_tensor *out, uint64_t seed, uint64_t offset, double low, double high) {
  return (void)out, (void)seed, (void)offset, (void)low, (void)high, absent("uniform_");
}
ms_status ms_cuda_philox_normal(ms_tensor *out, uint64_t seed, uint64_t offset, double mean, double std) {
  return (void)out, (void)seed, (void)offset, (void)mean, (void)std, absent("normal_");
}
ms_status ms_cuda_philox_randint(ms_tensor *out, uint64_t seed, uint64_t offset, int64_t low, int64_t high) {
  return (void)out, (void)seed, (void)offset, (void)low, (void)high, absent("randint_");
}
ms_status ms_cuda_philox_bernoulli(ms_tensor *out, uint64_t seed, uint64_t offset, ms_tensor *p) {
  return (void)out, (void)seed, (void)offset, (void)p, absent("bernoulli");
}
ms_status ms_cuda_nll_rows(const ms_k_nll_args *a, ms_tensor *logp, ms_tensor *nll, ms_tensor *wt,
                           ms_tensor *smooth) {
  return (void)a, (void)logp, (void)nll, (void)wt, (void)smooth, absent("nll_loss");
}
ms_status ms_cuda_nll_reduce(ms_tensor *nll, ms_tensor *wt, ms_tensor *smooth, double s, int64_t C, bool mean,
                             ms_tensor *out, ms_tensor *sw) {
  (void)nll, (void)wt, (void)smooth, (void)s, (void)C, (void)mean, (void)out, (void)sw;
  return absent("nll_loss");
}
ms_status ms_cuda_nll_backward(const ms_k_nll_args *a, ms_tensor *logp, ms_tensor *g, int64_t gs,
                               double nll_scale, double smooth_scale, double smoothing, ms_tensor *gx) {
  (void)a, (void)logp, (void)g, (void)gs, (void)nll_scale, (void)smooth_scale, (void)smoothing, (void)gx;
  return absent("nll_loss");
}
ms_status ms_cuda_max_pool2d(const ms_k_pool2d_geom *g, ms_tensor *x, ms_tensor *out, ms_tensor *indices) {
  return (void)g, (void)x, (void)out, (void)indices, absent("max_pool2d");
}
ms_status ms_cuda_max_pool2d_backward(const ms_k_pool2d_geom *g, ms_tensor *gout, ms_tensor *indices,
                                      ms_tensor *gx) {
  return (void)g, (void)gout, (void)indices, (void)gx, absent("max_pool2d");
}
ms_status ms_cuda_adadelta_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg,
                                ms_tensor *acc_delta, const ms_k_adadelta_hp *hp) {
  return (void)param, (void)grad, (void)square_avg, (void)acc_delta, (void)hp, absent("adadelta_step");
}
ms_status ms_cuda_sgd_step(ms_tensor *param, ms_tensor *grad, ms_tensor *momentum_buffer, const ms_k_sgd_hp *hp) {
  return (void)param, (void)grad, (void)momentum_buffer, (void)hp, absent("sgd_step");
}
ms_status ms_cuda_adam_step(ms_tensor *param, ms_tensor *grad, ms_tensor *exp_avg, ms_tensor *exp_avg_sq,
                            ms_tensor *max_exp_avg_sq, const ms_k_adam_hp *hp) {
  return (void)param, (void)grad, (void)exp_avg, (void)exp_avg_sq, (void)max_exp_avg_sq, (void)hp, absent("adam_step");
}
ms_status ms_cuda_adagrad_step(ms_tensor *param, ms_tensor *grad, ms_tensor *state_sum, const ms_k_adagrad_hp *hp) {
  return (void)param, (void)grad, (void)state_sum, (void)hp, absent("adagrad_step");
}
ms_status ms_cuda_rmsprop_step(ms_tensor *param, ms_tensor *grad, ms_tensor *square_avg, ms_tensor *grad_avg,
                               ms_tensor *momentum_buffer, const ms_k_rmsprop_hp *hp) {
  (void)param, (void)grad, (void)square_avg, (void)grad_avg, (void)momentum_buffer, (void)hp;
  return absent("rmsprop_step");
}
ms_status ms_cuda_avg_pool2d(const ms_k_pool2d_geom *g, const ms_k_pool_windows *win, ms_tensor *x, ms_tensor *out) {
  return (void)g, (void)win, (void)x, (void)out, absent("avg_pool2d");
}
ms_status ms_cuda_avg_pool2d_backward(const ms_k_pool2d_geom *g, const ms_k_pool_windows *win, ms_tensor *gout,
                                      ms_tensor *gx) {
  return (void)g, (void)win, (void)gout, (void)gx, absent("avg_pool2d");
}
ms_status ms_cuda_activation(const char *op, ms_k_act act, ms_tensor *x, ms_tensor *y) {
  return (void)act, (void)x, (void)y, absent(op);
}
ms_status ms_cuda_activation_backward(const char *op, ms_k_act act, ms_tensor *x, ms_tensor *g, ms_tensor *gx) {
  return (void)act, (void)x, (void)g, (void)gx, absent(op);
}
ms_status ms_cuda_embedding(ms_tensor *idx, int64_t base, ms_tensor *w, ms_tensor *out) {
  return (void)idx, (void)base, (void)w, (void)out, absent("embedding");
}
ms_status ms_cuda_embedding_backward(ms_tensor *idx, int64_t base, int64_t padding_idx, ms_tensor *g, ms_tensor *gw) {
  return (void)idx, (void)base, (void)padding_idx, (void)g, (void)gw, absent("embedding");
}
ms_status ms_cuda_layer_norm(int64_t M, int64_t N, ms_tensor *x, ms_tensor *w, ms_tensor *b, double eps,
                             ms_tensor *y, ms_tensor *mean, ms_tensor *rstd) {
  (void)M, (void)N, (void)x, (void)w, (void)b, (void)eps, (void)y, (void)mean, (void)rstd;
  return absent("layer_norm");
}
ms_status ms_cuda_layer_norm_backward(int64_t M, int64_t N, ms_tensor *x, ms_tensor *g, ms_tensor *mean,
                                      ms_tensor *rstd, ms_tensor *w, ms_tensor *gx, ms_tensor *gw, ms_tensor *gb) {
  (void)M, (void)N, (void)x, (void)g, (void)mean, (void)rstd, (void)w, (void)gx, (void)gw, (void)gb;
  return absent("layer_norm");
}
ms_status ms_cuda_batch_norm_stats(int64_t N, int64_t C, int64_t inner, ms_tensor *x, ms_tensor *mean,
                                   ms_tensor *var) {
  return (void)N, (void)C, (void)inner, (void)x, (void)mean, (void)var, absent("batch_norm");
}
ms_status ms_cuda_batch_norm_apply(int64_t N, int64_t C, int64_t inner, ms_tensor *x, ms_tensor *mean,
                                   ms_tensor *invstd, ms_tensor *w, ms_tensor *b, ms_tensor *y) {
  (void)N, (void)C, (void)inner, (void)x, (void)mean, (void)invstd, (void)w, (void)b, (void)y;
  return absent("batch_norm");
}
ms_status ms_cuda_batch_norm_backward(int64_t N, int64_t C, int64_t inner, ms_tensor *x, ms_tensor *g,
                                      ms_tensor *mean, ms_tensor *invstd, ms_tensor *w, int training, ms_tensor *gx,
                                      ms_tensor *gw, ms_tensor *gb) {
  (void)N, (void)C, (void)inner, (void)x, (void)g, (void)mean, (void)invstd, (void)w, (void)training;
  (void)gx, (void)gw, (void)gb;
  return absent("batch_norm");
}
ms_status ms_cuda_conv2d_forward(const ms_k_conv2d_geom *g, ms_tensor *x, ms_tensor *w, ms_tensor *b,
                                 ms_tensor *out) {
  return (void)g, (void)x, (void)w, (void)b, (void)out, absent("conv2d");
}
ms_status ms_cuda_conv2d_backward(const ms_k_conv2d_geom *g, ms_tensor *x, ms_tensor *w, ms_tensor *gout,
                                  ms_tensor *gx, ms_tensor *gw, ms_tensor *gb) {
  return (void)g, (void)x, (void)w, (void)gout, (void)gx, (void)gw, (void)gb, absent("conv2d");
}

/* ---- page-locked host memory: none without CUDA ---- */
void *ms_cuda_host_alloc(size_t nbytes) { return (void)nbytes, absent("pin_memory"), NULL; }
void ms_cuda_host_free(void *p) { (void)p; }
ms_status ms_cuda_host_record_use(void *p, int index) { return (void)p, (void)index, absent("pin_memory"); }
ms_status ms_cuda_host_memcpy_async(void *dst, int dst_index, const void *src, int src_index, size_t nbytes,
                                    ms_cuda_copy_kind kind) {
  (void)dst, (void)dst_index, (void)src, (void)src_index, (void)nbytes, (void)kind;
  return absent("copy");
}
ms_status ms_cuda_host_stats(int64_t *live, int64_t *cached) { return *live = 0, *cached = 0, MS_OK; }
