/* attention_body.h: the CPU attention kernels for one element type, included by attention.c with
 * T (float or double: scores, sums, lse and delta), IO (the type of q, k, v, out, the gradients
 * and an additive mask: T, or uint16_t for bfloat16), LOAD(x) (an IO value as T), SFX(name),
 * EXP and LOG defined, SFX(exp_sum), SFX(max), SFX(store_row) (n T values into IO)
 * beside them, and the type's block products (attention_f32.h's packed micro-kernel tiles, or the GEMM
 * for double): a workspace SFX(ws) set up per task range by SFX(ws_init), SFX(ws_problem) to
 * ready problem b's operands, and SFX(qk), SFX(pv), SFX(ov), SFX(dv), SFX(dk), SFX(dq). Work is
 * cut into blocks of BQ queries by BK keys; a block's scores live in a BQ x BK buffer, so no
 * L x S matrix is ever held (FlashAttention's online softmax). */

/* The scaled, masked scores of queries [i0, i0 + nq) and keys [j0, j0 + nk) of problem b into
 * s (row stride BK), masked ones -inf. */
static void SFX(scores)(SFX(ws) *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t j0,
                        int64_t nk, T *s) {
  const ms_k_attn_geom *g = c->g;
  SFX(qk)(w, c, b, i0, nq, j0, nk, s);
  int64_t moff = attn_batch_offset(g, b, g->mstride);
  for (int64_t r = 0; r < nq; r++) {
    T *row = s + r * BK;
    int64_t i = i0 + r;
    if (g->causal)
      for (int64_t t = (i + 1 - j0 > 0 ? i + 1 - j0 : 0); t < nk; t++) row[t] = -INFINITY;
    if (g->mask_kind == MS_K_ATTN_MASK_BOOL) {
      const uint8_t *m = (const uint8_t *)c->mask + moff + i * g->msi + j0 * g->msj;
      for (int64_t t = 0; t < nk; t++)
        if (!m[t * g->msj]) row[t] = -INFINITY;
    } else if (g->mask_kind == MS_K_ATTN_MASK_ADD) {
      const IO *m = (const IO *)c->mask + moff + i * g->msi + j0 * g->msj;
      for (int64_t t = 0; t < nk; t++) row[t] += LOAD(m[t * g->msj]);
    }
  }
}

/* Dropout's factor for weights (b, i, j0 .. j0 + nk) into z: 1 / (1 - p) or 0. */
static void SFX(keep_row)(const ms_k_attn_geom *g, int64_t b, int64_t i, int64_t j0, int64_t nk, T *z) {
  uint8_t keep[BK];
  attn_keep(g, (b * g->L + i) * g->S + j0, nk, keep);
  T inv = (T)(1 / (1 - g->dropout_p));
  for (int64_t t = 0; t < nk; t++) z[t] = keep[t] ? inv : 0;
}

/* Forward for problem b, queries [i0, i0 + nq): online softmax over the key blocks. */
static void SFX(forward_block)(SFX(ws) *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, T *s,
                               T *acc, T *m, T *l) {
  const ms_k_attn_geom *g = c->g;
  const int64_t Ev = g->Ev, jend = g->causal && i0 + nq < g->S ? i0 + nq : g->S;
  T z[BK];
  for (int64_t r = 0; r < nq; r++) m[r] = -INFINITY, l[r] = 0;
  memset(acc, 0, (size_t)(nq * Ev) * sizeof(T));
  for (int64_t j0 = 0; j0 < jend; j0 += BK) {
    int64_t nk = jend - j0 < BK ? jend - j0 : BK;
    SFX(scores)(w, c, b, i0, nq, j0, nk, s);
    for (int64_t r = 0; r < nq; r++) {
      T *row = s + r * BK, bmx = SFX(max)(row, nk), mx = bmx > m[r] ? bmx : m[r];
      if (mx == -INFINITY) { /* every key so far masked: nothing to add */
        memset(row, 0, (size_t)nk * sizeof(T));
        continue;
      }
      T alpha = EXP(m[r] - mx); /* m = -inf gives 0: acc and l are still 0 */
      l[r] = l[r] * alpha + SFX(exp_sum)(row, nk, mx), m[r] = mx;
      if (alpha != 1)
        for (int64_t d = 0; d < Ev; d++) acc[r * Ev + d] *= alpha;
      if (g->dropout_p > 0) {
        SFX(keep_row)(g, b, i0 + r, j0, nk, z);
        for (int64_t t = 0; t < nk; t++) row[t] *= z[t];
      }
    }
    SFX(pv)(w, c, b, nq, j0, nk, s, acc);
  }
  IO *out = (IO *)c->out + (b * g->L + i0) * Ev;
  T *lse = (T *)c->lse + b * g->L + i0;
  for (int64_t r = 0; r < nq; r++) {
    T inv = l[r] > 0 ? 1 / l[r] : 0; /* a fully masked row: 0, as PyTorch's safe softmax */
    for (int64_t d = 0; d < Ev; d++) acc[r * Ev + d] *= inv;
    SFX(store_row)(out + r * Ev, acc + r * Ev, Ev);
    lse[r] = l[r] > 0 ? m[r] + LOG(l[r]) : -INFINITY;
  }
}

