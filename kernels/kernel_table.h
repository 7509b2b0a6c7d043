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
  /* NULL outside a CUDA graph capture. While capturing: device memory holding the Philox seed
   * and the base offset of the graph's current replay (written before each launch), so a Philox
   * kernel draws with seed = rng_base[0] and offset = rng_base[1] + the offset it was given
   * (relative to the graph's start): each replay draws fresh numbers. The CPU never gets one. */
  const uint64_t *rng_base;
} ms_k_exec;

/* What a kernel returns: 0, MS_K_ERR_NO_MEMORY (its work buffers could not be had, on any device),
 * or a device's own error code (CUDA: a cudaError_t, or a library failure it describes). */
enum { MS_K_ERR_NO_MEMORY = -1 };

/* ---- the slots: X(name, params) ---- */

/* Conversions and elementwise ops on an N-D geometry (one launch per op, never one per row). */
#define MS_K_ELEMENTWISE_KERNELS(X)                                                                \
  /* every element of operand 0 = value (elsize bytes, already in the element's dtype) */          \
  X(fill, (const ms_k_exec *x, const ms_k_geom *g, const void *value))                             \
  /* operand 0 (dst_dt) = operand 1 (src_dt) converted as ms_k_cast does, bit for bit (copy_) */  \
  X(cast, (const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dst_dt, ms_k_dtype src_dt))          \
  /* operand 0 = operand 1 op operand 2 in dt (F32, F64, I64, BF16 or F16; comparisons write     \
   * bool), as ms_k_binary. Beside a 16-bit dt each input is dt or float32 (by its elsize),       \
   * computed in float32 and rounded once to dt. An operand whose data is NULL is the number sa   \
   * (operand 1) or sb (operand 2): the engine sends one for an operand on another device than    \
   * the output (a 0-dim CPU tensor beside CUDA tensors, read once on the host); every device     \
   * accepts one. */                                                                              \
  X(binary, (const ms_k_exec *x, const ms_k_geom *g, ms_k_binop op, ms_k_dtype dt,                 \
             const ms_k_scalar *sa, const ms_k_scalar *sb))                                        \
  /* operand 0 = op(operand 1) in dt (F32, F64, I64, BF16 or F16: 16-bit in float32, rounded     \
   * once), as ms_k_unary */                                                                       \
  X(unary, (const ms_k_exec *x, const ms_k_geom *g, ms_k_unop op, ms_k_dtype dt))                  \
  /* operand 0 = operand 1 clamped to [lo, hi] (either NULL: no bound) in dt, as ms_k_clamp (the  \
   * same dtypes as unary) */                                                                      \
  X(clamp, (const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dt, const double *lo,               \
            const double *hi))                                                                     \
  /* operand 0 = operand 1 (bool) ? operand 2 : operand 3 in dt, as ms_k_where (the same dtypes   \
   * as binary, operands 2 and 3 dt or float32 beside 16-bit); operand 2 or 3 with data NULL is   \
   * the number sa or sb (as in binary) */                                                         \
  X(where, (const ms_k_exec *x, const ms_k_geom *g, ms_k_dtype dt, const ms_k_scalar *sa,          \
            const ms_k_scalar *sb))                                                                \
  /* tril / triu in place: data holds batch contiguous rows x cols matrices of elsize-byte       \
   * elements; element (i, j) becomes all zero bytes (0 in every dtype) where j - i > diagonal    \
   * (upper 0: tril) or j - i < diagonal (upper 1: triu), and is left as it is elsewhere */       \
  X(triangle_zero, (const ms_k_exec *x, int64_t batch, int64_t rows, int64_t cols, int upper,      \
                    int64_t diagonal, size_t elsize, void *data))

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

/* Reductions of rows. src is dt (F32, F64 or I64; BF16 and F16 read as their float32 values: the
 * CPU's reduce_rows sums them, CUDA's reduce_rows and reduce_stat_rows take them for every op);
 * floating values accumulate in float64; out is contiguous, one out_dt element per row. */
