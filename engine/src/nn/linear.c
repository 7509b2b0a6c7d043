/* linear.c: the native linear, y = x @ w^T + b, through the device's gemm slot. w^T, the
 * gradient's transpose and any transposed view of x are passed as strides, never copied; only a
 * >2-D x that is not contiguous is copied once, to flatten its leading dims. bfloat16 operands on
 * a CPU with AVX-512 BF16 run the bfloat16 GEMM, and bfloat16 and float16 on CUDA cuBLAS's: on
 * both, float32 sums rounded once as the GEMM stores each result (the way FSDP's bfloat16 mixed
 * precision computes); other 16-bit cases are widened to float32 before they get here. */
#include "native/dispatch.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"

/* C (M x N) = A (M x K) @ B (K x N) + beta * C, each operand (pointer, row stride, col stride). */
typedef struct mat {
  void *p;
  int64_t rs, cs;
} mat;

static mat mat_of(const ms_tensor *t) { return (mat){ms_tensor_data(t), t->strides[0], t->strides[1]}; }
static mat mat_t(const ms_tensor *t) { return (mat){ms_tensor_data(t), t->strides[1], t->strides[0]}; }

/* C = A B + bias through the gemm slot of dev, every matrix of dtype dt; bias (NULL: none) holds
 * N contiguous elements, added as the GEMM stores C. */
static ms_status gemm(ms_device dev, ms_dtype dt, int64_t M, int64_t N, int64_t K, mat a, mat b, const void *bias,
                      mat c) {
  native_kernels nk;
  if (native_kernels_for("linear", dev, &nk) != MS_OK) return MS_ERR_RUNTIME;
  return native_kernel_status(&nk, nk.k->gemm(&nk.x, (ms_k_dtype)dt, (ms_k_dtype)dt, M, N, K, 1.0, a.p, a.rs, a.cs,
                                               b.p, b.rs, b.cs, 0, c.p, c.rs, c.cs, bias));
}

/* A new (rows, cols) matrix of dtype dt on dev holding A B (NULL on failure). */
static ms_tensor *product(ms_device dev, ms_dtype dt, int64_t rows, int64_t cols, int64_t K, mat a, mat b) {
  ms_tensor *c = ms_tensor_new_empty_on(dev, 2, (int64_t[]){rows, cols}, dt);
  if (c && gemm(dev, dt, rows, cols, K, a, b, NULL, mat_of(c)) != MS_OK) ms_tensor_release(c), c = NULL;
  return c;
}

/* t viewed as 2-D (rows, last dim): a view when possible, else a copy. */
static ms_tensor *as_matrix(ms_tensor *t) {
  if (t->ndim == 2) return ms_tensor_retain(t), t;
  int64_t shape[2] = {-1, t->ndim ? t->shape[t->ndim - 1] : 1};
  return native_reshape(t, 2, shape);
}

/* Whether x, w and b (NULL allowed) run a 16-bit GEMM: all of one 16-bit dtype, on CUDA (mm and
 * addmm hand the 16-bit operands to cuBLAS), or bfloat16 on a CPU that has AVX-512 BF16. */
bool native_linear_half(ms_tensor *x, ms_tensor *w, ms_tensor *b) {
  if (!x || !w || !ms_dtype_is_half(x->dtype) || w->dtype != x->dtype || (b && b->dtype != x->dtype)) return false;
  if (ms_tensor_device(x).type == MS_CUDA) return true;
  return x->dtype == MS_BFLOAT16 && ms_tensor_device(x).type == MS_CPU && ms_k_gemm_bf16_available();
}

