/* op_types.h: the op enums (one X-list per op family), the names of the ops and the operand
 * and option types that moonshard/ops.h's functions take. */
#ifndef MOONSHARD_OP_TYPES_H
#define MOONSHARD_OP_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "moonshard/export.h"
#include "moonshard/tensor_core.h"

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
#endif
