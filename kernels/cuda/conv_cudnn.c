/* conv_cudnn.c: the CUDA bodies of the conv2d slots, through cuDNN: one handle per
 * device; each direction runs a cached graph-API plan (conv_plan.c), or, for a shape the
 * graph API cannot plan, the legacy call with the algorithm of each shape chosen once (cuDNN's
 * heuristics, the first whose workspace can be had); workspaces are the exec's scratch memory
 * (the engine's caching allocator).
 * float32 runs with FMA math, not TF32, so results agree with the CPU to float32 rounding;
 * bfloat16 and float16 tensors compute in float32 (cuDNN's PSEUDO_BFLOAT16 / PSEUDO_HALF
 * configurations) with tensor-op math, and are rounded once per stored value. The
 * bias and its gradient are kernels of ours (kernels/cuda/nn_ops.cu). A CUDA build without cuDNN
 * answers with an error saying so. Every function returns 0 or an error code of the CUDA table. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/conv_plan.h"
#include "kernels/cuda/lib_error.h"
#include "kernels/kernels_cuda.h"

#ifndef MS_HAVE_CUDNN

static int no_cudnn(void) {
  return ms_kcu_fail("CUDA tensors need cuDNN, which this build did not find (configure with CUDNN_ROOT set)");
}
int ms_k_cuda_conv2d_forward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *xin,
                             const void *w, const void *b, void *y) {
  return (void)x, (void)dt, (void)g, (void)xin, (void)w, (void)b, (void)y, no_cudnn();
}
int ms_k_cuda_conv2d_backward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *xin,
                              const void *w, const void *gy, void *gx, void *gw, void *gb) {
  return (void)x, (void)dt, (void)g, (void)xin, (void)w, (void)gy, (void)gx, (void)gw, (void)gb, no_cudnn();
}

#else

#define MAX_DEVICES 64 /* moonshard/cuda.h's MS_CUDA_MAX_DEVICES: the engine checks indices */

static int check_dnn(cudnnStatus_t st) {
  if (st == CUDNN_STATUS_SUCCESS) return 0;
  return ms_kcu_fail("cuDNN error: %s", cudnnGetErrorString(st));
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cudnnHandle_t handles[MAX_DEVICES];

/* x's device's handle, bound to x's stream (the dispatch made the device current). */
static int handle_for(const ms_k_exec *x, cudnnHandle_t *h) {
  int dev = x->device, err = 0;
  pthread_mutex_lock(&lock);
  if (!handles[dev] && (err = check_dnn(cudnnCreate(&handles[dev]))) != 0) handles[dev] = NULL;
  *h = handles[dev];
  pthread_mutex_unlock(&lock);
  return err ? err : check_dnn(cudnnSetStream(*h, (cudaStream_t)x->stream));
}

/* ---- the algorithm cache: one entry per (device, dtype, geometry) -------------------------- */
typedef struct algo_entry {
  int device, dtype;
  ms_k_conv2d_geom g;
  int fwd, bwd_data, bwd_filter; /* -1 until chosen */
  struct algo_entry *next;
} algo_entry;
static algo_entry *algos;

static algo_entry *entry_for(int dev, ms_k_dtype dt, const ms_k_conv2d_geom *g) {
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

static int descs_make(const ms_k_conv2d_geom *g, ms_k_dtype dt, descs *d) {
  *d = (descs){0};
  const int64_t dims[] = {g->n, g->c, g->h, g->w, g->o, g->oh, g->ow, g->kh, g->kw};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
    if (dims[i] > 0x7fffffff / 4)
      return ms_kcu_fail("sizes beyond 2^29 are not supported by cuDNN's 4-D descriptors");
  bool half = dt == MS_K_BF16 || dt == MS_K_F16;
  cudnnDataType_t t = dt == MS_K_F64 ? CUDNN_DATA_DOUBLE : dt == MS_K_BF16 ? CUDNN_DATA_BFLOAT16
                      : dt == MS_K_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
  cudnnDataType_t ct = dt == MS_K_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; /* what it computes in */
  cudnnStatus_t s = cudnnCreateTensorDescriptor(&d->x);
  if (!s) s = cudnnCreateTensorDescriptor(&d->y);
  if (!s) s = cudnnCreateFilterDescriptor(&d->w);
  if (!s) s = cudnnCreateConvolutionDescriptor(&d->conv);
  if (!s) s = cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, t, (int)g->n, (int)g->c, (int)g->h, (int)g->w);
  if (!s) s = cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, t, (int)g->n, (int)g->o, (int)g->oh, (int)g->ow);
  if (!s) s = cudnnSetFilter4dDescriptor(d->w, t, CUDNN_TENSOR_NCHW, (int)g->o, (int)(g->c / g->groups), (int)g->kh, (int)g->kw);
  if (!s) s = cudnnSetConvolution2dDescriptor(d->conv, (int)g->ph, (int)g->pw, (int)g->sh, (int)g->sw, (int)g->dh,
                                              (int)g->dw, CUDNN_CROSS_CORRELATION, ct);
  if (!s) s = cudnnSetConvolutionGroupCount(d->conv, (int)g->groups);
  /* tensor cores for 16-bit data (nothing to down-convert); never TF32 for float32 */
  if (!s) s = cudnnSetConvolutionMathType(d->conv, half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH);
  if (s) descs_free(d);
  return check_dnn(s);
}

