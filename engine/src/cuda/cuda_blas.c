/* cuda_blas.c: matrix products on CUDA tensors through cuBLAS, one handle per device created on
 * first use. cuBLAS is column-major: a row-major product C = A B is computed as C^T = B^T A^T,
 * so any matrix with one unit stride is passed as it lies, never copied. cuBLAS is loaded with
 * dlopen on the first product, not linked: linking it (and cuBLASLt behind it) costs every
 * process ~150 MB of resident memory and ~0.2 s of start-up, GPU or not. bfloat16 and float16
 * products go through cublasGemmEx with float32 accumulation (mixed precision's param_dtype on
 * the GPU): the CPU's float32 arithmetic, rounded once into c, without widened copies. */
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_exec.h"
#include "cuda_ops.h"
#include "tensor_iter.h"

static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t handles[MS_CUDA_MAX_DEVICES];

/* The cuBLAS entry points used here (the _v2 names the cublas_v2.h macros stand for). */
static struct cublas_api {
  bool loaded;
  cublasStatus_t (*create)(cublasHandle_t *);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,
                          const float *, int, const float *, int, const float *, float *, int);
  cublasStatus_t (*dgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const double *,
                          const double *, int, const double *, int, const double *, double *, int);
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                            const void *, cudaDataType_t, int, const void *, cudaDataType_t, int, const void *,
                            void *, cudaDataType_t, int, cublasComputeType_t, cublasGemmAlgo_t);
  const char *(*status_string)(cublasStatus_t);
  const char *(*status_name)(cublasStatus_t);
} blas;

/* POSIX's way to turn dlsym's pointer into a function pointer. */
static bool resolve(void *lib, const char *name, void *fn_slot) {
  void *sym = dlsym(lib, name);
  memcpy(fn_slot, &sym, sizeof sym);
  return sym != NULL;
}

/* Loads cuBLAS once (under handles_lock). */
static ms_status load_cublas(const char *op) {
  if (blas.loaded) return MS_OK;
  void *lib = dlopen(MS_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL); /* the loader's path first */
  if (!lib) lib = dlopen(MS_CUBLAS_FALLBACK, RTLD_NOW | RTLD_LOCAL); /* then the build's toolkit */
  if (!lib) return ms_error(MS_ERR_RUNTIME, "%s: cannot load cuBLAS (%s): %s", op, MS_CUBLAS_SONAME, dlerror());
  const char *missing = NULL;
  if (!resolve(lib, "cublasCreate_v2", &blas.create)) missing = "cublasCreate_v2";
  else if (!resolve(lib, "cublasSetStream_v2", &blas.set_stream)) missing = "cublasSetStream_v2";
  else if (!resolve(lib, "cublasSgemm_v2", &blas.sgemm)) missing = "cublasSgemm_v2";
  else if (!resolve(lib, "cublasDgemm_v2", &blas.dgemm)) missing = "cublasDgemm_v2";
  else if (!resolve(lib, "cublasGemmEx", &blas.gemm_ex)) missing = "cublasGemmEx";
  else if (!resolve(lib, "cublasGetStatusString", &blas.status_string)) missing = "cublasGetStatusString";
  else if (!resolve(lib, "cublasGetStatusName", &blas.status_name)) missing = "cublasGetStatusName";
  if (missing) {
    dlclose(lib);
    return ms_error(MS_ERR_RUNTIME, "%s: %s lacks %s (a cuBLAS older than the toolkit moonshard was built with?)",
                    op, MS_CUBLAS_SONAME, missing);
  }
  blas.loaded = true;
  return MS_OK;
}

static ms_status check_blas(const char *op, cublasStatus_t st) {
  if (st == CUBLAS_STATUS_SUCCESS) return MS_OK;
  return ms_error(st == CUBLAS_STATUS_ALLOC_FAILED ? MS_ERR_MEMORY : MS_ERR_RUNTIME,
                  "%s: cuBLAS error: %s (%s)", op, blas.status_string(st), blas.status_name(st));
}

/* The device's handle, bound to the calling thread's current stream; the device is current. */
static cublasHandle_t handle_for(const char *op, int dev) {
  if (ms_cuda_use(op, dev) != MS_OK) return NULL;
  pthread_mutex_lock(&handles_lock);
  if (!handles[dev] && (load_cublas(op) != MS_OK || check_blas(op, blas.create(&handles[dev])) != MS_OK))
    handles[dev] = NULL;
  cublasHandle_t h = handles[dev];
  pthread_mutex_unlock(&handles_lock);
  if (h && check_blas(op, blas.set_stream(h, ms_cuda_raw_stream(dev))) != MS_OK) return NULL;
  return h;
}

/* How a rows x cols view lies for cuBLAS: row-major (element (i, j) at i * ld + j: its bytes
 * read column-major are the transpose) or column-major (at i + j * ld: the matrix itself). A
 * stride of a size-1 dim is never stepped, so it does not decide. False when neither fits (no
 * unit stride, or a broadcast zero stride): the matrix must be copied. */
typedef struct layout {
  bool col_major;
  int64_t ld;
} layout;

static bool layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs, layout *l) {
  int64_t r1 = rows > 1 ? rows : 1, c1 = cols > 1 ? cols : 1;
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= c1))
    return *l = (layout){false, rows == 1 ? c1 : rs}, true;
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= r1))
    return *l = (layout){true, cols == 1 ? r1 : cs}, true;
  return false;
}

/* One column-major product C = op(A) op(B) (m x n, inner size k) in dtype dt. */
typedef struct colmajor_gemm {
  cublasOperation_t oa, ob;
  int m, n, k, lda, ldb, ldc;
  const void *A, *B;
  void *C;
} colmajor_gemm;

