/* meta_log.h (engine-internal): the initialisers recorded on a meta storage. An in-place fill or
 * random draw on a meta tensor records what it would have written, where (the view's geometry)
 * and, for random draws, the Philox blocks it reserved; engine/src/native/materialize.c replays them on
 * real bytes, which gives the values an ordinary run gives, bit for bit. */
#ifndef MS_META_LOG_H
#define MS_META_LOG_H

#include <stdint.h>

#include "moonshard/tensor_core.h"

typedef enum meta_kind { META_FILL, META_UNIFORM, META_NORMAL } meta_kind;

typedef struct meta_entry {
  meta_kind kind;
  double a, b;           /* fill: a; uniform: low, high; normal: mean, std */
  uint64_t seed, offset; /* where a draw's blocks start */
  ms_dtype gen_dtype;    /* the dtype it was written in: a record carried through a dtype
                          * conversion writes in it, then converts (meta_log_copy) */
  ms_dtype dtype;        /* the view's geometry over the storage */
  int ndim;
  int64_t shape[MS_MAX_DIMS], strides[MS_MAX_DIMS], elem_offset;
} meta_entry;

struct ms_meta_log {
  int n, cap;
  meta_entry *r; /* in the order they ran */
};

/* Appends to t's (meta) storage's log: a fill with a, or a draw of `kind` with (a, b) from the
 * blocks at (seed, offset). A write covering the whole storage drops the records before it. */
ms_status meta_record(ms_tensor *t, meta_kind kind, double a, double b, uint64_t seed, uint64_t offset);
/* Gives dst (a new meta tensor of src's shape, contiguous) src's records, converted to dst's
 * dtype, when src is the whole of its storage; otherwise dst has none. */
ms_status meta_log_copy(ms_tensor *dst, const ms_tensor *src);
/* Frees a log (NULL is fine); the storage calls it through its meta_log_free pointer. */
void meta_log_free(struct ms_meta_log *log);

#endif
