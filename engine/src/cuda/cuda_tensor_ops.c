/* cuda_tensor_ops.c: copies, fills and elementwise ops on CUDA tensors: the strided geometry
 * (dims merged by the same iterator the CPU uses) handed to one kernel launch on the device's
 * current stream. */
#include <string.h>

#include "cuda_internal.h"
#include "cuda_ops.h"
#include "kernels/kernels_cuda.h"
#include "tensor_iter.h"

/* The iterator's merged geometry of the n operands as the kernels take it. */
static void to_geom(const ms_iter *it, ms_k_geom *g) { *g = *it; }

/* Makes out's device current; the stream to launch on comes with it. */
ms_status ms_cuda_copy_same_shape(ms_tensor *dst, ms_tensor *src) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("copy_", dst, &s) != MS_OK) return MS_ERR_RUNTIME;
  ms_iter it;
  ms_tensor *ops[2] = {dst, src};
  ms_iter_init(&it, dst->ndim, dst->shape, 2, ops);
  ms_k_geom g;
  to_geom(&it, &g);
  return ms_cuda_check("copy_", (cudaError_t)ms_kc_cast(&g, it.data[0], (ms_k_dtype)dst->dtype,
                                                        it.data[1], (ms_k_dtype)src->dtype, s));
}

/* A CPU operand of a CUDA op is a broadcast number: its one value, in both forms. */
static ms_k_scalar scalar_of(const ms_tensor *t) {
  ms_k_scalar v = {ms_tensor_get_flat(t, 0), ms_tensor_get_flat_int(t, 0)};
  return v;
}

ms_status ms_cuda_binary(ms_k_binop op, ms_dtype cd, ms_tensor *out, ms_tensor *a, ms_tensor *b) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("binary op", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  bool a_host = ms_tensor_device(a).type == MS_CPU, b_host = ms_tensor_device(b).type == MS_CPU;
  ms_k_scalar sa = a_host ? scalar_of(a) : (ms_k_scalar){0, 0};
  ms_k_scalar sb = b_host ? scalar_of(b) : (ms_k_scalar){0, 0};
  ms_iter it;
  ms_tensor *ops[3] = {out, a, b};
  ms_iter_init(&it, out->ndim, out->shape, 3, ops);
  ms_k_geom g;
  to_geom(&it, &g);
  int err = ms_kc_binary(op, (ms_k_dtype)cd, &g, it.data[0], a_host ? NULL : it.data[1], &sa,
                         b_host ? NULL : it.data[2], &sb, s);
  return ms_cuda_check("binary op", (cudaError_t)err);
}

ms_status ms_cuda_unary(ms_k_unop op, ms_dtype cd, ms_tensor *out, ms_tensor *a) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("unary op", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  ms_iter it;
  ms_tensor *ops[2] = {out, a};
  ms_iter_init(&it, out->ndim, out->shape, 2, ops);
  ms_k_geom g;
  to_geom(&it, &g);
  return ms_cuda_check("unary op", (cudaError_t)ms_kc_unary(op, (ms_k_dtype)cd, &g, it.data[0], it.data[1], s));
}

ms_status ms_cuda_clamp(ms_dtype cd, ms_tensor *out, ms_tensor *a, const double *lo, const double *hi) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("clamp", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  ms_iter it;
  ms_tensor *ops[2] = {out, a};
  ms_iter_init(&it, out->ndim, out->shape, 2, ops);
  ms_k_geom g;
  to_geom(&it, &g);
  return ms_cuda_check("clamp", (cudaError_t)ms_kc_clamp((ms_k_dtype)cd, &g, it.data[0], it.data[1], lo, hi, s));
}

ms_status ms_cuda_where(ms_dtype cd, ms_tensor *out, ms_tensor *cond, ms_tensor *a, ms_tensor *b) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("where", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  bool a_host = ms_tensor_device(a).type == MS_CPU, b_host = ms_tensor_device(b).type == MS_CPU;
  ms_k_scalar sa = a_host ? scalar_of(a) : (ms_k_scalar){0, 0};
  ms_k_scalar sb = b_host ? scalar_of(b) : (ms_k_scalar){0, 0};
  ms_iter it;
  ms_tensor *ops[4] = {out, cond, a, b};
  ms_iter_init(&it, out->ndim, out->shape, 4, ops);
  ms_k_geom g;
  to_geom(&it, &g);
  int err = ms_kc_where((ms_k_dtype)cd, &g, it.data[0], (const uint8_t *)it.data[1],
                        a_host ? NULL : it.data[2], &sa, b_host ? NULL : it.data[3], &sb, s);
  return ms_cuda_check("where", (cudaError_t)err);
}

/* Rows of in's last dim, one per element of out, for the reduce kernels. */
static ms_kc_rows rows_of(const ms_tensor *in, const ms_tensor *out) {
  ms_kc_rows g = {0};
  g.ndim = in->ndim - 1;
  for (int d = 0; d < g.ndim; d++) g.shape[d] = in->shape[d], g.strides[d] = in->strides[d];
  g.rows = ms_tensor_numel(out);
  g.n = in->ndim > 0 ? in->shape[in->ndim - 1] : 1;
  g.stride = in->ndim > 0 ? in->strides[in->ndim - 1] : 0;
  return g;
}

ms_status ms_cuda_reduce(ms_k_redop op, bool mean, ms_tensor *in, ms_tensor *out, ms_tensor *indices) {
  cudaStream_t s;
  if (ms_cuda_use_tensor("reduce", out, &s) != MS_OK) return MS_ERR_RUNTIME;
  ms_kc_rows g = rows_of(in, out);
  int err = ms_kc_reduce_rows(op, (ms_k_dtype)in->dtype, &g, ms_tensor_data(in), mean, ms_tensor_data(out),
                              (ms_k_dtype)out->dtype, indices ? ms_tensor_data(indices) : NULL, s);
  return ms_cuda_check("reduce", (cudaError_t)err);
}

ms_status ms_cuda_reduce_stat(ms_k_redop op, double p, int64_t correction, bool root, ms_tensor *in, ms_tensor *out) {
  const char *name = op == MS_K_RPOWSUM ? "norm" : root ? "std" : "var";
  cudaStream_t s;
  if (ms_cuda_use_tensor(name, out, &s) != MS_OK) return MS_ERR_RUNTIME;
  ms_kc_rows g = rows_of(in, out);
  ms_kc_stat st = {op, p, (double)correction, root};
  int err = ms_kc_reduce_stat_rows(&st, (ms_k_dtype)in->dtype, &g, ms_tensor_data(in), ms_tensor_data(out),
                                   (ms_k_dtype)out->dtype, s);
  return ms_cuda_check(name, (cudaError_t)err);
}
