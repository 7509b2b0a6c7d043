/* conv_plan.h: conv2d through cached cuDNN graph-API execution plans (conv_plan.c), for
 * conv_cudnn.c. */
#ifndef MS_KCU_CONV_PLAN_H
#define MS_KCU_CONV_PLAN_H

#include <stdbool.h>

#include "kernels/kernel_table.h"

#ifdef MS_HAVE_CUDNN
#include <cudnn.h>

typedef enum { MS_CUDA_CONV_FWD, MS_CUDA_CONV_BWD_DATA, MS_CUDA_CONV_BWD_FILTER, MS_CUDA_CONV_DIRS } ms_cuda_conv_dir;

/* Runs one direction of g on x's device and stream (h bound to them): y = conv(x, w) (forward), x = the data gradient of
 * (w, y) (x, w, y: dx, w, dy), or w = the weight gradient of (x, y) (x, dw, dy); packed NCHW, dt
 * float32 or float64. *planned is false, with nothing run, where cuDNN's graph API has no plan for
 * the shape: the caller then runs the legacy call. Returns 0 or an error code of the CUDA table
 * (workspace from x's scratch memory). */
int ms_kcu_conv_plan_run(const ms_k_exec *x, cudnnHandle_t h, ms_k_dtype dt, ms_cuda_conv_dir dir,
                         const ms_k_conv2d_geom *g, void *xp, void *wp, void *yp, bool *planned);
#endif

#endif
