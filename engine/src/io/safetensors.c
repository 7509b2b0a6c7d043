/* safetensors.c: writing safetensors checkpoints. The header is built in memory first (so every
 * argument is checked before a file exists), then header and data stream to a temporary file
 * that is fsync'd and renamed over the target (atomic_file.c): a crash never leaves half a file
 * under the real name. Reading lives in safetensors_load.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/json_stream.h"
#include "io/safetensors_internal.h"
#include "moonshard/io.h"

/* ---- shared with the reader ---------------------------------------------------------------------- */

static const char *const st_names[MS_DTYPE_COUNT] = {
    [MS_FLOAT32] = "F32", [MS_FLOAT64] = "F64", [MS_BFLOAT16] = "BF16", [MS_FLOAT16] = "F16",
    [MS_INT64] = "I64",   [MS_INT32] = "I32",   [MS_UINT8] = "U8",      [MS_BOOL] = "BOOL",
};

const char *safetensors_dtype_name(ms_dtype dt) {
  return (dt >= 0 && dt < MS_DTYPE_COUNT) ? st_names[dt] : "?";
}

bool st_dtype_parse(const char *name, ms_dtype *out, bool *known_elsewhere) {
  static const char *const others[] = {"I8", "I16", "U16", "U32", "U64", "F8_E5M2", "F8_E4M3", NULL};
  *known_elsewhere = false;
  for (int i = 0; i < MS_DTYPE_COUNT; i++)
    if (strcmp(name, st_names[i]) == 0) return *out = (ms_dtype)i, true;
  for (int i = 0; others[i]; i++)
    if (strcmp(name, others[i]) == 0) *known_elsewhere = true;
  return false;
}

bool st_host_is_little_endian(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

void st_swap_bytes(void *data, size_t n, size_t size) {
  unsigned char *p = data;
  for (size_t i = 0; i < n && size > 1; i++, p += size)
    for (size_t a = 0, b = size - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b], p[b] = t;
    }
}

void st_put_u64le(unsigned char out[8], uint64_t v) {
  for (int i = 0; i < 8; i++) out[i] = (unsigned char)(v >> (8 * i));
}

uint64_t st_get_u64le(const unsigned char in[8]) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | in[i];
  return v;
}

/* ---- checking the arguments ---------------------------------------------------------------------- */

static int cmp_str_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first string that occurs twice in s[0..n), or NULL (sorting a copy keeps this n log n,
 * which matters for checkpoints of many thousand tensors). *oom is set if the copy failed. */
static const char *first_duplicate(int n, const char *const *s, bool *oom) {
  *oom = false;
  if (n < 2) return NULL;
  const char **sorted = malloc((size_t)n * sizeof *sorted);
  if (!sorted) return *oom = true, NULL;
  memcpy(sorted, s, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_str_ptr);
  const char *dup = NULL;
  for (int i = 1; i < n && !dup; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0) dup = sorted[i];
  free(sorted);
  return dup;
}

/* Prefixes the engine's last error with the file and tensor (copied first: ms_error writes the
 * buffer that ms_error_last points into). */
static ms_status rethrow(ms_status st, const char *path, const char *name) {
  char cause[512];
  snprintf(cause, sizeof cause, "%s", ms_error_last());
  return ms_error(st, "safetensors save '%s': tensor '%s': %s", path, name, cause);
}

static ms_status check_strings(const char *path, int n, const char *const *s, const char *what) {
  for (int i = 0; i < n; i++) {
    if (!s[i]) return ms_error(MS_ERR_ARG, "safetensors save '%s': %s %d is NULL", path, what, i);
    if (!ms_json_utf8_valid(s[i], strlen(s[i])))
      return ms_error(MS_ERR_ARG, "safetensors save '%s': %s '%s' is not valid UTF-8", path, what, s[i]);
  }
  return MS_OK;
}

