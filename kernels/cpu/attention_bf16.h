/* attention_bf16.h: private to attention.c. The block products of attention_body.h for bfloat16
 * q, k, v and gout, on the AVX-512 BF16 micro-kernel (gemm_ukr.h: float sums of bf16 pairs),
 * called only where ms_k_gemm_bf16_available(). As FlashAttention does in 16 bits, the scores'
 * softmax, the logsumexp and every sum stay float; a block of weights P or of dS is rounded to
 * bfloat16 only as the operand of its products. Problems are packed once, as attention_f32.h
 * does: K in pairs (gemm_ukr.h's layout), zero-padded past an odd K. */

enum { B_MR = MS_BGEMM_AVX512_MR, B_NR = MS_BGEMM_AVX512_NR };

typedef struct {
  int64_t b;
  bool backward;
  uint16_t *qa, *kb, *vb, *vtb, *goa, *gob, *qb, *kn; /* as in ws_f32 */
  uint16_t *blk16, *blk; /* a block of scores rounded to bf16 (row stride BK), and packed as A */
  const float *rounded;  /* the block blk16 holds (dS serves two products), NULL after a new one */
} ws_bf16;

/* k rounded up to whole pairs: the packed panels' depth */
static int64_t pairs2(int64_t k) { return (k + 1) / 2 * 2; }

