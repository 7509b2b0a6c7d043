/* meta_log.h (engine-internal): the initialisers recorded on a meta storage (meta.c). An
 * in-place fill or random draw on a meta tensor records what it would have written, where (the
 * view's geometry) and, for random draws, the Philox blocks it reserved; replaying the records on
 * real bytes gives the values an ordinary run gives, bit for bit. */
#ifndef MS_META_LOG_H
#define MS_META_LOG_H

#include <stdint.h>

#include "moonshard/tensor_core.h"

typedef enum meta_kind { META_FILL, META_UNIFORM, META_NORMAL } meta_kind;

struct ms_meta_log;

/* Frees a storage's log (NULL is fine): storage.c, at the storage's last release. */
void meta_log_free(struct ms_meta_log *log);
/* Appends to t's storage's log: a fill with a, or a draw of `kind` with (a, b) from the blocks
 * at (seed, offset). */
ms_status meta_record(ms_tensor *t, meta_kind kind, double a, double b, uint64_t seed, uint64_t offset);

#endif
