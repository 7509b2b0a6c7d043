/* test_safetensors_hostile.c: the safetensors reader against headers made to exhaust it (issue
 * 17): 100k fields in a tensor's entry, 100k metadata keys and 100k tensors load in under a
 * second (the duplicate checks were quadratic: 13-19 s), a duplicate among them is still found,
 * a 50 MB header costs a few times its size in memory (it cost 1.4 GB), and a FIFO, a directory
 * or a device is refused at once instead of blocking forever. Each load that could hang or grow
 * runs in a child process, under an alarm, so a regression fails this test instead of hanging it. */
#define _XOPEN_SOURCE 700 /* mkdtemp, mkfifo */
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "moonshard/moonshard.h"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1 /* its shadow memory and quarantine make memory figures meaningless */
#else
#define UNDER_ASAN 0
#endif

static char dir[64];

static const char *tmp_path(const char *name) {
  static char buf[512];
  snprintf(buf, sizeof buf, "%s/%s", dir, name);
  return buf;
}

/* A growable text, for headers of any size. */
typedef struct text {
  char *s;
  size_t len, cap;
} text;

static void put(text *t, const char *s) {
  size_t n = strlen(s);
  if (t->len + n + 1 > t->cap) {
    t->cap = (t->len + n + 1) * 2;
    t->s = realloc(t->s, t->cap);
    if (!t->s) abort();
  }
  memcpy(t->s + t->len, s, n + 1);
  t->len += n;
}

/* Writes the header (padded with spaces to 8 bytes) and data_len bytes of 0 as path. */
static const char *write_st(const char *name, text *header, size_t data_len) {
  while (header->len % 8) put(header, " ");
  const char *path = tmp_path(name);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f) return path;
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)header->len >> (8 * i));
  fwrite(len, 1, 8, f);
  fwrite(header->s, 1, header->len, f);
  for (size_t i = 0; i < data_len; i++) fputc(0, f);
  fclose(f);
  return path;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Loads path; checks it fails with `needle` in the message (or succeeds when needle is NULL)
 * within `seconds`: a bound that only a quadratic reader misses (it took 13-19 s; a linear one
 * takes 0.01-0.2 s), loose enough for a loaded machine or the sanitizer build. */
static void expect_load(const char *path, const char *needle, double seconds, int line) {
  ms_safetensors st;
  double t0 = now();
  ms_status s = ms_safetensors_load(path, &st);
  double dt = now() - t0;
  bool ok = needle ? s != MS_OK && strstr(ms_error_last(), needle) : s == MS_OK;
  if (ok && dt < seconds) ms_test_passed++;
  else {
    ms_test_failed++;
    fprintf(stderr, "%s:%d: load took %.2f s (bound %.0f), status %d, error \"%s\", expected %s\n", __FILE__, line, dt,
            seconds, (int)s, s ? ms_error_last() : "", needle ? needle : "success");
  }
  printf("  %-24s %.3f s\n", strrchr(path, '/') + 1, dt);
  ms_safetensors_free(&st);
}
#define EXPECT_LOAD(path, needle, seconds) expect_load(path, needle, seconds, __LINE__)

enum { N = 100000 };

/* 100k fields in one tensor's entry: unknown ones are skipped, a known one twice is an error. */
static void test_many_fields(void) {
  for (int dup = 0; dup <= 1; dup++) {
    text h = {0};
    char field[64];
    put(&h, "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]");
    for (int i = 0; i < N; i++) snprintf(field, sizeof field, ",\"f%d\":0", i), put(&h, field);
    put(&h, dup ? ",\"shape\":[0]}}" : "}}");
    EXPECT_LOAD(write_st(dup ? "fields_dup.safetensors" : "fields.safetensors", &h, 0),
                dup ? "field \"shape\" appears twice" : NULL, 5.0);
    free(h.s);
  }
}

/* 100k metadata keys; the same with one key repeated near the end. */
static void test_many_metadata_keys(void) {
  for (int dup = 0; dup <= 1; dup++) {
    text h = {0};
    char kv[64];
    put(&h, "{\"__metadata__\":{");
    for (int i = 0; i < N; i++) snprintf(kv, sizeof kv, "%s\"k%d\":\"v\"", i ? "," : "", dup && i == N - 2 ? 777 : i), put(&h, kv);
    put(&h, "}}");
    EXPECT_LOAD(write_st(dup ? "meta_dup.safetensors" : "meta.safetensors", &h, 0),
                dup ? "__metadata__ key 'k777' appears twice" : NULL, 5.0);
    free(h.s);
  }
}

