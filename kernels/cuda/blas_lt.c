/* blas_lt.c: the gemm slot's bias epilogue on CUDA through cuBLASLt (CUBLASLT_EPILOGUE_BIAS): one
 * kernel computes alpha A B and adds the bias as it stores D, where the plain cuBLAS path fills C
 * with the bias first (a second launch) and multiplies with beta 1. cuBLASLt is loaded with
 * dlopen on the first product with a bias, as blas.c loads cuBLAS, with one handle per device.
 * Only the case blas.c hands over is taken: a row-major C (cuBLAS's D = C^T, whose rows are C's
 * columns: the bias runs along D's rows, as the epilogue wants) and operands that lie usably.
 * Anything cuBLASLt declines (no algorithm for the types, an alignment) returns
 * MS_KCU_LT_DECLINED and blas.c takes its own path; float32 never runs through TF32. */
#include <cublasLt.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>

#include "kernels/cuda/blas_lt.h"
#include "kernels/cuda/lazy_lib.h"
#include "kernels/cuda/lib_error.h"

#define MAX_DEVICES 64 /* as blas.c */

static pthread_mutex_t lt_lock = PTHREAD_MUTEX_INITIALIZER;
static cublasLtHandle_t lt_handles[MAX_DEVICES];
static bool lt_unloadable; /* tried once and failed: every later product takes blas.c's path */

static struct lt_api {
  bool loaded;
  cublasStatus_t (*create)(cublasLtHandle_t *);
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
  cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *, size_t);
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t, int64_t);
  cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t *);
  cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t[], int *);
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *, cublasLtMatrixLayout_t,
                           const void *, cublasLtMatrixLayout_t, const void *, const void *, cublasLtMatrixLayout_t,
                           void *, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);
} lt;

static const ms_kcu_lazy_lib cublaslt = {MS_CUBLASLT_SONAME, MS_CUBLASLT_FALLBACK, "cuBLASLt"};

/* Loads cuBLASLt once (under lt_lock); false where it cannot be had. */
static bool load_lt(void) {
  if (lt.loaded || lt_unloadable) return lt.loaded;
  char why[512];
  void *lib = ms_kcu_lazy_open(&cublaslt, why, sizeof why);
  bool ok = lib && ms_kcu_lazy_resolve(&cublaslt, lib, "cublasLtCreate", &lt.create, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublaslt, lib, "cublasLtMatmulDescCreate", &lt.desc_create, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublaslt, lib, "cublasLtMatmulDescDestroy", &lt.desc_destroy, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublaslt, lib, "cublasLtMatmulDescSetAttribute", &lt.desc_set, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublaslt, lib, "cublasLtMatrixLayoutCreate", &lt.layout_create, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublaslt, lib, "cublasLtMatrixLayoutDestroy", &lt.layout_destroy, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublaslt, lib, "cublasLtMatmulPreferenceCreate", &lt.pref_create, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublaslt, lib, "cublasLtMatmulPreferenceDestroy", &lt.pref_destroy, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublaslt, lib, "cublasLtMatmulAlgoGetHeuristic", &lt.heuristic, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublaslt, lib, "cublasLtMatmul", &lt.matmul, why, sizeof why);
  if (!ok && lib) dlclose(lib);
  lt.loaded = ok;
  lt_unloadable = !ok;
  return ok;
}

/* The device's handle, NULL where cuBLASLt cannot be had. */
static cublasLtHandle_t handle_for(int device) {
  pthread_mutex_lock(&lt_lock);
  if (!lt_handles[device] && load_lt() && lt.create(&lt_handles[device]) != CUBLAS_STATUS_SUCCESS)
    lt_handles[device] = NULL;
  cublasLtHandle_t h = lt_handles[device];
  pthread_mutex_unlock(&lt_lock);
  return h;
}

