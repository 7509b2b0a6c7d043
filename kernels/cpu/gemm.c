/* gemm.c: the SGEMM/DGEMM/bf16 GEMM driver. Goto/BLIS cache blocking: a KC x NC panel of B is
 * packed once by the whole team (it lives in L3), each thread packs MC x KC blocks of A (in L2)
 * and sweeps them with an MR x NR register micro-kernel chosen at run time for the CPU
 * (gemm_ukr.h). */
#define _GNU_SOURCE
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/gemm_ukr.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Letters: M, N, K the problem; MR x NR the register tile; MC x KC the packed block of A; KC x NC
 * the packed panel of B. The driver runs on element sizes and byte pointers; only packing, the
 * macro-kernel and the micro-kernels know the element type. Three kinds: float, double, and
 * bfloat16 operands with a float C, whose packed panels hold K in pairs (kstep 2). */

/* Below this many multiply-adds per thread, waking another thread costs more than it saves. */
#define MIN_WORK_PER_THREAD (48 * 48 * 48)
/* Work units of each B panel per thread (at least): enough to even out uneven progress. */
#define UNITS_PER_THREAD 4
/* B micro-panels packed per claim. */
#define PACK_GROUP 4

typedef struct gemm_plan gemm_plan;

typedef struct {
  int mr, nr;
  int64_t mc, kc, nc;
  size_t es, ces; /* the element size of A and B, of C */
  int kstep;      /* packed panels hold K in groups of kstep, the last one zero-padded */
  ms_k_sgemm_ukr sukr;
  ms_k_dgemm_ukr dukr;
  ms_k_bgemm_ukr bukr;
  ms_k_spack_fn spack_a, spack_b; /* vectorised panel packers, or NULL (gemm_ukr.h) */
  ms_k_bpack_fn bpack_a, bpack_b;
  void (*pack_a)(const gemm_plan *p, int64_t i0, int64_t m, int64_t p0, int64_t k, void *dst);
  void (*pack_b)(const gemm_plan *p, int64_t p0, int64_t k, int64_t j0, int64_t n, void *dst);
  void (*macro)(const gemm_plan *p, int64_t i0, int64_t m, int64_t j0, int64_t n, int64_t k,
                const void *pa, const void *pb, int first, int last);
  void (*naive)(const gemm_plan *p, int64_t i0, int64_t m, int64_t j0, int64_t n, int64_t p0,
                int64_t k, int first, int last);
} gemm_kernel;

/* One call, after the column-major-C transpose (so csC is 1 whenever either C stride is). */
struct gemm_plan {
  int64_t M, N, K;
  const char *A, *B;
  char *C;
  int64_t rsA, csA, rsB, csB, rsC, csC;
  double alpha, beta; /* exact for float too: float -> double -> float round-trips */
  const char *bias;   /* NULL, or one element of A's type per column of C (beta is 0) */
  int bias_on_rows;   /* after the column-major transpose, the bias runs along C's rows */
  /* A bfloat16 C (ms_k_gemm_bf16_rounded): C above is then a row-major float32 work buffer that
   * the K blocks sum into, and each tile is rounded into C16 as its last K block stores it,
   * while it is still in L1 (no pass over a float32 C afterwards). */
  uint16_t *C16;
  int64_t rsC16, csC16;
  const gemm_kernel *kern;
  char *bpack;        /* the shared packed B panel, owned by the calling thread */
  int jit_b;          /* M fits one row block: B is packed per micro-panel (macro_jit_b) */
  _Atomic int bar_count, bar_phase;
  _Atomic int64_t next_pack, next_unit; /* work counters of the current panel */
};

/* The length of k once packed: whole groups of kstep. Sizes and offsets of packed panels use it. */
static int64_t packed_k(const gemm_kernel *kr, int64_t k) {
  return (k + kr->kstep - 1) / kr->kstep * kr->kstep;
}

/* C's m x n block at (i, j), summed in full in the float32 work buffer, rounded into C16. */
static void round_block(const gemm_plan *p, int64_t i, int64_t j, int64_t m, int64_t n) {
  ms_k_f32_to_bf16_block(m, n, p->C16 + i * p->rsC16 + j * p->csC16, p->rsC16, p->csC16,
                         (const float *)p->C + i * p->rsC + j, p->rsC);
}

/* ---- the bias epilogue (ms_k_gemm_bias) ------------------------------------------------------ */

/* The bias of C's element (i, j) as its C type holds it: float from float or bfloat16 (es 2). */
static float bias_f32(const gemm_plan *p, int64_t i, int64_t j) {
  int64_t k = p->bias_on_rows ? i : j;
  if (p->kern->es == sizeof(float)) return ((const float *)p->bias)[k];
  return ms_k_bf16_to_f32(((const uint16_t *)p->bias)[k]);
}
static double bias_f64(const gemm_plan *p, int64_t i, int64_t j) {
  return ((const double *)p->bias)[p->bias_on_rows ? i : j];
}

/* The first K block of a tile at C's (i, j) with a bias: the tile is set to the bias so that the
 * micro-kernel's beta-1 store adds the product to it (what a C filled with the bias before the
 * GEMM gives, bit for bit); *beta becomes 1. The tile's few bias values are read (and widened
 * from bfloat16) once, then copied over its rows. */
