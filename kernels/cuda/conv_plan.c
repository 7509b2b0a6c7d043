/* conv_plan.c: conv2d's three directions through cuDNN's graph (backend) API: one finalized
 * execution plan per device, dtype, geometry, pointer alignment and direction, built on first use
 * and kept; a call then only packs its pointers and runs the plan. cuDNN 9's legacy calls
 * (cudnnConvolutionForward and kin) rebuild that machinery on every call, which cost the host
 * 140-430 us a conv on an H200, more than the step's kernels. Engines that round float32 through
 * TF32 or reduce in lower precision are skipped, so results agree with the CPU as the legacy FMA
 * path's did. bfloat16 and float16 tensors compute in float32 (the convolution's compute type),
 * and there tensor-core engines are what is wanted: their inputs are already 16-bit, so nothing
 * is rounded that the CPU's 16-bit conv does not round. A shape the graph API cannot plan, or
 * whose plan fails to run, reports `planned = false` and the caller runs the legacy call
 * (conv_cudnn.c). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/conv_plan.h"
#include "kernels/cuda/lib_error.h"

#ifdef MS_HAVE_CUDNN

enum { UID_X = 1, UID_W = 2, UID_Y = 3, MAX_CONFIGS = 16 };

typedef struct plan_key {
  int device, dtype, dir;
  int64_t align;
  ms_k_conv2d_geom g;
} plan_key;

/* The descriptors a plan was built from stay alive with it (the cache lives as long as the
 * process): cuDNN does not promise that a finalized plan owns copies of them. */
typedef struct plan_entry {
  plan_key key;
  cudnnBackendDescriptor_t plan; /* NULL: no plan for this shape (the legacy call serves it) */
  int64_t workspace;
  cudnnBackendDescriptor_t parts[6]; /* x, w, y, conv, op, graph */
  struct plan_entry *next;
} plan_entry;

static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static plan_entry *plans;

static cudnnStatus_t set_attr(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                              cudnnBackendAttributeType_t type, int64_t count, const void *value) {
  return cudnnBackendSetAttribute(d, name, type, count, value);
}

