/* optim_internal.h (engine-internal): what the single-tensor steps (optim.c) and the list steps
 * (optim_list.c) share: the checks every tensor of a step passes and the kernels' options. */
#ifndef MS_OPTIM_INTERNAL_H
#define MS_OPTIM_INTERNAL_H

#include "kernels/kernel_table.h"
#include "moonshard/optim.h"

/* t read (or written) beside param: its shape and dtype (a 16-bit grad when `low`), readable,
 * contiguous when written, on param's device; arg names it in the error. */
ms_status optim_check_like(const char *op, const char *arg, const ms_tensor *param,
                           const ms_tensor *t, bool written, bool low);
/* param (named pname) and its grad (gname); *g receives a contiguous grad of param's dtype (new
 * reference, NULL on error). */
ms_status optim_check_step_named(const char *op, const char *pname, const char *gname,
                                 ms_tensor *param, ms_tensor *grad, ms_tensor **g);

ms_k_sgd_hp optim_sgd_hp(const ms_sgd_options *o, bool init_buffer);
ms_k_adam_hp optim_adam_hp(const ms_adam_options *o);
ms_k_adadelta_hp optim_adadelta_hp(const ms_adadelta_options *o);

#endif