static cudaDataType_t half_type(ms_dtype dt) { return dt == MS_BFLOAT16 ? CUDA_R_16BF : CUDA_R_16F; }

static cublasStatus_t run_gemm(cublasHandle_t h, ms_dtype dt, const colmajor_gemm *q, double alpha, double beta) {
  if (dt == MS_FLOAT64)
    return blas.dgemm(h, q->oa, q->ob, q->m, q->n, q->k, &alpha, q->A, q->lda, q->B, q->ldb, &beta, q->C, q->ldc);
  float fa = (float)alpha, fb = (float)beta; /* float32 scalars for sgemm and the 32F compute type */
  if (dt == MS_FLOAT32)
    return blas.sgemm(h, q->oa, q->ob, q->m, q->n, q->k, &fa, q->A, q->lda, q->B, q->ldb, &fb, q->C, q->ldc);
  cudaDataType_t t = half_type(dt);
  return blas.gemm_ex(h, q->oa, q->ob, q->m, q->n, q->k, &fa, q->A, t, q->lda, q->B, t, q->ldb, &fb, q->C, t, q->ldc,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/* c (2-D, c's layout given) = alpha a b + beta c, with a and b laid out usably. */
static ms_status gemm_raw(cublasHandle_t h, ms_dtype dt, int64_t M, int64_t N, int64_t K,
                          double alpha, const ms_tensor *a, layout la, const ms_tensor *b,
                          layout lb, double beta, ms_tensor *c, layout lc) {
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || la.ld > INT32_MAX || lb.ld > INT32_MAX || lc.ld > INT32_MAX)
    return ms_error(MS_ERR_ARG, "mm: sizes beyond 2^31 are not supported by cuBLAS's 32-bit interface");
  colmajor_gemm q;
  if (!lc.col_major) {
    /* C^T (N x M, column-major) = B^T A^T: B's buffer read column-major is B^T when B is
     * row-major (no transpose needed), and B itself when column-major (transpose it). */
    q = (colmajor_gemm){lb.col_major ? CUBLAS_OP_T : CUBLAS_OP_N, la.col_major ? CUBLAS_OP_T : CUBLAS_OP_N,
                        (int)N, (int)M, (int)K, (int)lb.ld, (int)la.ld, (int)lc.ld,
                        ms_tensor_data(b), ms_tensor_data(a), ms_tensor_data(c)};
  } else {
    q = (colmajor_gemm){la.col_major ? CUBLAS_OP_N : CUBLAS_OP_T, lb.col_major ? CUBLAS_OP_N : CUBLAS_OP_T,
                        (int)M, (int)N, (int)K, (int)la.ld, (int)lb.ld, (int)lc.ld,
                        ms_tensor_data(a), ms_tensor_data(b), ms_tensor_data(c)};
  }
  return check_blas("mm", run_gemm(h, dt, &q, alpha, beta));
}

static layout matrix_layout(const ms_tensor *t, bool *ok) {
  layout l = {false, 1};
  *ok = layout_of(t->shape[0], t->shape[1], t->strides[0], t->strides[1], &l);
  return l;
}

/* dst = src (one dtype and shape, on dst's CUDA device) by the device table's copy kernel. */
static ms_status copy_on_device(ms_tensor *dst, ms_tensor *src) {
  ms_k_exec x;
  if (ms_cuda_exec_for("mm", ms_tensor_device(dst).index, &x) != MS_OK) return MS_ERR_RUNTIME;
  ms_iter it;
  ms_iter_init(&it, dst->ndim, dst->shape, 2, (ms_tensor *[]){dst, src});
  ms_k_dtype dt = (ms_k_dtype)dst->dtype;
  return ms_cuda_check("mm", (cudaError_t)ms_k_cuda_table.cast(&x, &it, dt, dt));
}

/* A contiguous copy of t on its CUDA device (the engine's copy kernel, not cuBLAS). */
static ms_tensor *contiguous_copy(ms_tensor *t) {
  ms_tensor *c = ms_tensor_new_empty_on(ms_tensor_device(t), t->ndim, t->shape, t->dtype);
  if (c && copy_on_device(c, t) != MS_OK) ms_tensor_release(c), c = NULL;
  return c;
}

ms_status ms_cuda_gemm(double alpha, ms_tensor *a, ms_tensor *b, double beta, ms_tensor *c) {
  int64_t M = a->shape[0], K = a->shape[1], N = b->shape[1];
  if (M == 0 || N == 0) return MS_OK;
  cublasHandle_t h = handle_for("mm", ms_tensor_device(c).index);
  if (!h) return MS_ERR_RUNTIME;
  bool ok_a, ok_b, ok_c;
  layout la = matrix_layout(a, &ok_a), lb = matrix_layout(b, &ok_b), lc = matrix_layout(c, &ok_c);
  /* operands with no unit stride are copied contiguous; so is c, written back afterwards */
  ms_tensor *ca = ok_a ? (ms_tensor_retain(a), a) : contiguous_copy(a);
  ms_tensor *cb = ok_b ? (ms_tensor_retain(b), b) : contiguous_copy(b);
  ms_tensor *cc = ok_c ? (ms_tensor_retain(c), c) : contiguous_copy(c);
  ms_status st = ca && cb && cc ? MS_OK : MS_ERR_MEMORY;
  if (st == MS_OK) {
    la = matrix_layout(ca, &ok_a), lb = matrix_layout(cb, &ok_b), lc = matrix_layout(cc, &ok_c);
    st = gemm_raw(h, a->dtype, M, N, K, alpha, ca, la, cb, lb, beta, cc, lc);
  }
  if (st == MS_OK && cc != c && (st = copy_on_device(c, cc)) == MS_OK) ms_tensor_bump_version(c);
  ms_tensor_release(ca), ms_tensor_release(cb), ms_tensor_release(cc);
  return st;
}
