/* io.h: checkpoints in the safetensors format (https://github.com/huggingface/safetensors):
 * an 8-byte little-endian header length N, N bytes of JSON naming each tensor's dtype, shape
 * and byte range (plus an optional "__metadata__" object of string pairs), padded with spaces
 * to a multiple of 8, then the raw little-endian, row-major bytes of every tensor. Files written
 * here load in PyTorch's `safetensors.torch.load_file` and the other way round. */
#ifndef MOONSHARD_IO_H
#define MOONSHARD_IO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "moonshard/error.h"
#include "moonshard/export.h"
#include "moonshard/tensor.h"

/* Writes n tensors under their names (data in the order given; non-contiguous tensors are
 * written as their contiguous copy) and, when meta_keys is not NULL, a "__metadata__" object
 * of n_meta key/value strings (in the order given). Names, keys and values must be UTF-8; names
 * unique and not "__metadata__". The file appears atomically (atomic_file_open below); on any
 * failure the temporary file is removed and an existing file at path is untouched. No checksum is
 * added: the bytes are exactly those of the reference library's save_file (sharded checkpoints
 * checksum each file in their index). */
MS_API ms_status ms_safetensors_save(const char *path, int n, const char *const *names, ms_tensor *const *tensors,
                                     int n_meta, const char *const *meta_keys, const char *const *meta_values);

/* What ms_safetensors_load returns: tensors in the order of the file's header, each a new
 * contiguous CPU tensor owned by the struct; metadata in header order. */
typedef struct ms_safetensors {
  int count;
  char **names;
  ms_tensor **tensors;
  bool has_metadata; /* the header had a "__metadata__" object (possibly empty) */
  int meta_count;
  char **meta_keys;
  char **meta_values;
  char *strings; /* one block holding every name, key and value above (they point into it) */
} ms_safetensors;

/* Reads and validates a whole file into *out (initialised here; release it with
 * ms_safetensors_free, also after a failure, which leaves it empty). Every inconsistency -- a
 * truncated file, a header length past the end, malformed JSON, an unknown dtype, a byte range
 * that does not match the shape, ranges that overlap, leave gaps or run past the data, bytes
 * after the last tensor, a name or metadata key given twice, a path that is not a regular file
 * (a FIFO, a directory, a device: refused at once, never read) -- is an MS_ERR_IO error naming
 * the file and the problem. The checks take linear time and memory within a few times the
 * header's size (a hostile header cannot make the reader quadratic or huge). */
MS_API ms_status ms_safetensors_load(const char *path, ms_safetensors *out);
MS_API void ms_safetensors_free(ms_safetensors *st);

/* An open safetensors file whose header has been read and checked as ms_safetensors_load
 * checks it, for reading parts of tensors: a rank loading a sharded checkpoint reads only the
 * element ranges it keeps. Close with ms_safetensors_close (NULL is fine). */
typedef struct ms_safetensors_file ms_safetensors_file;
MS_API ms_safetensors_file *ms_safetensors_open(const char *path); /* NULL with an MS_ERR_IO error */
MS_API void ms_safetensors_close(ms_safetensors_file *f);
/* Elements [offset, offset + count) of the named tensor, counted in row-major order from 0, as
 * a new 1-D CPU tensor of the file's dtype; NULL with an error naming the file, the tensor and
 * its element count when the name is absent or the range does not lie inside it. */
MS_API ms_tensor *ms_safetensors_read_range(ms_safetensors_file *f, const char *name, int64_t offset, int64_t count);

/* ---- atomic files (atomic_file.c; the open/commit protocol: io/atomic_file.h) ----------------------------------------------------------------
 * A file written through these appears whole under its name or not at all: the bytes go to a
 * temporary "<path>.tmp.<host>.<pid>.<start>.<random>" in the same directory, created with O_EXCL,
 * then are fsync'd, renamed over path, and the directory is fsync'd. Opening first removes the
 * stale temporaries of path that dead writers left (the rule is at the top of atomic_file.c). */
MS_API ms_status ms_write_file_atomic(const char *path, const void *data, size_t n, const char *who);
/* Removes the stale temporaries in dir whose names start with prefix; returns how many. */
MS_API int ms_remove_stale_temporaries(const char *dir, const char *prefix);
/* The zlib crc32 and the size of a regular file's bytes (a FIFO or directory is an error). */
MS_API ms_status ms_file_crc32(const char *path, uint32_t *crc, uint64_t *size);
/* ---- mapped files (mapped_file.c) --------------------------------------------------------------
 * A 1-D tensor of count dt elements over path's bytes from offset (count < 0: all whole elements),
 * mapped rather than read (torch.from_file): pages load on first touch. shared = true writes
 * changes through to the file; otherwise they stay private to the process (the file is not
 * changed). offset must be a multiple of the element size. NULL with an error. */
MS_API ms_tensor *ms_tensor_from_file(const char *path, ms_dtype dt, int64_t offset, int64_t count, bool shared);
/* n bytes from the operating system's random source. */
MS_API ms_status ms_os_random(void *buf, size_t n);

#endif
