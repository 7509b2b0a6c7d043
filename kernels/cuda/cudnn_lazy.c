/* cudnn_lazy.c: cuDNN opened with dlopen on first use, as blas.c opens cuBLAS, so that a CUDA
 * build of moonshard starts (and runs on the CPU) where cuDNN is not installed, and a process that
 * never runs a CUDA conv2d never maps it. Each cuDNN function the conv bodies call is defined here
 * under its own name, with the signature cudnn.h declares (so the compiler checks it), forwarding
 * through a table of pointers that dlsym fills once. The build hides these names (visibility), so
 * a real libcudnn elsewhere in the process is never interposed. When cuDNN cannot be loaded every
 * call returns CUDNN_STATUS_NOT_INITIALIZED and cudnnGetErrorString says why. */
#ifdef MS_HAVE_CUDNN
#include <cudnn.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/lazy_lib.h"

/* X(name, (parameters), (arguments)): every cuDNN function used, all returning cudnnStatus_t. */
#define CUDNN_FUNCTIONS(X)                                                                                      \
  X(cudnnCreate, (cudnnHandle_t *h), (h))                                                                      \
  X(cudnnSetStream, (cudnnHandle_t h, cudaStream_t s), (h, s))                                                  \
  X(cudnnCreateTensorDescriptor, (cudnnTensorDescriptor_t *d), (d))                                            \
  X(cudnnDestroyTensorDescriptor, (cudnnTensorDescriptor_t d), (d))                                            \
  X(cudnnSetTensor4dDescriptor,                                                                                \
    (cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n, int c, int h, int w),         \
    (d, f, t, n, c, h, w))                                                                                     \
  X(cudnnCreateFilterDescriptor, (cudnnFilterDescriptor_t *d), (d))                                            \
  X(cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t d), (d))                                            \
  X(cudnnSetFilter4dDescriptor,                                                                                \
    (cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k, int c, int h, int w),         \
    (d, t, f, k, c, h, w))                                                                                     \
  X(cudnnCreateConvolutionDescriptor, (cudnnConvolutionDescriptor_t *d), (d))                                  \
  X(cudnnDestroyConvolutionDescriptor, (cudnnConvolutionDescriptor_t d), (d))                                  \
  X(cudnnSetConvolution2dDescriptor,                                                                           \
    (cudnnConvolutionDescriptor_t d, int ph, int pw, int u, int v, int dh, int dw, cudnnConvolutionMode_t m,   \
     cudnnDataType_t t),                                                                                       \
    (d, ph, pw, u, v, dh, dw, m, t))                                                                           \
  X(cudnnSetConvolutionGroupCount, (cudnnConvolutionDescriptor_t d, int g), (d, g))                            \
  X(cudnnSetConvolutionMathType, (cudnnConvolutionDescriptor_t d, cudnnMathType_t m), (d, m))                  \
  X(cudnnGetConvolutionForwardAlgorithm_v7,                                                                    \
    (cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,                        \
     const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t y, const int req, int *got,           \
     cudnnConvolutionFwdAlgoPerf_t *perf),                                                                     \
    (h, x, w, c, y, req, got, perf))                                                                           \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7,                                                               \
    (cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,                       \
     const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t dx, const int req, int *got,          \
     cudnnConvolutionBwdDataAlgoPerf_t *perf),                                                                 \
    (h, w, dy, c, dx, req, got, perf))                                                                         \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7,                                                             \
    (cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,                       \
     const cudnnConvolutionDescriptor_t c, const cudnnFilterDescriptor_t dw, const int req, int *got,          \
     cudnnConvolutionBwdFilterAlgoPerf_t *perf),                                                               \
    (h, x, dy, c, dw, req, got, perf))                                                                         \
  X(cudnnGetConvolutionForwardWorkspaceSize,                                                                   \
    (cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,                        \
     const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t a,       \
     size_t *n),                                                                                               \
    (h, x, w, c, y, a, n))                                                                                     \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize,                                                              \
    (cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,                       \
     const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t dx, cudnnConvolutionBwdDataAlgo_t a,  \
     size_t *n),                                                                                               \
    (h, w, dy, c, dx, a, n))                                                                                   \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize,                                                            \
    (cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,                       \
     const cudnnConvolutionDescriptor_t c, const cudnnFilterDescriptor_t dw,                                   \
     cudnnConvolutionBwdFilterAlgo_t a, size_t *n),                                                            \
    (h, x, dy, c, dw, a, n))                                                                                   \
  X(cudnnConvolutionForward,                                                                                   \
    (cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,                      \
     const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t c,                    \
     cudnnConvolutionFwdAlgo_t a, void *ws, size_t wsn, const void *beta, const cudnnTensorDescriptor_t yd,     \
     void *y),                                                                                                 \
    (h, alpha, xd, x, wd, w, c, a, ws, wsn, beta, yd, y))                                                      \
  X(cudnnConvolutionBackwardData,                                                                              \
    (cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd, const void *w,                      \
     const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t c,                  \
     cudnnConvolutionBwdDataAlgo_t a, void *ws, size_t wsn, const void *beta,                                  \
     const cudnnTensorDescriptor_t dxd, void *dx),                                                             \
    (h, alpha, wd, w, dyd, dy, c, a, ws, wsn, beta, dxd, dx))                                                  \
  X(cudnnConvolutionBackwardFilter,                                                                            \
    (cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,                      \
     const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t c,                  \
     cudnnConvolutionBwdFilterAlgo_t a, void *ws, size_t wsn, const void *beta,                                \
     const cudnnFilterDescriptor_t dwd, void *dw),                                                             \
    (h, alpha, xd, x, dyd, dy, c, a, ws, wsn, beta, dwd, dw))                                                  \
  X(cudnnBackendCreateDescriptor, (cudnnBackendDescriptorType_t t, cudnnBackendDescriptor_t *d), (t, d))       \
  X(cudnnBackendDestroyDescriptor, (cudnnBackendDescriptor_t d), (d))                                          \
  X(cudnnBackendFinalize, (cudnnBackendDescriptor_t d), (d))                                                   \
  X(cudnnBackendSetAttribute,                                                                                  \
    (cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t, int64_t count,  \
     const void *v),                                                                                           \
    (d, n, t, count, v))                                                                                       \
  X(cudnnBackendGetAttribute,                                                                                  \
    (cudnnBackendDescriptor_t const d, cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t,           \
     int64_t req, int64_t *got, void *v),                                                                      \
    (d, n, t, req, got, v))                                                                                    \
  X(cudnnBackendExecute, (cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack),      \
    (h, plan, pack))

