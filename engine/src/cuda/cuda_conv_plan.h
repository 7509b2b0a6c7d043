/* cuda_conv_plan.h (engine-internal): conv2d through cached cuDNN graph-API execution plans
 * (cuda_conv_plan.c), for cuda_conv.c. */
#ifndef MS_CUDA_CONV_PLAN_H
#define MS_CUDA_CONV_PLAN_H

#include "cuda_internal.h"
#include "kernels/kernels.h"

#ifdef MS_HAVE_CUDNN
#include <cudnn.h>

typedef enum { MS_CUDA_CONV_FWD, MS_CUDA_CONV_BWD_DATA, MS_CUDA_CONV_BWD_FILTER, MS_CUDA_CONV_DIRS } ms_cuda_conv_dir;

/* Runs one direction of g on h's device: y = conv(x, w) (forward), x = the data gradient of
 * (w, y) (x, w, y: dx, w, dy), or w = the weight gradient of (x, y) (x, dw, dy); packed NCHW, dt
 * float32 or float64. *planned is false, with nothing run, where cuDNN's graph API has no plan for
 * the shape: the caller then runs the legacy call. */
ms_status ms_cuda_conv_plan_run(cudnnHandle_t h, int dev, ms_dtype dt, ms_cuda_conv_dir dir,
                                const ms_k_conv2d_geom *g, void *x, void *w, void *y, bool *planned);
#endif

#endif
