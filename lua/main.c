/* main.c: the `moonshard` executable: runs scripts, -e code and -l modules in a Lua 5.4 state
 * where `require "moonshard"` works, and an interactive REPL. Command line, `arg` table and
 * error reporting follow the stock `lua` interpreter so scripts move between the two.
 * `-n N` launches N ranks by running itself under mpirun (see launch()). */
#define _POSIX_C_SOURCE 200809L /* sigaction, getline, fileno, isatty, strdup, readlink */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "launch.h"
#include "moonshard/dist.h"
#include "moonshard/embed.h"
#include "moonshard/runtime.h"

#ifdef MS_HAVE_READLINE
#include <sys/select.h>
#include <readline/history.h>
#include <readline/readline.h>
#endif

#define PROGNAME "moonshard"
#define HISTORY_MAX 1000

/* Prefix of error messages; NULL inside the REPL, where the prefix would only be noise. */
static const char *progname = PROGNAME;

/* This process's rank when an MPI launcher started several, else -1: errors then name the rank,
 * since mpirun merges the stderr of every rank into one stream. */
static long mpi_rank = -1;

/* ---- messages ------------------------------------------------------------------------------ */

static void print_error(const char *msg) {
  if (progname) fprintf(stderr, "%s: ", progname);
  if (progname && mpi_rank >= 0) fprintf(stderr, "[rank %ld] ", mpi_rank);
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
}

/* Prints and pops the error message of a failed status; returns the status. */
static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    print_error(msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
  }
  return status;
}

static void print_version(void) {
  printf("%s %s (%s)\n", PROGNAME, MS_VERSION_STRING, LUA_RELEASE);
  fflush(stdout);
}

static void print_usage(FILE *to) {
  fprintf(to,
          "usage: %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e stat    execute string 'stat'\n"
          "  -i         enter interactive mode after running 'script' (even if it failed)\n"
          "  -l mod     require library 'mod' into global 'mod'\n"
          "  -l g=mod   require library 'mod' into global 'g'\n"
          "  -n N       run N ranks of the script under mpirun (-n 1 runs here)\n"
          "  -v         show version information\n"
          "  -E         ignore environment variables (LUA_PATH, LUA_CPATH)\n"
          "  -W         turn warnings on\n"
          "  -h, --help show this help and exit\n"
          "  --version  show the version and exit\n"
          "  --         stop handling options\n"
          "  -          stop handling options and run stdin\n"
          "With no script and no -e, the REPL starts when stdin is a terminal; otherwise stdin\n"
          "runs as a script. Scripts load the library with: local ms = require \"moonshard\"\n"
          "REPL history: $MOONSHARD_HISTORY (empty: none), else ~/.moonshard_history\n"
          "-n N: each rank runs the same command line; $MS_MPIRUN names the launcher (default\n"
          "mpirun); engine threads per rank default to cores / ranks on the node\n"
          "($MS_NUM_THREADS overrides). An error on one rank ends every rank.\n",
          PROGNAME);
  fflush(to);
}

/* ---- command line ------------------------------------------------------------------------ */

typedef struct options {
  int argc;
  char **argv;
  int end;          /* index of the first argv entry that is not an interpreter option */
  int script;       /* argv index of the script, 0 when there is none */
  bool interactive; /* -i */
  bool version;     /* -v */
  bool has_e;       /* -e given: no REPL unless -i (-l alone still opens it, as in lua) */
  bool no_env;      /* -E */
  bool warnings;    /* -W */
  long nprocs;      /* -n; 0 when not given */
} options;

enum { PARSE_RUN = -1 }; /* parse_options: go on; any other value is the exit status */

static int usage_error(const char *opt, bool missing_value) {
  if (missing_value) fprintf(stderr, "%s: '%s' needs an argument\n", PROGNAME, opt);
  else fprintf(stderr, "%s: unrecognized option '%s'\n", PROGNAME, opt);
  print_usage(stderr);
  return EXIT_FAILURE;
}

/* The value of -n: ranks to run (checked against the launcher's world in launch()). */
static int check_nprocs(options *o, const char *value) {
  char *end;
  errno = 0;
  long n = strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || n < 1 || n > 1000000) {
    fprintf(stderr, "%s: -n needs a positive number of processes, got '%s'\n", PROGNAME, value);
    return EXIT_FAILURE;
  }
  o->nprocs = n;
  return PARSE_RUN;
}

