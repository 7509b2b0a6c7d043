/* flat_param_mp.c: mixed precision for an FSDP unit (PyTorch 1.13's MixedPrecision): the shard
 * stays in its dtype (the master weights the optimizer updates); forward and backward compute
 * with a second full buffer in param_dtype, gathered from the shard cast to param_dtype, and its
 * views; their grads are reduced in reduce_dtype (flat_param_comm.c). */
#include <stdlib.h>

#include "fsdp/fsdp_internal.h"

bool ms_flat_param_mixed(const ms_flat_param *fp) { return fp->compute && fp->compute != fp->full; }

ms_status ms_flat_param_set_mixed_precision(ms_flat_param *fp, ms_dtype param_dtype, ms_dtype reduce_dtype) {
  const char *f = "fsdp: mixed_precision";
  if (!ms_dtype_is_floating(param_dtype) || !ms_dtype_is_floating(reduce_dtype))
    return ms_error(MS_ERR_ARG, "%s: param_dtype and reduce_dtype must be floating dtypes, got %s and %s", f,
                    ms_dtype_name(param_dtype), ms_dtype_name(reduce_dtype));
  for (int i = 0; i < fp->nparams; i++)
    if (fp->hook_handles[i]) return ms_error(MS_ERR_RUNTIME, "%s: must be set before the hooks are installed", f);
  if (ms_flat_param_mixed(fp)) return ms_error(MS_ERR_RUNTIME, "%s: already set on this unit", f);
  fp->reduce_dtype = reduce_dtype;
  if (param_dtype == fp->dtype) return MS_OK; /* computes with `full` itself */
  ms_tensor *flat = fsdp_new_flat(fp, fp->padded, param_dtype, MS_MEM_PARAMS);
  ms_tensor **views = calloc((size_t)fp->nparams, sizeof *views);
  ms_status st = flat && views ? MS_OK : ms_error(MS_ERR_MEMORY, "%s: out of memory", f);
  for (int i = 0; st == MS_OK && i < fp->nparams; i++) {
    ms_tensor *p = fp->params[i];
    views[i] = fsdp_contiguous_view(flat->storage, param_dtype, p->ndim, p->shape, fp->offsets[i]);
    if (!views[i]) st = MS_ERR_MEMORY;
    else views[i]->requires_grad = p->requires_grad;
  }
  if (st != MS_OK) {
    for (int i = 0; views && i < fp->nparams; i++) ms_tensor_release(views[i]);
    free(views);
    ms_tensor_release(flat);
    return st;
  }
  fp->param_dtype = param_dtype;
  fp->compute = flat->storage, fp->compute_flat = flat, fp->compute_params = views;
  if (fp->strategy != MS_FSDP_NO_SHARD) ms_storage_release_data(fp->compute);
  return MS_OK;
}

ms_status ms_flat_param_set_keep_low_precision_grads(ms_flat_param *fp, bool keep) {
  if (fp->shard->grad)
    return ms_error(MS_ERR_RUNTIME, "fsdp: keep_low_precision_grads: must be set before the first backward");
  fp->grad_dtype = keep ? fp->reduce_dtype : fp->dtype;
  return MS_OK;
}

void fsdp_mp_free(ms_flat_param *fp) {
  if (!ms_flat_param_mixed(fp)) return;
  for (int i = 0; i < fp->nparams; i++) ms_tensor_release(fp->compute_params[i]);
  free(fp->compute_params);
  ms_tensor_release(fp->compute_flat);
  fp->compute = NULL, fp->compute_flat = NULL, fp->compute_params = NULL;
}
