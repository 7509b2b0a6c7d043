/* tensor_internal.h (engine-internal): what the tensor core offers the layers above it beyond
 * the public header. */
#ifndef MS_TENSOR_INTERNAL_H
#define MS_TENSOR_INTERNAL_H

#include "moonshard/tensor_core.h"

/* A contiguous uninitialised tensor on `dev`; `op` names the factory in errors. */
ms_tensor *tensor_new_contiguous_on(ms_device dev, const char *op, int ndim, const int64_t *shape, ms_dtype dt);

typedef void (*ms_tensor_free_fn)(ms_tensor *t);
/* Sets the function ms_tensor_release calls on a tensor that holds autograd state (a grad_fn,
 * hooks, a recorded view base) and returns the one it replaces. Autograd installs it before it
 * first gives a tensor such state: the tensor core knows nothing of autograd. */
ms_tensor_free_fn tensor_set_autograd_free(ms_tensor_free_fn fn);

#endif