static ms_status check_unique(const char *path, int n, const char *const *s, const char *what) {
  bool oom;
  const char *dup = first_duplicate(n, s, &oom);
  if (oom) return ms_error(MS_ERR_MEMORY, "safetensors save '%s': out of memory", path);
  if (dup) return ms_error(MS_ERR_ARG, "safetensors save '%s': %s '%s' appears twice", path, what, dup);
  return MS_OK;
}

static ms_status check_tensors(const char *path, int n, const char *const *names, ms_tensor *const *tensors) {
  ms_status st;
  if ((st = check_strings(path, n, names, "tensor name")) || (st = check_unique(path, n, names, "tensor name")))
    return st;
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i], "__metadata__") == 0)
      return ms_error(MS_ERR_ARG, "safetensors save '%s': '__metadata__' is reserved and cannot name a tensor", path);
    if (!tensors[i]) return ms_error(MS_ERR_ARG, "safetensors save '%s': tensor '%s' is NULL", path, names[i]);
    if (tensors[i]->storage->device.type != MS_CPU)
      return ms_error(MS_ERR_ARG, "safetensors save '%s': tensor '%s' is not on the CPU; copy it there first",
                      path, names[i]);
    if (ms_tensor_check_data("safetensors save", tensors[i]) != MS_OK) return rethrow(MS_ERR_ARG, path, names[i]);
  }
  return MS_OK;
}

static ms_status check_args(const char *path, int n, const char *const *names, ms_tensor *const *tensors,
                            int n_meta, const char *const *keys, const char *const *values) {
  if (!path) return ms_error(MS_ERR_ARG, "safetensors save: path is NULL");
  if (n < 0 || (n > 0 && (!names || !tensors)))
    return ms_error(MS_ERR_ARG, "safetensors save '%s': %d tensors with names %p and tensors %p", path, n,
                    (const void *)names, (const void *)tensors);
  if (keys && (n_meta < 0 || (n_meta > 0 && !values)))
    return ms_error(MS_ERR_ARG, "safetensors save '%s': %d metadata entries without values", path, n_meta);
  ms_status st = check_tensors(path, n, names, tensors);
  if (st || !keys) return st;
  if ((st = check_strings(path, n_meta, keys, "metadata key")) || (st = check_unique(path, n_meta, keys, "metadata key")))
    return st;
  for (int i = 0; i < n_meta; i++) {
    if (!values[i]) return ms_error(MS_ERR_ARG, "safetensors save '%s': metadata value of '%s' is NULL", path, keys[i]);
    if (!ms_json_utf8_valid(values[i], strlen(values[i])))
      return ms_error(MS_ERR_ARG, "safetensors save '%s': metadata value of '%s' is not valid UTF-8", path, keys[i]);
  }
  return MS_OK;
}

/* ---- the header ------------------------------------------------------------------------------------- */

static uint64_t tensor_nbytes(const ms_tensor *t) {
  return (uint64_t)ms_tensor_numel(t) * ms_dtype_size(t->dtype);
}

static void put_tensor_info(ms_json_buf *b, const char *name, const ms_tensor *t, uint64_t begin) {
  json_buf_str(b, name);
  json_buf_raw(b, ":{\"dtype\":", 10);
  json_buf_str(b, st_names[t->dtype]);
  json_buf_raw(b, ",\"shape\":[", 10);
  for (int d = 0; d < t->ndim; d++) {
    if (d) json_buf_raw(b, ",", 1);
    json_buf_uint(b, (uint64_t)t->shape[d]);
  }
  json_buf_raw(b, "],\"data_offsets\":[", 18);
  json_buf_uint(b, begin);
  json_buf_raw(b, ",", 1);
  json_buf_uint(b, begin + tensor_nbytes(t));
  json_buf_raw(b, "]}", 2);
}

/* Compact JSON as serde_json writes it, "__metadata__" first, padded with spaces to a multiple
 * of 8 so that the data starts aligned (the reference library does the same). */
