/* nn_ops_body.h: private to kernels/cpu. The per-row bodies of the NN kernels, written once and
 * compiled for float and double: nn_ops.c defines T (the element type), UINT_T (the unsigned
 * integer of its size), SFX(name) (the suffixed name), EXP, LOG, SQRT, ERF, TANH (the libm functions of T),
 * FAST_ACTIVATION(_BACKWARD) and FAST_LAYER_NORM (the vector paths, or false) and includes this file twice.
 * Sums run in double: rows are short enough that it costs nothing, and float32 losses then agree
 * with PyTorch's to the last bits. */

/* One softmax row of C elements, `s` apart. A NaN in the row makes the whole row NaN. */
static void SFX(softmax_row)(int64_t C, const T *x, int64_t s, T *y, int is_log) {
  T m = -INFINITY;
  for (int64_t c = 0; c < C; c++) m = (x[c * s] > m || x[c * s] != x[c * s]) ? x[c * s] : m;
  double sum = 0;
  if (is_log) {
    for (int64_t c = 0; c < C; c++) sum += EXP(x[c * s] - m);
    T lse = m + (T)LOG((T)sum);
    for (int64_t c = 0; c < C; c++) y[c * s] = x[c * s] - lse;
    return;
  }
  for (int64_t c = 0; c < C; c++) sum += (y[c * s] = EXP(x[c * s] - m));
  T inv = (T)(1.0 / sum);
  for (int64_t c = 0; c < C; c++) y[c * s] *= inv;
}

/* log: gx = g - exp(y) * sum(g); otherwise gx = y * (g - sum(g * y)). */
static void SFX(softmax_backward_row)(int64_t C, const T *y, const T *g, int64_t s, T *gx, int is_log) {
  double sum = 0;
  if (is_log) {
    for (int64_t c = 0; c < C; c++) sum += g[c * s];
    for (int64_t c = 0; c < C; c++) gx[c * s] = g[c * s] - EXP(y[c * s]) * (T)sum;
    return;
  }
  for (int64_t c = 0; c < C; c++) sum += g[c * s] * y[c * s];
  for (int64_t c = 0; c < C; c++) gx[c * s] = y[c * s] * (g[c * s] - (T)sum);
}

/* Rows [begin, end) of an (outer, C, inner) block; row r is (r / inner, r % inner). */
static void SFX(softmax_rows)(const nn_job *j, int64_t begin, int64_t end) {
  const T *x = j->a;
  T *y = j->out;
  for (int64_t r = begin; r < end; r++) {
    int64_t base = (r / j->inner) * j->C * j->inner + r % j->inner;
    if (j->backward)
      SFX(softmax_backward_row)(j->C, x + base, (const T *)j->b + base, j->inner, y + base, j->flag);
    else
      SFX(softmax_row)(j->C, x + base, j->inner, y + base, j->flag);
  }
}

/* ---- activations -------------------------------------------------------------------------------- */

#define GELU_K ((T)0.7978845608028654)   /* sqrt(2 / pi) */
#define GELU_C ((T)0.044715)
#define INV_SQRT2 ((T)0.7071067811865476)
#define INV_SQRT_2PI ((T)0.3989422804014327)

static void SFX(activation_range)(const nn_job *j, int64_t begin, int64_t end) {
  const T *x = j->a;
  T *y = j->out;
  if (FAST_ACTIVATION((ms_k_act)j->flag, x + begin, y + begin, end - begin)) return;
  switch ((ms_k_act)j->flag) {
  case MS_K_ACT_GELU:
    for (int64_t i = begin; i < end; i++) y[i] = (T)0.5 * x[i] * ((T)1 + ERF(x[i] * INV_SQRT2));
    break;
  case MS_K_ACT_GELU_TANH:
    for (int64_t i = begin; i < end; i++)
      y[i] = (T)0.5 * x[i] * ((T)1 + TANH(GELU_K * (x[i] + GELU_C * x[i] * x[i] * x[i])));
    break;
  case MS_K_ACT_SILU:
    for (int64_t i = begin; i < end; i++) y[i] = x[i] / ((T)1 + EXP(-x[i]));
    break;
  case MS_K_ACT_HARDSWISH: /* x * relu6(x + 3) / 6; NaN stays NaN */
    for (int64_t i = begin; i < end; i++) {
      T r = x[i] + (T)3;
      y[i] = x[i] * (r < (T)0 ? (T)0 : r > (T)6 ? (T)6 : r) / (T)6;
    }
    break;
  }
}

