/* mapped_file.c: ms_tensor_from_file, a 1-D tensor over a file's bytes mapped into memory
 * (PyTorch's torch.from_file). Pages are read on first touch, so a large token file costs no
 * copy and no resident memory beyond what a run reads; the mapping ends at the storage's last
 * release. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moonshard/error.h"
#include "moonshard/io.h"
#include "moonshard/storage.h"
#include "moonshard/tensor_core.h"

static void unmap(void *data, void *ctx) { munmap(data, (size_t)(uintptr_t)ctx); }

/* count < 0: every whole element after offset (the bytes must divide into elements). */
static ms_status elements_in(const char *path, size_t size, ms_dtype dt, int64_t offset, int64_t *count) {
  int64_t es = (int64_t)ms_dtype_size(dt);
  if (offset < 0 || (uint64_t)offset > size)
    return ms_error(MS_ERR_ARG, "from_file: offset %lld is outside %s (%zu bytes)", (long long)offset, path, size);
  if (offset % es)
    return ms_error(MS_ERR_ARG, "from_file: offset %lld is not a multiple of the %s element size %lld",
                    (long long)offset, ms_dtype_name(dt), (long long)es);
  int64_t avail = ((int64_t)size - offset) / es;
  if (*count < 0) {
    if (((int64_t)size - offset) % es)
      return ms_error(MS_ERR_ARG, "from_file: the %lld bytes of %s after offset %lld are not a whole number of %s "
                      "elements (give size)", (long long)((int64_t)size - offset), path, (long long)offset,
                      ms_dtype_name(dt));
    *count = avail;
  } else if (*count > avail) {
    return ms_error(MS_ERR_ARG, "from_file: size %lld exceeds the %lld %s elements %s holds after offset %lld",
                    (long long)*count, (long long)avail, ms_dtype_name(dt), path, (long long)offset);
  }
  return MS_OK;
}

/* The mapping covers the whole file (mmap wants a page-aligned start); the tensor starts at offset.
 * shared: writes go to the file (MAP_SHARED); otherwise they stay private to this process. */
static ms_tensor *map_view(int fd, size_t size, ms_dtype dt, int64_t offset, int64_t count, bool shared,
                           const char *path) {
  void *data = mmap(NULL, size, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) {
    ms_error(MS_ERR_IO, "from_file: cannot map %s: %s", path, strerror(errno));
    return NULL;
  }
  ms_storage *s = ms_storage_new_external(data, size, unmap, (void *)(uintptr_t)size);
  if (!s) {
    munmap(data, size);
    return NULL;
  }
  int64_t stride = 1, es = (int64_t)ms_dtype_size(dt);
  ms_tensor *t = ms_tensor_new_view(s, dt, 1, &count, &stride, offset / es);
  ms_storage_release(s); /* the view holds it */
  return t;
}

ms_tensor *ms_tensor_from_file(const char *path, ms_dtype dt, int64_t offset, int64_t count, bool shared) {
  int fd = open(path, shared ? O_RDWR : O_RDONLY);
  if (fd < 0) {
    ms_error(MS_ERR_IO, "from_file: cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  ms_tensor *t = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ms_error(MS_ERR_IO, "from_file: %s is not a regular file", path);
  } else if (elements_in(path, (size_t)st.st_size, dt, offset, &count) == MS_OK) {
    if (count == 0 || st.st_size == 0) /* nothing to map: mmap refuses a length of 0 */
      t = ms_tensor_new_empty(1, &(int64_t){0}, dt);
    else
      t = map_view(fd, (size_t)st.st_size, dt, offset, count, shared, path);
  }
  close(fd); /* the mapping keeps the file */
  return t;
}
