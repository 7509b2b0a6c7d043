/* safetensors_header.c: a safetensors header's JSON, walked with the cursor of json.c and
 * checked as it is read, building no tree: a hostile 100 MB header costs its text and a string
 * block at most as long, not a node per value. Tensor names and __metadata__ keys go through
 * hash sets (linear time); an entry's known fields through a bitmask; unknown fields are
 * checked as JSON and skipped, as the reference library ignores them. Then the byte ranges must
 * tile the data section exactly, as the reference library requires. */
#include <stdlib.h>
#include <string.h>

#include "io/safetensors_internal.h"
#include "io/safetensors_reader.h"
#include "io/json_stream.h"

static ms_status syntax(const reader *r, const ms_json_cursor *c) {
  const char *why = json_cursor_error(c);
  return st_bad(r, "the header is not valid JSON: %s", why ? why : "unexpected value");
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
  return json_peek(c, k) ? MS_OK : syntax(r, c);
}

/* The next value as a non-negative integer; *ok is false when it is any other value. */
static ms_status read_uint(const reader *r, ms_json_cursor *c, uint64_t *v, bool *ok) {
  ms_json_kind k;
  ms_json n;
  ms_status st = peek_kind(r, c, &k);
  *ok = false;
  if (st || k != MS_JSON_NUMBER) return st;
  if (!json_read_scalar(c, &n)) return syntax(r, c);
  *ok = n.is_uint, *v = n.uint;
  return MS_OK;
}

static ms_status read_dtype(const reader *r, ms_json_cursor *c, entry *e) {
  ms_json_kind k;
  ms_status st = peek_kind(r, c, &k);
  if (st) return st;
  if (k != MS_JSON_STRING) return st_bad(r, "tensor '%s': \"dtype\" must be a string, got %s", e->name, ms_json_kind_name(k));
  const char *name = json_read_string(c);
  if (!name) return syntax(r, c);
  bool other;
  if (st_dtype_parse(name, &e->dtype, &other)) return MS_OK;
  if (other) return st_bad(r, "tensor '%s': dtype %s is not supported by moonshard", e->name, name);
  return st_bad(r, "tensor '%s': unknown dtype '%s' (expected F32, F64, BF16, F16, I64, I32, U8 or BOOL)", e->name, name);
}

static ms_status read_shape(const reader *r, ms_json_cursor *c, entry *e) {
  ms_json_kind k;
  ms_status st = peek_kind(r, c, &k);
  if (st) return st;
  if (k != MS_JSON_ARRAY) return st_bad(r, "tensor '%s': \"shape\" must be an array, got %s", e->name, ms_json_kind_name(k));
  json_enter(c);
  for (e->ndim = 0; json_next(c);) {
    if (e->ndim == MS_MAX_DIMS) return st_bad(r, "tensor '%s': more than %d dimensions", e->name, MS_MAX_DIMS);
    uint64_t v = 0;
    bool ok;
    if ((st = read_uint(r, c, &v, &ok))) return st;
    if (!ok || v > (uint64_t)INT64_MAX)
      return st_bad(r, "tensor '%s': shape entry %d is not a non-negative integer", e->name, e->ndim);
    e->shape[e->ndim++] = (int64_t)v;
  }
  return json_cursor_error(c) ? syntax(r, c) : MS_OK;
}

static ms_status read_offsets(const reader *r, ms_json_cursor *c, entry *e) {
  ms_json_kind k;
  ms_status st = peek_kind(r, c, &k);
  if (st) return st;
  uint64_t v[2] = {0, 0};
  int n = 0;
  bool ok = k == MS_JSON_ARRAY;
  if (ok) {
    json_enter(c);
    while (ok && json_next(c)) {
      if (n == 2) ok = false;
      else if ((st = read_uint(r, c, &v[n++], &ok))) return st;
    }
    if (json_cursor_error(c)) return syntax(r, c);
  }
  if (!ok || n != 2)
    return st_bad(r, "tensor '%s': \"data_offsets\" must be [begin, end], two non-negative integers", e->name);
  e->begin = v[0], e->end = v[1];
  if (e->end < e->begin)
    return st_bad(r, "tensor '%s': data_offsets [%llu, %llu] end before they begin", e->name,
               (unsigned long long)e->begin, (unsigned long long)e->end);
  if (e->end > r->data_len)
    return st_bad(r, "tensor '%s': data_offsets [%llu, %llu] run past the end of the data section (%llu bytes; truncated?)",
               e->name, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)r->data_len);
  return MS_OK;
}
/* numel * element size must be exactly the byte range (computed without overflow). The sizes,
 * a 0 counted as 1, must also multiply within int64: an empty tensor of shape (2^62, 2, 0) holds
 * no bytes, but its strides would overflow. */
