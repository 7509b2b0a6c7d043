/* safetensors_load.c: reading safetensors checkpoints. Nothing in the file is trusted: only a
 * regular file is read (a FIFO or a device would block or never end), the header length is
 * checked against the file size before anything is allocated, the JSON is walked strictly with
 * a cursor that builds no tree (so a hostile 100 MB header costs a few times its size, not a
 * node per byte), duplicate names are found with hash sets (linear time), and every tensor's
 * dtype, shape and byte range are checked (ranges must tile the data section exactly, as the
 * reference library requires) before any tensor is made. Every failure is an MS_ERR_IO naming
 * the file and what is wrong with it. */
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

#include "moonshard/json.h"
#include "io/safetensors_internal.h"
#include "io/strset.h"
#include "moonshard/io.h"

/* One tensor's entry in the header, checked. */
typedef struct entry {
  const char *name; /* in the reader's string block */
  ms_dtype dtype;
  int ndim;
  int64_t shape[MS_MAX_DIMS];
  uint64_t begin, end;
} entry;

typedef struct reader {
  const char *path;
  FILE *f;
  uint64_t file_size, header_len, data_len;
  char *strings; /* every name, metadata key and value, decoded, one after the other */
  size_t strings_used, strings_cap;
  entry *entries;
  char **names; /* entries[i].name, for the hash set and, after a load, the caller */
  int count, cap;
  ms_strset by_name;
  bool has_metadata;
  char **meta_keys, **meta_values;
  int meta_count, meta_cap;
  ms_strset meta_set;
  entry **by_offset; /* the entries sorted by data_offsets, for reading them in file order */
  uint64_t pos;      /* where the next fread starts, so reads in file order need no seek */
} reader;

static void reader_free(reader *r) {
  if (r->f) fclose(r->f);
  free(r->strings);
  free(r->entries);
  free(r->names);
  free(r->meta_keys);
  free(r->meta_values);
  ms_strset_free(&r->by_name);
  ms_strset_free(&r->meta_set);
  free(r->by_offset);
}

static ms_status bad(const reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ms_status bad(const reader *r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ms_error(MS_ERR_IO, "safetensors load '%s': %s", r->path, msg);
}

static ms_status out_of_memory(const reader *r) {
  return ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory", r->path);
}

/* ---- the file ----------------------------------------------------------------------------------- */

static ms_status read_exact(reader *r, void *p, size_t n, const char *what) {
  if (n && fread(p, 1, n, r->f) != n)
    return ferror(r->f) ? bad(r, "could not read %s: %s", what, strerror(errno)) : bad(r, "file ends inside %s", what);
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
    return bad(r, "could not find the file size: %s", strerror(err));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return bad(r, "%s, not a regular file: only a regular file can be loaded", file_kind(sb.st_mode));
  }
  r->file_size = (uint64_t)sb.st_size;
  if (!(r->f = fdopen(fd, "rb"))) {
    close(fd);
    return bad(r, "could not open: %s", strerror(errno));
  }
  return MS_OK;
}

static ms_status open_file(reader *r) {
  ms_status st = open_regular(r);
  if (st) return st;
  if (r->file_size < 8)
    return bad(r, "file is %llu bytes, too short for the 8-byte header length (truncated?)",
               (unsigned long long)r->file_size);
  unsigned char len[8];
  if ((st = read_exact(r, len, 8, "the header length"))) return st;
  r->header_len = ms_st_get_u64le(len);
  if (r->header_len > MS_ST_MAX_HEADER)
    return bad(r, "header length %llu is over the %u-byte limit (not a safetensors file, or corrupt)",
               (unsigned long long)r->header_len, MS_ST_MAX_HEADER);
  if (r->header_len > r->file_size - 8)
    return bad(r, "header length %llu runs past the end of the file (%llu bytes; truncated?)",
               (unsigned long long)r->header_len, (unsigned long long)r->file_size);
  r->data_len = r->file_size - 8 - r->header_len;
  return MS_OK;
}

/* ---- the header, walked --------------------------------------------------------------------------- */

static ms_status syntax(const reader *r, const ms_json_cursor *c) {
  const char *why = ms_json_cursor_error(c);
  return bad(r, "the header is not valid JSON: %s", why ? why : "unexpected value");
}

/* Copies s into the string block. The block is as long as the header, and every string kept
 * comes from a distinct JSON string whose quoted form is longer than its decoded bytes and NUL. */
static char *keep(reader *r, const char *s) {
  size_t n = strlen(s) + 1;
  if (n > r->strings_cap - r->strings_used) return NULL; /* cannot happen, by the bound above */
  char *d = memcpy(r->strings + r->strings_used, s, n);
  r->strings_used += n;
  return d;
}

