/* native/matmul.c: mm, bmm, matmul and addmm. float32 and float64 run on the packed GEMM with
 * the operands' own strides (a transposed view costs no copy); bfloat16 too where the CPU has
 * AVX-512 BF16 (float32 sums, rounded once as each tile is stored); other 16-bit products on the
 * CPU compute in float32 copies;
 * integer dtypes use a plain exact loop (the CPU's gemm body). Every product goes through the
 * gemm slot of the operands' device. matmul is composed of steps (unsqueeze, expand,
 * reshape, mm, bmm, view, squeeze) handed in by its caller: the native ones here, the public
 * ones (each recording its node) for the public matmul (autograd/grad_matmul.c). */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "native/dispatch.h"
#include "native/native.h"

static ms_status check_same_dtype(const char *op, const ms_tensor *a, const ms_tensor *b) {
  if (a->dtype == b->dtype) return MS_OK;
  return ms_error(MS_ERR_ARG, "%s: expected both operands to have the same dtype, got %s and %s",
                  op, ms_dtype_name(a->dtype), ms_dtype_name(b->dtype));
}

/* One device for all operands (c may be NULL), data readable there. */
static ms_status check_operands(const char *op, ms_tensor *a, ms_tensor *b, ms_tensor *c) {
  if (ms_check_same_device(op, 3, (ms_tensor *[]){a, b, c}) != MS_OK) return MS_ERR_ARG;
  for (int k = 0; k < 3; k++) {
    ms_tensor *t = (ms_tensor *[]){a, b, c}[k];
    if (t && ms_tensor_check_data_any(op, t) != MS_OK) return MS_ERR_RUNTIME;
  }
  return MS_OK;
}

/* c = alpha * a @ b + beta * c on 2-D operands through the gemm slot of c's device; a, b and c of
 * one dtype; c already has shape (M, N). */
static ms_status gemm2d(double alpha, ms_tensor *a, ms_tensor *b, double beta, ms_tensor *c) {
  native_kernels nk;
  if (native_kernels_for("mm", ms_tensor_device(c), &nk) != MS_OK) return MS_ERR_RUNTIME;
  return native_kernel_status(&nk, nk.k->gemm(&nk.x, (ms_k_dtype)a->dtype, (ms_k_dtype)c->dtype, a->shape[0],
                                               b->shape[1], a->shape[1], alpha, ms_tensor_data(a), a->strides[0],
                                               a->strides[1], ms_tensor_data(b), b->strides[0], b->strides[1], beta,
                                               ms_tensor_data(c), c->strides[0], c->strides[1], NULL));
}

/* Runs gemm2d in float32 copies for 16-bit floats the device's GEMM does not take (cuBLAS takes
 * both, the CPU bfloat16 where it has AVX-512 BF16: float32 sums rounded once into c either way).
 * A RULE, not a kernel choice. */
static ms_status gemm2d_any(double alpha, ms_tensor *a, ms_tensor *b, double beta, ms_tensor *c) {
  bool half = ms_dtype_is_half(a->dtype);
  if (!half || ms_tensor_device(c).type == MS_CUDA || (a->dtype == MS_BFLOAT16 && ms_k_gemm_bf16_available()))
    return gemm2d(alpha, a, b, beta, c);
  ms_tensor *fa = native_to_dtype(a, MS_FLOAT32), *fb = native_to_dtype(b, MS_FLOAT32);
  ms_tensor *fc = fa && fb ? native_to_dtype(c, MS_FLOAT32) : NULL;
  ms_status st = fc ? MS_OK : MS_ERR_MEMORY;
  if (fc) st = gemm2d(alpha, fa, fb, beta, fc);
  if (fc && st == MS_OK) st = native_copy_(c, fc);
  ms_tensor_release(fa), ms_tensor_release(fb), ms_tensor_release(fc);
  return st;
}