static void bias_tile_f32(const gemm_plan *p, float *c, int64_t i, int64_t j, int mr, int nr, float *beta) {
  float v[MS_GEMM_MAX_TILE];
  int n = p->bias_on_rows ? mr : nr;
  for (int k = 0; k < n; k++) v[k] = p->bias_on_rows ? bias_f32(p, i + k, j) : bias_f32(p, i, j + k);
  for (int r = 0; r < mr; r++)
    if (!p->bias_on_rows && p->csC == 1) memcpy(c + r * p->rsC, v, (size_t)nr * sizeof *v); /* Linear's case */
    else
      for (int q = 0; q < nr; q++) c[r * p->rsC + q * p->csC] = v[p->bias_on_rows ? r : q];
  *beta = 1.0f;
}
static void bias_tile_f64(const gemm_plan *p, double *c, int64_t i, int64_t j, int mr, int nr, double *beta) {
  const double *v = (const double *)p->bias + (p->bias_on_rows ? i : j);
  for (int r = 0; r < mr; r++)
    if (!p->bias_on_rows && p->csC == 1) memcpy(c + r * p->rsC, v, (size_t)nr * sizeof *v);
    else
      for (int q = 0; q < nr; q++) c[r * p->rsC + q * p->csC] = v[p->bias_on_rows ? r : q];
  *beta = 1.0;
}

/* ---- portable C micro-kernels ---------------------------------------------------------------- */

#define GEN_MR 4
#define GEN_SNR 8
#define GEN_DNR 4

static void store_generic_f32(float acc[GEN_MR][GEN_SNR], float alpha, float beta, float *c,
                              int64_t rsc, int64_t csc) {
  for (int i = 0; i < GEN_MR; i++)
    for (int j = 0; j < GEN_SNR; j++) {
      float *cij = c + i * rsc + j * csc;
      *cij = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *cij;
    }
}

static void sukr_generic(int64_t k, const float *alpha, const float *a, const float *b,
                         const float *beta, float *c, int64_t rsc, int64_t csc) {
  float acc[GEN_MR][GEN_SNR] = {{0}};
  for (int64_t p = 0; p < k; p++, a += GEN_MR, b += GEN_SNR)
    for (int i = 0; i < GEN_MR; i++)
      for (int j = 0; j < GEN_SNR; j++) acc[i][j] += a[i] * b[j];
  store_generic_f32(acc, *alpha, *beta, c, rsc, csc);
}

/* bf16 pairs (gemm_ukr.h's layout), as vdpbf16ps adds them: both products, then the sum. */
static void bukr_generic(int64_t kp, const float *alpha, const uint16_t *a, const uint16_t *b,
                         const float *beta, float *c, int64_t rsc, int64_t csc) {
  float acc[GEN_MR][GEN_SNR] = {{0}};
  for (int64_t p = 0; p < kp; p++, a += 2 * GEN_MR, b += 2 * GEN_SNR)
    for (int i = 0; i < GEN_MR; i++)
      for (int j = 0; j < GEN_SNR; j++)
        acc[i][j] += ms_k_bf16_to_f32(a[2 * i]) * ms_k_bf16_to_f32(b[2 * j]) +
                     ms_k_bf16_to_f32(a[2 * i + 1]) * ms_k_bf16_to_f32(b[2 * j + 1]);
  store_generic_f32(acc, *alpha, *beta, c, rsc, csc);
}

static void dukr_generic(int64_t k, const double *alpha, const double *a, const double *b,
                         const double *beta, double *c, int64_t rsc, int64_t csc) {
  double acc[GEN_MR][GEN_DNR] = {{0}};
  for (int64_t p = 0; p < k; p++, a += GEN_MR, b += GEN_DNR)
    for (int i = 0; i < GEN_MR; i++)
      for (int j = 0; j < GEN_DNR; j++) acc[i][j] += a[i] * b[j];
  for (int i = 0; i < GEN_MR; i++)
    for (int j = 0; j < GEN_DNR; j++) {
      double *cij = c + i * rsc + j * csc;
      *cij = *beta == 0.0 ? *alpha * acc[i][j] : *alpha * acc[i][j] + *beta * *cij;
    }
}

/* ---- packing: zero-padded to whole micro-panels so the kernels never see a ragged edge ------ */

static void pack_a_f32(const gemm_plan *p, int64_t i0, int64_t m, int64_t p0, int64_t k,
                       void *dst) {
  const int mr = p->kern->mr;
  const float *A = (const float *)p->A + i0 * p->rsA + p0 * p->csA;
  float *d = dst;
  for (int64_t i = 0; i < m; i += mr, d += mr * k) {
    int64_t mm = m - i < mr ? m - i : mr;
    const float *a = A + i * p->rsA;
    if (p->kern->spack_a && p->kern->spack_a(k, mm, a, p->rsA, p->csA, d)) continue;
    if (p->rsA == 1) { /* a column of the panel is contiguous */
      for (int64_t q = 0; q < k; q++) {
        const float *s = a + q * p->csA;
        for (int r = 0; r < mr; r++) d[q * mr + r] = r < mm ? s[r] : 0.0f;
      }
    } else { /* read each row of the panel in order */
      for (int r = 0; r < mr; r++) {
        const float *s = a + r * p->rsA;
        if (r < mm)
          for (int64_t q = 0; q < k; q++) d[q * mr + r] = s[q * p->csA];
        else
          for (int64_t q = 0; q < k; q++) d[q * mr + r] = 0.0f;
      }
    }
  }
}