static cudaDataType_t data_type(ms_k_dtype dt) {
  return dt == MS_K_F64 ? CUDA_R_64F : dt == MS_K_F32 ? CUDA_R_32F : dt == MS_K_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* The descriptors of one product; NULL members are not made yet. */
typedef struct lt_plan {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulPreference_t pref;
} lt_plan;

static void plan_destroy(lt_plan *p) {
  if (p->desc) lt.desc_destroy(p->desc);
  if (p->la) lt.layout_destroy(p->la);
  if (p->lb) lt.layout_destroy(p->lb);
  if (p->lc) lt.layout_destroy(p->lc);
  if (p->pref) lt.pref_destroy(p->pref);
}

/* A stored as rows x cols (column-major, leading dimension ld) read through op: an m x k operand
 * is stored m x k untransposed, k x m transposed. */
static bool layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, cublasOperation_t op, int64_t rows, int64_t cols,
                   int64_t ld) {
  return lt.layout_create(l, t, op == CUBLAS_OP_N ? rows : cols, op == CUBLAS_OP_N ? cols : rows, ld) ==
         CUBLAS_STATUS_SUCCESS;
}

static bool plan_make(const ms_kcu_lt_gemm *g, lt_plan *p) {
  bool f64 = g->dt == MS_K_F64;
  cublasComputeType_t ct = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F; /* 32F: no TF32 */
  cudaDataType_t st = f64 ? CUDA_R_64F : CUDA_R_32F, t = data_type(g->dt);
  int32_t oa = g->oa, ob = g->ob;
  uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  const void *bias = g->bias;
  /* the preference's workspace stays at its default, 0: algorithms that need no scratch */
  return lt.desc_create(&p->desc, ct, st) == CUBLAS_STATUS_SUCCESS &&
         lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa) == CUBLAS_STATUS_SUCCESS &&
         lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob) == CUBLAS_STATUS_SUCCESS &&
         lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue) == CUBLAS_STATUS_SUCCESS &&
         lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) == CUBLAS_STATUS_SUCCESS &&
         layout(&p->la, t, g->oa, g->m, g->k, g->lda) && layout(&p->lb, t, g->ob, g->k, g->n, g->ldb) &&
         lt.layout_create(&p->lc, t, (uint64_t)g->m, (uint64_t)g->n, g->ldc) == CUBLAS_STATUS_SUCCESS &&
         lt.pref_create(&p->pref) == CUBLAS_STATUS_SUCCESS;
}

int ms_kcu_lt_gemm_bias(const ms_kcu_lt_gemm *g, int device, void *stream) {
  cublasLtHandle_t h = handle_for(device);
  if (!h) return MS_KCU_LT_DECLINED;
  lt_plan p = {0};
  cublasLtMatmulHeuristicResult_t best;
  int found = 0;
  bool ok = plan_make(g, &p) &&
            lt.heuristic(h, p.desc, p.la, p.lb, p.lc, p.lc, p.pref, 1, &best, &found) == CUBLAS_STATUS_SUCCESS &&
            found > 0;
  cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
  if (ok) {
    float fa = (float)g->alpha, fb = 0;
    double da = g->alpha, db = 0;
    bool f64 = g->dt == MS_K_F64;
    /* beta 0: C is not read; D is C */
    st = lt.matmul(h, p.desc, f64 ? (const void *)&da : &fa, g->a, p.la, g->b, p.lb, f64 ? (const void *)&db : &fb,
                   g->c, p.lc, g->c, p.lc, &best.algo, NULL, 0, (cudaStream_t)stream);
  }
  plan_destroy(&p);
  /* refusals that launch nothing: blas.c's path computes the product instead */
  if (!ok || st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE ||
      st == CUBLAS_STATUS_ARCH_MISMATCH)
    return MS_KCU_LT_DECLINED;
  if (st != CUBLAS_STATUS_SUCCESS) return ms_kcu_fail("cuBLASLt error: status %d", (int)st);
  return 0;
}
