/* safetensors_load.c: reading safetensors checkpoints. Nothing in the file is trusted: only a
 * regular file is read (a FIFO or a device would block or never end), the header length is
 * checked against the file size before anything is allocated, and the header is walked and
 * checked (safetensors_header.c) before any tensor is made. Every failure is an MS_ERR_IO
 * naming the file and what is wrong with it. */
#define _POSIX_C_SOURCE 200809L /* fseeko, fdopen, O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "io/safetensors_internal.h"
#include "io/safetensors_reader.h"

static void reader_free(reader *r) {
  if (r->f) fclose(r->f);
  free(r->strings);
  free(r->entries);
  free(r->names);
  free(r->meta_keys);
  free(r->meta_values);
  strset_free(&r->by_name);
  strset_free(&r->meta_set);
  free(r->by_offset);
}

ms_status st_bad(const reader *r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ms_error(MS_ERR_IO, "safetensors load '%s': %s", r->path, msg);
}

ms_status st_out_of_memory(const reader *r) {
  return ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory", r->path);
}

/* ---- the file ----------------------------------------------------------------------------------- */

static ms_status read_exact(reader *r, void *p, size_t n, const char *what) {
  if (n && fread(p, 1, n, r->f) != n)
    return ferror(r->f) ? st_bad(r, "could not read %s: %s", what, strerror(errno)) : st_bad(r, "file ends inside %s", what);
  return MS_OK;
}

