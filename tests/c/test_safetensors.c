/* test_safetensors.c: checkpoints in the safetensors format from C: round trips of every dtype
 * and odd shape, byte-exact agreement with the reference library's own test vectors, strict
 * rejection of truncated and corrupt files (never a crash), and atomic writes that leave
 * neither a half file nor a temporary behind when they fail. */
#define _XOPEN_SOURCE 700 /* mkdtemp, setrlimit, SIGXFSZ, truncate */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moonshard/moonshard.h"
#include "test.h"

static char dir[64];

static const char *tmp_path(const char *name) {
  static char buf[512]; /* room for the directory and any d_name */
  snprintf(buf, sizeof buf, "%s/%s", dir, name);
  return buf;
}

static bool file_exists(const char *path) {
  struct stat s;
  return stat(path, &s) == 0;
}

/* Whether any entry of the test directory contains ".tmp." (a leftover temporary file). */
static bool temp_left(void) {
  DIR *d = opendir(dir);
  bool found = false;
  for (struct dirent *e; d && (e = readdir(d));) found |= strstr(e->d_name, ".tmp.") != NULL;
  if (d) closedir(d);
  return found;
}

static long read_file(const char *path, unsigned char *buf, long cap) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  long n = (long)fread(buf, 1, (size_t)cap, f);
  fclose(f);
  return n;
}

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f) return;
  CHECK(fwrite(p, 1, n, f) == n);
  fclose(f);
}

/* A file with the given header JSON (length written as told, or its real length when
 * claimed_len is 0) followed by data_len bytes of `fill`. */
static const char *write_raw(const char *header, uint64_t claimed_len, size_t data_len, unsigned char fill) {
  const char *path = tmp_path("raw.safetensors");
  size_t hl = strlen(header);
  uint64_t n = claimed_len ? claimed_len : hl;
  unsigned char *buf = malloc(8 + hl + data_len + 1);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
  memcpy(buf + 8, header, hl);
  memset(buf + 8 + hl, fill, data_len);
  write_file(path, buf, 8 + hl + data_len);
  free(buf);
  return path;
}

static bool same_bytes(const ms_tensor *a, const ms_tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  int64_t n = ms_tensor_numel(a);
  return n == 0 || memcmp(ms_tensor_data(a), ms_tensor_data(b), (size_t)n * ms_dtype_size(a->dtype)) == 0;
}

/* ---- round trips -------------------------------------------------------------------------------------- */

static void test_round_trip_every_dtype(void) {
  const char *path = tmp_path("all.safetensors");
  ms_tensor *ts[MS_DTYPE_COUNT];
  const char *names[MS_DTYPE_COUNT];
  for (int i = 0; i < MS_DTYPE_COUNT; i++) {
    ts[i] = ms_tensor_new_empty(2, (int64_t[]){2, 3}, (ms_dtype)i);
    for (int k = 0; k < 6; k++) ms_tensor_set_flat(ts[i], k, i == MS_BOOL ? k % 2 : (k - 2) * 1.5 + i);
    names[i] = ms_dtype_name((ms_dtype)i);
  }
  CHECK(ms_safetensors_save(path, MS_DTYPE_COUNT, names, ts, 0, NULL, NULL) == MS_OK);
  CHECK(!temp_left());
  ms_safetensors st;
  CHECK(ms_safetensors_load(path, &st) == MS_OK);
  CHECK(st.count == MS_DTYPE_COUNT && !st.has_metadata);
  for (int i = 0; i < st.count && i < MS_DTYPE_COUNT; i++) {
    CHECK(strcmp(st.names[i], names[i]) == 0); /* header order is the order written */
    CHECK(same_bytes(st.tensors[i], ts[i]));
    CHECK(ms_tensor_is_contiguous(st.tensors[i]));
  }
  ms_safetensors_free(&st);
  for (int i = 0; i < MS_DTYPE_COUNT; i++) ms_tensor_release(ts[i]);
}

