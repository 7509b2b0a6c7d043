/* triangle.c: the CPU's tril / triu (triangle_zero): each matrix row keeps its elements on the
 * kept side of the diagonal and has the others set to zero bytes, rows spread over the pool. */
#include <string.h>

#include "kernels/kernel_table.h"

typedef struct tri_job {
  int64_t rows, cols, diagonal;
  int upper;
  size_t elsize;
  char *data;
} tri_job;

/* The columns [*lo, *hi) of matrix row i that become zero (clamped to the row). */
static void zero_span(const tri_job *job, int64_t i, int64_t *lo, int64_t *hi) {
  /* tril zeroes j > i + d, triu zeroes j < i + d; i + d cannot overflow: |d| is clamped */
  int64_t edge = i + job->diagonal;
  if (job->upper) *lo = 0, *hi = edge;
  else *lo = edge + 1, *hi = job->cols;
  if (*lo < 0) *lo = 0;
  if (*hi > job->cols) *hi = job->cols;
}

/* Rows [r0, r1) of all the matrices, counted one after another. */
static void tri_range(void *ctx, int64_t r0, int64_t r1) {
  const tri_job *job = ctx;
  for (int64_t r = r0; r < r1; r++) {
    int64_t lo, hi;
    zero_span(job, r % job->rows, &lo, &hi);
    if (lo < hi) memset(job->data + ((size_t)r * (size_t)job->cols + (size_t)lo) * job->elsize, 0,
                        (size_t)(hi - lo) * job->elsize);
  }
}

int ms_k_cpu_triangle_zero(const ms_k_exec *x, int64_t batch, int64_t rows, int64_t cols, int upper,
                           int64_t diagonal, size_t elsize, void *data) {
  (void)x;
  if (batch == 0 || rows == 0 || cols == 0) return 0;
  /* a diagonal past either edge acts as the edge: clamping keeps i + d in range */
  if (diagonal > cols) diagonal = cols;
  if (diagonal < -rows) diagonal = -rows;
  tri_job job = {rows, cols, diagonal, upper, elsize, data};
  ms_k_parallel_for(batch * rows, cols >= 4096 ? 1 : 4096 / cols + 1, tri_range, &job);
  return 0;
}