#define MS_K_REDUCE_KERNELS(X)                                                                     \
  /* op RSUM, RPROD, RMAX, RMIN, RARGMAX or RARGMIN with ms_k_reduce_row's semantics: out[r] the   \
   * row's value (divided by n when mean; an int64 sum, product or extreme stored from its int64,  \
   * not through a double), or its 0-based position for the arg ops; indices (may be NULL) the    \
   * position of max/min. An empty row: sum 0, prod 1, mean NaN (max/min have no empty rows). */   \
  X(reduce_rows, (const ms_k_exec *x, const ms_k_rows *g, ms_k_redop op, ms_k_dtype dt,            \
                  const void *src, int mean, void *out, ms_k_dtype out_dt, int64_t *indices))      \
  /* var, std or a p-norm of every row (see ms_k_stat), dt F32 or F64 (CUDA: BF16, F16 too) */     \
  X(reduce_stat_rows, (const ms_k_exec *x, const ms_k_rows *g, const ms_k_stat *st, ms_k_dtype dt, \
                       const void *src, void *out, ms_k_dtype out_dt))

/* Scaled dot product attention over nb independent problems (batch x heads), every buffer
 * contiguous: q (nb, L, E), k (nb, S, E), v (nb, S, Ev), out (nb, L, Ev), lse (nb, L). Score
 * (i, j) = scale q_i . k_j, masked (causal: j > i; a bool mask byte 0; an additive mask adds its
 * value); P = softmax over j, out = dropout(P) v. lse holds each row's logsumexp (-inf for a
 * row with every key masked, whose output and gradients are 0). The mask (dtype dt, or bytes)
 * is read at b's offset plus i msi + j msj; b's offset unravels b over the batch dims bshape
 * with the mask's strides mstride (0 where it broadcasts). Dropout keeps element (b, i, j) when
 * word (b L + i) S + j of the Philox stream (seed, offset; ms_k_philox_bernoulli's layout) is
 * below keep_below, and scales kept weights by 1 / (1 - dropout_p). dt is F32 or F64, or BF16 on
 * the CPU where ms_k_gemm_bf16_available() and BF16 or F16 on CUDA (q, k, v, out, gout, the
 * gradients and an additive mask in dt; lse and delta float32; every sum in float32). */
enum { MS_K_ATTN_MASK_NONE, MS_K_ATTN_MASK_BOOL, MS_K_ATTN_MASK_ADD };
typedef struct ms_k_attn_geom {
  int64_t nb, L, S, E, Ev;
  double scale;
  int causal, mask_kind, nbatch;
  int64_t bshape[MS_K_MAX_DIMS], mstride[MS_K_MAX_DIMS], msi, msj;
  double dropout_p; /* 0: no dropout */
  uint64_t seed, offset, keep_below;
  /* The CPU reads q, k and v through strides (the GPT's are transposed views of one tensor):
   * problem b's rows start at b unravelled over bshape times qstride (kstride, vstride), rows
   * qrs (krs, vrs) apart, the last dim contiguous. Other devices get contiguous inputs, whose
   * strides these are too. */
  int64_t qstride[MS_K_MAX_DIMS], kstride[MS_K_MAX_DIMS], vstride[MS_K_MAX_DIMS], qrs, krs, vrs;
} ms_k_attn_geom;

/* NN ops (softmax, dropout, losses, pooling, activations, embedding, norms) on contiguous buffers
 * of dtype dt (F32 or F64; BF16 and F16, computed in float32 and rounded once per stored value,
 * for softmax, activations, embedding and layer_norm everywhere, for the pools and batch_norm on
 * CUDA, and for max pooling on the CPU in BF16; a 16-bit norm's parameters, statistics and
 * parameter gradients and embedding's gw are float32), with kernels.h's semantics for the
 * CPU functions of the same names; pointers are the device's, indices already checked by the
 * engine unless said otherwise. */