static void test_round_trip_odd_shapes(void) {
  const char *path = tmp_path("shapes.safetensors");
  ms_tensor *scalar = ms_tensor_new_scalar(3.5, MS_FLOAT64);
  ms_tensor *empty = ms_tensor_new_zeros(2, (int64_t[]){0, 3}, MS_FLOAT32);
  ms_tensor *base = ms_tensor_new_arange(0, 12, 1, MS_INT32);
  ms_tensor *m = ms_tensor_view(base, 2, (int64_t[]){3, 4});
  ms_tensor *tr = ms_tensor_transpose(m, 0, 1); /* (4, 3), not contiguous */
  ms_tensor *ts[] = {scalar, empty, tr};
  const char *names[] = {"scalar", "empty", "transposed"};
  CHECK(!ms_tensor_is_contiguous(tr));
  CHECK(ms_safetensors_save(path, 3, names, ts, 0, NULL, NULL) == MS_OK);
  ms_safetensors st;
  CHECK(ms_safetensors_load(path, &st) == MS_OK);
  CHECK(st.count == 3);
  if (st.count == 3) {
    CHECK(st.tensors[0]->ndim == 0 && ms_tensor_get_flat(st.tensors[0], 0) == 3.5);
    CHECK(st.tensors[1]->ndim == 2 && st.tensors[1]->shape[0] == 0 && st.tensors[1]->shape[1] == 3);
    ms_tensor *t = st.tensors[2];
    CHECK(t->ndim == 2 && t->shape[0] == 4 && t->shape[1] == 3);
    for (int64_t k = 0; k < 12; k++) CHECK(ms_tensor_get_flat(t, k) == ms_tensor_get_flat(tr, k));
  }
  ms_safetensors_free(&st);
  ms_tensor_release(tr), ms_tensor_release(m), ms_tensor_release(base);
  ms_tensor_release(scalar), ms_tensor_release(empty);
}

static void test_metadata(void) {
  const char *path = tmp_path("meta.safetensors");
  const char *keys[] = {"format", "quote\"back\\slash", "ctl\n\t\x01", "utf8"};
  const char *values[] = {"pt", "a\"b", "line\nnext", "h\xc3\xa9llo \xe2\x82\xac"};
  ms_tensor *t = ms_tensor_new_full(1, (int64_t[]){2}, MS_FLOAT32, 1.0);
  CHECK(ms_safetensors_save(path, 1, (const char *[]){"w"}, &t, 4, keys, values) == MS_OK);
  ms_safetensors st;
  CHECK(ms_safetensors_load(path, &st) == MS_OK);
  CHECK(st.has_metadata && st.meta_count == 4);
  for (int i = 0; i < st.meta_count && i < 4; i++) {
    CHECK(strcmp(st.meta_keys[i], keys[i]) == 0);
    CHECK(strcmp(st.meta_values[i], values[i]) == 0);
  }
  ms_safetensors_free(&st);
  /* an empty metadata object is kept as such */
  CHECK(ms_safetensors_save(path, 0, NULL, NULL, 0, keys, values) == MS_OK);
  CHECK(ms_safetensors_load(path, &st) == MS_OK);
  CHECK(st.has_metadata && st.meta_count == 0 && st.count == 0);
  ms_safetensors_free(&st);
  ms_tensor_release(t);
}

/* The byte-exact vectors of the reference implementation's own tests (safetensors/src/tensor.rs):
 * the same tensors give the same file. */
