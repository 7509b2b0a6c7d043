/* test_isa.h: runs a kernel test's checks once per CPU kernel ISA (MS_GEMM_ISA is read once per
 * process, so each ISA gets a forked child) and adds the child's counts to the parent's. */
#ifndef MS_TEST_ISA_H
#define MS_TEST_ISA_H

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "test.h"

/* run(isa) in a child with MS_GEMM_ISA=isa; a child that dies counts as a failure. */
static void ms_test_isa_in_child(const char *isa, void (*run)(const char *isa)) {
  int fd[2];
  if (pipe(fd) != 0) {
    CHECK(!"pipe");
    return;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    ms_test_passed = ms_test_failed = 0; /* the parent keeps its own counts */
    setenv("MS_GEMM_ISA", isa, 1);
    run(isa);
    printf("isa %s (%s): %d passed, %d failed\n", isa, ms_k_gemm_isa(), ms_test_passed, ms_test_failed);
    fflush(NULL);
    int counts[2] = {ms_test_passed, ms_test_failed};
    _exit(write(fd[1], counts, sizeof counts) == sizeof counts ? 0 : 1);
  }
  close(fd[1]);
  int counts[2] = {0, 1}, status = 0;
  if (read(fd[0], counts, sizeof counts) != sizeof counts) counts[1] = 1;
  close(fd[0]);
  waitpid(pid, &status, 0);
  ms_test_passed += counts[0];
  ms_test_failed += counts[1];
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

#endif