static ms_status check_size(const reader *r, const entry *e) {
  uint64_t bytes = ms_dtype_size(e->dtype), span = bytes;
  for (int d = 0; d < e->ndim; d++) {
    uint64_t s = (uint64_t)e->shape[d];
    if (s && bytes > UINT64_MAX / s) return st_bad(r, "tensor '%s': shape is too large", e->name);
    bytes *= s;
    if (span > (uint64_t)INT64_MAX / (s ? s : 1))
      return st_bad(r, "tensor '%s': shape is too large (its sizes multiply past 2^63, zeros aside)", e->name);
    span *= s ? s : 1;
  }
  if (bytes != e->end - e->begin) {
    char shape[MS_SHAPE_STR_LEN];
    return st_bad(r, "tensor '%s': a %s tensor of shape %s needs %llu bytes but data_offsets [%llu, %llu] hold %llu",
               e->name, safetensors_dtype_name(e->dtype), ms_shape_str(e->ndim, e->shape, shape, sizeof shape),
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
    return st_bad(r, "tensor '%s': expected an object {dtype, shape, data_offsets}, got %s", e->name, ms_json_kind_name(k));
  static const char *const fields[N_FIELDS] = {"dtype", "shape", "data_offsets"};
  unsigned seen = 0;
  json_enter(c);
  while (json_next(c)) {
    int f = 0;
    while (f < N_FIELDS && strcmp(json_key(c), fields[f]) != 0) f++;
    if (f == N_FIELDS) {
      if (!json_skip(c)) return syntax(r, c);
      continue;
    }
    if (seen & 1u << f) return st_bad(r, "tensor '%s': field \"%s\" appears twice", e->name, fields[f]);
    seen |= 1u << f;
    st = f == FIELD_DTYPE ? read_dtype(r, c, e) : f == FIELD_SHAPE ? read_shape(r, c, e) : read_offsets(r, c, e);
    if (st) return st;
  }
  if (json_cursor_error(c)) return syntax(r, c);
  if (!(seen & 1u << FIELD_DTYPE)) return st_bad(r, "tensor '%s': \"dtype\" must be a string, got nothing", e->name);
  if (!(seen & 1u << FIELD_SHAPE)) return st_bad(r, "tensor '%s': \"shape\" must be an array, got nothing", e->name);
  if (!(seen & 1u << FIELD_OFFSETS))
    return st_bad(r, "tensor '%s': \"data_offsets\" must be [begin, end], two non-negative integers, got nothing", e->name);
  return check_size(r, e);
}

static ms_status read_tensor_entry(reader *r, ms_json_cursor *c) {
  if (!reserve(r->count, &r->cap, (void **)&r->entries, sizeof *r->entries, (void **)&r->names, sizeof *r->names))
    return st_out_of_memory(r);
  entry *e = &r->entries[r->count];
  memset(e, 0, sizeof *e);
  if (!(e->name = r->names[r->count] = keep(r, json_key(c)))) return st_out_of_memory(r);
  int64_t dup = strset_add(&r->by_name, (const char *const *)r->names, (uint32_t)r->count);
  if (dup == -2) return st_out_of_memory(r);
  if (dup >= 0) return st_bad(r, "tensor '%s' appears twice in the header", e->name);
  r->count++;
  return read_entry(r, c, e);
}

static ms_status read_metadata(reader *r, ms_json_cursor *c) {
  if (r->has_metadata) return st_bad(r, "\"__metadata__\" appears twice");
  r->has_metadata = true;
  ms_json_kind k;
  ms_status st = peek_kind(r, c, &k);
  if (st) return st;
  if (k != MS_JSON_OBJECT) return st_bad(r, "\"__metadata__\" must be an object, got %s", ms_json_kind_name(k));
  json_enter(c);
  while (json_next(c)) {
    int n = r->meta_count;
    if (!reserve(n, &r->meta_cap, (void **)&r->meta_keys, sizeof *r->meta_keys, (void **)&r->meta_values,
                 sizeof *r->meta_values) ||
        !(r->meta_keys[n] = keep(r, json_key(c))))
      return st_out_of_memory(r);
    if ((st = peek_kind(r, c, &k))) return st;
    if (k != MS_JSON_STRING) return st_bad(r, "__metadata__ '%s' must be a string, got %s", r->meta_keys[n], ms_json_kind_name(k));
    const char *v = json_read_string(c);
    if (!v) return syntax(r, c);
    if (!(r->meta_values[n] = keep(r, v))) return st_out_of_memory(r);
    int64_t dup = strset_add(&r->meta_set, (const char *const *)r->meta_keys, (uint32_t)n);
    if (dup == -2) return st_out_of_memory(r);
    if (dup >= 0) return st_bad(r, "__metadata__ key '%s' appears twice", r->meta_keys[n]);
    r->meta_count++;
  }
  return json_cursor_error(c) ? syntax(r, c) : MS_OK;
}

static ms_status walk_header(reader *r, ms_json_cursor *c) {
  if (!json_enter(c)) return syntax(r, c);
  while (json_next(c)) {
    ms_status st = strcmp(json_key(c), "__metadata__") == 0 ? read_metadata(r, c) : read_tensor_entry(r, c);
    if (st) return st;
  }
  return json_finish(c) ? MS_OK : syntax(r, c);
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
      return st_bad(r, "tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]", e->name,
                 (unsigned long long)e->begin, (unsigned long long)e->end, by[i - 1]->name,
                 (unsigned long long)by[i - 1]->begin, (unsigned long long)by[i - 1]->end);
    if (e->begin > at)
      return st_bad(r, "tensor '%s': data_offsets begin at %llu, leaving bytes %llu..%llu unused", e->name,
                 (unsigned long long)e->begin, (unsigned long long)at, (unsigned long long)e->begin);
    at = e->end;
  }
  if (at != r->data_len)
    return st_bad(r, "%llu trailing bytes after the last tensor (data section %llu bytes, tensors cover %llu)",
               (unsigned long long)(r->data_len - at), (unsigned long long)r->data_len, (unsigned long long)at);
  return MS_OK;
}

static ms_status check_layout(reader *r) {
  entry **by = r->by_offset = malloc((size_t)(r->count ? r->count : 1) * sizeof *by);
  if (!by) return st_out_of_memory(r);
  for (int i = 0; i < r->count; i++) by[i] = &r->entries[i];
  return check_tiling(r, by);
}

ms_status st_read_header_json(reader *r, const char *text) {
  ms_json_cursor *c = json_cursor_new(text, r->header_len);
  if (!c) return st_out_of_memory(r);
  ms_status st = walk_header(r, c);
  json_cursor_free(c);
  return st ? st : check_layout(r);
}
