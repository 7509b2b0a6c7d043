/* conv_gemm.c: float32 convolution (groups = 1) as an implicit GEMM on the SGEMM micro-kernel,
 * for the shapes the faster paths do not take (conv.c chooses).
 * The column matrix is never written out: each NR-column panel (or MR-row panel) of it is
 * gathered from the input straight into the packed layout the micro-kernel reads, the batch is
 * folded into the GEMM's columns, and the bias rides along as an extra row of ones.
 *
 * Letters (as conv.c): N batch, C input channels, O output channels, (H, W) input, (OH, OW)
 * output, P = OH*OW, K = C*KH*KW rows of the column matrix, Kb = K (+1 with a bias), and a
 * column is one output pixel of one sample: col = n*P + p, N*P of them. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/conv_gemm.h"
#include "kernels/cpu/conv_geom.h"
#include "kernels/cpu/gemm_ukr.h"

/* Contraction block of the weight gradient: KC columns of packed A and B stay in L1/L2. */
#define WGRAD_KC 256

typedef struct cg_job {
  const ms_k_conv2d_geom *g;
  const float *x, *w, *b, *gout;
  float *out, *gx, *gw, *gb;
  const int64_t *koff, *kih, *kiw; /* per column-matrix row k: offset in x, tap shifts */
  int64_t K, Kb, P, cols, opad;
  ms_k_sgemm_tile t;
  const float *ap; /* the shared packed A: [W | b] (forward) or W^T (input gradient) */
  float *part[256]; /* per-member weight-gradient accumulators */
  int team;
  _Atomic int failed;
} cg_job;

/* Where column `col` reads the input: sample base plus the window's top-left corner. */
typedef struct colpos {
  int64_t n, p, ih0, iw0, xoff, oh, ow;
  bool inside; /* the whole window lies in the input: no bounds checks needed */
} colpos;

static void col_finish(const ms_k_conv2d_geom *g, colpos *c) {
  c->ih0 = c->oh * g->sh - g->ph, c->iw0 = c->ow * g->sw - g->pw;
  c->xoff = c->n * g->c * g->h * g->w + c->ih0 * g->w + c->iw0;
  c->inside = c->ih0 >= 0 && c->ih0 + (g->kh - 1) * g->dh < g->h && c->iw0 >= 0 &&
              c->iw0 + (g->kw - 1) * g->dw < g->w;
}

static colpos col_at(const cg_job *j, int64_t col) {
  colpos c;
  c.n = col / j->P, c.p = col % j->P, c.oh = c.p / j->g->ow, c.ow = c.p % j->g->ow;
  col_finish(j->g, &c);
  return c;
}

/* The column after c, without divisions. */
static colpos col_next(const cg_job *j, colpos c) {
  if (++c.p == j->P) c.n++, c.p = 0, c.oh = 0, c.ow = 0;
  else if (++c.ow == j->g->ow) c.oh++, c.ow = 0;
  col_finish(j->g, &c);
  return c;
}

/* Column-matrix element (k, column at c); k == K is the bias row of ones. */
static inline float col_value(const cg_job *j, const colpos *c, int64_t k) {
  if (k >= j->K) return 1.0f;
  if (c->inside) return j->x[c->xoff + j->koff[k]];
  int64_t ih = c->ih0 + j->kih[k], iw = c->iw0 + j->kiw[k];
  if (ih < 0 || ih >= j->g->h || iw < 0 || iw >= j->g->w) return 0.0f;
  return j->x[c->xoff + j->koff[k]];
}

/* The columns [c0, c0 + nn) of one panel and their runs of consecutive input addresses (with
 * unit stride, the pixels of one output row read neighbouring inputs under every tap). */
typedef struct panel {
  int nn, nruns;
  bool inside;
  colpos c[MS_GEMM_MAX_NR];
  int run_start[MS_GEMM_MAX_NR + 1];
} panel;