static void SFX(activation_backward_range)(const nn_job *j, int64_t begin, int64_t end) {
  const T *x = j->a, *g = j->b;
  T *gx = j->out;
  if (FAST_ACTIVATION_BACKWARD((ms_k_act)j->flag, x + begin, g + begin, gx + begin, end - begin)) return;
  switch ((ms_k_act)j->flag) {
  case MS_K_ACT_GELU:
    for (int64_t i = begin; i < end; i++) {
      T cdf = (T)0.5 * ((T)1 + ERF(x[i] * INV_SQRT2)), pdf = INV_SQRT_2PI * EXP((T)-0.5 * x[i] * x[i]);
      gx[i] = g[i] * (cdf + x[i] * pdf);
    }
    break;
  case MS_K_ACT_GELU_TANH:
    for (int64_t i = begin; i < end; i++) {
      T x2 = x[i] * x[i], th = TANH(GELU_K * (x[i] + GELU_C * x2 * x[i]));
      T dinner = GELU_K * ((T)1 + (T)3 * GELU_C * x2);
      gx[i] = g[i] * ((T)0.5 * ((T)1 + th) + (T)0.5 * x[i] * ((T)1 - th * th) * dinner);
    }
    break;
  case MS_K_ACT_SILU:
    for (int64_t i = begin; i < end; i++) {
      T s = (T)1 / ((T)1 + EXP(-x[i]));
      gx[i] = g[i] * s * ((T)1 + x[i] * ((T)1 - s));
    }
    break;
  case MS_K_ACT_HARDSWISH: /* PyTorch's: 0 below -3, x / 3 + 1/2 up to 3, 1 above (and at NaN) */
    for (int64_t i = begin; i < end; i++)
      gx[i] = x[i] < (T)-3 ? (T)0 : x[i] <= (T)3 ? g[i] * (x[i] / (T)3 + (T)0.5) : g[i];
    break;
  }
}

/* y = x * mask * scale (dropout forward and backward alike). */
static void SFX(masked_scale_range)(const nn_job *j, int64_t begin, int64_t end) {
  const T *x = j->a;
  const uint8_t *m = j->mask;
  T *y = j->out, scale = (T)j->s0;
  /* mask bytes are 0 or 1: an all-ones or all-zeros bit mask over the product, which the
   * compiler vectorises (a select on the byte does not); a dropped inf or NaN still gives 0 */
  for (int64_t i = begin; i < end; i++) {
    union { T f; UINT_T u; } v = {x[i] * scale};
    v.u &= (UINT_T)0 - (UINT_T)m[i];
    y[i] = v.f;
  }
}

/* ---- negative log likelihood ------------------------------------------------------------------- */

/* Positions [begin, end) of (N, inner): the weighted loss of the target class, its weight, and
 * (when asked) the label-smoothing term -sum_c w_c logp_c. Ignored positions give zeros. */
static void SFX(nll_rows)(const nn_job *j, int64_t begin, int64_t end) {
  const T *logp = j->a, *w = j->weight;
  T *nll = j->out, *wt = j->out2, *smooth = j->out3;
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / j->inner, i = p % j->inner, t = j->target[p];
    const T *row = logp + n * j->C * j->inner + i;
    if (t == j->ignore_index) {
      nll[p] = 0, wt[p] = 0;
      if (smooth) smooth[p] = 0;
      continue;
    }
    int64_t k = t - j->base;
    T wk = w ? w[k] : (T)1;
    nll[p] = -wk * row[k * j->inner], wt[p] = wk;
    if (!smooth) continue;
    double s = 0;
    for (int64_t c = 0; c < j->C; c++) s -= (double)(w ? w[c] : (T)1) * row[c * j->inner];
    smooth[p] = (T)s;
  }
}

