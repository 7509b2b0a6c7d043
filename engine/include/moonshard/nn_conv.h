/* nn_conv.h: 2-D convolution and pooling on (N, C, H, W) float32 or float64 tensors, with
 * PyTorch's semantics and gradient nodes (ConvolutionBackward0, MaxPool2DWithIndicesBackward0,
 * AvgPool2DBackward0, AdaptiveAvgPool2DBackward0). Each returns a new reference, or NULL with
 * an error naming the op, the argument and what was expected. Pairs are (height, width). */
#ifndef MOONSHARD_NN_CONV_H
#define MOONSHARD_NN_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "moonshard/export.h"
#include "moonshard/tensor.h"

/* x (N, C, H, W), w (O, C / groups, KH, KW), b (O) or NULL -> (N, O, OH, OW). */
MS_API ms_tensor *ms_conv2d(ms_tensor *x, ms_tensor *w, ms_tensor *b, const int64_t stride[2],
                            const int64_t padding[2], const int64_t dilation[2], int64_t groups);
/* The window's maximum; the winners' indices stay inside the graph node for backward. */
MS_API ms_tensor *ms_max_pool2d(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                                const int64_t padding[2], const int64_t dilation[2], bool ceil_mode);
/* As ms_max_pool2d, also returning the indices (0-based ih * W + iw in each plane, int64). */
MS_API ms_status ms_max_pool2d_with_indices(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                                            const int64_t padding[2], const int64_t dilation[2],
                                            bool ceil_mode, ms_tensor **values, ms_tensor **indices);
MS_API ms_tensor *ms_avg_pool2d(ms_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                                const int64_t padding[2], bool ceil_mode, bool count_include_pad);
/* Output (N, C, out_h, out_w); window i covers [floor(i*H/out_h), ceil((i+1)*H/out_h)). */
MS_API ms_tensor *ms_adaptive_avg_pool2d(ms_tensor *x, int64_t out_h, int64_t out_w);

#endif
