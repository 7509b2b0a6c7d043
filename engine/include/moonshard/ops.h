/* ops.h: math on tensors. Binary ops broadcast as NumPy/PyTorch do and promote dtypes with
 * ms_dtype_promote. Each returns a new reference (NULL with an error); the in-place forms
 * (`_` suffix) write into their first argument, which must be able to hold the result dtype
 * and shape, and return a status. */
#ifndef MOONSHARD_OPS_H
#define MOONSHARD_OPS_H

#include "moonshard/export.h"
#include "moonshard/tensor.h"

/* The op lists: X(ID, "name") per op. Each list defines its enum (MS_OP_<ID>) and the
 * engine generates the op's name and kernel rows from the same list, so an op added here without
 * its kernel or name fails the build instead of reading a zero-filled table row. */
#define MS_BINARY_OP_LIST(X)                                                                   \
  X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(DIV, "div") X(POW, "pow")                          \
  X(MAXIMUM, "maximum") X(MINIMUM, "minimum")                                                    \
  /* comparisons and logical ops give bool; they stay last (the kernels test op >= EQ) */        \
  X(EQ, "eq") X(NE, "ne") X(LT, "lt") X(LE, "le") X(GT, "gt") X(GE, "ge")                        \
  X(LOGICAL_AND, "logical_and") X(LOGICAL_OR, "logical_or")

#define MS_UNARY_OP_LIST(X)                                                                    \
  X(NEG, "neg") X(ABS, "abs") X(EXP, "exp") X(LOG, "log") X(SQRT, "sqrt") X(RSQRT, "rsqrt")      \
  X(TANH, "tanh") X(SIGMOID, "sigmoid") X(RELU, "relu") X(LOGICAL_NOT, "logical_not")            \
  X(SIGN, "sign") X(FLOOR, "floor") X(CEIL, "ceil") X(ROUND, "round") X(SIN, "sin")              \
  X(COS, "cos") X(LOG1P, "log1p") X(EXPM1, "expm1") X(RECIPROCAL, "reciprocal")                  \
  X(SQUARE, "square")

#define MS_X_OP_ENUM(id, name) MS_OP_##id,
#define MS_X_PLUS_ONE(id, name) +1
typedef enum ms_binary_op { MS_BINARY_OP_LIST(MS_X_OP_ENUM) } ms_binary_op;
typedef enum ms_unary_op { MS_UNARY_OP_LIST(MS_X_OP_ENUM) } ms_unary_op;
/* Counts outside the enums, so a switch over an op needs no case for a sentinel. */
enum {
  MS_BINARY_OP_COUNT = 0 MS_BINARY_OP_LIST(MS_X_PLUS_ONE),
  MS_UNARY_OP_COUNT = 0 MS_UNARY_OP_LIST(MS_X_PLUS_ONE)
};

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
#define MS_REDUCE_OP_LIST(X)                                                                   \
  X(SUM, "sum") X(MEAN, "mean") X(PROD, "prod") X(MAX, "max") X(MIN, "min")                      \
  X(ARGMAX, "argmax") X(ARGMIN, "argmin") X(VAR, "var") X(STD, "std") X(NORM, "norm")
#define MS_X_RED_ENUM(id, name) MS_RED_##id,
typedef enum ms_reduce_op { MS_REDUCE_OP_LIST(MS_X_RED_ENUM) } ms_reduce_op;
enum { MS_REDUCE_OP_COUNT = 0 MS_REDUCE_OP_LIST(MS_X_PLUS_ONE) };
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
