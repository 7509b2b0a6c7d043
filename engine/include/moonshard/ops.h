/* ops.h: math on tensors. Binary ops broadcast as NumPy/PyTorch do and promote dtypes with
 * ms_dtype_promote. Each returns a new reference (NULL with an error); the in-place forms
 * (`_` suffix) write into their first argument, which must be able to hold the result dtype
 * and shape, and return a status. */
#ifndef MOONSHARD_OPS_H
#define MOONSHARD_OPS_H

#include "moonshard/export.h"
#include "moonshard/op_types.h"
#include "moonshard/tensor.h"

/* ---- elementwise (the ops of MS_BINARY_OP_LIST and MS_UNARY_OP_LIST, moonshard/op_types.h) - */
/* a op b with broadcasting and type promotion (either may be a scalar); new reference. */
MS_API ms_tensor *ms_binary(ms_binary_op op, ms_operand a, ms_operand b);
MS_API ms_status ms_binary_(ms_binary_op op, ms_tensor *a, ms_operand b); /* a = a op b */
/* op applied to each element of a; new reference. */
MS_API ms_tensor *ms_unary(ms_unary_op op, ms_tensor *a);
/* a = op(a), in place. */
MS_API ms_status ms_unary_(ms_unary_op op, ms_tensor *a);
MS_API ms_tensor *ms_clamp(ms_tensor *a, const double *min, const double *max); /* either may be NULL */
/* ms_clamp in place. */
MS_API ms_status ms_clamp_(ms_tensor *a, const double *min, const double *max);
/* cond ? a : b, broadcasting all three; cond must be bool. */
MS_API ms_tensor *ms_where(ms_tensor *cond, ms_operand a, ms_operand b);
MS_API ms_tensor *ms_masked_fill(ms_tensor *a, ms_tensor *mask, double value);
MS_API ms_status ms_masked_fill_(ms_tensor *a, ms_tensor *mask, double value);

/* ---- reductions (the ops of MS_REDUCE_OP_LIST, moonshard/op_types.h) ----------------------- */
/* The reduction op of a over opts.dim, or over everything with opts.all (ms_reduce_opts). */
MS_API ms_tensor *ms_reduce(ms_reduce_op op, ms_tensor *a, ms_reduce_opts opts);
/* max/min over a dim return values and 0-based indices (int64) together. */
MS_API ms_status ms_reduce_with_indices(ms_reduce_op op, ms_tensor *a, int dim, bool keepdim,
                                        ms_tensor **values, ms_tensor **indices);

/* ---- selection along a dim, sorting, running sums (PyTorch's gather, scatter, sort, topk,
 * cumsum) ------------------------------------------------------------------------------------
 * dim is 0-based (negative counts from the end). An index tensor is int64 with as many dims as
 * t; its values are positions along dim counted from index_base (C callers pass 0; the Lua face
 * passes 1 and its messages then count dims from 1 too). */

/* out[c] = t[c with dim replaced by index[c]]; out has index's shape, which may be no larger
 * than t's except along dim. */
MS_API ms_tensor *ms_gather(ms_tensor *t, int dim, ms_tensor *index, int64_t index_base);
/* A copy of t with out[c with dim replaced by index[c]] = src[c] (COPY; a position repeated
 * along dim keeps the last write) or += src[c] (ADD), for every c of index. src is a tensor of
 * t's dtype, no smaller than index in any dim, or (COPY only) a number. */
MS_API ms_tensor *ms_scatter(ms_tensor *t, int dim, ms_tensor *index, ms_operand src, ms_scatter_mode mode,
                             int64_t index_base);
MS_API ms_status ms_scatter_(ms_tensor *t, int dim, ms_tensor *index, ms_operand src, ms_scatter_mode mode,
                             int64_t index_base);
/* Sorts along dim, always stably (stable only names the node as PyTorch does); NaN sorts above
 * every number. indices: int64, 0-based positions along dim. */
MS_API ms_status ms_sort(ms_tensor *t, int dim, bool descending, bool stable, ms_tensor **values,
                         ms_tensor **indices);
/* The k largest (smallest) elements along dim, in order (the first of equal ones first). */
MS_API ms_status ms_topk(ms_tensor *t, int64_t k, int dim, bool largest, ms_tensor **values,
                         ms_tensor **indices);
/* Running sum (product) along dim; integer and bool inputs give int64. */
MS_API ms_tensor *ms_scan(ms_scan_op op, ms_tensor *t, int dim);

/* ---- triangles (PyTorch's tril, triu) -------------------------------------------------------
 * The last two dims of t (at least 2, any dtype) as matrices: tril keeps element (i, j) where
 * j - i <= diagonal, triu where j - i >= diagonal (0: the main diagonal, positive above, negative
 * below); the others become 0. */
MS_API ms_tensor *ms_triangle(ms_triangle_op op, ms_tensor *t, int64_t diagonal);
MS_API ms_status ms_triangle_(ms_triangle_op op, ms_tensor *t, int64_t diagonal);

/* ---- comparison of whole tensors ------------------------------------------------------------ */
MS_API bool ms_equal(ms_tensor *a, ms_tensor *b); /* same shape and values */
/* *out = every |a - b| <= atol + rtol * |b| (shapes broadcast), as torch.allclose. */
MS_API ms_status ms_allclose(ms_tensor *a, ms_tensor *b, double rtol, double atol, bool *out);

/* ---- matrix products (float32 and float64 through the packed GEMM) --------------------------- */
MS_API ms_tensor *ms_mm(ms_tensor *a, ms_tensor *b);        /* (n,k) x (k,m) */
MS_API ms_tensor *ms_bmm(ms_tensor *a, ms_tensor *b);       /* (b,n,k) x (b,k,m) */
MS_API ms_tensor *ms_matmul(ms_tensor *a, ms_tensor *b);    /* PyTorch's matmul: 1-D, 2-D, batched */
/* beta * c + alpha * (a @ b) */
MS_API ms_tensor *ms_addmm(ms_tensor *c, ms_tensor *a, ms_tensor *b, double beta, double alpha);

#endif
