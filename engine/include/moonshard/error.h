/* error.h: how the engine reports failure. A function returns MS_OK / NULL-or-status and sets a
 * thread-local message that names the operation, the argument, what was expected and what came.
 * The Lua face raises that message; a host program reads it with ms_error_last(). */
#ifndef MOONSHARD_ERROR_H
#define MOONSHARD_ERROR_H

#include "moonshard/export.h"

typedef enum ms_status {
  MS_OK = 0,
  MS_ERR_ARG,      /* bad argument: shape, dtype, index, value */
  MS_ERR_MEMORY,   /* an allocation failed */
  MS_ERR_IO,       /* a file could not be read or written */
  MS_ERR_RUNTIME,  /* anything else that went wrong at run time */
} ms_status;

/* Sets the thread's last error (printf format) and returns `status` for `return ms_error(...)`. */
MS_API ms_status ms_error(ms_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The message of the last error on this thread ("" if none). Valid until the next ms_error. */
MS_API const char *ms_error_last(void);
MS_API void ms_error_clear(void);

#endif