static void test_reference_bytes(void) {
  const char *path = tmp_path("ref.safetensors");
  unsigned char got[256];
  static const unsigned char empty[] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
  CHECK(ms_safetensors_save(path, 0, NULL, NULL, 0, NULL, NULL) == MS_OK);
  CHECK(read_file(path, got, sizeof got) == (long)sizeof empty && memcmp(got, empty, sizeof empty) == 0);

  const char *k = "framework", *v = "pt";
  static const char meta[] = "(\0\0\0\0\0\0\0{\"__metadata__\":{\"framework\":\"pt\"}}     ";
  CHECK(ms_safetensors_save(path, 0, NULL, NULL, 1, &k, &v) == MS_OK);
  CHECK(read_file(path, got, sizeof got) == 48 && memcmp(got, meta, 48) == 0);

  ms_tensor *t = ms_tensor_new_arange(0, 6, 1, MS_FLOAT32);
  ms_tensor *t3 = ms_tensor_view(t, 3, (int64_t[]){1, 2, 3});
  static const char attn[] = "@\0\0\0\0\0\0\0{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";
  static const unsigned char data[] = {0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
  CHECK(ms_safetensors_save(path, 1, (const char *[]){"attn.0"}, &t3, 0, NULL, NULL) == MS_OK);
  CHECK(read_file(path, got, sizeof got) == 72 + 24);
  CHECK(memcmp(got, attn, 72) == 0 && memcmp(got + 72, data, 24) == 0);
  ms_tensor_release(t3), ms_tensor_release(t);
}

/* ---- corrupt files ------------------------------------------------------------------------------------ */

/* Loading path fails with a message naming the file and containing `needle`. */
static void expect_bad(const char *path, const char *needle, int line) {
  ms_safetensors st;
  ms_status s = ms_safetensors_load(path, &st);
  if (s == MS_OK) {
    ms_test_failed++;
    fprintf(stderr, "%s:%d: load succeeded, expected an error with \"%s\"\n", __FILE__, line, needle);
  } else if (!strstr(ms_error_last(), needle) || !strstr(ms_error_last(), path)) {
    ms_test_failed++;
    fprintf(stderr, "%s:%d: error \"%s\" lacks \"%s\" or the path\n", __FILE__, line, ms_error_last(), needle);
  } else
    ms_test_passed++;
  CHECK(st.count == 0 && st.names == NULL); /* nothing to free after a failure */
  ms_safetensors_free(&st);
}
#define EXPECT_BAD(path, needle) expect_bad(path, needle, __LINE__)

#define F32_2 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"

static void test_corrupt_files(void) {
  write_file(tmp_path("short"), "\x10\0\0", 3);
  EXPECT_BAD(tmp_path("short"), "too short");
  EXPECT_BAD(write_raw(F32_2, 4096, 8, 0), "runs past the end of the file");
  EXPECT_BAD(write_raw(F32_2, (uint64_t)1 << 40, 8, 0), "over the");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",", 0, 8, 0), "not valid JSON");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\" \"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, 0), "expected ','");
  EXPECT_BAD(write_raw("[1, 2]", 0, 0, 0), "does not start with '{'");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, 0), "unknown dtype 'F33'");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 0, 2, 0), "not supported");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, 0), "must be a string");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 0, 8, 0), "run past the end");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 0, 8, 0), "needs 12 bytes");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 0, 8, 0), "non-negative");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 0, 8, 0), "end before");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 0, 8, 0), "[begin, end]");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 0, 12, 0), "overlap");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 0, 12, 0), "unused");
  EXPECT_BAD(write_raw(F32_2 "  ", 0, 12, 0), "trailing bytes");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}", 0, 8, 0), "appears twice");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, 0),
             "\"dtype\" appears twice");
  EXPECT_BAD(write_raw("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, 0), "\"dtype\" must be a string, got nothing");
  EXPECT_BAD(write_raw("{\"a\":[1]}", 0, 0, 0), "expected an object");
  EXPECT_BAD(write_raw("{\"__metadata__\":[]}", 0, 0, 0), "must be an object");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 0, 8, 0), "non-negative integer");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551616]}}", 0, 8, 0),
             "two non-negative integers");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 0, 8, 0), "after the value");
  EXPECT_BAD(write_raw("{\"a\\q\":{}}", 0, 0, 0), "bad escape");
  EXPECT_BAD(write_raw("{\"\\ud800\":{}}", 0, 0, 0), "surrogate");
  EXPECT_BAD(write_raw("{\"a\x01\":{}}", 0, 0, 0), "control character");
  EXPECT_BAD(write_raw("{\"__metadata__\":{\"k\":1}}", 0, 0, 0), "must be a string");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", 0, 2, 7), "0 or 1");
  EXPECT_BAD(write_raw("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, 0), "UTF-8");
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999,99999999999,99999999999],"
                       "\"data_offsets\":[0,8]}}", 0, 8, 0), "too large");
  /* empty, but its strides would overflow int64 (UBSan found it through fuzz_safetensors) */
  EXPECT_BAD(write_raw("{\"a\":{\"dtype\":\"U8\",\"shape\":[2,4611686018427387904,0],\"data_offsets\":[0,0]}}", 0, 0, 0),
             "sizes multiply past 2^63");
  char deep[300] = "{\"a\":{\"x\":"; /* in an unknown field, which is walked (skipped) */
  for (int i = 0; i < 200; i++) strcat(deep, "[");
  EXPECT_BAD(write_raw(deep, 0, 0, 0), "nested deeper");
}

