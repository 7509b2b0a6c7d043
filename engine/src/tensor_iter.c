/* tensor_iter.c: the kernels' geometry of tensors (dimension merging), and broadcasting. */
#include <string.h>

#include "kernels/kernels.h"
#include "tensor_iter.h"

/* Merges dim d into d+1 when, for every operand, stepping d equals stepping d+1 shape times. */
static void iter_coalesce(ms_iter *it) {
  int nd = 0; /* dims written so far, from the innermost outwards */
  int64_t shape[MS_MAX_DIMS], strides[MS_K_MAX_OPS][MS_MAX_DIMS];
  for (int d = it->ndim - 1; d >= 0; d--) {
    if (it->shape[d] == 1 && it->ndim > 1) continue; /* size-1 dims never move the pointer */
    bool merge = nd > 0;
    for (int k = 0; k < it->nops && merge; k++)
      merge = it->strides[k][d] == strides[k][nd - 1] * shape[nd - 1];
    if (merge) {
      shape[nd - 1] *= it->shape[d];
      continue;
    }
    shape[nd] = it->shape[d];
    for (int k = 0; k < it->nops; k++) strides[k][nd] = it->strides[k][d];
    nd++;
  }
  if (nd == 0) { /* all dims were 1: a single element */
    shape[0] = 1;
    for (int k = 0; k < it->nops; k++) strides[k][0] = 0;
    nd = 1;
  }
  it->ndim = nd;
  for (int d = 0; d < nd; d++) { /* back to outermost-first order */
    it->shape[d] = shape[nd - 1 - d];
    for (int k = 0; k < it->nops; k++) it->strides[k][d] = strides[k][nd - 1 - d];
  }
}

void iter_init(ms_iter *it, int ndim, const int64_t *shape, int nops, ms_tensor *const *ops) {
  memset(it, 0, sizeof *it);
  it->nops = nops;
  it->ndim = ndim;
  for (int d = 0; d < ndim; d++) it->shape[d] = shape[d];
  for (int k = 0; k < nops; k++) {
    it->elsize[k] = ms_dtype_size(ops[k]->dtype);
    it->data[k] = ms_tensor_data(ops[k]);
    for (int d = 0; d < ndim; d++) it->strides[k][d] = ops[k]->strides[d];
  }
  if (ndim == 0) {
    it->ndim = 1;
    it->shape[0] = 1;
    for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
    return;
  }
  iter_coalesce(it);
}

ms_status broadcast_shapes(const char *op, int na, const int64_t *a, int nb, const int64_t *b,
                              int *nout, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = na - n + i, ib = nb - n + i;
    int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char bufa[MS_SHAPE_STR_LEN], bufb[MS_SHAPE_STR_LEN];
      return ms_error(MS_ERR_ARG,
                      "%s: shapes %s and %s do not broadcast (size %lld against %lld at dim %d)",
                      op, ms_shape_str(na, a, bufa, sizeof bufa), ms_shape_str(nb, b, bufb, sizeof bufb),
                      (long long)sa, (long long)sb, i - n);
    }
    out[i] = sa == 1 ? sb : sa;
  }
  *nout = n;
  return MS_OK;
}

ms_dtype compute_dtype(ms_dtype dt) {
  switch (dt) {
  case MS_FLOAT64: return MS_FLOAT64;
  case MS_FLOAT32: case MS_BFLOAT16: case MS_FLOAT16: return MS_FLOAT32;
  default: return MS_INT64;
  }
}
