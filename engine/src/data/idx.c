/* idx.c: the IDX reader (moonshard/idx.h). Nothing in the file is trusted: the header is
 * checked field by field, the declared size is compared with what the file can hold before
 * anything is allocated, and the payload must be exactly that size. zlib's gz* functions read
 * raw files transparently, so one path serves both kinds; the gzip test on the first bytes only
 * decides which bound applies and how errors are worded. */
#define _POSIX_C_SOURCE 200809L /* stat */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "moonshard/idx.h"

/* Deflate cannot compress better than about 1032:1, so a gzip file of n bytes never expands to
 * more than this many times n: a header declaring more is corrupt, found without allocating. */
#define GZIP_MAX_RATIO 1100u
/* gzread takes an unsigned and returns an int: read in pieces well under INT_MAX. */
#define READ_CHUNK (1u << 30)

typedef struct reader {
  const char *path;
  gzFile gz;
  bool gzip;          /* the file starts with the gzip magic 1f 8b */
  uint64_t file_size; /* on disk (compressed size for gzip) */
  uint64_t offset;    /* bytes of IDX data consumed so far (header included) */
} reader;

static ms_status bad(const reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ms_status bad(const reader *r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ms_error(MS_ERR_IO, "read_idx '%s': %s", r->path, msg);
}

static uint32_t get_u32be(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Size and kind of the file, before zlib opens it (so a missing file or a directory is named as
 * such rather than as a read error). */
static ms_status probe(reader *r) {
  struct stat sb;
  if (stat(r->path, &sb) != 0) return bad(r, "could not open: %s", strerror(errno));
  if (!S_ISREG(sb.st_mode)) return bad(r, "not a regular file");
  r->file_size = (uint64_t)sb.st_size;
  if (r->file_size == 0) return bad(r, "the file is empty (0 bytes)");
  FILE *f = fopen(r->path, "rb");
  if (!f) return bad(r, "could not open: %s", strerror(errno));
  unsigned char m[2] = {0, 0};
  size_t n = fread(m, 1, 2, f);
  fclose(f);
  r->gzip = n == 2 && m[0] == 0x1f && m[1] == 0x8b;
  return MS_OK;
}

/* Reads up to n bytes into p; *got receives how many came. A short count means the data ended
 * (clean end of file or a truncated gzip stream: *truncated tells which); a corrupt gzip stream
 * is an error naming `what`. */
static ms_status read_some(reader *r, void *p, uint64_t n, const char *what, uint64_t *got, bool *truncated) {
  *got = 0, *truncated = false;
  while (*got < n) {
    uint64_t want = n - *got < READ_CHUNK ? n - *got : READ_CHUNK;
    int k = gzread(r->gz, (unsigned char *)p + *got, (unsigned)want);
    int errnum = Z_OK;
    const char *zmsg = gzerror(r->gz, &errnum);
    if (k < 0 || (errnum != Z_OK && errnum != Z_BUF_ERROR)) {
      if (errnum == Z_ERRNO) return bad(r, "could not read %s: %s", what, strerror(errno));
      return bad(r, "corrupt gzip data in %s: %s", what, zmsg);
    }
    *got += (uint64_t)k;
    if (k == 0) {
      *truncated = errnum == Z_BUF_ERROR; /* zlib's "unexpected end of file" inside the stream */
      break;
    }
  }
  r->offset += *got;
  return MS_OK;
}

/* Exactly n bytes of the header, or an error saying where the file ends. */
static ms_status read_header_part(reader *r, void *p, uint64_t n, const char *what) {
  uint64_t got;
  bool truncated;
  ms_status st = read_some(r, p, n, what, &got, &truncated);
  if (st || got == n) return st;
  return bad(r, "the %s ends inside %s (%llu of %llu bytes; truncated, or not an IDX file)",
             truncated ? "gzip stream" : "file", what, (unsigned long long)got, (unsigned long long)n);
}

static const char *type_name(unsigned code) {
  switch (code) {
  case MS_IDX_INT8: return "int8";
  case MS_IDX_INT16: return "int16";
  case MS_IDX_INT32: return "int32";
  case MS_IDX_FLOAT32: return "float32";
  case MS_IDX_FLOAT64: return "float64";
  default: return NULL;
  }
}

static ms_status check_magic(const reader *r, const unsigned char m[4], int *ndim) {
  uint32_t magic = get_u32be(m);
  if (m[0] != 0 || m[1] != 0)
    return bad(r, "bad magic number 0x%08X: an IDX file starts with two zero bytes, a type code and a "
                  "dimension count (not an IDX file%s)",
               (unsigned)magic, r->gzip ? "" : ", or compressed other than with gzip");
  if (m[2] != MS_IDX_UINT8) {
    const char *name = type_name(m[2]);
    if (name) return bad(r, "element type 0x%02X (%s) is not supported: only 0x08 (unsigned byte) is read", m[2], name);
    return bad(r, "unknown element type 0x%02X in the magic number 0x%08X (IDX uses 0x08, 0x09, 0x0B..0x0E)",
               m[2], (unsigned)magic);
  }
  if (m[3] < 1 || m[3] > MS_MAX_DIMS)
    return bad(r, "dimension count %u in the magic number 0x%08X is out of range (1 to %d)", m[3],
               (unsigned)magic, MS_MAX_DIMS);
  *ndim = m[3];
  return MS_OK;
}

/* Reads the sizes; rejects zero sizes and products that overflow. *bytes receives the payload size. */
static ms_status read_shape(reader *r, int ndim, int64_t *shape, uint64_t *bytes) {
  unsigned char buf[4 * MS_MAX_DIMS];
  char what[64];
  snprintf(what, sizeof what, "the sizes of the %d dimensions", ndim);
  ms_status st = read_header_part(r, buf, 4 * (uint64_t)ndim, what);
  if (st) return st;
  *bytes = 1;
  for (int d = 0; d < ndim; d++) shape[d] = get_u32be(buf + 4 * d);
  char s[MS_SHAPE_STR_LEN];
  ms_shape_str(ndim, shape, s, sizeof s);
  if (shape[0] == 0) return bad(r, "contains no items (the header's shape is %s)", s);
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 0) return bad(r, "dimension %d has size 0 in the header's shape %s: items would be empty", d + 1, s);
    if (*bytes > (uint64_t)INT64_MAX / (uint64_t)shape[d])
      return bad(r, "the header's shape %s is too large to be real (corrupt header)", s);
    *bytes *= (uint64_t)shape[d];
  }
  return MS_OK;
}

