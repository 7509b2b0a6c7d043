/* cuda_bad_values.c: bad values that kernels find on the device (a class index out of range) are
 * written to host memory the devices map, and raised as the engine's error at the next point where
 * the host waits for a device (a copy to the host such as item(), synchronize), as PyTorch's
 * device-side asserts surface: no launch waits for a check, and the error is recoverable. */
#include <pthread.h>
#include <string.h>

#include "cuda_internal.h"
#include "kernels/kernel_table.h"

static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
static volatile ms_k_bad_value *slot; /* host address; with unified addressing, the devices' too */
static cudaError_t slot_error;

static void slot_alloc(void) {
  void *p = NULL;
  slot_error = cudaHostAlloc(&p, sizeof(ms_k_bad_value), cudaHostAllocMapped | cudaHostAllocPortable);
  if (slot_error != cudaSuccess) return;
  memset(p, 0, sizeof(ms_k_bad_value));
  slot = p;
}

ms_k_bad_value *cuda_bad_value_slot(void) {
  pthread_once(&slot_once, slot_alloc);
  if (!slot) cuda_check("a device-side check's host slot", slot_error);
  return (ms_k_bad_value *)slot;
}

ms_status cuda_raise_bad_values(const char *at) {
  if (!slot || slot->code == MS_K_BAD_NONE) return MS_OK;
  ms_k_bad_value v = {slot->code, slot->value, slot->limit, slot->base};
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  slot->code = MS_K_BAD_NONE; /* reported once: the next op starts clean */
  switch (v.code) {
  case MS_K_BAD_TARGET:
    return ms_error(MS_ERR_ARG, "nll_loss: target %lld is out of bounds for %lld classes%s (checked on the "
                    "GPU: reported at the next synchronization, here %s; the loss it went into is NaN)",
                    (long long)v.value, (long long)v.limit,
                    v.base == 1 ? " (targets are 1-based class indices)" : "", at);
  }
  return ms_error(MS_ERR_RUNTIME, "%s: a kernel reported an unknown device-side error (code %d)", at, v.code);
}
