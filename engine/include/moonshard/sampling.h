/* sampling.h: drawing category indices from weights (torch.multinomial), from the generator of
 * moonshard/random.h. Apart from random.h so that random.c, which multinomial.c draws through,
 * does not see what multinomial.c defines. */
#ifndef MOONSHARD_SAMPLING_H
#define MOONSHARD_SAMPLING_H

#include <stdbool.h>
#include <stdint.h>

#include "moonshard/export.h"
#include "moonshard/tensor_core.h"

/* num_samples category indices per row of p (1-D: categories, 2-D: rows of them) of
 * non-negative finite weights, not necessarily normalised (torch.multinomial): int64 counted from
 * `first` (0 or the Lua face's 1), of shape (num_samples) or (rows, num_samples), on p's device
 * (drawn there). Without replacement each row's samples are distinct. `seed` NULL draws from
 * the global generator, else from one of its own as randperm's does. */
MS_API ms_tensor *ms_tensor_new_multinomial(ms_tensor *p, int64_t num_samples, bool replacement, int64_t first,
                                            const uint64_t *seed);

#endif
