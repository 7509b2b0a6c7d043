/* transforms_ops.c: ToTensor and Normalize as in-place tensor ops (moonshard/transforms_ops.h), for
 * a device where transforms.c's lookup table cannot run: the DataLoader ships raw uint8 images
 * to the GPU and normalises them there (a quarter of the bytes of float32 cross the bus).
 *
 * Bit for bit the fused pass: that pass computes, per value, (float)v / 255.0f and then for
 * each Normalize y = (float)(y - mean); y = (float)(y / std), all in float32 with the constants
 * stored as float32. Here the same operations run one op at a time over the whole tensor, each
 * a correctly rounded float32 operation (a float number operand on a float32 tensor computes in
 * float32, the number rounded to float32 first, which leaves the stored constants unchanged):
 * elementwise, so each value meets the same operations in the same order. */
#include "moonshard/transforms_ops.h"
#include "native/native.h"

/* The output's shape: ToTensor inserts a channel dim of 1 before H; Normalize keeps the shape. */
static ms_status output_shape(const ms_tensor *in, const ms_transform_spec *specs, int n, int *ndim,
                              int64_t *shape) {
  char buf[MS_SHAPE_STR_LEN];
  ms_shape_str(in->ndim, in->shape, buf, sizeof buf);
  if (n < 1) return ms_error(MS_ERR_ARG, "transform: expected at least one transform on the device");
  if (specs[0].kind == MS_TRANSFORM_TO_TENSOR) {
    if (in->dtype != MS_UINT8 || (in->ndim != 2 && in->ndim != 3))
      return ms_error(MS_ERR_ARG, "ToTensor: expected a uint8 image (H, W) or a batch of them (B, H, W), "
                      "got a %s tensor of shape %s", ms_dtype_name(in->dtype), buf);
    int nd = 0;
    if (in->ndim == 3) shape[nd++] = in->shape[0];
    shape[nd++] = 1;
    shape[nd++] = in->shape[in->ndim - 2];
    shape[nd++] = in->shape[in->ndim - 1];
    *ndim = nd;
    return MS_OK;
  }
  if (in->dtype != MS_FLOAT32 || in->ndim < 3)
    return ms_error(MS_ERR_ARG, "Normalize: expected a float32 tensor of shape (C, H, W) or (B, C, H, W), "
                    "got a %s tensor of shape %s", ms_dtype_name(in->dtype), buf);
  *ndim = in->ndim;
  for (int d = 0; d < in->ndim; d++) shape[d] = in->shape[d];
  return MS_OK;
}

/* Every Normalize has 1 entry or one per channel of the output (C channels). */
static ms_status check_channels(const ms_transform_spec *specs, int n, int64_t C, const int64_t *shape, int ndim) {
  char buf[MS_SHAPE_STR_LEN];
  for (int i = 0; i < n; i++)
    if (specs[i].kind == MS_TRANSFORM_NORMALIZE && specs[i].nchan != 1 && specs[i].nchan != C)
      return ms_error(MS_ERR_ARG, "Normalize: mean and std have %d entries but the input %s has %lld "
                      "channel(s) (expected 1 entry or one per channel)", specs[i].nchan,
                      ms_shape_str(ndim, shape, buf, sizeof buf), (long long)C);
  return MS_OK;
}

ms_tensor *ms_transform_new_output(const ms_tensor *in, const ms_transform_spec *specs, int n) {
  int ndim = 0;
  int64_t shape[MS_MAX_DIMS];
  if (output_shape(in, specs, n, &ndim, shape) != MS_OK || check_channels(specs, n, shape[ndim - 3], shape, ndim) != MS_OK)
    return NULL;
  return ms_tensor_new_empty_on(ms_tensor_device(in), ndim, shape, MS_FLOAT32);
}

/* y = (y - mean) / std on one channel's values (a view of out), in place. */
static ms_status normalize_plane(ms_tensor *plane, float mean, float std) {
  ms_status st = native_binary_(MS_OP_SUB, plane, ms_operand_number(mean, MS_FLOAT64));
  return st != MS_OK ? st : native_binary_(MS_OP_DIV, plane, ms_operand_number(std, MS_FLOAT64));
}

/* One Normalize over out's channel dim (the third from the end). */
static ms_status normalize_step(ms_tensor *out, const ms_transform_spec *s) {
  int cdim = out->ndim - 3;
  int64_t C = out->shape[cdim];
  if (s->nchan == 1) return normalize_plane(out, s->mean[0], s->std[0]);
  ms_status st = MS_OK;
  for (int64_t c = 0; st == MS_OK && c < C; c++) {
    ms_tensor *plane = native_select(out, cdim, c);
    st = plane ? normalize_plane(plane, s->mean[c], s->std[c]) : MS_ERR_MEMORY;
    ms_tensor_release(plane);
  }
  return st;
}

/* out = in / 255 as float32: the cast is exact (every uint8 is a float32), then one division. */
static ms_status to_tensor_into(ms_tensor *out, ms_tensor *in) {
  ms_tensor *src = native_reshape(in, out->ndim, out->shape); /* (B, H, W) seen as (B, 1, H, W) */
  ms_status st = src ? native_copy_(out, src) : MS_ERR_MEMORY;
  ms_tensor_release(src);
  return st != MS_OK ? st : native_binary_(MS_OP_DIV, out, ms_operand_number(255, MS_FLOAT64));
}

ms_status ms_transform_apply_into(ms_tensor *out, ms_tensor *in, const ms_transform_spec *specs, int n) {
  ms_status st = ms_tensor_check_data_any("transform", in);
  if (st != MS_OK) return st;
  int first = 0;
  if (n > 0 && specs[0].kind == MS_TRANSFORM_TO_TENSOR) {
    st = to_tensor_into(out, in);
    first = 1;
  } else if (out != in) {
    st = native_copy_(out, in);
  }
  for (int i = first; st == MS_OK && i < n; i++) st = normalize_step(out, &specs[i]);
  return st;
}

ms_tensor *ms_transform_apply_ops(ms_tensor *in, const ms_transform_spec *specs, int n) {
  if (ms_transform_check_specs(specs, n) != MS_OK) return NULL;
  ms_tensor *out = ms_transform_new_output(in, specs, n);
  if (out && ms_transform_apply_into(out, in, specs, n) != MS_OK) ms_tensor_release(out), out = NULL;
  return out;
}
