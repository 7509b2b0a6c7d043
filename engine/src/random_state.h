/* random_state.h (engine-internal): the generator's counter reservation, for random ops that
 * live outside random.c (dropout). An op takes all the Philox blocks it will read in one call. */
#ifndef MS_RANDOM_STATE_H
#define MS_RANDOM_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "moonshard/error.h"

/* Takes `blocks` 128-bit Philox blocks: *seed and *offset say where they start. While the
 * calling thread captures a CUDA graph, the blocks are counted against the graph instead and
 * *offset is relative to the graph's start (the captured kernels add the base of each replay,
 * kernel_table.h's rng_base); the generator itself does not move until a replay. */
void random_reserve(int64_t blocks, uint64_t *seed, uint64_t *offset);

/* A CUDA graph capture on the calling thread (cuda_graph.c): from begin, reservations count
 * against the graph; end returns how many blocks one replay draws and stops counting. */
void random_capture_begin(void);
uint64_t random_capture_end(void);
/* Whether the calling thread is capturing: a draw on the CPU then has no base to add, so random
 * ops refuse a CPU target. */
bool random_capturing(void);

/* Writes into t the draw of kind META_UNIFORM or META_NORMAL (meta_log.h) with (a, b) from the
 * blocks at (seed, offset), reserving nothing: the replay of a recorded initialiser. */
struct ms_tensor;
ms_status random_replay(struct ms_tensor *t, int kind, double a, double b, uint64_t seed, uint64_t offset);

#endif
