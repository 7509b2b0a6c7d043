-- Docstrings: shapes, views, indexing, joining and splitting, and the tensor's geometry.
-- The entry format is described in lua/moonshard/doc.lua.
local LEAF = " A leaf that requires grad (a parameter) can be written only under `ms.no_grad()`."

return {
  title = "Tensors: views, indexing, shapes",
  { name = "Tensor:size", also = {"ms.size"},
    sig = "t:size([dim]) -> Size | integer",
    doc = [[The shape of t as a Size (a table of integers printing as `torch.Size([2, 3])`, the same as the
field `t.shape`), or with `dim` the size of that dimension (1-based, negative from the end). Other fields:
`t.dtype`, `t.device`, `t.ndim`, `t.requires_grad`, `t.grad`, `t.grad_fn`, `t.is_leaf`, `t.is_cuda`, and `#t`
(the size of dim 1).]],
    example = [==[
local x = ms.zeros(2, 3)
print(x:size(), x:size(2), x:size(-1), #x)  --> torch.Size([2, 3]) 3 3 2
print(x.shape[1], x.ndim)                  --> 2 2
]==] },
  { name = "Tensor:dim", also = {"ms.dim"},
    sig = "t:dim() -> integer",
    doc = [[The number of dimensions of t (the field `t.ndim`); 0 for a scalar tensor.]],
    example = [==[
print(ms.zeros(2, 3, 4):dim(), ms.tensor(5):dim()) --> 3 0
]==] },
  { name = "Tensor:numel", also = {"ms.numel"},
    sig = "t:numel() -> integer",
    doc = [[The number of elements of t: the product of its sizes.]],
    example = [==[
print(ms.zeros(2, 3, 4):numel())           --> 24
]==] },
  { name = "Tensor:stride", also = {"ms.stride"},
    sig = "t:stride([dim]) -> table | integer",
    doc = [[The strides of t in elements (how far apart consecutive elements of each dimension lie), as a
table, or with `dim` (1-based, negative from the end) that dimension's stride.]],
    example = [==[
local x = ms.zeros(2, 3)
print(table.concat(x:stride(), ","), x:t():stride(1)) --> 3,1 1
]==] },
  { name = "Tensor:storage_offset", also = {"ms.storage_offset"},
    sig = "t:storage_offset() -> integer",
    doc = [[Where t's first element lies in its storage, in elements from the start (0-based, as
PyTorch's: an offset, not a position).]],
    example = [==[
local x = ms.arange(10)
print(x:narrow(1, 4, 3):storage_offset())  --> 3
]==] },
  { name = "Tensor:is_contiguous", also = {"ms.is_contiguous"},
    sig = "t:is_contiguous() -> boolean",
    doc = [[Whether t's elements lie in memory in row-major order without gaps (true for new tensors; a
transpose or a narrow of an inner dim is not).]],
    example = [==[
local x = ms.zeros(2, 3)
print(x:is_contiguous(), x:t():is_contiguous()) --> true false
]==] },
  { name = "Tensor:element_size", also = {"ms.element_size"},
    sig = "t:element_size() -> integer",
    doc = [[The size of one element of t in bytes (4 for float32, 2 for bfloat16, ...).]],
    example = [==[
print(ms.zeros(1):element_size(), ms.zeros(1, {dtype = ms.bfloat16}):element_size()) --> 4 2
]==] },
  { name = "Tensor:view", also = {"ms.view"},
    sig = "t:view(size...) -> Tensor",
    doc = [[A view of t with another shape and the same elements, sharing its memory (writes show through
both). The size as integers or one table; one size may be -1 (inferred). t's layout must allow it (a
transposed tensor does not): otherwise use `reshape`, or `contiguous()` first.]],
    example = [==[
local x = ms.arange(6)
local v = x:view(2, 3)
v[1][1] = 100
print(v.shape, x[1]:item())                --> torch.Size([2, 3]) 100
print(x:view(-1, 2).shape)                 --> torch.Size([3, 2])
]==] },
  { name = "Tensor:reshape", also = {"ms.reshape"},
    sig = "t:reshape(size...) -> Tensor",
    doc = [[t with another shape: a view when the layout allows, else a copy. The size as integers or one
table; one size may be -1.]],
    example = [==[
local x = ms.arange(6):view(2, 3):t()
print(x:reshape(6))                        --> tensor([0, 3, 1, 4, 2, 5])
]==] },
  { name = "Tensor:view_as", also = {"ms.view_as"},
    sig = "t:view_as(other) -> Tensor",
    doc = [[`t:view(other:size())`: a view of t with other's shape.]],
    example = [==[
print(ms.arange(4):view_as(ms.zeros(2, 2)).shape) --> torch.Size([2, 2])
]==] },
  { name = "Tensor:reshape_as", also = {"ms.reshape_as"},
    sig = "t:reshape_as(other) -> Tensor",
    doc = [[`t:reshape(other:size())`: t with other's shape, a view when possible.]],
    example = [==[
print(ms.arange(4):reshape_as(ms.zeros(2, 2)).shape) --> torch.Size([2, 2])
]==] },
  { name = "Tensor:expand", also = {"ms.expand"},
    sig = "t:expand(size...) -> Tensor",
    doc = [[A view of t repeated along dims of size 1 (or new leading dims) to the given size, without
copying (stride 0). -1 keeps a dim's size. Write into it only after a `clone()`.]],
    example = [==[
local col = ms.tensor({{1}, {2}})
print(col:expand(2, 3))                    --> tensor([[1, 1, 1], [2, 2, 2]])
print(col:expand(-1, 4).shape)             --> torch.Size([2, 4])
]==] },
  { name = "Tensor:expand_as", also = {"ms.expand_as"},
    sig = "t:expand_as(other) -> Tensor",
    doc = [[`t:expand(other:size())`.]],
    example = [==[
print(ms.tensor({1, 2}):expand_as(ms.zeros(3, 2)).shape) --> torch.Size([3, 2])
]==] },
  { name = "Tensor:narrow", also = {"ms.narrow"},
    sig = "t:narrow(dim, start, length) -> Tensor",
    doc = [[A view of `length` elements of dimension `dim` from position `start` (both 1-based, negative
from the end; PyTorch's start is 0-based).]],
    example = [==[
local x = ms.arange(1, 11)
print(x:narrow(1, 3, 4))                   --> tensor([3, 4, 5, 6])
print(x:narrow(1, -2, 2))                  --> tensor([ 9, 10])
]==] },
  { name = "Tensor:select", also = {"ms.select"},
    sig = "t:select(dim, index) -> Tensor",
    doc = [[A view of the slice at `index` of dimension `dim` (both 1-based, negative from the end): that
dimension removed. `t[i]` is `t:select(1, i)`, and `t[i] = v` writes that slice.]],
    example = [==[
local m = ms.arange(1, 7):view(2, 3)
print(m:select(2, 1))                      --> tensor([1, 4])
print(m[2], m[-1][-1]:item())              --> tensor([4, 5, 6]) 6
]==] },
  { name = "Tensor:index_select", also = {"ms.index_select"},
    sig = "t:index_select(dim, index) -> Tensor",
    doc = [[A new tensor of the slices of dimension `dim` at the positions held by `index` (a 1-D int64 or
int32 tensor of 1-based positions; repeats allowed). Differentiable with respect to t.]],
    example = [==[
local m = ms.arange(1, 7):view(3, 2)
print(m:index_select(1, ms.tensor({3, 1})))  --> tensor([[5, 6], [1, 2]])
]==] },
  { name = "Tensor:transpose", also = {"ms.transpose"},
    sig = "t:transpose(dim0, dim1) -> Tensor",
    doc = [[A view of t with dimensions dim0 and dim1 swapped (1-based, negative from the end).]],
    example = [==[
print(ms.zeros(2, 3, 4):transpose(1, 3).shape) --> torch.Size([4, 3, 2])
]==] },
  { name = "Tensor:t", also = {"ms.t"},
    sig = "t:t() -> Tensor",
    doc = [[The transpose of a matrix (a view); a 1-D or 0-D tensor comes back as it is. Tensors of more
dims: `transpose` or `permute`.]],
    example = [==[
print(ms.arange(1, 7):view(2, 3):t())      --> tensor([[1, 4], [2, 5], [3, 6]])
]==] },
  { name = "Tensor:permute", also = {"ms.permute"},
    sig = "t:permute(dims...) -> Tensor",
    doc = [[A view of t with its dimensions reordered: result dim i is t's dim `dims[i]` (1-based; given as
integers or one table, each dim once).]],
    example = [==[
local img = ms.zeros(28, 28, 3)
print(img:permute(3, 1, 2).shape)          --> torch.Size([3, 28, 28])
]==] },
  { name = "Tensor:squeeze", also = {"ms.squeeze"},
    sig = "t:squeeze([dim]) -> Tensor",
    doc = [[A view of t without its dimensions of size 1, or only `dim` (1-based) when it has size 1.]],
    example = [==[
local x = ms.zeros(1, 3, 1)
print(x:squeeze().shape, x:squeeze(1).shape) --> torch.Size([3]) torch.Size([3, 1])
]==] },
  { name = "Tensor:unsqueeze", also = {"ms.unsqueeze"},
    sig = "t:unsqueeze(dim) -> Tensor",
    doc = [[A view of t with a new dimension of size 1 at position `dim` (1 .. t:dim() + 1; negative from the
end: -1 appends).]],
    example = [==[
local v = ms.tensor({1, 2, 3})
print(v:unsqueeze(1).shape, v:unsqueeze(-1).shape) --> torch.Size([1, 3]) torch.Size([3, 1])
]==] },
  { name = "Tensor:flatten", also = {"ms.flatten"},
    sig = "t:flatten(start_dim = 1, end_dim = -1) -> Tensor",
    doc = [[t with dimensions start_dim .. end_dim (1-based, negative from the end) merged into one: a view
when the layout allows, else a copy. `x:flatten(2)` keeps the batch dim.]],
    example = [==[
local x = ms.zeros(64, 1, 28, 28)
print(x:flatten().shape, x:flatten(2).shape) --> torch.Size([50176]) torch.Size([64, 784])
]==] },
  { name = "Tensor:contiguous", also = {"ms.contiguous"},
    sig = "t:contiguous() -> Tensor",
    doc = [[t itself when its elements lie in row-major order, else a row-major copy.]],
    example = [==[
local x = ms.zeros(2, 3):t()
print(x:is_contiguous(), x:contiguous():is_contiguous()) --> false true
]==] },
  { name = "Tensor:clone", also = {"ms.clone"},
    sig = "t:clone() -> Tensor",
    doc = [[A copy of t with memory of its own (differentiable: gradients flow back to t).]],
    example = [==[
local x = ms.zeros(3)
local y = x:clone()
y[1] = 5
print(x[1]:item(), y[1]:item())            --> 0.0 5.0
]==] },
  { name = "Tensor:chunk", also = {"ms.chunk"},
    sig = "t:chunk(chunks, dim = 1) -> {Tensor...}",
    doc = [[t split along `dim` into `chunks` views of equal size (the last smaller when the size does not
divide), returned as a Lua sequence.]],
    example = [==[
local parts = ms.arange(1, 8):chunk(3)
print(#parts, parts[1], parts[3])          --> 3 tensor([1, 2, 3]) tensor([7])
]==] },
  { name = "Tensor:split", also = {"ms.split"},
    sig = "t:split(split_size | {sizes...}, dim = 1) -> {Tensor...}",
    doc = [[t split along `dim` into views of `split_size` elements each (the last may be smaller), or of the
sizes listed (they must sum to the dim's size), returned as a Lua sequence.]],
    example = [==[
local x = ms.arange(1, 6)
print(#x:split(2), x:split({1, 4})[2])     --> 3 tensor([2, 3, 4, 5])
]==] },
  { name = "ms.cat",
    sig = "ms.cat({tensors...}, dim = 1) -> Tensor",
    doc = [[The tensors of the sequence joined along `dim` (1-based, negative from the end); their other
sizes must agree. PyTorch's `torch.cat`.]],
    example = [==[
local a, b = ms.ones(1, 2), ms.zeros(2, 2)
print(ms.cat({a, b}).shape, ms.cat({a, a}, 2).shape) --> torch.Size([3, 2]) torch.Size([1, 4])
]==] },
  { name = "ms.stack",
    sig = "ms.stack({tensors...}, dim = 1) -> Tensor",
    doc = [[The tensors of the sequence, all of one shape, stacked along a new dimension `dim` (1 ..
ndim + 1).]],
    example = [==[
local a, b = ms.tensor({1, 2}), ms.tensor({3, 4})
print(ms.stack({a, b}))                    --> tensor([[1, 2], [3, 4]])
print(ms.stack({a, b}, 2).shape)           --> torch.Size([2, 2])
]==] },
  { name = "ms.where",
    sig = "ms.where(condition, input, other) -> Tensor",
    doc = [[Elementwise choice: input where the bool tensor `condition` is true, else other (tensors or
numbers, broadcast together). The method form is `input:where(condition, other)`.]],
    example = [==[
local x = ms.tensor({-1.0, 2.0, -3.0})
print(ms.where(x:gt(0), x, 0))             --> tensor([0., 2., 0.])
]==] },
  { name = "Tensor:where",
    sig = "t:where(condition, other) -> Tensor",
    doc = [[`ms.where(condition, t, other)`: t's elements where `condition` is true, else other's
(PyTorch's `Tensor.where`).]],
    example = [==[
local x = ms.tensor({1, 2, 3})
print(x:where(x:ne(2), -1))                --> tensor([ 1, -1, 3])
]==] },
  { name = "Tensor:masked_fill", also = {"ms.masked_fill"},
    sig = "t:masked_fill(mask, value) -> Tensor",
    doc = [[A copy of t with `value` where the bool tensor `mask` (broadcast to t's shape) is true.]],
    example = [==[
local scores = ms.zeros(2, 2)
print(scores:masked_fill(ms.tensor({{false, true}, {false, false}}), -math.huge)) --> tensor([[0., -inf], [0., 0.]])
]==] },
  { name = "Tensor:masked_fill_", also = {"ms.masked_fill_"},
    sig = "t:masked_fill_(mask, value) -> t",
    doc = [[Writes `value` into t where `mask` is true, in place, and returns t.]] .. LEAF,
    example = [==[
local x = ms.arange(5)
x:masked_fill_(x:ge(3), 0)
print(x)                                   --> tensor([0, 1, 2, 0, 0])
]==] },
  { name = "Tensor:fill_", also = {"ms.fill_"},
    sig = "t:fill_(value) -> t",
    doc = [[Sets every element of t to `value` (a number or a boolean), in place, and returns t.]] .. LEAF,
    example = [==[
print(ms.empty(3):fill_(1.5))              --> tensor([1.5000, 1.5000, 1.5000])
]==] },
  { name = "Tensor:zero_", also = {"ms.zero_"},
    sig = "t:zero_() -> t",
    doc = [[Sets every element of t to 0, in place, and returns t.]] .. LEAF,
    example = [==[
print(ms.ones(2):zero_())                  --> tensor([0., 0.])
]==] },
  { name = "Tensor:copy_", also = {"ms.copy_"},
    sig = "t:copy_(src) -> t",
    doc = [[Copies src's elements into t, in place, and returns t: src is broadcast to t's shape and converted
to t's dtype, and may live on another device.]] .. LEAF,
    example = [==[
local dst = ms.zeros(2, 3)
dst:copy_(ms.tensor({1, 2, 3}))
print(dst:sum():item())                    --> 12.0
]==] },
}