static ms_status check_linear(ms_tensor *x, ms_tensor *w, ms_tensor *b) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  if ((native_linear_half(x, w, b) ? nn_check_float_or_half_any : nn_check_float_any)("linear", "input", x))
    return MS_ERR_ARG;
  if (nn_check_param_any("linear", "weight", w, x->dtype, -1)) return MS_ERR_ARG;
  if (ms_check_same_device("linear", 3, (ms_tensor *[]){x, w, b})) return MS_ERR_ARG;
  if (w->ndim != 2)
    return ms_error(MS_ERR_ARG, "linear: weight must be 2-D (out_features, in_features), got %s",
                    ms_shape_str(w->ndim, w->shape, b1, sizeof b1));
  if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
    return ms_error(MS_ERR_ARG, "linear: input shape %s and weight shape %s cannot be multiplied "
                    "(the input's last dim must be in_features = %lld)",
                    ms_shape_str(x->ndim, x->shape, b1, sizeof b1),
                    ms_shape_str(w->ndim, w->shape, b2, sizeof b2), (long long)w->shape[1]);
  return nn_check_param_any("linear", "bias", b, x->dtype, w->shape[0]);
}

ms_status native_linear_backward(ms_tensor *x, ms_tensor *w, ms_tensor *grad_output, const bool need[3],
                                 ms_tensor *grad_in[3]) {
  ms_dtype dt = w->dtype;
  ms_tensor *g = native_to_dtype(grad_output, dt), *g2 = g ? as_matrix(g) : NULL;
  ms_tensor *x2 = g2 ? as_matrix(x) : NULL;
  ms_status st = x2 ? MS_OK : MS_ERR_MEMORY;
  ms_device dev = ms_tensor_device(w);
  int64_t M = x2 ? x2->shape[0] : 0, in = w->shape[1], out = w->shape[0];
  if (st == MS_OK && need[0]) {
    ms_tensor *gx = product(dev, dt, M, in, out, mat_of(g2), mat_of(w));
    grad_in[0] = gx ? native_reshape(gx, x->ndim, x->shape) : NULL;
    ms_tensor_release(gx);
    if (!grad_in[0]) st = MS_ERR_MEMORY;
  }
  if (st == MS_OK && need[1] && !(grad_in[1] = product(dev, dt, out, in, M, mat_t(g2), mat_of(x2))))
    st = MS_ERR_MEMORY;
  if (st == MS_OK && need[2] &&
      !(grad_in[2] = native_reduce(MS_RED_SUM, g2, (ms_reduce_opts){.dim = 0})))
    st = MS_ERR_MEMORY;
  ms_tensor_release(g), ms_tensor_release(g2), ms_tensor_release(x2);
  if (st != MS_OK) nn_release_all(3, grad_in);
  return st;
}

/* The forward: (M, out) then viewed as (..., out), the bias added by the GEMM as it stores y (one
 * kernel, no pass that copies the bias in first). */
static ms_tensor *linear_forward(ms_tensor *x, ms_tensor *w, ms_tensor *b) {
  ms_device dev = ms_tensor_device(x);
  ms_tensor *x2 = as_matrix(x), *bc = x2 && b ? nn_contiguous(b, b->dtype) : NULL;
  int64_t M = x2 ? x2->shape[0] : 0, shape[MS_MAX_DIMS];
  ms_tensor *y = x2 && (!b || bc) ? ms_tensor_new_empty_on(dev, 2, (int64_t[]){M, w->shape[0]}, x->dtype) : NULL;
  if (y && gemm(dev, x->dtype, M, w->shape[0], w->shape[1], mat_of(x2), mat_t(w), bc ? ms_tensor_data(bc) : NULL,
                mat_of(y)) != MS_OK)
    ms_tensor_release(y), y = NULL;
  for (int d = 0; d < x->ndim - 1; d++) shape[d] = x->shape[d];
  shape[x->ndim - 1] = w->shape[0];
  ms_tensor *out = y ? native_view(y, x->ndim, shape) : NULL;
  ms_tensor_release(x2), ms_tensor_release(bc), ms_tensor_release(y);
  return out;
}

ms_tensor *native_linear(ms_tensor *x, ms_tensor *w, ms_tensor *b) {
  if (check_linear(x, w, b) != MS_OK) return NULL;
  return linear_forward(x, w, b);
}
