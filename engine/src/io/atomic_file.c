/* atomic_file.c: writing a file so that its name shows either the old bytes or all of the new
 * ones, never a torn or a missing file, whatever crashes when; and cleaning up after writers that
 * died midway. Used by ms_safetensors_save and by the sharded checkpoints' index.
 *
 * A write goes to a temporary in the target's directory, created with O_EXCL under a name no
 * other writer can have chosen:
 *     <target>.tmp.<host>.<pid>.<start>.<random>
 * (<host>: this machine's name, characters other than [A-Za-z0-9-] as '_'; <pid> and <start>:
 * the writer's process id and start time in clock ticks since boot, from /proc, 0 where there
 * is none; <random>: 32 bits from the OS). The data is fsync'd, the file renamed over the
 * target, then the directory fsync'd, so the rename itself survives a power loss.
 *
 * Stale temporaries (the writer was killed between creating and renaming) are removed by the
 * next write into the same directory (of the same target, or of any name with the caller's
 * prefix: sharded saves clean every shard's). A temporary is stale when
 *   - it was made on this host and its writer is gone: no process has its pid, or the process
 *     with that pid started at another time (the pid was reused: a restarted container gets the
 *     same small pids), or
 *   - whatever host made it, it was last modified more than MS_STALE_TEMP_SECONDS ago (24 h):
 *     a writer on another machine sharing the directory cannot be asked whether it lives, and
 *     any live writer touches its file far more often than that.
 * Names that do not parse as temporaries are never touched. */
#define _DEFAULT_SOURCE /* gethostname, fsync, dirent, O_DIRECTORY, O_CLOEXEC */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "io/atomic_file.h"
#include "moonshard/io.h"

#define MS_STALE_TEMP_SECONDS (24 * 3600)
#define TMP_MARK ".tmp."

/* ---- who writes ------------------------------------------------------------------------------------ */

ms_status ms_os_random(void *buf, size_t n) {
  FILE *f = fopen("/dev/urandom", "rb");
  size_t got = f ? fread(buf, 1, n, f) : 0;
  if (f) fclose(f);
  if (got != n) return ms_error(MS_ERR_IO, "os_random: could not read %zu bytes from /dev/urandom", n);
  return MS_OK;
}

static void host_name(char out[65]) {
  char h[256] = "";
  if (gethostname(h, sizeof h - 1) != 0 || !h[0]) snprintf(h, sizeof h, "unknown");
  size_t i = 0;
  for (; h[i] && i < 64; i++) {
    char c = h[i];
    out[i] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-') ? c : '_';
  }
  out[i] = '\0';
}

/* Start time of process pid (field 22 of /proc/<pid>/stat); false when there is no such file. */
static bool proc_start_time(long pid, unsigned long long *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
  *start = 0;
  if (!p) return true;
  p++;
  for (int field = 3; field <= 22 && *p; field++) {
    while (*p == ' ') p++;
    if (field == 22) *start = strtoull(p, NULL, 10);
    while (*p && *p != ' ') p++;
  }
  return true;
}

static unsigned long long own_start_time(void) {
  unsigned long long s = 0;
  return proc_start_time((long)getpid(), &s) ? s : 0;
}

/* ---- stale temporaries ------------------------------------------------------------------------------ */

typedef struct tmp_name {
  char host[65];
  long pid;
  unsigned long long start;
} tmp_name;

/* Parses the part after "<target>.tmp." ("<host>.<pid>.<start>.<random>"; the host may hold
 * '_' but no '.'). False when it is not a temporary's name. */
static bool parse_tmp_suffix(const char *s, tmp_name *t) {
  char host[65];
  long pid;
  unsigned long long start;
  unsigned rnd;
  int used = 0;
  if (sscanf(s, "%64[A-Za-z0-9_-].%ld.%llu.%8x%n", host, &pid, &start, &rnd, &used) != 4 || s[used] || pid <= 0)
    return false;
  snprintf(t->host, sizeof t->host, "%s", host);
  t->pid = pid, t->start = start;
  return true;
}

static bool writer_is_gone(const tmp_name *t) {
  unsigned long long start;
  if (proc_start_time(t->pid, &start)) return t->start != 0 && start != t->start;
  if (own_start_time() != 0) return true; /* /proc works here, and has no such process */
  return kill((pid_t)t->pid, 0) != 0 && errno == ESRCH;
}

static bool is_stale(const char *dir, const char *name, const tmp_name *t, const char *host) {
  if (strcmp(t->host, host) == 0 && writer_is_gone(t)) return true;
  char path[4096];
  struct stat st;
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path || lstat(path, &st) != 0) return false;
  return S_ISREG(st.st_mode) && time(NULL) - st.st_mtime > MS_STALE_TEMP_SECONDS;
}

int ms_remove_stale_temporaries(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  char host[65];
  host_name(host);
  size_t plen = strlen(prefix);
  int removed = 0;
  for (struct dirent *e; (e = readdir(d));) {
    /* the last ".tmp." starts the suffix: a target's own name may hold one, the host cannot */
    const char *mark = NULL;
    if (strncmp(e->d_name, prefix, plen) == 0)
      for (const char *m = strstr(e->d_name, TMP_MARK); m; m = strstr(m + 1, TMP_MARK)) mark = m;
    tmp_name t;
    if (!mark || !parse_tmp_suffix(mark + strlen(TMP_MARK), &t) || !is_stale(dir, e->d_name, &t, host)) continue;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path && unlink(path) == 0) removed++;
  }
  closedir(d);
  return removed;
}

/* ---- the write ------------------------------------------------------------------------------------- */