/* The checks mm and addmm share: 2-D, inner sizes agree, one dtype, data present. */
static ms_status check_mm(const char *op, ms_tensor *a, ms_tensor *b) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  if (a->ndim != 2 || b->ndim != 2)
    return ms_error(MS_ERR_ARG, "%s: expected 2-D matrices, got shapes %s and %s", op,
                    ms_shape_str(a->ndim, a->shape, b1, sizeof b1), ms_shape_str(b->ndim, b->shape, b2, sizeof b2));
  if (a->shape[1] != b->shape[0])
    return ms_error(MS_ERR_ARG, "%s: shapes %s and %s cannot be multiplied (%lld columns against %lld rows)",
                    op, ms_shape_str(2, a->shape, b1, sizeof b1), ms_shape_str(2, b->shape, b2, sizeof b2),
                    (long long)a->shape[1], (long long)b->shape[0]);
  if (check_same_dtype(op, a, b)) return MS_ERR_ARG;
  return check_operands(op, a, b, NULL);
}

ms_tensor *native_mm(ms_tensor *a, ms_tensor *b) {
  if (check_mm("mm", a, b) != MS_OK) return NULL;
  int64_t shape[2] = {a->shape[0], b->shape[1]};
  ms_tensor *c = ms_tensor_new_empty_on(ms_tensor_device(a), 2, shape, a->dtype);
  if (c && gemm2d_any(1, a, b, 0, c) != MS_OK) ms_tensor_release(c), c = NULL;
  return c;
}

ms_tensor *native_bmm(ms_tensor *a, ms_tensor *b) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  if (a->ndim != 3 || b->ndim != 3 || a->shape[0] != b->shape[0] || a->shape[2] != b->shape[1])
    return ms_error(MS_ERR_ARG, "bmm: expected (b, n, k) and (b, k, m) batches, got shapes %s and %s",
                    ms_shape_str(a->ndim, a->shape, b1, sizeof b1), ms_shape_str(b->ndim, b->shape, b2, sizeof b2)), NULL;
  if (check_same_dtype("bmm", a, b) || check_operands("bmm", a, b, NULL)) return NULL;
  int64_t shape[3] = {a->shape[0], a->shape[1], b->shape[2]};
  ms_tensor *c = ms_tensor_new_empty_on(ms_tensor_device(a), 3, shape, a->dtype);
  for (int64_t i = 0; c && i < shape[0]; i++) {
    ms_tensor *ai = native_select(a, 0, i), *bi = native_select(b, 0, i), *ci = native_select(c, 0, i);
    ms_status st = ai && bi && ci ? gemm2d_any(1, ai, bi, 0, ci) : MS_ERR_MEMORY;
    ms_tensor_release(ai), ms_tensor_release(bi), ms_tensor_release(ci);
    if (st != MS_OK) ms_tensor_release(c), c = NULL;
  }
  return c;
}

/* Broadcast batched product of a (..., n, k) and b (..., k, m), both at least 2-D. */
static ms_tensor *batched_matmul(const native_matmul_steps *steps, ms_tensor *a, ms_tensor *b) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  int na = a->ndim - 2, nb = b->ndim - 2, nbatch = na > nb ? na : nb;
  int64_t batch[MS_MAX_DIMS], numel = 1;
  for (int i = 0; i < nbatch; i++) {
    int ia = na - nbatch + i, ib = nb - nbatch + i;
    int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      return ms_error(MS_ERR_ARG, "matmul: batch dimensions of %s and %s do not broadcast",
                      ms_shape_str(a->ndim, a->shape, b1, sizeof b1), ms_shape_str(b->ndim, b->shape, b2, sizeof b2)), NULL;
    batch[i] = sa == 1 ? sb : sa;
    numel *= batch[i];
  }
  int64_t n = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], m = b->shape[b->ndim - 1];
  if (b->shape[b->ndim - 2] != k)
    return ms_error(MS_ERR_ARG, "matmul: shapes %s and %s cannot be multiplied (%lld against %lld)",
                    ms_shape_str(a->ndim, a->shape, b1, sizeof b1), ms_shape_str(b->ndim, b->shape, b2, sizeof b2),
                    (long long)k, (long long)b->shape[b->ndim - 2]), NULL;
  int64_t shape_a[MS_MAX_DIMS], shape_b[MS_MAX_DIMS];
  memcpy(shape_a, batch, sizeof(int64_t) * nbatch), memcpy(shape_b, batch, sizeof(int64_t) * nbatch);
  shape_a[nbatch] = n, shape_a[nbatch + 1] = k, shape_b[nbatch] = k, shape_b[nbatch + 1] = m;
  ms_tensor *ea = steps->expand(a, nbatch + 2, shape_a), *eb = steps->expand(b, nbatch + 2, shape_b);
  ms_tensor *ra = ea ? steps->reshape(ea, 3, (int64_t[]){numel, n, k}) : NULL;
  ms_tensor *rb = eb ? steps->reshape(eb, 3, (int64_t[]){numel, k, m}) : NULL;
  ms_tensor *c = ra && rb ? steps->bmm(ra, rb) : NULL, *out = NULL;
  if (c) {
    shape_a[nbatch + 1] = m;
    out = steps->view(c, nbatch + 2, shape_a);
  }
  ms_tensor_release(ea), ms_tensor_release(eb), ms_tensor_release(ra), ms_tensor_release(rb), ms_tensor_release(c);
  return out;
}