/* An option that takes a value, attached ("-eCODE") or as the next argument; advances *i. */
static const char *option_value(options *o, int *i) {
  const char *a = o->argv[*i];
  if (a[2] != '\0') return a + 2;
  if (*i + 1 >= o->argc) return NULL;
  return o->argv[++*i];
}

/* Handles the option at *i (a string starting with '-'); PARSE_RUN or an exit status. */
static int parse_option(options *o, int *i) {
  const char *a = o->argv[*i];
  if (strcmp(a, "--version") == 0) {
    print_version();
    return EXIT_SUCCESS;
  }
  if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
    print_usage(stdout);
    return EXIT_SUCCESS;
  }
  bool alone = a[1] != '\0' && a[2] == '\0';
  switch (a[1]) {
  case 'i': o->interactive = true; break;
  case 'v': o->version = true; break;
  case 'E': o->no_env = true; break;
  case 'W': o->warnings = true; break;
  case 'e': case 'l': case 'n': {
    const char *value = option_value(o, i);
    if (value == NULL) return usage_error(a, true);
    if (a[1] == 'n') return check_nprocs(o, value);
    if (a[1] == 'e') o->has_e = true;
    return PARSE_RUN;
  }
  default: return usage_error(a, false);
  }
  return alone ? PARSE_RUN : usage_error(a, false);
}

/* Reads the interpreter options; finds the script. PARSE_RUN, or the status to exit with. */
static int parse_options(options *o, int argc, char **argv) {
  *o = (options){.argc = argc, .argv = argv, .end = argc};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "-") == 0) { /* the script ("-" is stdin) */
      o->end = o->script = i;
      return PARSE_RUN;
    }
    if (strcmp(a, "--") == 0) {
      o->end = i;
      o->script = i + 1 < argc ? i + 1 : 0;
      return PARSE_RUN;
    }
    int status = parse_option(o, &i);
    if (status != PARSE_RUN) return status;
  }
  return PARSE_RUN;
}

/* ---- launching ranks (-n N) ------------------------------------------------------------------ */

/* A non-negative integer from the environment, else -1. */
static long env_long(const char *name) {
  const char *env = getenv(name);
  if (env == NULL || *env == '\0') return -1;
  char *end;
  errno = 0;
  long v = strtol(env, &end, 10);
  return errno == 0 && *end == '\0' && v >= 0 ? v : -1;
}

/* Runs `mpirun ... -- <this executable> <argv[1..]>` and waits for it (launch.h: signals to
 * this process end the job), so every rank runs the same command line, -n included (a rank sees
 * OMPI_COMM_WORLD_SIZE and runs the script). Returns the status to exit with. */
static int run_mpirun(const options *o) {
  /* the executable by its absolute path: argv[0] may be a bare name found through PATH */
  static char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) self[len] = '\0';
  else snprintf(self, sizeof self, "%s", o->argv[0]);
  char what[48];
  snprintf(what, sizeof what, "-n %ld", o->nprocs);
  return launch_mpirun(what, o->nprocs, self, o->argc - 1, (const char *const *)o->argv + 1);
}

/* Under a launcher (mpirun sets OMPI_COMM_WORLD_SIZE in every rank) -n must agree with its world
 * and the script runs here; otherwise -n N > 1 becomes mpirun. PARSE_RUN, or an exit status. */
static int launch(const options *o) {
  long world = env_long("OMPI_COMM_WORLD_SIZE");
  if (world >= 1) {
    if (world > 1) mpi_rank = env_long("OMPI_COMM_WORLD_RANK");
    if (o->nprocs > 0 && o->nprocs != world) {
      fprintf(stderr, "%s: -n %ld, but the launcher started %ld ranks\n", PROGNAME, o->nprocs,
              world);
      return EXIT_FAILURE;
    }
    return PARSE_RUN;
  }
  if (o->nprocs <= 1) return PARSE_RUN;
  /* mpirun hands stdin to rank 0 alone: a REPL or a script read from stdin cannot be replicated */
  bool from_stdin = o->script > 0 && strcmp(o->argv[o->script], "-") == 0 &&
                    strcmp(o->argv[o->script - 1], "--") != 0;
  if (o->interactive || from_stdin || (o->script == 0 && !o->has_e)) {
    fprintf(stderr, "%s: -n %ld needs a script file or -e (not -i or stdin)\n", PROGNAME,
            o->nprocs);
    return EXIT_FAILURE;
  }
  return run_mpirun(o);
}

/* The global `arg`: the script at 0, its arguments at 1.., the interpreter and its options at
 * negative indices (without a script, the interpreter is at 0). */
