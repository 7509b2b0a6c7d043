/* idx.c: the IDX reader (moonshard/idx.h). Nothing in the file is trusted: only a regular file
 * is read, the header is checked field by field, the declared size is compared with what the
 * file can hold before anything is allocated, and the payload must be exactly that size. A
 * file that starts with the gzip magic 1f 8b is inflated here with zlib's inflate (not gzread,
 * which ignores bytes after the stream and reports a CRC error on whatever read is under way),
 * so every error names its stage: the gzip header, the deflate data, the CRC or length in the
 * trailer, bytes after the stream, the magic number, the dimensions, the data length. */
#define _POSIX_C_SOURCE 200809L /* fdopen, fseeko, O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "moonshard/idx.h"

/* Deflate cannot compress better than about 1032:1, so a gzip file of n bytes never expands to
 * more than this many times n: a header declaring more is corrupt, found without allocating. */
#define GZIP_MAX_RATIO 1100u
/* inflate counts in unsigned ints: inflate in pieces well under UINT_MAX. */
#define READ_CHUNK (1u << 30)
#define IN_SIZE (1u << 17)

typedef struct reader {
  const char *path;
  FILE *f;
  bool gzip;          /* the file starts with the gzip magic 1f 8b */
  z_stream z;         /* gzip only */
  bool z_ready;       /* inflateInit2 done */
  bool z_done;        /* the last gzip member ended and nothing follows */
  unsigned char *in;  /* compressed input */
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

static const char *file_kind(mode_t m) {
  return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO (named pipe)" : S_ISCHR(m) ? "a character device"
       : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Opens the file without blocking (a FIFO would block open() itself), refuses anything but a
 * regular file, and finds whether it is gzip-compressed. */
static ms_status open_file(reader *r) {
  int fd = open(r->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return bad(r, "could not open: %s", strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || !(r->f = fdopen(fd, "rb"))) {
    int err = errno;
    bool regular = S_ISREG(sb.st_mode);
    close(fd);
    if (!regular) return bad(r, "%s, not a regular file: only a regular file can be read", file_kind(sb.st_mode));
    return bad(r, "could not open: %s", strerror(err));
  }
  r->file_size = (uint64_t)sb.st_size;
  if (r->file_size == 0) return bad(r, "the file is empty (0 bytes)");
  unsigned char m[2] = {0, 0};
  size_t n = fread(m, 1, 2, r->f);
  r->gzip = n == 2 && m[0] == 0x1f && m[1] == 0x8b;
  if (fseeko(r->f, 0, SEEK_SET) != 0) return bad(r, "could not seek: %s", strerror(errno));
  if (!r->gzip) return MS_OK;
  if (!(r->in = malloc(IN_SIZE))) return ms_error(MS_ERR_MEMORY, "read_idx '%s': out of memory", r->path);
  if (inflateInit2(&r->z, 16 + MAX_WBITS) != Z_OK) /* 16: a gzip wrapper, nothing else */
    return ms_error(MS_ERR_MEMORY, "read_idx '%s': out of memory for zlib", r->path);
  r->z_ready = true;
  return MS_OK;
}

static void close_file(reader *r) {
  if (r->z_ready) inflateEnd(&r->z);
  if (r->f) fclose(r->f);
  free(r->in);
}

/* Tops the compressed input up to `want` bytes if the file has them (keeping what is there). */
static ms_status refill(reader *r, size_t want) {
  z_stream *z = &r->z;
  if (z->avail_in >= want) return MS_OK;
  memmove(r->in, z->next_in ? z->next_in : r->in, z->avail_in);
  z->next_in = r->in;
  z->avail_in += (uInt)fread(r->in + z->avail_in, 1, IN_SIZE - z->avail_in, r->f);
  if (ferror(r->f)) return bad(r, "could not read: %s", strerror(errno));
  return MS_OK;
}

/* A gzip member ended. Another member may follow (gzip -d reads it as more data); anything else
 * is an error: trailing bytes are a damaged or appended-to file, not something to ignore. */
static ms_status after_member(reader *r) {
  z_stream *z = &r->z;
  ms_status st = refill(r, 2);
  if (st) return st;
  if (z->avail_in == 0) return r->z_done = true, MS_OK;
  if (z->avail_in >= 2 && z->next_in[0] == 0x1f && z->next_in[1] == 0x8b) return inflateReset(z), MS_OK;
  off_t at = ftello(r->f);
  uint64_t end = at < 0 ? 0 : (uint64_t)at - z->avail_in;
  uint64_t extra = r->file_size - end;
  return bad(r, "%llu byte%s after the end of the gzip stream (it ends at byte %llu of %llu): the file is damaged "
                "or something was appended to it", (unsigned long long)extra, extra == 1 ? "" : "s",
             (unsigned long long)end, (unsigned long long)r->file_size);
}

/* zlib's verdict on a damaged stream, named by the part of the stream that failed. */
static ms_status gzip_error(const reader *r, int rc, const char *what) {
  const char *msg = r->z.msg ? r->z.msg : "unknown error";
  if (rc == Z_MEM_ERROR) return ms_error(MS_ERR_MEMORY, "read_idx '%s': out of memory in zlib", r->path);
  if (strstr(msg, "data check"))
    return bad(r, "gzip CRC-32 check failed in the trailer after the data: the data does not match its checksum "
                  "(corrupt file)");
  if (strstr(msg, "length check"))
    return bad(r, "gzip length check failed in the trailer after the data: the stream's size does not match the "
                  "data (corrupt file)");
  if (strstr(msg, "header") || strstr(msg, "compression method"))
    return bad(r, "bad gzip header: %s (corrupt file)", msg);
  return bad(r, "corrupt gzip stream: bad deflate data while reading %s: %s", what, msg);
}

/* Up to n bytes of IDX data into p, inflated from a gzip file. */
static ms_status inflate_some(reader *r, unsigned char *p, uint64_t n, const char *what, uint64_t *got,
                              bool *truncated) {
  z_stream *z = &r->z;
  while (*got < n && !r->z_done) {
    ms_status st = refill(r, 1);
    if (st) return st;
    if (z->avail_in == 0) return *truncated = true, MS_OK; /* the file ends inside the stream */
    uInt room = n - *got < READ_CHUNK ? (uInt)(n - *got) : READ_CHUNK;
    z->next_out = p + *got, z->avail_out = room;
    int rc = inflate(z, Z_NO_FLUSH);
    *got += room - z->avail_out;
    if (rc == Z_STREAM_END) {
      if ((st = after_member(r))) return st;
    } else if (rc != Z_OK && (rc != Z_BUF_ERROR || z->avail_out == room))
      return gzip_error(r, rc, what); /* Z_BUF_ERROR with input and room left: no progress possible */
  }
  return MS_OK;
}

/* Reads up to n bytes into p; *got receives how many came. A short count means the data ended
 * (clean end of file or a truncated gzip stream: *truncated tells which); a corrupt gzip stream
 * is an error naming `what`. */
static ms_status read_some(reader *r, void *p, uint64_t n, const char *what, uint64_t *got, bool *truncated) {
  *got = 0, *truncated = false;
  ms_status st = MS_OK;
  if (r->gzip) st = inflate_some(r, p, n, what, got, truncated);
  else {
    *got = fread(p, 1, n, r->f);
    if (ferror(r->f)) st = bad(r, "could not read %s: %s", what, strerror(errno));
  }
  r->offset += *got;
  return st;
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
  ms_status st = open_file(r);
  if (st) return st;
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
  close_file(&r);
  return st;
}

ms_status ms_idx_probe(const char *path, ms_idx_info *info) {
  reader r = {.path = path};
  ms_status st = read_header(&r, info);
  close_file(&r);
  return st;
}