#define X_SLOT(name, params, args) cudnnStatus_t(*name) params;
static struct {
  CUDNN_FUNCTIONS(X_SLOT)
  const char *(*cudnnGetErrorString)(cudnnStatus_t);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char why[512]; /* why loading failed, for cudnnGetErrorString */

static const ms_kcu_lazy_lib cudnn = {MS_CUDNN_SONAME, MS_CUDNN_FALLBACK, "cuDNN"};

static void load(void) {
  void *lib = ms_kcu_lazy_open(&cudnn, why, sizeof why);
  if (!lib) return;
  bool ok = ms_kcu_lazy_resolve(&cudnn, lib, "cudnnGetErrorString", &api.cudnnGetErrorString, why, sizeof why);
#define X_RESOLVE(name, params, args) ok = ok && ms_kcu_lazy_resolve(&cudnn, lib, #name, &api.name, why, sizeof why);
  CUDNN_FUNCTIONS(X_RESOLVE)
  if (!ok) {
    dlclose(lib);
    return;
  }
  loaded = true;
}

static bool ready(void) {
  pthread_once(&once, load);
  return loaded;
}

#define X_DEFINE(name, params, args)                                                                             \
  cudnnStatus_t name params { return ready() ? api.name args : CUDNN_STATUS_NOT_INITIALIZED; }
CUDNN_FUNCTIONS(X_DEFINE)

const char *cudnnGetErrorString(cudnnStatus_t status) {
  return ready() ? api.cudnnGetErrorString(status) : why;
}
#else
typedef int ms_cudnn_lazy_unused; /* ISO C wants something in a translation unit */
#endif
