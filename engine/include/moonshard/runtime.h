/* runtime.h: process-wide settings of the engine: threads and the version. */
#ifndef MOONSHARD_RUNTIME_H
#define MOONSHARD_RUNTIME_H

#include "moonshard/export.h"

#define MS_VERSION_STRING "0.1.0"

/* Threads the kernels use (>= 1). Defaults to MS_NUM_THREADS or the number of cores. */
MS_API void ms_set_num_threads(int n);
MS_API int ms_get_num_threads(void);

#endif
