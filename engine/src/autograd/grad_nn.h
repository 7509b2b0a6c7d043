/* grad_nn.h (engine-internal): what the public nn ops (grad_<nnfile>.c) share above the native
 * nn layer: 16-bit floats widened and rounded back with recorded conversions, and saved slots
 * that may be empty (grad_nn.c). */
#ifndef MS_GRAD_NN_H
#define MS_GRAD_NN_H

#include "grad_util.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"

/* 16-bit floats: the native nn ops compute in float32 or float64 (with a few native bfloat16
 * paths), so a public op given a 16-bit float widens its floating arguments to float32, runs,
 * and rounds the result back; the conversions are recorded, so gradients come back in the
 * 16-bit dtype as PyTorch's do. This is what FSDP's mixed precision computes with. */
/* True (and *half = the dtype) when any of the n tensors (NULLs allowed) is bfloat16/float16. */
bool nn_half_call(int n, ms_tensor *const *ts, ms_dtype *half);
/* The same for a one-input op with a native bfloat16 CPU kernel (dropout): true
 * when x must still be widened, i.e. float16 anywhere, or bfloat16 off the CPU. */
bool nn_half_call_widens(ms_tensor *x, ms_dtype *half);
/* wide[i] = ts[i] as float32 when 16-bit (recorded), else ts[i] retained; NULL stays. */
ms_status nn_widen(int n, ms_tensor *const *ts, ms_tensor **wide);
/* out converted to dt (recorded) as a new reference; out retained when nothing changes; NULL
 * passes through. */
ms_tensor *nn_narrow_back(ms_tensor *out, ms_dtype dt);


/* Saved slot i: *out = the tensor, or NULL when nothing was saved there; false on error. */
bool nn_saved(ms_node *n, int i, ms_tensor **out);
/* Saves t, or an empty slot for NULL, so slot numbers stay fixed. */
void nn_save(ms_node *n, ms_tensor *t);

#endif