/* Workspace from x's scratch memory (NULL for 0 bytes). */
typedef struct workspace {
  const ms_k_exec *x;
  size_t bytes;
  void *p;
} workspace;

static int workspace_get(workspace *ws, const ms_k_exec *x, size_t bytes) {
  *ws = (workspace){x, bytes, NULL};
  if (bytes == 0) return 0;
  ws->p = x->scratch_alloc(x->device, bytes);
  return ws->p ? 0 : ms_kcu_fail("out of memory for cuDNN's workspace (%zu bytes)", bytes);
}

static void workspace_put(workspace *ws) {
  if (ws->p) ws->x->scratch_free(ws->x->device, ws->p, ws->bytes);
}

/* Picks among cuDNN's ranked candidates the first that succeeds with a workspace it can have;
 * done once per shape. The three directions share this shape of code, so one chooser per kind. */
#define MAX_ALGOS 16

static int choose_fwd(cudnnHandle_t h, const descs *d, int *algo) {
  cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
  int n = 0;
  int err = check_dnn(cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y, MAX_ALGOS, &n, perf));
  if (err) return err;
  for (int i = 0; i < n; i++)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return *algo = (int)perf[i].algo, 0;
  return ms_kcu_fail("cuDNN offers no forward algorithm for this shape");
}

static int choose_bwd_data(cudnnHandle_t h, const descs *d, int *algo) {
  cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
  int n = 0;
  int err = check_dnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x, MAX_ALGOS, &n, perf));
  if (err) return err;
  for (int i = 0; i < n; i++)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return *algo = (int)perf[i].algo, 0;
  return ms_kcu_fail("cuDNN offers no data-gradient algorithm for this shape");
}

static int choose_bwd_filter(cudnnHandle_t h, const descs *d, int *algo) {
  cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
  int n = 0;
  int err = check_dnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d->x, d->y, d->conv, d->w, MAX_ALGOS, &n, perf));
  if (err) return err;
  for (int i = 0; i < n; i++)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return *algo = (int)perf[i].algo, 0;
  return ms_kcu_fail("cuDNN offers no weight-gradient algorithm for this shape");
}

/* The cached algorithm of one direction (0 forward, 1 data, 2 filter), chosen on first use. */
static int cached_algo(cudnnHandle_t h, const descs *d, int dev, ms_k_dtype dt, const ms_k_conv2d_geom *g,
                       int which, int *algo) {
  pthread_mutex_lock(&lock);
  algo_entry *e = entry_for(dev, dt, g);
  int *slot = !e ? NULL : which == 0 ? &e->fwd : which == 1 ? &e->bwd_data : &e->bwd_filter;
  int st = slot ? 0 : ms_kcu_fail("out of memory for the algorithm cache");
  if (st == 0 && *slot < 0) {
    st = which == 0 ? choose_fwd(h, d, slot) : which == 1 ? choose_bwd_data(h, d, slot) : choose_bwd_filter(h, d, slot);
    if (st != 0) *slot = -1;
  }
  if (st == 0) *algo = *slot;
  pthread_mutex_unlock(&lock);
  return st;
}

/* The scalars 1 and 0 as cuDNN reads them: double for double data, float otherwise (16-bit
 * data included). */
static const double one = 1, zero = 0;
static const float onef = 1, zerof = 0;
static const void *scalar_one(ms_k_dtype dt) { return dt == MS_K_F64 ? (const void *)&one : (const void *)&onef; }
static const void *scalar_zero(ms_k_dtype dt) { return dt == MS_K_F64 ? (const void *)&zero : (const void *)&zerof; }

