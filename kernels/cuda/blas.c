/* blas.c: the CUDA body of the gemm slot, through cuBLAS, one handle per device created on
 * first use. cuBLAS is column-major: a row-major product C = A B is computed as C^T = B^T A^T,
 * so any matrix with one unit stride is passed as it lies, never copied. cuBLAS is loaded with
 * dlopen on the first product, not linked: linking it (and cuBLASLt behind it) costs every
 * process ~150 MB of resident memory and ~0.2 s of start-up, GPU or not. bfloat16 and float16
 * products go through cublasGemmEx with float32 accumulation (mixed precision's param_dtype on
 * the GPU): the CPU's float32 arithmetic, rounded once into c, without widened copies. */
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/cuda/blas_lt.h"
#include "kernels/cuda/lazy_lib.h"
#include "kernels/cuda/lib_error.h"
#include "kernels/kernels_cuda.h"

#define MAX_DEVICES 64 /* moonshard/cuda.h's MS_CUDA_MAX_DEVICES: the engine checks indices */

static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t handles[MAX_DEVICES];

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

static const ms_kcu_lazy_lib cublas = {MS_CUBLAS_SONAME, MS_CUBLAS_FALLBACK, "cuBLAS"};

/* Loads cuBLAS once (under handles_lock). */
static int load_cublas(void) {
  if (blas.loaded) return 0;
  char why[512];
  void *lib = ms_kcu_lazy_open(&cublas, why, sizeof why);
  if (!lib) return ms_kcu_fail("%s", why);
  bool ok = ms_kcu_lazy_resolve(&cublas, lib, "cublasCreate_v2", &blas.create, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublas, lib, "cublasSetStream_v2", &blas.set_stream, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublas, lib, "cublasSgemm_v2", &blas.sgemm, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublas, lib, "cublasDgemm_v2", &blas.dgemm, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublas, lib, "cublasGemmEx", &blas.gemm_ex, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublas, lib, "cublasGetStatusString", &blas.status_string, why, sizeof why) &&
            ms_kcu_lazy_resolve(&cublas, lib, "cublasGetStatusName", &blas.status_name, why, sizeof why);
  if (!ok) {
    dlclose(lib);
    return ms_kcu_fail("%s", why);
  }
  blas.loaded = true;
  return 0;
}

static int check_blas(cublasStatus_t st) {
  if (st == CUBLAS_STATUS_SUCCESS) return 0;
  return ms_kcu_fail("cuBLAS error: %s (%s)", blas.status_string(st), blas.status_name(st));
}

/* x's device's handle, bound to x's stream (the dispatch made the device current); 0 or the
 * error. */