static ms_status build_header(ms_json_buf *b, const char *path, int n, const char *const *names,
                              ms_tensor *const *tensors, int n_meta, const char *const *keys,
                              const char *const *values) {
  json_buf_raw(b, "{", 1);
  if (keys) {
    json_buf_raw(b, "\"__metadata__\":{", 16);
    for (int i = 0; i < n_meta; i++) {
      if (i) json_buf_raw(b, ",", 1);
      json_buf_str(b, keys[i]);
      json_buf_raw(b, ":", 1);
      json_buf_str(b, values[i]);
    }
    json_buf_raw(b, n > 0 ? "}," : "}", n > 0 ? 2 : 1);
  }
  uint64_t offset = 0;
  for (int i = 0; i < n; i++) {
    if (i) json_buf_raw(b, ",", 1);
    put_tensor_info(b, names[i], tensors[i], offset);
    offset += tensor_nbytes(tensors[i]);
  }
  json_buf_raw(b, "}", 1);
  while (!b->failed && b->len % 8) json_buf_raw(b, " ", 1);
  if (b->failed) return ms_error(MS_ERR_MEMORY, "safetensors save '%s': out of memory building the header", path);
  return MS_OK;
}

/* ---- the file --------------------------------------------------------------------------------------- */

static ms_status write_error(const char *path, const char *what) {
  return ms_error(MS_ERR_IO, "safetensors save '%s': %s: %s", path, what, strerror(errno));
}

static ms_status write_bytes(FILE *f, const char *path, const void *p, size_t n) {
  if (n && fwrite(p, 1, n, f) != n) return write_error(path, "could not write");
  return MS_OK;
}

/* The data of one tensor, little-endian: written straight from memory on a little-endian host,
 * else through a bounded buffer in which each element's bytes are reversed. */
static ms_status write_tensor(FILE *f, const char *path, const char *name, ms_tensor *t) {
  ms_tensor *c = ms_tensor_contiguous(t);
  if (!c) return rethrow(MS_ERR_MEMORY, path, name);
  size_t size = ms_dtype_size(c->dtype), n = (size_t)ms_tensor_numel(c);
  const unsigned char *src = ms_tensor_data(c);
  ms_status st = MS_OK;
  if (n == 0) {
  } else if (size == 1 || st_host_is_little_endian()) {
    st = write_bytes(f, path, src, n * size);
  } else {
    enum { CHUNK = 1 << 16 };
    unsigned char buf[CHUNK];
    for (size_t done = 0; done < n && st == MS_OK;) {
      size_t k = n - done < CHUNK / size ? n - done : CHUNK / size;
      memcpy(buf, src + done * size, k * size);
      st_swap_bytes(buf, k, size);
      st = write_bytes(f, path, buf, k * size);
      done += k;
    }
  }
  ms_tensor_release(c);
  return st;
}

static ms_status write_all(FILE *f, const char *path, const ms_json_buf *header, int n,
                           const char *const *names, ms_tensor *const *tensors) {
  unsigned char len[8];
  st_put_u64le(len, header->len);
  ms_status st = write_bytes(f, path, len, 8);
  if (!st) st = write_bytes(f, path, header->data, header->len);
  for (int i = 0; i < n && !st; i++) st = write_tensor(f, path, names[i], tensors[i]);
  return st;
}

static ms_status write_file(const char *path, const ms_json_buf *header, int n, const char *const *names,
                            ms_tensor *const *tensors) {
  ms_atomic_file af;
  ms_status st = atomic_file_open(&af, path, "safetensors save");
  if (!st) st = write_all(af.f, path, header, n, names, tensors);
  if (st) atomic_file_abort(&af);
  else st = atomic_file_commit(&af);
  return st;
}

ms_status ms_safetensors_save(const char *path, int n, const char *const *names, ms_tensor *const *tensors,
                              int n_meta, const char *const *meta_keys, const char *const *meta_values) {
  ms_status st = check_args(path, n, names, tensors, n_meta, meta_keys, meta_values);
  if (st) return st;
  ms_json_buf header = {0};
  st = build_header(&header, path, n, names, tensors, n_meta, meta_keys, meta_values);
  if (!st) st = write_file(path, &header, n, names, tensors);
  json_buf_free(&header);
  return st;
}
