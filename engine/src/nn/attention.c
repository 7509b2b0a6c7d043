/* attention.c: the native scaled dot product attention (PyTorch's semantics): every argument
 * checked, the problem flattened to (batch x heads, L, E), and one kernel call per direction
 * (kernel_table.h's attention rows) that never holds an L x S matrix. The mask stays as given,
 * read through broadcast strides; dropout's mask is a Philox range, redrawn by the backward. */
#include <math.h>
#include <string.h>

#include "moonshard/checked.h"
#include "native/dispatch.h"
#include "nn/nn_internal.h"
#include "nn/nn_native.h"
#include "random_state.h"

#define OP "scaled_dot_product_attention"

void native_attention_saved_release(native_attention_saved *s) {
  ms_tensor *ts[6] = {s->q, s->k, s->v, s->mask, s->out, s->lse};
  nn_release_all(6, ts);
  memset(s, 0, sizeof *s);
}

/* bfloat16 on a CPU with AVX-512 BF16 (float32 sums over bfloat16 operands,
 * kernels/cpu/attention_bf16.h), and bfloat16 or float16 on CUDA (float32 arithmetic and
 * accumulators, kernels/cuda/attention.cu); a mask, if any, bool or of q's dtype. */
bool native_attention_half(const ms_tensor *q, const ms_tensor *k, const ms_tensor *v, const ms_tensor *mask) {
  if (!ms_dtype_is_half(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype) return false;
  if (mask && mask->dtype != MS_BOOL && mask->dtype != q->dtype) return false;
  if (ms_tensor_device(q).type == MS_CUDA) return true;
  return q->dtype == MS_BFLOAT16 && ms_tensor_device(q).type == MS_CPU && ms_k_gemm_bf16_available();
}

static ms_status check_qkv(ms_tensor *q, ms_tensor *k, ms_tensor *v, const ms_tensor *mask) {
  char a[MS_SHAPE_STR_LEN], b[MS_SHAPE_STR_LEN], c[MS_SHAPE_STR_LEN];
  bool half = native_attention_half(q, k, v, mask);
  if ((half ? nn_check_float_or_half_any : nn_check_float_or_bf16_any)(OP, "query", q) ||
      nn_check_param_any(OP, "key", k, q->dtype, -1) || nn_check_param_any(OP, "value", v, q->dtype, -1) ||
      ms_check_same_device(OP, 3, (ms_tensor *[]){q, k, v}))
    return MS_ERR_ARG;
  if (q->ndim < 2 || k->ndim != q->ndim || v->ndim != q->ndim)
    return ms_error(MS_ERR_ARG, OP ": query, key and value must have the same number of dims, at least 2 "
                    "(..., L, E), got %d, %d and %d", q->ndim, k->ndim, v->ndim);
  int nd = q->ndim;
  for (int d = 0; d < nd - 2; d++)
    if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d])
      return ms_error(MS_ERR_ARG, OP ": key %s and value %s must have the batch dims of query %s (no broadcasting)",
                      ms_shape_str(k->ndim, k->shape, a, sizeof a), ms_shape_str(v->ndim, v->shape, b, sizeof b),
                      ms_shape_str(q->ndim, q->shape, c, sizeof c));
  if (k->shape[nd - 1] != q->shape[nd - 1])
    return ms_error(MS_ERR_ARG, OP ": key's last dim must equal query's (E = %lld), got %lld",
                    (long long)q->shape[nd - 1], (long long)k->shape[nd - 1]);
  if (v->shape[nd - 2] != k->shape[nd - 2])
    return ms_error(MS_ERR_ARG, OP ": value's dim %d must equal key's (S = %lld), got %lld", nd - 1,
                    (long long)k->shape[nd - 2], (long long)v->shape[nd - 2]);
  return MS_OK;
}

/* The mask's strides seen from (batch..., L, S) (0 where it broadcasts) into g. */
static ms_status mask_strides(const ms_tensor *m, const ms_tensor *q, int64_t S, ms_k_attn_geom *g) {
  int nd = q->ndim;
  int64_t target[MS_MAX_DIMS], stride = 1, st[MS_MAX_DIMS];
  memcpy(target, q->shape, sizeof(int64_t) * (size_t)nd);
  target[nd - 1] = S;
  char a[MS_SHAPE_STR_LEN], b[MS_SHAPE_STR_LEN];
  bool fits = m->ndim <= nd;
  for (int d = nd - 1; d >= 0 && fits; d--) {
    int md = d - (nd - m->ndim);
    int64_t size = md < 0 ? 1 : m->shape[md];
    fits = size == target[d] || size == 1;
    st[d] = size == 1 ? 0 : stride;
    stride *= size;
  }
  if (!fits)
    return ms_error(MS_ERR_ARG, OP ": attn_mask of shape %s cannot broadcast to (..., L, S) = %s",
                    ms_shape_str(m->ndim, m->shape, a, sizeof a), ms_shape_str(nd, target, b, sizeof b));
  memcpy(g->mstride, st, sizeof(int64_t) * (size_t)(nd - 2));
  g->msi = st[nd - 2], g->msj = st[nd - 1];
  return MS_OK;
}