static void pack_a_f64(const gemm_plan *p, int64_t i0, int64_t m, int64_t p0, int64_t k,
                       void *dst) {
  const int mr = p->kern->mr;
  const double *A = (const double *)p->A + i0 * p->rsA + p0 * p->csA;
  double *d = dst;
  for (int64_t i = 0; i < m; i += mr, d += mr * k) {
    int64_t mm = m - i < mr ? m - i : mr;
    const double *a = A + i * p->rsA;
    if (p->rsA == 1) {
      for (int64_t q = 0; q < k; q++) {
        const double *s = a + q * p->csA;
        for (int r = 0; r < mr; r++) d[q * mr + r] = r < mm ? s[r] : 0.0;
      }
    } else {
      for (int r = 0; r < mr; r++) {
        const double *s = a + r * p->rsA;
        if (r < mm)
          for (int64_t q = 0; q < k; q++) d[q * mr + r] = s[q * p->csA];
        else
          for (int64_t q = 0; q < k; q++) d[q * mr + r] = 0.0;
      }
    }
  }
}

static void pack_b_f32(const gemm_plan *p, int64_t p0, int64_t k, int64_t j0, int64_t n,
                       void *dst) {
  const int nr = p->kern->nr;
  const float *B = (const float *)p->B + p0 * p->rsB + j0 * p->csB;
  float *d = dst;
  for (int64_t j = 0; j < n; j += nr, d += nr * k) {
    int64_t nn = n - j < nr ? n - j : nr;
    const float *b = B + j * p->csB;
    if (p->kern->spack_b && p->kern->spack_b(k, nn, b, p->rsB, p->csB, d)) continue;
    if (p->csB == 1 && nn == nr) { /* a row of the panel is contiguous */
      for (int64_t q = 0; q < k; q++) memcpy(d + q * nr, b + q * p->rsB, nr * sizeof(float));
    } else {
      for (int c = 0; c < nr; c++) {
        const float *s = b + c * p->csB;
        if (c < nn)
          for (int64_t q = 0; q < k; q++) d[q * nr + c] = s[q * p->rsB];
        else
          for (int64_t q = 0; q < k; q++) d[q * nr + c] = 0.0f;
      }
    }
  }
}

static void pack_b_f64(const gemm_plan *p, int64_t p0, int64_t k, int64_t j0, int64_t n,
                       void *dst) {
  const int nr = p->kern->nr;
  const double *B = (const double *)p->B + p0 * p->rsB + j0 * p->csB;
  double *d = dst;
  for (int64_t j = 0; j < n; j += nr, d += nr * k) {
    int64_t nn = n - j < nr ? n - j : nr;
    const double *b = B + j * p->csB;
    if (p->csB == 1 && nn == nr) {
      for (int64_t q = 0; q < k; q++) memcpy(d + q * nr, b + q * p->rsB, nr * sizeof(double));
    } else {
      for (int c = 0; c < nr; c++) {
        const double *s = b + c * p->csB;
        if (c < nn)
          for (int64_t q = 0; q < k; q++) d[q * nr + c] = s[q * p->rsB];
        else
          for (int64_t q = 0; q < k; q++) d[q * nr + c] = 0.0;
      }
    }
  }
}

/* bf16: rows of A and columns of B are packed alike, as `lanes` lines (the first `valid` real)
 * ls apart, read along k with stride ks, in pairs (gemm_ukr.h). The odd-k pad is zero in both
 * operands: a stale value in one could be a NaN or infinity, and that times zero is not zero. */
static void pack_pairs_scalar(int lanes, int64_t k, int64_t valid, const uint16_t *s, int64_t ls,
                              int64_t ks, uint16_t *d) {
  for (int l = 0; l < lanes; l++)
    for (int64_t q = 0; q < (k + 1) / 2 * 2; q++)
      d[q / 2 * 2 * lanes + 2 * l + q % 2] = l < valid && q < k ? s[l * ls + q * ks] : 0;
}

static void pack_a_bf16(const gemm_plan *p, int64_t i0, int64_t m, int64_t p0, int64_t k,
                        void *dst) {
  const int mr = p->kern->mr;
  const uint16_t *A = (const uint16_t *)p->A + i0 * p->rsA + p0 * p->csA;
  uint16_t *d = dst;
  for (int64_t i = 0; i < m; i += mr, d += mr * packed_k(p->kern, k)) {
    int64_t mm = m - i < mr ? m - i : mr;
    const uint16_t *a = A + i * p->rsA;
    if (!p->kern->bpack_a || !p->kern->bpack_a(k, mm, a, p->rsA, p->csA, d))
      pack_pairs_scalar(mr, k, mm, a, p->rsA, p->csA, d);
  }
}

static void pack_b_bf16(const gemm_plan *p, int64_t p0, int64_t k, int64_t j0, int64_t n,
                        void *dst) {
  const int nr = p->kern->nr;
  const uint16_t *B = (const uint16_t *)p->B + p0 * p->rsB + j0 * p->csB;
  uint16_t *d = dst;
  for (int64_t j = 0; j < n; j += nr, d += nr * packed_k(p->kern, k)) {
    int64_t nn = n - j < nr ? n - j : nr;
    const uint16_t *b = B + j * p->csB;
    if (!p->kern->bpack_b || !p->kern->bpack_b(k, nn, b, p->rsB, p->csB, d))
      pack_pairs_scalar(nr, k, nn, b, p->csB, p->rsB, d);
  }
}

/* ---- macro-kernels: every MR x NR tile of an m x n block of C -------------------------------- */

/* A float C's micro-kernel, for float or bf16 operands; kp is k packed (packed_k). */
static void ukr_f32(const gemm_kernel *kr, int64_t kp, const float *alpha, const char *a,
                    const char *b, const float *beta, float *c, int64_t rsc, int64_t csc) {
  if (kr->bukr)
    kr->bukr(kp / 2, alpha, (const uint16_t *)a, (const uint16_t *)b, beta, c, rsc, csc);
  else
    kr->sukr(kp, alpha, (const float *)a, (const float *)b, beta, c, rsc, csc);
}

