/* cuda_exec.h (engine-internal): what the CUDA runtime gives the kernel dispatch
 * (native/dispatch.c): no CUDA types, so the dispatch needs no CUDA headers. */
#ifndef MS_CUDA_EXEC_H
#define MS_CUDA_EXEC_H

#include "kernels/kernel_table.h"
#include "moonshard/error.h"

/* Makes device `index` current for the calling thread and fills x with it, its current stream
 * and the host slot where kernels report bad values; op names the caller in errors. */
ms_status cuda_exec_for(const char *op, int index, ms_k_exec *x);

#endif
