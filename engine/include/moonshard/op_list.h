/* op_list.h: the op tables, one row per op, as X-macros. The engine's enums and tables, the
 * kernels' op enums (kernels/kernels.h), the Lua bindings and the tests are all generated from
 * these rows, so an op is added by adding its row here and its cases to the switches that the
 * compiler then reports as incomplete (docs/adding-an-op.md). Macros only: this header includes
 * nothing and declares nothing, which is why kernels/ may include it. */
#ifndef MOONSHARD_OP_LIST_H
#define MOONSHARD_OP_LIST_H

/* Binary ops: X(ID, "name", "grad_fn name" of two tensors: PyTorch's; forms with a number may be
 * named apart, as PyTorch does: grad_elementwise.c). Comparisons and logical ops give bool and
 * record no node (NULL); they stay last (the kernels test op >= EQ). */
#define MS_BINARY_OP_LIST(X)                                                                   \
  X(ADD, "add", "AddBackward0") X(SUB, "sub", "SubBackward0") X(MUL, "mul", "MulBackward0")      \
  X(DIV, "div", "DivBackward0") X(POW, "pow", "PowBackward1")                                    \
  X(MAXIMUM, "maximum", "MaximumBackward0") X(MINIMUM, "minimum", "MinimumBackward0")            \
  X(EQ, "eq", NULL) X(NE, "ne", NULL) X(LT, "lt", NULL) X(LE, "le", NULL) X(GT, "gt", NULL)      \
  X(GE, "ge", NULL) X(LOGICAL_AND, "logical_and", NULL) X(LOGICAL_OR, "logical_or", NULL)

/* Unary ops: X(ID, "name", "grad_fn name", DTYPES, SAVES, DOMAIN).
 *   DTYPES  INTEGER: integer inputs keep their dtype, bool is refused; INTEGER_OR_BOOL: the
 *           same, and bool counts in int64 (sign keeps bool); FLOATING: integer and bool inputs
 *           give float32; FLOATING_ONLY: integer and bool inputs are refused (PyTorch's
 *           activations: softplus); LOGICAL: the result is bool.
 *   SAVES   what the derivative reads: INPUT, RESULT or NOTHING.
 *   DOMAIN  where the op is smooth, for gradient checks: REAL, POSITIVE (x > 0), ABOVE_MINUS_ONE,
 *           STEP (piecewise constant: the derivative is 0 away from the jumps). */
#define MS_UNARY_OP_LIST(X)                                                                    \
  X(NEG, "neg", "NegBackward0", INTEGER, NOTHING, REAL)                                          \
  X(ABS, "abs", "AbsBackward0", INTEGER, INPUT, REAL)                                            \
  X(EXP, "exp", "ExpBackward0", FLOATING, RESULT, REAL)                                          \
  X(LOG, "log", "LogBackward0", FLOATING, INPUT, POSITIVE)                                       \
  X(SQRT, "sqrt", "SqrtBackward0", FLOATING, RESULT, POSITIVE)                                   \
  X(RSQRT, "rsqrt", "RsqrtBackward0", FLOATING, RESULT, POSITIVE)                                \
  X(TANH, "tanh", "TanhBackward0", FLOATING, RESULT, REAL)                                       \
  X(SIGMOID, "sigmoid", "SigmoidBackward0", FLOATING, RESULT, REAL)                              \
  X(RELU, "relu", "ReluBackward0", INTEGER, RESULT, REAL)                                        \
  X(LOGICAL_NOT, "logical_not", "LogicalNotBackward0", LOGICAL, NOTHING, REAL)                   \
  X(SIGN, "sign", "SignBackward0", INTEGER_OR_BOOL, NOTHING, STEP)                                  \
  X(FLOOR, "floor", "FloorBackward0", INTEGER, NOTHING, STEP)                                    \
  X(CEIL, "ceil", "CeilBackward0", INTEGER, NOTHING, STEP)                                       \
  X(ROUND, "round", "RoundBackward0", INTEGER, NOTHING, STEP)                                    \
  X(SIN, "sin", "SinBackward0", FLOATING, INPUT, REAL)                                           \
  X(COS, "cos", "CosBackward0", FLOATING, INPUT, REAL)                                           \
  X(LOG1P, "log1p", "Log1PBackward0", FLOATING, INPUT, ABOVE_MINUS_ONE)                          \
  X(EXPM1, "expm1", "Expm1Backward0", FLOATING, RESULT, REAL)                                    \
  X(RECIPROCAL, "reciprocal", "ReciprocalBackward0", FLOATING, RESULT, POSITIVE)                 \
  X(SQUARE, "square", "PowBackward0", INTEGER_OR_BOOL, INPUT, REAL)                            \
  X(SOFTPLUS, "softplus", "SoftplusBackward0", FLOATING_ONLY, INPUT, REAL)

/* Activations (nn ops that save their input and differentiate in one kernel; relu, tanh and
 * sigmoid are unary ops): X(ID, "name", "grad_fn name", "nn module"). GELU_TANH is GELU with
 * approximate = "tanh": the same function, node and module. */
#define MS_ACTIVATION_LIST(X)                                                                  \
  X(GELU, "gelu", "GeluBackward0", "GELU") X(GELU_TANH, "gelu", "GeluBackward0", "GELU")         \
  X(SILU, "silu", "SiluBackward0", "SiLU") X(HARDSWISH, "hardswish", "HardswishBackward0", "Hardswish")

/* Reductions: X(ID, "name"). */
#define MS_REDUCE_OP_LIST(X)                                                                   \
  X(SUM, "sum") X(MEAN, "mean") X(PROD, "prod") X(MAX, "max") X(MIN, "min")                      \
  X(ARGMAX, "argmax") X(ARGMIN, "argmin") X(VAR, "var") X(STD, "std") X(NORM, "norm")        \
  X(ANY, "any") X(ALL, "all")

/* Triangle ops on the last two dims: X(ID, "name", "grad_fn name"). tril keeps the elements with
 * col - row <= diagonal, triu those with col - row >= diagonal; the rest become 0. */
#define MS_TRIANGLE_OP_LIST(X) X(TRIL, "tril", "TrilBackward0") X(TRIU, "triu", "TriuBackward0")

#endif