/* Partial tiles run the full kernel into a scratch tile, then merge the valid part; beta == 0
 * still never reads C. `first` is whether this is the first KC block (later blocks add: beta 1),
 * `last` whether it is the last (a bfloat16 C's tiles are rounded then). A float C: float or
 * bf16 operands. */
static void macro_f32(const gemm_plan *p, int64_t i0, int64_t m, int64_t j0, int64_t n, int64_t k,
                      const void *pa, const void *pb, int first, int last) {
  const gemm_kernel *kr = p->kern;
  const int mr = kr->mr, nr = kr->nr;
  const size_t panel = (size_t)packed_k(kr, k) * kr->es; /* bytes of one row or column, packed */
  const float alpha = (float)p->alpha, beta = first ? (float)p->beta : 1.0f;
  const float one = 1.0f, zero = 0.0f;
  float *C = (float *)p->C + i0 * p->rsC + j0 * p->csC;
  _Alignas(64) float t[MS_GEMM_MAX_TILE];
  for (int64_t j = 0; j < n; j += nr) {
    const char *b = (const char *)pb + j * panel;
    for (int64_t i = 0; i < m; i += mr) {
      const char *a = (const char *)pa + i * panel;
      float *c = C + i * p->rsC + j * p->csC;
      int64_t mm = m - i < mr ? m - i : mr, nn = n - j < nr ? n - j : nr;
      if (mm == mr && nn == nr) {
        float tb = beta;
        if (first && p->bias) bias_tile_f32(p, c, i0 + i, j0 + j, mr, nr, &tb);
        ukr_f32(kr, packed_k(kr, k), &alpha, a, b, &tb, c, p->rsC, p->csC);
      } else {
        ukr_f32(kr, packed_k(kr, k), &one, a, b, &zero, t, nr, 1);
        for (int64_t r = 0; r < mm; r++)
          for (int64_t q = 0; q < nn; q++) {
            float *cij = c + r * p->rsC + q * p->csC;
            if (first && p->bias) *cij = alpha * t[r * nr + q] + bias_f32(p, i0 + i + r, j0 + j + q);
            else *cij = beta == 0.0f ? alpha * t[r * nr + q] : alpha * t[r * nr + q] + beta * *cij;
          }
      }
      if (last && p->C16) round_block(p, i0 + i, j0 + j, mm, nn);
    }
  }
}

static void macro_f64(const gemm_plan *p, int64_t i0, int64_t m, int64_t j0, int64_t n, int64_t k,
                      const void *pa, const void *pb, int first, int last) {
  (void)last;
  const int mr = p->kern->mr, nr = p->kern->nr;
  const double alpha = p->alpha, beta = first ? p->beta : 1.0, one = 1.0, zero = 0.0;
  double *C = (double *)p->C + i0 * p->rsC + j0 * p->csC;
  _Alignas(64) double t[MS_GEMM_MAX_TILE];
  for (int64_t j = 0; j < n; j += nr) {
    const double *b = (const double *)pb + j * k;
    for (int64_t i = 0; i < m; i += mr) {
      const double *a = (const double *)pa + i * k;
      double *c = C + i * p->rsC + j * p->csC;
      if (m - i >= mr && n - j >= nr) {
        double tb = beta;
        if (first && p->bias) bias_tile_f64(p, c, i0 + i, j0 + j, mr, nr, &tb);
        p->kern->dukr(k, &alpha, a, b, &tb, c, p->rsC, p->csC);
        continue;
      }
      int64_t mm = m - i < mr ? m - i : mr, nn = n - j < nr ? n - j : nr;
      p->kern->dukr(k, &one, a, b, &zero, t, nr, 1);
      for (int64_t r = 0; r < mm; r++)
        for (int64_t q = 0; q < nn; q++) {
          double *cij = c + r * p->rsC + q * p->csC;
          if (first && p->bias) *cij = alpha * t[r * nr + q] + bias_f64(p, i0 + i + r, j0 + j + q);
          else *cij = beta == 0.0 ? alpha * t[r * nr + q] : alpha * t[r * nr + q] + beta * *cij;
        }
    }
  }
}

/* ---- unpacked fallbacks: used only when a packing buffer cannot be allocated ---------------- */

/* Element x of a float or bf16 operand. */
static float load_f32(const gemm_kernel *kr, const char *base, int64_t x) {
  if (kr->es == sizeof(float)) return ((const float *)base)[x];
  return ms_k_bf16_to_f32(((const uint16_t *)base)[x]);
}

static void naive_f32(const gemm_plan *p, int64_t i0, int64_t m, int64_t j0, int64_t n, int64_t p0,
                      int64_t k, int first, int last) {
  const gemm_kernel *kr = p->kern;
  float *C = (float *)p->C;
  const float alpha = (float)p->alpha, beta = first ? (float)p->beta : 1.0f;
  for (int64_t i = i0; i < i0 + m; i++)
    for (int64_t j = j0; j < j0 + n; j++) {
      float s = 0.0f;
      for (int64_t q = p0; q < p0 + k; q++)
        s += load_f32(kr, p->A, i * p->rsA + q * p->csA) *
             load_f32(kr, p->B, q * p->rsB + j * p->csB);
      float *cij = C + i * p->rsC + j * p->csC;
      if (first && p->bias) *cij = alpha * s + bias_f32(p, i, j);
      else *cij = beta == 0.0f ? alpha * s : alpha * s + beta * *cij;
    }
  if (last && p->C16) round_block(p, i0, j0, m, n);
}

