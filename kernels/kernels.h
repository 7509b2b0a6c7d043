/* kernels.h: the raw compute interface of moonshard. Kernels see pointers, element counts and
 * element strides only, never an ms_tensor; the engine chooses the kernel and checks every rule
 * (shapes, dtypes, broadcasting) before it calls one. Every function here has a CPU body in
 * kernels/cpu/; CUDA bodies with the same signatures arrive with the CUDA backend. */
#ifndef MS_KERNELS_H
#define MS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moonshard/op_list.h"

/* ---- thread pool (kernels/cpu/threadpool.c) ------------------------------------------------ */
/* One pool per process, shared by every kernel. fn(ctx, begin, end) is called on disjoint
 * ranges covering [0, n); ranges are at least `grain` long, so small loops stay on the caller. */
typedef void (*ms_k_range_fn)(void *ctx, int64_t begin, int64_t end);
void ms_k_parallel_for(int64_t n, int64_t grain, ms_k_range_fn fn, void *ctx);
/* Runs fn(ctx, t, nthreads) once on each of nthreads threads (t = 0 is the caller). */
typedef void (*ms_k_team_fn)(void *ctx, int t, int nthreads);
void ms_k_parallel_team(int nthreads, ms_k_team_fn fn, void *ctx);
void ms_k_set_num_threads(int n); /* n >= 1; takes effect for the next parallel region */
int ms_k_get_num_threads(void);
/* The pool's default size: MS_NUM_THREADS if set, else the online cores divided among the ranks
 * an MPI launcher put on this node (at least 1). */
int ms_k_default_num_threads(void);

/* ---- GEMM (kernels/cpu/gemm*.c) --------------------------------------------------------- */
/* C = alpha * A * B + beta * C. A is M x K, B is K x N, C is M x N, each given by a pointer and
 * two element strides (rs: from one row to the next, cs: from one column to the next), so a
 * transposed or otherwise strided view is passed by swapping or choosing strides, never copied
 * by the caller. beta == 0 means C is not read (it may hold NaNs). Multi-threaded over the pool. */
void ms_k_sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t rsA,
                int64_t csA, const float *B, int64_t rsB, int64_t csB, float beta, float *C,
                int64_t rsC, int64_t csC);
void ms_k_dgemm(int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t rsA,
                int64_t csA, const double *B, int64_t rsB, int64_t csB, double beta, double *C,
                int64_t rsC, int64_t csC);
/* Which micro-kernel the CPU was found to support: "avx512", "avx2" or "generic". */
const char *ms_k_gemm_isa(void);
/* The same with A and B bfloat16 (raw bit patterns) and C float32: the products are exact in
 * float32 and accumulate there. Fast, on AVX-512 BF16's dot products, where
 * ms_k_gemm_bf16_available(); elsewhere a portable loop gives the same results, slowly. As
 * vdpbf16ps does, the fast path flushes denormal inputs and sums to zero. */
void ms_k_gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A, int64_t rsA,
                    int64_t csA, const uint16_t *B, int64_t rsB, int64_t csB, float beta,
                    float *C, int64_t rsC, int64_t csC);
/* The same with C bfloat16 too: the float32 sums of each tile are rounded once into C as the
 * last K block stores them (ms_k_f32_to_bf16's rounding), bits equal to ms_k_gemm_bf16 into a
 * float32 C then rounded, or ms_k_gemm_bias with a bias (NULL: none; N bfloat16, beta ignored
 * as 0). The sums live in a float32 work buffer of M x N; false when it cannot be had. */
bool ms_k_gemm_bf16_rounded(int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A, int64_t rsA,
                            int64_t csA, const uint16_t *B, int64_t rsB, int64_t csB, float beta, uint16_t *C,
                            int64_t rsC, int64_t csC, const uint16_t *bias);
/* Whether the CPU has AVX-512 BF16 (and the OS enables the zmm state), and MS_GEMM_ISA does not
 * force a path below AVX-512. */
bool ms_k_gemm_bf16_available(void);

/* ---- element types as the kernels know them: the same order as the engine's ms_dtype ------ */
/* Enums here come from X(ID) lists (enumerators MS_K_<ID>), their counts kept outside the enum
 * so a switch over one needs no case for a sentinel. */
