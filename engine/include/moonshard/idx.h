/* idx.h: reading IDX files, the format MNIST and its relatives ship in
 * (http://yann.lecun.com/exdb/mnist/): a 4-byte magic (two zero bytes, an element-type code,
 * the number of dimensions), one big-endian uint32 size per dimension, then the elements in
 * row-major order. Files may be raw or gzip-compressed (recognised by their first bytes, not
 * their name), as the data sets are distributed both ways. */
#ifndef MOONSHARD_IDX_H
#define MOONSHARD_IDX_H

#include "moonshard/error.h"
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
 * (neither short nor followed by extra bytes) and, for gzip, an intact stream (its CRC
 * included). Any problem is an MS_ERR_IO error naming the file and what is wrong; *out is then
 * NULL. */
ms_status ms_idx_read(const char *path, ms_tensor **out);

#endif