static void naive_f64(const gemm_plan *p, int64_t i0, int64_t m, int64_t j0, int64_t n, int64_t p0,
                      int64_t k, int first, int last) {
  (void)last;
  const double *A = (const double *)p->A, *B = (const double *)p->B;
  double *C = (double *)p->C;
  const double beta = first ? p->beta : 1.0;
  for (int64_t i = i0; i < i0 + m; i++)
    for (int64_t j = j0; j < j0 + n; j++) {
      double s = 0.0;
      for (int64_t q = p0; q < p0 + k; q++)
        s += A[i * p->rsA + q * p->csA] * B[q * p->rsB + j * p->csB];
      double *cij = C + i * p->rsC + j * p->csC;
      if (first && p->bias) *cij = p->alpha * s + bias_f64(p, i, j);
      else *cij = beta == 0.0 ? p->alpha * s : p->alpha * s + beta * *cij;
    }
}

/* ---- kernels per ISA and dtype --------------------------------------------------------------- */

/* Blocking: a KC x NR micro-panel of B stays in L1 while the MC x KC block of A streams from L2;
 * MC is a multiple of MR. AVX2: BLIS's Zen values; a sweep of MC 72-240 x KC 192-384 on Zen 3
 * found nothing better beyond noise. AVX-512: KC keeps the 128-byte-wide B micro-panel at 24 KB
 * for a 32-48 KB L1, MC fills ~200 KB of a 1-2 MB L2; on Zen 5 (48 KB L1, 1 MB L2) KC 192-512
 * and MC 96-360 were all within noise of 210-218 GFLOP/s at 1024^3 on one thread (~88%). */
#define F32_KIND .es = sizeof(float), .ces = sizeof(float), .kstep = 1, .pack_a = pack_a_f32, \
                 .pack_b = pack_b_f32, .macro = macro_f32, .naive = naive_f32
#define F64_KIND .es = sizeof(double), .ces = sizeof(double), .kstep = 1, .pack_a = pack_a_f64, \
                 .pack_b = pack_b_f64, .macro = macro_f64, .naive = naive_f64
#define BF16_KIND .es = sizeof(uint16_t), .ces = sizeof(float), .kstep = 2, .pack_a = pack_a_bf16, \
                  .pack_b = pack_b_bf16, .macro = macro_f32, .naive = naive_f32
static const gemm_kernel s_kernels[MS_K_ISA_COUNT] = {
    [MS_K_ISA_PORTABLE] = {GEN_MR, GEN_SNR, 128, 256, 4096, F32_KIND, .sukr = sukr_generic},
    [MS_K_ISA_AVX2] = {MS_SGEMM_AVX2_MR, MS_SGEMM_AVX2_NR, 144, 256, 4080, F32_KIND,
                       .sukr = ms_k_sgemm_ukr_avx2, .spack_a = ms_k_spack_a_avx2,
                       .spack_b = ms_k_spack_b_avx2},
    [MS_K_ISA_AVX512] = {MS_SGEMM_AVX512_MR, MS_SGEMM_AVX512_NR, 240, 192, 4096, F32_KIND,
                    .sukr = ms_k_sgemm_ukr_avx512, .spack_a = ms_k_spack_a_avx512,
                    .spack_b = ms_k_spack_b_avx512},
};
static const gemm_kernel d_kernels[MS_K_ISA_COUNT] = {
    [MS_K_ISA_PORTABLE] = {GEN_MR, GEN_DNR, 64, 256, 4096, F64_KIND, .dukr = dukr_generic},
    [MS_K_ISA_AVX2] = {MS_DGEMM_AVX2_MR, MS_DGEMM_AVX2_NR, 72, 256, 4080, F64_KIND,
                  .dukr = ms_k_dgemm_ukr_avx2},
    [MS_K_ISA_AVX512] = {MS_DGEMM_AVX512_MR, MS_DGEMM_AVX512_NR, 144, 192, 4096, F64_KIND,
                    .dukr = ms_k_dgemm_ukr_avx512},
};
/* bf16: AVX-512 BF16 where the CPU has it, else the portable kernel (correct, not fast: callers
 * that care ask ms_k_gemm_bf16_available() first). KC is in elements: 384 keeps the B
 * micro-panel at the float kernel's 24 KB, MC x KC at ~180 KB. */
static const gemm_kernel b_generic = {GEN_MR, GEN_SNR, 128, 256, 4096, BF16_KIND,
                                      .bukr = bukr_generic};
static const gemm_kernel b_avx512 = {MS_BGEMM_AVX512_MR, MS_BGEMM_AVX512_NR, 240, 384, 4096,
                                     BF16_KIND, .bukr = ms_k_bgemm_ukr_avx512,
                                     .bpack_a = ms_k_bpack_a_avx512,
                                     .bpack_b = ms_k_bpack_b_avx512};

ms_k_sgemm_tile ms_k_sgemm_tile_get(void) {
  const gemm_kernel *k = &s_kernels[ms_k_cpu_isa()];
  return (ms_k_sgemm_tile){k->mr, k->nr, k->sukr, k->spack_a, k->spack_b};
}

ms_k_sgemm_tile ms_k_sgemm_tile_for_rows(int64_t m) {
  if (ms_k_cpu_avx512() && m % MS_SGEMM_AVX512_MR8 == 0 && m % MS_SGEMM_AVX512_MR != 0)
    return (ms_k_sgemm_tile){MS_SGEMM_AVX512_MR8, MS_SGEMM_AVX512_NR, ms_k_sgemm_ukr_avx512_mr8, NULL,
                             ms_k_spack_b_avx512}; /* the A packer is the 12-row one's */
  return ms_k_sgemm_tile_get();
}

/* ---- per-thread packing buffers: kept between calls, freed when their thread exits ---------- */