/* Makes room for one more element in each of the arrays (all with *cap elements of their size). */
static bool reserve(int count, int *cap, void **a, size_t a_size, void **b, size_t b_size) {
  if (count < *cap) return true;
  int ncap = *cap ? *cap * 2 : 16;
  void *na = realloc(*a, (size_t)ncap * a_size);
  if (na) *a = na;
  void *nb = na && b ? realloc(*b, (size_t)ncap * b_size) : NULL;
  if (nb) *b = nb;
  if (!na || (b && !nb)) return false;
  *cap = ncap;
  return true;
}

static ms_status peek_kind(const reader *r, ms_json_cursor *c, ms_json_kind *k) {
  return ms_json_peek(c, k) ? MS_OK : syntax(r, c);
}

/* The next value as a non-negative integer; *ok is false when it is any other value. */
static ms_status read_uint(const reader *r, ms_json_cursor *c, uint64_t *v, bool *ok) {
  ms_json_kind k;
  ms_json n;
  ms_status st = peek_kind(r, c, &k);
  *ok = false;
  if (st || k != MS_JSON_NUMBER) return st;
  if (!ms_json_read_scalar(c, &n)) return syntax(r, c);
  *ok = n.is_uint, *v = n.uint;
  return MS_OK;
}

static ms_status read_dtype(const reader *r, ms_json_cursor *c, entry *e) {
  ms_json_kind k;
  ms_status st = peek_kind(r, c, &k);
  if (st) return st;
  if (k != MS_JSON_STRING) return bad(r, "tensor '%s': \"dtype\" must be a string, got %s", e->name, ms_json_kind_name(k));
  const char *name = ms_json_read_string(c);
  if (!name) return syntax(r, c);
  bool other;
  if (ms_st_dtype_parse(name, &e->dtype, &other)) return MS_OK;
  if (other) return bad(r, "tensor '%s': dtype %s is not supported by moonshard", e->name, name);
  return bad(r, "tensor '%s': unknown dtype '%s' (expected F32, F64, BF16, F16, I64, I32, U8 or BOOL)", e->name, name);
}

static ms_status read_shape(const reader *r, ms_json_cursor *c, entry *e) {
  ms_json_kind k;
  ms_status st = peek_kind(r, c, &k);
  if (st) return st;
  if (k != MS_JSON_ARRAY) return bad(r, "tensor '%s': \"shape\" must be an array, got %s", e->name, ms_json_kind_name(k));
  ms_json_enter(c);
  for (e->ndim = 0; ms_json_next(c);) {
    if (e->ndim == MS_MAX_DIMS) return bad(r, "tensor '%s': more than %d dimensions", e->name, MS_MAX_DIMS);
    uint64_t v = 0;
    bool ok;
    if ((st = read_uint(r, c, &v, &ok))) return st;
    if (!ok || v > (uint64_t)INT64_MAX)
      return bad(r, "tensor '%s': shape entry %d is not a non-negative integer", e->name, e->ndim);
    e->shape[e->ndim++] = (int64_t)v;
  }
  return ms_json_cursor_error(c) ? syntax(r, c) : MS_OK;
}

static ms_status read_offsets(const reader *r, ms_json_cursor *c, entry *e) {
  ms_json_kind k;
  ms_status st = peek_kind(r, c, &k);
  if (st) return st;
  uint64_t v[2] = {0, 0};
  int n = 0;
  bool ok = k == MS_JSON_ARRAY;
  if (ok) {
    ms_json_enter(c);
    while (ok && ms_json_next(c)) {
      if (n == 2) ok = false;
      else if ((st = read_uint(r, c, &v[n++], &ok))) return st;
    }
    if (ms_json_cursor_error(c)) return syntax(r, c);
  }
  if (!ok || n != 2)
    return bad(r, "tensor '%s': \"data_offsets\" must be [begin, end], two non-negative integers", e->name);
  e->begin = v[0], e->end = v[1];
  if (e->end < e->begin)
    return bad(r, "tensor '%s': data_offsets [%llu, %llu] end before they begin", e->name,
               (unsigned long long)e->begin, (unsigned long long)e->end);
  if (e->end > r->data_len)
    return bad(r, "tensor '%s': data_offsets [%llu, %llu] run past the end of the data section (%llu bytes; truncated?)",
               e->name, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)r->data_len);
  return MS_OK;
}
/* numel * element size must be exactly the byte range (computed without overflow). */
static ms_status check_size(const reader *r, const entry *e) {
  uint64_t bytes = ms_dtype_size(e->dtype);
  for (int d = 0; d < e->ndim; d++) {
    uint64_t s = (uint64_t)e->shape[d];
    if (s && bytes > UINT64_MAX / s) return bad(r, "tensor '%s': shape is too large", e->name);
    bytes *= s;
  }
  if (bytes != e->end - e->begin) {
    char shape[MS_SHAPE_STR_LEN];
    return bad(r, "tensor '%s': a %s tensor of shape %s needs %llu bytes but data_offsets [%llu, %llu] hold %llu",
               e->name, ms_safetensors_dtype_name(e->dtype), ms_shape_str(e->ndim, e->shape, shape, sizeof shape),
               (unsigned long long)bytes, (unsigned long long)e->begin, (unsigned long long)e->end,
               (unsigned long long)(e->end - e->begin));
  }
  return MS_OK;
}

