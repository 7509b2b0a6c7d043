/* host.c: the smallest program embedding moonshard, built by tests/pkg/check_packaging.sh against
 * an installed or uninstalled moonshard (pkg-config, find_package, the static archive): runs one
 * Lua line that requires moonshard, computes on a tensor and checks the answer. */
#include <stdio.h>

#include "moonshard/embed.h"

int main(void) {
  ms_state *S = ms_state_open();
  if (!S) return fprintf(stderr, "host: ms_state_open failed\n"), 1;
  const char *code = "local ms = require 'moonshard'\n"
                     "local nn = require 'moonshard.nn'\n"
                     "ms.manual_seed(0)\n"
                     "local y = nn.Linear(3, 2)(ms.ones(4, 3))\n"
                     "assert(ms.ones(2, 3):sum():item() == 6 and y:size(1) == 4 and y:size(2) == 2)\n";
  if (ms_state_run_string(S, code, "host") != MS_OK) {
    fprintf(stderr, "host: %s\n", ms_state_error(S));
    ms_state_close(S);
    return 1;
  }
  ms_state_close(S);
  puts("host: ok");
  return 0;
}