/* A packed NCHW tensor (row-major strides). */
static cudnnStatus_t tensor_desc(int64_t uid, cudnnDataType_t t, const int64_t dims[4], int64_t align,
                                 cudnnBackendDescriptor_t *out) {
  int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, out);
  if (!s) s = set_attr(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t);
  if (!s) s = set_attr(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  if (!s) s = set_attr(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  if (!s) s = set_attr(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  if (!s) s = set_attr(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  if (!s) s = cudnnBackendFinalize(*out);
  return s;
}

static cudnnStatus_t conv_desc(const ms_k_conv2d_geom *g, cudnnDataType_t t, cudnnBackendDescriptor_t *out) {
  int64_t dims = 2, dil[2] = {g->dh, g->dw}, str[2] = {g->sh, g->sw}, pad[2] = {g->ph, g->pw};
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, out);
  if (!s) s = set_attr(*out, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t);
  if (!s) s = set_attr(*out, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  if (!s) s = set_attr(*out, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  if (!s) s = set_attr(*out, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
  if (!s) s = set_attr(*out, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str);
  if (!s) s = set_attr(*out, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  if (!s) s = set_attr(*out, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  if (!s) s = cudnnBackendFinalize(*out);
  return s;
}

/* The operation of one direction over x, w, y (dx, w, dy for the data gradient; x, dw, dy for
 * the weight gradient): out = 1 * conv + 0 * out; t is the compute type (alpha and beta are
 * double for double, float otherwise). */
static cudnnStatus_t conv_op(ms_cuda_conv_dir dir, cudnnDataType_t t, cudnnBackendDescriptor_t x,
                             cudnnBackendDescriptor_t w, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t conv,
                             cudnnBackendDescriptor_t *out) {
  static const struct {
    cudnnBackendDescriptorType_t kind;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  } ops[MS_CUDA_CONV_DIRS] = {
      [MS_CUDA_CONV_FWD] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      [MS_CUDA_CONV_BWD_DATA] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                 CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                                 CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                                 CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                                 CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                                 CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      [MS_CUDA_CONV_BWD_FILTER] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                                   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                                   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                                   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                                   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                                   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                                   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
  };
  bool f64 = t == CUDNN_DATA_DOUBLE;
  double one = 1, zero = 0;
  float onef = 1, zerof = 0;
  cudnnBackendAttributeType_t st = f64 ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
  cudnnStatus_t s = cudnnBackendCreateDescriptor(ops[dir].kind, out);
  if (!s) s = set_attr(*out, ops[dir].x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  if (!s) s = set_attr(*out, ops[dir].w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
  if (!s) s = set_attr(*out, ops[dir].y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  if (!s) s = set_attr(*out, ops[dir].conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
  if (!s) s = set_attr(*out, ops[dir].alpha, st, 1, f64 ? (const void *)&one : (const void *)&onef);
  if (!s) s = set_attr(*out, ops[dir].beta, st, 1, f64 ? (const void *)&zero : (const void *)&zerof);
  if (!s) s = cudnnBackendFinalize(*out);
  return s;
}

/* Whether an engine configuration keeps float32's precision: no TF32 rounding of the inputs, no
 * lower-precision reduction (the CPU backend computes in float32 with FMA). */
static bool keeps_precision(cudnnBackendDescriptor_t cfg, bool half) {
  cudnnBackendDescriptor_t engine;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine)) return false;
  int64_t n = 0;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  bool ok = !cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) &&
            !cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                      CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes);
  for (int64_t i = 0; ok && i < n; i++)
    ok = (half || notes[i] != CUDNN_NUMERICAL_NOTE_TENSOR_CORE) &&
         notes[i] != CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS &&
         notes[i] != CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
  cudnnBackendDestroyDescriptor(engine);
  return ok;
}

/* The first of the heuristics' ranked configurations (mode `mode`) that keeps precision (of
 * 16-bit data when `half`) and finalizes into a plan; NULL if none does. */
static cudnnBackendDescriptor_t first_plan(cudnnHandle_t h, cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode,
                                           bool half, int64_t *workspace) {
  cudnnBackendDescriptor_t heur, cfgs[MAX_CONFIGS] = {0}, plan = NULL;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur)) return NULL;
  int64_t n = 0, made = 0, got = 0;
  bool ok = !set_attr(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph) &&
            !set_attr(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) && !cudnnBackendFinalize(heur);
  for (; ok && made < MAX_CONFIGS; made++)
    ok = !cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made]);
  ok = ok && !cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_CONFIGS,
                                       &n, cfgs);
  for (int64_t i = 0; ok && i < n && i < MAX_CONFIGS && !plan; i++) {
    if (!keeps_precision(cfgs[i], half) ||
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan))
      continue;
    if (set_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ||
        set_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]) ||
        cudnnBackendFinalize(plan) ||
        cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, workspace)) {
      cudnnBackendDestroyDescriptor(plan);
      plan = NULL;
    }
  }
  for (int64_t i = 0; i < made; i++) cudnnBackendDestroyDescriptor(cfgs[i]);
  cudnnBackendDestroyDescriptor(heur);
  return plan;
}

/* The tensors' data type for dt, and the type the convolution computes in: float32 for every
 * dtype but float64 (16-bit data: float32 products and sums, one rounding per stored value). */
static cudnnDataType_t data_type(ms_k_dtype dt) {
  return dt == MS_K_F64    ? CUDNN_DATA_DOUBLE
         : dt == MS_K_BF16 ? CUDNN_DATA_BFLOAT16
         : dt == MS_K_F16  ? CUDNN_DATA_HALF
                           : CUDNN_DATA_FLOAT;
}
static cudnnDataType_t compute_type(ms_k_dtype dt) { return dt == MS_K_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }

/* Builds e's plan from its key; leaves e->plan NULL where cuDNN offers none. */
static void build(cudnnHandle_t h, plan_entry *e) {
  const ms_k_conv2d_geom *g = &e->key.g;
  ms_k_dtype dt = (ms_k_dtype)e->key.dtype;
  cudnnDataType_t t = data_type(dt), ct = compute_type(dt);
  bool half = dt == MS_K_BF16 || dt == MS_K_F16;
  const int64_t xd[4] = {g->n, g->c, g->h, g->w}, wd[4] = {g->o, g->c / g->groups, g->kh, g->kw},
                yd[4] = {g->n, g->o, g->oh, g->ow};
  cudnnBackendDescriptor_t *p = e->parts;
  cudnnStatus_t s = tensor_desc(UID_X, t, xd, e->key.align, &p[0]);
  if (!s) s = tensor_desc(UID_W, t, wd, e->key.align, &p[1]);
  if (!s) s = tensor_desc(UID_Y, t, yd, e->key.align, &p[2]);
  if (!s) s = conv_desc(g, ct, &p[3]);
  if (!s) s = conv_op((ms_cuda_conv_dir)e->key.dir, ct, p[0], p[1], p[2], p[3], &p[4]);
  if (!s) s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &p[5]);
  if (!s) s = set_attr(p[5], CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p[4]);
  if (!s) s = set_attr(p[5], CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  if (!s) s = cudnnBackendFinalize(p[5]);
  if (s) return;
  e->plan = first_plan(h, p[5], CUDNN_HEUR_MODE_INSTANT, half, &e->workspace);
  if (!e->plan) e->plan = first_plan(h, p[5], CUDNN_HEUR_MODE_FALLBACK, half, &e->workspace);
}

/* The largest power of two up to 16 that every pointer is aligned to. */
static int64_t alignment(void *const ptrs[3]) {
  uintptr_t u = (uintptr_t)ptrs[0] | (uintptr_t)ptrs[1] | (uintptr_t)ptrs[2];
  int64_t a = 16;
  while (a > 1 && (u & (uintptr_t)(a - 1))) a /= 2;
  return a;
}

static plan_entry *entry_for(cudnnHandle_t h, const plan_key *k) {
  pthread_mutex_lock(&plans_lock);
  plan_entry *e = plans;
  while (e && memcmp(&e->key, k, sizeof *k) != 0) e = e->next;
  if (!e && (e = calloc(1, sizeof *e))) {
    e->key = *k;
    build(h, e);
    e->next = plans;
    plans = e;
  }
  pthread_mutex_unlock(&plans_lock);
  return e;
}

int ms_kcu_conv_plan_run(const ms_k_exec *x, cudnnHandle_t h, ms_k_dtype dt, ms_cuda_conv_dir dir,
                         const ms_k_conv2d_geom *g, void *xp, void *wp, void *yp, bool *planned) {
  int dev = x->device;
  *planned = false;
  plan_key k;
  memset(&k, 0, sizeof k); /* padding too: keys compare with memcmp */
  void *ptrs[3] = {xp, wp, yp};
  k.device = dev, k.dtype = (int)dt, k.dir = (int)dir, k.align = alignment(ptrs), k.g = *g;
  plan_entry *e = entry_for(h, &k);
  if (!e) return ms_kcu_fail("out of memory for the plan cache");
  pthread_mutex_lock(&plans_lock);
  cudnnBackendDescriptor_t plan = e->plan;
  int64_t workspace = e->workspace;
  pthread_mutex_unlock(&plans_lock);
  if (!plan) return 0;
  *planned = true;
  void *ws = workspace > 0 ? x->scratch_alloc(dev, (size_t)workspace) : NULL;
  if (workspace > 0 && !ws) return ms_kcu_fail("out of memory for cuDNN's workspace (%lld bytes)", (long long)workspace);
  int64_t uids[3] = {UID_X, UID_W, UID_Y};
  cudnnBackendDescriptor_t pack;
  cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  if (!s) {
    s = set_attr(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    if (!s) s = set_attr(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (!s) s = set_attr(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (!s) s = cudnnBackendFinalize(pack);
    if (!s) s = cudnnBackendExecute(h, plan, pack);
    cudnnBackendDestroyDescriptor(pack);
  }
  if (ws) x->scratch_free(dev, ws, (size_t)workspace);
  if (s == CUDNN_STATUS_SUCCESS) return 0;
  if (s == CUDNN_STATUS_ALLOC_FAILED) return ms_kcu_fail("cuDNN error: %s", cudnnGetErrorString(s));
  /* A plan that finalized but will not run: this shape goes to the legacy call from now on (the
   * plan is left alive: another thread may be running it). */
  pthread_mutex_lock(&plans_lock);
  e->plan = NULL;
  pthread_mutex_unlock(&plans_lock);
  *planned = false;
  return 0;
}

#endif
