/* transforms_ops.h: the native transforms (moonshard/transforms.h) as tensor ops, on any device
 * (engine/src/data/transforms_ops.c). What runs where the lookup table of the fused pass cannot
 * (a GPU): a uint8 -> float32 cast, a division by 255 and per channel a subtraction and a
 * division for each Normalize, in place, each rounded to float32 as the fused pass rounds them,
 * so the values are the same bits. The DataLoader's device feed normalises raw images on the GPU
 * with it, and ms.transform_batch runs it for a tensor that is not on the CPU. */
#ifndef MOONSHARD_TRANSFORMS_OPS_H
#define MOONSHARD_TRANSFORMS_OPS_H

#include "moonshard/export.h"
#include "moonshard/tensor.h"
#include "moonshard/transforms.h"

/* An empty float32 tensor on in's device of the shape the pipeline makes of in (only in's shape
 * and dtype are read), or NULL with the error set when in does not suit the pipeline. specs
 * passed ms_transform_check_specs; n >= 1. */
MS_API ms_tensor *ms_transform_new_output(const ms_tensor *in, const ms_transform_spec *specs, int n);
/* Runs the pipeline from in into out (from ms_transform_new_output, on in's device), queued on
 * the device's current stream. */
MS_API ms_status ms_transform_apply_into(ms_tensor *out, ms_tensor *in, const ms_transform_spec *specs, int n);
/* Checks the specs, then new_output + apply_into: a new tensor, or NULL with the error set. On
 * the CPU too, which is how the tests compare it with the fused pass. */
MS_API ms_tensor *ms_transform_apply_ops(ms_tensor *in, const ms_transform_spec *specs, int n);

#endif
