/* dtype.h: element types, their sizes and names, and PyTorch's type-promotion rules. */
#ifndef MOONSHARD_DTYPE_H
#define MOONSHARD_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include "moonshard/export.h"

/* X(ID, "name", size in bytes) per dtype, in the order of the enum (MS_<ID>; float32 first, the
 * default). dtype.c builds its name and size rows from this list. */
#define MS_DTYPE_LIST(X)                                                                       \
  X(FLOAT32, "float32", 4) X(FLOAT64, "float64", 8) X(BFLOAT16, "bfloat16", 2)                  \
  X(FLOAT16, "float16", 2) X(INT64, "int64", 8) X(INT32, "int32", 4) X(UINT8, "uint8", 1)        \
  X(BOOL, "bool", 1)
#define MS_X_DTYPE_ENUM(id, name, size) MS_##id,
typedef enum ms_dtype { MS_DTYPE_LIST(MS_X_DTYPE_ENUM) MS_DTYPE_COUNT } ms_dtype;

/* Bytes per element of dt. */
MS_API size_t ms_dtype_size(ms_dtype dt);
MS_API const char *ms_dtype_name(ms_dtype dt); /* "float32", ... */
/* Parses "float32" and PyTorch's aliases ("float", "double", "half", "long", "int"...).
 * Returns false for an unknown name. */
MS_API bool ms_dtype_from_name(const char *name, ms_dtype *out);
MS_API bool ms_dtype_is_floating(ms_dtype dt);
MS_API bool ms_dtype_is_integral(ms_dtype dt); /* bool counts as integral here */
/* Whether dt is one of the 16-bit floats (bfloat16, float16). */
static inline bool ms_dtype_is_half(ms_dtype dt) { return dt == MS_BFLOAT16 || dt == MS_FLOAT16; }

/* How much an operand counts in promotion, as in PyTorch: a tensor with dimensions beats a
 * zero-dimensional tensor, which beats a plain number, within the same category
 * (bool < integer < floating). */
typedef enum ms_operand_kind { MS_OPERAND_TENSOR, MS_OPERAND_ZERO_DIM, MS_OPERAND_SCALAR } ms_operand_kind;
/* The result dtype of a binary op between (a, ka) and (b, kb). A Lua integer is passed as
 * (MS_INT64, SCALAR), a Lua float as (MS_FLOAT64, SCALAR) and a boolean as (MS_BOOL, SCALAR). */
MS_API ms_dtype ms_dtype_promote(ms_dtype a, ms_operand_kind ka, ms_dtype b, ms_operand_kind kb);
/* The dtype float-only ops (exp, division, mean) compute in: floating stays, others -> float32. */
MS_API ms_dtype ms_dtype_to_floating(ms_dtype dt);

#endif