static int legacy_forward(cudnnHandle_t h, const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g,
                          const void *xin, const void *w, void *y) {
  descs d;
  int st = descs_make(g, dt, &d);
  if (st) return st;
  int algo = 0;
  size_t bytes = 0;
  workspace ws = {x, 0, NULL};
  st = cached_algo(h, &d, x->device, dt, g, 0, &algo);
  if (st == 0)
    st = check_dnn(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, (cudnnConvolutionFwdAlgo_t)algo, &bytes));
  if (st == 0) st = workspace_get(&ws, x, bytes);
  if (st == 0)
    st = check_dnn(cudnnConvolutionForward(h, scalar_one(dt), d.x, xin, d.w, w, d.conv, (cudnnConvolutionFwdAlgo_t)algo,
                                           ws.p, bytes, scalar_zero(dt), d.y, y));
  workspace_put(&ws);
  descs_free(&d);
  return st;
}

int ms_k_cuda_conv2d_forward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *xin,
                             const void *w, const void *b, void *y) {
  cudnnHandle_t h;
  int st = handle_for(x, &h);
  if (st) return st;
  bool planned;
  st = ms_kcu_conv_plan_run(x, h, dt, MS_CUDA_CONV_FWD, g, (void *)xin, (void *)w, y, &planned);
  if (st == 0 && !planned) st = legacy_forward(h, x, dt, g, xin, w, y);
  if (st == 0 && b) st = ms_kc_channel_bias_add(dt, g->n, g->o, g->oh * g->ow, y, b, x->stream); /* y[n, o, :] += b[o] */
  return st;
}

/* The legacy calls for the gradients the graph API could not plan (gx or gw NULL: not this one). */
static int legacy_backward(cudnnHandle_t h, const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g,
                           const void *xin, const void *w, const void *gy, void *gx, void *gw) {
  descs d;
  int st = descs_make(g, dt, &d);
  if (st) return st;
  if (gx) {
    int algo = 0;
    size_t bytes = 0;
    workspace ws = {x, 0, NULL};
    st = cached_algo(h, &d, x->device, dt, g, 1, &algo);
    if (st == 0)
      st = check_dnn(cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x,
                                                                  (cudnnConvolutionBwdDataAlgo_t)algo, &bytes));
    if (st == 0) st = workspace_get(&ws, x, bytes);
    if (st == 0)
      st = check_dnn(cudnnConvolutionBackwardData(h, scalar_one(dt), d.w, w, d.y, gy, d.conv,
                                                  (cudnnConvolutionBwdDataAlgo_t)algo, ws.p, bytes, scalar_zero(dt),
                                                  d.x, gx));
    workspace_put(&ws);
  }
  if (st == 0 && gw) {
    int algo = 0;
    size_t bytes = 0;
    workspace ws = {x, 0, NULL};
    st = cached_algo(h, &d, x->device, dt, g, 2, &algo);
    if (st == 0)
      st = check_dnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w,
                                                                    (cudnnConvolutionBwdFilterAlgo_t)algo, &bytes));
    if (st == 0) st = workspace_get(&ws, x, bytes);
    if (st == 0)
      st = check_dnn(cudnnConvolutionBackwardFilter(h, scalar_one(dt), d.x, xin, d.y, gy, d.conv,
                                                    (cudnnConvolutionBwdFilterAlgo_t)algo, ws.p, bytes,
                                                    scalar_zero(dt), d.w, gw));
    workspace_put(&ws);
  }
  descs_free(&d);
  return st;
}

int ms_k_cuda_conv2d_backward(const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *xin,
                              const void *w, const void *gy, void *gx, void *gw, void *gb) {
  cudnnHandle_t h;
  int st = handle_for(x, &h);
  if (st) return st;
  bool planned_x = true, planned_w = true;
  if (gx) st = ms_kcu_conv_plan_run(x, h, dt, MS_CUDA_CONV_BWD_DATA, g, gx, (void *)w, (void *)gy, &planned_x);
  if (st == 0 && gw)
    st = ms_kcu_conv_plan_run(x, h, dt, MS_CUDA_CONV_BWD_FILTER, g, (void *)xin, gw, (void *)gy, &planned_w);
  if (st == 0 && (!planned_x || !planned_w))
    st = legacy_backward(h, x, dt, g, xin, w, gy, planned_x ? NULL : gx, planned_w ? NULL : gw);
  if (st == 0 && gb) st = ms_kc_channel_sum(dt, g->n, g->o, g->oh * g->ow, gy, gb, x->stream);
  return st;
}

#endif
