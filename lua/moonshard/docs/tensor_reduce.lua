-- Docstrings: reductions (sum, mean, max, argmax, var, norm, ...) and whole-tensor comparisons.
-- The entry format is described in lua/moonshard/doc.lua.
local DIM_OPTS = {
  {"dim", "integer", "nil", "the dimension to reduce (1-based, negative from the end); nil: all elements"},
  {"keepdim", "boolean", "false", "keep the reduced dimension with size 1"},
}
local VAR_OPTS = {
  DIM_OPTS[1], DIM_OPTS[2],
  {"correction", "integer", "1", "divide by N - correction (1: Bessel's, the sample estimate; 0: the population)"},
  {"unbiased", "boolean", "true", "the older spelling: true is correction 1, false correction 0"},
}
local FORMS = "Called as `t:%s()` (every element, a 0-dim tensor), `t:%s(dim)`, `t:%s(dim, keepdim)` or " ..
  "`t:%s({dim =, keepdim =})`; dim is 1-based, negative from the end."
local function forms(op) return FORMS:format(op, op, op, op) end

return {
  title = "Tensors: reductions and comparisons",
  { name = "Tensor:sum", also = {"ms.sum"},
    sig = "t:sum([dim] [, keepdim = false]) -> Tensor",
    doc = "The sum of t's elements, or along `dim`. " .. forms("sum") ..
      " Integer and bool tensors sum in int64.",
    opts = DIM_OPTS,
    example = [==[
local m = ms.tensor({{1, 2, 3}, {4, 5, 6}})
print(m:sum(), m:sum(1), m:sum(2))         --> tensor(21) tensor([5, 7, 9]) tensor([ 6, 15])
print(m:sum(2, true).shape, m:sum():item()) --> torch.Size([2, 1]) 21
]==] },
  { name = "Tensor:mean", also = {"ms.mean"},
    sig = "t:mean([dim] [, keepdim = false]) -> Tensor",
    doc = "The mean of t's elements, or along `dim`. " .. forms("mean") .. " Floating tensors only, as PyTorch.",
    opts = DIM_OPTS,
    example = [==[
local m = ms.tensor({{1.0, 2.0}, {3.0, 4.0}})
print(m:mean():item(), m:mean(-1))         --> 2.5 tensor([1.5000, 3.5000])
]==] },
  { name = "Tensor:prod", also = {"ms.prod"},
    sig = "t:prod([dim] [, keepdim = false]) -> Tensor",
    doc = "The product of t's elements, or along `dim`. " .. forms("prod") ..
      " Integer and bool tensors multiply in int64.",
    opts = DIM_OPTS,
    example = [==[
local m = ms.tensor({{1, 2}, {3, 4}})
print(m:prod():item(), m:prod(1))          --> 24 tensor([3, 8])
]==] },
  { name = "Tensor:var", also = {"ms.var"},
    sig = "t:var([dim] [, keepdim = false]) -> Tensor; t:var({dim =, keepdim =, correction = 1})",
    doc = "The variance of t's elements, or along `dim`, dividing by N - correction (by default N - 1, the " ..
      "sample variance, as `torch.var`). " .. forms("var") .. " Floating tensors only.",
    opts = VAR_OPTS,
    example = [==[
local x = ms.tensor({1.0, 2.0, 3.0, 4.0})
print(x:var():item(), x:var({correction = 0}):item()) --> 1.6666666269302 1.25
]==] },
  { name = "Tensor:std", also = {"ms.std"},
    sig = "t:std([dim] [, keepdim = false]) -> Tensor; t:std({dim =, keepdim =, correction = 1})",
    doc = "The standard deviation (the square root of `var`, with the same options). " .. forms("std") ..
      " Floating tensors only.",
    opts = VAR_OPTS,
    example = [==[
local x = ms.tensor({2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0})
print(x:std({unbiased = false}):item())    --> 2.0
]==] },
  { name = "Tensor:norm", also = {"ms.norm"},
    sig = "t:norm(p = 2 [, dim] [, keepdim = false]) -> Tensor",
    doc = [[The p-norm of t's elements (all of them: the Frobenius norm for p = 2), or along `dim`. p is a
number, "fro" (2) or "inf" (the largest magnitude); it may also be given as the option `p`. Floating tensors
only.]],
    opts = {DIM_OPTS[1], DIM_OPTS[2], {"p", "number", "2", "the order of the norm"}},
    example = [==[
local v = ms.tensor({3.0, -4.0})
print(v:norm():item(), v:norm(1):item(), v:norm("inf"):item()) --> 5.0 7.0 4.0
]==] },
  { name = "Tensor:max", also = {"ms.max"},
    sig = "t:max() -> Tensor; t:max(dim [, keepdim]) -> values, indices; t:max(other) -> Tensor",
    doc = [[Three forms, as `torch.max`: the largest element (a 0-dim tensor); along `dim`, two results, the
largest values and their **1-based** positions (int64); with a tensor argument, the elementwise maximum
(as `maximum`).]],
    opts = DIM_OPTS,
    example = [==[
local m = ms.tensor({{1, 9, 3}, {7, 2, 8}})
print(m:max():item())                      --> 9
local values, indices = m:max(2)
print(values, indices)                     --> tensor([9, 8]) tensor([2, 3])
]==] },
  { name = "Tensor:min", also = {"ms.min"},
    sig = "t:min() -> Tensor; t:min(dim [, keepdim]) -> values, indices; t:min(other) -> Tensor",
    doc = [[Three forms, as `torch.min`: the smallest element; along `dim`, the smallest values and their
**1-based** positions; with a tensor argument, the elementwise minimum.]],
    opts = DIM_OPTS,
    example = [==[
local m = ms.tensor({{1, 9, 3}, {7, 2, 8}})
local values, indices = m:min(1)
print(values, indices)                     --> tensor([1, 2, 3]) tensor([1, 2, 1])
]==] },
  { name = "Tensor:argmax", also = {"ms.argmax"},
    sig = "t:argmax([dim] [, keepdim = false]) -> Tensor",
    doc = [[The **1-based** position of the largest element (of the flattened tensor, or along `dim`) as an
int64 tensor; the first one on ties. For a batch of class scores, `output:argmax(2)` is the predicted
class in 1..C.]],
    opts = DIM_OPTS,
    example = [==[
local scores = ms.tensor({{0.1, 0.7, 0.2}, {0.5, 0.3, 0.2}})
print(scores:argmax(2), scores:argmax():item()) --> tensor([2, 1]) 2
]==] },
  { name = "Tensor:argmin", also = {"ms.argmin"},
    sig = "t:argmin([dim] [, keepdim = false]) -> Tensor",
    doc = [[The **1-based** position of the smallest element (of the flattened tensor, or along `dim`) as an
int64 tensor; the first one on ties.]],
    opts = DIM_OPTS,
    example = [==[
print(ms.tensor({3, 1, 2}):argmin():item()) --> 2
]==] },
  { name = "Tensor:equal", also = {"ms.equal"},
    sig = "t:equal(other) -> boolean",
    doc = [[Whether t and other have the same shape and the same elements (a Lua boolean; `eq` compares
elementwise).]],
    example = [==[
local a = ms.tensor({1, 2})
print(a:equal(ms.tensor({1, 2})), a:equal(ms.tensor({1, 2, 3}))) --> true false
]==] },
  { name = "Tensor:allclose", also = {"ms.allclose"},
    sig = "t:allclose(other, {rtol = 1e-5, atol = 1e-8}) -> boolean",
    doc = [[Whether every element satisfies |t - other| <= atol + rtol * |other| (t and other of one dtype,
broadcast together; NaNs are never close), as `torch.allclose`.]],
    opts = {{"rtol", "number", "1e-5", "the relative tolerance"}, {"atol", "number", "1e-8", "the absolute tolerance"}},
    example = [==[
local a = ms.tensor({1.0, 2.0})
print(a:allclose(a + 1e-7), a:allclose(a + 0.01), a:allclose(a + 0.01, {atol = 0.1})) --> true false true
]==] },
}