#define MS_K_X_ENUM(id) MS_K_##id,
#define MS_K_X_PLUS_ONE(id) +1
#define MS_K_DTYPE_LIST(X) X(F32) X(F64) X(BF16) X(F16) X(I64) X(I32) X(U8) X(BOOL)
typedef enum ms_k_dtype { MS_K_DTYPE_LIST(MS_K_X_ENUM) } ms_k_dtype;
enum { MS_K_DTYPE_COUNT = 0 MS_K_DTYPE_LIST(MS_K_X_PLUS_ONE) }; /* engine/src/dtype.c pins the order */
/* C = alpha A B + bias through the GEMMs above (dt F32 or F64 with C of dt, BF16 with a float32
 * C): bias holds N contiguous elements of dt, one per column of C, added in the store of the
 * first K block: each tile of C is set to the bias just before the micro-kernel adds the product
 * with beta 1, the bits of a C filled with the bias before a beta-1 GEMM, without that pass. */
void ms_k_gemm_bias(ms_k_dtype dt, int64_t M, int64_t N, int64_t K, double alpha, const void *A,
                    int64_t rsA, int64_t csA, const void *B, int64_t rsB, int64_t csB, void *C,
                    int64_t rsC, int64_t csC, const void *bias);

/* ---- conversions (kernels/cpu/cast.c) ------------------------------------------------------ */
float ms_k_bf16_to_f32(uint16_t h);
uint16_t ms_k_f32_to_bf16(float f); /* round to nearest even; NaN stays NaN */
/* An m x n block of float32 (row stride ss, columns contiguous) rounded to bfloat16 at dst (row
 * stride ds, column stride dcs) as ms_k_f32_to_bf16 does, on the widest vectors the CPU has: the
 * bfloat16-C GEMM rounds each tile of C with it while the tile is in L1. */
void ms_k_f32_to_bf16_block(int64_t m, int64_t n, uint16_t *dst, int64_t ds, int64_t dcs, const float *src,
                            int64_t ss);
float ms_k_f16_to_f32(uint16_t h);
uint16_t ms_k_f32_to_f16(float f);
/* dst[i*ds] = (dst dtype) src[i*ss] for i < n. Floating to integer truncates toward zero (NaN
 * and out-of-range values give the integer type's minimum, never undefined behaviour). */
void ms_k_cast(int64_t n, void *dst, ms_k_dtype dt, int64_t ds, const void *src, ms_k_dtype st,
               int64_t ss);
/* Bytes per element of dt. */
size_t ms_k_dtype_size(ms_k_dtype dt);
/* dst[i*ds] = value converted to dt. */
void ms_k_fill(int64_t n, void *dst, ms_k_dtype dt, int64_t ds, double value);

/* ---- elementwise (kernels/cpu/elementwise.c) ------------------------------------------------
 * Compute dtypes are F32, F64 and I64; the engine converts other dtypes first. Comparisons and
 * logical ops write bool (one byte, 0 or 1); everything else writes the compute dtype. */
/* The kernel ops are the engine's, from the one op table (moonshard/op_list.h: macros only);
 * the enumerators are MS_K_<ID>. Each switch over a kernel op has no default, so an op added to
 * the table fails the build until every kernel has its case. CUDA device switches pin the counts
 * with static_assert, as the host compiler's -Wswitch cannot see them. */
#define MS_K_X_OP_ENUM(id, ...) MS_K_##id,
#define MS_K_X_OP_PLUS_ONE(id, ...) +1
typedef enum ms_k_binop { MS_BINARY_OP_LIST(MS_K_X_OP_ENUM) } ms_k_binop; /* bool results from EQ on */
typedef enum ms_k_unop { MS_UNARY_OP_LIST(MS_K_X_OP_ENUM) } ms_k_unop;
enum {
  MS_K_BINOP_COUNT = 0 MS_BINARY_OP_LIST(MS_K_X_OP_PLUS_ONE),
  MS_K_UNOP_COUNT = 0 MS_UNARY_OP_LIST(MS_K_X_OP_PLUS_ONE)
};
/* dt F32, F64, I64, or BF16 / F16 (computed in float32 a block at a time, rounded once). */
void ms_k_binary(ms_k_binop op, ms_k_dtype dt, int64_t n, void *out, int64_t so, const void *a,
                 int64_t sa, const void *b, int64_t sb);
