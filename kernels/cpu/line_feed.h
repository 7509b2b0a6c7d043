/* line_feed.h: private to kernels/cpu. Memory the next block of work will read, requested into L2
 * a few lines at a time between the current block's GEMM calls. The Winograd transforms read rows
 * of tensors far larger than L2; as plain loads those stalled on every line (perf: the row loads
 * were the hot instructions), and all at once the requests overflow the core's miss queue; paced
 * over the products, they arrive while the FMAs run. Only hints: a wrong range costs time, never
 * a fault or a result. */
#ifndef MS_LINE_FEED_H
#define MS_LINE_FEED_H

#include <stddef.h>
#include <stdint.h>

#define MS_K_FEED_RANGES 1024

typedef struct ms_k_line_feed {
  const char *at[MS_K_FEED_RANGES], *end[MS_K_FEED_RANGES]; /* byte ranges still to request */
  int n, i;                                                 /* ranges, the one being requested */
  int64_t lines, per_call;                                  /* lines in all, lines per call */
} ms_k_line_feed;

static inline void ms_k_feed_reset(ms_k_line_feed *f) { f->n = f->i = 0, f->lines = f->per_call = 0; }

/* Adds [p, p + bytes) (ranges past MS_K_FEED_RANGES are dropped: it is only a hint). */
static inline void ms_k_feed_add(ms_k_line_feed *f, const void *p, size_t bytes) {
  if (f->n == MS_K_FEED_RANGES || bytes == 0) return;
  f->at[f->n] = p, f->end[f->n++] = (const char *)p + bytes;
  f->lines += (int64_t)(bytes + 63) / 64;
}

/* Spreads the lines over `calls` calls of ms_k_feed_some. */
static inline void ms_k_feed_pace(ms_k_line_feed *f, int64_t calls) {
  f->per_call = (f->lines + calls - 1) / (calls > 0 ? calls : 1);
}

static inline void ms_k_feed_some(ms_k_line_feed *f) {
  for (int64_t k = 0; k < f->per_call && f->i < f->n; k++) {
    __builtin_prefetch(f->at[f->i], 0, 2); /* locality 2: into L2 (prefetcht1) */
    f->at[f->i] += 64;
    if (f->at[f->i] >= f->end[f->i]) f->i++;
  }
}

#endif
