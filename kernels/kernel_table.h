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
  X(fill, (const ms_k_exec *x, const ms_k_geom *g, const void *value))                             \
  /* operand 0 (dst_dt) = operand 1 (src_dt) converted as ms_k_cast does, bit for bit (copy_) */  \
  X(cast, (const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dst_dt, ms_k_dtype src_dt))          \
  /* operand 0 = operand 1 op operand 2 in dt (F32, F64 or I64; comparisons write bool), as       \
   * ms_k_binary. An operand whose data is NULL is the number sa (operand 1) or sb (operand 2):    \
   * the engine sends one for an operand on another device than the output (a 0-dim CPU tensor   \
   * beside CUDA tensors, read once on the host); every device accepts one. */                    \
  X(binary, (const ms_k_exec *x, const ms_k_geom *g, ms_k_binop op, ms_k_dtype dt,                 \
             const ms_k_scalar *sa, const ms_k_scalar *sb))                                        \
  /* operand 0 = op(operand 1) in dt (F32, F64, I64; the CPU also relu on BF16), as ms_k_unary */   \
  X(unary, (const ms_k_exec *x, const ms_k_geom *g, ms_k_unop op, ms_k_dtype dt))                  \
  /* operand 0 = operand 1 clamped to [lo, hi] (either NULL: no bound) in dt, as ms_k_clamp */      \
  X(clamp, (const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dt, const double *lo,               \
            const double *hi))                                                                     \
  /* operand 0 = operand 1 (bool) ? operand 2 : operand 3 in dt, as ms_k_where; operand 2 or 3     \
   * with data NULL is the number sa or sb (as in binary) */                                       \
  X(where, (const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dt, const ms_k_scalar *sa,          \
            const ms_k_scalar *sb))

/* Rows of n elements `stride` apart, one per output element; row r starts at the offset its index
 * has in the outer geometry (ndim dims, row-major; 0 dims: one row at the start). */
typedef struct ms_k_rows {
  int ndim;
  int64_t shape[MS_K_MAX_DIMS];
  int64_t strides[MS_K_MAX_DIMS];
  int64_t rows, n, stride;
} ms_k_rows;

/* What reduce_stat_rows computes: var / std (op RMOMENTS: the sum of squared deviations over
 * n - correction, NaN when that is not positive; root: its square root) or a p-norm (op RPOWSUM:
 * ms_k_reduce_row's terms, then the p-th root; p = INFINITY: max |x|, NaN propagating). */
typedef struct ms_k_stat {
  ms_k_redop op;
  double p, correction;
  int root;
} ms_k_stat;

/* Reductions of rows. src is dt (F32, F64 or I64); out is contiguous, one out_dt element per row. */
#define MS_K_REDUCE_KERNELS(X)                                                                     \
  /* op RSUM, RPROD, RMAX, RMIN, RARGMAX or RARGMIN with ms_k_reduce_row's semantics: out[r] the   \
   * row's value (divided by n when mean; an int64 sum, product or extreme stored from its int64,  \
   * not through a double), or its 0-based position for the arg ops; indices (may be NULL) the    \
   * position of max/min. An empty row: sum 0, prod 1, mean NaN (max/min have no empty rows). */   \
  X(reduce_rows, (const ms_k_exec *x, const ms_k_rows *g, ms_k_redop op, ms_k_dtype dt,            \
                  const void *src, int mean, void *out, ms_k_dtype out_dt, int64_t *indices))      \
  /* var, std or a p-norm of every row (see ms_k_stat), dt F32 or F64 */                           \
  X(reduce_stat_rows, (const ms_k_exec *x, const ms_k_rows *g, const ms_k_stat *st, ms_k_dtype dt, \
                       const void *src, void *out, ms_k_dtype out_dt))

/* NN ops (softmax, dropout, losses, pooling, activations, embedding, norms) on contiguous buffers. */
#define MS_K_NN_KERNELS(X)

/* Random fills (Philox: the same values on every device for one seed and offset). */
#define MS_K_RANDOM_KERNELS(X)

/* Fused optimizer steps. */
#define MS_K_OPTIM_KERNELS(X)

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
