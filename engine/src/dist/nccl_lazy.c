/* nccl_lazy.c: NCCL opened with dlopen on first use (as kernels/cuda/blas.c opens cuBLAS), so
 * that a build with the nccl process group starts where NCCL is not installed; only
 * ms.distributed's "nccl" backend then fails, saying why. Each NCCL function pg_nccl.c calls is
 * defined here under its own name, with nccl.h's signature (compiler-checked), forwarding through
 * a table of pointers that dlsym fills once; the build hides these names, so a real libnccl
 * elsewhere in the process is never interposed. Unloaded, every call returns ncclSystemError and
 * ncclGetErrorString / ncclGetLastError say why. */
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* X(name, (parameters), (arguments)): the NCCL functions used that return ncclResult_t. */
#define NCCL_FUNCTIONS(X)                                                                                      \
  X(ncclGetUniqueId, (ncclUniqueId * id), (id))                                                                \
  X(ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank), (comm, nranks, id, rank))    \
  X(ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t *out, ncclConfig_t *config),               \
    (comm, color, key, out, config))                                                                           \
  X(ncclCommDestroy, (ncclComm_t comm), (comm))                                                                \
  X(ncclAllReduce,                                                                                             \
    (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st),       \
    (s, r, n, t, op, c, st))                                                                                   \
  X(ncclReduce,                                                                                                \
    (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,               \
     cudaStream_t st),                                                                                         \
    (s, r, n, t, op, root, c, st))                                                                             \
  X(ncclBroadcast, (const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st), \
    (s, r, n, t, root, c, st))                                                                                 \
  X(ncclAllGather, (const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st),        \
    (s, r, n, t, c, st))                                                                                       \
  X(ncclReduceScatter,                                                                                         \
    (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st),       \
    (s, r, n, t, op, c, st))

#define X_SLOT(name, params, args) ncclResult_t(*name) params;
static struct {
  NCCL_FUNCTIONS(X_SLOT)
  const char *(*ncclGetErrorString)(ncclResult_t);
  const char *(*ncclGetLastError)(ncclComm_t);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char why[512]; /* why loading failed, for ncclGetErrorString */

/* POSIX's way to turn dlsym's pointer into a function pointer. */
static bool resolve(void *lib, const char *name, void *slot) {
  void *sym = dlsym(lib, name);
  memcpy(slot, &sym, sizeof sym);
  if (!sym) snprintf(why, sizeof why, "%s lacks %s (an NCCL older than the one moonshard was built with?)",
                     MS_NCCL_SONAME, name);
  return sym != NULL;
}

static void load(void) {
  void *lib = dlopen(MS_NCCL_SONAME, RTLD_NOW | RTLD_LOCAL); /* the loader's path first */
  if (!lib) lib = dlopen(MS_NCCL_FALLBACK, RTLD_NOW | RTLD_LOCAL); /* then where the build found it */
  if (!lib) {
    snprintf(why, sizeof why, "cannot load NCCL (%s): %s", MS_NCCL_SONAME, dlerror());
    return;
  }
  bool ok = resolve(lib, "ncclGetErrorString", &api.ncclGetErrorString) &&
            resolve(lib, "ncclGetLastError", &api.ncclGetLastError);
#define X_RESOLVE(name, params, args) ok = ok && resolve(lib, #name, &api.name);
  NCCL_FUNCTIONS(X_RESOLVE)
  if (!ok) {
    dlclose(lib);
    return;
  }
  loaded = true;
}

static bool ready(void) {
  pthread_once(&once, load);
  return loaded;
}

#define X_DEFINE(name, params, args)                                                                             \
  ncclResult_t name params { return ready() ? api.name args : ncclSystemError; }
NCCL_FUNCTIONS(X_DEFINE)

const char *ncclGetErrorString(ncclResult_t r) { return ready() ? api.ncclGetErrorString(r) : why; }

const char *ncclGetLastError(ncclComm_t comm) { return ready() ? api.ncclGetLastError(comm) : ""; }
