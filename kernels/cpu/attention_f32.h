/* attention_f32.h: private to attention.c. The block products of attention_body.h for float, on
 * the GEMM's register micro-kernel directly (ms_k_sgemm_tile_get): a block product is too small
 * (72 x 128 x 64) for the GEMM driver, whose dispatch and packing of both operands cost as much as
 * the product. Each problem's q, k, v (and gout in the backward) are packed once as the panels
 * their products read, into a per-thread buffer, and reused by every block; only the blocks of
 * scores are packed per product. Sums run in the same order whatever the thread count. */

typedef struct {
  ms_k_sgemm_tile t;
  int64_t b;          /* the problem packed, -1 before the first */
  bool backward;
  float *qa, *kb, *vb; /* q as A (k = E), k^T as B (k = E), v as B (k = S; the forward's) */
  float *vtb, *goa, *gob, *qb, *kn; /* the backward's: v^T as B, gout as A and as B, q and k as B */
  float *blk;          /* a block of scores packed as A */
} ws_f32;

static int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

/* A panels of an m x k operand, element (r, p) at src[r rs + p cs]: ceil(m / mr) panels of k x mr,
 * zero-padded to whole panels. */
static void pack_a(const ms_k_sgemm_tile *t, int64_t m, int64_t k, const float *src, int64_t rs, int64_t cs,
                   float *d) {
  for (int64_t i = 0; i < m; i += t->mr, d += k * t->mr) {
    int64_t mm = m - i < t->mr ? m - i : t->mr;
    const float *s = src + i * rs;
    if (t->pack_a && t->pack_a(k, mm, s, rs, cs, d)) continue;
    for (int64_t p = 0; p < k; p++)
      for (int r = 0; r < t->mr; r++) d[p * t->mr + r] = r < mm ? s[r * rs + p * cs] : 0.0f;
  }
}

/* B panels of a k x n operand, element (p, j) at src[p rs + j cs]: ceil(n / nr) panels of k x nr. */
static void pack_b(const ms_k_sgemm_tile *t, int64_t k, int64_t n, const float *src, int64_t rs, int64_t cs,
                   float *d) {
  for (int64_t j = 0; j < n; j += t->nr, d += k * t->nr) {
    int64_t nn = n - j < t->nr ? n - j : t->nr;
    const float *s = src + j * cs;
    if (t->pack_b && t->pack_b(k, nn, s, rs, cs, d)) continue;
    for (int64_t p = 0; p < k; p++)
      for (int q = 0; q < t->nr; q++) d[p * t->nr + q] = q < nn ? s[p * rs + q * cs] : 0.0f;
  }
}

/* c (m x n, row stride ldc) = alpha a b + beta c (beta 0: c is not read), a and b packed k deep,
 * sa and sb elements from one micro-panel to the next. Tiles cut by the edges go through a
 * scratch tile. B's panel stays in L1 while the A panels sweep it. */
static void mm_f32(const ms_k_sgemm_tile *t, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                   int64_t sa, const float *b, int64_t sb, float beta, float *c, int64_t ldc) {
  float edge[MS_GEMM_MAX_TILE];
  const float zero = 0.0f;
  for (int64_t j = 0; j < n; j += t->nr) {
    const float *pb = b + j / t->nr * sb;
    int64_t nn = n - j < t->nr ? n - j : t->nr;
    for (int64_t i = 0; i < m; i += t->mr) {
      const float *pa = a + i / t->mr * sa;
      int64_t mm = m - i < t->mr ? m - i : t->mr;
      float *cij = c + i * ldc + j;
      if (mm == t->mr && nn == t->nr) {
        t->ukr(k, &alpha, pa, pb, &beta, cij, ldc, 1);
        continue;
      }
      t->ukr(k, &alpha, pa, pb, &zero, edge, t->nr, 1);
      for (int64_t r = 0; r < mm; r++)
        for (int64_t q = 0; q < nn; q++)
          cij[r * ldc + q] = edge[r * t->nr + q] + (beta == 0.0f ? 0.0f : beta * cij[r * ldc + q]);
    }
  }
}

/* Carves the next buffer of n floats off *at, 64-byte aligned (B panels are loaded aligned). */
static float *carve(float **at, int64_t n) {
  float *p = *at;
  *at += round_up(n, 16);
  return p;
}

static bool ws_init_f32(ws_f32 *w, const attn_ctx *c, bool backward) {
  const ms_k_attn_geom *g = c->g;
  memset(w, 0, sizeof *w);
  w->t = ms_k_sgemm_tile_get(), w->b = -1, w->backward = backward;
  const int64_t mr = w->t.mr, nr = w->t.nr, L = g->L, S = g->S, E = g->E, Ev = g->Ev;
  const int64_t Lm = round_up(L, mr), Sn = round_up(S, nr), En = round_up(E, nr), Evn = round_up(Ev, nr);
  const int64_t fwd = backward ? 0 : 1, bwd = backward ? 1 : 0; /* only the direction's panels */
  int64_t sizes[9] = {Lm * E, Sn * E, fwd * S * Evn, bwd * Sn * Ev, bwd * Lm * Ev, bwd * L * Evn, bwd * L * En,
                      bwd * S * En, round_up(BK, mr) * BQ}, total = 0;
  for (int i = 0; i < 9; i++) total += round_up(sizes[i], 16);
  float *at = ms_k_thread_buffer(MS_K_BUF_ATTN_P, (size_t)total * sizeof(float));
  if (!at) return false;
  float **bufs[9] = {&w->qa, &w->kb, &w->vb, &w->vtb, &w->goa, &w->gob, &w->qb, &w->kn, &w->blk};
  for (int i = 0; i < 9; i++) *bufs[i] = carve(&at, sizes[i]);
  return true;
}