/* I64 supports NEG, ABS, RELU, LOGICAL_NOT, SIGN, FLOOR, CEIL, ROUND, SQUARE; the engine sends the
 * rest to a floating dtype. BF16 and F16: every op but LOGICAL_NOT, in float32 a block at a time,
 * rounded once (BF16 RELU on the bits, the same values). */
void ms_k_unary(ms_k_unop op, ms_k_dtype dt, int64_t n, void *out, int64_t so, const void *a,
                int64_t sa);
/* relu's gradient from its result y (contiguous, any floating dtype): gx = y > 0 ? g : 0. */
void ms_k_relu_backward(ms_k_dtype dt, int64_t n, const void *y, const void *g, void *gx);
/* out = min(max(a, lo), hi) with either bound optional; NaN stays NaN. BF16 and F16 as unary's. */
void ms_k_clamp(ms_k_dtype dt, int64_t n, void *out, int64_t so, const void *a, int64_t sa,
                const double *lo, const double *hi);
/* out = cond ? a : b, cond is bool. BF16 and F16 as unary's (a and b both of dt here; the table's
 * where also takes a float32 a or b beside them, as binary does). */
void ms_k_where(ms_k_dtype dt, int64_t n, void *out, int64_t so, const uint8_t *cond, int64_t sc,
                const void *a, int64_t sa, const void *b, int64_t sb);

/* ---- reductions of one strided row (kernels/cpu/reduce.c) ------------------------------------ */
typedef enum ms_k_redop {
  MS_K_RSUM, MS_K_RPROD, MS_K_RMAX, MS_K_RMIN, MS_K_RARGMAX, MS_K_RARGMIN,
  MS_K_RMOMENTS, /* mean and the sum of squared deviations (Welford) */
  MS_K_RPOWSUM,  /* sum |x|^p; p = INFINITY gives max |x| */
} ms_k_redop;
typedef struct ms_k_reduce_result {
  double f;      /* floating results; RMOMENTS: the mean */
  double m2;     /* RMOMENTS: sum of squared deviations */
  int64_t i;     /* I64 sums, products, max and min */
  int64_t index; /* ARGMAX / ARGMIN: 0-based position of the first extreme (a NaN wins) */
} ms_k_reduce_result;
/* Reduces src[i*stride] for i < n (n >= 1 for max/min/arg*). dt is F32, F64 or I64. Floating
 * sums accumulate in double. Max and min propagate NaN. */
void ms_k_reduce_row(ms_k_redop op, ms_k_dtype dt, int64_t n, const void *src, int64_t stride,
                     double p, ms_k_reduce_result *out);

/* ---- random numbers (kernels/cpu/philox.c) ---- */
/* Philox 4x32-10 (Salmon et al., SC'11; Random123's constants): the 128-bit block `out` for the
 * counter `ctr` under `key`. */
void ms_k_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* The fills below are pure functions of (seed, offset, element index i), whatever the threads:
 * element i reads block number B = offset + i / L, i.e. counter {low word of B, high word of B,
 * 0, 0} under key {low word of seed, high word of seed}, and takes lane i % L of it. L = 4 for
 * 32-bit draws (uniform_f32, normal_f32, bernoulli: lane k is word k) and L = 2 for 64-bit draws
 * (uniform_f64, normal_f64, randint_i64, u64: lane k is word 2k | word 2k+1 << 32). Normals are
 * Box-Muller pairs of neighbouring lanes (words 0,1 -> elements 0,1 and words 2,3 -> 2,3 for f32;
 * the two 64-bit lanes -> elements 0,1 for f64). A call consumes ms_k_philox_blocks(n, L)
 * blocks; the caller advances its offset by that much so the next call gets fresh numbers. */
static inline int64_t ms_k_philox_blocks(int64_t n, int lanes) {
  return n <= 0 ? 0 : (n + lanes - 1) / lanes;
}
/* Uniform in [low, high) from the top 24 (f32) or 53 (f64) bits; low >= high gives low. */
void ms_k_philox_uniform_f32(uint64_t seed, uint64_t offset, int64_t n, float *out, float low,
                             float high);
void ms_k_philox_uniform_f64(uint64_t seed, uint64_t offset, int64_t n, double *out, double low,
                             double high);
/* mean + std * N(0, 1). */
void ms_k_philox_normal_f32(uint64_t seed, uint64_t offset, int64_t n, float *out, double mean,
                            double std);
void ms_k_philox_normal_f64(uint64_t seed, uint64_t offset, int64_t n, double *out, double mean,
                            double std);
