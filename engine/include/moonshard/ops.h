/* ops.h: math on tensors. Binary ops broadcast as NumPy/PyTorch do and promote dtypes with
 * ms_dtype_promote. Each returns a new reference (NULL with an error); the in-place forms
 * (`_` suffix) write into their first argument, which must be able to hold the result dtype
 * and shape, and return a status. */
#ifndef MOONSHARD_OPS_H
#define MOONSHARD_OPS_H

#include "moonshard/export.h"
#include "moonshard/tensor.h"

typedef enum ms_binary_op {
  MS_OP_ADD, MS_OP_SUB, MS_OP_MUL, MS_OP_DIV, MS_OP_POW, MS_OP_MAXIMUM, MS_OP_MINIMUM,
  MS_OP_EQ, MS_OP_NE, MS_OP_LT, MS_OP_LE, MS_OP_GT, MS_OP_GE, /* comparisons give bool */
  MS_OP_LOGICAL_AND, MS_OP_LOGICAL_OR,
  MS_BINARY_OP_COUNT
} ms_binary_op;

typedef enum ms_unary_op {
  MS_OP_NEG, MS_OP_ABS, MS_OP_EXP, MS_OP_LOG, MS_OP_SQRT, MS_OP_RSQRT, MS_OP_TANH,
  MS_OP_SIGMOID, MS_OP_RELU, MS_OP_LOGICAL_NOT, MS_OP_SIGN, MS_OP_FLOOR, MS_OP_CEIL,
  MS_OP_ROUND, MS_OP_SIN, MS_OP_COS, MS_OP_LOG1P, MS_OP_EXPM1, MS_OP_RECIPROCAL, MS_OP_SQUARE,
  MS_UNARY_OP_COUNT
} ms_unary_op;

MS_API const char *ms_binary_op_name(ms_binary_op op);
MS_API const char *ms_unary_op_name(ms_unary_op op);

/* A binary operand: a tensor or a plain number (Lua integer, float or boolean). */
typedef struct ms_operand {
  ms_tensor *tensor;  /* borrowed; NULL for a number */
  double value;       /* the number when tensor is NULL */
  ms_dtype scalar_dtype; /* MS_INT64 for an integer, MS_FLOAT64 for a float, MS_BOOL */
} ms_operand;
static inline ms_operand ms_operand_tensor(ms_tensor *t) { ms_operand o = {t, 0, MS_FLOAT32}; return o; }
static inline ms_operand ms_operand_number(double v, ms_dtype kind) { ms_operand o = {0, v, kind}; return o; }

MS_API ms_tensor *ms_binary(ms_binary_op op, ms_operand a, ms_operand b);
MS_API ms_status ms_binary_(ms_binary_op op, ms_tensor *a, ms_operand b); /* a = a op b */
MS_API ms_tensor *ms_unary(ms_unary_op op, ms_tensor *a);
MS_API ms_status ms_unary_(ms_unary_op op, ms_tensor *a);
MS_API ms_tensor *ms_clamp(ms_tensor *a, const double *min, const double *max); /* either may be NULL */
MS_API ms_status ms_clamp_(ms_tensor *a, const double *min, const double *max);
/* cond ? a : b, broadcasting all three; cond must be bool. */
MS_API ms_tensor *ms_where(ms_tensor *cond, ms_operand a, ms_operand b);
MS_API ms_tensor *ms_masked_fill(ms_tensor *a, ms_tensor *mask, double value);
MS_API ms_status ms_masked_fill_(ms_tensor *a, ms_tensor *mask, double value);

/* ---- reductions ---------------------------------------------------------------------------- */
typedef enum ms_reduce_op {
  MS_RED_SUM, MS_RED_MEAN, MS_RED_PROD, MS_RED_MAX, MS_RED_MIN, MS_RED_ARGMAX, MS_RED_ARGMIN,
  MS_RED_VAR, MS_RED_STD, MS_RED_NORM,
  MS_REDUCE_OP_COUNT
} ms_reduce_op;
typedef struct ms_reduce_opts {
  bool all;       /* reduce over every element (dim ignored); result is 0-dim */
  int dim;        /* 0-based, may be negative */
  bool keepdim;
  int64_t correction; /* var/std: 1 is unbiased (PyTorch's default) */
  double p;       /* norm: the order (2 by default; INFINITY for max-abs) */
} ms_reduce_opts;
MS_API ms_tensor *ms_reduce(ms_reduce_op op, ms_tensor *a, ms_reduce_opts opts);
/* max/min over a dim return values and 0-based indices (int64) together. */
MS_API ms_status ms_reduce_with_indices(ms_reduce_op op, ms_tensor *a, int dim, bool keepdim,
                                        ms_tensor **values, ms_tensor **indices);

/* ---- comparison of whole tensors ------------------------------------------------------------ */
MS_API bool ms_equal(ms_tensor *a, ms_tensor *b); /* same shape and values */
MS_API ms_status ms_allclose(ms_tensor *a, ms_tensor *b, double rtol, double atol, bool *out);

/* ---- matrix products (float32 and float64 through the packed GEMM) --------------------------- */
MS_API ms_tensor *ms_mm(ms_tensor *a, ms_tensor *b);        /* (n,k) x (k,m) */
MS_API ms_tensor *ms_bmm(ms_tensor *a, ms_tensor *b);       /* (b,n,k) x (b,k,m) */
MS_API ms_tensor *ms_matmul(ms_tensor *a, ms_tensor *b);    /* PyTorch's matmul: 1-D, 2-D, batched */
/* beta * c + alpha * (a @ b) */
MS_API ms_tensor *ms_addmm(ms_tensor *c, ms_tensor *a, ms_tensor *b, double beta, double alpha);

#endif
