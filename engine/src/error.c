/* error.c: the thread-local last-error message behind ms_error / ms_error_last. */
#include <stdarg.h>
#include <stdio.h>

#include "moonshard/error.h"

static _Thread_local char last_message[1024];

ms_status ms_error(ms_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_message, sizeof last_message, fmt, ap);
  va_end(ap);
  return status;
}

const char *ms_error_last(void) { return last_message; }

void ms_error_clear(void) { last_message[0] = '\0'; }