/* Headers written by other tools: escapes, whitespace, fields in another order, unknown fields
 * (ignored, as the reference library does), tensors listed out of offset order. */
static void test_foreign_header_spelling(void) {
  const char *path = write_raw("{\n \"b\\u00e9\\ud83d\\ude00\" : { \"shape\" : [ 1 ] , \"data_offsets\":[4,8],"
                               " \"dtype\":\"I32\", \"extra\": {\"x\": [null, true, -1.5e3]} },\n"
                               " \"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]} }\t", 0, 8, 1);
  ms_safetensors st;
  CHECK(ms_safetensors_load(path, &st) == MS_OK);
  CHECK(st.count == 2);
  if (st.count == 2) {
    CHECK(strcmp(st.names[0], "b\xc3\xa9\xf0\x9f\x98\x80") == 0); /* é and U+1F600 in UTF-8 */
    CHECK(st.tensors[0]->dtype == MS_INT32 && ms_tensor_get_flat_int(st.tensors[0], 0) == 0x01010101);
    CHECK(strcmp(st.names[1], "a") == 0 && ms_tensor_get_flat_int(st.tensors[1], 3) == 1);
  }
  ms_safetensors_free(&st);
}

/* Every truncation and every single-byte change of a valid file's header must either load or
 * fail with a message: never crash or read out of bounds (run under the sanitizers in CI). */
static void test_truncations_and_byte_flips(void) {
  const char *path = tmp_path("good.safetensors"), *bad = tmp_path("mangled.safetensors");
  ms_tensor *a = ms_tensor_new_full(2, (int64_t[]){2, 2}, MS_FLOAT32, 2.0);
  ms_tensor *b = ms_tensor_new_full(1, (int64_t[]){3}, MS_INT64, 7.0);
  ms_tensor *ts[] = {a, b};
  const char *k = "epoch", *v = "3";
  CHECK(ms_safetensors_save(path, 2, (const char *[]){"a", "b"}, ts, 1, &k, &v) == MS_OK);
  unsigned char buf[512];
  long n = read_file(path, buf, sizeof buf);
  CHECK(n > 8 && n < (long)sizeof buf);
  int truncated_ok = 0, flips_clean = 1;
  for (long len = 0; len < n; len++) {
    write_file(bad, buf, (size_t)len);
    ms_safetensors st;
    truncated_ok += ms_safetensors_load(bad, &st) == MS_OK;
    ms_safetensors_free(&st);
  }
  CHECK(truncated_ok == 0); /* no prefix of a file is a valid file */
  long header_end = 8 + (long)buf[0];
  static const unsigned char flips[] = {0, '"', '{', '}', '[', ']', ',', ':', '9', 0xff, ' '};
  for (long i = 0; i < header_end; i++)
    for (size_t f = 0; f < sizeof flips; f++) {
      unsigned char saved = buf[i];
      buf[i] = flips[f];
      write_file(bad, buf, (size_t)n);
      ms_safetensors st;
      if (ms_safetensors_load(bad, &st) != MS_OK && ms_error_last()[0] == '\0') flips_clean = 0;
      ms_safetensors_free(&st);
      buf[i] = saved;
    }
  CHECK(flips_clean);
  ms_tensor_release(a), ms_tensor_release(b);
}

