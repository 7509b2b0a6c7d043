/* nn_types.h: the types the functional NN layers take (nn_ops.h), apart from their functions, so
 * that the engine's native nn layer can use them without seeing the public ops. */
#ifndef MOONSHARD_NN_TYPES_H
#define MOONSHARD_NN_TYPES_H

#include <stdbool.h>

#include "moonshard/export.h"
#include "moonshard/op_list.h"

/* How a loss combines its per-element terms. */
typedef enum ms_reduction { MS_REDUCTION_NONE, MS_REDUCTION_MEAN, MS_REDUCTION_SUM } ms_reduction;

/* The activations of op_list.h: MS_ACT_<ID>. */
#define MS_X_ACT_ENUM(id, ...) MS_ACT_##id,
typedef enum ms_activation_op { MS_ACTIVATION_LIST(MS_X_ACT_ENUM) } ms_activation_op;
#define MS_X_ACT_PLUS_ONE(id, ...) +1
enum { MS_ACTIVATION_OP_COUNT = 0 MS_ACTIVATION_LIST(MS_X_ACT_PLUS_ONE) };

/* An activation's row of op_list.h as data (what the Lua face and the tests iterate). */
typedef struct ms_activation_op_info {
  const char *name;   /* the function: "silu" */
  const char *node;   /* its grad_fn's name: "SiluBackward0" */
  const char *module; /* the nn module: "SiLU" */
} ms_activation_op_info;
/* The row of op (a valid ms_activation_op). */
MS_API const ms_activation_op_info *ms_activation_op_get_info(ms_activation_op op);

/* scaled_dot_product_attention's options (torch.nn.functional's): attn_mask bool (true: takes
 * part) or of the query's dtype (added to the scores), broadcastable to (..., L, S), or NULL;
 * is_causal masks key j > query i (no attn_mask then); dropout_p drops attention weights;
 * scale NULL is 1 / sqrt(E). */
typedef struct ms_sdpa_options {
  struct ms_tensor *attn_mask;
  bool is_causal;
  double dropout_p;
  const double *scale;
} ms_sdpa_options;

#endif