static void create_arg_table(lua_State *L, const options *o) {
  int zero = o->script;
  lua_createtable(L, o->argc - zero - 1 > 0 ? o->argc - zero - 1 : 0, zero + 1);
  for (int i = 0; i < o->argc; i++) {
    lua_pushstring(L, o->argv[i]);
    lua_rawseti(L, -2, i - zero);
  }
  lua_setglobal(L, "arg");
}

/* ---- running code, interruptible with Ctrl-C ---------------------------------------------- */

/* The state running a chunk: SIGINT interrupts it. NULL while the REPL reads a line. */
static lua_State *volatile running;
static volatile sig_atomic_t interrupted; /* Ctrl-C came while reading a line */
static bool sigint_ignored;               /* inherited SIG_IGN (a background job): keep it */

static void set_sigint(void (*handler)(int)) {
  if (sigint_ignored) return;
  struct sigaction sa;
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: a read waiting for a line must return EINTR */
  sigaction(SIGINT, &sa, NULL);
}

/* Runs as a hook at the next Lua instruction after Ctrl-C, where raising an error is safe. */
static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_sigint(int sig) {
  (void)sig;
  lua_State *L = running;
  if (L == NULL) {
    interrupted = 1;
    return;
  }
  /* a second Ctrl-C ends the process, for code stuck in C that never reaches the hook */
  set_sigint(SIG_DFL);
  lua_sethook(L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* Calls the function below nargs arguments under the traceback handler; Ctrl-C interrupts. */
static int docall(lua_State *L, int nargs, int nresults) {
  running = L;
  set_sigint(on_sigint);
  int status = ms_lua_pcall(L, nargs, nresults);
  set_sigint(SIG_DFL);
  running = NULL;
  return status;
}

static int run_chunk(lua_State *L, const char *code, const char *name) {
  int status = luaL_loadbuffer(L, code, strlen(code), name);
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

/* -l spec: "mod" sets global mod (up to a '-' version suffix), "g=mod" sets global g. */
static int run_library(lua_State *L, const char *spec) {
  const char *eq = strchr(spec, '=');
  const char *modname = eq ? eq + 1 : spec;
  size_t glen = eq ? (size_t)(eq - spec) : strcspn(spec, "-");
  lua_pushlstring(L, spec, glen); /* the global's name, kept on the stack while in use */
  lua_getglobal(L, "require");
  lua_pushstring(L, modname);
  int status = docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, lua_tostring(L, -2));
  report(L, status);
  lua_pop(L, 1);
  return status;
}

/* Runs every -e and -l in command-line order; stops at the first failure. */
static int run_options(lua_State *L, const options *o) {
  for (int i = 1; i < o->end; i++) {
    const char *a = o->argv[i];
    char opt = a[1];
    if (opt != 'e' && opt != 'l' && opt != 'n') continue;
    const char *value = a[2] ? a + 2 : o->argv[++i];
    int status = LUA_OK;
    if (opt == 'e') status = run_chunk(L, value, "=(command line)");
    if (opt == 'l') status = run_library(L, value);
    if (status != LUA_OK) return status;
  }
  return LUA_OK;
}

/* Pushes arg[1..#arg] as the script's `...`; returns how many. */
static int push_script_args(lua_State *L) {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
  int n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -n - 1);
  return n;
}

static int run_script(lua_State *L, const options *o) {
  const char *fname = o->argv[o->script];
  /* "-" is stdin, unless it came after "--", where it is a file's name */
  if (strcmp(fname, "-") == 0 && strcmp(o->argv[o->script - 1], "--") != 0) fname = NULL;
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) status = docall(L, push_script_args(L), 0);
  return report(L, status);
}

static int run_stdin(lua_State *L) {
  int status = luaL_loadfile(L, NULL);
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

/* ---- the REPL's Lua half ------------------------------------------------------------------------ */

/* lua/moonshard/repl.lua (completion, what a line compiles to, printing results), referenced
 * from the registry while the REPL runs. */
static int repl_module = LUA_NOREF;

static void push_repl_function(lua_State *L, const char *name) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, repl_module);
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
}

/* ---- reading lines -------------------------------------------------------------------------- */

/* Negative, so that they never collide with Lua's status codes. */
enum { READ_LINE = -1, READ_EOF = -2, READ_INTERRUPTED = -3 };

