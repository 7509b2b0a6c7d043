/* cuda_device.c: device discovery that survives a machine with no driver or no GPU (the reason
 * is kept for messages), the thread's current device, synchronization and byte copies. */
#include <pthread.h>
#include <stdio.h>

#include "cuda_internal.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int device_count;
static char reason[256];

/* cudaGetDeviceCount is the one call that is safe without a driver: it reports the missing
 * driver as an error code instead of failing to load. */
static void probe(void) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err == cudaSuccess && n > 0) {
    device_count = n < MS_CUDA_MAX_DEVICES ? n : MS_CUDA_MAX_DEVICES;
    return;
  }
  (void)cudaGetLastError(); /* the failure is ours to report, not the next call's */
  if (err == cudaSuccess || err == cudaErrorNoDevice)
    snprintf(reason, sizeof reason, "no CUDA device was found (the driver sees no GPU%s)",
             err == cudaSuccess ? "" : "; check CUDA_VISIBLE_DEVICES");
  else if (err == cudaErrorInsufficientDriver)
    snprintf(reason, sizeof reason, "no usable NVIDIA driver: none is installed, or it is older "
             "than this build's CUDA %d.%d runtime", CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
  else
    snprintf(reason, sizeof reason, "the CUDA runtime could not start: %s (%s)",
             cudaGetErrorString(err), cudaGetErrorName(err));
}

int ms_cuda_device_count(void) {
  pthread_once(&probe_once, probe);
  return device_count;
}

bool ms_cuda_is_available(void) { return ms_cuda_device_count() > 0; }

const char *ms_cuda_unavailable_reason(void) {
  pthread_once(&probe_once, probe);
  return reason;
}

ms_status cuda_check(const char *op, cudaError_t err) {
  if (err == cudaSuccess) return MS_OK;
  (void)cudaGetLastError(); /* clear a sticky-free error so later calls start clean */
  return ms_error(err == cudaErrorMemoryAllocation ? MS_ERR_MEMORY : MS_ERR_RUNTIME,
                  "%s: CUDA error: %s (%s)", op, cudaGetErrorString(err), cudaGetErrorName(err));
}

ms_status ms_cuda_check_device(const char *op, int index) {
  int n = ms_cuda_device_count();
  if (n == 0)
    return ms_error(MS_ERR_RUNTIME, "%s: CUDA is not available: %s", op, ms_cuda_unavailable_reason());
  if (index < 0 || index >= n)
    return ms_error(MS_ERR_ARG, "%s: invalid CUDA device cuda:%d (this machine has %d device%s, "
                    "cuda:0..cuda:%d)", op, index, n, n == 1 ? "" : "s", n - 1);
  return MS_OK;
}

ms_status ms_cuda_device_name(int index, char *buf, size_t len, int *major, int *minor) {
  if (ms_cuda_check_device("get_device_name", index) != MS_OK) return MS_ERR_RUNTIME;
  struct cudaDeviceProp p;
  if (cuda_check("get_device_name", cudaGetDeviceProperties(&p, index)) != MS_OK) return MS_ERR_RUNTIME;
  snprintf(buf, len, "%s", p.name);
  *major = p.major, *minor = p.minor;
  return MS_OK;
}

static _Thread_local int current_device; /* what this thread last made current */
static _Thread_local bool current_set;

ms_status cuda_use(const char *op, int index) {
  if (current_set && current_device == index) return MS_OK;
  if (ms_cuda_check_device(op, index) != MS_OK) return MS_ERR_RUNTIME;
  if (cuda_check(op, cudaSetDevice(index)) != MS_OK) return MS_ERR_RUNTIME;
  current_device = index, current_set = true;
  return MS_OK;
}

ms_status ms_cuda_set_device(int index) { return cuda_use("set_device", index); }

int ms_cuda_current_device(void) { return current_device; }

ms_status ms_cuda_synchronize(int index) {
  if (index < 0) index = current_device;
  if (cuda_refuse_in_capture("synchronize", "it waits for the device") != MS_OK) return MS_ERR_RUNTIME;
  if (cuda_use("synchronize", index) != MS_OK) return MS_ERR_RUNTIME;
  if (cuda_check("synchronize", cudaDeviceSynchronize()) != MS_OK) return MS_ERR_RUNTIME;
  return cuda_raise_bad_values("synchronize");
}

/* Host memory that a device reads by DMA (cudaHostAlloc'd or registered): a copy from it is
 * asynchronous, so the host must wait before the bytes may change. */
static bool is_page_locked(const void *p) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return true; /* unknown: wait, as for page-locked memory */
  }
  return a.type == cudaMemoryTypeHost;
}

ms_status ms_cuda_memcpy(void *dst, int dst_index, const void *src, int src_index, size_t nbytes,
                         ms_cuda_copy_kind kind) {
  if (nbytes == 0) return MS_OK;
  int dev = kind == MS_CUDA_H2D ? dst_index : src_index;
  bool host = kind != MS_CUDA_D2D, peer_copy = !host && dst_index != src_index;
  if ((host || peer_copy) &&
      cuda_refuse_in_capture("copy", host ? HOST_COPY_IN_CAPTURE : "a copy between two devices waits for them") != MS_OK)
    return MS_ERR_RUNTIME;
  if (cuda_use("copy", dev) != MS_OK) return MS_ERR_RUNTIME;
  cudaStream_t s = cuda_raw_stream(dev);
  cudaError_t err;
  bool peer = kind == MS_CUDA_D2D && dst_index != src_index;
  if (peer) { /* dst's earlier users run on dst's stream: let them finish first */
    if (cuda_use("copy", dst_index) != MS_OK) return MS_ERR_RUNTIME;
    if (cuda_check("copy", cudaStreamSynchronize(cuda_raw_stream(dst_index))) != MS_OK) return MS_ERR_RUNTIME;
    if (cuda_use("copy", dev) != MS_OK) return MS_ERR_RUNTIME;
    err = cudaMemcpyPeerAsync(dst, dst_index, src, src_index, nbytes, s);
  } else {
    enum cudaMemcpyKind k = kind == MS_CUDA_H2D ? cudaMemcpyHostToDevice
                            : kind == MS_CUDA_D2H ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
    err = cudaMemcpyAsync(dst, src, nbytes, k, s);
  }
  /* The host side must not be read before a copy to it is done, nor change before a copy from
   * page-locked memory is (from pageable memory, CUDA stages the bytes before it returns), and a
   * copy between two devices is not ordered with the destination's stream: wait for those. */
  bool wait = kind == MS_CUDA_D2H || peer || (kind == MS_CUDA_H2D && is_page_locked(src));
  if (err == cudaSuccess && wait) err = cudaStreamSynchronize(s);
  if (cuda_check("copy", err) != MS_OK) return MS_ERR_RUNTIME;
  return kind == MS_CUDA_D2H ? cuda_raise_bad_values("a copy to the host") : MS_OK;
}