ms_tensor *native_matmul_by(const native_matmul_steps *steps, ms_tensor *a, ms_tensor *b) {
  if (a->ndim == 0 || b->ndim == 0)
    return ms_error(MS_ERR_ARG, "matmul: both arguments need at least 1 dimension, got %d and %d",
                    a->ndim, b->ndim), NULL;
  if (check_same_dtype("matmul", a, b)) return NULL;
  if (a->ndim == 2 && b->ndim == 2) return steps->mm(a, b);
  /* 1-D operands become a row (left) or a column (right), removed again afterwards. */
  ms_tensor *a2 = a->ndim == 1 ? steps->unsqueeze(a, 0) : (ms_tensor_retain(a), a);
  ms_tensor *b2 = b->ndim == 1 ? steps->unsqueeze(b, 1) : (ms_tensor_retain(b), b);
  ms_tensor *c = a2 && b2 ? (a2->ndim == 2 && b2->ndim == 2 ? steps->mm(a2, b2) : batched_matmul(steps, a2, b2)) : NULL;
  ms_tensor_release(a2), ms_tensor_release(b2);
  if (c && b->ndim == 1) {
    ms_tensor *s = steps->squeeze(c, -1);
    ms_tensor_release(c), c = s;
  }
  if (c && a->ndim == 1) {
    ms_tensor *s = steps->squeeze(c, b->ndim == 1 ? -1 : -2);
    ms_tensor_release(c), c = s;
  }
  return c;
}

static const native_matmul_steps native_steps = {
    .mm = native_mm, .bmm = native_bmm, .unsqueeze = native_unsqueeze, .squeeze = native_squeeze,
    .expand = native_expand, .reshape = native_reshape, .view = native_view};

ms_tensor *native_matmul(ms_tensor *a, ms_tensor *b) { return native_matmul_by(&native_steps, a, b); }

ms_tensor *native_addmm(ms_tensor *c, ms_tensor *a, ms_tensor *b, double beta, double alpha) {
  if (check_mm("addmm", a, b) != MS_OK || check_same_dtype("addmm", c, a) != MS_OK ||
      check_operands("addmm", a, b, c) != MS_OK)
    return NULL;
  int64_t shape[2] = {a->shape[0], b->shape[1]};
  ms_tensor *bc = native_expand(c, 2, shape);
  if (!bc) {
    char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
    return ms_error(MS_ERR_ARG, "addmm: input of shape %s does not broadcast to the product's shape %s",
                    ms_shape_str(c->ndim, c->shape, b1, sizeof b1), ms_shape_str(2, shape, b2, sizeof b2)), NULL;
  }
  /* PyTorch converts beta and alpha to the operands' dtype: integer products truncate them. */
  bool integral = !ms_dtype_is_floating(a->dtype);
  if (integral) beta = trunc(beta), alpha = trunc(alpha);
  /* out = beta * c, then the GEMM accumulates alpha * a @ b into it. */
  ms_tensor *out = ms_tensor_new_empty_on(ms_tensor_device(a), 2, shape, a->dtype);
  ms_status st = out ? MS_OK : MS_ERR_MEMORY;
  if (st == MS_OK) st = beta == 0 ? native_zero_(out) : native_copy_(out, bc);
  if (st == MS_OK && beta != 0 && beta != 1)
    st = native_binary_(MS_OP_MUL, out, ms_operand_number(beta, integral ? MS_INT64 : MS_FLOAT64));
  if (st == MS_OK) st = gemm2d_any(alpha, a, b, 1, out);
  ms_tensor_release(bc);
  if (st != MS_OK) ms_tensor_release(out), out = NULL;
  return out;
}