static const char *file_kind(mode_t m) {
  return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO (named pipe)" : S_ISCHR(m) ? "a character device"
       : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Opened without blocking (a FIFO with no writer would block open() itself) and refused unless
 * it is a regular file: only those have a size to check the header against and an end. */
static ms_status open_regular(reader *r) {
  int fd = open(r->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ms_error(MS_ERR_IO, "safetensors load '%s': could not open: %s", r->path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int err = errno;
    close(fd);
    return st_bad(r, "could not find the file size: %s", strerror(err));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return st_bad(r, "%s, not a regular file: only a regular file can be loaded", file_kind(sb.st_mode));
  }
  r->file_size = (uint64_t)sb.st_size;
  if (!(r->f = fdopen(fd, "rb"))) {
    close(fd);
    return st_bad(r, "could not open: %s", strerror(errno));
  }
  return MS_OK;
}

static ms_status open_file(reader *r) {
  ms_status st = open_regular(r);
  if (st) return st;
  if (r->file_size < 8)
    return st_bad(r, "file is %llu bytes, too short for the 8-byte header length (truncated?)",
               (unsigned long long)r->file_size);
  unsigned char len[8];
  if ((st = read_exact(r, len, 8, "the header length"))) return st;
  r->header_len = st_get_u64le(len);
  if (r->header_len > MS_ST_MAX_HEADER)
    return st_bad(r, "header length %llu is over the %u-byte limit (not a safetensors file, or corrupt)",
               (unsigned long long)r->header_len, MS_ST_MAX_HEADER);
  if (r->header_len > r->file_size - 8)
    return st_bad(r, "header length %llu runs past the end of the file (%llu bytes; truncated?)",
               (unsigned long long)r->header_len, (unsigned long long)r->file_size);
  r->data_len = r->file_size - 8 - r->header_len;
  return MS_OK;
}

/* Reads, walks and checks the header. Its text is freed before returning: only the entries and
 * the string block (at most the header's size) stay. */
static ms_status read_header(reader *r) {
  ms_status st = open_file(r);
  if (st) return st;
  char *text = malloc(r->header_len + 1);
  r->strings_cap = r->header_len + 1;
  r->strings = malloc(r->strings_cap);
  if (!text || !r->strings) st = ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory for the header", r->path);
  if (!st) st = read_exact(r, text, r->header_len, "the header");
  r->pos = 8 + r->header_len;
  if (!st && (r->header_len == 0 || text[0] != '{'))
    st = st_bad(r, "the header does not start with '{' (not a safetensors file, or corrupt)");
  if (!st) st = st_read_header_json(r, text);
  free(text);
  return st;
}

/* ---- the data ----------------------------------------------------------------------------------- */

/* Reads elements [first, first + n) of e into a new tensor of the given shape (n elements). */
static ms_status read_elements(reader *r, const entry *e, uint64_t first, int ndim, const int64_t *shape,
                               ms_tensor **out) {
  ms_tensor *t = ms_tensor_new_empty(ndim, shape, e->dtype);
  if (!t) {
    char cause[512]; /* copied: ms_error writes the buffer ms_error_last points into */
    snprintf(cause, sizeof cause, "%s", ms_error_last());
    return ms_error(MS_ERR_MEMORY, "safetensors load '%s': tensor '%s': %s", r->path, e->name, cause);
  }
  size_t size = ms_dtype_size(e->dtype), n = (size_t)ms_tensor_numel(t);
  unsigned char *p = ms_tensor_data(t);
  ms_status st = MS_OK;
  uint64_t at = 8 + r->header_len + e->begin + first * size;
  if (n && at != r->pos && fseeko(r->f, (off_t)at, SEEK_SET) != 0)
    st = st_bad(r, "tensor '%s': could not seek: %s", e->name, strerror(errno));
  if (!st && n) st = read_exact(r, p, n * size, "the tensor data");
  if (n) r->pos = st ? UINT64_MAX : at + n * size; /* after a failure, seek next time */
  if (!st && !st_host_is_little_endian()) st_swap_bytes(p, n, size);
  for (size_t i = 0; !st && e->dtype == MS_BOOL && i < n; i++)
    if (p[i] > 1) st = st_bad(r, "tensor '%s': bool element %zu has byte value %u (must be 0 or 1)", e->name, i, p[i]);
  if (st) ms_tensor_release(t), t = NULL;
  *out = t;
  return st;
}

static ms_status read_tensor(reader *r, const entry *e, ms_tensor **out) {
  return read_elements(r, e, 0, e->ndim, e->shape, out);
}

/* The names, metadata and their string block move to out; then each tensor is read. */
static ms_status fill(reader *r, ms_safetensors *out) {
  out->names = r->names, r->names = NULL;
  out->strings = r->strings, r->strings = NULL;
  out->has_metadata = r->has_metadata;
  out->meta_count = r->meta_count;
  out->meta_keys = r->meta_keys, r->meta_keys = NULL;
  out->meta_values = r->meta_values, r->meta_values = NULL;
  out->tensors = calloc((size_t)(r->count ? r->count : 1), sizeof *out->tensors);
  if (!out->tensors) return st_out_of_memory(r);
  out->count = r->count; /* the tensors not read yet are NULL, which ms_safetensors_free skips */
  for (int i = 0; i < r->count; i++) { /* in file order: one sequential read */
    const entry *e = r->by_offset[i];
    ms_status st = read_tensor(r, e, &out->tensors[e - r->entries]);
    if (st) return st;
  }
  return MS_OK;
}

ms_status ms_safetensors_load(const char *path, ms_safetensors *out) {
  memset(out, 0, sizeof *out);
  if (!path) return ms_error(MS_ERR_ARG, "safetensors load: path is NULL");
  reader r = {.path = path};
  ms_status st = read_header(&r);
  if (!st) st = fill(&r, out);
  reader_free(&r);
  if (st) ms_safetensors_free(out);
  return st;
}

void ms_safetensors_free(ms_safetensors *st) {
  if (!st) return;
  for (int i = 0; st->tensors && i < st->count; i++) ms_tensor_release(st->tensors[i]);
  free(st->names);
  free(st->tensors);
  free(st->meta_keys);
  free(st->meta_values);
  free(st->strings);
  memset(st, 0, sizeof *st);
}

/* ---- parts of tensors --------------------------------------------------------------------------- */

struct ms_safetensors_file {
  reader r;
  char *path; /* r.path points here */
};

void ms_safetensors_close(ms_safetensors_file *f) {
  if (!f) return;
  reader_free(&f->r);
  free(f->path);
  free(f);
}

ms_safetensors_file *ms_safetensors_open(const char *path) {
  if (!path) return ms_error(MS_ERR_ARG, "safetensors open: path is NULL"), NULL;
  ms_safetensors_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(path))) {
    free(f);
    return ms_error(MS_ERR_MEMORY, "safetensors open '%s': out of memory", path), NULL;
  }
  f->r.path = f->path;
  if (read_header(&f->r)) ms_safetensors_close(f), f = NULL;
  return f;
}

ms_tensor *ms_safetensors_read_range(ms_safetensors_file *f, const char *name, int64_t offset, int64_t count) {
  if (!f || !name) return ms_error(MS_ERR_ARG, "safetensors read_range: file and name must not be NULL"), NULL;
  int64_t i = strset_find(&f->r.by_name, (const char *const *)f->r.names, name);
  if (i < 0) return st_bad(&f->r, "no tensor named '%s'", name), NULL;
  const entry *e = &f->r.entries[i];
  int64_t numel = (int64_t)((e->end - e->begin) / ms_dtype_size(e->dtype));
  if (offset < 0 || count < 0 || offset > numel || count > numel - offset)
    return st_bad(&f->r, "tensor '%s' has %lld elements; elements [%lld, %lld) are not inside it", name, (long long)numel,
               (long long)offset, (long long)offset + (long long)count),
           NULL;
  ms_tensor *t = NULL;
  read_elements(&f->r, e, (uint64_t)offset, 1, &count, &t);
  return t;
}
