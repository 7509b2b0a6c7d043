/* test.h: the few checks the C unit tests need. Each test program prints one line per failed
 * check and a closing "N passed, N failed" line, and exits non-zero if anything failed. */
#ifndef MS_TEST_H
#define MS_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int ms_test_passed, ms_test_failed;

#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (cond) ms_test_passed++;                                                          \
    else { ms_test_failed++; fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } \
  } while (0)
#define CHECK_NEAR(a, b, tol)                                                            \
  do {                                                                                   \
    double a_ = (a), b_ = (b);                                                           \
    if (fabs(a_ - b_) <= (tol)) ms_test_passed++;                                        \
    else { ms_test_failed++; fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g (tol %g)\n", \
                                     __FILE__, __LINE__, #a, a_, b_, (double)(tol)); }    \
  } while (0)
/* The last engine error contains `needle`. */
#define CHECK_ERROR_HAS(needle)                                                          \
  do {                                                                                   \
    const char *m_ = ms_error_last();                                                    \
    if (strstr(m_, (needle))) ms_test_passed++;                                          \
    else { ms_test_failed++; fprintf(stderr, "%s:%d: error \"%s\" lacks \"%s\"\n",       \
                                     __FILE__, __LINE__, m_, (needle)); }                 \
  } while (0)

static inline int ms_test_finish(void) {
  printf("%d passed, %d failed\n", ms_test_passed, ms_test_failed);
  return ms_test_failed ? 1 : 0;
}

#endif
