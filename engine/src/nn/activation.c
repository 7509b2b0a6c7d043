/* activation.c: the native activations of op_list.h's table (GELU exact or tanh-approximated,
 * SiLU, ...), forward and backward; relu, tanh and sigmoid are unary ops (ops.h). Each
 * differentiates from its input in one kernel. */
#include "native/dispatch.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"

/* The table's rows (moonshard/op_list.h): each activation's names, the name of its backward in
 * errors, and its kernel. */
#define INFO_ROW(id, name, node, module) [MS_ACT_##id] = {name, node, module},
#define BACKWARD_ROW(id, name, ...) [MS_ACT_##id] = name " backward",
#define KERNEL_ROW(id, ...) [MS_ACT_##id] = MS_K_ACT_##id,
static const ms_activation_op_info act_info[] = {MS_ACTIVATION_LIST(INFO_ROW)};
static const char *const act_backward_names[] = {MS_ACTIVATION_LIST(BACKWARD_ROW)};
static const ms_k_act kernel_act[] = {MS_ACTIVATION_LIST(KERNEL_ROW)};
#undef INFO_ROW
#undef BACKWARD_ROW
#undef KERNEL_ROW
_Static_assert(sizeof act_info / sizeof *act_info == MS_ACTIVATION_OP_COUNT, "activation rows");
_Static_assert(sizeof kernel_act / sizeof *kernel_act == MS_ACTIVATION_OP_COUNT, "activation rows");

const ms_activation_op_info *ms_activation_op_get_info(ms_activation_op op) { return &act_info[op]; }

static const char *act_name(ms_activation_op act, bool backward) {
  return backward ? act_backward_names[act] : act_info[act].name;
}

ms_tensor *native_activation_backward(ms_activation_op act, ms_tensor *x, ms_tensor *grad_output) {
  ms_tensor *xc = nn_contiguous(x, x->dtype), *g = xc ? nn_contiguous(grad_output, x->dtype) : NULL;
  ms_tensor *gx = g ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  ms_status st = gx ? MS_OK : MS_ERR_MEMORY;
  native_kernels nk;
  if (st == MS_OK && (st = native_kernels_for(act_name(act, true), ms_tensor_device(x), &nk)) == MS_OK)
    st = native_kernel_status(&nk, nk.k->activation_backward(&nk.x, kernel_act[act], nn_kdtype(x->dtype),
                                                             ms_tensor_numel(x), ms_tensor_data(xc),
                                                             ms_tensor_data(g), ms_tensor_data(gx)));
  ms_tensor_release(xc), ms_tensor_release(g);
  if (st != MS_OK) ms_tensor_release(gx), gx = NULL;
  return gx;
}

ms_tensor *native_activation(ms_activation_op act, ms_tensor *x) {
  if (nn_check_float_or_half_any(act_name(act, false), "input", x)) return NULL;
  ms_tensor *xc = nn_contiguous(x, x->dtype);
  ms_tensor *out = xc ? ms_tensor_new_empty_on(ms_tensor_device(x), x->ndim, x->shape, x->dtype) : NULL;
  native_kernels nk;
  if (out && (native_kernels_for(act_name(act, false), ms_tensor_device(x), &nk) != MS_OK ||
              native_kernel_status(&nk, nk.k->activation(&nk.x, kernel_act[act], nn_kdtype(x->dtype),
                                                         ms_tensor_numel(x), ms_tensor_data(xc),
                                                         ms_tensor_data(out))) != MS_OK))
    ms_tensor_release(out), out = NULL;
  ms_tensor_release(xc);
  return out;
}
