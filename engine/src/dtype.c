/* dtype.c: element sizes, names and PyTorch's type-promotion lattice. */
#include <string.h>

#include "kernels/kernels.h"
#include "moonshard/dtype.h"

#define INFO_ROW(id, name, size) [MS_##id] = {name, size},
static const struct {
  const char *name;
  size_t size;
} dtype_info[] = {MS_DTYPE_LIST(INFO_ROW)};
#undef INFO_ROW
_Static_assert(sizeof dtype_info / sizeof *dtype_info == MS_DTYPE_COUNT, "dtype rows");

/* The engine hands ms_dtype to the kernels as ms_k_dtype with a cast (about 70 places): the two
 * enums must agree value for value, and this breaks the build when they do not. */
#define SAME_DTYPE(e, k) _Static_assert((int)MS_##e == (int)MS_K_##k, "MS_" #e " != MS_K_" #k);
SAME_DTYPE(FLOAT32, F32) SAME_DTYPE(FLOAT64, F64) SAME_DTYPE(BFLOAT16, BF16)
SAME_DTYPE(FLOAT16, F16) SAME_DTYPE(INT64, I64) SAME_DTYPE(INT32, I32) SAME_DTYPE(UINT8, U8)
SAME_DTYPE(BOOL, BOOL)
#undef SAME_DTYPE
_Static_assert((int)MS_DTYPE_COUNT == (int)MS_K_DTYPE_COUNT, "every ms_dtype has its ms_k_dtype above");

static const struct {
  const char *alias;
  ms_dtype dtype;
} dtype_aliases[] = {
    {"float", MS_FLOAT32}, {"double", MS_FLOAT64}, {"half", MS_FLOAT16}, {"long", MS_INT64},
    {"int", MS_INT32},     {"byte", MS_UINT8},
};

size_t ms_dtype_size(ms_dtype dt) { return dtype_info[dt].size; }

const char *ms_dtype_name(ms_dtype dt) {
  return (dt >= 0 && dt < MS_DTYPE_COUNT) ? dtype_info[dt].name : "unknown";
}

bool ms_dtype_from_name(const char *name, ms_dtype *out) {
  if (strncmp(name, "torch.", 6) == 0) name += 6; /* accept PyTorch's spelling too */
  for (int i = 0; i < MS_DTYPE_COUNT; i++)
    if (strcmp(name, dtype_info[i].name) == 0) return *out = (ms_dtype)i, true;
  for (size_t i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++)
    if (strcmp(name, dtype_aliases[i].alias) == 0) return *out = dtype_aliases[i].dtype, true;
  return false;
}

bool ms_dtype_is_floating(ms_dtype dt) {
  return dt == MS_FLOAT32 || dt == MS_FLOAT64 || dt == MS_BFLOAT16 || dt == MS_FLOAT16;
}

bool ms_dtype_is_integral(ms_dtype dt) { return !ms_dtype_is_floating(dt); }

/* 0 bool, 1 integer, 2 floating: promotion never goes down a category. */
static int category(ms_dtype dt) { return dt == MS_BOOL ? 0 : ms_dtype_is_floating(dt) ? 2 : 1; }

/* The promotion of two dtypes that count equally (PyTorch's promoteTypes table). */
static ms_dtype promote_pair(ms_dtype a, ms_dtype b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if (a == MS_FLOAT64 || b == MS_FLOAT64) return MS_FLOAT64;
    if (a == MS_FLOAT32 || b == MS_FLOAT32) return MS_FLOAT32;
    return MS_FLOAT32; /* bfloat16 with float16: neither holds the other */
  }
  /* integers: the wider one (uint8 with a signed type gives the signed type here) */
  return ms_dtype_size(a) >= ms_dtype_size(b) ? a : b;
}

ms_dtype ms_dtype_promote(ms_dtype a, ms_operand_kind ka, ms_dtype b, ms_operand_kind kb) {
  if (ka == MS_OPERAND_SCALAR && kb == MS_OPERAND_SCALAR) { /* where(c, 1.5, 0): default dtypes */
    int c = category(a) > category(b) ? category(a) : category(b);
    return c == 2 ? MS_FLOAT32 : c == 1 ? MS_INT64 : MS_BOOL;
  }
  if (ka == kb) return promote_pair(a, b);
  /* The weaker operand only matters when it is of a higher category. */
  bool a_stronger = ka < kb;
  ms_dtype strong = a_stronger ? a : b, weak = a_stronger ? b : a;
  ms_operand_kind weak_kind = a_stronger ? kb : ka;
  if (category(weak) <= category(strong)) return strong;
  if (weak_kind == MS_OPERAND_SCALAR) /* a plain number brings its category, not its width */
    return category(weak) == 2 ? MS_FLOAT32 : MS_INT64;
  return weak;
}

ms_dtype ms_dtype_to_floating(ms_dtype dt) { return ms_dtype_is_floating(dt) ? dt : MS_FLOAT32; }