typedef struct {
  void *ptr[MS_K_BUF_COUNT];
  size_t size[MS_K_BUF_COUNT];
} thread_bufs;
enum { BUF_A = MS_K_BUF_GEMM_A, BUF_B = MS_K_BUF_GEMM_B };

static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;

static void bufs_free(void *v) {
  thread_bufs *b = v;
  for (int i = 0; i < MS_K_BUF_COUNT; i++) free(b->ptr[i]);
  free(b);
}

static void bufs_init(void) { pthread_key_create(&bufs_key, bufs_free); }

void *ms_k_thread_buffer(int which, size_t size) {
  pthread_once(&bufs_once, bufs_init);
  thread_bufs *b = pthread_getspecific(bufs_key);
  if (!b) {
    b = calloc(1, sizeof *b);
    if (!b || pthread_setspecific(bufs_key, b) != 0) {
      free(b);
      return NULL;
    }
  }
  if (b->size[which] < size) {
    size = (size + 4095) & ~(size_t)4095;
    free(b->ptr[which]);
    b->ptr[which] = aligned_alloc(64, size);
    b->size[which] = b->ptr[which] ? size : 0;
  }
  return b->ptr[which];
}

/* ---- the threaded driver --------------------------------------------------------------------- */

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* The team's barrier around the shared B panel: spin briefly, then yield, so an oversubscribed
 * machine (several ranks on few cores) still makes progress. With `reset`, the last thread to
 * arrive rewinds the work counters before anyone leaves. */
static void team_barrier(gemm_plan *p, int nt, int reset) {
  int phase = atomic_load(&p->bar_phase);
  if (nt <= 1 || atomic_fetch_add(&p->bar_count, 1) == nt - 1) {
    if (reset) {
      atomic_store(&p->next_pack, 0);
      atomic_store(&p->next_unit, 0);
    }
    atomic_store(&p->bar_count, 0);
    atomic_store(&p->bar_phase, phase + 1);
    return;
  }
  for (int spins = 0; atomic_load(&p->bar_phase) == phase; spins++) {
    if (spins < 4000) cpu_relax();
    else sched_yield();
  }
}

/* Splits `units` into `parts` contiguous nearly equal pieces; returns piece `i` as [*b, *e). */
static void split(int64_t units, int64_t parts, int64_t i, int64_t *b, int64_t *e) {
  int64_t q = units / parts, r = units % parts;
  *b = i * q + (i < r ? i : r);
  *e = *b + q + (i < r ? 1 : 0);
}

/* Packs this thread's claims of the current B panel, PACK_GROUP micro-panels at a time. */
static void pack_b_shared(gemm_plan *p, int64_t jc, int64_t nc, int64_t pc, int64_t kc) {
  const gemm_kernel *kr = p->kern;
  int64_t npanels = (nc + kr->nr - 1) / kr->nr;
  for (;;) {
    int64_t b0 = atomic_fetch_add(&p->next_pack, 1) * PACK_GROUP;
    if (b0 >= npanels) return;
    int64_t b1 = b0 + PACK_GROUP < npanels ? b0 + PACK_GROUP : npanels;
    int64_t jb = b0 * kr->nr, je = b1 * kr->nr < nc ? b1 * kr->nr : nc;
    kr->pack_b(p, pc, kc, jc + jb, je - jb, p->bpack + (size_t)(jb * packed_k(kr, kc)) * kr->es);
  }
}

/* Row blocks of at most MC, as even as MR allows, their count a multiple of the team's size, so
 * that no thread is left with a short last block while another still works. */
static void row_blocks(const gemm_plan *p, int nt, int64_t *n_ic, int64_t *mc) {
  const gemm_kernel *kr = p->kern;
  int64_t n = (p->M + kr->mc - 1) / kr->mc;
  n = (n + nt - 1) / nt * nt;
  *mc = ((p->M + n - 1) / n + kr->mr - 1) / kr->mr * kr->mr;
  *n_ic = (p->M + *mc - 1) / *mc;
}

/* The jit_b form of the macro-kernel: each B micro-panel is packed into a small per-thread
 * buffer just before the row tiles use it, so it is written and read back in L1 instead of
 * travelling through a shared panel in L3 (packing B then costs one read of B). */
static void macro_jit_b(const gemm_plan *p, int64_t m, int64_t j0, int64_t n, int64_t pc,
                        int64_t kc, const void *apack, void *bbuf) {
  const gemm_kernel *kr = p->kern;
  for (int64_t j = 0; j < n; j += kr->nr) {
    int64_t nn = n - j < kr->nr ? n - j : kr->nr;
    kr->pack_b(p, pc, kc, j0 + j, nn, bbuf);
    kr->macro(p, 0, m, j0 + j, nn, kc, apack, bbuf, pc == 0, pc + kc == p->K);
  }
}

/* A team member when jit_b: no panel is shared, so each thread takes a fixed slice of the
 * columns and runs through K without a barrier (the shared path waits at two per KC block: 72 on
 * the fc1 forward, each costing a time slice when the machine is oversubscribed). A, a few rows,
 * is packed by every thread. */
