/* transforms.c: ToTensor and Normalize run as one pass (moonshard/transforms.h). A uint8 input
 * has only 256 values, so the whole chain is computed once per value into a table and the pass
 * is a lookup: exact (each value goes through the same float32 operations as separate passes)
 * and as fast as a copy. A float32 input runs the chain per element in one loop. */
#include <math.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "moonshard/transforms.h"
#include "native/native.h"

static ms_status check_normalize(const ms_transform_spec *s, int i) {
  if (s->nchan < 1 || s->nchan > MS_MAX_CHANNELS)
    return ms_error(MS_ERR_ARG, "transform: spec %d (normalize): expected 1 to %d channels, got %d",
                    i + 1, MS_MAX_CHANNELS, s->nchan);
  for (int c = 0; c < s->nchan; c++) {
    if (!isfinite(s->mean[c]) || !isfinite(s->std[c]))
      return ms_error(MS_ERR_ARG, "transform: spec %d (normalize): mean and std must be finite, got "
                      "mean[%d] = %g, std[%d] = %g", i + 1, c + 1, s->mean[c], c + 1, s->std[c]);
    if (s->std[c] == 0)
      return ms_error(MS_ERR_ARG, "transform: spec %d (normalize): std[%d] is zero after conversion "
                      "to float32, which would divide by zero", i + 1, c + 1);
  }
  return MS_OK;
}

ms_status ms_transform_check_specs(const ms_transform_spec *specs, int n) {
  if (n < 0 || n > MS_TRANSFORM_MAX_SPECS)
    return ms_error(MS_ERR_ARG, "transform: expected 0 to %d transforms, got %d",
                    MS_TRANSFORM_MAX_SPECS, n);
  for (int i = 0; i < n; i++) {
    switch (specs[i].kind) {
    case MS_TRANSFORM_TO_TENSOR:
      if (i > 0)
        return ms_error(MS_ERR_ARG, "transform: spec %d (to_tensor) must come first: its input is "
                        "a uint8 image, and spec %d already made float32", i + 1, i);
      break;
    case MS_TRANSFORM_NORMALIZE: {
      ms_status st = check_normalize(&specs[i], i);
      if (st) return st;
      break;
    }
    default:
      return ms_error(MS_ERR_ARG, "transform: spec %d has an unknown kind %d", i + 1, (int)specs[i].kind);
    }
  }
  return MS_OK;
}

/* The normalizations' means and stds broadcast to C channels, step after step (nsteps * C
 * each), in one malloc'd block: mean at *mean, std at *mean + nsteps * C. NULL if a spec's
 * channel count is neither 1 nor C (error set) or memory ran out. */
static float *channel_table(const ms_transform_spec *specs, int n, int64_t C, const char *shape) {
  for (int i = 0; i < n; i++)
    if (specs[i].nchan != 1 && specs[i].nchan != C) {
      ms_error(MS_ERR_ARG, "Normalize: mean and std have %d entries but the input %s has %lld "
               "channel(s) (expected 1 entry or one per channel)", specs[i].nchan, shape, (long long)C);
      return NULL;
    }
  float *t = malloc((size_t)(2 * n * C + 1) * sizeof *t);
  if (!t) {
    ms_error(MS_ERR_MEMORY, "transform: out of memory for %lld channel constants", (long long)(2 * n * C));
    return NULL;
  }
  for (int i = 0; i < n; i++)
    for (int64_t c = 0; c < C; c++) {
      int64_t k = specs[i].nchan == 1 ? 0 : c;
      t[i * C + c] = specs[i].mean[k];
      t[(n + i) * C + c] = specs[i].std[k];
    }
  return t;
}

/* A new contiguous float32 tensor of the given shape, or NULL. */
static ms_tensor *new_f32(int ndim, const int64_t *shape) {
  return ms_tensor_new_empty(ndim, shape, MS_FLOAT32);
}

/* ToTensor then the normalizations specs[0..n): uint8 (H, W) or (B, H, W) -> float32 with a
 * channel dim of 1 before H. */
static ms_tensor *apply_to_tensor(ms_tensor *in, const ms_transform_spec *norms, int n) {
  char buf[MS_SHAPE_STR_LEN];
  ms_shape_str(in->ndim, in->shape, buf, sizeof buf);
  if (in->dtype != MS_UINT8 || (in->ndim != 2 && in->ndim != 3)) {
    ms_error(MS_ERR_ARG, "ToTensor: expected a uint8 image (H, W) or a batch of them (B, H, W), got "
             "a %s tensor of shape %s", ms_dtype_name(in->dtype), buf);
    return NULL;
  }
  float *consts = channel_table(norms, n, 1, buf);
  if (!consts) return NULL;
  float lut[256];
  for (int v = 0; v < 256; v++) lut[v] = (float)v / 255.0f;
  ms_k_normalize_chain_f32(1, 1, 256, lut, lut, n, consts, consts + n);
  free(consts);
  int64_t shape[4];
  int nd = 0;
  if (in->ndim == 3) shape[nd++] = in->shape[0];
  shape[nd++] = 1;
  shape[nd++] = in->shape[in->ndim - 2];
  shape[nd++] = in->shape[in->ndim - 1];
  ms_tensor *src = native_contiguous(in);
  ms_tensor *out = src ? new_f32(nd, shape) : NULL;
  if (out) ms_k_u8_lut_f32(ms_tensor_numel(out), ms_tensor_data(src), lut, ms_tensor_data(out));
  ms_tensor_release(src);
  return out;
}

/* The normalizations alone on float32 (..., C, H, W). */
static ms_tensor *apply_normalize(ms_tensor *in, const ms_transform_spec *norms, int n) {
  char buf[MS_SHAPE_STR_LEN];
  ms_shape_str(in->ndim, in->shape, buf, sizeof buf);
  if (in->dtype != MS_FLOAT32 || in->ndim < 3) {
    ms_error(MS_ERR_ARG, "Normalize: expected a float32 tensor of shape (C, H, W) or (B, C, H, W), "
             "got a %s tensor of shape %s", ms_dtype_name(in->dtype), buf);
    return NULL;
  }
  int64_t C = in->shape[in->ndim - 3];
  int64_t inner = in->shape[in->ndim - 2] * in->shape[in->ndim - 1];
  int64_t plane = C * inner; /* zero when the tensor is empty */
  int64_t outer = plane != 0 ? ms_tensor_numel(in) / plane : 0;
  float *consts = channel_table(norms, n, C, buf);
  if (!consts) return NULL;
  ms_tensor *src = native_contiguous(in);
  ms_tensor *out = src ? new_f32(in->ndim, in->shape) : NULL;
  if (out)
    ms_k_normalize_chain_f32(outer, C, inner, ms_tensor_data(src), ms_tensor_data(out), n, consts,
                             consts + (int64_t)n * C);
  ms_tensor_release(src);
  free(consts);
  return out;
}

ms_tensor *ms_transform_apply(ms_tensor *in, const ms_transform_spec *specs, int n) {
  if (ms_transform_check_specs(specs, n) || ms_tensor_check_data("transform", in)) return NULL;
  if (n == 0) {
    ms_tensor_retain(in);
    return in;
  }
  if (specs[0].kind == MS_TRANSFORM_TO_TENSOR) return apply_to_tensor(in, specs + 1, n - 1);
  return apply_normalize(in, specs, n);
}
