/* layer_norm_rows.h: private to layer_norm_body.h, which includes it once per element type with
 * ELEM (float or uint16_t for bfloat16), LOAD(p, n) and STORE(p, v, n) (its vector words for the
 * low n lanes) and ESFX(name) naming the functions. Everything after a load is float32 and
 * float64 arithmetic, the same for both types, so a bfloat16 result is the float32 one on the
 * widened inputs, rounded once.
 *
 * Accuracy: the sums run in float64 lanes (each float32 widened exactly), as nn_ops_body.h's
 * scalar loops sum in double: the variance is the second pass's sum of (x - mean)^2 around the
 * float64 mean, so a row with mean 1e4 and std 1e-3 keeps its digits (float32 lanes summing x
 * would lose them: each term's rounding is 1e-3 there). Only the order of the additions differs
 * from the scalar loops (float64 rounding, far below float32's). Four accumulators (two vectors
 * of float64 per float32 vector, two float32 vectors a step) keep the adds independent. */

/* The float64 sums of x (pass 1) over a row: lanes, then the four accumulators, in a fixed
 * order, so a row's statistics do not depend on which thread runs it. */
static double ESFX(row_sum)(int64_t C, const ELEM *x) {
  vd s0 = vd_set1(0), s1 = s0, s2 = s0, s3 = s0;
  int64_t c = 0;
  for (; c + 2 * W <= C; c += 2 * W) {
    vf u = LOAD(x + c, W), v = LOAD(x + c + W, W);
    s0 = vd_add(s0, vd_lo(u)), s1 = vd_add(s1, vd_hi(u));
    s2 = vd_add(s2, vd_lo(v)), s3 = vd_add(s3, vd_hi(v));
  }
  for (; c < C; c += W) { /* lanes past C load as 0 */
    vf u = LOAD(x + c, C - c);
    s0 = vd_add(s0, vd_lo(u)), s1 = vd_add(s1, vd_hi(u));
  }
  return vd_sum(vd_add(vd_add(s0, s1), vd_add(s2, s3)));
}

/* sum (x - mu)^2 in float64 (pass 2); lanes past C are dropped (they would add mu^2). */
static double ESFX(row_sq_dev)(int64_t C, const ELEM *x, double mu) {
  vd m = vd_set1(mu), s0 = vd_set1(0), s1 = s0, s2 = s0, s3 = s0;
  int64_t c = 0;
  for (; c + 2 * W <= C; c += 2 * W) {
    vf u = LOAD(x + c, W), v = LOAD(x + c + W, W);
    vd a = vd_sub(vd_lo(u), m), b = vd_sub(vd_hi(u), m), d = vd_sub(vd_lo(v), m), e = vd_sub(vd_hi(v), m);
    s0 = vd_fma(a, a, s0), s1 = vd_fma(b, b, s1), s2 = vd_fma(d, d, s2), s3 = vd_fma(e, e, s3);
  }
  for (; c < C; c += W) {
    vf u = LOAD(x + c, C - c);
    vd a = vd_keep(vd_sub(vd_lo(u), m), C - c), b = vd_keep(vd_sub(vd_hi(u), m), C - c - W / 2);
    s0 = vd_fma(a, a, s0), s1 = vd_fma(b, b, s1);
  }
  return vd_sum(vd_add(vd_add(s0, s1), vd_add(s2, s3)));
}

/* One row: mean, 1/sqrt(biased var + eps), then y = (x - mean) rstd w + b (w 1 and b 0 when
 * absent: the fused multiply-add then rounds as the product or the sum alone would). */
static void ESFX(ln_row)(const ms_k_ln_args *a, int64_t r) {
  int64_t C = a->C;
  const ELEM *x = (const ELEM *)a->x + r * C;
  ELEM *y = (ELEM *)a->y + r * C;
  double mu = ESFX(row_sum)(C, x) / (double)C;
  double var = ESFX(row_sq_dev)(C, x, mu) / (double)C;
  float m = (float)mu, rs = (float)(1.0 / sqrt(var + a->eps));
  a->mean_out[r] = m, a->rstd_out[r] = rs;
  vf mv = vf_set1(m), rv = vf_set1(rs), one = vf_set1(1), zero = vf_set1(0);
  for (int64_t c = 0; c < C; c += W) {
    int64_t n = C - c;
    vf wv = a->w ? vf_load(a->w + c, n) : one, bv = a->b ? vf_load(a->b + c, n) : zero;
    vf v = vf_mul(vf_sub(LOAD(x + c, n), mv), rv);
    STORE(y + c, vf_fma(v, wv, bv), n);
  }
}