static void panel_init(const cg_job *j, int64_t c0, int nn, panel *pn) {
  pn->nn = nn, pn->nruns = 0, pn->inside = true;
  for (int q = 0; q < nn; q++) {
    pn->c[q] = q == 0 ? col_at(j, c0) : col_next(j, pn->c[q - 1]);
    pn->inside = pn->inside && pn->c[q].inside;
    if (q == 0 || pn->c[q].xoff != pn->c[q - 1].xoff + 1) pn->run_start[pn->nruns++] = q;
  }
  pn->run_start[pn->nruns] = nn;
}

/* dst (Kb x nr, row k at dst + k*nr) = the panel's columns of the column matrix, zero-padded. */
static void pack_cols(const cg_job *j, const panel *pn, float *dst) {
  const int nr = j->t.nr, nn = pn->nn;
  for (int64_t k = 0; k < j->K; k++) {
    float *d = dst + k * nr;
    if (pn->inside) {
      const float *s = j->x + j->koff[k];
      for (int r = 0; r < pn->nruns; r++) {
        int qa = pn->run_start[r], qb = pn->run_start[r + 1];
        const float *sr = s + pn->c[qa].xoff - qa;
        for (int q = qa; q < qb; q++) d[q] = sr[q];
      }
    } else {
      for (int q = 0; q < nn; q++) d[q] = col_value(j, &pn->c[q], k);
    }
    for (int q = nn; q < nr; q++) d[q] = 0.0f;
  }
  if (j->Kb > j->K)
    for (int q = 0; q < nr; q++) dst[j->K * nr + q] = q < nn ? 1.0f : 0.0f;
}

/* gx (sample-major, like x) += the panel's columns of a column-matrix tile (K x nr). */
static void scatter_cols(const cg_job *j, const panel *pn, const float *src) {
  const int nr = j->t.nr;
  const ms_k_conv2d_geom *g = j->g;
  for (int64_t k = 0; k < j->K; k++) {
    const float *s = src + k * nr;
    float *d = j->gx + j->koff[k];
    if (pn->inside) {
      for (int r = 0; r < pn->nruns; r++) {
        int qa = pn->run_start[r], qb = pn->run_start[r + 1];
        float *dr = d + pn->c[qa].xoff - qa;
        for (int q = qa; q < qb; q++) dr[q] += s[q];
      }
      continue;
    }
    for (int q = 0; q < pn->nn; q++) {
      const colpos *c = &pn->c[q];
      int64_t ih = c->ih0 + j->kih[k], iw = c->iw0 + j->kiw[k];
      if (ih >= 0 && ih < g->h && iw >= 0 && iw < g->w) d[c->xoff] += s[q];
    }
  }
}

/* ---- forward ---------------------------------------------------------------------------------- */

static void forward_range(void *ctx, int64_t begin, int64_t end) {
  cg_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  const int mr = j->t.mr, nr = j->t.nr;
  const float one = 1.0f, zero = 0.0f;
  float *bp = ms_k_thread_buffer(MS_K_BUF_CONV_B, (size_t)(j->Kb * nr) * sizeof(float));
  if (!bp) {
    j->failed = 1;
    return;
  }
  _Alignas(64) float tile[MS_GEMM_MAX_TILE];
  panel pn;
  for (int64_t pi = begin; pi < end; pi++) {
    int64_t c0 = pi * nr;
    int nn = (int)(j->cols - c0 < nr ? j->cols - c0 : nr);
    panel_init(j, c0, nn, &pn);
    pack_cols(j, &pn, bp);
    /* the panel's columns are one contiguous output run when they share a sample */
    bool direct = nn == nr && pn.c[0].p + nr <= j->P;
    for (int64_t o0 = 0; o0 < g->o; o0 += mr) {
      const float *a = j->ap + o0 * j->Kb;
      int64_t mm = g->o - o0 < mr ? g->o - o0 : mr;
      if (direct && mm == mr) {
        j->t.ukr(j->Kb, &one, a, bp, &zero, j->out + (pn.c[0].n * g->o + o0) * j->P + pn.c[0].p, j->P, 1);
        continue;
      }
      j->t.ukr(j->Kb, &one, a, bp, &zero, tile, nr, 1);
      for (int q = 0; q < nn; q++) {
        float *o = j->out + (pn.c[q].n * g->o + o0) * j->P + pn.c[q].p;
        for (int64_t r = 0; r < mm; r++) o[r * j->P] = tile[r * nr + q];
      }
    }
  }
}