#define MS_K_NN_KERNELS(X)                                                                         \
  /* softmax (log 0) or log_softmax (log 1) over the middle dim of (outer, C, inner) */            \
  X(softmax, (const ms_k_exec *x, ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner,          \
              const void *in, void *y, int log))                                                   \
  /* gx from the forward's output y and the gradient g */                                          \
  X(softmax_backward, (const ms_k_exec *x, ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner, \
                       const void *y, const void *g, void *gx, int log))                           \
  /* per-position nll, weight and smoothing terms (smooth may be NULL); a->target and a->weight   \
   * are device pointers. A target neither ignore_index nor a class (the CPU's engine checks them \
   * first; a device's kernel cannot stop) gives a NaN term, weight 0, reported in x->bad. */     \
  X(nll_rows, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_nll_args *a, const void *logp,        \
               void *nll, void *wt, void *smooth))                                                 \
  /* out[0] (dt) = (1 - s) sum(nll) + s / C sum(smooth), over sum(wt) when mean; *sw (float64)    \
   * = sum(wt); sums in double; smooth may be NULL */                                              \
  X(nll_reduce, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, const void *nll, const void *wt,    \
                 const void *smooth, double s, int64_t C, int mean, void *out, double *sw))        \
  /* nll_rows then nll_reduce without smoothing, in one pass (one launch): out[0] (dt) = sum(nll), \
   * over sum(wt) when mean; *sw (float64) = sum(wt); the same sums, bit for bit, as the two      \
   * slots give (bad targets reported as nll_rows does) */                                         \
  X(nll_loss, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_nll_args *a, const void *logp,        \
               int mean, void *out, double *sw))                                                   \
  /* all of gx: the gradient of the nll term (logp NULL) or of cross entropy's logits; sw (a      \
   * float64 on the device, or NULL) divides the one incoming gradient g[0] (gs 0) first, in      \
   * float64 rounded to dt: a device mean's weight sum, never read back by the host */            \
  X(nll_backward, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_nll_args *a, const void *logp,    \
                   const void *g, int64_t gs, const double *sw, double nll_scale,                  \
                   double smooth_scale, double smoothing, void *gx))                               \
  /* indices may be NULL on the CPU (evaluation); the CUDA body always writes them */             \
  X(max_pool2d, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_pool2d_geom *g, const void *in,     \
                 void *out, int64_t *indices))                                                     \
  X(max_pool2d_backward, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_pool2d_geom *g,            \
                          const void *gout, const int64_t *indices, void *gx))                     \
  /* the six window arrays of win are pointers of the device */                                    \
  X(avg_pool2d, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_pool2d_geom *g,                     \
                 const ms_k_pool_windows *win, const void *in, void *out))                         \
  X(avg_pool2d_backward, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_pool2d_geom *g,            \
                          const ms_k_pool_windows *win, const void *gout, void *gx))               \
  /* y = act(in) over n elements; its backward gx = act'(in) g */                                  \
  X(activation, (const ms_k_exec *x, ms_k_act act, ms_k_dtype dt, int64_t n, const void *in,       \
                 void *y))                                                                         \
  X(activation_backward, (const ms_k_exec *x, ms_k_act act, ms_k_dtype dt, int64_t n,              \
                          const void *in, const void *g, void *gx))                                \
  /* relu's gradient in one pass over n contiguous elements (gx may be g): gx = y > 0 ? g : 0,   \
   * g's bits where kept (an infinite g stays, never a NaN at 0); dt F32, F64, BF16, F16 */     \
  X(relu_backward, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, const void *y, const void *g,    \
                    void *gx))                                                                     \
  /* out row r = w row (idx[r] - base); the backward adds g rows into gw (zeroed by the caller),  \
   * none into padding_idx (0-based; -1: none), deterministically */                               \
  X(embedding, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, int64_t D, const int64_t *idx,       \
                int64_t base, const void *w, void *out))                                           \
  X(embedding_backward, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, int64_t D,                  \
                         const int64_t *idx, int64_t base, int64_t padding_idx, const void *g,     \
                         void *gw))                                                                \
  /* rows of M x N; w, b may be NULL; mean and rstd are written. Backward outputs may be NULL. */ \
  X(layer_norm, (const ms_k_exec *x, ms_k_dtype dt, int64_t M, int64_t N, const void *in,          \
                 const void *w, const void *b, double eps, void *y, void *mean, void *rstd))       \
  X(layer_norm_backward, (const ms_k_exec *x, ms_k_dtype dt, int64_t M, int64_t N, const void *in, \
                          const void *g, const void *mean, const void *rstd, const void *w,        \
                          void *gx, void *gw, void *gb))                                           \
  /* channels of (N, C, inner): batch mean and biased variance; the normalization; its backward  \
   * (training: the statistics depend on the input; outputs may be NULL) */                        \
  X(batch_norm_stats, (const ms_k_exec *x, ms_k_dtype dt, int64_t N, int64_t C, int64_t inner,     \
                       const void *in, void *mean, void *var))                                     \
  X(batch_norm_apply, (const ms_k_exec *x, ms_k_dtype dt, int64_t N, int64_t C, int64_t inner,     \
                       const void *in, const void *mean, const void *invstd, const void *w,        \
                       const void *b, void *y))                                                    \
  X(batch_norm_backward, (const ms_k_exec *x, ms_k_dtype dt, int64_t N, int64_t C, int64_t inner,  \
                          const void *in, const void *g, const void *mean, const void *invstd,     \
                          const void *w, int training, void *gx, void *gw, void *gb))     \
  /* attention (see ms_k_attn_geom): out and lse, never an L x S matrix per problem */            \
  X(attention, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_attn_geom *g, const void *q,         \
                const void *k, const void *v, const void *mask, void *out, void *lse))             \
  /* its gradients from the forward's out and lse and gout; delta (nb L elements of dt) is      \
   * scratch for the rows' sum of gout * out */                                                    \
  X(attention_backward, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_attn_geom *g,               \
                         const void *q, const void *k, const void *v, const void *mask,            \
                         const void *out, const void *lse, const void *gout, void *delta,          \
                         void *gq, void *gk, void *gv))

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
   * F64, BF16 (the product in float32, rounded once), on CUDA also F16 */                          \
  X(masked_scale, (const ms_k_exec *x, ms_k_dtype dt, int64_t n, const void *in,                   \
                   const uint8_t *mask, double scale, void *y))                                    \
  /* dropout's forward in one pass: mask as philox_bernoulli(keep) draws it, y as masked_scale     \
   * writes it, bit for bit (dt as masked_scale's) */                                              \
  X(dropout, (const ms_k_exec *x, ms_k_dtype dt, uint64_t seed, uint64_t offset, int64_t n,        \
              double keep, const void *in, double scale, uint8_t *mask, void *y))

