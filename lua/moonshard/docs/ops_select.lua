-- docs/ops_select.lua: docstrings of the selection, sorting and running-sum ops (gather, scatter,
-- scatter_add, sort, argsort, topk, cumsum, cumprod, tril, triu, any, all), per the docstring contract
-- (lua/moonshard/doc.lua reads them for help(); scripts/gen_api_docs.lua writes the reference).
return {
  title = "Tensors: gather, scatter, sort, topk, cumulative sums, triangles",

  { name = "Tensor:gather", also = {"ms.gather"},
    sig = "Tensor:gather(dim, index) -> Tensor",
    doc = [=[Picks elements along `dim` by position: `out[i][j] = x[index[i][j]][j]` for dim 1,
`out[i][j] = x[i][index[i][j]]` for dim 2, and so on. `index` is an int64 tensor of 1-based
positions with as many dims as `x`; the result has `index`'s shape, which may be larger than
`x`'s along `dim` only. Differentiable: the gradient is added back into the positions read (a
position read twice gets both). PyTorch's `torch.gather`, with 1-based positions and dims.]=],
    example = [=[
local x = ms.tensor({{10, 20, 30}, {40, 50, 60}})
print(x:gather(2, ms.tensor({{3, 1}, {2, 2}})):tolist()[1][1])   --> 30
local picked = ms.gather(x, 1, ms.tensor({{2, 1, 2}}))
print(picked:tolist()[1][3])                                       --> 60
]=] },

  { name = "Tensor:scatter", also = {"ms.scatter"},
    sig = "Tensor:scatter(dim, index, src) -> Tensor",
    doc = [=[A copy of `x` with the elements of `src` written at the positions `index` gives along
`dim` (the inverse of `gather`): for dim 2, `out[i][index[i][j]] = src[i][j]`. `src` is a tensor
of `x`'s dtype, no smaller than `index` in any dim, or a number written at every position.
`index` holds 1-based int64 positions; where a position repeats along `dim` the last write wins
(PyTorch leaves that order unspecified). Differentiable in `x` (positions written get no gradient)
and `src` (the gradient gathered at `index`). PyTorch's `Tensor.scatter`.]=],
    example = [=[
local x = ms.zeros(2, 4)
local y = x:scatter(2, ms.tensor({{4, 1}, {2, 3}}), ms.tensor({{1.0, 2.0}, {3.0, 4.0}}))
print(y:tolist()[1][4], y:tolist()[2][3])   --> 1.0	4.0
print(x:scatter(1, ms.tensor({{2, 2, 1, 1}}), 7):sum():item())   --> 28.0
]=] },

  { name = "Tensor:scatter_", also = {"ms.scatter_"},
    sig = "Tensor:scatter_(dim, index, src) -> Tensor (self)",
    doc = [=[`scatter` in place: writes `src` (a tensor or a number) into `x` at the 1-based
positions `index` gives along `dim`, and returns `x`. Under autograd a leaf that requires grad
cannot be written in place (PyTorch's rule).]=],
    example = [=[
local x = ms.zeros(3)
x:scatter_(1, ms.tensor({3, 1}), ms.tensor({5.0, 6.0}))
print(x:tolist()[1], x:tolist()[3])   --> 6.0	5.0
]=] },

  { name = "Tensor:scatter_add", also = {"ms.scatter_add"},
    sig = "Tensor:scatter_add(dim, index, src) -> Tensor",
    doc = [=[A copy of `x` with the elements of `src` added at the 1-based positions `index` gives
along `dim`; positions that repeat add up (a histogram, an embedding's gradient). `src` is a
tensor of `x`'s dtype, no smaller than `index` in any dim. 16-bit floats and small integer types
are summed in float32 / int64 and rounded once. Differentiable in `x` (the gradient as it is) and
`src` (the gradient gathered at `index`). PyTorch's `Tensor.scatter_add`.]=],
    example = [=[
local counts = ms.zeros(4):scatter_add(1, ms.tensor({2, 4, 2, 2}), ms.ones(4))
print(counts:tolist()[2], counts:tolist()[4])   --> 3.0	1.0
]=] },

  { name = "Tensor:scatter_add_", also = {"ms.scatter_add_"},
    sig = "Tensor:scatter_add_(dim, index, src) -> Tensor (self)",
    doc = [=[`scatter_add` in place: adds `src` into `x` at the 1-based positions `index` gives
along `dim`, and returns `x`.]=],
    example = [=[
local x = ms.zeros(2, 2)
x:scatter_add_(2, ms.tensor({{1, 1}, {2, 1}}), ms.ones(2, 2))
print(x:tolist()[1][1], x:tolist()[2][2])   --> 2.0	1.0
]=] },

  { name = "Tensor:sort", also = {"ms.sort"},
    sig = "Tensor:sort(dim?, descending?) or Tensor:sort({dim = -1, descending = false, stable = false}) -> values, indices",
    doc = [=[Sorts along `dim` (the last by default): the sorted values and the 1-based positions
they came from (int64). The sort is always stable, so equal elements keep their order whatever
`stable` says (`stable` only names the gradient node as PyTorch does). NaN sorts above every
number: last ascending, first descending, as in PyTorch. Differentiable in the values (the
gradient goes back to the positions). On CUDA a sorted dim may hold at most 16384 elements (an
error says so; sort longer rows on the CPU). PyTorch's `torch.sort`.]=],
    opts = {
      {"dim", "integer", "-1", "the dim to sort along"},
      {"descending", "boolean", "false", "largest first"},
      {"stable", "boolean", "false", "keep equal elements in order (always done)"},
    },
    example = [=[
local values, indices = ms.tensor({3.0, 1.0, 2.0, 1.0}):sort()
print(values:tolist()[1], indices:tolist()[1], indices:tolist()[2])   --> 1.0	2	4
local v = ms.tensor({{1, 5}, {4, 2}}):sort({dim = 1, descending = true})
print(v:tolist()[1][1], v:tolist()[1][2])   --> 4	5
]=] },

  { name = "Tensor:argsort", also = {"ms.argsort"},
    sig = "Tensor:argsort(dim?, descending?) or Tensor:argsort({dim = -1, descending = false, stable = false}) -> Tensor",
    doc = [=[The 1-based positions (int64) that sort `x` along `dim`: the second result of `sort`.
PyTorch's `torch.argsort`.]=],
    example = [=[
local order = ms.tensor({30, 10, 20}):argsort()
print(order:tolist()[1], order:tolist()[2], order:tolist()[3])   --> 2	3	1
]=] },

  { name = "Tensor:topk", also = {"ms.topk"},
    sig = "Tensor:topk(k, dim?, largest?, sorted?) or Tensor:topk(k, {dim = -1, largest = true, sorted = true}) -> values, indices",
    doc = [=[The `k` largest (smallest when `largest` is false) elements along `dim` (the last by
default) and their 1-based positions, in order; of equal elements the first comes first, and NaN
counts as the largest. The result is always sorted (PyTorch leaves the order unspecified when
`sorted` is false). Differentiable in the values. bool tensors are refused, as in PyTorch. A
classifier's top-5 accuracy: `logits:topk(5)` and compare the positions with the targets.
PyTorch's `torch.topk`.]=],
    opts = {
      {"dim", "integer", "-1", "the dim to select along"},
      {"largest", "boolean", "true", "the largest (true) or the smallest (false) elements"},
      {"sorted", "boolean", "true", "accepted for PyTorch's signature: the result is always sorted"},
    },
    example = [=[
local logits = ms.tensor({{0.1, 2.0, -1.0, 0.7}})
local values, classes = logits:topk(2)
print(classes:tolist()[1][1], classes:tolist()[1][2])   --> 2	4
local low = logits:topk(1, {largest = false})
print(low:item())   --> -1.0
]=] },

  { name = "Tensor:cumsum", also = {"ms.cumsum"},
    sig = "Tensor:cumsum(dim, {dtype =}) -> Tensor",
    doc = [=[The running sum along `dim`: `out[i] = x[1] + ... + x[i]`. Integer and bool inputs give
int64; `dtype` converts the input first (PyTorch's `dtype=`). Floating sums accumulate in double
and round each result once. Differentiable: the gradient is the running sum of the output's
gradient from the end. PyTorch's `torch.cumsum`.]=],
    opts = { {"dtype", "dtype", "nil", "convert the input to this dtype before summing"} },
    example = [=[
local c = ms.tensor({1, 2, 3, 4}):cumsum(1)
print(c:tolist()[4], c.dtype)   --> 10	int64
print(ms.tensor({{1, 2}, {3, 4}}):cumsum(1, {dtype = "float64"}):tolist()[2][2])   --> 6.0
]=] },

  { name = "Tensor:cumprod", also = {"ms.cumprod"},
    sig = "Tensor:cumprod(dim, {dtype =}) -> Tensor",
    doc = [=[The running product along `dim`: `out[i] = x[1] * ... * x[i]`; dtypes as `cumsum`.
Differentiable, zeros in the input included (the gradient PyTorch gives there). PyTorch's
`torch.cumprod`.]=],
    opts = { {"dtype", "dtype", "nil", "convert the input to this dtype first"} },
    example = [=[
print(ms.tensor({1.0, 2.0, 3.0, 4.0}):cumprod(1):tolist()[4])   --> 24.0
]=] },

  { name = "Tensor:tril", also = {"ms.tril"},
    sig = "Tensor:tril(diagonal = 0) or Tensor:tril({diagonal = 0}) -> Tensor",
    doc = [=[The lower triangle of the matrices in the last two dims (the leading dims are a
batch): element `(i, j)` is kept where `j - i <= diagonal` and becomes 0 elsewhere. `diagonal`
is an offset, not an index: 0 is the main diagonal, 1 the one above it, -1 the one below (as
PyTorch's); one past either edge keeps everything or nothing. Any dtype (bool, integers,
bfloat16, ...), any size including 0. Differentiable: the gradient is the same triangle of the
incoming gradient. PyTorch's `torch.tril`; `ms.tril(ms.ones(T, T))` is a causal mask.]=],
    opts = { {"diagonal", "integer", "0", "the offset of the last kept diagonal"} },
    example = [=[
local x = ms.arange(1, 10):view(3, 3)
print(x:tril():tolist()[1][2], x:tril():tolist()[3][1])   --> 0	7
print(ms.tril(ms.ones(3, 3), -1):sum():item())            --> 3.0
local mask = ms.tril(ms.ones(4, 4, {dtype = "bool"}))
print(mask:tolist()[2][3], mask:tolist()[3][2])           --> false	true
]=] },

  { name = "Tensor:triu", also = {"ms.triu"},
    sig = "Tensor:triu(diagonal = 0) or Tensor:triu({diagonal = 0}) -> Tensor",
    doc = [=[The upper triangle of the matrices in the last two dims: element `(i, j)` is kept
where `j - i >= diagonal` and becomes 0 elsewhere (`diagonal` as in `tril`: 0 the main diagonal,
positive above, negative below). Any dtype, batch dims, empty tensors; differentiable (the same
triangle of the gradient). PyTorch's `torch.triu`.]=],
    opts = { {"diagonal", "integer", "0", "the offset of the first kept diagonal"} },
    example = [=[
local x = ms.arange(1, 10):view(3, 3)
print(x:triu(1):tolist()[1][2], x:triu(1):tolist()[2][2])   --> 2	0
print(ms.triu(ms.ones(2, 3, 3)):sum():item())               --> 12.0
]=] },

  { name = "Tensor:tril_", also = {"ms.tril_"},
    sig = "Tensor:tril_(diagonal = 0) -> Tensor (self)",
    doc = [=[`tril` in place: zeroes the elements of `x` above the diagonal `diagonal` and returns
`x` (a strided view writes through to its base). Under autograd a leaf that requires grad cannot
be written in place (PyTorch's rule).]=],
    example = [=[
local x = ms.ones(2, 2)
x:tril_()
print(x:tolist()[1][2], x:tolist()[2][1])   --> 0.0	1.0
]=] },

  { name = "Tensor:triu_", also = {"ms.triu_"},
    sig = "Tensor:triu_(diagonal = 0) -> Tensor (self)",
    doc = [=[`triu` in place: zeroes the elements of `x` below the diagonal `diagonal` and returns
`x`.]=],
    example = [=[
local x = ms.ones(2, 2)
x:triu_(1)
print(x:sum():item())   --> 1.0
]=] },

  { name = "Tensor:any", also = {"ms.any"},
    sig = "Tensor:any(dim?, keepdim?) or Tensor:any({dim =, keepdim = false}) -> Tensor",
    doc = [=[Whether any element (along `dim`, or of the whole tensor) is nonzero: a bool tensor
(uint8 for a uint8 input, as PyTorch). NaN counts as nonzero; an empty tensor gives false. No
gradient. PyTorch's `torch.any`.]=],
    opts = {
      {"dim", "integer", "nil", "reduce this dim only (all elements when nil)"},
      {"keepdim", "boolean", "false", "keep the reduced dim with size 1"},
    },
    example = [=[
local x = ms.tensor({{0, 0}, {0, 3}})
print(x:any():item(), x:any(2):tolist()[1])   --> true	false
]=] },

  { name = "Tensor:all", also = {"ms.all"},
    sig = "Tensor:all(dim?, keepdim?) or Tensor:all({dim =, keepdim = false}) -> Tensor",
    doc = [=[Whether every element (along `dim`, or of the whole tensor) is nonzero: a bool tensor
(uint8 for a uint8 input). An empty tensor gives true. No gradient. PyTorch's `torch.all`.]=],
    opts = {
      {"dim", "integer", "nil", "reduce this dim only (all elements when nil)"},
      {"keepdim", "boolean", "false", "keep the reduced dim with size 1"},
    },
    example = [=[
local ok = ms.tensor({1.0, 2.0, 0.5}):gt(0):all()
print(ok:item())   --> true
print(ms.tensor({{1, 0}, {2, 3}}):all(2, true):size()[2])   --> 1
]=] },
}