static ms_status check_options(const ms_tensor *q, const ms_sdpa_options *o) {
  if (!(o->dropout_p >= 0 && o->dropout_p <= 1))
    return ms_error(MS_ERR_ARG, OP ": dropout_p must be in [0, 1], got %g", o->dropout_p);
  if (o->scale && !isfinite(*o->scale))
    return ms_error(MS_ERR_ARG, OP ": scale must be a finite number, got %g", *o->scale);
  const ms_tensor *m = o->attn_mask;
  if (!m) return MS_OK;
  if (o->is_causal)
    return ms_error(MS_ERR_ARG, OP ": attn_mask must not be given when is_causal is true (as PyTorch)");
  if (m->dtype != MS_BOOL && m->dtype != q->dtype)
    return ms_error(MS_ERR_ARG, OP ": attn_mask must be bool or of query's dtype %s, got %s",
                    ms_dtype_name(q->dtype), ms_dtype_name(m->dtype));
  if (!ms_device_equal(ms_tensor_device(m), ms_tensor_device(q)))
    return ms_error(MS_ERR_ARG, OP ": attn_mask must be on query's device");
  return ms_tensor_check_data_any(OP, m);
}

/* Philox words below this keep an element: ms_k_philox_bernoulli's threshold for 1 - p. */
static uint64_t keep_below(double p) {
  double t = ceil((1 - p) * 0x1p32);
  return !(t > 0) ? 0 : t > 0x1p33 ? (uint64_t)1 << 33 : (uint64_t)t;
}

static ms_status fill_geom(ms_tensor *q, ms_tensor *k, ms_tensor *v, const ms_sdpa_options *o, ms_k_attn_geom *g) {
  int nd = q->ndim;
  memset(g, 0, sizeof *g);
  g->L = q->shape[nd - 2], g->S = k->shape[nd - 2], g->E = q->shape[nd - 1], g->Ev = v->shape[nd - 1];
  g->nbatch = nd - 2;
  memcpy(g->bshape, q->shape, sizeof(int64_t) * (size_t)(nd - 2));
  int64_t nbls;
  if (!ms_numel_i64(nd - 2, q->shape, &g->nb) || !ms_mul_i64(g->nb, g->L, &nbls) || !ms_mul_i64(nbls, g->S, &nbls))
    return ms_error(MS_ERR_ARG, OP ": batch x L x S overflows int64");
  g->scale = o->scale ? *o->scale : 1 / sqrt((double)g->E);
  g->causal = o->is_causal;
  g->mask_kind = !o->attn_mask ? MS_K_ATTN_MASK_NONE
                 : o->attn_mask->dtype == MS_BOOL ? MS_K_ATTN_MASK_BOOL : MS_K_ATTN_MASK_ADD;
  if (o->attn_mask && mask_strides(o->attn_mask, q, g->S, g) != MS_OK) return MS_ERR_ARG;
  g->dropout_p = o->dropout_p;
  if (o->dropout_p > 0) {
    random_reserve(ms_k_philox_blocks(nbls, 4), &g->seed, &g->offset);
    g->keep_below = keep_below(o->dropout_p);
  }
  return MS_OK;
}

/* q, k or v as the kernel reads it: on the CPU the tensor itself when its last dim is contiguous
 * (the GPT's heads are transposed views of one (B, T, 3C) tensor: reading them through strides
 * saves copying them), else a contiguous copy; its batch strides and row stride into st and rs. */
static ms_tensor *kernel_operand(ms_tensor *t, int64_t st[MS_K_MAX_DIMS], int64_t *rs) {
  int nd = t->ndim;
  bool as_is = ms_tensor_device(t).type == MS_CPU && (t->strides[nd - 1] == 1 || t->shape[nd - 1] == 1);
  ms_tensor *u = as_is ? (ms_tensor_retain(t), t) : nn_contiguous(t, t->dtype);
  if (!u) return NULL;
  memcpy(st, u->strides, sizeof(int64_t) * (size_t)(nd - 2));
  *rs = u->strides[nd - 2];
  return u;
}

