/* random_state.h (engine-internal): the generator's counter reservation, for random ops that
 * live outside random.c (dropout). An op takes all the Philox blocks it will read in one call. */
#ifndef MS_RANDOM_STATE_H
#define MS_RANDOM_STATE_H

#include <stdint.h>

#include "moonshard/error.h"

/* Takes `blocks` 128-bit Philox blocks: *seed and *offset say where they start. */
void random_reserve(int64_t blocks, uint64_t *seed, uint64_t *offset);

/* Writes into t the draw of kind META_UNIFORM or META_NORMAL (meta_log.h) with (a, b) from the
 * blocks at (seed, offset), reserving nothing: the replay of a recorded initialiser. */
struct ms_tensor;
ms_status random_replay(struct ms_tensor *t, int kind, double a, double b, uint64_t seed, uint64_t offset);

#endif