/* Integers in [low, high) (low < high, any int64 span) by multiply-shift of 64 random bits. */
void ms_k_philox_randint_i64(uint64_t seed, uint64_t offset, int64_t n, int64_t *out, int64_t low,
                             int64_t high);
/* The raw 64-bit draws (sort keys for randperm). */
void ms_k_philox_u64(uint64_t seed, uint64_t offset, int64_t n, uint64_t *out);
/* out[i] = 1 with probability p[i * ps] (ps = 0: one scalar p for all), else 0. */
void ms_k_philox_bernoulli(uint64_t seed, uint64_t offset, int64_t n, const double *p, int64_t ps,
                           uint8_t *out);

/* ---- convolution and pooling (kernels/cpu/conv.c, pool.c) ---- */
/* Every tensor here is contiguous (N, C, H, W); dt is MS_K_F32 or MS_K_F64, or MS_K_BF16 with
 * groups = 1 (FSDP's mixed precision: float32 sums, each result rounded to bf16 once; gated by
 * ms_k_conv2d_bf16_direct()). The engine has checked the geometry (output sizes >= 1, channels
 * divisible by groups) before the call. */
typedef struct ms_k_conv2d_geom {
  int64_t n, c, h, w;       /* input (N, C, H, W) */
  int64_t o, kh, kw;        /* weight (O, C / groups, KH, KW) */
  int64_t oh, ow;           /* output (N, O, OH, OW) */
  int64_t sh, sw, ph, pw, dh, dw, groups;
} ms_k_conv2d_geom;
/* out = conv2d(x, w) + b (b may be NULL). im2col per sample into one GEMM per group; samples
 * run in parallel (each GEMM then runs on its thread) when there are enough of them. Returns
 * 0, or -1 when a work buffer could not be allocated. */
int ms_k_conv2d_forward(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *x, const void *w,
                        const void *b, void *out);
/* The gradients from gout (N, O, OH, OW): gx (like x), gw (like w), gb (O); each may be NULL
 * when not wanted and is overwritten otherwise. x is read only for gw. Returns 0 or -1. */
int ms_k_conv2d_backward(ms_k_dtype dt, const ms_k_conv2d_geom *g, const void *x, const void *w,
                         const void *gout, void *gx, void *gw, void *gb);
/* Whether bfloat16 conv2d runs natively (ms_k_gemm_bf16_available(), and MS_CONV_BF16 is not
 * "off"); else the engine widens to float32 around the float kernels. MS_CONV_BF16 = "gemm" or
 * "widen" forces every pass one way (benchmarks); unset, each pass goes the faster way. */
bool ms_k_conv2d_bf16_direct(void);

/* Pooling over `planes` independent (H, W) planes (N * C) into (OH, OW) ones. */
typedef struct ms_k_pool2d_geom {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw; /* max pooling's window; avg pooling uses windows */
} ms_k_pool2d_geom;
/* Max over each dilated window (padding never wins; NaN does) with the 0-based flat index
 * (ih * W + iw) of the winner in its plane, PyTorch's indices; indices may be NULL when only
 * the values are wanted (evaluation). dt: F32, F64 or BF16. 0, or -1 when a bfloat16 plane's
 * work buffer could not be allocated. */
int ms_k_max_pool2d_forward(ms_k_dtype dt, const ms_k_pool2d_geom *g, const void *x, void *out,
                            int64_t *indices);
/* gx (overwritten) = gout scattered back to the winners (bfloat16: summed in float32, rounded
 * once). 0, or -1 as the forward. */
int ms_k_max_pool2d_backward(ms_k_dtype dt, const ms_k_pool2d_geom *g, const void *gout,
                             const int64_t *indices, void *gx);
/* Averaging windows given per output row i: input rows [hs[i], he[i]), and per output column j:
 * columns [ws[j], we[j]); output (i, j) is the window's sum over hdiv[i] * wdiv[j]. This one
 * form serves avg_pool2d (either count_include_pad) and adaptive_avg_pool2d. */
typedef struct ms_k_pool_windows {
  const int64_t *hs, *he, *hdiv, *ws, *we, *wdiv;
} ms_k_pool_windows;
void ms_k_avg_pool2d_forward(ms_k_dtype dt, const ms_k_pool2d_geom *g, const ms_k_pool_windows *win,
                             const void *x, void *out);
