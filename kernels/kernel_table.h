/* kernel_table.h: the kernels of one device as one table. Each kernel family has one signature,
 * the same on every device: an execution context (which device, which stream, where a kernel
 * reports a bad value, scratch memory), then the geometry and the pointers. The CPU
 * (kernels/cpu/table.c) and CUDA (kernels/cuda/table.c) fill the same slots, and the engine
 * calls through the table of the tensors' device (engine/src/native/dispatch.c), so a device
 * test is never written at a call site.
 *
 * The slots come from the X-lists below: row X(name, params). From each row the table gets a
 * member `name`, and every device a declared body named ms_k_<device>_<name> that its table
 * names; a row without a body on some device fails the link of that device's table. */
#ifndef MS_KERNEL_TABLE_H
#define MS_KERNEL_TABLE_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MS_K_MAX_DIMS 16
#define MS_K_MAX_OPS 4

/* Up to four operands of one shape (operand 0 is the output), each with its first element, its
 * element size and its element strides (0 on broadcast dims). The engine builds it from tensors
 * and merges the dims that are contiguous in every operand (engine/src/tensor_iter.c), so a
 * contiguous tensor is one row whatever its rank. An operand whose data is NULL is a broadcast
 * number that the kernel reads from its ms_k_scalar instead. */
typedef struct ms_k_geom {
  int nops;
  int ndim; /* at least 1 after merging; the last dim is the row */
  int64_t shape[MS_K_MAX_DIMS];
  int64_t strides[MS_K_MAX_OPS][MS_K_MAX_DIMS];
  char *data[MS_K_MAX_OPS];
  size_t elsize[MS_K_MAX_OPS];
} ms_k_geom;

/* A number standing for a broadcast operand, in the compute dtype's two forms (an int64 must not
 * pass through a double). */
typedef struct ms_k_scalar {
  double f;
  int64_t i;
} ms_k_scalar;

/* A bad value that a kernel finds in its input where the engine cannot check it first without
 * waiting for the device (a class index out of range on a GPU): the first one wins; the engine
 * raises it at the next point where the host waits for the device. Code MS_K_BAD_* */
enum { MS_K_BAD_NONE, MS_K_BAD_TARGET };
typedef struct ms_k_bad_value {
  int code;
  int64_t value, limit, base; /* the value found, the bound it broke, its index base */
} ms_k_bad_value;

/* Where and how a kernel runs. */
typedef struct ms_k_exec {
  int device;          /* the device index (0 on the CPU) */
  void *stream;        /* the queue the work goes on (CUDA: a cudaStream_t; NULL: the default) */
  ms_k_bad_value *bad; /* where device kernels report bad values (the CPU's kernels never do) */
  /* Device scratch memory (cuDNN's workspace) from the engine's caching allocator, ordered on
   * the stream: NULL when it cannot be had (a kernel may then try a plan that needs less). */
  void *(*scratch_alloc)(int device, size_t nbytes);
  void (*scratch_free)(int device, void *p, size_t nbytes);
} ms_k_exec;

/* ---- the slots: X(name, params); every kernel returns 0 or its device's error code ---- */

/* Conversions and elementwise ops on an N-D geometry (one launch per op, never one per row). */
#define MS_K_ELEMENTWISE_KERNELS(X)                                                                \
  /* every element of operand 0 = value (elsize bytes, already in the element's dtype) */          \
  X(fill, (const ms_k_exec *x, const ms_k_geom *g, const void *value))

/* Reductions of rows. */
#define MS_K_REDUCE_KERNELS(X)

/* NN ops (softmax, dropout, losses, pooling, activations, embedding, norms) on contiguous buffers. */
#define MS_K_NN_KERNELS(X)

/* Random fills (Philox: the same values on every device for one seed and offset). */
#define MS_K_RANDOM_KERNELS(X)

/* Fused optimizer steps. */
#define MS_K_OPTIM_KERNELS(X)

/* Matrix products and convolutions. */
#define MS_K_LINALG_KERNELS(X)                                                                     \
  /* C (M x N) = alpha A (M x K) B (K x N) + beta C; each matrix (pointer, row stride, column     \
   * stride in elements; a transposed view is just swapped strides). A and B are of dtype dt, C   \
   * of cdt. Every device: F32 and F64 (cdt = dt). The CPU: integers too (cdt = dt, exact,        \
   * wrapping), and BF16 with a float32 C (float32 sums; the engine rounds). CUDA: BF16 and F16   \
   * with cdt = dt (float32 sums rounded once into C); a matrix with no unit stride is copied.    \
   * beta = 0 never reads C. */                                                                    \
  X(gemm, (const ms_k_exec *x, ms_k_dtype dt, ms_k_dtype cdt, int64_t M, int64_t N, int64_t K,      \
           double alpha, const void *a, int64_t rsa, int64_t csa, const void *b, int64_t rsb,      \
           int64_t csb, double beta, void *c, int64_t rsc, int64_t csc))                           \
  /* y = conv2d(xin, w) + b (b may be NULL) on packed NCHW buffers of dtype dt (F32, F64; BF16 on  \
   * the CPU where ms_k_conv2d_bf16_direct()); the engine has checked g. */                        \
  X(conv2d_forward, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g,                 \
                     const void *xin, const void *w, const void *b, void *y))                      \
  /* The gradients of conv2d_forward from gy: gx, gw, gb (each NULL: not wanted). */              \
  X(conv2d_backward, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g,                \
                      const void *xin, const void *w, const void *gy, void *gx, void *gw, void *gb))

#define MS_K_KERNELS(X)                                                                            \
  MS_K_ELEMENTWISE_KERNELS(X) MS_K_REDUCE_KERNELS(X) MS_K_NN_KERNELS(X) MS_K_RANDOM_KERNELS(X)     \
  MS_K_OPTIM_KERNELS(X) MS_K_LINALG_KERNELS(X)

#define MS_K_X_SLOT(name, params) int(*name) params;
typedef struct ms_k_table {
  const char *device;                  /* "cpu", "cuda": for messages */
  const char *(*error_string)(int err); /* what a kernel's nonzero return means */
  MS_K_KERNELS(MS_K_X_SLOT)
} ms_k_table;
#undef MS_K_X_SLOT

/* Every device's bodies, declared from the rows: a missing one fails its table's link. */
#define MS_K_X_CPU_BODY(name, params) int ms_k_cpu_##name params;
#define MS_K_X_CUDA_BODY(name, params) int ms_k_cuda_##name params;
MS_K_KERNELS(MS_K_X_CPU_BODY)
MS_K_KERNELS(MS_K_X_CUDA_BODY)
#undef MS_K_X_CPU_BODY
#undef MS_K_X_CUDA_BODY

extern const ms_k_table ms_k_cpu_table;
/* Defined only where CUDA is built (MS_HAVE_CUDA): a build without CUDA has no CUDA table. */
extern const ms_k_table ms_k_cuda_table;

/* ---- walking a geometry on the CPU (kernels/cpu/geom.c) ---- */
/* One row: n elements; ptr[k] is operand k's first element, stride[k] its element stride. */
typedef void (*ms_k_row_fn)(void *ctx, int64_t n, char **ptr, const int64_t *stride);
/* Calls fn on every row of g; splits the work over the thread pool when it is large enough. */
void ms_k_geom_run(const ms_k_geom *g, ms_k_row_fn fn, void *ctx);
int64_t ms_k_geom_numel(const ms_k_geom *g);

#ifdef __cplusplus
}
#endif

#endif
