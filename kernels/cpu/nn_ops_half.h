/* nn_ops_half.h: private to kernels/cpu/nn_ops.c, included once after the float32 bodies.
 * bfloat16 and float16 for softmax, the activations, embedding and layer norm: each range widens its rows (or
 * blocks) of 16-bit data into float32 work buffers, runs the float32 body on them and rounds each
 * result once. That is PyTorch's rule (float32 arithmetic, the output in the input's dtype) and
 * the values a widened float32 op would give, without a float32 copy of the tensor: the engine
 * would otherwise write and read twice the bytes and allocate a tensor per op. Layer norm's
 * weight, bias, statistics and parameter gradients stay float32 (the engine converts the small
 * parameter vectors). bfloat16 layer norm (AVX2 or AVX-512) and GELU(tanh) and SiLU (AVX-512)
 * skip the buffers: their vector loops load bfloat16 and round in registers, to the same values. */

static int is_half(ms_k_dtype dt) { return dt == MS_K_BF16 || dt == MS_K_F16; }

static void widen(ms_k_dtype dt, int64_t n, float *dst, const void *src, int64_t at) {
  ms_k_cast(n, dst, MS_K_F32, 1, (const uint16_t *)src + at, dt, 1);
}

static void narrow(ms_k_dtype dt, int64_t n, void *dst, int64_t at, const float *src) {
  ms_k_cast(n, (uint16_t *)dst + at, dt, 1, src, MS_K_F32, 1);
}

static void run_half(nn_range_fn fn, int64_t n, int64_t per_item, const nn_job *j) {
  nn_task t = {j, fn};
  ms_k_parallel_for(n, grain_for(per_item), run_range, &t);
}

/* n floats from the heap; NULL (and the job marked failed) when there are none. */
static float *work_buffer(const nn_job *j, int64_t n) {
  float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  if (!p) atomic_store(j->failed, 1);
  return p;
}

/* Elementwise: blocks on the stack, small enough for any thread's stack. */
enum { HALF_BLOCK = 512 };

/* bfloat16 loaded and rounded in registers (activation_f32.h), where the CPU and the activation
 * have that loop: false otherwise. */
static bool activation_bf16_fast(const nn_job *j, int64_t begin, int64_t end) {
  if (j->dt != MS_K_BF16) return false;
  const uint16_t *x = (const uint16_t *)j->a + begin;
  uint16_t *y = (uint16_t *)j->out + begin;
  ms_k_act act = (ms_k_act)j->flag;
  if (!j->backward) return ms_k_activation_bf16_fast(act, x, y, end - begin);
  return ms_k_activation_backward_bf16_fast(act, x, (const uint16_t *)j->b + begin, y, end - begin);
}

static void activation_range_half(const nn_job *j, int64_t begin, int64_t end) {
  if (activation_bf16_fast(j, begin, end)) return;
  float xb[HALF_BLOCK], gb[HALF_BLOCK], yb[HALF_BLOCK];
  for (int64_t i = begin; i < end; i += HALF_BLOCK) {
    int64_t len = end - i < HALF_BLOCK ? end - i : HALF_BLOCK;
    widen(j->dt, len, xb, j->a, i);
    nn_job block = {.a = xb, .b = gb, .out = yb, .flag = j->flag};
    if (j->backward) {
      widen(j->dt, len, gb, j->b, i);
      activation_backward_range_f32(&block, 0, len);
    } else {
      activation_range_f32(&block, 0, len);
    }
    narrow(j->dt, len, j->out, i, yb);
  }
}

/* Softmax rows of C elements `inner` apart, gathered into contiguous float32 rows. The backward
 * reads the forward's 16-bit output, as PyTorch's does. */
static void softmax_rows_half(const nn_job *j, int64_t begin, int64_t end) {
  float *buf = work_buffer(j, 3 * j->C);
  if (!buf) return;
  float *ab = buf, *gb = buf + j->C, *ob = buf + 2 * j->C;
  for (int64_t r = begin; r < end; r++) {
    int64_t base = (r / j->inner) * j->C * j->inner + r % j->inner;
    ms_k_cast(j->C, ab, MS_K_F32, 1, (const uint16_t *)j->a + base, j->dt, j->inner);
    if (j->backward) {
      ms_k_cast(j->C, gb, MS_K_F32, 1, (const uint16_t *)j->b + base, j->dt, j->inner);
      softmax_backward_row_f32(j->C, ab, gb, 1, ob, j->flag);
    } else {
      softmax_row_f32(j->C, ab, 1, ob, j->flag);
    }
    ms_k_cast(j->C, (uint16_t *)j->out + base, j->dt, j->inner, ob, MS_K_F32, 1);
  }
  free(buf);
}