/* Before allocating: can the file hold the declared payload at all? */
static ms_status check_fits(const reader *r, int ndim, const int64_t *shape, uint64_t bytes) {
  char s[MS_SHAPE_STR_LEN];
  ms_shape_str(ndim, shape, s, sizeof s);
  uint64_t header = r->offset;
  if (!r->gzip && r->file_size - header != bytes)
    return bad(r, "the header's shape %s needs %llu bytes of data but the file holds %llu after the "
                  "%llu-byte header (%s)", s, (unsigned long long)bytes, (unsigned long long)(r->file_size - header),
               (unsigned long long)header, r->file_size - header < bytes ? "truncated" : "extra bytes at the end");
  if (r->gzip && bytes / GZIP_MAX_RATIO > r->file_size)
    return bad(r, "the header's shape %s needs %llu bytes of data, more than a %llu-byte gzip file can "
                  "hold (corrupt header)", s, (unsigned long long)bytes, (unsigned long long)r->file_size);
  return MS_OK;
}

/* The payload into t, then proof that nothing follows it (for gzip this reads the trailer, so
 * zlib also checks the CRC). */
static ms_status read_payload(reader *r, ms_tensor *t, uint64_t bytes) {
  char s[MS_SHAPE_STR_LEN];
  ms_shape_str(t->ndim, t->shape, s, sizeof s);
  uint64_t got;
  bool truncated;
  ms_status st = read_some(r, ms_tensor_data(t), bytes, "the data", &got, &truncated);
  if (st) return st;
  if (got < bytes)
    return bad(r, "the %s after %llu of the %llu data bytes that the header's shape %s needs (truncated%s)",
               truncated ? "gzip stream is cut off" : "data end", (unsigned long long)got,
               (unsigned long long)bytes, s, truncated ? " download?" : "?");
  unsigned char extra;
  st = read_some(r, &extra, 1, "the end of the gzip stream", &got, &truncated);
  if (st) return st;
  if (got)
    return bad(r, "extra bytes after the %llu data bytes that the header's shape %s needs", (unsigned long long)bytes, s);
  if (truncated) return bad(r, "the gzip stream is cut off after the data, before its trailer (truncated download?)");
  return MS_OK;
}

/* Opens the file and reads and checks everything before the payload. */
static ms_status read_header(reader *r, ms_idx_info *info) {
  ms_status st = probe(r);
  if (st) return st;
  r->gz = gzopen(r->path, "rb");
  if (!r->gz) return bad(r, "could not open: %s", errno ? strerror(errno) : "out of memory");
  gzbuffer(r->gz, 1u << 17);
  unsigned char magic[4];
  uint64_t bytes;
  if ((st = read_header_part(r, magic, 4, "the magic number")) || (st = check_magic(r, magic, &info->ndim)) ||
      (st = read_shape(r, info->ndim, info->shape, &bytes)) || (st = check_fits(r, info->ndim, info->shape, bytes)))
    return st;
  info->header_bytes = r->offset, info->payload_bytes = bytes, info->gzip = r->gzip;
  return MS_OK;
}

static ms_status read_file(reader *r, ms_tensor **out) {
  ms_idx_info info;
  ms_status st = read_header(r, &info);
  if (st) return st;
  ms_tensor *t = ms_tensor_new_empty(info.ndim, info.shape, MS_UINT8);
  if (!t)
    return ms_error(MS_ERR_MEMORY, "read_idx '%s': out of memory for %llu bytes of data", r->path,
                    (unsigned long long)info.payload_bytes);
  if ((st = read_payload(r, t, info.payload_bytes))) {
    ms_tensor_release(t);
    return st;
  }
  *out = t;
  return MS_OK;
}

ms_status ms_idx_read(const char *path, ms_tensor **out) {
  *out = NULL;
  reader r = {.path = path};
  ms_status st = read_file(&r, out);
  if (r.gz) gzclose_r(r.gz);
  return st;
}

ms_status ms_idx_probe(const char *path, ms_idx_info *info) {
  reader r = {.path = path};
  ms_status st = read_header(&r, info);
  if (r.gz) gzclose_r(r.gz);
  return st;
}
