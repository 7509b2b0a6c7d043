/* embedding.c: the native embedding: rows of a weight table gathered by index, and the gradient
 * scattered back (summed over repeated indices, none into the padding row). */
#include "native/dispatch.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"

ms_tensor *native_embedding_backward(ms_tensor *idx, ms_tensor *grad_output, const int64_t wshape[2],
                                     ms_dtype dt, int64_t padding_idx, int64_t index_base) {
  /* a 16-bit weight's gradient is summed in float32 and rounded once at the end */
  ms_tensor *g = nn_contiguous(grad_output, dt);
  ms_tensor *gw = g ? native_full_on(ms_tensor_device(idx), 2, wshape, nn_stat_dtype(dt), 0) : NULL;
  ms_status st = gw ? MS_OK : MS_ERR_MEMORY;
  native_kernels nk;
  if (st == MS_OK && (st = native_kernels_for("embedding backward", ms_tensor_device(idx), &nk)) == MS_OK)
    st = native_kernel_status(&nk, nk.k->embedding_backward(&nk.x, nn_kdtype(dt), ms_tensor_numel(idx), wshape[1],
                                                            ms_tensor_data(idx), index_base, padding_idx,
                                                            ms_tensor_data(g), ms_tensor_data(gw)));
  ms_tensor_release(g);
  if (st != MS_OK) ms_tensor_release(gw), gw = NULL;
  if (gw && gw->dtype != dt) {
    ms_tensor *rounded = native_to_dtype(gw, dt);
    ms_tensor_release(gw);
    gw = rounded;
  }
  return gw;
}

static ms_status index_error(int64_t v, int64_t rows, int64_t base) {
  return ms_error(MS_ERR_ARG, "embedding: index %lld is out of range for %lld embeddings%s", (long long)v,
                  (long long)rows, base == 1 ? " (indices are 1-based)" : "");
}

/* Device indices are checked through their extremes, reduced on the device: two numbers come
 * back instead of every index. */
static ms_status check_indices_device(ms_tensor *idx, int64_t rows, int64_t base) {
  if (ms_tensor_numel(idx) == 0) return MS_OK;
  double ext[2] = {0, 0};
  const ms_reduce_op ops[2] = {MS_RED_MIN, MS_RED_MAX};
  for (int k = 0; k < 2; k++) {
    ms_tensor *r = native_reduce(ops[k], idx, (ms_reduce_opts){.all = true});
    ms_status st = r ? ms_tensor_item(r, &ext[k]) : MS_ERR_RUNTIME;
    ms_tensor_release(r);
    if (st != MS_OK) return st;
  }
  if (ext[0] - (double)base < 0) return index_error((int64_t)ext[0], rows, base);
  if (ext[1] - (double)base >= (double)rows) return index_error((int64_t)ext[1], rows, base);
  return MS_OK;
}

/* A rule, not a choice of kernels: indices in host memory are read where they lie; indices on a
 * device are checked there, through their extremes (reading every one back would cost a copy). */
static ms_status check_indices(ms_tensor *idx, int64_t rows, int64_t base) {
  if (ms_tensor_device(idx).type != MS_CPU) return check_indices_device(idx, rows, base);
  const int64_t *v = ms_tensor_data(idx);
  for (int64_t i = 0, n = ms_tensor_numel(idx); i < n; i++)
    if (v[i] - base < 0 || v[i] - base >= rows) return index_error(v[i], rows, base);
  return MS_OK;
}

static ms_status check_embedding(ms_tensor *indices, ms_tensor *w, int64_t padding_idx) {
  char buf[MS_SHAPE_STR_LEN];
  if (nn_check_index_tensor_any("embedding", "indices", indices)) return MS_ERR_ARG;
  if (nn_check_float_or_half_any("embedding", "weight", w)) return MS_ERR_ARG;
  if (ms_check_same_device("embedding", 2, (ms_tensor *[]){indices, w})) return MS_ERR_ARG;
  if (w->ndim != 2)
    return ms_error(MS_ERR_ARG, "embedding: weight must be 2-D (num_embeddings, embedding_dim), got %s",
                    ms_shape_str(w->ndim, w->shape, buf, sizeof buf));
  if (indices->ndim + 1 > MS_MAX_DIMS)
    return ms_error(MS_ERR_ARG, "embedding: indices have too many dims (%d)", indices->ndim);
  if (padding_idx < -1 || padding_idx >= w->shape[0])
    return ms_error(MS_ERR_ARG, "embedding: padding_idx must be within the %lld embeddings",
                    (long long)w->shape[0]);
  return MS_OK;
}

ms_tensor *native_embedding(ms_tensor *indices, ms_tensor *w, int64_t padding_idx, int64_t index_base,
                            ms_tensor **saved_indices) {
  *saved_indices = NULL;
  if (check_embedding(indices, w, padding_idx)) return NULL;
  ms_tensor *idx = nn_contiguous(indices, MS_INT64), *wc = idx ? nn_contiguous(w, w->dtype) : NULL;
  ms_tensor *out = NULL;
  if (wc && check_indices(idx, w->shape[0], index_base) == MS_OK) {
    int64_t shape[MS_MAX_DIMS];
    for (int d = 0; d < idx->ndim; d++) shape[d] = idx->shape[d];
    shape[idx->ndim] = w->shape[1];
    out = ms_tensor_new_empty_on(ms_tensor_device(w), idx->ndim + 1, shape, w->dtype);
  }
  native_kernels nk;
  if (out && (native_kernels_for("embedding", ms_tensor_device(w), &nk) != MS_OK ||
              native_kernel_status(&nk, nk.k->embedding(&nk.x, nn_kdtype(w->dtype), ms_tensor_numel(idx),
                                                        w->shape[1], ms_tensor_data(idx), index_base,
                                                        ms_tensor_data(wc), ms_tensor_data(out))) != MS_OK))
    ms_tensor_release(out), out = NULL;
  ms_tensor_release(wc);
  if (!out) return ms_tensor_release(idx), NULL;
  *saved_indices = idx;
  return out;
}