/* bfloat16 rows go to the vector rows (layer_norm_fast.h), which load and round in registers;
 * float16 (or no vector ISA): rows of C, x widened, the float32 row body run on it with row r's
 * statistics. */
static void layer_norm_rows_half(const nn_job *j, int64_t begin, int64_t end) {
  if (j->dt == MS_K_BF16 && ln_fast_rows(j, begin, end, true)) return;
  float *buf = work_buffer(j, 2 * j->C);
  if (!buf) return;
  float *xb = buf, *yb = buf + j->C;
  for (int64_t r = begin; r < end; r++) {
    widen(j->dt, j->C, xb, j->a, r * j->C);
    nn_job row = {.C = j->C, .a = xb, .weight = j->weight, .b = j->b, .s0 = j->s0, .out = yb,
                  .out2 = (float *)j->out2 + r, .out3 = (float *)j->out3 + r};
    layer_norm_rows_f32(&row, 0, 1);
    narrow(j->dt, j->C, j->out, r * j->C, yb);
  }
  free(buf);
}

static void layer_norm_backward_rows_half(const nn_job *j, int64_t begin, int64_t end) {
  if (j->dt == MS_K_BF16 && ln_fast_backward_rows(j, begin, end, true)) return;
  float *buf = work_buffer(j, 3 * j->C);
  if (!buf) return;
  float *xb = buf, *gb = buf + j->C, *gxb = buf + 2 * j->C;
  for (int64_t r = begin; r < end; r++) {
    widen(j->dt, j->C, xb, j->a, r * j->C);
    widen(j->dt, j->C, gb, j->b, r * j->C);
    nn_job row = {.C = j->C, .a = xb, .b = gb, .weight = j->weight, .out = gxb,
                  .stat0 = (const float *)j->stat0 + r, .stat1 = (const float *)j->stat1 + r};
    layer_norm_backward_rows_f32(&row, 0, 1);
    narrow(j->dt, j->C, j->out, r * j->C, gxb);
  }
  free(buf);
}

/* Columns [begin, end) of gw and gb: each row's slice widened, sums in double as the float32
 * body's, in the same order (row by row), so the results are those of the float32 body. */
static void layer_norm_param_cols_half(const nn_job *j, int64_t begin, int64_t end) {
  if (j->dt == MS_K_BF16 && ln_fast_param_cols(j, begin, end, true)) return;
  int64_t n = end - begin;
  float *buf = work_buffer(j, 2 * n);
  double *sums = buf ? calloc((size_t)(2 * n), sizeof(double)) : NULL;
  if (!sums) {
    if (buf) atomic_store(j->failed, 1);
    free(buf);
    return;
  }
  float *xb = buf, *gb = buf + n;
  const float *mean = j->stat0, *rstd = j->stat1;
  for (int64_t r = 0; r < j->N; r++) {
    widen(j->dt, n, xb, j->a, r * j->C + begin);
    widen(j->dt, n, gb, j->b, r * j->C + begin);
    for (int64_t c = 0; c < n; c++)
      sums[c] += (double)gb[c] * (xb[c] - mean[r]) * rstd[r], sums[n + c] += gb[c];
  }
  float *gw = j->out2, *gbias = j->out3;
  for (int64_t c = 0; c < n; c++) {
    if (gw) gw[begin + c] = (float)sums[c];
    if (gbias) gbias[begin + c] = (float)sums[n + c];
  }
  free(sums), free(buf);
}

/* Embedding: the gather copies 16-bit rows as they are; the backward widens each gradient row's
 * slice and sums into a float32 gw, rounded by the engine once at the end. */
static void embedding_rows_half(const nn_job *j, int64_t begin, int64_t end) {
  const uint16_t *w = j->a;
  uint16_t *out = j->out;
  for (int64_t r = begin; r < end; r++)
    memcpy(out + r * j->C, w + (j->target[r] - j->base) * j->C, (size_t)j->C * sizeof *w);
}

static void embedding_backward_cols_half(const nn_job *j, int64_t begin, int64_t end) {
  float gb[HALF_BLOCK], *gw = j->out;
  for (int64_t d0 = begin; d0 < end; d0 += HALF_BLOCK) {
    int64_t len = end - d0 < HALF_BLOCK ? end - d0 : HALF_BLOCK;
    for (int64_t r = 0; r < j->N; r++) {
      int64_t k = j->target[r] - j->base;
      if (k == j->ignore_index) continue; /* the padding row gets no gradient */
      widen(j->dt, len, gb, j->b, r * j->C + d0);
      for (int64_t d = 0; d < len; d++) gw[k * j->C + d0 + d] += gb[d];
    }
  }
}
