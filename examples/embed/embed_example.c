/* embed_example.c: a host C program that keeps its own float buffer, hands it to a Lua function
 * as a tensor without copying, reads the result back, and shows how a Lua error comes back as
 * a message. Exits non-zero on any mismatch, so ctest runs it as `example.embed`. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <moonshard/embed.h>
#include <moonshard/moonshard.h>

static const char *model_code =
    "local ms = require 'moonshard'\n"
    "function scale(t) return t * 2 + 1 end\n"
    "model = { forward = function(t) return t:sum() end }\n";

static int failures;

static void expect(int ok, const char *what) {
  if (!ok) {
    failures++;
    fprintf(stderr, "embed_example: FAILED: %s (%s)\n", what, ms_error_last());
  }
}

/* Calls scale() on the host's buffer and checks every value of the result. */
static void run_scale(ms_state *S) {
  /* the host's memory, wrapped and never copied; static because Lua may hold its tensor (a
   * view of this buffer) until it collects it, so the buffer must outlive the call */
  static float host[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {2, 3};
  ms_tensor *x = ms_tensor_new_from_data(host, MS_FLOAT32, 2, shape, NULL, NULL);
  expect(x != NULL, "wrap the host buffer");
  if (x == NULL) return;
  ms_tensor *y = NULL;
  ms_status st = ms_state_call_tensors(S, "scale", 1, &x, &y);
  expect(st == MS_OK, "call scale");
  if (st != MS_OK) fprintf(stderr, "%s\n", ms_state_error(S));
  if (y != NULL) {
    expect(y->ndim == 2 && y->shape[0] == 2 && y->shape[1] == 3, "result shape (2, 3)");
    for (int64_t i = 0; i < ms_tensor_numel(y); i++)
      expect(fabs(ms_tensor_get_flat(y, i) - (2.0 * (double)host[i] + 1.0)) < 1e-6, "result value");
    printf("scale(x) = 2x + 1: ");
    for (int64_t i = 0; i < ms_tensor_numel(y); i++) printf("%g ", ms_tensor_get_flat(y, i));
    printf("\n");
  }
  ms_tensor_release(y);
  ms_tensor_release(x); /* ours; Lua releases its own when it collects it */
}

/* A dotted name reaches a function inside a table. */
static void run_dotted(ms_state *S) {
  static float host[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  ms_tensor *x = ms_tensor_new_from_data(host, MS_FLOAT32, 1, shape, NULL, NULL);
  ms_tensor *total = NULL;
  expect(ms_state_call_tensors(S, "model.forward", 1, &x, &total) == MS_OK, "call model.forward");
  double v = 0;
  expect(total != NULL && ms_tensor_item(total, &v) == MS_OK && fabs(v - 10.0) < 1e-6,
         "model.forward(x) = 10");
  printf("model.forward(x) = %g\n", v);
  ms_tensor_release(total);
  ms_tensor_release(x);
}

/* Errors come back as a status and a message with a traceback; nothing is printed or exits. */
static void run_errors(ms_state *S) {
  ms_status st = ms_state_run_string(S, "local t = nil\nreturn t.field", "=bad_chunk");
  expect(st != MS_OK, "bad code fails");
  const char *msg = ms_state_error(S);
  expect(strstr(msg, "bad_chunk:2:") != NULL, "message names the chunk and line");
  expect(strstr(msg, "stack traceback") != NULL, "message carries a traceback");
  expect(strstr(ms_error_last(), "stack traceback") != NULL, "ms_error_last has it too");
  printf("error came back as:\n%s\n", msg);

  ms_tensor *out = NULL;
  st = ms_state_call_tensors(S, "no_such.function", 0, NULL, &out);
  expect(st != MS_OK && out == NULL, "missing function fails");
  expect(strstr(ms_state_error(S), "no_such") != NULL, "message names the missing function");

  expect(ms_state_run_string(S, "x = ", "=syntax") == MS_ERR_ARG, "syntax error is MS_ERR_ARG");
  expect(ms_state_run_string(S, "y = 1", "=ok") == MS_OK && ms_state_error(S)[0] == '\0',
         "success clears the message");
}

int main(void) {
  ms_state *S = ms_state_open();
  if (S == NULL) {
    fprintf(stderr, "embed_example: ms_state_open: %s\n", ms_error_last());
    return 1;
  }
  if (ms_state_run_string(S, model_code, "=model") != MS_OK) {
    fprintf(stderr, "embed_example: %s\n", ms_state_error(S));
    ms_state_close(S);
    return 1;
  }
  run_scale(S);
  run_dotted(S);
  run_errors(S);
  ms_state_close(S);
  printf("%s\n", failures ? "embed_example: FAILED" : "embed_example: ok");
  return failures ? 1 : 0;
}
