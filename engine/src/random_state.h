/* random_state.h (engine-internal): the generator's counter reservation, for random ops that
 * live outside random.c (dropout). An op takes all the Philox blocks it will read in one call. */
#ifndef MS_RANDOM_STATE_H
#define MS_RANDOM_STATE_H

#include <stdint.h>

/* Takes `blocks` 128-bit Philox blocks: *seed and *offset say where they start. */
void random_reserve(int64_t blocks, uint64_t *seed, uint64_t *offset);

#endif