/* Query blocks start on whole micro-panels of the packed q and gout. */
static int64_t row_align_f32(const ws_f32 *w) { return w->t.mr; }

/* Packs problem b's operands, unless they are already. */
static void ws_problem_f32(ws_f32 *w, const attn_ctx *c, int64_t b) {
  if (w->b == b) return;
  w->b = b;
  const ms_k_attn_geom *g = c->g;
  const ms_k_sgemm_tile *t = &w->t;
  const int64_t L = g->L, S = g->S, E = g->E, Ev = g->Ev;
  const int64_t qrs = g->qrs, krs = g->krs, vrs = g->vrs;
  const float *q = (const float *)c->q + attn_batch_offset(g, b, g->qstride),
              *k = (const float *)c->k + attn_batch_offset(g, b, g->kstride),
              *v = (const float *)c->v + attn_batch_offset(g, b, g->vstride);
  pack_a(t, L, E, q, qrs, 1, w->qa);
  pack_b(t, E, S, k, 1, krs, w->kb);
  if (!w->backward) {
    pack_b(t, S, Ev, v, vrs, 1, w->vb);
    return;
  }
  const float *go = (const float *)c->gout + b * L * Ev;
  pack_b(t, Ev, S, v, 1, vrs, w->vtb);
  pack_a(t, L, Ev, go, Ev, 1, w->goa);
  pack_b(t, L, Ev, go, Ev, 1, w->gob);
  pack_b(t, L, E, q, qrs, 1, w->qb);
  pack_b(t, S, E, k, krs, 1, w->kn);
}

/* s (nq x nk, row stride BK) = scale q k^T; i0 is a multiple of BQ, so of mr, and j0 of BK, so of nr */
static void qk_f32(ws_f32 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                   float *s) {
  (void)b;
  const int64_t E = c->g->E;
  mm_f32(&w->t, nq, nk, E, (float)c->g->scale, w->qa + i0 * E, E * w->t.mr, w->kb + j0 * E, E * w->t.nr, 0, s, BK);
}

/* acc (nq x Ev) += s v */
static void pv_f32(ws_f32 *w, const attn_ctx *c, int64_t b, int64_t nq, int64_t j0, int64_t nk, const float *s,
                   float *acc) {
  (void)b;
  const int64_t nr = w->t.nr;
  pack_a(&w->t, nq, nk, s, BK, 1, w->blk);
  mm_f32(&w->t, nq, c->g->Ev, nk, 1, w->blk, nk * w->t.mr, w->vb + j0 * nr, c->g->S * nr, 1, acc, c->g->Ev);
}

/* ds (nq x nk, row stride BK) = gout v^T */
static void ov_f32(ws_f32 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                   float *ds) {
  (void)b;
  const int64_t Ev = c->g->Ev;
  mm_f32(&w->t, nq, nk, Ev, 1, w->goa + i0 * Ev, Ev * w->t.mr, w->vtb + j0 * Ev, Ev * w->t.nr, 0, ds, BK);
}

/* gv (nk x Ev) += pd^T gout */
static void dv_f32(ws_f32 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t nk, const float *pd,
                   float *gv) {
  (void)b;
  const int64_t nr = w->t.nr;
  pack_a(&w->t, nk, nq, pd, 1, BK, w->blk);
  mm_f32(&w->t, nk, c->g->Ev, nq, 1, w->blk, nq * w->t.mr, w->gob + i0 * nr, c->g->L * nr, 1, gv, c->g->Ev);
}

/* gk (nk x E) += scale ds^T q */
static void dk_f32(ws_f32 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t nk, const float *ds,
                   float *gk) {
  (void)b;
  const int64_t nr = w->t.nr;
  pack_a(&w->t, nk, nq, ds, 1, BK, w->blk);
  mm_f32(&w->t, nk, c->g->E, nq, (float)c->g->scale, w->blk, nq * w->t.mr, w->qb + i0 * nr, c->g->L * nr, 1,
         gk, c->g->E);
}

/* gq (nq x E) += scale ds k */
static void dq_f32(ws_f32 *w, const attn_ctx *c, int64_t b, int64_t nq, int64_t j0, int64_t nk, const float *ds,
                   float *gq) {
  (void)b;
  const int64_t nr = w->t.nr;
  pack_a(&w->t, nq, nk, ds, BK, 1, w->blk);
  mm_f32(&w->t, nq, c->g->E, nk, (float)c->g->scale, w->blk, nk * w->t.mr, w->kn + j0 * nr, c->g->S * nr, 1,
         gq, c->g->E);
}
