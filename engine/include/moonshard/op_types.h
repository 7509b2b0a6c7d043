/* op_types.h: the op enums (one X-list per op family), the names of the ops and the operand
 * and option types that moonshard/ops.h's functions take. */
#ifndef MOONSHARD_OP_TYPES_H
#define MOONSHARD_OP_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "moonshard/export.h"
#include "moonshard/op_list.h"
#include "moonshard/tensor_core.h"

#define MS_X_OP_ENUM(id, ...) MS_OP_##id,
#define MS_X_PLUS_ONE(id, ...) +1
typedef enum ms_binary_op { MS_BINARY_OP_LIST(MS_X_OP_ENUM) } ms_binary_op;
typedef enum ms_unary_op { MS_UNARY_OP_LIST(MS_X_OP_ENUM) } ms_unary_op;
/* Counts outside the enums, so a switch over an op needs no case for a sentinel. */
enum {
  MS_BINARY_OP_COUNT = 0 MS_BINARY_OP_LIST(MS_X_PLUS_ONE),
  MS_UNARY_OP_COUNT = 0 MS_UNARY_OP_LIST(MS_X_PLUS_ONE)
};

/* The op's name as errors spell it ("add", ...). */
MS_API const char *ms_binary_op_name(ms_binary_op op);
/* The op's name as errors spell it ("exp", ...). */
MS_API const char *ms_unary_op_name(ms_unary_op op);

/* A binary op's row of op_list.h as data (what the Lua face and the tests iterate). */
typedef struct ms_binary_op_info {
  const char *name; /* "maximum" */
  const char *node; /* its grad_fn's name, "MaximumBackward0"; NULL: not differentiable (eq, ...) */
} ms_binary_op_info;
/* The row of op (a valid ms_binary_op). */
MS_API const ms_binary_op_info *ms_binary_op_get_info(ms_binary_op op);

/* A unary op's row of op_list.h as data (what the Lua face and the tests iterate). */
typedef enum ms_unary_dtypes {
  MS_UNARY_INTEGER, MS_UNARY_INTEGER_OR_BOOL, MS_UNARY_FLOATING, MS_UNARY_FLOATING_ONLY, MS_UNARY_LOGICAL
} ms_unary_dtypes;
typedef enum ms_unary_saves { MS_UNARY_SAVES_NOTHING, MS_UNARY_SAVES_INPUT, MS_UNARY_SAVES_RESULT } ms_unary_saves;
typedef enum ms_unary_domain {
  MS_DOMAIN_REAL, MS_DOMAIN_POSITIVE, MS_DOMAIN_ABOVE_MINUS_ONE, MS_DOMAIN_STEP
} ms_unary_domain;
typedef struct ms_unary_op_info {
  const char *name; /* "log1p" */
  const char *node; /* its grad_fn's name, "Log1PBackward0" */
  ms_unary_dtypes dtypes;
  ms_unary_saves saves;
  ms_unary_domain domain;
} ms_unary_op_info;
/* The row of op (a valid ms_unary_op). */
MS_API const ms_unary_op_info *ms_unary_op_get_info(ms_unary_op op);

/* A binary operand: a tensor or a plain number (Lua integer, float or boolean). */
typedef struct ms_operand {
  ms_tensor *tensor;  /* borrowed; NULL for a number */
  double value;       /* the number when tensor is NULL */
  ms_dtype scalar_dtype; /* MS_INT64 for an integer, MS_FLOAT64 for a float, MS_BOOL */
} ms_operand;
static inline ms_operand ms_operand_tensor(ms_tensor *t) { ms_operand o = {t, 0, MS_FLOAT32}; return o; }
static inline ms_operand ms_operand_number(double v, ms_dtype kind) { ms_operand o = {0, v, kind}; return o; }

/* ---- reductions ---------------------------------------------------------------------------- */
#define MS_X_RED_ENUM(id, ...) MS_RED_##id,
typedef enum ms_reduce_op { MS_REDUCE_OP_LIST(MS_X_RED_ENUM) } ms_reduce_op;
enum { MS_REDUCE_OP_COUNT = 0 MS_REDUCE_OP_LIST(MS_X_PLUS_ONE) };

/* ---- triangles (tril, triu) ---------------------------------------------------------------- */
#define MS_X_TRI_ENUM(id, ...) MS_TRI_##id,
typedef enum ms_triangle_op { MS_TRIANGLE_OP_LIST(MS_X_TRI_ENUM) } ms_triangle_op;
enum { MS_TRIANGLE_OP_COUNT = 0 MS_TRIANGLE_OP_LIST(MS_X_PLUS_ONE) };
typedef struct ms_triangle_op_info {
  const char *name; /* "tril" */
  const char *node; /* its grad_fn's name, "TrilBackward0" */
} ms_triangle_op_info;
/* The row of op (a valid ms_triangle_op). */
MS_API const ms_triangle_op_info *ms_triangle_op_get_info(ms_triangle_op op);
typedef struct ms_reduce_opts {
  bool all;       /* reduce over every element (dim ignored); result is 0-dim */
  int dim;        /* 0-based, may be negative */
  bool keepdim;
  int64_t correction; /* var/std: 1 is unbiased (PyTorch's default) */
  double p;       /* norm: the order (2 by default; INFINITY for max-abs) */
} ms_reduce_opts;

/* ---- selection and scans (moonshard/ops.h) ------------------------------------------------- */
typedef enum ms_scatter_mode { MS_SCATTER_COPY, MS_SCATTER_ADD } ms_scatter_mode;
typedef enum ms_scan_op { MS_SCAN_CUMSUM, MS_SCAN_CUMPROD } ms_scan_op;

#endif