#ifdef MS_HAVE_READLINE
static bool use_readline; /* only on a terminal: piped input reads plainly, like a file */
static char *history_file;
static char *line_read;
static bool line_done;

static void history_start(void) {
  const char *env = getenv("MOONSHARD_HISTORY");
  const char *home = getenv("HOME");
  using_history();
  stifle_history(HISTORY_MAX);
  /* a statement of several lines stays one entry across sessions: each entry is written after
   * a "#<time>" line, and the lines up to the next one are read back as one entry */
  history_comment_char = '#';
  history_write_timestamps = 1;
  history_multiline_entries = 1;
  if (env != NULL) {
    if (*env != '\0') history_file = strdup(env);
  } else if (home != NULL && *home != '\0') {
    size_t n = strlen(home) + sizeof "/.moonshard_history";
    if ((history_file = malloc(n)) != NULL) snprintf(history_file, n, "%s/.moonshard_history", home);
  }
  /* append_history needs the file to exist; a history that cannot be kept is no error */
  if (history_file && read_history(history_file) == ENOENT) write_history(history_file);
}

static void history_add(const char *entry) {
  if (!use_readline || entry[strspn(entry, " \t\n")] == '\0') return;
  HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
  if (last && strcmp(last->line, entry) == 0) return;
  add_history(entry);
  if (history_file) append_history(1, history_file); /* at once: a killed REPL keeps it */
}

static void history_end(void) {
  if (history_file) history_truncate_file(history_file, HISTORY_MAX);
  free(history_file);
  history_file = NULL;
}

/* ---- completion: the candidates come from repl.complete ---- */

static lua_State *completing;  /* the REPL's state, for readline's callbacks */
static int candidates_index;    /* the stack index of repl.complete's list while completing */

static int candidates_body(lua_State *L) {
  push_repl_function(L, "complete");
  lua_insert(L, 1);
  lua_call(L, 3, 1);
  return 1;
}

/* readline's generator: the next candidate (malloc'd, readline frees it), NULL after the last. */
static char *next_candidate(const char *text, int state) {
  static lua_Integer i;
  (void)text;
  if (state == 0) i = 0;
  char *s = NULL;
  if (lua_rawgeti(completing, candidates_index, ++i) == LUA_TSTRING) s = strdup(lua_tostring(completing, -1));
  lua_pop(completing, 1);
  return s;
}

static char **complete(const char *text, int start, int end) {
  rl_attempted_completion_over = 1; /* never file names: they would only mislead in Lua code */
  rl_completion_append_character = '\0'; /* after ms.cuda may come a '.' as well as a '(' */
  if (text[0] == '\0' && rl_line_buffer[strspn(rl_line_buffer, " \t")] == '\0') {
    rl_insert_text("  "); /* TAB on a blank line indents, as in Python's REPL */
    return NULL;
  }
  lua_State *L = completing;
  int top = lua_gettop(L);
  char **matches = NULL;
  lua_pushcfunction(L, candidates_body);
  lua_pushstring(L, rl_line_buffer);
  lua_pushinteger(L, start + 1);
  lua_pushinteger(L, end);
  if (lua_pcall(L, 3, 1, 0) == LUA_OK && lua_istable(L, -1)) {
    candidates_index = lua_gettop(L);
    matches = rl_completion_matches(text, next_candidate);
  }
  lua_settop(L, top);
  return matches;
}

static void completion_start(lua_State *L) {
  completing = L;
  rl_attempted_completion_function = complete;
  /* '.' and ':' stay inside a word, so "ms.cuda.is_" and "x:su" complete as a whole */
  rl_completer_word_break_characters = " \t\n\"'`@$><=;|&{}()[],+-*/%^#~";
  rl_completer_quote_characters = "\"'"; /* require "moonshard.opt<TAB> closes the string */
}

static void on_rl_line(char *line) {
  line_read = line; /* NULL at end of input */
  line_done = true;
  rl_callback_handler_remove(); /* so readline does not print the prompt again */
}

/* Ctrl-C at the prompt: drop the line being edited, leave the terminal as it was. */
static void rl_abandon_line(void) {
  rl_free_line_state();
  rl_callback_sigcleanup();
  rl_replace_line("", 0);
  rl_callback_handler_remove();
  fputc('\n', rl_outstream);
  fflush(rl_outstream);
}

/* readline's callback interface, so Ctrl-C is seen as a flag and handled here, outside the
 * signal handler. SIGINT is blocked except inside pselect: a Ctrl-C that comes while a key is
 * being handled waits for the next pselect instead of slipping past the check. */
