/* test_idx.c: the IDX reader on small files made here, raw and gzip-compressed: round trips,
 * and one clear error (naming the file) for each way a file can be malformed. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, mkfifo */
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "moonshard/moonshard.h"
#include "test.h"

static char dir[64];

static const char *path_of(const char *name) {
  static char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return p;
}

/* An IDX image in memory: magic bytes m0..m3, sizes, then `payload` bytes of a fixed pattern
 * that deflate cannot shrink much (so truncating a .gz cuts into the data). */
static size_t make_idx(unsigned char *buf, unsigned type, int ndim, const uint32_t *sizes, size_t payload) {
  size_t n = 0;
  buf[n++] = 0, buf[n++] = 0, buf[n++] = (unsigned char)type, buf[n++] = (unsigned char)ndim;
  for (int d = 0; d < ndim; d++)
    for (int b = 3; b >= 0; b--) buf[n++] = (unsigned char)(sizes[d] >> (8 * b));
  uint32_t x = 12345;
  for (size_t i = 0; i < payload; i++) x = x * 1103515245u + 12345u, buf[n++] = (unsigned char)(x >> 16);
  return n;
}

static void write_raw(const char *name, const unsigned char *buf, size_t n) {
  FILE *f = fopen(path_of(name), "wb");
  fwrite(buf, 1, n, f);
  fclose(f);
}

static void write_gz(const char *name, const unsigned char *buf, size_t n) {
  gzFile g = gzopen(path_of(name), "wb");
  gzwrite(g, buf, (unsigned)n);
  gzclose(g);
}