static bool job_init(cg_job *j, const ms_k_conv2d_geom *g) {
  memset(j, 0, sizeof *j);
  j->g = g;
  j->t = ms_k_sgemm_tile_get();
  j->K = g->c * g->kh * g->kw;
  j->P = g->oh * g->ow;
  j->cols = g->n * j->P;
  const int64_t *offs = ms_k_conv_row_offsets(g);
  if (!offs) return false;
  j->koff = offs, j->kih = offs + j->K, j->kiw = offs + 2 * j->K;
  return true;
}

/* Work per pool piece: about this many flops. */
static int64_t grain_of(int64_t flops_per_item) {
  const int64_t want = 1 << 20;
  return flops_per_item >= want ? 1 : want / (flops_per_item > 0 ? flops_per_item : 1) + 1;
}

int ms_k_conv2d_forward_gemm(const ms_k_conv2d_geom *g, const float *x, const float *w, const float *b,
                             float *out) {
  cg_job j;
  if (!job_init(&j, g)) return -1;
  j.x = x, j.w = w, j.b = b, j.out = out;
  j.Kb = j.K + (b ? 1 : 0);
  int64_t mp = (g->o + j.t.mr - 1) / j.t.mr;
  float *ap = ms_k_thread_buffer(MS_K_BUF_CONV_W, (size_t)(mp * j.t.mr * j.Kb) * sizeof(float));
  if (!ap) return -1;
  ms_k_conv_pack_rows(w, b, g->o, j.K, j.t.mr, ap);
  j.ap = ap;
  int64_t panels = (j.cols + j.t.nr - 1) / j.t.nr;
  ms_k_parallel_for(panels, grain_of(2 * j.Kb * g->o * j.t.nr), forward_range, &j);
  return j.failed ? -1 : 0;
}

/* ---- input gradient: per sample, column tiles W^T gout folded straight back into gx ---------- */

static void input_grad_range(void *ctx, int64_t begin, int64_t end) {
  cg_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  const int mr = j->t.mr, nr = j->t.nr;
  const float one = 1.0f, zero = 0.0f;
  int64_t kpad = (j->K + mr - 1) / mr * mr, panels = (j->P + nr - 1) / nr;
  float *bp = ms_k_thread_buffer(MS_K_BUF_CONV_B, (size_t)(panels * g->o * nr) * sizeof(float));
  float *ct = ms_k_thread_buffer(MS_K_BUF_CONV_T, (size_t)(kpad * nr) * sizeof(float));
  if (!bp || !ct) {
    j->failed = 1;
    return;
  }
  panel pn;
  for (int64_t n = begin; n < end; n++) {
    memset(j->gx + n * g->c * g->h * g->w, 0, sizeof(float) * (size_t)(g->c * g->h * g->w));
    /* The sample's gout packed into all its NR-column panels at once, each row of gout read
     * front to back: panel by panel, the reads jumped across O rows (more streams than the
     * prefetchers follow) and this copy cost as much as the GEMM. */
    const float *gs = j->gout + n * g->o * j->P;
    for (int64_t o = 0; o < g->o; o++)
      for (int64_t p0 = 0; p0 < j->P; p0 += nr) {
        float *d = bp + (p0 / nr * g->o + o) * nr;
        const float *s = gs + o * j->P + p0;
        int nn = (int)(j->P - p0 < nr ? j->P - p0 : nr);
        for (int q = 0; q < nn; q++) d[q] = s[q];
        for (int q = nn; q < nr; q++) d[q] = 0.0f;
      }
    for (int64_t p0 = 0; p0 < j->P; p0 += nr) {
      int nn = (int)(j->P - p0 < nr ? j->P - p0 : nr);
      const float *b = bp + p0 / nr * g->o * nr;
      for (int64_t k0 = 0; k0 < j->K; k0 += mr)
        j->t.ukr(g->o, &one, j->ap + k0 * g->o, b, &zero, ct + k0 * nr, nr, 1);
      panel_init(j, n * j->P + p0, nn, &pn);
      scatter_cols(j, &pn, ct);
    }
  }
}