/* Gradient with respect to the log-probabilities (nll_loss) or the logits (cross_entropy, when
 * j->a holds the saved log-probabilities): per position, q_c = -a (1 - eps) w_k [c == k]
 * - b (eps / C) w_c with a = g * s0 and b = g * s1; the logits' gradient is q - softmax * sum(q). */
static void SFX(nll_backward_rows)(const nn_job *j, int64_t begin, int64_t end) {
  const T *logp = j->a, *g = j->b, *w = j->weight;
  T *gx = j->out;
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / j->inner, i = p % j->inner, t = j->target[p], s = j->inner;
    T *row = gx + n * j->C * s + i;
    for (int64_t c = 0; c < j->C; c++) row[c * s] = 0;
    if (t == j->ignore_index) continue;
    int64_t k = t - j->base;
    T gp = g[p * j->gs], a = gp * (T)j->s0 * (T)(1 - j->s2), b = gp * (T)j->s1 * (T)(j->s2 / (double)j->C);
    row[k * s] = -a * (w ? w[k] : (T)1);
    if (!logp) continue; /* nll_loss: done */
    double sum = 0;
    for (int64_t c = 0; c < j->C; c++) sum += (row[c * s] -= b * (w ? w[c] : (T)1));
    const T *lp = logp + n * j->C * s + i;
    for (int64_t c = 0; c < j->C; c++) row[c * s] -= EXP(lp[c * s]) * (T)sum;
  }
}

/* ---- embedding ---------------------------------------------------------------------------------- */

static void SFX(embedding_rows)(const nn_job *j, int64_t begin, int64_t end) {
  const T *w = j->a;
  T *out = j->out;
  for (int64_t r = begin; r < end; r++) {
    const T *src = w + (j->target[r] - j->base) * j->C;
    for (int64_t d = 0; d < j->C; d++) out[r * j->C + d] = src[d];
  }
}

/* Columns [begin, end) of the weight gradient: each thread owns its columns, so rows repeated in
 * the indices accumulate without races and in a fixed order. */
static void SFX(embedding_backward_cols)(const nn_job *j, int64_t begin, int64_t end) {
  const T *g = j->b;
  T *gw = j->out;
  for (int64_t r = 0; r < j->N; r++) {
    int64_t k = j->target[r] - j->base;
    if (k == j->ignore_index) continue; /* the padding row gets no gradient */
    for (int64_t d = begin; d < end; d++) gw[k * j->C + d] += g[r * j->C + d];
  }
}

/* ---- layer norm --------------------------------------------------------------------------------- */

/* Rows of M x C: mean and 1/sqrt(biased var + eps), then y = xhat * w + b. */
static void SFX(layer_norm_rows)(const nn_job *j, int64_t begin, int64_t end) {
  if (FAST_LAYER_NORM(ln_fast_rows, j, begin, end)) return;
  const T *x = j->a, *w = j->weight, *b = j->b;
  T *y = j->out, *mean = j->out2, *rstd = j->out3;
  for (int64_t r = begin; r < end; r++) {
    const T *xr = x + r * j->C;
    double s = 0, ss = 0;
    for (int64_t c = 0; c < j->C; c++) s += xr[c];
    double mu = s / (double)j->C;
    for (int64_t c = 0; c < j->C; c++) ss += ((double)xr[c] - mu) * ((double)xr[c] - mu);
    T m = (T)mu, rs = (T)(1.0 / sqrt(ss / (double)j->C + j->s0));
    mean[r] = m, rstd[r] = rs;
    T *yr = y + r * j->C;
    for (int64_t c = 0; c < j->C; c++) {
      T v = (xr[c] - m) * rs;
      yr[c] = (w ? v * w[c] : v) + (b ? b[c] : (T)0);
    }
  }
}

