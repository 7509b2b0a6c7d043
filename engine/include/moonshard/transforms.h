/* transforms.h: the native data transforms (torchvision's ToTensor and Normalize), described by
 * plain structs so a pipeline can be handed to the DataLoader's worker threads and run there as
 * one fused pass per batch: out = (x / 255 - mean) / std, written once into a new float32
 * tensor. The Lua face builds the specs from transform objects (moonshard.transforms). */
#ifndef MOONSHARD_TRANSFORMS_H
#define MOONSHARD_TRANSFORMS_H

#include "moonshard/export.h"
#include "moonshard/tensor.h"

#define MS_MAX_CHANNELS 16       /* mean/std entries one Normalize may carry */
#define MS_TRANSFORM_MAX_SPECS 16 /* transforms one pipeline may chain */

typedef enum ms_transform_kind {
  MS_TRANSFORM_TO_TENSOR, /* uint8 (H, W) -> float32 (1, H, W) in [0, 1]; (B, H, W) -> (B, 1, H, W) */
  MS_TRANSFORM_NORMALIZE, /* (x - mean[c]) / std[c] over the channel dim (the third from the end) */
} ms_transform_kind;

typedef struct ms_transform_spec {
  ms_transform_kind kind;
  int nchan;                    /* NORMALIZE: entries in mean and std; 1 applies to every channel */
  float mean[MS_MAX_CHANNELS];  /* NORMALIZE only, as float32 like torchvision's tensors */
  float std[MS_MAX_CHANNELS];
} ms_transform_spec;

/* MS_OK when specs[0..n) form a pipeline the engine runs: n <= MS_TRANSFORM_MAX_SPECS, ToTensor
 * only first, every Normalize with 1..MS_MAX_CHANNELS finite means and finite non-zero stds.
 * Otherwise an error saying which spec is wrong. */
MS_API ms_status ms_transform_check_specs(const ms_transform_spec *specs, int n);

/* Runs the pipeline on `in` (borrowed) and returns a new float32 tensor (new reference), or NULL
 * with the error set. When specs[0] is ToTensor, `in` is a uint8 image (H, W) or batch (B, H, W)
 * and the channel dim is inserted; otherwise `in` is float32 of shape (..., C, H, W). The whole
 * chain is one pass over the data. n == 0 returns `in` itself, retained. Thread-safe: it keeps
 * no state, so worker threads may call it concurrently. */
MS_API ms_tensor *ms_transform_apply(ms_tensor *in, const ms_transform_spec *specs, int n);

#endif