/* The rows' logsumexp (and the backward's delta): float32 for 16-bit inputs, whose kernels sum in
 * float32 (kernel_table.h), else the inputs' dtype. */
static ms_dtype lse_dtype(ms_dtype dt) { return nn_stat_dtype(dt); }

ms_tensor *native_attention(ms_tensor *q, ms_tensor *k, ms_tensor *v, const ms_sdpa_options *o,
                            native_attention_saved *s) {
  memset(s, 0, sizeof *s);
  if (!q || !k || !v) return ms_error(MS_ERR_ARG, OP ": query, key and value are required"), NULL;
  if (check_qkv(q, k, v, o->attn_mask) || check_options(q, o) || fill_geom(q, k, v, o, &s->g)) return NULL;
  ms_k_attn_geom *g = &s->g;
  int64_t shape[MS_MAX_DIMS];
  memcpy(shape, q->shape, sizeof(int64_t) * (size_t)q->ndim);
  shape[q->ndim - 1] = g->Ev;
  ms_device dev = ms_tensor_device(q);
  s->q = kernel_operand(q, g->qstride, &g->qrs), s->k = kernel_operand(k, g->kstride, &g->krs);
  s->v = kernel_operand(v, g->vstride, &g->vrs);
  s->mask = o->attn_mask ? nn_contiguous(o->attn_mask, o->attn_mask->dtype) : NULL;
  s->out = ms_tensor_new_empty_on(dev, q->ndim, shape, q->dtype);
  int64_t rows = g->nb * g->L;
  s->lse = ms_tensor_new_empty_on(dev, 1, &rows, lse_dtype(q->dtype));
  native_kernels nk;
  if (!s->q || !s->k || !s->v || (o->attn_mask && !s->mask) || !s->out || !s->lse ||
      native_kernels_for(OP, dev, &nk) != MS_OK ||
      native_kernel_status(&nk, nk.k->attention(&nk.x, nn_kdtype(q->dtype), g, ms_tensor_data(s->q),
                                                ms_tensor_data(s->k), ms_tensor_data(s->v),
                                                s->mask ? ms_tensor_data(s->mask) : NULL,
                                                ms_tensor_data(s->out), ms_tensor_data(s->lse))) != MS_OK) {
    native_attention_saved_release(s);
    return NULL;
  }
  ms_tensor_retain(s->out);
  return s->out;
}

ms_status native_attention_backward(const native_attention_saved *s, ms_tensor *grad_output, ms_tensor *grads[3]) {
  grads[0] = grads[1] = grads[2] = NULL;
  const ms_k_attn_geom *g = &s->g;
  ms_device dev = ms_tensor_device(s->q);
  ms_dtype dt = s->q->dtype;
  int64_t rows = g->nb * g->L;
  ms_tensor *go = nn_contiguous(grad_output, dt), *delta = ms_tensor_new_empty_on(dev, 1, &rows, s->lse->dtype);
  ms_tensor *gq = ms_tensor_new_empty_on(dev, s->q->ndim, s->q->shape, dt);
  ms_tensor *gk = ms_tensor_new_empty_on(dev, s->k->ndim, s->k->shape, dt);
  ms_tensor *gv = ms_tensor_new_empty_on(dev, s->v->ndim, s->v->shape, dt);
  native_kernels nk;
  ms_status st = !go || !delta || !gq || !gk || !gv ? MS_ERR_MEMORY
                 : native_kernels_for(OP, dev, &nk) != MS_OK
                     ? MS_ERR_RUNTIME
                     : native_kernel_status(
                           &nk, nk.k->attention_backward(&nk.x, nn_kdtype(dt), g, ms_tensor_data(s->q),
                                                         ms_tensor_data(s->k), ms_tensor_data(s->v),
                                                         s->mask ? ms_tensor_data(s->mask) : NULL,
                                                         ms_tensor_data(s->out), ms_tensor_data(s->lse),
                                                         ms_tensor_data(go), ms_tensor_data(delta),
                                                         ms_tensor_data(gq), ms_tensor_data(gk),
                                                         ms_tensor_data(gv)));
  ms_tensor_release(go), ms_tensor_release(delta);
  if (st != MS_OK) {
    ms_tensor_release(gq), ms_tensor_release(gk), ms_tensor_release(gv);
    return st;
  }
  grads[0] = gq, grads[1] = gk, grads[2] = gv;
  return MS_OK;
}
