/* test_repl_pty.c: the REPL as a user meets it, through a terminal (a pty from forkpty): TAB
 * completes `ms.ze` to `ms.zeros`, offers `sub` and `sum` for `x:su`, completes nested fields and
 * module names in require's quotes (closing them); help(ms.zeros) and
 * ?ms.zeros print its documentation; `_` holds the last result and a trailing `;` keeps quiet;
 * a nested table prints pretty; `local y = 7` then `y` prints 7; Ctrl-D ends with status 0.
 * The executable is build/moonshard, next to this program's folder ($MS_EXE overrides). Skipped
 * (77) where the build has no readline. */
#define _DEFAULT_SOURCE /* forkpty, setenv */
#include <errno.h>
#include <libgen.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define TIMEOUT_MS 20000 /* per step: generous, the machine may be loaded */

static int master = -1;
static char seen[1 << 16]; /* what the terminal showed since the last match */
static size_t seen_len;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void type_keys(const char *keys) {
  size_t n = strlen(keys);
  while (n > 0) {
    ssize_t w = write(master, keys, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    keys += w;
    n -= (size_t)w;
  }
}

/* Reads what the terminal shows until `needle` appears (true) or the time is up (false). On a
 * match, *before gets what came before it (up to cap bytes) and the text up to the needle's end
 * is dropped, so the next wait starts after it. */
static bool wait_for(const char *needle, char *before, size_t cap) {
  long long deadline = now_ms() + TIMEOUT_MS;
  for (;;) {
    seen[seen_len] = '\0';
    char *hit = strstr(seen, needle);
    if (hit) {
      if (before) snprintf(before, cap, "%.*s", (int)(hit - seen), seen);
      size_t end = (size_t)(hit - seen) + strlen(needle);
      memmove(seen, seen + end, seen_len - end);
      seen_len -= end;
      return true;
    }
    long long left = deadline - now_ms();
    struct pollfd p = {.fd = master, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
    if (seen_len + 1 >= sizeof seen) break;
    ssize_t r = read(master, seen + seen_len, sizeof seen - 1 - seen_len);
    if (r <= 0) break; /* the REPL ended */
    char *in = seen + seen_len;
    for (ssize_t i = 0; i < r; i++) /* a terminal shows no bell (readline rings at a choice) */
      if (in[i] != '\a') seen[seen_len++] = in[i];
  }
  fprintf(stderr, "timed out waiting for \"%s\"; the terminal showed (control bytes in hex):\n", needle);
  for (size_t i = 0; i < seen_len; i++) {
    unsigned char c = (unsigned char)seen[i];
    if (c == '\n' || (c >= 32 && c < 127)) fputc(c, stderr);
    else fprintf(stderr, "<%02x>", c);
  }
  fputc('\n', stderr);
  return false;
}

#define EXPECT(needle) CHECK(wait_for((needle), NULL, 0))

/* build/tests/test_repl_pty -> build/moonshard */
static void find_exe(char *out, size_t cap) {
  const char *env = getenv("MS_EXE");
  if (env && *env) {
    snprintf(out, cap, "%s", env);
    return;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = '\0';
  char *dir = dirname(self);
  snprintf(out, cap, "%s/../moonshard", dir);
}

static void session(void) {
  char before[4096];
  EXPECT("> ");
  /* TAB completes a field of a table */
  type_keys("ms.ze\t");
  EXPECT("ms.zeros");
  type_keys("(2)\n");
  EXPECT("tensor([0., 0.])");
  EXPECT("> ");
  /* TAB TAB lists a tensor's methods */
  type_keys("x = ms.zeros(3)\n");
  EXPECT("> ");
  type_keys("x:su\t\t");
  CHECK(wait_for("x:sub", before, sizeof before) && wait_for("x:sum", NULL, 0));
  type_keys("m()\n");
  EXPECT("tensor(0.)");
  EXPECT("> ");
  /* nested fields, and module names inside require's quotes */
  type_keys("ms.cuda.is_av\t");
  EXPECT("ms.cuda.is_available");
  type_keys("() ~= nil\n");
  EXPECT("true\r\n");
  type_keys("(require \"moonshard.opt\t");
  EXPECT("moonshard.optim\"");
  type_keys(").SGD ~= nil\n");
  EXPECT("true\r\n");
  EXPECT("> ");
  /* help and ? */
  type_keys("help(ms.zeros)\n");
  EXPECT("ms.zeros(");
  EXPECT("filled with");
  EXPECT("> ");
  type_keys("?ms.zeros\n");
  EXPECT("filled with");
  EXPECT("> ");
  /* _ and ; */
  type_keys("40 + 2\n");
  EXPECT("42\r\n");
  type_keys("_ + 1\n");
  EXPECT("43\r\n");
  type_keys("_ * 2;\n");
  CHECK(wait_for("> ", before, sizeof before));
  CHECK(strstr(before, "86") == NULL);
  type_keys("_\n");
  EXPECT("86\r\n");
  /* a nested table, pretty */
  type_keys("t = {list = {1, 2, 3}, a = {b = {c = {d = 1}}}}\n");
  EXPECT("> ");
  type_keys("t\n");
  EXPECT("{a = {b = {c = {...}}}, list = {1, 2, 3}}");
  /* a top-level local stays, a function over several lines too */
  type_keys("local y = 7\n");
  EXPECT("> ");
  type_keys("y\n");
  EXPECT("7\r\n");
  type_keys("local function sq(v)\nreturn v * v\nend\n");
  EXPECT("> ");
  type_keys("sq(y)\n");
  EXPECT("49\r\n");
  EXPECT("> ");
  type_keys("\x04"); /* Ctrl-D */
}

/* The REPL's exit status once it ends (within the timeout, else it is killed: -1). */
static int wait_exit(pid_t pid) {
  int status;
  for (long long deadline = now_ms() + TIMEOUT_MS; now_ms() < deadline;) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    struct pollfd p = {.fd = master, .events = POLLIN};
    char sink[256];
    if (poll(&p, 1, 100) > 0 && read(master, sink, sizeof sink) <= 0) usleep(10000); /* gone: reap */
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

#ifdef MS_HAVE_READLINE
enum { HAVE_READLINE = 1 };
#else
enum { HAVE_READLINE = 0 };
#endif

int main(void) {
  if (!HAVE_READLINE) {
    printf("skipped: the build has no readline\n");
    return 77;
  }
  char exe[4200];
  find_exe(exe, sizeof exe);
  if (access(exe, X_OK) != 0) {
    fprintf(stderr, "cannot run %s\n", exe);
    return 1;
  }
  struct winsize ws = {.ws_row = 50, .ws_col = 200};
  pid_t pid = forkpty(&master, NULL, NULL, &ws);
  if (pid < 0) {
    perror("forkpty");
    return 1;
  }
  if (pid == 0) {
    /* a plain terminal, no user settings, no history file */
    setenv("TERM", "dumb", 1);
    setenv("INPUTRC", "/dev/null", 1);
    setenv("MOONSHARD_HISTORY", "", 1);
    execl(exe, exe, (char *)NULL);
    perror("exec");
    _exit(127);
  }
  session();
  int status = wait_exit(pid);
  CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(master);
  return ms_test_finish();
}