/* ---- bad arguments and atomic writes ------------------------------------------------------------------ */

static void test_bad_arguments_write_nothing(void) {
  const char *path = tmp_path("args.safetensors");
  ms_tensor *t = ms_tensor_new_zeros(1, (int64_t[]){4}, MS_FLOAT32);
  ms_tensor *ts[] = {t, t};
  CHECK(ms_safetensors_save(path, 2, (const char *[]){"x", "x"}, ts, 0, NULL, NULL) == MS_ERR_ARG);
  CHECK_ERROR_HAS("'x' appears twice");
  CHECK(ms_safetensors_save(path, 1, (const char *[]){"__metadata__"}, ts, 0, NULL, NULL) == MS_ERR_ARG);
  CHECK_ERROR_HAS("reserved");
  const char *k[] = {"k", "k"}, *v[] = {"1", "2"};
  CHECK(ms_safetensors_save(path, 1, (const char *[]){"x"}, ts, 2, k, v) == MS_ERR_ARG);
  CHECK_ERROR_HAS("metadata key 'k' appears twice");
  CHECK(ms_safetensors_save(path, 1, (const char *[]){"bad\xc3"}, ts, 0, NULL, NULL) == MS_ERR_ARG);
  CHECK_ERROR_HAS("UTF-8");
  ms_storage_release_data(t->storage);
  CHECK(ms_safetensors_save(path, 1, (const char *[]){"x"}, ts, 0, NULL, NULL) == MS_ERR_ARG);
  CHECK_ERROR_HAS("released");
  CHECK(!file_exists(path) && !temp_left());
  CHECK(ms_storage_materialize(t->storage) == MS_OK);
  ms_tensor_release(t);
}

/* A write that fails half-way (the file size limit stops it) leaves the old file untouched and
 * removes its temporary file. */
static void test_failed_write_is_atomic(void) {
  const char *path = tmp_path("atomic.safetensors");
  ms_tensor *small = ms_tensor_new_full(1, (int64_t[]){2}, MS_FLOAT32, 1.0);
  ms_tensor *big = ms_tensor_new_zeros(1, (int64_t[]){1 << 18}, MS_FLOAT32); /* 1 MiB */
  CHECK(ms_safetensors_save(path, 1, (const char *[]){"w"}, &small, 0, NULL, NULL) == MS_OK);
  unsigned char before[256], after[256];
  long nb = read_file(path, before, sizeof before);

  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 64 * 1024;
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* write() then fails with EFBIG */
  CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  ms_status st = ms_safetensors_save(path, 1, (const char *[]){"w"}, &big, 0, NULL, NULL);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, prev);
  CHECK(st == MS_ERR_IO);
  CHECK_ERROR_HAS(path);
  CHECK(!temp_left());
  CHECK(read_file(path, after, sizeof after) == nb && memcmp(before, after, (size_t)nb) == 0);

  const char *fresh = tmp_path("never.safetensors");
  CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  signal(SIGXFSZ, SIG_IGN);
  st = ms_safetensors_save(fresh, 1, (const char *[]){"w"}, &big, 0, NULL, NULL);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, prev);
  CHECK(st == MS_ERR_IO && !file_exists(fresh) && !temp_left());

  /* the rename fails when the target is a directory: the temporary goes too */
  CHECK(mkdir(tmp_path("adir"), 0700) == 0);
  CHECK(ms_safetensors_save(tmp_path("adir"), 1, (const char *[]){"w"}, &small, 0, NULL, NULL) == MS_ERR_IO);
  CHECK_ERROR_HAS("rename");
  CHECK(!temp_left());
  rmdir(tmp_path("adir"));
  /* a directory that does not exist */
  CHECK(ms_safetensors_save(tmp_path("no/such/dir.safetensors"), 1, (const char *[]){"w"}, &small, 0, NULL, NULL) ==
        MS_ERR_IO);
  CHECK_ERROR_HAS("no/such/dir.safetensors");
  ms_tensor_release(small), ms_tensor_release(big);
}

