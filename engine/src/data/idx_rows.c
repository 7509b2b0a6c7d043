/* idx_rows.c: rows of a raw IDX file read on demand (moonshard/idx.h, ms_idx_rows). A data set
 * read this way costs a process no private memory for its payload: the rows a batch needs are
 * pread into the batch tensor, and the file's pages live in the kernel's page cache, shared by
 * every rank and not counted in any process's resident set. */
#define _POSIX_C_SOURCE 200809L /* pread */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moonshard/idx.h"

struct ms_idx_rows {
  atomic_int refcount;
  int fd;
  ms_idx_info info;
  size_t row_bytes;
  char *path; /* for messages */
};

ms_status ms_idx_rows_open(const char *path, ms_idx_rows **out) {
  *out = NULL;
  ms_idx_info info;
  ms_status st = ms_idx_probe(path, &info);
  if (st) return st;
  if (info.gzip)
    return ms_error(MS_ERR_ARG, "idx_rows '%s': the file is gzip-compressed, so its rows cannot be read in "
                    "place (read it whole with read_idx, or decompress it)", path);
  ms_idx_rows *f = calloc(1, sizeof *f);
  char *copy = f ? strdup(path) : NULL;
  if (!copy) {
    free(f);
    return ms_error(MS_ERR_MEMORY, "idx_rows '%s': out of memory", path);
  }
  f->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (f->fd < 0) {
    int err = errno;
    free(copy), free(f);
    return ms_error(MS_ERR_IO, "idx_rows '%s': could not open: %s", path, strerror(err));
  }
  atomic_init(&f->refcount, 1);
  f->info = info, f->path = copy;
  f->row_bytes = (size_t)(info.payload_bytes / (uint64_t)info.shape[0]);
  *out = f;
  return MS_OK;
}

void ms_idx_rows_retain(ms_idx_rows *f) { atomic_fetch_add(&f->refcount, 1); }

void ms_idx_rows_release(ms_idx_rows *f) {
  if (!f || atomic_fetch_sub(&f->refcount, 1) != 1) return;
  close(f->fd);
  free(f->path);
  free(f);
}

const ms_idx_info *ms_idx_rows_info(const ms_idx_rows *f) { return &f->info; }

/* Exactly n bytes at offset into p, retrying short reads; a short count at the end of the file
 * means it shrank since it was opened. */
static ms_status read_at(const ms_idx_rows *f, char *p, size_t n, uint64_t offset) {
  while (n > 0) {
    ssize_t k = pread(f->fd, p, n, (off_t)offset);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return ms_error(MS_ERR_IO, "idx_rows '%s': could not read: %s", f->path, strerror(errno));
    if (k == 0)
      return ms_error(MS_ERR_IO, "idx_rows '%s': the file ends at byte %llu, before the rows its header "
                      "promised (changed since it was opened?)", f->path, (unsigned long long)offset);
    p += k, n -= (size_t)k, offset += (uint64_t)k;
  }
  return MS_OK;
}

ms_tensor *ms_idx_rows_gather(const ms_idx_rows *f, const int64_t *rows, int64_t n) {
  const ms_idx_info *in = &f->info;
  for (int64_t i = 0; i < n; i++)
    if (rows[i] < 0 || rows[i] >= in->shape[0])
      return ms_error(MS_ERR_ARG, "idx_rows '%s': row %lld is out of range for %lld rows (0-based)", f->path,
                      (long long)rows[i], (long long)in->shape[0]), NULL;
  int64_t shape[MS_MAX_DIMS];
  memcpy(shape, in->shape, sizeof shape);
  shape[0] = n;
  ms_tensor *out = ms_tensor_new_empty(in->ndim, shape, MS_UINT8);
  if (!out) return NULL;
  char *dst = ms_tensor_data(out);
  /* one read per run of consecutive rows (a sequential sampler's batch is a single read) */
  for (int64_t i = 0, j; i < n; i = j) {
    for (j = i + 1; j < n && rows[j] == rows[j - 1] + 1; j++) {
    }
    uint64_t at = in->header_bytes + (uint64_t)rows[i] * f->row_bytes;
    if (read_at(f, dst + (size_t)i * f->row_bytes, (size_t)(j - i) * f->row_bytes, at) != MS_OK) {
      ms_tensor_release(out);
      return NULL;
    }
  }
  return out;
}
