/* l_launch.c: the launcher behind `moonshard -n N` and ms.spawn. It starts mpirun as its child
 * (fork/exec, not exec nor os.execute) and stays its parent, because a launcher must be able to
 * end its job: os.execute's system() ignores SIGINT while it waits and SIGTERM killed only the
 * launcher, leaving mpirun and the ranks running as orphans. Here SIGINT and SIGTERM sent to the
 * launcher go on to mpirun, which ends every rank; the launcher waits for it (killing it after a
 * grace), prints one line and exits with 128 + the signal, as shells expect. */
#define _POSIX_C_SOURCE 200809L /* sigtimedwait, kill, setpgid */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"
#include "ms_lua.h"

#define END_GRACE 4.0 /* seconds mpirun gets to end the ranks after a signal before it is killed */

/* mpirun passes the caller's environment only to local ranks: these travel explicitly */
static const char *const forward_env[] = {"MS_NUM_THREADS", "LUA_PATH",     "LUA_CPATH", "LUA_PATH_5_4",
                                          "LUA_CPATH_5_4",  "MOONSHARD_HISTORY", "MS_DIST_TIMEOUT",
                                          "MS_TTY"};
enum { NFORWARD = sizeof forward_env / sizeof forward_env[0] };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* `mpirun -np N <flags> -- exe words...`, NULL-terminated (free it); NULL without memory. */
static const char **mpirun_argv(const char *mpirun, const char *np, const char *exe, int nwords,
                                const char *const *words) {
  const char **a = malloc(sizeof *a * (size_t)(nwords + 12 + 2 * NFORWARD));
  if (!a) return NULL;
  int n = 0;
  a[n++] = mpirun, a[n++] = "-np", a[n++] = np;
  /* more ranks than cores is allowed (Open MPI refuses it by default): a rank's engine threads
   * shrink to fit (cores / local ranks), and tests run 4 ranks on 2 cores */
  a[n++] = "--oversubscribe";
  /* no pinning: Open MPI binds each rank to one core when np <= 2, which would squeeze all of
   * that rank's engine threads onto it */
  a[n++] = "--bind-to", a[n++] = "none";
  if (geteuid() == 0) a[n++] = "--allow-run-as-root"; /* containers commonly run as root */
  for (int i = 0; i < NFORWARD; i++)
    if (getenv(forward_env[i])) a[n++] = "-x", a[n++] = forward_env[i];
  a[n++] = "--", a[n++] = exe;
  for (int i = 0; i < nwords; i++) a[n++] = words[i];
  a[n] = NULL;
  return a;
}

/* The child: its own process group (so a signal meant for the launcher's group is the
 * launcher's to forward) unless stdin is a terminal, where a background group reading it would
 * be stopped (SIGTTIN) and mpirun reads stdin for rank 0; default signals; then mpirun. An exec
 * failure goes back through `report` (close-on-exec: it closes unwritten on success). */
static void run_child(const char **argv, const sigset_t *mask, int report) {
  if (!isatty(STDIN_FILENO)) setpgid(0, 0);
  signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
  sigprocmask(SIG_SETMASK, mask, NULL);
  execvp(argv[0], (char *const *)argv);
  int err = errno;
  if (write(report, &err, sizeof err) < 0) _exit(127);
  _exit(127);
}

/* Waits for the child; the first SIGINT or SIGTERM is forwarded, SIGKILL follows after the
 * grace. Returns the wait status; *sig is the signal that came (0: none). */
static int supervise(pid_t pid, const sigset_t *signals, int *sig) {
  pid_t target = isatty(STDIN_FILENO) ? pid : -pid; /* the process group, when it has its own */
  double kill_at = 0;
  int status = 0;
  *sig = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return status;
    struct timespec tick = {0, 50 * 1000 * 1000};
    int got = sigtimedwait(signals, NULL, &tick); /* SIGCHLD ends the tick early */
    if ((got == SIGINT || got == SIGTERM) && !*sig) {
      *sig = got;
      kill(target, got); /* mpirun ends every rank on either */
      kill_at = now_s() + END_GRACE;
    }
    if (kill_at > 0 && now_s() > kill_at) {
      kill(target, SIGKILL);
      kill_at = 0;
    }
  }
}