static void test_missing_file(void) {
  ms_safetensors st;
  CHECK(ms_safetensors_load(tmp_path("absent.safetensors"), &st) == MS_ERR_IO);
  CHECK_ERROR_HAS("absent.safetensors");
  CHECK_ERROR_HAS("could not open");
  ms_safetensors_free(&st);
}

/* Ranges of a tensor read through an open file: the elements asked for, in row-major order,
 * and nothing outside the tensor. */
static void test_read_range(void) {
  const char *path = tmp_path("range.safetensors");
  ms_tensor *a = ms_tensor_new_arange(0, 24, 1, MS_FLOAT64), *b = ms_tensor_new_arange(100, 105, 1, MS_INT32);
  ms_tensor *m = ms_tensor_view(a, 3, (int64_t[]){2, 3, 4});
  ms_tensor *ts[] = {m, b};
  const char *names[] = {"a", "b"};
  CHECK(ms_safetensors_save(path, 2, names, ts, 0, NULL, NULL) == MS_OK);
  ms_safetensors_file *f = ms_safetensors_open(path);
  CHECK(f != NULL);
  ms_tensor *r = ms_safetensors_read_range(f, "a", 5, 7);
  CHECK(r && r->ndim == 1 && r->shape[0] == 7 && r->dtype == MS_FLOAT64);
  for (int64_t k = 0; r && k < 7; k++) CHECK(ms_tensor_get_flat(r, k) == (double)(5 + k));
  ms_tensor_release(r);
  r = ms_safetensors_read_range(f, "b", 4, 1);
  CHECK(r && r->dtype == MS_INT32 && ms_tensor_get_flat(r, 0) == 104);
  ms_tensor_release(r);
  r = ms_safetensors_read_range(f, "b", 5, 0); /* an empty range at the end is inside */
  CHECK(r && r->shape[0] == 0);
  ms_tensor_release(r);
  CHECK(ms_safetensors_read_range(f, "a", 20, 5) == NULL);
  CHECK_ERROR_HAS("tensor 'a' has 24 elements; elements [20, 25) are not inside it");
  CHECK(ms_safetensors_read_range(f, "a", -1, 2) == NULL);
  CHECK(ms_safetensors_read_range(f, "c", 0, 1) == NULL);
  CHECK_ERROR_HAS("no tensor named 'c'");
  CHECK_ERROR_HAS("range.safetensors");
  ms_safetensors_close(f);
  ms_safetensors_close(NULL);
  CHECK(ms_safetensors_open(tmp_path("absent.safetensors")) == NULL);
  CHECK_ERROR_HAS("could not open");
  write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 4, 0);
  CHECK(ms_safetensors_open(tmp_path("raw.safetensors")) == NULL); /* checked as load checks */
  CHECK_ERROR_HAS("run past the end");
  ms_tensor_release(m), ms_tensor_release(a), ms_tensor_release(b);
}

static void remove_dir(void) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.') remove(tmp_path(e->d_name));
  if (d) closedir(d);
  rmdir(dir);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/ms_safetensors_XXXXXX");
  if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
  test_round_trip_every_dtype();
  test_round_trip_odd_shapes();
  test_metadata();
  test_reference_bytes();
  test_corrupt_files();
  test_foreign_header_spelling();
  test_truncations_and_byte_flips();
  test_bad_arguments_write_nothing();
  test_failed_write_is_atomic();
  test_missing_file();
  test_read_range();
  remove_dir();
  return ms_test_finish();
}
