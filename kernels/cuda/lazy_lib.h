/* lazy_lib.h: the CUDA libraries the kernels open with dlopen on first use (cuBLAS in blas.c,
 * cuDNN in cudnn_lazy.c), so one build starts where they are missing: one way to find such a
 * library and to fill its table of function pointers, each failure written into the caller's
 * `why` in words a user can act on. (The engine's NCCL loader, engine/src/dist/nccl_lazy.c, keeps
 * its own few lines: the layer rules let the engine see only the kernels' face.) */
#ifndef MS_KCU_LAZY_LIB_H
#define MS_KCU_LAZY_LIB_H

#include <stdbool.h>
#include <stddef.h>

/* A library: its soname (found on the loader's path first), the path the build found it at (tried
 * next), and its name in messages ("cuDNN"). */
typedef struct {
  const char *soname, *fallback, *what;
} ms_kcu_lazy_lib;

/* The library's handle, or NULL with why = "cannot load cuDNN (libcudnn.so.9): <dlerror>". */
void *ms_kcu_lazy_open(const ms_kcu_lazy_lib *lib, char *why, size_t why_size);

/* Fills *slot (a function pointer) with the symbol `name`; false with why = "libcudnn.so.9 lacks
 * NAME (a cuDNN older than the one moonshard was built with?)". */
bool ms_kcu_lazy_resolve(const ms_kcu_lazy_lib *lib, void *handle, const char *name, void *slot, char *why,
                         size_t why_size);

#endif