static void gemm_member_jit(gemm_plan *p, int t, int nt) {
  const gemm_kernel *kr = p->kern;
  int64_t c0, c1;
  split((p->N + kr->nr - 1) / kr->nr, nt, t, &c0, &c1);
  int64_t j0 = c0 * kr->nr, j1 = c1 * kr->nr < p->N ? c1 * kr->nr : p->N;
  if (j0 >= j1) return;
  int64_t mc = (p->M + kr->mr - 1) / kr->mr * kr->mr;
  int64_t kc_cap = packed_k(kr, p->K < kr->kc ? p->K : kr->kc);
  char *apack = ms_k_thread_buffer(BUF_A, (size_t)(mc * kc_cap) * kr->es);
  char *bbuf = apack ? ms_k_thread_buffer(BUF_B, (size_t)(kr->nr * kc_cap) * kr->es) : NULL;
  for (int64_t pc = 0; pc < p->K; pc += kr->kc) {
    int64_t kc = p->K - pc < kr->kc ? p->K - pc : kr->kc;
    if (!bbuf) {
      kr->naive(p, 0, p->M, j0, j1 - j0, pc, kc, pc == 0, pc + kc == p->K);
      continue;
    }
    kr->pack_a(p, 0, p->M, pc, kc, apack);
    macro_jit_b(p, p->M, j0, j1 - j0, pc, kc, apack, bbuf);
  }
}

/* One team member. For each KC x NC panel of B (packed by all), the C block it feeds is cut into
 * units (an MC block of rows x a slice of the panel's columns) that threads claim from a counter:
 * a thread that gets less CPU (another process on its core) simply does fewer units. Slices are
 * used only when there are too few row blocks to go round, since each thread packs the A block
 * of every unit it takes. */
static void gemm_member(void *ctx, int t, int nt) {
  gemm_plan *p = ctx;
  if (p->jit_b) {
    gemm_member_jit(p, t, nt);
    return;
  }
  const gemm_kernel *kr = p->kern;
  char *apack = NULL;
  int64_t n_ic, mc;
  row_blocks(p, nt, &n_ic, &mc);
  size_t a_size = (size_t)(mc * packed_k(kr, p->K < kr->kc ? p->K : kr->kc)) * kr->es;
  for (int64_t jc = 0; jc < p->N; jc += kr->nc) {
    int64_t nc = p->N - jc < kr->nc ? p->N - jc : kr->nc;
    int64_t npanels = (nc + kr->nr - 1) / kr->nr;
    int64_t want = UNITS_PER_THREAD * (int64_t)nt;
    int64_t slices = nt == 1 || n_ic >= want ? 1 : (want + n_ic - 1) / n_ic;
    if (slices > npanels) slices = npanels;
    for (int64_t pc = 0; pc < p->K; pc += kr->kc) {
      int64_t kc = p->K - pc < kr->kc ? p->K - pc : kr->kc;
      team_barrier(p, nt, 1); /* everyone is done with the previous panel */
      pack_b_shared(p, jc, nc, pc, kc);
      team_barrier(p, nt, 0);
      int64_t packed_ic = -1; /* the row block apack holds for this panel */
      for (;;) {
        int64_t u = atomic_fetch_add(&p->next_unit, 1);
        if (u >= n_ic * slices) break;
        int64_t ic = u / slices * mc, m = p->M - ic < mc ? p->M - ic : mc;
        int64_t c0, c1;
        split(npanels, slices, u % slices, &c0, &c1);
        int64_t j0 = c0 * kr->nr, j1 = c1 * kr->nr < nc ? c1 * kr->nr : nc;
        if (!apack) apack = ms_k_thread_buffer(BUF_A, a_size);
        if (!apack) {
          kr->naive(p, ic, m, jc + j0, j1 - j0, pc, kc, pc == 0, pc + kc == p->K);
          continue;
        }
        if (ic != packed_ic) kr->pack_a(p, ic, m, pc, kc, apack);
        packed_ic = ic;
        kr->macro(p, ic, m, jc + j0, j1 - j0, kc, apack,
                  p->bpack + (size_t)(j0 * packed_k(kr, kc)) * kr->es, pc == 0, pc + kc == p->K);
      }
    }
  }
}

/* C = beta * C alone (K == 0 or alpha == 0): BLAS semantics, A and B are not read; with a bias,
 * C = the bias. */
static void scale_c(const gemm_plan *p) {
  for (int64_t i = 0; i < p->M; i++)
    for (int64_t j = 0; j < p->N; j++) {
      if (p->kern->ces == sizeof(float)) {
        float *c = (float *)p->C + i * p->rsC + j * p->csC;
        *c = p->bias ? bias_f32(p, i, j) : p->beta == 0.0 ? 0.0f : (float)p->beta * *c;
      } else {
        double *c = (double *)p->C + i * p->rsC + j * p->csC;
        *c = p->bias ? bias_f64(p, i, j) : p->beta == 0.0 ? 0.0 : p->beta * *c;
      }
    }
  if (p->C16) round_block(p, 0, 0, p->M, p->N);
}

static void gemm_run(gemm_plan *p) {
  if (p->M <= 0 || p->N <= 0) return;
  if (p->K <= 0 || p->alpha == 0.0) {
    scale_c(p);
    return;
  }
  /* Column-major C: compute C^T = B^T A^T instead, so the kernels store along rows. */
  if (p->csC != 1 && p->rsC == 1) {
    int64_t t = p->M;
    p->M = p->N;
    p->N = t;
    const char *x = p->A;
    p->A = p->B;
    p->B = x;
    int64_t rsA = p->rsA, csA = p->csA;
    p->rsA = p->csB;
    p->csA = p->rsB;
    p->rsB = csA;
    p->csB = rsA;
    p->rsC = p->csC;
    p->csC = 1;
    p->bias_on_rows = 1;
  }
  const gemm_kernel *kr = p->kern;
  double work = (double)p->M * (double)p->N * (double)p->K;
  int nt = ms_k_get_num_threads();
  if (work / MIN_WORK_PER_THREAD < nt)
    nt = work < MIN_WORK_PER_THREAD ? 1 : (int)(work / MIN_WORK_PER_THREAD);
  /* A single row block reuses no packed B panel, so the shared one would only cost a trip
   * through L3 (the fc1 products: M = 64 rows, K or N 9216). */
  p->jit_b = p->M <= kr->mc;
  int64_t kc_cap = packed_k(kr, p->K < kr->kc ? p->K : kr->kc);
  int64_t nc_cap = p->N < kr->nc ? (p->N + kr->nr - 1) / kr->nr * kr->nr : kr->nc;
  if (!p->jit_b) p->bpack = ms_k_thread_buffer(BUF_B, (size_t)(kc_cap * nc_cap) * kr->es);
  if (!p->jit_b && !p->bpack) {
    kr->naive(p, 0, p->M, 0, p->N, 0, p->K, 1, 1);
    return;
  }
  atomic_init(&p->bar_count, 0);
  atomic_init(&p->bar_phase, 0);
  atomic_init(&p->next_pack, 0);
  atomic_init(&p->next_unit, 0);
  ms_k_parallel_team(nt, gemm_member, p);
}