/* gx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) with gxhat = g * w, per row. */
static void SFX(layer_norm_backward_rows)(const nn_job *j, int64_t begin, int64_t end) {
  if (FAST_LAYER_NORM(ln_fast_backward_rows, j, begin, end)) return;
  const T *x = j->a, *g = j->b, *w = j->weight, *mean = j->stat0, *rstd = j->stat1;
  T *gx = j->out;
  for (int64_t r = begin; r < end; r++) {
    const T *xr = x + r * j->C, *gr = g + r * j->C;
    double s1 = 0, s2 = 0;
    for (int64_t c = 0; c < j->C; c++) {
      T gh = w ? gr[c] * w[c] : gr[c];
      s1 += gh, s2 += (double)gh * (xr[c] - mean[r]) * rstd[r];
    }
    T m1 = (T)(s1 / (double)j->C), m2 = (T)(s2 / (double)j->C);
    for (int64_t c = 0; c < j->C; c++) {
      T gh = w ? gr[c] * w[c] : gr[c], xh = (xr[c] - mean[r]) * rstd[r];
      gx[r * j->C + c] = rstd[r] * (gh - m1 - xh * m2);
    }
  }
}

/* Columns [begin, end): gw = sum over rows of g * xhat, gb = sum of g. Blocks of LN_COLS columns
 * are summed row by row (reading along rows, not down columns of M rows), each column's sum in
 * row order, as before. */
#ifndef LN_COLS
#define LN_COLS 256
#endif
static void SFX(layer_norm_param_cols)(const nn_job *j, int64_t begin, int64_t end) {
  if (FAST_LAYER_NORM(ln_fast_param_cols, j, begin, end)) return;
  const T *x = j->a, *g = j->b, *mean = j->stat0, *rstd = j->stat1;
  T *gw = j->out2, *gb = j->out3;
  for (int64_t c0 = begin; c0 < end; c0 += LN_COLS) {
    int64_t n = end - c0 < LN_COLS ? end - c0 : LN_COLS;
    double sw[LN_COLS] = {0}, sb[LN_COLS] = {0};
    for (int64_t r = 0; r < j->N; r++) {
      const T *gr = g + r * j->C + c0, *xr = x + r * j->C + c0;
      for (int64_t c = 0; c < n; c++) sw[c] += (double)gr[c] * (xr[c] - mean[r]) * rstd[r], sb[c] += gr[c];
    }
    for (int64_t c = 0; c < n; c++) {
      if (gw) gw[c0 + c] = (T)sw[c];
      if (gb) gb[c0 + c] = (T)sb[c];
    }
  }
}

/* ---- batch norm: channel c of (N, C, inner) holds x[(n * C + c) * inner + i] ------------------
 * Each range of channels is walked in blocks of BN_BLOCK, batch-major (n, then c, then i), so a
 * (N, C) input (inner = 1) is read along its rows instead of down its columns. */

#ifndef BN_BLOCK
#define BN_BLOCK 128
#endif

static void SFX(batch_norm_stats_block)(const nn_job *j, int64_t c0, int64_t c1) {
  const T *x = j->a;
  T *mean = j->out2, *var = j->out3;
  double s[BN_BLOCK] = {0}, ss[BN_BLOCK] = {0}, count = (double)j->N * (double)j->inner;
  for (int64_t n = 0; n < j->N; n++)
    for (int64_t c = c0; c < c1; c++) {
      const T *xr = x + (n * j->C + c) * j->inner;
      for (int64_t i = 0; i < j->inner; i++) s[c - c0] += xr[i];
    }
  for (int64_t c = c0; c < c1; c++) s[c - c0] /= count;
  for (int64_t n = 0; n < j->N; n++)
    for (int64_t c = c0; c < c1; c++) {
      const T *xr = x + (n * j->C + c) * j->inner;
      double mu = s[c - c0], acc = 0;
      for (int64_t i = 0; i < j->inner; i++) acc += ((double)xr[i] - mu) * ((double)xr[i] - mu);
      ss[c - c0] += acc;
    }
  for (int64_t c = c0; c < c1; c++) mean[c] = (T)s[c - c0], var[c] = (T)(ss[c - c0] / count);
}