/* 100k tensors of one byte each; the same with one name repeated; then read_range by name. */
static void test_many_tensors(void) {
  for (int dup = 0; dup <= 1; dup++) {
    text h = {0};
    char e[128];
    put(&h, "{");
    for (int i = 0; i < N; i++)
      snprintf(e, sizeof e, "%s\"t%d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}", i ? "," : "",
               dup && i == N - 1 ? 5 : i, i, i + 1),
          put(&h, e);
    put(&h, "}");
    const char *path = write_st(dup ? "tensors_dup.safetensors" : "tensors.safetensors", &h, N);
    EXPECT_LOAD(path, dup ? "tensor 't5' appears twice" : NULL, 5.0); /* makes 100k tensors too */
    if (!dup) {
      ms_safetensors_file *f = ms_safetensors_open(path);
      CHECK(f != NULL);
      double t0 = now();
      int found = 0;
      for (int i = 0; f && i < N; i += 7) {
        snprintf(e, sizeof e, "t%d", i);
        ms_tensor *t = ms_safetensors_read_range(f, e, 0, 1);
        found += t != NULL;
        ms_tensor_release(t);
      }
      CHECK(found == (N + 6) / 7);
      CHECK(now() - t0 < 2.0); /* a name lookup is a hash probe, not a scan of 100k entries */
      CHECK(f && !ms_safetensors_read_range(f, "t100000", 0, 1));
      CHECK_ERROR_HAS("no tensor named 't100000'");
      ms_safetensors_close(f);
    }
    free(h.s);
  }
}

static long vm_hwm_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

/* Runs fn in a child that must exit 0 within `seconds` (killed by an alarm otherwise). */
static bool in_child(void (*fn)(void), unsigned seconds, const char *what) {
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int failed = ms_test_failed; /* the parent's count so far */
    alarm(seconds);
    fn();
    fflush(stdout), fflush(stderr);
    _exit(ms_test_failed > failed ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
    fprintf(stderr, "%s: still running after %u s (hangs?)\n", what, seconds);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A 50 MB header of one unknown field [0,0,0,...] (25 million values): refused or not, the
 * load may cost a small multiple of the header, not a tree node per value (it was 1.4 GB). */
static void load_big_header(void) {
  long before = vm_hwm_kb();
  ms_safetensors st;
  CHECK(ms_safetensors_load(tmp_path("big.safetensors"), &st) == MS_OK);
  ms_safetensors_free(&st);
  long grew_mb = (vm_hwm_kb() - before) / 1024;
  printf("  50 MB header: VmHWM grew by %ld MB\n", grew_mb);
  CHECK(grew_mb < 200); /* the text (50 MB) and the string block (at most as long, untouched here) */
}

static void test_big_header_memory(void) {
  if (UNDER_ASAN) return;
  text h = {0};
  put(&h, "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":[0");
  const size_t target = 50u << 20;
  char chunk[4097];
  for (int i = 0; i < 2048; i++) chunk[2 * i] = ',', chunk[2 * i + 1] = '0';
  chunk[4096] = '\0';
  while (h.len < target) put(&h, chunk);
  put(&h, "]}}");
  write_st("big.safetensors", &h, 0);
  free(h.s);
  CHECK(in_child(load_big_header, 60, "50 MB header"));
}

/* Not regular files: refused at once, naming what they are. */
static void load_fifo(void) {
  ms_safetensors st;
  CHECK(ms_safetensors_load(tmp_path("fifo"), &st) != MS_OK);
  CHECK_ERROR_HAS("a FIFO (named pipe), not a regular file");
  CHECK(ms_safetensors_open(tmp_path("fifo")) == NULL);
  CHECK_ERROR_HAS("FIFO");
}

static void test_not_regular_files(void) {
  CHECK(mkfifo(tmp_path("fifo"), 0600) == 0);
  double t0 = now();
  CHECK(in_child(load_fifo, 10, "load of a FIFO")); /* a regression blocks the child, not this test */
  CHECK(now() - t0 < 5.0);
  ms_safetensors st;
  CHECK(ms_safetensors_load(dir, &st) != MS_OK);
  CHECK_ERROR_HAS("a directory, not a regular file");
  CHECK(ms_safetensors_load("/dev/null", &st) != MS_OK);
  CHECK_ERROR_HAS("a character device, not a regular file");
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/ms_st_hostile_XXXXXX");
  if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
  test_many_fields();
  test_many_metadata_keys();
  test_many_tensors();
  test_big_header_memory();
  test_not_regular_files();
  const char *files[] = {"fields.safetensors", "fields_dup.safetensors", "meta.safetensors", "meta_dup.safetensors",
                         "tensors.safetensors", "tensors_dup.safetensors", "big.safetensors", "fifo"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) remove(tmp_path(files[i]));
  rmdir(dir);
  return ms_test_finish();
}
