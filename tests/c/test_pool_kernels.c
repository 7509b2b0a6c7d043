/* test_pool_kernels.c: the 2x2 stride-2 float32 max-pool backward at kernel level, where the Lua
 * tests cannot reach: indices that are not in their window (not made by the forward) must still
 * be scattered like the general loop, -0 gradients land as +0 like the scatter's 0 + g, and
 * input rows and columns no window covers come out zero; with the AVX2 rows and without. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "test.h"

enum { H = 7, W = 21, OH = 3, OW = 10 }; /* odd H and W: a row and a column outside all windows */

/* gx from scratch: zeros, then each gradient added at its index. */
static void scatter(const float *go, const int64_t *at, float *gx) {
  for (int i = 0; i < H * W; i++) gx[i] = 0.0f;
  for (int o = 0; o < OH * OW; o++) gx[at[o]] += go[o];
}

static int run(const int64_t *at, const float *go) {
  ms_k_pool2d_geom g = {1, H, W, OH, OW, 2, 2, 2, 2, 0, 0, 1, 1};
  float got[H * W], want[H * W];
  for (int i = 0; i < H * W; i++) got[i] = 99.0f; /* every cell must be written */
  ms_k_max_pool2d_backward(MS_K_F32, &g, go, at, got);
  scatter(go, at, want);
  return memcmp(got, want, sizeof got) == 0;
}

int main(int argc, char **argv) {
  int64_t at[OH * OW];
  float go[OH * OW];
  for (int oh = 0; oh < OH; oh++)
    for (int ow = 0; ow < OW; ow++) {
      int o = oh * OW + ow, tap = (o * 7) % 4;
      at[o] = (2 * oh + tap / 2) * W + 2 * ow + tap % 2;
      go[o] = (float)(o - 11) * 0.25f;
    }
  go[3] = -0.0f;
  CHECK(run(at, go)); /* the forward's kind of indices */
  at[5] = 0;           /* outside its window (the vector part of row 0) */
  CHECK(run(at, go));
  at[5] = at[4];       /* two outputs on one cell: the gradients add */
  CHECK(run(at, go));
  at[OW - 1] = H * W - 1; /* the scalar tail of row 0, pointing at the uncovered corner */
  CHECK(run(at, go));
  /* Once more with the portable code (the ISA is chosen once per process: a fresh one). */
  if (!getenv("MS_GEMM_ISA") && argc > 0) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("MS_GEMM_ISA", "generic", 1);
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
  }
  return ms_test_finish();
}