static void SFX(batch_norm_apply_block)(const nn_job *j, int64_t c0, int64_t c1) {
  const T *x = j->a, *w = j->weight, *b = j->b, *mean = j->stat0, *invstd = j->stat1;
  T *y = j->out, scale[BN_BLOCK], shift[BN_BLOCK];
  for (int64_t c = c0; c < c1; c++) {
    scale[c - c0] = w ? w[c] * invstd[c] : invstd[c];
    shift[c - c0] = (b ? b[c] : (T)0) - mean[c] * scale[c - c0];
  }
  for (int64_t n = 0; n < j->N; n++)
    for (int64_t c = c0; c < c1; c++) {
      int64_t base = (n * j->C + c) * j->inner;
      for (int64_t i = 0; i < j->inner; i++) y[base + i] = x[base + i] * scale[c - c0] + shift[c - c0];
    }
}

/* Training (flag set): gx = w invstd (g - mean(g) - xhat mean(g xhat)); evaluation: the stats
 * are constants, gx = g w invstd. gw = sum g xhat, gb = sum g in both. */
static void SFX(batch_norm_backward_block)(const nn_job *j, int64_t c0, int64_t c1) {
  const T *x = j->a, *g = j->b, *w = j->weight, *mean = j->stat0, *invstd = j->stat1;
  T *gx = j->out, *gw = j->out2, *gb = j->out3;
  double sg[BN_BLOCK] = {0}, sgx[BN_BLOCK] = {0}, count = (double)j->N * (double)j->inner;
  for (int64_t n = 0; n < j->N; n++)
    for (int64_t c = c0; c < c1; c++) {
      int64_t base = (n * j->C + c) * j->inner;
      double a = 0, ax = 0;
      for (int64_t i = 0; i < j->inner; i++) {
        a += g[base + i];
        ax += (double)g[base + i] * (x[base + i] - mean[c]);
      }
      sg[c - c0] += a, sgx[c - c0] += ax * invstd[c];
    }
  for (int64_t c = c0; c < c1; c++) {
    if (gw) gw[c] = (T)sgx[c - c0];
    if (gb) gb[c] = (T)sg[c - c0];
  }
  if (!gx) return;
  for (int64_t n = 0; n < j->N; n++)
    for (int64_t c = c0; c < c1; c++) {
      int64_t base = (n * j->C + c) * j->inner;
      T k = w ? w[c] * invstd[c] : invstd[c], is = invstd[c], mu = mean[c];
      T mg = j->flag ? (T)(sg[c - c0] / count) : (T)0, mgx = j->flag ? (T)(sgx[c - c0] / count) : (T)0;
      for (int64_t i = 0; i < j->inner; i++)
        gx[base + i] = k * (g[base + i] - mg - (x[base + i] - mu) * is * mgx);
    }
}

/* The pool's range of channels, cut into blocks. */
#define BN_CHANNELS(name)                                                                   \
  static void SFX(name##_channels)(const nn_job *j, int64_t begin, int64_t end) {          \
    for (int64_t c0 = begin; c0 < end; c0 += BN_BLOCK)                                      \
      SFX(name##_block)(j, c0, end - c0 < BN_BLOCK ? end : c0 + BN_BLOCK);                  \
  }
BN_CHANNELS(batch_norm_stats)
BN_CHANNELS(batch_norm_apply)
BN_CHANNELS(batch_norm_backward)
#undef BN_CHANNELS

#undef GELU_K
#undef GELU_C
#undef INV_SQRT2
#undef INV_SQRT_2PI
