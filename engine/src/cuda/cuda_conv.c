/* cuda_conv.c: conv2d forward and both backwards on CUDA tensors through cuDNN: one handle per
 * device; each direction runs a cached graph-API plan (cuda_conv_plan.c), or, for a shape the
 * graph API cannot plan, the legacy call with the algorithm of each shape chosen once (cuDNN's
 * heuristics, the first whose workspace can be had); workspaces come from the caching allocator.
 * float32 runs with FMA math, not TF32, so results agree with the CPU to float32 rounding. The
 * bias and its gradient are kernels of ours (kernels/cuda/nn_ops.cu). A CUDA build without cuDNN
 * answers with an error saying so. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_conv_plan.h"
#include "cuda_internal.h"
#include "cuda_ops.h"
#include "kernels/kernels_cuda.h"

#ifndef MS_HAVE_CUDNN

static ms_status no_cudnn(void) {
  return ms_error(MS_ERR_RUNTIME, "conv2d: CUDA tensors need cuDNN, which this build did not find "
                  "(configure with CUDNN_ROOT set)");
}
ms_status ms_cuda_conv2d_forward(const ms_k_conv2d_geom *g, ms_tensor *x, ms_tensor *w, ms_tensor *b,
                                 ms_tensor *out) {
  return (void)g, (void)x, (void)w, (void)b, (void)out, no_cudnn();
}
ms_status ms_cuda_conv2d_backward(const ms_k_conv2d_geom *g, ms_tensor *x, ms_tensor *w, ms_tensor *gout,
                                  ms_tensor *gx, ms_tensor *gw, ms_tensor *gb) {
  return (void)g, (void)x, (void)w, (void)gout, (void)gx, (void)gw, (void)gb, no_cudnn();
}

#else

static ms_status check_dnn(const char *op, cudnnStatus_t st) {
  if (st == CUDNN_STATUS_SUCCESS) return MS_OK;
  return ms_error(st == CUDNN_STATUS_ALLOC_FAILED ? MS_ERR_MEMORY : MS_ERR_RUNTIME, "%s: cuDNN error: %s",
                  op, cudnnGetErrorString(st));
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cudnnHandle_t handles[MS_CUDA_MAX_DEVICES];

static cudnnHandle_t handle_for(const char *op, int dev) {
  if (ms_cuda_use(op, dev) != MS_OK) return NULL;
  pthread_mutex_lock(&lock);
  if (!handles[dev] && check_dnn(op, cudnnCreate(&handles[dev])) != MS_OK) handles[dev] = NULL;
  cudnnHandle_t h = handles[dev];
  pthread_mutex_unlock(&lock);
  if (h && check_dnn(op, cudnnSetStream(h, ms_cuda_raw_stream(dev))) != MS_OK) return NULL;
  return h;
}

/* ---- the algorithm cache: one entry per (device, dtype, geometry) -------------------------- */
typedef struct algo_entry {
  int device, dtype;
  ms_k_conv2d_geom g;
  int fwd, bwd_data, bwd_filter; /* -1 until chosen */
  struct algo_entry *next;
} algo_entry;
static algo_entry *algos;

static algo_entry *entry_for(int dev, ms_dtype dt, const ms_k_conv2d_geom *g) {
  for (algo_entry *e = algos; e; e = e->next)
    if (e->device == dev && e->dtype == (int)dt && memcmp(&e->g, g, sizeof *g) == 0) return e;
  algo_entry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  *e = (algo_entry){dev, (int)dt, *g, -1, -1, -1, algos};
  return algos = e;
}

/* The descriptors of one convolution (x, w, y and the op); freed by descs_free. */
typedef struct descs {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
} descs;

static void descs_free(descs *d) {
  if (d->x) cudnnDestroyTensorDescriptor(d->x);
  if (d->y) cudnnDestroyTensorDescriptor(d->y);
  if (d->w) cudnnDestroyFilterDescriptor(d->w);
  if (d->conv) cudnnDestroyConvolutionDescriptor(d->conv);
}

