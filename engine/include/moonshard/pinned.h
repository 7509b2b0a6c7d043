/* pinned.h: host tensors in page-locked memory (DataLoader pin_memory, FSDP cpu_offload) and the
 * non-blocking host <-> device copies they allow. The bytes come from the CUDA allocator's
 * recycled host blocks (moonshard/cuda.h); without CUDA there is no page-locked memory. */
#ifndef MOONSHARD_PINNED_H
#define MOONSHARD_PINNED_H

#include <stdbool.h>

#include "moonshard/export.h"
#include "moonshard/storage.h"
#include "moonshard/tensor.h"

/* A CPU storage of nbytes in page-locked memory; NULL with an error (saying why) without CUDA. */
MS_API ms_storage *ms_storage_new_pinned(size_t nbytes, ms_mem_category category);
MS_API bool ms_storage_is_pinned(const ms_storage *s);
static inline bool ms_tensor_is_pinned(const ms_tensor *t) { return ms_storage_is_pinned(t->storage); }
/* A contiguous copy of the CPU tensor t in page-locked memory (new reference; t itself, retained,
 * when it already is one). NULL with an error for a CUDA tensor or without CUDA. */
MS_API ms_tensor *ms_tensor_pin_memory(ms_tensor *t);
/* t on `device` (new reference), as ms_tensor_to_device; with non_blocking, a pinned contiguous
 * CPU tensor that does not need a gradient goes to a CUDA device with a copy queued on the
 * device's current stream, without waiting (PyTorch's to(..., non_blocking=True)). Anything else
 * is the ordinary, synchronous copy. */
MS_API ms_tensor *ms_tensor_to_device_opt(ms_tensor *t, ms_device device, bool non_blocking);

#endif
