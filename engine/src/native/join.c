/* native/join.c: splitting a tensor into views (split, chunk) and joining tensors into a new
 * one (cat, stack). The public ops, which record the nodes, are autograd/grad_join.c's. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "moonshard/checked.h"
#include "native/native.h"

/* The narrow views of t along dim (already normalised) of the lengths len(i, arg), i < n,
 * consecutive from 0: a malloc'ed array of n new references. */
static ms_tensor **narrow_pieces(ms_tensor *t, int dim, int n, int64_t (*len)(int i, const void *arg),
                                 const void *arg, const char *op) {
  ms_tensor **parts = calloc((size_t)(n > 0 ? n : 1), sizeof *parts);
  if (!parts) return ms_error(MS_ERR_MEMORY, "%s: out of memory", op), NULL;
  for (int64_t i = 0, at = 0; i < n; at += parts[i]->shape[dim], i++) {
    if (!(parts[i] = native_narrow(t, dim, at, len((int)i, arg)))) {
      while (i--) ms_tensor_release(parts[i]);
      free(parts);
      return NULL;
    }
  }
  return parts;
}

typedef struct even_pieces {
  int64_t size, total;
} even_pieces;

static int64_t even_len(int i, const void *arg) {
  const even_pieces *e = arg;
  int64_t start = (int64_t)i * e->size;
  return e->total - start < e->size ? e->total - start : e->size;
}

ms_tensor **native_split(ms_tensor *t, int64_t size, int dim, int *count) {
  if (ms_dim_normalize("split", "dim", dim, t->ndim, &dim) != MS_OK) return NULL;
  if (t->ndim == 0) return ms_error(MS_ERR_ARG, "split: cannot split a 0-dim tensor"), NULL;
  if (size <= 0) return ms_error(MS_ERR_ARG, "split: split_size must be positive, got %lld", (long long)size), NULL;
  int64_t total = t->shape[dim], pieces = total == 0 ? 1 : total / size + (total % size != 0);
  if (pieces > INT_MAX)
    return ms_error(MS_ERR_ARG, "split: split_size %lld makes %lld pieces of dim %d (size %lld), more than %d",
                    (long long)size, (long long)pieces, dim, (long long)total, INT_MAX), NULL;
  ms_tensor **parts = narrow_pieces(t, dim, (int)pieces, even_len, &(even_pieces){size, total}, "split");
  if (parts) *count = (int)pieces;
  return parts;
}

static int64_t listed_len(int i, const void *arg) { return ((const int64_t *)arg)[i]; }

ms_tensor **native_split_with_sizes(ms_tensor *t, const int64_t *sizes, int n, int dim) {
  if (ms_dim_normalize("split", "dim", dim, t->ndim, &dim) != MS_OK) return NULL;
  if (t->ndim == 0) return ms_error(MS_ERR_ARG, "split: cannot split a 0-dim tensor"), NULL;
  if (n < 1) return ms_error(MS_ERR_ARG, "split: split_sizes must list at least one size, got %d", n), NULL;
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0)
      return ms_error(MS_ERR_ARG, "split: split_sizes[%d] must be non-negative, got %lld", i, (long long)sizes[i]), NULL;
    if (!ms_add_i64(total, sizes[i], &total)) total = INT64_MAX;
    if (total > t->shape[dim]) break;
  }
  if (total != t->shape[dim])
    return ms_error(MS_ERR_ARG, "split: split_sizes must sum to dim %d's size %lld, they %s", dim,
                    (long long)t->shape[dim], total > t->shape[dim] ? "exceed it" : "fall short of it"), NULL;
  return narrow_pieces(t, dim, n, listed_len, sizes, "split");
}

ms_tensor **native_chunk(ms_tensor *t, int chunks, int dim, int *count) {
  if (chunks <= 0) return ms_error(MS_ERR_ARG, "chunk: chunks must be positive, got %d", chunks), NULL;
  if (ms_dim_normalize("chunk", "dim", dim, t->ndim, &dim) != MS_OK) return NULL;
  if (t->ndim == 0) return ms_error(MS_ERR_ARG, "chunk: cannot chunk a 0-dim tensor"), NULL;
  int64_t size = (t->shape[dim] + chunks - 1) / chunks;
  if (size > 0) return native_split(t, size, dim, count);
  /* An empty dim gives `chunks` empty pieces, as torch.chunk does. */
  ms_tensor **parts = calloc((size_t)chunks, sizeof *parts);
  if (!parts) return ms_error(MS_ERR_MEMORY, "chunk: out of memory"), NULL;
  for (int i = 0; i < chunks; i++) {
    if (!(parts[i] = native_narrow(t, dim, 0, 0))) {
      while (i--) ms_tensor_release(parts[i]);
      free(parts);
      return NULL;
    }
  }
  *count = chunks;
  return parts;
}

