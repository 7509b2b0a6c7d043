/* tensor_element.c: single-element access (by flat row-major index, on any device) for
 * printing, tests and the factories that write a few values. */
#include <string.h>

#include "kernels/kernels.h"
#include "moonshard/cuda.h"
#include "moonshard/tensor_core.h"

/* Byte address of the element at logical row-major position i. */
static char *element_at(const ms_tensor *t, int64_t i) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    off += (i % t->shape[d]) * t->strides[d];
    i /= t->shape[d];
  }
  return (char *)ms_tensor_data(t) + off * (int64_t)ms_dtype_size(t->dtype);
}

/* The bytes of element i where the CPU can read them: in place, or copied from the device into
 * `buf` (zeros, with the error set, if the copy fails). */
static const void *element_bytes(const ms_tensor *t, int64_t i, void *buf) {
  ms_device d = ms_tensor_device(t);
  if (d.type == MS_CPU) return element_at(t, i);
  memset(buf, 0, 8);
  ms_cuda_memcpy(buf, 0, element_at(t, i), d.index, ms_dtype_size(t->dtype), MS_CUDA_D2H);
  return buf;
}

double ms_tensor_get_flat(const ms_tensor *t, int64_t i) {
  double v, buf;
  ms_k_cast(1, &v, MS_K_F64, 1, element_bytes(t, i, &buf), (ms_k_dtype)t->dtype, 1);
  return v;
}

int64_t ms_tensor_get_flat_int(const ms_tensor *t, int64_t i) {
  int64_t v, buf;
  ms_k_cast(1, &v, MS_K_I64, 1, element_bytes(t, i, &buf), (ms_k_dtype)t->dtype, 1);
  return v;
}

void ms_tensor_set_flat(ms_tensor *t, int64_t i, double v) {
  ms_device d = ms_tensor_device(t);
  if (d.type == MS_CPU) {
    ms_k_cast(1, element_at(t, i), (ms_k_dtype)t->dtype, 1, &v, MS_K_F64, 1);
    return;
  }
  int64_t buf;
  ms_k_cast(1, &buf, (ms_k_dtype)t->dtype, 1, &v, MS_K_F64, 1);
  ms_cuda_memcpy(element_at(t, i), d.index, &buf, 0, ms_dtype_size(t->dtype), MS_CUDA_H2D);
}

ms_status ms_tensor_item(const ms_tensor *t, double *out) {
  int64_t n = ms_tensor_numel(t);
  if (n != 1) {
    char b[MS_SHAPE_STR_LEN];
    return ms_error(MS_ERR_ARG, "item: only a one-element tensor can be converted to a number, "
                    "got shape %s (%lld elements)", ms_shape_str(t->ndim, t->shape, b, sizeof b), (long long)n);
  }
  if (ms_tensor_check_data_any("item", t) != MS_OK) return MS_ERR_RUNTIME;
  if (ms_tensor_device(t).type == MS_CPU) return *out = ms_tensor_get_flat(t, 0), MS_OK;
  double v = 0; /* one element from the device: read it with its error */
  ms_status st = ms_cuda_memcpy(&v, 0, ms_tensor_data(t), ms_tensor_device(t).index,
                                ms_dtype_size(t->dtype), MS_CUDA_D2H);
  if (st == MS_OK) ms_k_cast(1, out, MS_K_F64, 1, &v, (ms_k_dtype)t->dtype, 1);
  return st;
}
