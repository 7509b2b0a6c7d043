/* grad_conv.c: the public conv2d (nn_conv.h): 16-bit operands widened where no native bfloat16
 * path runs, the native op, and its node ConvolutionBackward0. */
#include "grad_nn.h"
#include "moonshard/nn_conv.h"

/* ints = stride (2), padding (2), dilation (2), groups; slots 0 = x, 1 = w. */
static ms_status conv_backward(ms_node *n, ms_tensor *const *grad_out, ms_tensor **grad_in) {
  ms_tensor *x = ms_node_saved(n, 0), *w = ms_node_saved(n, 1);
  if (!x || !w) return MS_ERR_RUNTIME;
  const int64_t *v = n->ints;
  const bool need[3] = {grad_needed(n, 0), grad_needed(n, 1), grad_needed(n, 2)};
  return native_conv2d_backward(x, w, grad_out[0], v, v + 2, v + 4, v[6], need, grad_in);
}

static ms_status record_conv2d(ms_tensor *x, ms_tensor *w, ms_tensor *b, const int64_t stride[2],
                               const int64_t padding[2], const int64_t dilation[2], int64_t groups,
                               ms_tensor *out) {
  ms_tensor *ins[3] = {x, w, b};
  if (!out || !ms_autograd_wants(3, ins)) return MS_OK;
  ms_node *n = ms_node_new("ConvolutionBackward0", conv_backward, 3, ins);
  if (!n) return MS_ERR_MEMORY;
  int64_t params[7] = {stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups};
  for (int i = 0; i < 7; i++) n->ints[i] = params[i];
  ms_node_save(n, x);
  ms_node_save(n, w);
  return grad_finish(n, out);
}

ms_tensor *ms_conv2d(ms_tensor *x, ms_tensor *w, ms_tensor *b, const int64_t stride[2],
                     const int64_t padding[2], const int64_t dilation[2], int64_t groups) {
  if (!x || !w) return ms_error(MS_ERR_ARG, "conv2d: input and weight are required"), NULL;
  ms_dtype half;
  if (nn_half_call(3, (ms_tensor *[]){x, w, b}, &half) && !native_conv2d_half(x, w, b, groups)) {
    ms_tensor *v[3];
    if (nn_widen(3, (ms_tensor *[]){x, w, b}, v) != MS_OK) return NULL;
    ms_tensor *wide = ms_conv2d(v[0], v[1], v[2], stride, padding, dilation, groups);
    ms_tensor *out = nn_narrow_back(wide, half);
    nn_release_all(3, v);
    ms_tensor_release(wide);
    return out;
  }
  ms_tensor *out = native_conv2d(x, w, b, stride, padding, dilation, groups);
  return grad_kept(out, record_conv2d(x, w, b, stride, padding, dilation, groups, out));
}