static int read_with_readline(const char *prompt, char **line) {
  sigset_t sigint, unblocked;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  sigprocmask(SIG_BLOCK, &sigint, &unblocked);
  int fd = fileno(rl_instream), r = READ_LINE;
  line_done = false;
  rl_callback_handler_install(prompt, on_rl_line);
  while (!line_done) {
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(fd, &fds);
    int ready = interrupted ? -1 : pselect(fd + 1, &fds, NULL, NULL, NULL, &unblocked);
    if (interrupted) {
      rl_abandon_line();
      r = READ_INTERRUPTED;
      break;
    }
    if (ready > 0) rl_callback_read_char();
    else if (errno != EINTR) { /* the terminal went away */
      rl_callback_handler_remove();
      r = READ_EOF;
      break;
    }
  }
  sigprocmask(SIG_SETMASK, &unblocked, NULL);
  if (r == READ_LINE && line_read == NULL) r = READ_EOF; /* Ctrl-D */
  *line = r == READ_LINE ? line_read : NULL;
  return r;
}
#else
static void history_add(const char *entry) { (void)entry; }
static void history_end(void) {}
#endif

static int read_plain(const char *prompt, char **line) {
  fputs(prompt, stdout);
  fflush(stdout);
  size_t cap = 0;
  *line = NULL;
  if (getline(line, &cap, stdin) >= 0) return READ_LINE;
  free(*line);
  *line = NULL;
  if (interrupted) {
    clearerr(stdin);
    fputc('\n', stdout);
    return READ_INTERRUPTED;
  }
  return READ_EOF;
}

static const char *get_prompt(lua_State *L, bool first) {
  const char *global = first ? "_PROMPT" : "_PROMPT2"; /* as the stock lua allows */
  const char *p = lua_getglobal(L, global) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  lua_pop(L, 1); /* the string stays alive: it is referenced from the globals */
  return p ? p : first ? "> " : ">> ";
}

/* Reads one line and pushes it without its newline: READ_LINE, READ_EOF or READ_INTERRUPTED
 * (nothing pushed for the last two). */
static int push_line(lua_State *L, bool first) {
  const char *prompt = get_prompt(L, first);
  char *line = NULL;
  interrupted = 0;
  running = NULL;
  set_sigint(on_sigint);
#ifdef MS_HAVE_READLINE
  int r = use_readline ? read_with_readline(prompt, &line) : read_plain(prompt, &line);
#else
  int r = read_plain(prompt, &line);
#endif
  set_sigint(SIG_DFL);
  if (r != READ_LINE) return r;
  size_t n = strlen(line);
  if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
  lua_pushlstring(L, line, n);
  free(line);
  return READ_LINE;
}

/* ---- the REPL --------------------------------------------------------------------------------- */

/* Compiles the buffer at index 1 through repl.load, reading more lines while the statement is
 * incomplete. Leaves the function (and sets *quiet: a trailing ';') or the error message on top;
 * READ_INTERRUPTED drops the statement. */
static int load_statement(lua_State *L, bool *quiet) {
  for (;;) {
    push_repl_function(L, "load");
    lua_pushvalue(L, 1);
    int status = lua_pcall(L, 1, 3, 0);
    if (status != LUA_OK) return status;
    if (!lua_isnil(L, -3)) { /* compiled */
      *quiet = lua_toboolean(L, -2);
      lua_pop(L, 2);
      return LUA_OK;
    }
    bool incomplete = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_remove(L, -2); /* the nil: the message is on top */
    if (!incomplete) return LUA_ERRSYNTAX;
    int r = push_line(L, false);
    if (r == READ_EOF) return LUA_ERRSYNTAX; /* input ended mid-statement: report the error */
    if (r == READ_INTERRUPTED) return r;
    lua_remove(L, -2); /* the message */
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}

/* Leaves the compiled next statement (or its error message) alone on the stack. */
static int read_statement(lua_State *L, bool *quiet) {
  lua_settop(L, 0);
  int r = push_line(L, true);
  if (r != READ_LINE) return r;
  int status = load_statement(L, quiet);
  if (status == READ_INTERRUPTED) {
    lua_settop(L, 0);
    return READ_INTERRUPTED;
  }
  history_add(lua_tostring(L, 1));
  lua_remove(L, 1);
  return status;
}

/* Hands the results on the stack to repl.show: `_` becomes the first, and they print (tables
 * pretty, tensors through __tostring) unless the line ended in ';'. */
static void show_results(lua_State *L, bool quiet) {
  int n = lua_gettop(L);
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  push_repl_function(L, "show");
  lua_insert(L, 1);
  lua_pushboolean(L, quiet);
  lua_insert(L, 2);
  if (lua_pcall(L, n + 1, 0, 0) != LUA_OK)
    print_error(lua_pushfstring(L, "error printing the result (%s)", lua_tostring(L, -1)));
}

/* Loads lua/moonshard/repl.lua and sets the session's globals (ms, nn, F, optim, help). */
static int repl_start(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "moonshard.repl");
  int status = docall(L, 1, 1);
  if (status != LUA_OK) return report(L, status);
  lua_getfield(L, -1, "setup");
  lua_insert(L, -2);
  repl_module = luaL_ref(L, LUA_REGISTRYINDEX); /* pops the module; setup stays on top */
  return report(L, docall(L, 0, 0));
}