static void SFX(forward_range)(void *ctx, int64_t begin, int64_t end) {
  const attn_ctx *c = ctx;
  const ms_k_attn_geom *g = c->g;
  int64_t qb = (g->L + BQ - 1) / BQ;
  T *s = malloc(sizeof(T) * (size_t)(BQ * BK + BQ * g->Ev + 2 * BQ));
  SFX(ws) ws;
  if (!s || !SFX(ws_init)(&ws, c, false)) {
    free(s);
    atomic_store(c->failed, 1);
    return;
  }
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / qb, i0 = (t % qb) * BQ, nq = g->L - i0 < BQ ? g->L - i0 : BQ;
    SFX(ws_problem)(&ws, c, b);
    SFX(forward_block)(&ws, c, b, i0, nq, s, s + BQ * BK, s + BQ * BK + BQ * g->Ev, s + BQ * BK + BQ * g->Ev + BQ);
  }
  free(s);
}

/* For queries [i0, i0 + nq) and keys [j0, j0 + nk) of problem b: p = the weights P (before
 * dropout) and ds = dS = P (dP - delta), with dP = (gout v^T) times dropout's factor; with
 * dropout, pd gets P times dropout's factor (what multiplied v; without, that is p itself). */
static void SFX(grad_scores)(SFX(ws) *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t j0,
                             int64_t nk, T *p, T *ds, T *pd) {
  const ms_k_attn_geom *g = c->g;
  const T *lse = (const T *)c->lse + b * g->L + i0, *delta = (const T *)c->delta + b * g->L + i0;
  T z[BK];
  SFX(scores)(w, c, b, i0, nq, j0, nk, p);
  SFX(ov)(w, c, b, i0, nq, j0, nk, ds);
  for (int64_t r = 0; r < nq; r++) {
    T *pr = p + r * BK, *dr = ds + r * BK;
    if (lse[r] == -INFINITY) memset(pr, 0, (size_t)nk * sizeof(T)); /* every key masked */
    else SFX(exp_sum)(pr, nk, lse[r]); /* the weights; their sum is not needed */
    if (g->dropout_p > 0) {
      SFX(keep_row)(g, b, i0 + r, j0, nk, z);
      for (int64_t t = 0; t < nk; t++) dr[t] = pr[t] * (dr[t] * z[t] - delta[r]);
      for (int64_t t = 0; t < nk; t++) pd[r * BK + t] = pr[t] * z[t];
    } else {
      for (int64_t t = 0; t < nk; t++) dr[t] = pr[t] * (dr[t] - delta[r]);
    }
  }
}

/* delta = rowsum(gout * out) for rows [begin, end) of nb L. */
static void SFX(delta_range)(void *ctx, int64_t begin, int64_t end) {
  const attn_ctx *c = ctx;
  const int64_t Ev = c->g->Ev;
  for (int64_t r = begin; r < end; r++) {
    const IO *o = (const IO *)c->out + r * Ev, *go = (const IO *)c->gout + r * Ev;
    T sum = 0;
    for (int64_t d = 0; d < Ev; d++) sum += LOAD(o[d]) * LOAD(go[d]);
    ((T *)c->delta)[r] = sum;
  }
}

/* dK and dV of problem b's keys [j0, j0 + nk), summed in T over every query block that sees
 * them (gk and gv: BK x E and BK x Ev scratch), then stored; those blocks' share of dQ is added
 * into gq (the problem's L x E dQ rows of this task). */
