/* idx.h: reading IDX files, the format MNIST and its relatives ship in
 * (http://yann.lecun.com/exdb/mnist/): a 4-byte magic (two zero bytes, an element-type code,
 * the number of dimensions), one big-endian uint32 size per dimension, then the elements in
 * row-major order. Files may be raw or gzip-compressed (recognised by their first bytes, not
 * their name), as the data sets are distributed both ways. */
#ifndef MOONSHARD_IDX_H
#define MOONSHARD_IDX_H

#include <stdbool.h>

#include "moonshard/error.h"
#include "moonshard/export.h"
#include "moonshard/tensor.h"

/* The IDX element-type codes (third byte of the magic). Only MS_IDX_UINT8 is read. */
typedef enum ms_idx_type {
  MS_IDX_UINT8 = 0x08,
  MS_IDX_INT8 = 0x09,
  MS_IDX_INT16 = 0x0B,
  MS_IDX_INT32 = 0x0C,
  MS_IDX_FLOAT32 = 0x0D,
  MS_IDX_FLOAT64 = 0x0E,
} ms_idx_type;

/* Reads the whole file at path into *out: a new contiguous uint8 CPU tensor whose shape is the
 * header's (the caller releases it). The file is validated before and while it is read: the
 * magic, the dimension count (1..MS_MAX_DIMS), sizes that are non-zero and whose product fits
 * (and fits in the file, checked before any allocation), a payload of exactly that many bytes
 * (neither short nor followed by extra bytes) and, for gzip, an intact stream (header, deflate
 * data, CRC-32 and length; more members may follow, as gzip -d reads them, but no other bytes).
 * Only a regular file is read (a FIFO, directory or device is refused at once). Any problem is
 * an MS_ERR_IO error naming the file and the stage that failed; *out is then NULL. */
MS_API ms_status ms_idx_read(const char *path, ms_tensor **out);

/* What an IDX file's header says, checked as ms_idx_read checks it (for a raw file the size on
 * disk must match the shape exactly; a gzip file's payload is not read). */
typedef struct ms_idx_info {
  int ndim;
  int64_t shape[MS_MAX_DIMS];
  uint64_t header_bytes;  /* where the payload starts (in the uncompressed data) */
  uint64_t payload_bytes; /* the product of the shape */
  bool gzip;
} ms_idx_info;

/* Reads the header of the IDX file at path (gzip or raw) into *info, without reading the payload. */
MS_API ms_status ms_idx_probe(const char *path, ms_idx_info *info);

/* Rows of a raw (uncompressed) IDX file read on demand, where holding the whole payload in
 * memory is not wanted: a data set's images stay in the page cache, shared by every process,
 * instead of in each process's private memory. Refcounted (open gives one reference) and safe
 * to read from several threads at once (pread). */
typedef struct ms_idx_rows ms_idx_rows;

/* Opens path for reading by rows after checking its header (ms_idx_probe). A gzip-compressed
 * file cannot be read in place: that is an MS_ERR_ARG error saying so (read it whole with
 * ms_idx_read). */
MS_API ms_status ms_idx_rows_open(const char *path, ms_idx_rows **out);
MS_API void ms_idx_rows_retain(ms_idx_rows *f);
MS_API void ms_idx_rows_release(ms_idx_rows *f); /* NULL is fine */
MS_API const ms_idx_info *ms_idx_rows_info(const ms_idx_rows *f);

/* A new contiguous uint8 tensor (n, shape[1], ...) holding rows rows[0..n) (0-based) of the
 * file, or NULL with an error (a row out of range, or a read that fails or comes up short
 * because the file changed since it was opened). */
MS_API ms_tensor *ms_idx_rows_gather(const ms_idx_rows *f, const int64_t *rows, int64_t n);

#endif