void ms_k_sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t rsA,
                int64_t csA, const float *B, int64_t rsB, int64_t csB, float beta, float *C,
                int64_t rsC, int64_t csC) {
  gemm_plan p = {.M = M, .N = N, .K = K, .A = (const char *)A, .B = (const char *)B,
                 .C = (char *)C, .rsA = rsA, .csA = csA, .rsB = rsB, .csB = csB, .rsC = rsC,
                 .csC = csC, .alpha = alpha, .beta = beta, .kern = &s_kernels[ms_k_cpu_isa()]};
  gemm_run(&p);
}

void ms_k_dgemm(int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t rsA,
                int64_t csA, const double *B, int64_t rsB, int64_t csB, double beta, double *C,
                int64_t rsC, int64_t csC) {
  gemm_plan p = {.M = M, .N = N, .K = K, .A = (const char *)A, .B = (const char *)B,
                 .C = (char *)C, .rsA = rsA, .csA = csA, .rsB = rsB, .csB = csB, .rsC = rsC,
                 .csC = csC, .alpha = alpha, .beta = beta, .kern = &d_kernels[ms_k_cpu_isa()]};
  gemm_run(&p);
}

bool ms_k_gemm_bf16_available(void) { return ms_k_cpu_avx512_bf16(); }

void ms_k_gemm_bias(ms_k_dtype dt, int64_t M, int64_t N, int64_t K, double alpha, const void *A, int64_t rsA,
                    int64_t csA, const void *B, int64_t rsB, int64_t csB, void *C, int64_t rsC, int64_t csC,
                    const void *bias) {
  const gemm_kernel *kern = dt == MS_K_F64 ? &d_kernels[ms_k_cpu_isa()]
                            : dt == MS_K_F32 ? &s_kernels[ms_k_cpu_isa()]
                            : ms_k_gemm_bf16_available() ? &b_avx512 : &b_generic;
  /* alpha as its C type holds it, as the typed entry points pass it */
  double a = dt == MS_K_F64 ? alpha : (double)(float)alpha;
  gemm_plan p = {.M = M, .N = N, .K = K, .A = A, .B = B, .C = C, .rsA = rsA, .csA = csA, .rsB = rsB, .csB = csB,
                 .rsC = rsC, .csC = csC, .alpha = a, .beta = 0, .bias = bias, .kern = kern};
  gemm_run(&p);
}

/* Work buffers up to this size are kept by the calling thread between calls; larger ones are
 * allocated for the call alone, so one huge product does not pin its buffer for good. */
#define KEPT_WORK_BYTES ((size_t)64 << 20)

bool ms_k_gemm_bf16_rounded(int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A, int64_t rsA,
                            int64_t csA, const uint16_t *B, int64_t rsB, int64_t csB, float beta, uint16_t *C,
                            int64_t rsC, int64_t csC, const uint16_t *bias) {
  if (M <= 0 || N <= 0) return true;
  size_t bytes = ((size_t)M * (size_t)N * sizeof(float) + 63) & ~(size_t)63;
  bool kept = bytes <= KEPT_WORK_BYTES;
  float *w = kept ? ms_k_thread_buffer(MS_K_BUF_GEMM_C, bytes) : aligned_alloc(64, bytes);
  if (!w) return false;
  if (beta != 0.0f)
    for (int64_t i = 0; i < M; i++) ms_k_cast(N, w + i * N, MS_K_F32, 1, C + i * rsC, MS_K_BF16, csC);
  gemm_plan p = {.M = M, .N = N, .K = K, .A = (const char *)A, .B = (const char *)B, .C = (char *)w,
                 .rsA = rsA, .csA = csA, .rsB = rsB, .csB = csB, .rsC = N, .csC = 1, .alpha = alpha,
                 .beta = bias ? 0.0f : beta, .bias = (const char *)bias, .C16 = C, .rsC16 = rsC, .csC16 = csC,
                 .kern = ms_k_gemm_bf16_available() ? &b_avx512 : &b_generic};
  gemm_run(&p);
  if (!kept) free(w);
  return true;
}

void ms_k_gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A, int64_t rsA,
                    int64_t csA, const uint16_t *B, int64_t rsB, int64_t csB, float beta,
                    float *C, int64_t rsC, int64_t csC) {
  gemm_plan p = {.M = M, .N = N, .K = K, .A = (const char *)A, .B = (const char *)B,
                 .C = (char *)C, .rsA = rsA, .csA = csA, .rsB = rsB, .csB = csB, .rsC = rsC,
                 .csC = csC, .alpha = alpha, .beta = beta,
                 .kern = ms_k_gemm_bf16_available() ? &b_avx512 : &b_generic};
  gemm_run(&p);
}