static void SFX(kv_block)(SFX(ws) *w, const attn_ctx *c, int64_t b, int64_t j0, int64_t nk, T *gq, T *p, T *ds,
                          T *pd, T *gk, T *gv) {
  const ms_k_attn_geom *g = c->g;
  const int64_t E = g->E, Ev = g->Ev;
  memset(gk, 0, (size_t)(nk * E) * sizeof(T));
  memset(gv, 0, (size_t)(nk * Ev) * sizeof(T));
  /* causal: queries before j0 see none of these keys, so the query blocks start at j0 (rounded
   * down to where the products' operands may start), and a block's keys past its last query are
   * masked for every row of it: the diagonal's blocks are cut to the part that counts */
  const int64_t align = SFX(row_align)(w);
  for (int64_t i0 = g->causal ? j0 / align * align : 0; i0 < g->L; i0 += BQ) {
    int64_t nq = g->L - i0 < BQ ? g->L - i0 : BQ, nkb = g->causal && i0 + nq - j0 < nk ? i0 + nq - j0 : nk;
    if (nkb <= 0) continue;
    SFX(grad_scores)(w, c, b, i0, nq, j0, nkb, p, ds, pd);
    SFX(dv)(w, c, b, i0, nq, nkb, g->dropout_p > 0 ? pd : p, gv);
    SFX(dk)(w, c, b, i0, nq, nkb, ds, gk);
    SFX(dq)(w, c, b, nq, j0, nkb, ds, gq + i0 * E);
  }
  IO *gko = (IO *)c->gk + (b * g->S + j0) * E, *gvo = (IO *)c->gv + (b * g->S + j0) * Ev;
  for (int64_t r = 0; r < nk; r++) {
    SFX(store_row)(gko + r * E, gk + r * E, E);
    SFX(store_row)(gvo + r * Ev, gv + r * Ev, Ev);
  }
}

/* Task w is key group w % groups of problem w / groups: its key blocks' dK and dV, and their
 * share of dQ, written straight into gq when a problem has one group and IO is T, else into the
 * group's partial (summed by sum_dq_range). Groups depend on the shape only, so the sums do not
 * depend on the thread count. */
static void SFX(backward_range)(void *ctx, int64_t begin, int64_t end) {
  const attn_ctx *c = ctx;
  const ms_k_attn_geom *g = c->g;
  const int64_t kb = (g->S + BK - 1) / BK, per = (kb + c->groups - 1) / c->groups;
  T *p = malloc(sizeof(T) * (size_t)(3 * BQ * BK + BK * (g->E + g->Ev)));
  SFX(ws) ws;
  if (!p || !SFX(ws_init)(&ws, c, true)) {
    free(p);
    atomic_store(c->failed, 1);
    return;
  }
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / c->groups, grp = t % c->groups;
    T *gq = !c->dq_parts ? (T *)c->gq + b * g->L * g->E : (T *)c->dq_parts + t * g->L * g->E;
    memset(gq, 0, (size_t)(g->L * g->E) * sizeof(T));
    SFX(ws_problem)(&ws, c, b);
    for (int64_t blk = grp * per; blk < kb && blk < (grp + 1) * per; blk++) {
      int64_t j0 = blk * BK;
      SFX(kv_block)(&ws, c, b, j0, g->S - j0 < BK ? g->S - j0 : BK, gq, p, p + BQ * BK, p + 2 * BQ * BK,
                    p + 3 * BQ * BK, p + 3 * BQ * BK + BK * g->E);
    }
  }
  free(p);
}

/* gq rows [begin, end) of nb L = the sum of the groups' partials, in group order (summed into
 * the first group's, which is scratch). */
static void SFX(sum_dq_range)(void *ctx, int64_t begin, int64_t end) {
  const attn_ctx *c = ctx;
  const int64_t L = c->g->L, E = c->g->E;
  for (int64_t r = begin; r < end; r++) {
    int64_t b = r / L, i = r % L;
    T *part = (T *)c->dq_parts + (b * c->groups * L + i) * E;
    for (int64_t grp = 1; grp < c->groups; grp++)
      for (int64_t d = 0; d < E; d++) part[d] += part[grp * L * E + d];
    SFX(store_row)((IO *)c->gq + r * E, part, E);
  }
}

/* the instantiation's parameters, so the next one defines its own */
#undef T
#undef IO
#undef LOAD
#undef SFX
#undef EXP
#undef LOG