/* The tensors of one multi-tensor optimizer launch: tensor i has n[i] contiguous elements (0
 * allowed) in the arrays arr[a][i], a = 0 the parameter, 1 its gradient (only read), 2.. the
 * states in the single-tensor row's order (NULL where the options use none). At most
 * MS_K_LIST_MAX tensors, so that CUDA takes the list as one kernel argument (well under the
 * 4 KiB every GPU accepts); the engine cuts a longer list into chunks. */
#define MS_K_LIST_MAX 48
#define MS_K_LIST_ARRAYS 5
typedef struct ms_k_tensor_list {
  int count;
  int64_t n[MS_K_LIST_MAX];
  void *arr[MS_K_LIST_ARRAYS][MS_K_LIST_MAX];
} ms_k_tensor_list;

/* The float64 numbers a list step computes with, in device memory when captured (hp_dev): every
 * value a schedule or the step count changes, derived on the host as the single-tensor steps
 * derive them (Adam's step size and bias correction, AdamW's decay factor). ms_k_*_slots
 * (kernels/cpu/optim.c) fill them from an hp struct; the flags (maximize, nesterov, amsgrad,
 * decoupled, init_buffer) stay in hp. */
enum { MS_K_SGD_LR, MS_K_SGD_MOMENTUM, MS_K_SGD_DAMPENING, MS_K_SGD_WEIGHT_DECAY, MS_K_SGD_SLOTS };
enum {
  MS_K_ADAM_BETA1, MS_K_ADAM_BETA2, MS_K_ADAM_EPS,
  MS_K_ADAM_STEP_SIZE, /* lr / (1 - beta1^step) */
  MS_K_ADAM_BC2_SQRT,  /* sqrt(1 - beta2^step) */
  MS_K_ADAM_DECAY,     /* AdamW: 1 - lr weight_decay; Adam: 1 */
  MS_K_ADAM_L2,        /* Adam: weight_decay; AdamW: 0 */
  MS_K_ADAM_SLOTS
};
enum { MS_K_ADADELTA_LR, MS_K_ADADELTA_RHO, MS_K_ADADELTA_EPS, MS_K_ADADELTA_WEIGHT_DECAY, MS_K_ADADELTA_SLOTS };
#define MS_K_MAX_SLOTS 8
typedef struct ms_k_slots {
  double v[MS_K_MAX_SLOTS];
} ms_k_slots;
void ms_k_sgd_slots(const ms_k_sgd_hp *hp, double s[MS_K_SGD_SLOTS]);
void ms_k_adam_slots(const ms_k_adam_hp *hp, double s[MS_K_ADAM_SLOTS]);
void ms_k_adadelta_slots(const ms_k_adadelta_hp *hp, double s[MS_K_ADADELTA_SLOTS]);

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
                   const ms_k_rmsprop_hp *hp))                                                     \
  /* Multi-tensor steps (PyTorch's foreach): the step above over every tensor of l at once (one   \
   * CUDA launch, one threaded pass on the CPU), bit for bit the single-tensor row on each. hp_dev: \
   * NULL, or (CUDA only) device memory holding the MS_K_*_SLOTS values that replace hp's, read   \
   * when the kernel runs (a step captured in a CUDA graph sees each replay's values). */         \
  X(sgd_step_list, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_tensor_list *l,                  \
                    const ms_k_sgd_hp *hp, const double *hp_dev))                                  \
  X(adam_step_list, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_tensor_list *l,                 \
                     const ms_k_adam_hp *hp, const double *hp_dev))                                \
  X(adadelta_step_list, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_tensor_list *l,             \
                         const ms_k_adadelta_hp *hp, const double *hp_dev))                        \
  /* dst[0 .. MS_K_MAX_SLOTS) = s->v, ordered on the stream like a kernel (CUDA: the values travel \
   * as a kernel's arguments, so no host memory is staged, kept alive or waited for) */           \
  X(write_slots, (const ms_k_exec *x, double *dst, const ms_k_slots *s))

