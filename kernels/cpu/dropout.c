/* dropout.c: dropout's forward in one pass over the data: each chunk's mask is drawn (Philox, as
 * ms_k_philox_bernoulli) and applied (as ms_k_masked_scale) while the chunk is in cache, one
 * table call instead of two. Both steps are elementwise functions of (seed, offset, index), so
 * the chunking changes no bit of the mask or of y. */
#include "kernels/kernel_table.h"

/* Elements per chunk: a multiple of the 4 lanes of a Philox block (and of the 8 blocks the AVX2
 * generator makes at once), so a chunk starts on a block; its data stays in L1/L2. */
enum { DROPOUT_CHUNK = 4096 };

typedef struct dropout_job {
  ms_k_dtype dt;
  uint64_t seed, offset;
  int64_t n;
  double keep, scale;
  const char *in;
  uint8_t *mask;
  char *y;
} dropout_job;

static void dropout_chunks(void *arg, int64_t begin, int64_t end) {
  const dropout_job *j = arg;
  size_t es = ms_k_dtype_size(j->dt);
  for (int64_t c = begin; c < end; c++) {
    int64_t first = c * DROPOUT_CHUNK, len = j->n - first < DROPOUT_CHUNK ? j->n - first : DROPOUT_CHUNK;
    /* element `first` is lane 0 of block offset + first / 4 (ms_k_philox_bernoulli's layout);
     * the nested calls run on this thread (the pool does not nest) */
    ms_k_philox_bernoulli(j->seed, j->offset + (uint64_t)(first / 4), len, &j->keep, 0, j->mask + first);
    ms_k_masked_scale(j->dt, len, j->in + (size_t)first * es, j->mask + first, j->scale,
                      j->y + (size_t)first * es);
  }
}

int ms_k_cpu_dropout(const ms_k_exec *x, ms_k_dtype dt, uint64_t seed, uint64_t offset, int64_t n,
                     double keep, const void *in, double scale, uint8_t *mask, void *y) {
  (void)x;
  if (n <= 0) return 0;
  dropout_job j = {dt, seed, offset, n, keep, scale, in, mask, y};
  ms_k_parallel_for((n + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK, 2, dropout_chunks, &j);
  return 0;
}