/* gh = g w (g alone without a weight); xm = x - mean. */
static inline vf ESFX(ln_gh)(const ms_k_ln_args *a, const ELEM *g, int64_t c, int64_t n) {
  vf gv = LOAD(g + c, n);
  return a->w ? vf_mul(gv, vf_load(a->w + c, n)) : gv;
}

/* gx = rstd (gh - mean(gh) - xhat mean(gh xhat)), xhat = (x - mean) rstd: the two means from
 * float64 sums of gh and gh (x - mean) (each product of two float32 exact in float64), the
 * second scaled by rstd once at the end. Lanes past C load g = 0, so they add nothing. */
static void ESFX(ln_backward_row)(const ms_k_ln_args *a, int64_t r) {
  int64_t C = a->C;
  const ELEM *x = (const ELEM *)a->x + r * C, *g = (const ELEM *)a->g + r * C;
  ELEM *gx = (ELEM *)a->gx + r * C;
  vf mv = vf_set1(a->mean[r]), rv = vf_set1(a->rstd[r]);
  vd s0 = vd_set1(0), s1 = s0, p0 = s0, p1 = s0;
  for (int64_t c = 0; c < C; c += W) {
    vf gh = ESFX(ln_gh)(a, g, c, C - c), xm = vf_sub(LOAD(x + c, C - c), mv);
    vd lo = vd_lo(gh), hi = vd_hi(gh);
    s0 = vd_add(s0, lo), s1 = vd_add(s1, hi);
    p0 = vd_fma(lo, vd_lo(xm), p0), p1 = vd_fma(hi, vd_hi(xm), p1);
  }
  float m1 = (float)(vd_sum(vd_add(s0, s1)) / (double)C);
  float m2 = (float)(vd_sum(vd_add(p0, p1)) * a->rstd[r] / (double)C);
  vf m1v = vf_set1(m1), m2v = vf_set1(m2);
  for (int64_t c = 0; c < C; c += W) {
    int64_t n = C - c;
    vf gh = ESFX(ln_gh)(a, g, c, n), xh = vf_mul(vf_sub(LOAD(x + c, n), mv), rv);
    STORE(gx + c, vf_mul(rv, vf_fnma(xh, m2v, vf_sub(gh, m1v))), n);
  }
}

/* Columns [c0, c0 + n) of gw and gb, n <= LN_VCOLS: sw += (g (x - mean)) rstd and sb += g in
 * float64 per column, row after row (a column's sum is the same whichever lane holds it). The
 * same operations as nn_ops_body.h's scalar columns (a multiply, then an add: no fused one), so
 * gw and gb are the scalar loops' bits, which float16's widened columns still run. */
static void ESFX(ln_param_block)(const ms_k_ln_args *a, int64_t c0, int64_t n, double *sw, double *sb) {
  for (int64_t c = 0; c < n; c += W)
    for (int k = 0; k < W; k++) sw[c + k] = 0, sb[c + k] = 0;
  for (int64_t r = 0; r < a->M; r++) {
    const ELEM *g = (const ELEM *)a->g + r * a->C + c0, *x = (const ELEM *)a->x + r * a->C + c0;
    vf mv = vf_set1(a->mean[r]);
    vd rv = vd_set1(a->rstd[r]);
    for (int64_t c = 0; c < n; c += W) {
      vf gv = LOAD(g + c, n - c), xm = vf_sub(LOAD(x + c, n - c), mv);
      vd glo = vd_lo(gv), ghi = vd_hi(gv);
      vd_store(sw + c, vd_add(vd_load(sw + c), vd_mul(vd_mul(glo, vd_lo(xm)), rv)));
      vd_store(sw + c + W / 2, vd_add(vd_load(sw + c + W / 2), vd_mul(vd_mul(ghi, vd_hi(xm)), rv)));
      vd_store(sb + c, vd_add(vd_load(sb + c), glo));
      vd_store(sb + c + W / 2, vd_add(vd_load(sb + c + W / 2), ghi));
    }
  }
}