static void repl(lua_State *L) {
  const char *saved = progname;
  progname = NULL;
  printf("%s %s (%s)  --  type Lua; help(x) or ?x documents x; Ctrl-D exits\n", PROGNAME,
         MS_VERSION_STRING, LUA_RELEASE);
  if (repl_start(L) != LUA_OK) {
    progname = saved;
    return;
  }
#ifdef MS_HAVE_READLINE
  use_readline = isatty(fileno(stdin));
  if (use_readline) {
    rl_readline_name = PROGNAME; /* for $if moonshard in ~/.inputrc */
    rl_instream = stdin;         /* NULL until readline initialises; pselect needs it first */
    rl_outstream = stdout;
    rl_catch_signals = 0;        /* Ctrl-C is ours: see read_with_readline */
    completion_start(L);
    history_start();
  }
#endif
  bool quiet = false;
  for (int status; (status = read_statement(L, &quiet)) != READ_EOF;) {
    if (status == READ_INTERRUPTED) continue;
    if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK) show_results(L, quiet);
    else report(L, status);
  }
  lua_settop(L, 0);
  luaL_unref(L, LUA_REGISTRYINDEX, repl_module);
  repl_module = LUA_NOREF;
  fputc('\n', stdout);
  fflush(stdout);
  history_end();
  progname = saved;
}

/* ---- main ------------------------------------------------------------------------------------ */

static bool starts_repl(const options *o) {
  if (o->interactive) return true;
  return o->script == 0 && !o->has_e && !o->version && isatty(fileno(stdin));
}

/* Everything that touches Lua, run protected so even a memory error is reported. */
static int protected_main(lua_State *L) {
  const options *o = lua_touserdata(L, 1);
  if (o->no_env) { /* the package library reads this flag while it opens */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  ms_lua_openlibs(L);
  create_arg_table(L, o);
  if (o->warnings) lua_warning(L, "@on", 0);
  if (o->version && !starts_repl(o)) print_version();
  bool ok = run_options(L, o) == LUA_OK;
  if (ok && o->script > 0) ok = run_script(L, o) == LUA_OK;
  /* -i still opens the REPL after a failure: the globals are there to inspect */
  if (starts_repl(o)) repl(L);
  else if (ok && o->script == 0 && !o->has_e && !o->version) ok = run_stdin(L) == LUA_OK;
  lua_pushboolean(L, ok);
  return 1;
}

int main(int argc, char **argv) {
  options o;
  int exit_status = parse_options(&o, argc, argv);
  if (exit_status == PARSE_RUN) exit_status = launch(&o);
  if (exit_status != PARSE_RUN) return exit_status;
  struct sigaction old;
  sigint_ignored = sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    print_error("cannot create the Lua state: not enough memory");
    return EXIT_FAILURE;
  }
  lua_pushcfunction(L, protected_main);
  lua_pushlightuserdata(L, &o);
  int status = lua_pcall(L, 1, 1, 0);
  bool ok = status == LUA_OK && lua_toboolean(L, -1);
  report(L, status);
  if (!ok && mpi_rank >= 0) {
    /* A failed rank leaves at once, without closing the state: closing runs finalizers, and
     * finalizing MPI waits for ranks that may be blocked in a collective with this one. The
     * non-zero exit makes mpirun end every other rank. */
    fflush(NULL);
    _exit(EXIT_FAILURE);
  }
  /* before closing: a finalizer may wait on a collective, which a peer waiting for this rank
   * elsewhere must not turn into a hang until the timeout */
  if (mpi_rank >= 0) ms_dist_leaving();
  lua_close(L);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