/* gx (overwritten) = each gout spread evenly over its window. */
void ms_k_avg_pool2d_backward(ms_k_dtype dt, const ms_k_pool2d_geom *g,
                              const ms_k_pool_windows *win, const void *gout, void *gx);

/* ---- activations, softmax, losses, normalization (kernels/cpu/nn_ops.c) ---- */
/* F32 and F64, contiguous buffers; the engine converts and checks everything first (class
 * and embedding indices included: these kernels trust them). Sums accumulate in double.
 * Softmax, the activations, embedding and layer norm take BF16 and F16 too (nn_ops_half.h): x, y, g and
 * gx in that dtype, computed in float32 and rounded once; layer norm's w, b, mean, rstd, gw and
 * gb, and embedding's gw, are then float32 (PyTorch's statistics dtype for 16-bit inputs). */
/* softmax (log = 0) or log_softmax (log = 1) over the middle dim of an (outer, C, inner) block. */
/* Both return 0, or MS_K_ERR_NO_MEMORY when a 16-bit path's work buffer could not be had. */
int ms_k_softmax(ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner, const void *x, void *y,
                 int log);
/* From the forward's output y: gx = g - exp(y) sum(g) (log), or y (g - sum(g y)). */
int ms_k_softmax_backward(ms_k_dtype dt, int64_t outer, int64_t C, int64_t inner, const void *y,
                          const void *g, void *gx, int log);
#define MS_K_X_ACT_ENUM(id, ...) MS_K_ACT_##id,
typedef enum ms_k_act { MS_ACTIVATION_LIST(MS_K_X_ACT_ENUM) } ms_k_act; /* moonshard/op_list.h */
enum { MS_K_ACT_COUNT = 0 MS_ACTIVATION_LIST(MS_K_X_OP_PLUS_ONE) };
void ms_k_activation(ms_k_act act, ms_k_dtype dt, int64_t n, const void *x, void *y);
void ms_k_activation_backward(ms_k_act act, ms_k_dtype dt, int64_t n, const void *x, const void *g,
                              void *gx);
/* y = mask ? x * scale : 0 (dropout; mask bytes are 0 or 1). dt: F32, F64, or BF16 (the product
 * in float32, rounded to bfloat16 once). */
void ms_k_masked_scale(ms_k_dtype dt, int64_t n, const void *x, const uint8_t *mask, double scale,
                       void *y);
/* Class targets of an (N, C, inner) input: target[n * inner + i] equal to ignore_index is
 * skipped; any other value minus `base` is the 0-based class (the Lua face passes base 1). */
typedef struct ms_k_nll_args {
  int64_t N, C, inner;
  const int64_t *target;
  int64_t base, ignore_index;
  const void *weight; /* C class weights, or NULL */
} ms_k_nll_args;
/* Per position: nll = -w_k logp_k, wt = w_k, smooth (if not NULL) = -sum_c w_c logp_c. */
void ms_k_nll_rows(ms_k_dtype dt, const ms_k_nll_args *a, const void *logp, void *nll, void *wt,
                   void *smooth);
/* Writes all of gx. logp NULL: gradient of the nll term alone w.r.t. log-probabilities, g[p * gs]
 * * nll_scale at the target. logp given: gradient w.r.t. the logits of cross entropy with label
 * smoothing `smoothing` (nll term scaled by nll_scale, smooth term by smooth_scale). */
void ms_k_nll_backward(ms_k_dtype dt, const ms_k_nll_args *a, const void *logp, const void *g,
                       int64_t gs, double nll_scale, double smooth_scale, double smoothing, void *gx);
/* out row r = w row (idx[r] - base), rows of D elements. */
void ms_k_embedding(ms_k_dtype dt, int64_t n, int64_t D, const int64_t *idx, int64_t base,
                    const void *w, void *out);
/* gw (zeroed by the caller) += g rows at idx - base, except row padding_idx (0-based; -1: none). */
void ms_k_embedding_backward(ms_k_dtype dt, int64_t n, int64_t D, const int64_t *idx, int64_t base,
                             int64_t padding_idx, const void *g, void *gw);
/* Rows of M x N: y = (x - mean) * rstd * w + b (w, b may be NULL); mean and rstd are written. */
/* Both return 0, or MS_K_ERR_NO_MEMORY when a 16-bit path's work buffer could not be had. */
int ms_k_layer_norm(ms_k_dtype dt, int64_t M, int64_t N, const void *x, const void *w,
                    const void *b, double eps, void *y, void *mean, void *rstd);
