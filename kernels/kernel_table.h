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

/* Random fills (Philox: the same values on every device for one seed and offset): n contiguous
 * elements of out, element i drawn as kernels.h's ms_k_philox_* say, from block `offset` on (the
 * engine reserves the blocks). Bitwise equal across devices except normal's (libdevice's log/sin/
 * cos: float64 may differ in the last bits). */
#define MS_K_RANDOM_KERNELS(X)                                                                     \
  /* dt F32 (low and high rounded to float first) or F64; uniform in [low, high) */                \
  X(philox_uniform, (const ms_k_exec *x, ms_k_dtype dt, uint64_t seed, uint64_t offset,            \
                     int64_t n, void *out, double low, double high))                               \
  /* dt F32 or F64; mean + std * N(0, 1) */                                                        \
  X(philox_normal, (const ms_k_exec *x, ms_k_dtype dt, uint64_t seed, uint64_t offset, int64_t n,  \
                    void *out, double mean, double std))                                           \
  /* int64 in [low, high), low < high */                                                           \
  X(philox_randint, (const ms_k_exec *x, uint64_t seed, uint64_t offset, int64_t n, int64_t *out,  \
                     int64_t low, int64_t high))                                                   \
  /* out[i] = 1 with the one probability p (dropout's mask), else 0 */                             \
  X(philox_bernoulli, (const ms_k_exec *x, uint64_t seed, uint64_t offset, int64_t n, double p,    \
                       uint8_t *out))                                                              \
  /* out[i] = 1 with probability p[i * ps] (float64 values in [0, 1] on the device), else 0 */     \
  X(philox_bernoulli_p, (const ms_k_exec *x, uint64_t seed, uint64_t offset, int64_t n,            \
                         const double *p, int64_t ps, uint8_t *out))                               \
  /* dropout's y = mask ? in * scale : 0 over n contiguous elements (mask bytes 0 or 1); dt F32,   \
   * F64, or BF16 on the CPU only (the product in float32, rounded once) */                        \
  X(masked_scale, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, const void *in,                   \
                   const uint8_t *mask, double scale, void *y))

/* Fused optimizer steps: one pass over n contiguous elements of a parameter (dt F32 or F64), its
 * gradient (only read) and its state, with kernels.h's ms_k_*_step formulas (PyTorch's, computed
 * in double, rounded once per stored value); a state an option does not use is NULL. */
#define MS_K_OPTIM_KERNELS(X)                                                                      \
  X(adadelta_step, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,   \
                    void *square_avg, void *acc_delta, const ms_k_adadelta_hp *hp))                \
  /* momentum_buffer NULL when momentum == 0 */                                                    \
  X(sgd_step, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,        \
               void *momentum_buffer, const ms_k_sgd_hp *hp))                                      \
  /* max_exp_avg_sq NULL unless amsgrad; AdamW when hp->decoupled */                               \
  X(adam_step, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,       \
                void *exp_avg, void *exp_avg_sq, void *max_exp_avg_sq, const ms_k_adam_hp *hp))   \
  X(adagrad_step, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,    \
                   void *state_sum, const ms_k_adagrad_hp *hp))                                    \
  /* grad_avg NULL unless centered; momentum_buffer NULL unless momentum > 0 */                    \
  X(rmsprop_step, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, void *param, const void *grad,    \
                   void *square_avg, void *grad_avg, void *momentum_buffer,                        \
                   const ms_k_rmsprop_hp *hp))

/* Matrix products, convolutions and a convolution's bias. */
#define MS_K_LINALG_KERNELS(X)

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
