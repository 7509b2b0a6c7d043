/* lib_error.c: the thread-local message of a failed library call (lib_error.h). */
#include <stdarg.h>
#include <stdio.h>

#include "kernels/cuda/lib_error.h"

static _Thread_local char detail[512];

int ms_kcu_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return MS_KCU_ERR_DETAIL;
}

const char *ms_kcu_detail(void) { return detail[0] ? detail : "a CUDA library call failed"; }
