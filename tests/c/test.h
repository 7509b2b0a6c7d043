/* test.h: the few checks the C unit tests need. Each test program prints one line per failed
 * check and a closing "N passed, N failed" line, and exits non-zero if anything failed. */
#ifndef MS_TEST_H
#define MS_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

/* Uniform in [-1, 1) by xorshift64, the same sequence in every test program; per thread, so
 * tests may fill inputs from two threads at once. */
static inline double ms_test_uniform(void) {
  static _Thread_local uint64_t state = 88172645463325252ull;
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (double)(state >> 11) / 4503599627370496.0 - 1.0;
}

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
