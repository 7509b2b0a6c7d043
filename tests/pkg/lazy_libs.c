/* lazy_libs.c: cuDNN and NCCL, which a CUDA build opens with dlopen on first use
 * (kernels/cuda/cudnn_lazy.c, engine/src/dist/nccl_lazy.c), load where they are installed and
 * every function the wrappers forward to resolves: asking each library for an error string loads
 * it and fills its whole table. Needs no GPU. Exits 77 (skipped) where neither library loads. */
#include <stdio.h>
#include <string.h>

#ifdef MS_HAVE_CUDNN
#include <cudnn.h>
#endif
#ifdef MS_HAVE_NCCL
#include <nccl.h>
#endif

/* 1 when the wrapper loaded the library, 0 when it is not installed here, -1 on a failure. */
static int check(const char *what, const char *answer) {
  if (strncmp(answer, "cannot load", 11) == 0) return printf("%s: %s (not installed here)\n", what, answer), 0;
  if (strstr(answer, "lacks")) return printf("%s: FAILED: %s\n", what, answer), -1;
  return printf("%s: loaded; its string for success is \"%s\"\n", what, answer), 1;
}

int main(void) {
  int loaded = 0, failed = 0, r;
#ifdef MS_HAVE_CUDNN
  r = check("cuDNN", cudnnGetErrorString(CUDNN_STATUS_SUCCESS));
  loaded += r > 0, failed += r < 0;
#endif
#ifdef MS_HAVE_NCCL
  r = check("NCCL", ncclGetErrorString(ncclSuccess));
  loaded += r > 0, failed += r < 0;
#endif
  (void)r, (void)check;
  if (failed) return 1;
  return loaded ? 0 : 77;
}