enum { FIELD_DTYPE, FIELD_SHAPE, FIELD_OFFSETS, N_FIELDS };

/* One tensor's {dtype, shape, data_offsets}. Other fields are skipped (checked as JSON, not
 * kept), as the reference library ignores them; a known field given twice is an error. */
static ms_status read_entry(const reader *r, ms_json_cursor *c, entry *e) {
  ms_json_kind k;
  ms_status st = peek_kind(r, c, &k);
  if (st) return st;
  if (k != MS_JSON_OBJECT)
    return bad(r, "tensor '%s': expected an object {dtype, shape, data_offsets}, got %s", e->name, ms_json_kind_name(k));
  static const char *const fields[N_FIELDS] = {"dtype", "shape", "data_offsets"};
  unsigned seen = 0;
  ms_json_enter(c);
  while (ms_json_next(c)) {
    int f = 0;
    while (f < N_FIELDS && strcmp(ms_json_key(c), fields[f]) != 0) f++;
    if (f == N_FIELDS) {
      if (!ms_json_skip(c)) return syntax(r, c);
      continue;
    }
    if (seen & 1u << f) return bad(r, "tensor '%s': field \"%s\" appears twice", e->name, fields[f]);
    seen |= 1u << f;
    st = f == FIELD_DTYPE ? read_dtype(r, c, e) : f == FIELD_SHAPE ? read_shape(r, c, e) : read_offsets(r, c, e);
    if (st) return st;
  }
  if (ms_json_cursor_error(c)) return syntax(r, c);
  if (!(seen & 1u << FIELD_DTYPE)) return bad(r, "tensor '%s': \"dtype\" must be a string, got nothing", e->name);
  if (!(seen & 1u << FIELD_SHAPE)) return bad(r, "tensor '%s': \"shape\" must be an array, got nothing", e->name);
  if (!(seen & 1u << FIELD_OFFSETS))
    return bad(r, "tensor '%s': \"data_offsets\" must be [begin, end], two non-negative integers, got nothing", e->name);
  return check_size(r, e);
}

static ms_status read_tensor_entry(reader *r, ms_json_cursor *c) {
  if (!reserve(r->count, &r->cap, (void **)&r->entries, sizeof *r->entries, (void **)&r->names, sizeof *r->names))
    return out_of_memory(r);
  entry *e = &r->entries[r->count];
  memset(e, 0, sizeof *e);
  if (!(e->name = r->names[r->count] = keep(r, ms_json_key(c)))) return out_of_memory(r);
  int64_t dup = ms_strset_add(&r->by_name, (const char *const *)r->names, (uint32_t)r->count);
  if (dup == -2) return out_of_memory(r);
  if (dup >= 0) return bad(r, "tensor '%s' appears twice in the header", e->name);
  r->count++;
  return read_entry(r, c, e);
}

static ms_status read_metadata(reader *r, ms_json_cursor *c) {
  if (r->has_metadata) return bad(r, "\"__metadata__\" appears twice");
  r->has_metadata = true;
  ms_json_kind k;
  ms_status st = peek_kind(r, c, &k);
  if (st) return st;
  if (k != MS_JSON_OBJECT) return bad(r, "\"__metadata__\" must be an object, got %s", ms_json_kind_name(k));
  ms_json_enter(c);
  while (ms_json_next(c)) {
    int n = r->meta_count;
    if (!reserve(n, &r->meta_cap, (void **)&r->meta_keys, sizeof *r->meta_keys, (void **)&r->meta_values,
                 sizeof *r->meta_values) ||
        !(r->meta_keys[n] = keep(r, ms_json_key(c))))
      return out_of_memory(r);
    if ((st = peek_kind(r, c, &k))) return st;
    if (k != MS_JSON_STRING) return bad(r, "__metadata__ '%s' must be a string, got %s", r->meta_keys[n], ms_json_kind_name(k));
    const char *v = ms_json_read_string(c);
    if (!v) return syntax(r, c);
    if (!(r->meta_values[n] = keep(r, v))) return out_of_memory(r);
    int64_t dup = ms_strset_add(&r->meta_set, (const char *const *)r->meta_keys, (uint32_t)n);
    if (dup == -2) return out_of_memory(r);
    if (dup >= 0) return bad(r, "__metadata__ key '%s' appears twice", r->meta_keys[n]);
    r->meta_count++;
  }
  return ms_json_cursor_error(c) ? syntax(r, c) : MS_OK;
}