static float bf16_load(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* n floats rounded to bfloat16 (ms_k_f32_to_bf16's rounding) */
static void store_row_bf16(uint16_t *dst, const float *src, int64_t n) {
  ms_k_f32_to_bf16_block(1, n, dst, n, 1, src, n);
}

/* A panels (B_MR rows, k in pairs) of an m x k operand at src[r rs + p cs]; the packers have a
 * path for every stride here (one of rs, cs is 1). */
static void bpack_a(int64_t m, int64_t k, const uint16_t *src, int64_t rs, int64_t cs, uint16_t *d) {
  for (int64_t i = 0; i < m; i += B_MR, d += pairs2(k) * B_MR)
    ms_k_bpack_a_avx512(k, m - i < B_MR ? m - i : B_MR, src + i * rs, rs, cs, d);
}

/* B panels (B_NR columns, k in pairs) of a k x n operand at src[p rs + j cs] */
static void bpack_b(int64_t k, int64_t n, const uint16_t *src, int64_t rs, int64_t cs, uint16_t *d) {
  for (int64_t j = 0; j < n; j += B_NR, d += pairs2(k) * B_NR)
    ms_k_bpack_b_avx512(k, n - j < B_NR ? n - j : B_NR, src + j * cs, rs, cs, d);
}

/* c (m x n floats, row stride ldc) = alpha a b + beta c from packed bf16 panels, as mm_f32 */
static void mm_bf16(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t *a, int64_t sa, const uint16_t *b,
                    int64_t sb, float beta, float *c, int64_t ldc) {
  float edge[B_MR * B_NR];
  const float zero = 0.0f;
  for (int64_t j = 0; j < n; j += B_NR) {
    const uint16_t *pb = b + j / B_NR * sb;
    int64_t nn = n - j < B_NR ? n - j : B_NR;
    for (int64_t i = 0; i < m; i += B_MR) {
      const uint16_t *pa = a + i / B_MR * sa;
      int64_t mm = m - i < B_MR ? m - i : B_MR;
      float *cij = c + i * ldc + j;
      if (mm == B_MR && nn == B_NR) {
        ms_k_bgemm_ukr_avx512(pairs2(k) / 2, &alpha, pa, pb, &beta, cij, ldc, 1);
        continue;
      }
      ms_k_bgemm_ukr_avx512(pairs2(k) / 2, &alpha, pa, pb, &zero, edge, B_NR, 1);
      for (int64_t r = 0; r < mm; r++)
        for (int64_t q = 0; q < nn; q++)
          cij[r * ldc + q] = edge[r * B_NR + q] + (beta == 0.0f ? 0.0f : beta * cij[r * ldc + q]);
    }
  }
}

static uint16_t *carve16(uint16_t **at, int64_t n) {
  uint16_t *p = *at;
  *at += round_up(n, 32);
  return p;
}

static bool ws_init_bf16(ws_bf16 *w, const attn_ctx *c, bool backward) {
  const ms_k_attn_geom *g = c->g;
  memset(w, 0, sizeof *w);
  w->b = -1, w->backward = backward;
  const int64_t L = g->L, S = g->S, E2 = pairs2(g->E), Ev2 = pairs2(g->Ev), L2 = pairs2(L), S2 = pairs2(S);
  const int64_t Lm = round_up(L, B_MR), Sn = round_up(S, B_NR), En = round_up(g->E, B_NR),
                Evn = round_up(g->Ev, B_NR);
  const int64_t fwd = backward ? 0 : 1, bwd = backward ? 1 : 0; /* only the direction's panels */
  int64_t sizes[10] = {Lm * E2, Sn * E2, fwd * S2 * Evn, bwd * Sn * Ev2, bwd * Lm * Ev2, bwd * L2 * Evn, bwd * L2 * En,
                       bwd * S2 * En, BQ * BK, round_up(BK, B_MR) * BQ}, total = 0;
  for (int i = 0; i < 10; i++) total += round_up(sizes[i], 32);
  uint16_t *at = ms_k_thread_buffer(MS_K_BUF_ATTN_P, (size_t)total * sizeof(uint16_t));
  if (!at) return false;
  uint16_t **bufs[10] = {&w->qa, &w->kb, &w->vb, &w->vtb, &w->goa, &w->gob, &w->qb, &w->kn, &w->blk16, &w->blk};
  for (int i = 0; i < 10; i++) *bufs[i] = carve16(&at, sizes[i]);
  return true;
}

static int64_t row_align_bf16(const ws_bf16 *w) {
  (void)w;
  return B_MR;
}

static void ws_problem_bf16(ws_bf16 *w, const attn_ctx *c, int64_t b) {
  if (w->b == b) return;
  w->b = b;
  const ms_k_attn_geom *g = c->g;
  const int64_t L = g->L, S = g->S, E = g->E, Ev = g->Ev;
  const int64_t qrs = g->qrs, krs = g->krs, vrs = g->vrs;
  const uint16_t *q = (const uint16_t *)c->q + attn_batch_offset(g, b, g->qstride),
                 *k = (const uint16_t *)c->k + attn_batch_offset(g, b, g->kstride),
                 *v = (const uint16_t *)c->v + attn_batch_offset(g, b, g->vstride);
  bpack_a(L, E, q, qrs, 1, w->qa);
  bpack_b(E, S, k, 1, krs, w->kb);
  if (!w->backward) {
    bpack_b(S, Ev, v, vrs, 1, w->vb);
    return;
  }
  const uint16_t *go = (const uint16_t *)c->gout + b * L * Ev;
  bpack_b(Ev, S, v, 1, vrs, w->vtb);
  bpack_a(L, Ev, go, Ev, 1, w->goa);
  bpack_b(L, Ev, go, Ev, 1, w->gob);
  bpack_b(L, E, q, qrs, 1, w->qb);
  bpack_b(S, E, k, krs, 1, w->kn);
}

/* The block's first nq rows of nk scores (row stride BK) rounded to bf16 into blk16, unless it
 * holds them already. */
static const uint16_t *round_block(ws_bf16 *w, int64_t nq, int64_t nk, const float *s) {
  if (w->rounded != s) ms_k_attention_round_bf16(nq, nk, s, BK, w->blk16, BK);
  w->rounded = s;
  return w->blk16;
}

/* Offsets: i0 (a multiple of B_MR) and j0 (of BK, so of B_NR) start whole micro-panels; as K
 * offsets (both even) they start whole pairs. */
static void qk_bf16(ws_bf16 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                    float *s) {
  (void)b;
  const int64_t E2 = pairs2(c->g->E);
  w->rounded = NULL; /* every block starts here: its weights are new */
  mm_bf16(nq, nk, c->g->E, (float)c->g->scale, w->qa + i0 * E2, E2 * B_MR, w->kb + j0 * E2, E2 * B_NR, 0, s, BK);
}

static void pv_bf16(ws_bf16 *w, const attn_ctx *c, int64_t b, int64_t nq, int64_t j0, int64_t nk, const float *s,
                    float *acc) {
  (void)b;
  bpack_a(nq, nk, round_block(w, nq, nk, s), BK, 1, w->blk);
  mm_bf16(nq, c->g->Ev, nk, 1, w->blk, pairs2(nk) * B_MR, w->vb + j0 * B_NR, pairs2(c->g->S) * B_NR, 1, acc,
          c->g->Ev);
}

static void ov_bf16(ws_bf16 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                    float *ds) {
  (void)b;
  const int64_t Ev2 = pairs2(c->g->Ev);
  mm_bf16(nq, nk, c->g->Ev, 1, w->goa + i0 * Ev2, Ev2 * B_MR, w->vtb + j0 * Ev2, Ev2 * B_NR, 0, ds, BK);
}

static void dv_bf16(ws_bf16 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t nk, const float *pd,
                    float *gv) {
  (void)b;
  bpack_a(nk, nq, round_block(w, nq, nk, pd), 1, BK, w->blk);
  mm_bf16(nk, c->g->Ev, nq, 1, w->blk, pairs2(nq) * B_MR, w->gob + i0 * B_NR, pairs2(c->g->L) * B_NR, 1, gv,
          c->g->Ev);
}

static void dk_bf16(ws_bf16 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t nk, const float *ds,
                    float *gk) {
  (void)b;
  bpack_a(nk, nq, round_block(w, nq, nk, ds), 1, BK, w->blk);
  mm_bf16(nk, c->g->E, nq, (float)c->g->scale, w->blk, pairs2(nq) * B_MR, w->qb + i0 * B_NR,
          pairs2(c->g->L) * B_NR, 1, gk, c->g->E);
}

static void dq_bf16(ws_bf16 *w, const attn_ctx *c, int64_t b, int64_t nq, int64_t j0, int64_t nk, const float *ds,
                    float *gq) {
  (void)b;
  bpack_a(nq, nk, round_block(w, nq, nk, ds), BK, 1, w->blk);
  mm_bf16(nq, c->g->E, nk, (float)c->g->scale, w->blk, pairs2(nk) * B_MR, w->kn + j0 * B_NR,
          pairs2(c->g->S) * B_NR, 1, gq, c->g->E);
}