static ms_status descs_make(const char *op, const ms_k_conv2d_geom *g, ms_dtype dt, descs *d) {
  *d = (descs){0};
  const int64_t dims[] = {g->n, g->c, g->h, g->w, g->o, g->oh, g->ow, g->kh, g->kw};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
    if (dims[i] > 0x7fffffff / 4)
      return ms_error(MS_ERR_ARG, "%s: sizes beyond 2^29 are not supported by cuDNN's 4-D descriptors", op);
  cudnnDataType_t t = dt == MS_FLOAT64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  cudnnStatus_t s = cudnnCreateTensorDescriptor(&d->x);
  if (!s) s = cudnnCreateTensorDescriptor(&d->y);
  if (!s) s = cudnnCreateFilterDescriptor(&d->w);
  if (!s) s = cudnnCreateConvolutionDescriptor(&d->conv);
  if (!s) s = cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, t, (int)g->n, (int)g->c, (int)g->h, (int)g->w);
  if (!s) s = cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, t, (int)g->n, (int)g->o, (int)g->oh, (int)g->ow);
  if (!s) s = cudnnSetFilter4dDescriptor(d->w, t, CUDNN_TENSOR_NCHW, (int)g->o, (int)(g->c / g->groups), (int)g->kh, (int)g->kw);
  if (!s) s = cudnnSetConvolution2dDescriptor(d->conv, (int)g->ph, (int)g->pw, (int)g->sh, (int)g->sw, (int)g->dh,
                                              (int)g->dw, CUDNN_CROSS_CORRELATION, t);
  if (!s) s = cudnnSetConvolutionGroupCount(d->conv, (int)g->groups);
  if (!s) s = cudnnSetConvolutionMathType(d->conv, CUDNN_FMA_MATH);
  if (s) descs_free(d);
  return check_dnn(op, s);
}

/* Workspace from the caching allocator (NULL for 0 bytes). */
typedef struct workspace {
  int device;
  size_t bytes;
  void *p;
} workspace;

static ms_status workspace_get(workspace *ws, int dev, size_t bytes) {
  *ws = (workspace){dev, bytes, NULL};
  if (bytes == 0) return MS_OK;
  ws->p = ms_cuda_alloc(dev, bytes, MS_MEM_OTHER);
  return ws->p ? MS_OK : MS_ERR_MEMORY;
}

static void workspace_put(workspace *ws) {
  if (ws->p) ms_cuda_free(ws->device, ws->p, ws->bytes, MS_MEM_OTHER);
}

/* Picks among cuDNN's ranked candidates the first that succeeds with a workspace it can have;
 * done once per shape. The three directions share this shape of code, so one chooser per kind. */
#define MAX_ALGOS 16

static ms_status choose_fwd(cudnnHandle_t h, const descs *d, int *algo) {
  cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
  int n = 0;
  if (check_dnn("conv2d", cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y, MAX_ALGOS, &n, perf)))
    return MS_ERR_RUNTIME;
  for (int i = 0; i < n; i++)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return *algo = (int)perf[i].algo, MS_OK;
  return ms_error(MS_ERR_RUNTIME, "conv2d: cuDNN offers no forward algorithm for this shape");
}

static ms_status choose_bwd_data(cudnnHandle_t h, const descs *d, int *algo) {
  cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
  int n = 0;
  if (check_dnn("conv2d backward", cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x, MAX_ALGOS, &n, perf)))
    return MS_ERR_RUNTIME;
  for (int i = 0; i < n; i++)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return *algo = (int)perf[i].algo, MS_OK;
  return ms_error(MS_ERR_RUNTIME, "conv2d backward: cuDNN offers no data-gradient algorithm for this shape");
}

static ms_status choose_bwd_filter(cudnnHandle_t h, const descs *d, int *algo) {
  cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
  int n = 0;
  if (check_dnn("conv2d backward", cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d->x, d->y, d->conv, d->w, MAX_ALGOS, &n, perf)))
    return MS_ERR_RUNTIME;
  for (int i = 0; i < n; i++)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return *algo = (int)perf[i].algo, MS_OK;
  return ms_error(MS_ERR_RUNTIME, "conv2d backward: cuDNN offers no weight-gradient algorithm for this shape");
}