/* Matrix products and convolutions. */
#define MS_K_LINALG_KERNELS(X)                                                                     \
  /* C (M x N) = alpha A (M x K) B (K x N) + beta C; each matrix (pointer, row stride, column     \
   * stride in elements; a transposed view is just swapped strides). A and B are of dtype dt, C   \
   * of cdt. Every device: F32 and F64 (cdt = dt). The CPU: integers too (cdt = dt, exact,        \
   * wrapping), and BF16 with a float32 C or cdt = dt (float32 sums rounded once into C as each  \
   * tile is stored). CUDA: BF16 and F16 with cdt = dt (float32 sums rounded once into C); a      \
   * matrix with no unit stride is copied.                                                        \
   * beta = 0 never reads C. bias (NULL: none; floating dt only, with beta 0): N contiguous      \
   * elements of dt, one per column, added to every row of C as the GEMM stores it (Linear's      \
   * bias: no pass that fills C first). The CPU: the bits of C filled with the bias then beta 1;  \
   * CUDA: cuBLASLt's bias epilogue where it takes the case, else that fill and beta 1. */        \
  X(gemm, (const ms_k_exec *x, ms_k_dtype dt, ms_k_dtype cdt, int64_t M, int64_t N, int64_t K,      \
           double alpha, const void *a, int64_t rsa, int64_t csa, const void *b, int64_t rsb,      \
           int64_t csb, double beta, void *c, int64_t rsc, int64_t csc, const void *bias))         \
  /* y = conv2d(xin, w) + b (b may be NULL) on packed NCHW buffers of dtype dt (F32, F64; BF16 on  \
   * the CPU where ms_k_conv2d_bf16_direct(); BF16 and F16 on CUDA); the engine has checked g. */  \
  X(conv2d_forward, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g,                 \
                     const void *xin, const void *w, const void *b, void *y))                      \
  /* The gradients of conv2d_forward from gy: gx, gw, gb (each NULL: not wanted). */              \
  X(conv2d_backward, (const ms_k_exec *x, ms_k_dtype dt, const ms_k_conv2d_geom *g,                \
                      const void *xin, const void *w, const void *gy, void *gx, void *gw, void *gb))