int launch_mpirun(const char *what, long nprocs, const char *exe, int nwords, const char *const *words) {
  const char *mpirun = getenv("MS_MPIRUN");
  if (mpirun == NULL || *mpirun == '\0') mpirun = "mpirun";
  char np[32];
  snprintf(np, sizeof np, "%ld", nprocs);
  /* which of stdout (1) and stderr (2) are terminals here: the ranks write into mpirun's pipes,
   * so a progress bar (lua/moonshard/progress.lua) asks this instead of its own descriptors */
  if (!getenv("MS_TTY")) setenv("MS_TTY", isatty(STDOUT_FILENO) ? (isatty(STDERR_FILENO) ? "12" : "1")
                                                                : (isatty(STDERR_FILENO) ? "2" : ""), 1);
  const char **argv = mpirun_argv(mpirun, np, exe, nwords, words);
  int report[2];
  if (!argv || pipe(report) != 0) {
    fprintf(stderr, "moonshard: %s: cannot start %s: %s\n", what, mpirun, argv ? strerror(errno) : "out of memory");
    free(argv);
    return EXIT_FAILURE;
  }
  fcntl(report[1], F_SETFD, FD_CLOEXEC);
  /* blocked before the fork, so a signal that comes at once is not lost: sigtimedwait takes
   * them, even SIGINT inherited as ignored (a background job of a script) */
  sigset_t signals, old;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT), sigaddset(&signals, SIGTERM), sigaddset(&signals, SIGCHLD);
  sigprocmask(SIG_BLOCK, &signals, &old);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) run_child(argv, &old, report[1]);
  int err = errno;
  close(report[1]);
  if (pid > 0 && !isatty(STDIN_FILENO)) setpgid(pid, pid); /* the child does it too: no race */
  if (pid > 0 && read(report[0], &err, sizeof err) != (ssize_t)sizeof err) err = 0;
  int sig = 0, status = pid > 0 ? supervise(pid, &signals, &sig) : 0;
  close(report[0]);
  sigprocmask(SIG_SETMASK, &old, NULL);
  free(argv);
  if (pid < 0 || err) {
    if (err == ENOENT) fprintf(stderr, "moonshard: %s needs %s (apt-get install openmpi-bin)\n", what, mpirun);
    else fprintf(stderr, "moonshard: %s: cannot run %s: %s\n", what, mpirun, strerror(err));
    return EXIT_FAILURE;
  }
  if (sig) {
    fprintf(stderr, "moonshard: interrupted by %s: ended %s and its %ld ranks\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            mpirun, nprocs);
    return 128 + sig;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : EXIT_FAILURE;
}

/* ms._launch_mpirun(nprocs, exe, words): runs words under `mpirun -np nprocs ... exe` and returns
 * the status to exit with (ms.spawn's launcher; see spawn.lua). */
static int l_launch_mpirun(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  const char *exe = luaL_checkstring(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  if (n < 1 || n > 1000000) return bind_error(L, "ms.spawn: nprocs must be in [1, 1000000], got %I", n);
  int nwords = bind_narrow_int(L, luaL_len(L, 3), 0, 100000, "ms.spawn", "number of command-line words");
  const char **words = lua_newuserdatauv(L, sizeof *words * (size_t)(nwords + 1), 0); /* freed by the GC */
  for (int i = 0; i < nwords; i++) {
    lua_rawgeti(L, 3, i + 1); /* the table keeps the string alive */
    if (!(words[i] = lua_tostring(L, -1))) return bind_error(L, "ms.spawn: command-line word %d is not a string", i + 1);
    lua_pop(L, 1);
  }
  char what[64];
  snprintf(what, sizeof what, "ms.spawn(%lld processes)", (long long)n);
  lua_pushinteger(L, launch_mpirun(what, (long)n, exe, nwords, words));
  return 1;
}

void bind_open_launch(lua_State *L) {
  lua_pushcfunction(L, l_launch_mpirun);
  lua_setfield(L, -3, "_launch_mpirun"); /* the module, below the method table */
}
