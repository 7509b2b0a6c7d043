/* safetensors_load.c: reading safetensors checkpoints. Nothing in the file is trusted: the
 * header length is checked against the file size before anything is allocated, the JSON is
 * parsed strictly, and every tensor's dtype, shape and byte range are checked (ranges must
 * tile the data section exactly, as the reference library requires) before any tensor is made.
 * Every failure is an MS_ERR_IO naming the file and what is wrong with it. */
#define _POSIX_C_SOURCE 200809L /* fseeko, ftello */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "moonshard/json.h"
#include "io/safetensors_internal.h"
#include "moonshard/io.h"

/* One tensor's entry in the header, checked. */
typedef struct entry {
  const char *name; /* borrowed from the JSON tree */
  ms_dtype dtype;
  int ndim;
  int64_t shape[MS_MAX_DIMS];
  uint64_t begin, end;
} entry;

typedef struct reader {
  const char *path;
  FILE *f;
  uint64_t file_size, header_len, data_len;
  ms_json *root;
  entry *entries;
  int count;
} reader;

static ms_status bad(const reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ms_status bad(const reader *r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ms_error(MS_ERR_IO, "safetensors load '%s': %s", r->path, msg);
}

/* ---- the header --------------------------------------------------------------------------------- */

static ms_status read_exact(reader *r, void *p, size_t n, const char *what) {
  if (n && fread(p, 1, n, r->f) != n)
    return ferror(r->f) ? bad(r, "could not read %s: %s", what, strerror(errno)) : bad(r, "file ends inside %s", what);
  return MS_OK;
}

static ms_status open_file(reader *r) {
  r->f = fopen(r->path, "rb");
  if (!r->f) return ms_error(MS_ERR_IO, "safetensors load '%s': could not open: %s", r->path, strerror(errno));
  off_t size;
  if (fseeko(r->f, 0, SEEK_END) != 0 || (size = ftello(r->f)) < 0 || fseeko(r->f, 0, SEEK_SET) != 0)
    return bad(r, "could not find the file size: %s", strerror(errno));
  r->file_size = (uint64_t)size;
  if (r->file_size < 8)
    return bad(r, "file is %llu bytes, too short for the 8-byte header length (truncated?)",
               (unsigned long long)r->file_size);
  unsigned char len[8];
  ms_status st = read_exact(r, len, 8, "the header length");
  if (st) return st;
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

static ms_status parse_header(reader *r) {
  char *text = malloc(r->header_len + 1);
  if (!text) return ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory for the header", r->path);
  ms_status st = read_exact(r, text, r->header_len, "the header");
  char err[200];
  if (!st && (r->header_len == 0 || text[0] != '{'))
    st = bad(r, "the header does not start with '{' (not a safetensors file, or corrupt)");
  if (!st && !(r->root = ms_json_parse(text, r->header_len, err, sizeof err)))
    st = bad(r, "the header is not valid JSON: %s", err);
  free(text);
  return st;
}

/* ---- one tensor's entry ------------------------------------------------------------------------- */

static ms_status check_dtype(const reader *r, const char *name, const ms_json *v, entry *e) {
  if (!v || v->kind != MS_JSON_STRING)
    return bad(r, "tensor '%s': \"dtype\" must be a string, got %s", name, v ? ms_json_kind_name(v->kind) : "nothing");
  bool other;
  if (ms_st_dtype_parse(v->string, &e->dtype, &other)) return MS_OK;
  if (other) return bad(r, "tensor '%s': dtype %s is not supported by moonshard", name, v->string);
  return bad(r, "tensor '%s': unknown dtype '%s' (expected F32, F64, BF16, F16, I64, I32, U8 or BOOL)", name, v->string);
}

static ms_status check_shape(const reader *r, const char *name, const ms_json *v, entry *e) {
  if (!v || v->kind != MS_JSON_ARRAY)
    return bad(r, "tensor '%s': \"shape\" must be an array, got %s", name, v ? ms_json_kind_name(v->kind) : "nothing");
  if (v->count > MS_MAX_DIMS) return bad(r, "tensor '%s': %d dimensions, more than %d", name, v->count, MS_MAX_DIMS);
  e->ndim = v->count;
  for (int d = 0; d < v->count; d++) {
    const ms_json *s = &v->items[d];
    if (s->kind != MS_JSON_NUMBER || !s->is_uint || s->uint > (uint64_t)INT64_MAX)
      return bad(r, "tensor '%s': shape entry %d is not a non-negative integer", name, d);
    e->shape[d] = (int64_t)s->uint;
  }
  return MS_OK;
}

static ms_status check_offsets(const reader *r, const char *name, const ms_json *v, entry *e) {
  if (!v || v->kind != MS_JSON_ARRAY || v->count != 2 || v->items[0].kind != MS_JSON_NUMBER ||
      v->items[1].kind != MS_JSON_NUMBER || !v->items[0].is_uint || !v->items[1].is_uint)
    return bad(r, "tensor '%s': \"data_offsets\" must be [begin, end], two non-negative integers", name);
  e->begin = v->items[0].uint, e->end = v->items[1].uint;
  if (e->end < e->begin)
    return bad(r, "tensor '%s': data_offsets [%llu, %llu] end before they begin", name,
               (unsigned long long)e->begin, (unsigned long long)e->end);
  if (e->end > r->data_len)
    return bad(r, "tensor '%s': data_offsets [%llu, %llu] run past the end of the data section (%llu bytes; truncated?)",
               name, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)r->data_len);
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

static ms_status check_entry(const reader *r, const char *name, const ms_json *info, entry *e) {
  if (info->kind != MS_JSON_OBJECT)
    return bad(r, "tensor '%s': expected an object {dtype, shape, data_offsets}, got %s", name, ms_json_kind_name(info->kind));
  for (int i = 0; i < info->count; i++)
    for (int j = 0; j < i; j++)
      if (strcmp(info->keys[i], info->keys[j]) == 0) return bad(r, "tensor '%s': field \"%s\" appears twice", name, info->keys[i]);
  e->name = name;
  ms_status st = check_dtype(r, name, ms_json_get(info, "dtype"), e);
  if (!st) st = check_shape(r, name, ms_json_get(info, "shape"), e);
  if (!st) st = check_offsets(r, name, ms_json_get(info, "data_offsets"), e);
  if (!st) st = check_size(r, e);
  return st;
}

/* ---- the whole header --------------------------------------------------------------------------- */

static int cmp_entry_name(const void *a, const void *b) {
  return strcmp((*(const entry *const *)a)->name, (*(const entry *const *)b)->name);
}

static int cmp_entry_begin(const void *a, const void *b) {
  const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
  return x->begin != y->begin ? (x->begin < y->begin ? -1 : 1) : (x->end > y->end) - (x->end < y->end);
}

static ms_status check_names_unique(const reader *r, entry **by) {
  qsort(by, (size_t)r->count, sizeof *by, cmp_entry_name);
  for (int i = 1; i < r->count; i++)
    if (strcmp(by[i - 1]->name, by[i]->name) == 0) return bad(r, "tensor '%s' appears twice in the header", by[i]->name);
  return MS_OK;
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
  entry **by = malloc((size_t)(r->count ? r->count : 1) * sizeof *by);
  if (!by) return ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory", r->path);
  for (int i = 0; i < r->count; i++) by[i] = &r->entries[i];
  ms_status st = check_names_unique(r, by);
  if (!st) st = check_tiling(r, by);
  free(by);
  return st;
}

static ms_status check_metadata(const reader *r, const ms_json *m) {
  if (m->kind != MS_JSON_OBJECT) return bad(r, "\"__metadata__\" must be an object, got %s", ms_json_kind_name(m->kind));
  for (int i = 0; i < m->count; i++) {
    if (m->items[i].kind != MS_JSON_STRING)
      return bad(r, "__metadata__ '%s' must be a string, got %s", m->keys[i], ms_json_kind_name(m->items[i].kind));
    for (int j = 0; j < i; j++)
      if (strcmp(m->keys[i], m->keys[j]) == 0) return bad(r, "__metadata__ key '%s' appears twice", m->keys[i]);
  }
  return MS_OK;
}

static ms_status check_header(reader *r) {
  const ms_json *root = r->root;
  r->entries = calloc((size_t)(root->count ? root->count : 1), sizeof *r->entries);
  if (!r->entries) return ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory", r->path);
  int metadata_seen = 0;
  for (int i = 0; i < root->count; i++) {
    ms_status st;
    if (strcmp(root->keys[i], "__metadata__") == 0) {
      if (metadata_seen++) return bad(r, "\"__metadata__\" appears twice");
      st = check_metadata(r, &root->items[i]);
    } else
      st = check_entry(r, root->keys[i], &root->items[i], &r->entries[r->count++]);
    if (st) return st;
  }
  return check_layout(r);
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
  if (n && fseeko(r->f, (off_t)(8 + r->header_len + e->begin + first * size), SEEK_SET) != 0)
    st = bad(r, "tensor '%s': could not seek: %s", e->name, strerror(errno));
  if (!st && n) st = read_exact(r, p, n * size, "the tensor data");
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

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  return d ? memcpy(d, s, n) : NULL;
}

static ms_status fill_tensors(reader *r, ms_safetensors *out) {
  out->names = calloc((size_t)(r->count ? r->count : 1), sizeof *out->names);
  out->tensors = calloc((size_t)(r->count ? r->count : 1), sizeof *out->tensors);
  if (!out->names || !out->tensors) return ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory", r->path);
  for (int i = 0; i < r->count; i++) {
    out->count = i + 1; /* so that a failure frees what is there */
    if (!(out->names[i] = dup_str(r->entries[i].name)))
      return ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory", r->path);
    ms_status st = read_tensor(r, &r->entries[i], &out->tensors[i]);
    if (st) return st;
  }
  return MS_OK;
}

static ms_status fill_metadata(reader *r, ms_safetensors *out) {
  const ms_json *m = ms_json_get(r->root, "__metadata__");
  if (!m) return MS_OK;
  out->has_metadata = true;
  size_t cap = (size_t)(m->count ? m->count : 1);
  out->meta_keys = calloc(cap, sizeof *out->meta_keys);
  out->meta_values = calloc(cap, sizeof *out->meta_values);
  if (!out->meta_keys || !out->meta_values) return ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory", r->path);
  for (int i = 0; i < m->count; i++) {
    out->meta_count = i + 1;
    out->meta_keys[i] = dup_str(m->keys[i]);
    out->meta_values[i] = dup_str(m->items[i].string);
    if (!out->meta_keys[i] || !out->meta_values[i])
      return ms_error(MS_ERR_MEMORY, "safetensors load '%s': out of memory", r->path);
  }
  return MS_OK;
}

ms_status ms_safetensors_load(const char *path, ms_safetensors *out) {
  memset(out, 0, sizeof *out);
  if (!path) return ms_error(MS_ERR_ARG, "safetensors load: path is NULL");
  reader r = {.path = path};
  ms_status st = open_file(&r);
  if (!st) st = parse_header(&r);
  if (!st) st = check_header(&r);
  if (!st) st = fill_metadata(&r, out);
  if (!st) st = fill_tensors(&r, out);
  if (r.f) fclose(r.f);
  ms_json_free(r.root);
  free(r.entries);
  if (st) ms_safetensors_free(out);
  return st;
}

void ms_safetensors_free(ms_safetensors *st) {
  if (!st) return;
  for (int i = 0; i < st->count; i++) {
    free(st->names[i]);
    ms_tensor_release(st->tensors[i]);
  }
  for (int i = 0; i < st->meta_count; i++) free(st->meta_keys[i]), free(st->meta_values[i]);
  free(st->names);
  free(st->tensors);
  free(st->meta_keys);
  free(st->meta_values);
  memset(st, 0, sizeof *st);
}

/* ---- parts of tensors --------------------------------------------------------------------------- */

struct ms_safetensors_file {
  reader r;
  char *path; /* r.path points here */
};

void ms_safetensors_close(ms_safetensors_file *f) {
  if (!f) return;
  if (f->r.f) fclose(f->r.f);
  ms_json_free(f->r.root);
  free(f->r.entries);
  free(f->path);
  free(f);
}

ms_safetensors_file *ms_safetensors_open(const char *path) {
  if (!path) return ms_error(MS_ERR_ARG, "safetensors open: path is NULL"), NULL;
  ms_safetensors_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = dup_str(path))) {
    free(f);
    return ms_error(MS_ERR_MEMORY, "safetensors open '%s': out of memory", path), NULL;
  }
  f->r.path = f->path;
  ms_status st = open_file(&f->r);
  if (!st) st = parse_header(&f->r);
  if (!st) st = check_header(&f->r);
  if (st) ms_safetensors_close(f), f = NULL;
  return f;
}

ms_tensor *ms_safetensors_read_range(ms_safetensors_file *f, const char *name, int64_t offset, int64_t count) {
  if (!f || !name) return ms_error(MS_ERR_ARG, "safetensors read_range: file and name must not be NULL"), NULL;
  const entry *e = NULL;
  for (int i = 0; i < f->r.count && !e; i++)
    if (strcmp(f->r.entries[i].name, name) == 0) e = &f->r.entries[i];
  if (!e) return bad(&f->r, "no tensor named '%s'", name), NULL;
  int64_t numel = (int64_t)((e->end - e->begin) / ms_dtype_size(e->dtype));
  if (offset < 0 || count < 0 || offset > numel || count > numel - offset)
    return bad(&f->r, "tensor '%s' has %lld elements; elements [%lld, %lld) are not inside it", name, (long long)numel,
               (long long)offset, (long long)offset + (long long)count),
           NULL;
  ms_tensor *t = NULL;
  read_elements(&f->r, e, (uint64_t)offset, 1, &count, &t);
  return t;
}