/* Gather and scatter along one dim: the elements walked are the index's (ndim dims of `shape`,
 * row-major). The element at coordinates c reads or writes `direct` at c (strides dstride) and
 * `indexed` at c with coordinate `dim` replaced by index[c] (strides istride for the index,
 * astride for indexed), read as a position counted from `base` (0, or 1 from Lua). The
 * engine has checked every index value against indexed's size. */
typedef struct ms_k_index_geom {
  int ndim, dim;
  int64_t base;
  int64_t shape[MS_K_MAX_DIMS];
  int64_t istride[MS_K_MAX_DIMS], dstride[MS_K_MAX_DIMS], astride[MS_K_MAX_DIMS];
} ms_k_index_geom;
/* index_move's modes */
enum { MS_K_GATHER, MS_K_SCATTER, MS_K_SCATTER_ADD };

/* Selection and scans along one dim. */
#define MS_K_SELECT_KERNELS(X)                                                                     \
  /* GATHER: direct = indexed; SCATTER: indexed = direct; SCATTER_ADD: indexed += direct. GATHER  \
   * and SCATTER move elements of dt's size whatever dt is; SCATTER_ADD adds in dt (F32, F64,    \
   * I64). The elements that differ only along dim (a line) are done in order, one line by one   \
   * thread, so a position repeated within a line keeps its last write, and no two lines write   \
   * the same element: results never depend on the scheduling. */                               \
  X(index_move, (const ms_k_exec *x, const ms_k_index_geom *g, int mode, ms_k_dtype dt,             \
                 const int64_t *index, void *direct, void *indexed))                               \
  /* Sorts every row of g (see ms_k_rows) of dt (F32, F64, I64) stably, ascending or descending,  \
   * NaN above every number (last ascending, first descending, as PyTorch), and keeps the first k \
   * (k <= n; topk's): values (dt) and indices (0-based positions in the row) are contiguous, k    \
   * per row. A device may refuse rows it cannot sort (CUDA: longer than MS_K_CUDA_SORT_MAX)      \
   * with its own error. */                                                                       \
  X(sort_rows, (const ms_k_exec *x, const ms_k_rows *g, ms_k_dtype dt, const void *src,            \
                int descending, int64_t k, void *values, int64_t *indices))                        \
  /* Inclusive running sum (prod 0) or product (prod 1) of every row of dt (F32, F64, I64), from  \
   * its first element (reverse 0) or from its last (reverse 1), into out (dt, contiguous rows).  \
   * Floating values accumulate in double; int64 wraps. */                                        \
  X(scan_rows, (const ms_k_exec *x, const ms_k_rows *g, int prod, int reverse, ms_k_dtype dt,       \
                const void *src, void *out))

/* The longest row CUDA's sort_rows takes: it ranks every element against its row (n^2 work). */
#define MS_K_CUDA_SORT_MAX 16384

#define MS_K_KERNELS(X)                                                                            \
  MS_K_ELEMENTWISE_KERNELS(X) MS_K_REDUCE_KERNELS(X) MS_K_NN_KERNELS(X) MS_K_RANDOM_KERNELS(X)     \
  MS_K_OPTIM_KERNELS(X) MS_K_LINALG_KERNELS(X) MS_K_SELECT_KERNELS(X)

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
