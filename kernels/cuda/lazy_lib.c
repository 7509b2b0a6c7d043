/* lazy_lib.c: see lazy_lib.h. */
#include "lazy_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *ms_kcu_lazy_open(const ms_kcu_lazy_lib *lib, char *why, size_t why_size) {
  void *handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
  if (!handle) handle = dlopen(lib->fallback, RTLD_NOW | RTLD_LOCAL);
  if (!handle) snprintf(why, why_size, "cannot load %s (%s): %s", lib->what, lib->soname, dlerror());
  return handle;
}

bool ms_kcu_lazy_resolve(const ms_kcu_lazy_lib *lib, void *handle, const char *name, void *slot, char *why,
                         size_t why_size) {
  void *sym = dlsym(handle, name);
  memcpy(slot, &sym, sizeof sym); /* POSIX's way to turn dlsym's pointer into a function pointer */
  if (!sym)
    snprintf(why, why_size, "%s lacks %s (a %s older than the one moonshard was built with?)", lib->soname, name,
             lib->what);
  return sym != NULL;
}
