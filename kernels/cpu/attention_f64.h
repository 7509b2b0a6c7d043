/* attention_f64.h: private to attention.c. The block products of attention_body.h for double,
 * each a call of the GEMM driver on the operands where they lie (double is the reference path of
 * gradcheck and the PyTorch comparisons, not a training dtype: simplicity over speed). */

typedef struct {
  int unused;
} ws_f64;

static bool ws_init_f64(ws_f64 *w, const attn_ctx *c, bool backward) {
  (void)w, (void)c, (void)backward;
  return true;
}

/* Query blocks may start on any row: the GEMM reads the operands where they lie. */
static int64_t row_align_f64(const ws_f64 *w) {
  (void)w;
  return 1;
}

static void ws_problem_f64(ws_f64 *w, const attn_ctx *c, int64_t b) { (void)w, (void)c, (void)b; }

#define ATTN_Q(c, b, i0) ((const double *)(c)->q + attn_batch_offset((c)->g, b, (c)->g->qstride) + (i0) * (c)->g->qrs)
#define ATTN_K(c, b, j0) ((const double *)(c)->k + attn_batch_offset((c)->g, b, (c)->g->kstride) + (j0) * (c)->g->krs)
#define ATTN_V(c, b, j0) ((const double *)(c)->v + attn_batch_offset((c)->g, b, (c)->g->vstride) + (j0) * (c)->g->vrs)
#define ATTN_GO(c, b, i0) ((const double *)(c)->gout + ((b) * (c)->g->L + (i0)) * (c)->g->Ev)

/* s (nq x nk, row stride BK) = scale q k^T */
static void qk_f64(ws_f64 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                   double *s) {
  (void)w;
  const int64_t E = c->g->E;
  ms_k_dgemm(nq, nk, E, c->g->scale, ATTN_Q(c, b, i0), c->g->qrs, 1, ATTN_K(c, b, j0), 1, c->g->krs, 0, s, BK, 1);
}

/* acc (nq x Ev) += s v */
static void pv_f64(ws_f64 *w, const attn_ctx *c, int64_t b, int64_t nq, int64_t j0, int64_t nk, const double *s,
                   double *acc) {
  (void)w;
  const int64_t Ev = c->g->Ev;
  ms_k_dgemm(nq, Ev, nk, 1, s, BK, 1, ATTN_V(c, b, j0), c->g->vrs, 1, 1, acc, Ev, 1);
}

/* ds (nq x nk, row stride BK) = gout v^T */
static void ov_f64(ws_f64 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                   double *ds) {
  (void)w;
  const int64_t Ev = c->g->Ev;
  ms_k_dgemm(nq, nk, Ev, 1, ATTN_GO(c, b, i0), Ev, 1, ATTN_V(c, b, j0), 1, c->g->vrs, 0, ds, BK, 1);
}

/* gv (nk x Ev) += pd^T gout */
static void dv_f64(ws_f64 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t nk, const double *pd,
                   double *gv) {
  (void)w;
  const int64_t Ev = c->g->Ev;
  ms_k_dgemm(nk, Ev, nq, 1, pd, 1, BK, ATTN_GO(c, b, i0), Ev, 1, 1, gv, Ev, 1);
}

/* gk (nk x E) += scale ds^T q */
static void dk_f64(ws_f64 *w, const attn_ctx *c, int64_t b, int64_t i0, int64_t nq, int64_t nk, const double *ds,
                   double *gk) {
  (void)w;
  const int64_t E = c->g->E;
  ms_k_dgemm(nk, E, nq, c->g->scale, ds, 1, BK, ATTN_Q(c, b, i0), c->g->qrs, 1, 1, gk, E, 1);
}

/* gq (nq x E) += scale ds k */
static void dq_f64(ws_f64 *w, const attn_ctx *c, int64_t b, int64_t nq, int64_t j0, int64_t nk, const double *ds,
                   double *gq) {
  (void)w;
  const int64_t E = c->g->E;
  ms_k_dgemm(nq, E, nk, c->g->scale, ds, BK, 1, ATTN_K(c, b, j0), c->g->krs, 1, 1, gq, E, 1);
}