/* The cached algorithm of one direction (0 forward, 1 data, 2 filter), chosen on first use. */
static ms_status cached_algo(cudnnHandle_t h, const descs *d, int dev, ms_dtype dt, const ms_k_conv2d_geom *g,
                             int which, int *algo) {
  pthread_mutex_lock(&lock);
  algo_entry *e = entry_for(dev, dt, g);
  int *slot = !e ? NULL : which == 0 ? &e->fwd : which == 1 ? &e->bwd_data : &e->bwd_filter;
  ms_status st = slot ? MS_OK : ms_error(MS_ERR_MEMORY, "conv2d: out of memory for the algorithm cache");
  if (st == MS_OK && *slot < 0) {
    st = which == 0 ? choose_fwd(h, d, slot) : which == 1 ? choose_bwd_data(h, d, slot) : choose_bwd_filter(h, d, slot);
    if (st != MS_OK) *slot = -1;
  }
  if (st == MS_OK) *algo = *slot;
  pthread_mutex_unlock(&lock);
  return st;
}

/* y[n, o, :] += b[o] */
static ms_status add_bias(int dev, const ms_k_conv2d_geom *g, ms_tensor *b, ms_tensor *out) {
  int err = ms_kc_channel_bias_add((ms_k_dtype)out->dtype, g->n, g->o, g->oh * g->ow, ms_tensor_data(out),
                                   ms_tensor_data(b), ms_cuda_raw_stream(dev));
  return ms_cuda_check("conv2d", (cudaError_t)err);
}

static ms_status legacy_forward(cudnnHandle_t h, int dev, const ms_k_conv2d_geom *g, ms_tensor *x, ms_tensor *w,
                                ms_tensor *out) {
  descs d;
  if (descs_make("conv2d", g, x->dtype, &d) != MS_OK) return MS_ERR_RUNTIME;
  int algo = 0;
  size_t bytes = 0;
  workspace ws = {dev, 0, NULL};
  ms_status st = cached_algo(h, &d, dev, x->dtype, g, 0, &algo);
  if (st == MS_OK)
    st = check_dnn("conv2d", cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, (cudnnConvolutionFwdAlgo_t)algo, &bytes));
  if (st == MS_OK) st = workspace_get(&ws, dev, bytes);
  double one = 1, zero = 0; /* cuDNN reads double scalars for double data, float otherwise */
  float onef = 1, zerof = 0;
  const void *a1 = x->dtype == MS_FLOAT64 ? (const void *)&one : (const void *)&onef;
  const void *a0 = x->dtype == MS_FLOAT64 ? (const void *)&zero : (const void *)&zerof;
  if (st == MS_OK)
    st = check_dnn("conv2d", cudnnConvolutionForward(h, a1, d.x, ms_tensor_data(x), d.w, ms_tensor_data(w), d.conv,
                                                     (cudnnConvolutionFwdAlgo_t)algo, ws.p, bytes, a0, d.y,
                                                     ms_tensor_data(out)));
  workspace_put(&ws);
  descs_free(&d);
  return st;
}

ms_status ms_cuda_conv2d_forward(const ms_k_conv2d_geom *g, ms_tensor *x, ms_tensor *w, ms_tensor *b,
                                 ms_tensor *out) {
  int dev = ms_tensor_device(out).index;
  cudnnHandle_t h = handle_for("conv2d", dev);
  if (!h) return MS_ERR_RUNTIME;
  bool planned;
  ms_status st = ms_cuda_conv_plan_run(h, dev, x->dtype, MS_CUDA_CONV_FWD, g, ms_tensor_data(x), ms_tensor_data(w),
                                       ms_tensor_data(out), &planned);
  if (st == MS_OK && !planned) st = legacy_forward(h, dev, g, x, w, out);
  if (st == MS_OK && b) st = add_bias(dev, g, b, out);
  return st;
}