static long file_size(const char *name) {
  FILE *f = fopen(path_of(name), "rb");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

static void chop(const char *name, long keep) { CHECK(truncate(path_of(name), keep) == 0); }

/* Reading `name` fails with an error holding `needle` and the file's path. */
static void expect_error(const char *name, const char *needle) {
  ms_tensor *t = (ms_tensor *)1;
  ms_status st = ms_idx_read(path_of(name), &t);
  CHECK(st == MS_ERR_IO);
  CHECK(t == NULL);
  CHECK_ERROR_HAS(needle);
  CHECK_ERROR_HAS(path_of(name));
}

static unsigned char buf[1 << 18], want[1 << 18];

static void test_round_trip(const char *name, bool gz) {
  uint32_t sizes[3] = {3, 2, 4};
  size_t n = make_idx(buf, 0x08, 3, sizes, 24);
  gz ? write_gz(name, buf, n) : write_raw(name, buf, n);
  ms_tensor *t = NULL;
  CHECK(ms_idx_read(path_of(name), &t) == MS_OK);
  if (!t) return;
  CHECK(t->dtype == MS_UINT8 && t->ndim == 3 && t->shape[0] == 3 && t->shape[1] == 2 && t->shape[2] == 4);
  CHECK(ms_tensor_is_contiguous(t));
  CHECK(memcmp(ms_tensor_data(t), buf + 16, 24) == 0);
  ms_tensor_release(t);
}

static void test_labels_1d(void) {
  uint32_t sizes[1] = {100000};
  size_t n = make_idx(buf, 0x08, 1, sizes, 100000);
  write_gz("labels.gz", buf, n);
  ms_tensor *t = NULL;
  CHECK(ms_idx_read(path_of("labels.gz"), &t) == MS_OK);
  if (!t) return;
  CHECK(t->ndim == 1 && t->shape[0] == 100000);
  CHECK(memcmp(ms_tensor_data(t), buf + 8, 100000) == 0);
  ms_tensor_release(t);
}

static void test_header_errors(void) {
  uint32_t sizes[3] = {2, 2, 2};
  size_t n = make_idx(buf, 0x08, 3, sizes, 8);
  buf[0] = 0x01;
  write_raw("magic", buf, n);
  expect_error("magic", "bad magic number 0x01000803");
  n = make_idx(buf, 0x0D, 3, sizes, 32);
  write_raw("float", buf, n);
  expect_error("float", "element type 0x0D (float32) is not supported");
  n = make_idx(buf, 0x07, 3, sizes, 8);
  write_raw("type7", buf, n);
  expect_error("type7", "unknown element type 0x07");
  n = make_idx(buf, 0x08, 0, sizes, 8);
  write_raw("ndim0", buf, n);
  expect_error("ndim0", "dimension count 0 in the magic number");
  buf[3] = 17;
  write_raw("ndim17", buf, n);
  expect_error("ndim17", "dimension count 17");
  n = make_idx(buf, 0x08, 3, sizes, 8);
  write_raw("short_sizes", buf, 9);
  expect_error("short_sizes", "the file ends inside the sizes of the 3 dimensions (5 of 12 bytes");
  write_raw("short_magic", buf, 3);
  expect_error("short_magic", "ends inside the magic number (3 of 4 bytes");
  write_raw("empty", buf, 0);
  expect_error("empty", "the file is empty");
  write_gz("short_magic.gz", buf, 2);
  expect_error("short_magic.gz", "ends inside the magic number (2 of 4 bytes");
}

static void test_zero_sizes(void) {
  uint32_t zero_items[3] = {0, 28, 28}, zero_inner[3] = {5, 0, 28};
  size_t n = make_idx(buf, 0x08, 3, zero_items, 0);
  write_raw("zero_items", buf, n);
  expect_error("zero_items", "contains no items (the header's shape is (0, 28, 28))");
  write_gz("zero_items.gz", buf, n);
  expect_error("zero_items.gz", "contains no items");
  n = make_idx(buf, 0x08, 3, zero_inner, 0);
  write_raw("zero_inner", buf, n);
  expect_error("zero_inner", "dimension 2 has size 0");
}

static void test_payload_size_raw(void) {
  uint32_t sizes[3] = {10, 28, 28};
  size_t n = make_idx(buf, 0x08, 3, sizes, 7840);
  write_raw("short_payload", buf, n - 1);
  expect_error("short_payload", "needs 7840 bytes of data but the file holds 7839 after the 16-byte header (truncated)");
  write_raw("long_payload", buf, n);
  FILE *f = fopen(path_of("long_payload"), "ab");
  fputc(0, f);
  fclose(f);
  expect_error("long_payload", "holds 7841 after the 16-byte header (extra bytes at the end)");
}

static void test_huge_sizes(void) {
  uint32_t overflow[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, big[3] = {100000000, 28, 28};
  size_t n = make_idx(buf, 0x08, 3, overflow, 16);
  write_raw("overflow", buf, n);
  expect_error("overflow", "is too large to be real");
  n = make_idx(buf, 0x08, 3, big, 16);
  write_raw("big", buf, n);
  expect_error("big", "needs 78400000000 bytes of data but the file holds 16");
  write_gz("big.gz", buf, n);
  expect_error("big.gz", "needs 78400000000 bytes of data, more than a");
}

static void test_gzip_damage(void) {
  uint32_t sizes[2] = {1000, 100};
  size_t n = make_idx(buf, 0x08, 2, sizes, 100000);
  write_gz("cut.gz", buf, n);
  long size = file_size("cut.gz");
  chop("cut.gz", size / 2);
  expect_error("cut.gz", "the gzip stream is cut off after");
  expect_error("cut.gz", "of the 100000 data bytes that the header's shape (1000, 100) needs (truncated download?)");
  write_gz("trailer.gz", buf, n);
  chop("trailer.gz", file_size("trailer.gz") - 4);
  expect_error("trailer.gz", "before its trailer");
  write_gz("corrupt.gz", buf, n);
  FILE *f = fopen(path_of("corrupt.gz"), "r+b");
  fseek(f, size / 2, SEEK_SET);
  for (int i = 0; i < 64; i++) fputc(0xFF, f);
  fclose(f);
  expect_error("corrupt.gz", "gzip CRC-32 check failed"); /* these 64 bytes still inflate, to other data */
  write_gz("short_data.gz", buf, n - 10); /* a complete stream that holds too little */
  expect_error("short_data.gz", "the data end after 99990 of the 100000 data bytes");
  memcpy(want, buf, n);
  want[n] = 7;
  write_gz("long_data.gz", want, n + 1);
  expect_error("long_data.gz", "extra bytes after the 100000 data bytes");
}

/* Appends n bytes of `byte` to a file. */
static void append(const char *name, unsigned char byte, int n) {
  FILE *f = fopen(path_of(name), "ab");
  for (int i = 0; i < n; i++) fputc(byte, f);
  fclose(f);
}

static void poke(const char *name, long at, unsigned char byte) {
  FILE *f = fopen(path_of(name), "r+b");
  fseek(f, at, SEEK_SET);
  fputc(byte, f);
  fclose(f);
}

/* Errors name the stage that failed (issue 17: bytes after the stream were accepted, and on a
 * small file a CRC error was reported as "corrupt gzip data in the magic number"). */
static void test_gzip_stages(void) {
  uint32_t sizes[2] = {3, 4};
  size_t n = make_idx(buf, 0x08, 2, sizes, 12);
  const char *junk[] = {"junk.gz", "zeros.gz", "one.gz"};
  for (int i = 0; i < 3; i++) {
    write_gz(junk[i], buf, n);
    append(junk[i], i == 0 ? 'x' : i == 1 ? 0 : 0x1f, i == 2 ? 1 : 7);
    expect_error(junk[i], i == 2 ? "1 byte after the end of the gzip stream" : "7 bytes after the end of the gzip stream");
  }
  write_gz("crc.gz", buf, n);
  long size = file_size("crc.gz");
  poke("crc.gz", size - 8, 0x5a); /* the trailer: CRC-32, then the length */
  expect_error("crc.gz", "gzip CRC-32 check failed in the trailer after the data");
  CHECK(!strstr(ms_error_last(), "magic"));
  write_gz("isize.gz", buf, n);
  poke("isize.gz", size - 1, 0x5a);
  expect_error("isize.gz", "gzip length check failed");
  write_gz("method.gz", buf, n);
  poke("method.gz", 2, 7); /* deflate is method 8 */
  expect_error("method.gz", "bad gzip header");
  write_gz("block.gz", buf, n);
  poke("block.gz", 10, 0xff); /* first deflate byte: block type 3 does not exist */
  expect_error("block.gz", "bad deflate data while reading the magic number");
  /* two gzip members are one gzip file (gzip -d reads both): split the IDX between them */
  write_gz("two.gz", buf, 10);
  gzFile g = gzopen(path_of("two.gz"), "ab");
  gzwrite(g, buf + 10, (unsigned)(n - 10));
  gzclose(g);
  ms_tensor *t = NULL;
  CHECK(ms_idx_read(path_of("two.gz"), &t) == MS_OK);
  CHECK(t && t->shape[0] == 3 && memcmp(ms_tensor_data(t), buf + 12, 12) == 0);
  ms_tensor_release(t);
}

static void test_open_errors(void) {
  expect_error("missing", "could not open: No such file or directory");
  ms_tensor *t = NULL;
  CHECK(ms_idx_read(dir, &t) == MS_ERR_IO && t == NULL);
  CHECK_ERROR_HAS("a directory, not a regular file");
  /* a FIFO is refused at once; read in a child under an alarm so that a regression fails */
  CHECK(mkfifo(path_of("fifo"), 0600) == 0);
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    bool read_refused = ms_idx_read(path_of("fifo"), &t) == MS_ERR_IO && strstr(ms_error_last(), "a FIFO (named pipe)");
    ms_idx_rows *rows = NULL;
    bool rows_refused = ms_idx_rows_open(path_of("fifo"), &rows) == MS_ERR_IO && rows == NULL;
    _exit(read_refused && rows_refused ? 0 : 1);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void cleanup(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* Rows read on demand hold what the whole read holds, one read per run of consecutive rows or
 * not; a gzip file is refused (it cannot be read in place); a bad row and a file that shrank
 * after opening are errors, not crashes. */
static void test_rows(void) {
  uint32_t sizes[3] = {5, 2, 3};
  size_t n = make_idx(buf, 0x08, 3, sizes, 30);
  write_raw("rows.idx", buf, n);
  ms_idx_rows *f = NULL;
  CHECK(ms_idx_rows_open(path_of("rows.idx"), &f) == MS_OK);
  if (!f) return;
  const ms_idx_info *in = ms_idx_rows_info(f);
  CHECK(in->ndim == 3 && in->shape[0] == 5 && in->shape[2] == 3 && in->header_bytes == 16 && !in->gzip);
  int64_t rows[6] = {4, 0, 1, 2, 2, 3}; /* a run (0, 1, 2), a repeat, out of order */
  ms_tensor *t = ms_idx_rows_gather(f, rows, 6);
  CHECK(t && t->dtype == MS_UINT8 && t->ndim == 3 && t->shape[0] == 6 && t->shape[1] == 2);
  for (int i = 0; t && i < 6; i++)
    CHECK(memcmp((char *)ms_tensor_data(t) + 6 * i, buf + 16 + 6 * rows[i], 6) == 0);
  ms_tensor_release(t);
  int64_t bad_row = 5;
  CHECK(ms_idx_rows_gather(f, &bad_row, 1) == NULL);
  CHECK_ERROR_HAS("row 5 is out of range for 5 rows");
  chop("rows.idx", 16 + 6 * 3); /* rows 3 and 4 are gone */
  int64_t last = 4;
  CHECK(ms_idx_rows_gather(f, &last, 1) == NULL);
  CHECK_ERROR_HAS("changed since it was opened");
  ms_idx_rows_release(f);

  write_gz("rows.gz", buf, n);
  f = (ms_idx_rows *)1;
  CHECK(ms_idx_rows_open(path_of("rows.gz"), &f) == MS_ERR_ARG && f == NULL);
  CHECK_ERROR_HAS("gzip-compressed");
  CHECK(ms_idx_rows_open(path_of("rows.idx"), &f) == MS_ERR_IO && f == NULL); /* now truncated */
  CHECK_ERROR_HAS("truncated");
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/ms_test_idx.XXXXXX");
  if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
  test_round_trip("raw.idx", false);
  test_round_trip("compressed.idx", true); /* gzip found by its bytes, not its name */
  test_round_trip("raw_named.gz", false);
  test_labels_1d();
  test_header_errors();
  test_zero_sizes();
  test_payload_size_raw();
  test_huge_sizes();
  test_gzip_damage();
  test_gzip_stages();
  test_open_errors();
  test_rows();
  cleanup();
  return ms_test_finish();
}