int ms_k_layer_norm_backward(ms_k_dtype dt, int64_t M, int64_t N, const void *x, const void *g,
                             const void *mean, const void *rstd, const void *w, void *gx, void *gw,
                             void *gb); /* any output may be NULL */
/* Channels of (N, C, inner): batch mean and biased variance. */
void ms_k_batch_norm_stats(ms_k_dtype dt, int64_t N, int64_t C, int64_t inner, const void *x,
                           void *mean, void *var);
void ms_k_batch_norm_apply(ms_k_dtype dt, int64_t N, int64_t C, int64_t inner, const void *x,
                           const void *mean, const void *invstd, const void *w, const void *b,
                           void *y);
/* training: the batch statistics depend on x; otherwise they are constants. */
void ms_k_batch_norm_backward(ms_k_dtype dt, int64_t N, int64_t C, int64_t inner, const void *x,
                              const void *g, const void *mean, const void *invstd, const void *w,
                              int training, void *gx, void *gw, void *gb);

/* ---- fused optimizer steps (kernels/cpu/optim.c) ---- */
/* One pass over n contiguous elements of a parameter, its gradient and its optimizer state, all
 * of dtype dt (F32 or F64), with PyTorch's formulas (torch.optim, single-tensor path) in its order
 * of operations. Float32 arrays are computed in double and rounded once per stored value. State
 * arrays an option does not use are NULL. The grad is only read. Parallel over the pool. */
typedef struct ms_k_sgd_hp {
  double lr, momentum, dampening, weight_decay;
  int nesterov, maximize;
  int init_buffer; /* the buffer is new: it takes the gradient as is (PyTorch's clone) */
} ms_k_sgd_hp;
/* momentum_buffer is NULL when momentum == 0. */
void ms_k_sgd_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *momentum_buffer,
                   const ms_k_sgd_hp *hp);
typedef struct ms_k_adam_hp {
  double lr, beta1, beta2, eps, weight_decay;
  double step; /* the step count after this step's increment (1 on the first) */
  int amsgrad, maximize;
  int decoupled; /* AdamW: decay the parameter itself instead of adding to the gradient */
} ms_k_adam_hp;
/* max_exp_avg_sq is NULL unless amsgrad. */
void ms_k_adam_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *exp_avg,
                    void *exp_avg_sq, void *max_exp_avg_sq, const ms_k_adam_hp *hp);
typedef struct ms_k_adadelta_hp {
  double lr, rho, eps, weight_decay;
  int maximize;
} ms_k_adadelta_hp;
void ms_k_adadelta_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *square_avg,
                        void *acc_delta, const ms_k_adadelta_hp *hp);
typedef struct ms_k_adagrad_hp {
  double lr, lr_decay, weight_decay, eps;
  double step; /* after this step's increment */
  int maximize;
} ms_k_adagrad_hp;
void ms_k_adagrad_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *state_sum,
                       const ms_k_adagrad_hp *hp);
typedef struct ms_k_rmsprop_hp {
  double lr, alpha, eps, weight_decay, momentum;
  int centered, maximize;
} ms_k_rmsprop_hp;
/* grad_avg is NULL unless centered; momentum_buffer is NULL unless momentum > 0. */
void ms_k_rmsprop_step(ms_k_dtype dt, int64_t n, void *param, const void *grad, void *square_avg,
                       void *grad_avg, void *momentum_buffer, const ms_k_rmsprop_hp *hp);

/* ---- data transforms (kernels/cpu/transforms.c) ---- */
/* out[i] = lut[in[i]] for i < n: a uint8 image through any per-value float32 map (ToTensor and
 * Normalize fused into one 256-entry table). */
void ms_k_u8_lut_f32(int64_t n, const uint8_t *in, const float *lut, float *out);
/* A chain of nsteps per-channel normalizations of float32 data laid out (outer, C, inner):
 * y = x, then y = (y - mean[s * C + c]) / std[s * C + c] for s = 0..nsteps-1, rounded to float32
 * after every operation exactly as separate passes would be. in and out may be the same. */
void ms_k_normalize_chain_f32(int64_t outer, int64_t C, int64_t inner, const float *in, float *out,
                              int nsteps, const float *mean, const float *std);

#endif