/* Checks that every tensor matches ts[0] except along dim; returns the result dtype. */
static ms_status check_cat_inputs(ms_tensor *const *ts, int n, int dim, ms_dtype *dt) {
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  *dt = ts[0]->dtype;
  for (int i = 1; i < n; i++) {
    if (ts[i]->ndim != ts[0]->ndim)
      return ms_error(MS_ERR_ARG, "cat: tensors must have the same number of dimensions: tensor 1 "
                      "has %d, tensor %d has %d", ts[0]->ndim, i + 1, ts[i]->ndim);
    for (int d = 0; d < ts[0]->ndim; d++)
      if (d != dim && ts[i]->shape[d] != ts[0]->shape[d])
        return ms_error(MS_ERR_ARG, "cat: sizes must match except in the joined dimension: "
                        "tensor 1 has shape %s, tensor %d has %s",
                        ms_shape_str(ts[0]->ndim, ts[0]->shape, b1, sizeof b1), i + 1,
                        ms_shape_str(ts[i]->ndim, ts[i]->shape, b2, sizeof b2));
    *dt = ms_dtype_promote(*dt, MS_OPERAND_TENSOR, ts[i]->dtype, MS_OPERAND_TENSOR);
  }
  return MS_OK;
}

ms_tensor *native_cat(ms_tensor *const *ts, int n, int dim) {
  if (n <= 0) return ms_error(MS_ERR_ARG, "cat: expected a non-empty list of tensors"), NULL;
  for (int i = 0; i < n; i++)
    if (ts[i]->ndim == 0)
      return ms_error(MS_ERR_ARG, "cat: zero-dimensional tensor %d cannot be concatenated", i + 1), NULL;
  if (ms_dim_normalize("cat", "dim", dim, ts[0]->ndim, &dim) != MS_OK) return NULL;
  ms_dtype dt;
  if (check_cat_inputs(ts, n, dim, &dt) != MS_OK) return NULL;
  int64_t shape[MS_MAX_DIMS];
  memcpy(shape, ts[0]->shape, sizeof shape);
  shape[dim] = 0;
  for (int i = 0; i < n; i++)
    if (!ms_add_i64(shape[dim], ts[i]->shape[dim], &shape[dim]))
      return ms_error(MS_ERR_ARG, "cat: the sizes along dim %d sum past the largest tensor", dim), NULL;
  if (ms_check_same_device("cat", n, ts) != MS_OK) return NULL;
  ms_tensor *out = ms_tensor_new_empty_on(ms_tensor_device(ts[0]), ts[0]->ndim, shape, dt);
  int64_t at = 0;
  for (int i = 0; out && i < n; i++) {
    ms_tensor *slot = native_narrow(out, dim, at, ts[i]->shape[dim]);
    ms_status st = slot ? native_copy_(slot, ts[i]) : MS_ERR_MEMORY;
    ms_tensor_release(slot);
    if (st != MS_OK) ms_tensor_release(out), out = NULL;
    at += ts[i]->shape[dim];
  }
  return out;
}

ms_tensor *native_stack(ms_tensor *const *ts, int n, int dim) {
  if (n <= 0) return ms_error(MS_ERR_ARG, "stack: expected a non-empty list of tensors"), NULL;
  if (ts[0]->ndim >= MS_MAX_DIMS)
    return ms_error(MS_ERR_ARG, "stack: the result would have %d dimensions, at most %d are allowed",
                    ts[0]->ndim + 1, MS_MAX_DIMS), NULL;
  if (ms_dim_normalize("stack", "dim", dim, ts[0]->ndim + 1, &dim) != MS_OK) return NULL;
  char b1[MS_SHAPE_STR_LEN], b2[MS_SHAPE_STR_LEN];
  for (int i = 1; i < n; i++) {
    bool same = ts[i]->ndim == ts[0]->ndim;
    for (int d = 0; same && d < ts[0]->ndim; d++) same = ts[i]->shape[d] == ts[0]->shape[d];
    if (!same)
      return ms_error(MS_ERR_ARG, "stack: expects each tensor to be equal size, but got %s at entry 1 "
                      "and %s at entry %d", ms_shape_str(ts[0]->ndim, ts[0]->shape, b1, sizeof b1),
                      ms_shape_str(ts[i]->ndim, ts[i]->shape, b2, sizeof b2), i + 1), NULL;
  }
  ms_tensor **views = calloc((size_t)n, sizeof *views);
  if (!views) return ms_error(MS_ERR_MEMORY, "stack: out of memory"), NULL;
  ms_tensor *out = NULL;
  int made = 0;
  for (; made < n; made++)
    if (!(views[made] = native_unsqueeze(ts[made], dim))) break;
  if (made == n) out = native_cat(views, n, dim);
  for (int i = 0; i < made; i++) ms_tensor_release(views[i]);
  free(views);
  return out;
}
