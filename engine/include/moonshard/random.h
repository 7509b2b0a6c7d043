/* random.h: every random number comes from one counter-based generator (Philox 4x32-10), so the
 * same seed gives the same numbers whatever the thread count or device. The generator state is
 * a seed and an offset; each op takes the counters it needs and advances the offset. */
#ifndef MOONSHARD_RANDOM_H
#define MOONSHARD_RANDOM_H

#include <stdint.h>

#include "moonshard/export.h"
#include "moonshard/tensor_core.h"

/* Seeds the default generator: the same seed replays the same numbers. */
MS_API void ms_manual_seed(uint64_t seed);
/* The seed the default generator was last seeded with. */
MS_API uint64_t ms_initial_seed(void);
/* The whole generator state, for checkpoints: setting what get returned replays the same numbers
 * on either device (there is one generator; its numbers do not depend on the device). */
MS_API void ms_random_get_state(uint64_t *seed, uint64_t *offset);
MS_API void ms_random_set_state(uint64_t seed, uint64_t offset);

/* Fill in place (floating dtypes for uniform/normal; any dtype for randint). */
MS_API ms_status ms_tensor_uniform_(ms_tensor *t, double low, double high);
MS_API ms_status ms_tensor_normal_(ms_tensor *t, double mean, double std);
MS_API ms_status ms_tensor_randint_(ms_tensor *t, int64_t low, int64_t high); /* [low, high) */
/* Each element becomes 1 with probability p[i] (from the tensor `p`, same shape) */
MS_API ms_tensor *ms_tensor_new_bernoulli(ms_tensor *p);
MS_API ms_tensor *ms_tensor_new_randperm(int64_t n, ms_dtype dt);
/* The permutation drawn from its own generator seeded with `seed` (offset 0): the global
 * generator is neither read nor advanced, so every process computes the same permutation for
 * the same seed whatever it drew before (DistributedSampler's shuffle on every rank). */
MS_API ms_tensor *ms_tensor_new_randperm_seeded(int64_t n, ms_dtype dt, uint64_t seed);
/* The same permutations of first .. first+n-1 (the Lua face's 1-based positions: first = 1);
 * `seed` NULL draws from the global generator, else from its own as _seeded does. */
MS_API ms_tensor *ms_tensor_new_randperm_from(int64_t n, int64_t first, ms_dtype dt, const uint64_t *seed);

#endif