/* The legacy calls for the gradients the graph API could not plan (gx or gw NULL: not this one). */
static ms_status legacy_backward(cudnnHandle_t h, int dev, const ms_k_conv2d_geom *g, ms_tensor *x, ms_tensor *w,
                                 ms_tensor *gout, ms_tensor *gx, ms_tensor *gw) {
  descs d;
  if (descs_make("conv2d backward", g, x->dtype, &d) != MS_OK) return MS_ERR_RUNTIME;
  double one = 1, zero = 0;
  float onef = 1, zerof = 0;
  const void *a1 = x->dtype == MS_FLOAT64 ? (const void *)&one : (const void *)&onef;
  const void *a0 = x->dtype == MS_FLOAT64 ? (const void *)&zero : (const void *)&zerof;
  ms_status st = MS_OK;
  if (gx) {
    int algo = 0;
    size_t bytes = 0;
    workspace ws = {dev, 0, NULL};
    st = cached_algo(h, &d, dev, x->dtype, g, 1, &algo);
    if (st == MS_OK)
      st = check_dnn("conv2d backward", cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x,
                                                                                     (cudnnConvolutionBwdDataAlgo_t)algo, &bytes));
    if (st == MS_OK) st = workspace_get(&ws, dev, bytes);
    if (st == MS_OK)
      st = check_dnn("conv2d backward", cudnnConvolutionBackwardData(h, a1, d.w, ms_tensor_data(w), d.y, ms_tensor_data(gout),
                                                                     d.conv, (cudnnConvolutionBwdDataAlgo_t)algo, ws.p, bytes,
                                                                     a0, d.x, ms_tensor_data(gx)));
    workspace_put(&ws);
  }
  if (st == MS_OK && gw) {
    int algo = 0;
    size_t bytes = 0;
    workspace ws = {dev, 0, NULL};
    st = cached_algo(h, &d, dev, x->dtype, g, 2, &algo);
    if (st == MS_OK)
      st = check_dnn("conv2d backward", cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w,
                                                                                       (cudnnConvolutionBwdFilterAlgo_t)algo, &bytes));
    if (st == MS_OK) st = workspace_get(&ws, dev, bytes);
    if (st == MS_OK)
      st = check_dnn("conv2d backward", cudnnConvolutionBackwardFilter(h, a1, d.x, ms_tensor_data(x), d.y, ms_tensor_data(gout),
                                                                       d.conv, (cudnnConvolutionBwdFilterAlgo_t)algo, ws.p, bytes,
                                                                       a0, d.w, ms_tensor_data(gw)));
    workspace_put(&ws);
  }
  descs_free(&d);
  return st;
}

ms_status ms_cuda_conv2d_backward(const ms_k_conv2d_geom *g, ms_tensor *x, ms_tensor *w, ms_tensor *gout,
                                  ms_tensor *gx, ms_tensor *gw, ms_tensor *gb) {
  int dev = ms_tensor_device(gout).index;
  cudnnHandle_t h = handle_for("conv2d backward", dev);
  if (!h) return MS_ERR_RUNTIME;
  bool planned_x = true, planned_w = true;
  ms_status st = MS_OK;
  if (gx)
    st = ms_cuda_conv_plan_run(h, dev, x->dtype, MS_CUDA_CONV_BWD_DATA, g, ms_tensor_data(gx), ms_tensor_data(w),
                               ms_tensor_data(gout), &planned_x);
  if (st == MS_OK && gw)
    st = ms_cuda_conv_plan_run(h, dev, x->dtype, MS_CUDA_CONV_BWD_FILTER, g, ms_tensor_data(x), ms_tensor_data(gw),
                               ms_tensor_data(gout), &planned_w);
  if (st == MS_OK && (!planned_x || !planned_w))
    st = legacy_backward(h, dev, g, x, w, gout, planned_x ? NULL : gx, planned_w ? NULL : gw);
  if (st == MS_OK && gb)
    st = ms_cuda_check("conv2d backward", (cudaError_t)ms_kc_channel_sum((ms_k_dtype)gout->dtype, g->n, g->o,
                                                                         g->oh * g->ow, ms_tensor_data(gout),
                                                                         ms_tensor_data(gb), ms_cuda_raw_stream(dev)));
  return st;
}

#endif
