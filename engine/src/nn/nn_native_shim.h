/* nn_native_shim.h: TEMPORARY stand-ins for the core native ops (native/native.h, being written
 * on branch h18-core) so the nn native layer builds before that merge. Deleted at the merge. */
#ifndef MS_NN_NATIVE_SHIM_H
#define MS_NN_NATIVE_SHIM_H

#include "moonshard/autograd.h"
#include "moonshard/ops.h"

#define MS_SHIM_OFF(expr)                                                                          \
  bool prev_ = ms_grad_set_enabled(false);                                                         \
  __typeof__(expr) r_ = (expr);                                                                    \
  ms_grad_set_enabled(prev_);                                                                      \
  return r_

static inline ms_tensor *native_to_dtype(ms_tensor *t, ms_dtype dt) { MS_SHIM_OFF(ms_tensor_to_dtype(t, dt)); }
static inline ms_tensor *native_contiguous(ms_tensor *t) { MS_SHIM_OFF(ms_tensor_contiguous(t)); }
static inline ms_tensor *native_reshape(ms_tensor *t, int nd, const int64_t *s) { MS_SHIM_OFF(ms_tensor_reshape(t, nd, s)); }
static inline ms_tensor *native_view(ms_tensor *t, int nd, const int64_t *s) { MS_SHIM_OFF(ms_tensor_view(t, nd, s)); }
static inline ms_tensor *native_transpose(ms_tensor *t, int a, int b) { MS_SHIM_OFF(ms_tensor_transpose(t, a, b)); }
static inline ms_tensor *native_mm(ms_tensor *a, ms_tensor *b) { MS_SHIM_OFF(ms_mm(a, b)); }
static inline ms_tensor *native_addmm(ms_tensor *c, ms_tensor *a, ms_tensor *b, double beta, double alpha) {
  MS_SHIM_OFF(ms_addmm(c, a, b, beta, alpha));
}
static inline ms_tensor *native_binary(ms_binary_op op, ms_operand a, ms_operand b) { MS_SHIM_OFF(ms_binary(op, a, b)); }
static inline ms_tensor *native_unary(ms_unary_op op, ms_tensor *a) { MS_SHIM_OFF(ms_unary(op, a)); }
static inline ms_tensor *native_reduce(ms_reduce_op op, ms_tensor *a, ms_reduce_opts o) { MS_SHIM_OFF(ms_reduce(op, a, o)); }
static inline ms_status native_copy_(ms_tensor *d, ms_tensor *s) { MS_SHIM_OFF(ms_tensor_copy_(d, s)); }
static inline ms_tensor *native_to_device(ms_tensor *t, ms_device d) { MS_SHIM_OFF(ms_tensor_to_device(t, d)); }

#endif