static ms_status walk_header(reader *r, ms_json_cursor *c) {
  if (!ms_json_enter(c)) return syntax(r, c);
  while (ms_json_next(c)) {
    ms_status st = strcmp(ms_json_key(c), "__metadata__") == 0 ? read_metadata(r, c) : read_tensor_entry(r, c);
    if (st) return st;
  }
  return ms_json_finish(c) ? MS_OK : syntax(r, c);
}

/* ---- the layout --------------------------------------------------------------------------------- */

static int cmp_entry_begin(const void *a, const void *b) {
  const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
  return x->begin != y->begin ? (x->begin < y->begin ? -1 : 1) : (x->end > y->end) - (x->end < y->end);
}

/* Sorted by offset, the ranges must follow one another with no overlap and no gap, and end at
 * the end of the file: anything else is a corrupt header or bytes that belong to nothing. */
static ms_status check_tiling(const reader *r, entry **by) {
  qsort(by, (size_t)r->count, sizeof *by, cmp_entry_begin);
  uint64_t at = 0;
  for (int i = 0; i < r->count; i++) {
    const entry *e = by[i];
    if (e->begin < at)
      return bad(r, "tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]", e->name,
                 (unsigned long long)e->begin, (unsigned long long)e->end, by[i - 1]->name,
                 (unsigned long long)by[i - 1]->begin, (unsigned long long)by[i - 1]->end);
    if (e->begin > at)
      return bad(r, "tensor '%s': data_offsets begin at %llu, leaving bytes %llu..%llu unused", e->name,
                 (unsigned long long)e->begin, (unsigned long long)at, (unsigned long long)e->begin);
    at = e->end;
  }
  if (at != r->data_len)
    return bad(r, "%llu trailing bytes after the last tensor (data section %llu bytes, tensors cover %llu)",
               (unsigned long long)(r->data_len - at), (unsigned long long)r->data_len, (unsigned long long)at);
  return MS_OK;
}

static ms_status check_layout(reader *r) {
  entry **by = r->by_offset = malloc((size_t)(r->count ? r->count : 1) * sizeof *by);
  if (!by) return out_of_memory(r);
  for (int i = 0; i < r->count; i++) by[i] = &r->entries[i];
  return check_tiling(r, by);
}

/* Reads, walks and checks the header. Its text is freed before returning: only the entries and
 * the string block (at most the header's size) stay. */
static ms_status read_header(reader *r) {
  ms_status st = open_file(r);
  if (st) return st;
  char *text = malloc(r->header_len + 1);
  r->strings_cap = r->header_len + 1;
  r->strings = malloc(r->strings_cap);
  ms_json_cursor *c = NULL;
  if (!text || !r->strings) st = ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory for the header", r->path);
  if (!st) st = read_exact(r, text, r->header_len, "the header");
  r->pos = 8 + r->header_len;
  if (!st && (r->header_len == 0 || text[0] != '{'))
    st = bad(r, "the header does not start with '{' (not a safetensors file, or corrupt)");
  if (!st && !(c = ms_json_cursor_new(text, r->header_len))) st = out_of_memory(r);
  if (!st) st = walk_header(r, c);
  ms_json_cursor_free(c);
  free(text);
  return st ? st : check_layout(r);
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
    st = bad(r, "tensor '%s': could not seek: %s", e->name, strerror(errno));
  if (!st && n) st = read_exact(r, p, n * size, "the tensor data");
  if (n) r->pos = st ? UINT64_MAX : at + n * size; /* after a failure, seek next time */
  if (!st && !ms_st_host_is_little_endian()) ms_st_swap_bytes(p, n, size);
  for (size_t i = 0; !st && e->dtype == MS_BOOL && i < n; i++)
    if (p[i] > 1) st = bad(r, "tensor '%s': bool element %zu has byte value %u (must be 0 or 1)", e->name, i, p[i]);
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
  if (!out->tensors) return out_of_memory(r);
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
  int64_t i = ms_strset_find(&f->r.by_name, (const char *const *)f->r.names, name);
  if (i < 0) return bad(&f->r, "no tensor named '%s'", name), NULL;
  const entry *e = &f->r.entries[i];
  int64_t numel = (int64_t)((e->end - e->begin) / ms_dtype_size(e->dtype));
  if (offset < 0 || count < 0 || offset > numel || count > numel - offset)
    return bad(&f->r, "tensor '%s' has %lld elements; elements [%lld, %lld) are not inside it", name, (long long)numel,
               (long long)offset, (long long)offset + (long long)count),
           NULL;
  ms_tensor *t = NULL;
  read_elements(&f->r, e, (uint64_t)offset, 1, &count, &t);
  return t;
}