/* path's directory ("." for a bare name) into out (of size n); false if it does not fit. */
static bool dir_of(const char *path, char *out, size_t n) {
  const char *slash = strrchr(path, '/');
  int len = !slash ? snprintf(out, n, ".") : snprintf(out, n, "%.*s", (int)(slash == path ? 1 : slash - path), path);
  return len >= 0 && (size_t)len < n;
}

/* A directory's fsync is refused by some file systems (EINVAL): the data is durable already and
 * there is nothing more to do there; any other failure is reported. */
static ms_status sync_dir(const char *who, const char *path) {
  char dir[4096];
  if (!dir_of(path, dir, sizeof dir)) return ms_error(MS_ERR_IO, "%s '%s': the path is too long", who, path);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ms_error(MS_ERR_IO, "%s '%s': could not open its directory to sync it: %s", who, path, strerror(errno));
  int rc = fsync(fd), err = errno;
  close(fd);
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    return ms_error(MS_ERR_IO, "%s '%s': could not sync its directory: %s", who, path, strerror(err));
  return MS_OK;
}

ms_status atomic_file_open(ms_atomic_file *af, const char *path, const char *who) {
  memset(af, 0, sizeof *af);
  af->who = who;
  char dir[4096], host[65];
  if (!dir_of(path, dir, sizeof dir)) return ms_error(MS_ERR_IO, "%s '%s': the path is too long", who, path);
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  char prefix[1024];
  if (snprintf(prefix, sizeof prefix, "%s%s", base, TMP_MARK) < (int)sizeof prefix) ms_remove_stale_temporaries(dir, prefix);
  host_name(host);
  size_t len = strlen(path) + sizeof TMP_MARK + 65 + 3 * 24;
  if (!(af->path = strdup(path)) || !(af->tmp = malloc(len))) {
    atomic_file_abort(af);
    return ms_error(MS_ERR_MEMORY, "%s '%s': out of memory", who, path);
  }
  unsigned long long start = own_start_time();
  for (int attempt = 0; attempt < 8; attempt++) { /* a clash of 32 random bits: draw again */
    uint32_t rnd;
    ms_status st = ms_os_random(&rnd, sizeof rnd);
    if (st) return atomic_file_abort(af), st;
    snprintf(af->tmp, len, "%s%s%s.%ld.%llu.%08x", path, TMP_MARK, host, (long)getpid(), start, (unsigned)rnd);
    int fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0 || !(af->f = fdopen(fd, "wb"))) {
      int err = errno;
      if (fd >= 0) close(fd), unlink(af->tmp);
      ms_error(MS_ERR_IO, "%s '%s': could not create the temporary file '%s': %s", who, path, af->tmp, strerror(err));
      free(af->tmp), af->tmp = NULL;
      return atomic_file_abort(af), MS_ERR_IO;
    }
    return MS_OK;
  }
  atomic_file_abort(af);
  return ms_error(MS_ERR_IO, "%s '%s': could not find a free temporary name", who, path);
}

ms_status atomic_file_commit(ms_atomic_file *af) {
  const char *what = NULL;
  int err = 0;
  if (fflush(af->f) != 0) what = "could not write", err = errno;
  /* fsync before rename: otherwise a crash can leave the new name pointing at missing data */
  else if (fsync(fileno(af->f)) != 0) what = "could not sync to disk", err = errno;
  if (fclose(af->f) != 0 && !what) what = "could not close", err = errno;
  af->f = NULL;
  if (!what && rename(af->tmp, af->path) != 0) what = "could not rename the temporary file into place", err = errno;
  if (what) {
    ms_error(MS_ERR_IO, "%s '%s': %s: %s", af->who, af->path, what, strerror(err));
    atomic_file_abort(af);
    return MS_ERR_IO;
  }
  free(af->tmp), af->tmp = NULL; /* renamed: nothing left to remove */
  ms_status st = sync_dir(af->who, af->path);
  atomic_file_abort(af);
  return st;
}

void atomic_file_abort(ms_atomic_file *af) {
  if (af->f) fclose(af->f);
  if (af->tmp) unlink(af->tmp);
  free(af->tmp);
  free(af->path);
  af->f = NULL, af->tmp = NULL, af->path = NULL;
}

ms_status ms_write_file_atomic(const char *path, const void *data, size_t n, const char *who) {
  ms_atomic_file af;
  ms_status st = atomic_file_open(&af, path, who);
  if (st) return st;
  if (n && fwrite(data, 1, n, af.f) != n) {
    ms_error(MS_ERR_IO, "%s '%s': could not write: %s", who, path, strerror(errno));
    atomic_file_abort(&af);
    return MS_ERR_IO;
  }
  return atomic_file_commit(&af);
}

/* ---- checking what was written ---------------------------------------------------------------------- */

ms_status ms_file_crc32(const char *path, uint32_t *crc, uint64_t *size) {
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0) return ms_error(MS_ERR_IO, "crc32 '%s': could not open: %s", path, strerror(errno));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return close(fd), ms_error(MS_ERR_IO, "crc32 '%s': not a regular file", path);
  FILE *f = fdopen(fd, "rb");
  if (!f) return close(fd), ms_error(MS_ERR_IO, "crc32 '%s': could not open: %s", path, strerror(errno));
  enum { CHUNK = 1 << 20 };
  unsigned char *buf = malloc(CHUNK);
  if (!buf) return fclose(f), ms_error(MS_ERR_MEMORY, "crc32 '%s': out of memory", path);
  uLong c = crc32(0L, Z_NULL, 0);
  uint64_t total = 0;
  for (size_t n; (n = fread(buf, 1, CHUNK, f)) > 0; total += n) c = crc32(c, buf, (uInt)n);
  int failed = ferror(f);
  free(buf);
  fclose(f);
  if (failed) return ms_error(MS_ERR_IO, "crc32 '%s': could not read", path);
  *crc = (uint32_t)c, *size = total;
  return MS_OK;
}
