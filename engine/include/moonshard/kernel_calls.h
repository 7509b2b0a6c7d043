/* kernel_calls.h: the engine's count of kernel-table calls (engine/src/native/dispatch.c). */
#ifndef MOONSHARD_KERNEL_CALLS_H
#define MOONSHARD_KERNEL_CALLS_H

#include <stdint.h>

#include "moonshard/export.h"
#include "moonshard/storage.h"

/* How many kernel-table calls the engine has made on devices of this type since the process
 * started (every slot call passes native_kernel_status once). The same code path runs on every
 * device, so a step's count on the CPU is the number of launches the same step makes on a GPU
 * (docs/fusion.md says where they differ). */
MS_API int64_t ms_kernel_calls(ms_device_type type);

#endif
