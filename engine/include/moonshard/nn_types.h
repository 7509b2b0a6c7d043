/* nn_types.h: the types the functional NN layers take (nn_ops.h), apart from their functions, so
 * that the engine's native nn layer can use them without seeing the public ops. */
#ifndef MOONSHARD_NN_TYPES_H
#define MOONSHARD_NN_TYPES_H

/* How a loss combines its per-element terms. */
typedef enum ms_reduction { MS_REDUCTION_NONE, MS_REDUCTION_MEAN, MS_REDUCTION_SUM } ms_reduction;

#endif
