/* atomic_file.h (private): the open/commit/abort protocol behind ms_write_file_atomic
 * (moonshard/io.h says what "atomic" means), for writers that stream their bytes: the
 * safetensors writer. */
#ifndef MS_IO_ATOMIC_FILE_H
#define MS_IO_ATOMIC_FILE_H

#include <stdio.h>

#include "moonshard/error.h"

typedef struct ms_atomic_file {
  FILE *f; /* write the contents here */
  char *tmp, *path;
  const char *who; /* names the operation in errors */
} ms_atomic_file;
ms_status atomic_file_open(ms_atomic_file *af, const char *path, const char *who);
/* Flushes, syncs, renames into place and syncs the directory; af is released either way. */
ms_status atomic_file_commit(ms_atomic_file *af);
/* Closes and removes the temporary (after a failure); safe on a released af. */
void atomic_file_abort(ms_atomic_file *af);

#endif