static int handle_for(const ms_k_exec *x, cublasHandle_t *h) {
  int dev = x->device, err = 0;
  pthread_mutex_lock(&handles_lock);
  if (!handles[dev] && ((err = load_cublas()) != 0 || (err = check_blas(blas.create(&handles[dev]))) != 0))
    handles[dev] = NULL;
  *h = handles[dev];
  pthread_mutex_unlock(&handles_lock);
  return err ? err : check_blas(blas.set_stream(*h, (cudaStream_t)x->stream));
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

static cudaDataType_t half_type(ms_k_dtype dt) { return dt == MS_K_BF16 ? CUDA_R_16BF : CUDA_R_16F; }

static cublasStatus_t run_gemm(cublasHandle_t h, ms_k_dtype dt, const colmajor_gemm *q, double alpha, double beta) {
  if (dt == MS_K_F64)
    return blas.dgemm(h, q->oa, q->ob, q->m, q->n, q->k, &alpha, q->A, q->lda, q->B, q->ldb, &beta, q->C, q->ldc);
  float fa = (float)alpha, fb = (float)beta; /* float32 scalars for sgemm and the 32F compute type */
  if (dt == MS_K_F32)
    return blas.sgemm(h, q->oa, q->ob, q->m, q->n, q->k, &fa, q->A, q->lda, q->B, q->ldb, &fb, q->C, q->ldc);
  cudaDataType_t t = half_type(dt);
  return blas.gemm_ex(h, q->oa, q->ob, q->m, q->n, q->k, &fa, q->A, t, q->lda, q->B, t, q->ldb, &fb, q->C, t, q->ldc,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/* One matrix of the slot: rows x cols at p, element strides rs and cs. */
typedef struct matrix {
  int64_t rows, cols, rs, cs;
  char *p;
} matrix;

/* c = alpha a b + beta c, with a, b and c laid out usably. */
static int gemm_raw(cublasHandle_t h, ms_k_dtype dt, int64_t K, double alpha, const matrix *a, layout la,
                    const matrix *b, layout lb, double beta, const matrix *c, layout lc) {
  int64_t M = c->rows, N = c->cols;
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || la.ld > INT32_MAX || lb.ld > INT32_MAX || lc.ld > INT32_MAX)
    return ms_kcu_fail("sizes beyond 2^31 are not supported by cuBLAS's 32-bit interface");
  colmajor_gemm q;
  if (!lc.col_major) {
    /* C^T (N x M, column-major) = B^T A^T: B's buffer read column-major is B^T when B is
     * row-major (no transpose needed), and B itself when column-major (transpose it). */
    q = (colmajor_gemm){lb.col_major ? CUBLAS_OP_T : CUBLAS_OP_N, la.col_major ? CUBLAS_OP_T : CUBLAS_OP_N,
                        (int)N, (int)M, (int)K, (int)lb.ld, (int)la.ld, (int)lc.ld, b->p, a->p, c->p};
  } else {
    q = (colmajor_gemm){la.col_major ? CUBLAS_OP_N : CUBLAS_OP_T, lb.col_major ? CUBLAS_OP_N : CUBLAS_OP_T,
                        (int)M, (int)N, (int)K, (int)la.ld, (int)lb.ld, (int)lc.ld, a->p, b->p, c->p};
  }
  return check_blas(run_gemm(h, dt, &q, alpha, beta));
}

/* The element geometry of copying src into dst (same rows x cols, each with its strides). */
static ms_k_geom copy_geom(const matrix *dst, const matrix *src, size_t es) {
  ms_k_geom g = {.nops = 2, .ndim = 2, .shape = {dst->rows, dst->cols}, .data = {dst->p, src->p}, .elsize = {es, es}};
  g.strides[0][0] = dst->rs, g.strides[0][1] = dst->cs, g.strides[1][0] = src->rs, g.strides[1][1] = src->cs;
  return g;
}

/* dst = src on x's stream (the copy kernel, not cuBLAS). */
static int copy_matrix(const ms_k_exec *x, ms_k_dtype dt, const matrix *dst, const matrix *src, size_t es) {
  ms_k_geom g = copy_geom(dst, src, es);
  return ms_k_cuda_cast(x, &g, dt, dt);
}

/* m itself where cuBLAS can read it as it lies; else a packed row-major copy in scratch memory
 * (*scratch set; copied in when `fill`, c is copied back by the caller). */
static int usable(const ms_k_exec *x, ms_k_dtype dt, size_t es, matrix *m, bool fill, void **scratch, layout *l) {
  *scratch = NULL;
  if (layout_of(m->rows, m->cols, m->rs, m->cs, l)) return 0;
  size_t bytes = (size_t)(m->rows * m->cols) * es;
  if (bytes == 0) return *m = (matrix){m->rows, m->cols, m->cols, 1, m->p}, *l = (layout){false, 1}, 0; /* K = 0 */
  if (!(*scratch = x->scratch_alloc(x->device, bytes)))
    return ms_kcu_fail("out of memory for a contiguous copy of a %lld x %lld matrix", (long long)m->rows,
                       (long long)m->cols);
  matrix packed = {m->rows, m->cols, m->cols, 1, *scratch};
  int err = fill ? copy_matrix(x, dt, &packed, m, es) : 0;
  *m = packed;
  layout_of(m->rows, m->cols, m->rs, m->cs, l);
  return err;
}

static size_t elsize(ms_k_dtype dt) { return dt == MS_K_F64 ? 8 : dt == MS_K_F32 ? 4 : 2; }

/* c = alpha a b + bias in one cuBLASLt kernel (blas_lt.c) where c is row-major and a and b lie as
 * cuBLAS reads them (no copies) and K > 0; MS_KCU_LT_DECLINED, having launched nothing, else. */
static int gemm_bias_lt(const ms_k_exec *x, ms_k_dtype dt, int64_t K, double alpha, const matrix *a,
                        const matrix *b, const matrix *c, const void *bias) {
  layout la, lb, lc;
  if (K == 0 || !layout_of(a->rows, a->cols, a->rs, a->cs, &la) || !layout_of(b->rows, b->cols, b->rs, b->cs, &lb) ||
      !layout_of(c->rows, c->cols, c->rs, c->cs, &lc) || lc.col_major)
    return MS_KCU_LT_DECLINED;
  /* C^T (N x M, column-major) = B^T A^T, as gemm_raw computes it: the bias runs along its rows */
  ms_kcu_lt_gemm g = {dt, lb.col_major ? CUBLAS_OP_T : CUBLAS_OP_N, la.col_major ? CUBLAS_OP_T : CUBLAS_OP_N,
                      c->cols, c->rows, K, lb.ld, la.ld, lc.ld, b->p, a->p, bias, c->p, alpha};
  return ms_kcu_lt_gemm_bias(&g, x->device, x->stream);
}

/* c = the bias broadcast over its rows (the copy kernel, a stride-0 source), for a beta-1 product. */
static int fill_bias(const ms_k_exec *x, ms_k_dtype dt, const matrix *c, const void *bias, size_t es) {
  matrix src = {c->rows, c->cols, 0, 1, (char *)bias};
  return copy_matrix(x, dt, c, &src, es);
}

int ms_k_cuda_gemm(const ms_k_exec *x, ms_k_dtype dt, ms_k_dtype cdt, int64_t M, int64_t N, int64_t K, double alpha,
                   const void *a, int64_t rsa, int64_t csa, const void *b, int64_t rsb, int64_t csb, double beta,
                   void *c, int64_t rsc, int64_t csc, const void *bias) {
  if (cdt != dt || (dt != MS_K_F32 && dt != MS_K_F64 && dt != MS_K_BF16 && dt != MS_K_F16))
    return ms_kcu_fail("%s matrices are not implemented for CUDA tensors yet (float32, float64, bfloat16 and "
                       "float16 are)", dt == MS_K_I64 ? "int64" : dt == MS_K_I32 ? "int32" : dt == MS_K_U8 ? "uint8"
                       : dt == MS_K_BOOL ? "bool" : "mixed-dtype");
  if (bias && beta != 0) return ms_kcu_fail("gemm: a bias is added with beta 0, got beta %g", beta);
  if (M == 0 || N == 0) return 0;
  size_t es = elsize(dt);
  matrix ma = {M, K, rsa, csa, (char *)a}, mb = {K, N, rsb, csb, (char *)b}, mc = {M, N, rsc, csc, c};
  const matrix c_orig = mc;
  int err = 0;
  if (bias) { /* the epilogue where cuBLASLt takes it; else c starts as the bias, then beta 1 */
    if ((err = gemm_bias_lt(x, dt, K, alpha, &ma, &mb, &mc, bias)) != MS_KCU_LT_DECLINED) return err;
    if ((err = fill_bias(x, dt, &mc, bias, es)) != 0) return err;
    beta = 1;
  }
  cublasHandle_t h;
  if ((err = handle_for(x, &h)) != 0) return err;
  /* operands with no unit stride are copied packed; so is c, written back afterwards */
  void *sa = NULL, *sb = NULL, *sc = NULL;
  layout la, lb, lc;
  err = usable(x, dt, es, &ma, true, &sa, &la);
  if (!err) err = usable(x, dt, es, &mb, true, &sb, &lb);
  if (!err) err = usable(x, dt, es, &mc, true, &sc, &lc);
  if (!err) err = gemm_raw(h, dt, K, alpha, &ma, la, &mb, lb, beta, &mc, lc);
  if (!err && sc) err = copy_matrix(x, dt, &c_orig, &mc, es);
  size_t bytes[3] = {(size_t)(M * K) * es, (size_t)(K * N) * es, (size_t)(M * N) * es};
  void *scratch[3] = {sa, sb, sc};
  for (int k = 0; k < 3; k++)
    if (scratch[k]) x->scratch_free(x->device, scratch[k], bytes[k]);
  return err;
}