int ms_k_conv2d_input_grad_gemm(const ms_k_conv2d_geom *g, const float *w, const float *gout, float *gx) {
  cg_job j;
  if (!job_init(&j, g)) return -1;
  j.w = w, j.gout = gout, j.gx = gx, j.Kb = j.K;
  int64_t kp = (j.K + j.t.mr - 1) / j.t.mr;
  float *ap = ms_k_thread_buffer(MS_K_BUF_CONV_W, (size_t)(kp * j.t.mr * g->o) * sizeof(float));
  if (!ap) return -1;
  /* W^T (K x O) in row panels: element (k, o) is w[o * K + k] */
  float *d = ap;
  for (int64_t k0 = 0; k0 < j.K; k0 += j.t.mr, d += j.t.mr * g->o)
    for (int64_t o = 0; o < g->o; o++)
      for (int r = 0; r < j.t.mr; r++) d[o * j.t.mr + r] = k0 + r < j.K ? w[o * j.K + k0 + r] : 0.0f;
  j.ap = ap;
  ms_k_parallel_for(g->n, grain_of(2 * j.K * g->o * j.P), input_grad_range, &j);
  return j.failed ? -1 : 0;
}

/* ---- weight (and bias) gradient: gW^T (Kb x O) = colmat (Kb x cols) * gout^T (cols x O) ------ */

/* dst[l * mr + r] = x[xo[l] + ko[r]]: mr rows of the column matrix over kc columns whose
 * windows all lie inside the input. Inlined with a constant mr where the tile has one, so the
 * row loop unrolls and the offsets stay in registers (this gather costs as much as the GEMM). */
static inline void gather_rows(const float *x, const int64_t *xo, const int64_t *ko, int64_t kc, int mr,
                               float *dst) {
  for (int64_t l = 0; l < kc; l++, dst += mr) {
    const float *s = x + xo[l];
    for (int r = 0; r < mr; r++) dst[r] = s[ko[r]];
  }
}

