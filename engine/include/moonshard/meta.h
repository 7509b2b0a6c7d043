/* meta.h: deferred initialisation on the "meta" device (PyTorch's torch.device("meta"), with
 * torchdistx's recorded initialisers). A meta tensor has a shape, strides and a dtype but no
 * bytes; the ops that would read or write them fail (ms_meta_no_data), except the initialisers:
 * fill_/zero_, uniform_ and normal_ on a meta tensor reserve the same Philox blocks the real op
 * would (so later draws are unchanged) and record themselves on the storage, where every view
 * of it finds them (engine/src/meta_log.c). ms_meta_materialize gives the storage real bytes and
 * replays the records (engine/src/native/materialize.c). */
#ifndef MOONSHARD_META_H
#define MOONSHARD_META_H

#include <stdbool.h>

#include "moonshard/export.h"
#include "moonshard/tensor_core.h"

static inline bool ms_tensor_is_meta(const ms_tensor *t) { return ms_tensor_device(t).type == MS_META; }
/* How many initialisers the storage holds (one that covers the whole storage supersedes those
 * before it); 0 for a storage that is not meta. */
MS_API int ms_meta_record_count(const ms_storage *s);
/* Turns the meta storage s into a storage of `device` in place (every tensor and view over it
 * follows: tied parameters stay tied), and, with replay, writes its records in order; without,
 * the bytes are uninitialised (to_empty). The log is dropped either way. */
MS_API ms_status ms_meta_materialize(ms_storage *s, ms_device device, bool replay);

#endif