static void weight_grad_member(void *ctx, int t, int nt) {
  cg_job *j = ctx;
  const ms_k_conv2d_geom *g = j->g;
  const int mr = j->t.mr, nr = j->t.nr;
  const float one = 1.0f;
  int64_t kbpad = (j->Kb + mr - 1) / mr * mr, opad = j->opad;
  if (t == 0) j->team = nt;
  float *acc = ms_k_thread_buffer(MS_K_BUF_CONV_T, (size_t)(kbpad * opad) * sizeof(float));
  float *bp = ms_k_thread_buffer(MS_K_BUF_CONV_B, (size_t)(WGRAD_KC * opad) * sizeof(float));
  float *ap = ms_k_thread_buffer(MS_K_BUF_CONV_A, (size_t)(WGRAD_KC * mr) * sizeof(float));
  j->part[t] = acc;
  if (!acc || !bp || !ap) {
    j->failed = 1;
    return;
  }
  memset(acc, 0, sizeof(float) * (size_t)(kbpad * opad));
  int64_t q = j->cols / nt, rem = j->cols % nt;
  int64_t cb = t * q + (t < rem ? t : rem), ce = cb + q + (t < rem ? 1 : 0);
  colpos cp[WGRAD_KC];
  int64_t goff[WGRAD_KC], xo[WGRAD_KC];
  for (int64_t c0 = cb; c0 < ce; c0 += WGRAD_KC) {
    int64_t kc = ce - c0 < WGRAD_KC ? ce - c0 : WGRAD_KC;
    bool inside = true;
    for (int64_t l = 0; l < kc; l++) {
      cp[l] = l == 0 ? col_at(j, c0) : col_next(j, cp[l - 1]);
      goff[l] = cp[l].n * g->o * j->P + cp[l].p;
      xo[l] = cp[l].xoff;
      inside = inside && cp[l].inside;
    }
    /* B: gout^T, NR output channels per column, all O panels of this block. Written in order
     * (a column's NR channels are one cache line); the reads walk NR rows of gout along p. */
    for (int64_t o0 = 0; o0 < opad; o0 += nr) {
      float *d = bp + (o0 / nr) * kc * nr;
      int on = (int)(g->o - o0 < nr ? g->o - o0 : nr);
      for (int64_t l = 0; l < kc; l++, d += nr) {
        const float *s = j->gout + goff[l] + o0 * j->P;
        for (int oo = 0; oo < on; oo++) d[oo] = s[oo * j->P];
        for (int oo = on; oo < nr; oo++) d[oo] = 0.0f;
      }
    }
    for (int64_t k0 = 0; k0 < j->Kb; k0 += mr) {
      /* A: mr rows of the column matrix over the block's columns, written in order */
      if (inside && k0 + mr <= j->K) {
        if (mr == 6) gather_rows(j->x, xo, j->koff + k0, kc, 6, ap);
        else gather_rows(j->x, xo, j->koff + k0, kc, mr, ap);
      } else if (inside) {
        /* the last panel: its rows past K are the bias row of ones, then zeros (small layers
         * such as a 1-channel 3x3 conv have half their rows here) */
        int real = (int)(j->K - k0);
        gather_rows(j->x, xo, j->koff + k0, kc, real, ap);
        for (int64_t l = kc - 1; l >= 0; l--)
          for (int r = mr - 1; r >= 0; r--)
            ap[l * mr + r] = r < real ? ap[l * real + r] : k0 + r < j->Kb ? 1.0f : 0.0f;
      } else {
        for (int64_t l = 0; l < kc; l++)
          for (int r = 0; r < mr; r++) ap[l * mr + r] = k0 + r < j->Kb ? col_value(j, &cp[l], k0 + r) : 0.0f;
      }
      for (int64_t o0 = 0; o0 < opad; o0 += nr)
        j->t.ukr(kc, &one, ap, bp + (o0 / nr) * kc * nr, &one, acc + k0 * opad + o0, opad, 1);
    }
  }
}

int ms_k_conv2d_weight_grad_gemm(const ms_k_conv2d_geom *g, const float *x, const float *gout, float *gw,
                                 float *gb) {
  cg_job j;
  if (!job_init(&j, g)) return -1;
  j.x = x, j.gout = gout, j.gw = gw, j.gb = gb;
  j.Kb = j.K + (gb ? 1 : 0);
  j.opad = (g->o + j.t.nr - 1) / j.t.nr * j.t.nr;
  /* a member per ~4 MFLOP of work at least, so small layers stay on one thread */
  int64_t flops = 2 * j.Kb * g->o * j.cols, nt = ms_k_get_num_threads();
  if (nt > flops / (4 << 20)) nt = flops / (4 << 20);
  if (nt > 256) nt = 256;
  if (nt < 1) nt = 1;
  ms_k_parallel_team((int)nt, weight_grad_member, &j);
  if (!j.failed) {
    /* members' sums in member order: the same result for the same team size */
    for (int64_t o = 0; o < g->o; o++)
      for (int64_t k = 0; k < j.Kb; k++) {
        float s = 0.0f;
        for (int t = 0; t < j.team; t++) s += j.part[t][k * j.opad + o];
        if (k < j.K) gw[o * j.K + k] = s;
        else gb[o] = s;
      }
  }
  return j.failed ? -1 : 0;
}
