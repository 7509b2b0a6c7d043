-- Docstrings: tensor factories and random numbers (ms.zeros, ms.randn, Tensor:uniform_, ...).
-- The entry format is described in lua/moonshard/doc.lua.
local FACTORY_OPTS = {
  {"dtype", "string", "ms.float32", "the element type (ms.float64, ms.int64, ...; the names as strings work too)"},
  {"device", "string", "ms.get_default_device()", "where the tensor lives: \"cpu\", \"cuda\", \"cuda:1\" or \"meta\""},
  {"requires_grad", "boolean", "false", "record operations on the result for autograd (floating dtypes only)"},
}
-- The factory options with another dtype default (Lua source text) and, optionally, its description.
local function opts(dtype_default, dtype_doc)
  if not dtype_default then return FACTORY_OPTS end
  local o = {{"dtype", "string", dtype_default, dtype_doc or FACTORY_OPTS[1][4]}}
  for i = 2, #FACTORY_OPTS do o[i] = FACTORY_OPTS[i] end
  return o
end

return {
  title = "Tensors: creation and random",
  { name = "ms.Tensor",
    sig = "ms.Tensor: the tensor type (its table of methods)",
    doc = [[A tensor is an n-dimensional array of one dtype on one device, as `torch.Tensor`. Fields:
`t.shape` (a Size), `t.dtype`, `t.device`, `t.ndim`, `t.requires_grad` and `t.grad` (both assignable),
`t.grad_fn`, `t.is_leaf`, `t.is_cuda`, `t.is_meta`. `t[i]` is the slice at i of dim 1 (a view; 1-based,
negative from the end), `t[i] = v` writes it, `#t` is the size of dim 1; `+ - * / ^` and unary `-` work
elementwise with tensors and numbers. Methods are called with `:` and most are also functions of `ms`
(`x:sum()`, `ms.sum(x)`); a tensor's memory goes back when it is collected, or at once when it is bound
with `<close>`.]],
    example = [==[
local x = ms.tensor({{1.0, 2.0}, {3.0, 4.0}})
print(x.shape, x.dtype, x.device, #x)      --> torch.Size([2, 2]) float32 cpu 2
print(x[2], x[-1][1]:item())               --> tensor([3., 4.]) 3.0
print((x * 2 + 1):sum():item(), (-x)[1][1]:item()) --> 24.0 -1.0
do local big <close> = ms.zeros(1000, 1000) end
]==] },
  { name = "ms.tensor",
    sig = "ms.tensor(data, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A new tensor holding a copy of `data`: a number, a boolean, a nested table of them (the shape is
read from the first elements; every row must have the same length) or another tensor (a copy cut from its
graph, as `torch.tensor(t)`). Without `dtype` the type is inferred as PyTorch does: any float gives
float32, else integers give int64, else booleans give bool.]],
    opts = opts("nil", "the element type; nil: inferred from data"),
    example = [==[
local x = ms.tensor({{1, 2}, {3, 4}})
print(x.dtype, x.shape)                    --> int64 torch.Size([2, 2])
print(ms.tensor({1.5, 2}))                 --> tensor([1.5000, 2.0000])
print(ms.tensor({1, 2}, {dtype = ms.float64}).dtype) --> float64
]==] },
  { name = "ms.frombuffer",
    sig = "ms.frombuffer(bytes, {dtype = \"uint8\", offset = 0, count = -1}) -> Tensor",
    doc = [[A 1-D tensor made from the bytes of a Lua string, read as little-endian elements of `dtype`
from byte `offset` (0-based, as PyTorch's), `count` elements or (-1) every whole element. The tensor holds a
copy: Lua strings are immutable.]],
    opts = {
      {"dtype", "string", "\"uint8\"", "the element type the bytes are read as"},
      {"offset", "integer", "0", "bytes to skip at the start"},
      {"count", "integer", "-1", "elements to read; -1: all that follow offset (then a whole number of them)"},
    },
    example = [==[
local t = ms.frombuffer(string.pack("<i4i4", 7, -1), {dtype = ms.int32})
print(t)                                   --> tensor([ 7, -1], dtype=torch.int32)
]==] },
  { name = "ms.from_file",
    sig = "ms.from_file(path, {dtype = \"uint8\", offset = 0, size = -1, shared = false}) -> Tensor",
    doc = [[A 1-D tensor over a file's bytes from `offset`, mapped rather than read (`torch.from_file`):
`size` elements, or (-1) every whole element. With `shared = true` writes go to the file; otherwise they
stay private to this process.]],
    opts = {
      {"dtype", "string", "\"uint8\"", "the element type"},
      {"offset", "integer", "0", "the byte where the tensor starts"},
      {"size", "integer", "-1", "elements; -1: every whole element after offset"},
      {"shared", "boolean", "false", "map the file shared (writes reach it) or private (copy on write)"},
    },
    example = [==[
local path = os.tmpname()
local f = assert(io.open(path, "wb")); f:write("\1\2\3\4"); f:close()
print(ms.from_file(path))                  --> tensor([1, 2, 3, 4], dtype=torch.uint8)
os.remove(path)
]==] },
  { name = "ms.zeros",
    sig = "ms.zeros(size..., {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A tensor of the given size filled with 0. The size is given as integers (`ms.zeros(2, 3)`) or as
one table (`ms.zeros({2, 3})`, `ms.zeros(x.shape)`); no size at all makes a 0-dim tensor. float32 unless
`dtype` says otherwise.]],
    opts = opts(),
    example = [==[
local x = ms.zeros(2, 3)
print(x:sum():item())                      --> 0.0
print(ms.zeros({2}, {dtype = ms.int64}))   --> tensor([0, 0])
]==] },
  { name = "ms.ones",
    sig = "ms.ones(size..., {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A tensor of the given size filled with 1; the size as integers or one table, as `ms.zeros`.]],
    opts = opts(),
    example = [==[
print(ms.ones(3))                          --> tensor([1., 1., 1.])
print(ms.ones({2, 2}, {dtype = ms.int32}):sum():item()) --> 4
]==] },
  { name = "ms.empty",
    sig = "ms.empty(size..., {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A tensor of the given size whose elements are not initialised (whatever the memory held):
for buffers that are written before they are read. The size as integers or one table.]],
    opts = opts(),
    example = [==[
local buf = ms.empty(2, 3)
print(buf.shape)                           --> torch.Size([2, 3])
print(buf:fill_(7):sum():item())           --> 42.0
]==] },
  { name = "ms.full",
    sig = "ms.full(size..., fill_value, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A tensor of the given size filled with `fill_value` (the last number; the size as integers or one
table). Without `dtype` the type follows the value, as `torch.full`: a Lua integer gives int64, a float
float32, a boolean bool.]],
    opts = opts("nil", "the element type; nil: int64, float32 or bool by fill_value"),
    example = [==[
print(ms.full({2, 2}, 7))                  --> tensor([[7, 7], [7, 7]])
print(ms.full(3, 0.5))                     --> tensor([0.5000, 0.5000, 0.5000])
]==] },
  { name = "ms.arange",
    sig = "ms.arange([start = 0,] end [, step = 1], {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A 1-D tensor of the values from `start` up to but excluding `end`, `step` apart (PyTorch's
`torch.arange`: the end is excluded, unlike Lua's numeric for). int64 when every bound is a Lua integer,
else float32.]],
    opts = opts("nil", "the element type; nil: int64 when every bound is an integer, else float32"),
    example = [==[
print(ms.arange(5))                        --> tensor([0, 1, 2, 3, 4])
print(ms.arange(1, 7, 2))                  --> tensor([1, 3, 5])
print(ms.arange(0, 1, 0.25))               --> tensor([0.0000, 0.2500, 0.5000, 0.7500])
]==] },
  { name = "ms.linspace",
    sig = "ms.linspace(start, end, steps, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A 1-D tensor of `steps` values evenly spaced from `start` to `end`, both included.]],
    opts = opts(),
    example = [==[
print(ms.linspace(0, 1, 5))                --> tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
]==] },
  { name = "ms.eye",
    sig = "ms.eye(n [, m], {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[An n x m matrix (m = n when left out) with ones on the diagonal and zeros elsewhere.]],
    opts = opts(),
    example = [==[
print(ms.eye(2))                           --> tensor([[1., 0.], [0., 1.]])
print(ms.eye(2, 3).shape)                  --> torch.Size([2, 3])
]==] },
  { name = "ms.rand",
    sig = "ms.rand(size..., {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A tensor of numbers drawn uniformly from [0, 1), from the engine's one Philox generator
(`ms.manual_seed` makes the draws repeatable; the same seed gives the same numbers on the CPU and on CUDA).
Floating dtypes only.]],
    opts = opts(),
    example = [==[
ms.manual_seed(0)
local x = ms.rand(1000)
print(x:min():item() >= 0, x:max():item() < 1) --> true true
]==] },
  { name = "ms.randn",
    sig = "ms.randn(size..., {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A tensor of numbers drawn from the standard normal distribution (mean 0, variance 1), from the
engine's Philox generator. Floating dtypes only.]],
    opts = opts(),
    example = [==[
ms.manual_seed(0)
local x = ms.randn(10000)
print(math.abs(x:mean():item()) < 0.05, math.abs(x:std():item() - 1) < 0.05) --> true true
]==] },
  { name = "ms.randint",
    sig = "ms.randint([low = 0,] high, size, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A tensor of integers drawn uniformly from low to high - 1 (`high` is excluded, as in
`torch.randint`); `size` is a table. int64 unless `dtype` says otherwise. For 1-based class labels over C
classes write `ms.randint(1, C + 1, {n})`.]],
    opts = opts("ms.int64"),
    example = [==[
ms.manual_seed(0)
local labels = ms.randint(1, 11, {64})
print(labels.dtype, labels:min():item() >= 1, labels:max():item() <= 10) --> int64 true true
]==] },
  { name = "ms.randperm",
    sig = "ms.randperm(n, {dtype =, device =, requires_grad =, seed =}) -> Tensor",
    doc = [[A random permutation of the integers 1 .. n: positions as Lua counts them, so it indexes
directly (`x:index_select(1, ms.randperm(x:size(1)))` shuffles the rows of x). It is `torch.randperm`'s
permutation of 0 .. n-1 plus one, as Torch7's `randperm` counted. With `seed` the permutation comes from a
generator of its own and the global one is left untouched, so ranks that were seeded alike agree whatever
they drew before.]],
    opts = {
      {"dtype", "string", "ms.int64", "the element type"},
      {"device", "string", "ms.get_default_device()", "where the result lives"},
      {"requires_grad", "boolean", "false", "floating dtypes only"},
      {"seed", "integer", "nil", "draw from a private generator seeded with this"},
    },
    example = [==[
local p = ms.randperm(5, {seed = 1})
print(p.dtype, p:sum():item(), p:min():item(), p:max():item()) --> int64 15 1 5
print(ms.randperm(5, {seed = 1}):equal(p))  --> true
]==] },
  { name = "ms.zeros_like",
    sig = "ms.zeros_like(t, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A tensor of zeros with t's shape, dtype and device (unless the options say otherwise).]],
    opts = opts("t.dtype"),
    example = [==[
local t = ms.ones(2, 2, {dtype = ms.float64})
local z = ms.zeros_like(t)
print(z.dtype, z:sum():item())             --> float64 0.0
]==] },
  { name = "ms.ones_like",
    sig = "ms.ones_like(t, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A tensor of ones with t's shape, dtype and device (unless the options say otherwise).]],
    opts = opts("t.dtype"),
    example = [==[
print(ms.ones_like(ms.zeros(3, {dtype = ms.int32}))) --> tensor([1, 1, 1], dtype=torch.int32)
]==] },
  { name = "ms.full_like",
    sig = "ms.full_like(t, fill_value, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[A tensor with t's shape, dtype and device, filled with `fill_value`.]],
    opts = opts("t.dtype"),
    example = [==[
print(ms.full_like(ms.zeros(3), 2.5))      --> tensor([2.5000, 2.5000, 2.5000])
]==] },
  { name = "ms.empty_like",
    sig = "ms.empty_like(t, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[An uninitialised tensor with t's shape, dtype and device.]],
    opts = opts("t.dtype"),
    example = [==[
local e = ms.empty_like(ms.zeros(4, 5))
print(e.shape, e.dtype)                    --> torch.Size([4, 5]) float32
]==] },
  { name = "ms.rand_like",
    sig = "ms.rand_like(t, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[Uniform numbers in [0, 1) with t's shape, dtype and device (a floating dtype).]],
    opts = opts("t.dtype"),
    example = [==[
ms.manual_seed(0)
print(ms.rand_like(ms.zeros(2, 3)).shape)  --> torch.Size([2, 3])
]==] },
  { name = "ms.randn_like",
    sig = "ms.randn_like(t, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[Standard normal numbers with t's shape, dtype and device (a floating dtype).]],
    opts = opts("t.dtype"),
    example = [==[
ms.manual_seed(0)
print(ms.randn_like(ms.zeros(2, 3, {dtype = ms.float64})).dtype) --> float64
]==] },
  { name = "ms.randint_like",
    sig = "ms.randint_like(t, [low = 0,] high, {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[Integers drawn uniformly from low to high - 1 with t's shape, dtype and device.]],
    opts = opts("t.dtype"),
    example = [==[
ms.manual_seed(0)
local r = ms.randint_like(ms.zeros(100, {dtype = ms.int64}), 1, 4)
print(r:min():item() >= 1, r:max():item() <= 3) --> true true
]==] },
  { name = "Tensor:bernoulli", also = {"ms.bernoulli"},
    sig = "probs:bernoulli() -> Tensor; t:bernoulli(p) -> Tensor; ms.bernoulli(probs | t [, p])",
    doc = [[Random 0/1 draws: each element is 1 with the probability held at its place in `probs` (a
floating tensor of values in [0, 1]); with a number `p`, every element of a tensor shaped like `t` is 1 with
probability p. The result has the floating dtype of the probabilities and their device.]],
    example = [==[
ms.manual_seed(0)
print(ms.bernoulli(ms.tensor({0.0, 1.0, 1.0, 0.0}))) --> tensor([0., 1., 1., 0.])
print(ms.zeros(1000):bernoulli(0.5):mean():item() > 0.4) --> true
]==] },
  { name = "Tensor:multinomial", also = {"ms.multinomial"},
    sig = "ms.multinomial(input, num_samples, replacement?) or ms.multinomial(input, num_samples, {replacement = false, seed =}) -> Tensor",
    doc = [[Draws `num_samples` category indices from each row of weights: `input` is 1-D (the weights
of the categories) or 2-D (one row of them per draw), float32, float64, bfloat16 or float16, of
non-negative finite weights that need not sum to 1. The result is int64, 1-based as every index in
moonshard, of shape (num_samples) or (rows, num_samples). Without replacement (the default, as
PyTorch's) each row's samples are distinct, drawn one after another in proportion to the weights
left, so a row needs at least `num_samples` positive weights; with `replacement = true` the draws
are independent. Errors for negative, infinite or NaN weights, a row without a positive weight,
and `num_samples` < 1. Draws from the global generator (`ms.manual_seed` reproduces them), or with
`seed` from one of its own, as `ms.randperm` takes it (moonshard has no Generator objects: the
`generator` option is refused with that advice). On a CUDA tensor it draws on the GPU from the
same generator (the indices the CPU would draw) and returns a CUDA tensor; its checks read a few
numbers back to the host. Without replacement on CUDA, `num_samples` > 1 sorts each row, which
may hold at most 16384 categories there (a single sample has no such limit). With replacement and
`num_samples` > 1 each sample is compared with every category's running sum: rows x num_samples x
categories bytes of work memory. PyTorch's
`torch.multinomial`; nanoGPT's `torch.multinomial(probs, num_samples=1)` is
`ms.multinomial(probs, 1)`.]],
    opts = {
      {"replacement", "boolean", "false", "draw independently (a category may repeat)"},
      {"seed", "integer", "nil", "draw from a private generator seeded with this"},
    },
    example = [==[
ms.manual_seed(0)
local w = ms.tensor({0.0, 10.0, 0.0, 30.0})
local idx = ms.multinomial(w, 2)
print(idx.dtype, idx:sort():tolist()[1], idx:sort():tolist()[2]) --> int64 2 4
local many = w:multinomial(1000, {replacement = true})
print(many:eq(4):sum():item() > 650, many:eq(1):sum():item())    --> true 0
print(ms.multinomial(w, 1, {seed = 7}):equal(ms.multinomial(w, 1, {seed = 7}))) --> true
]==] },
  { name = "Tensor:uniform_", also = {"ms.uniform_"},
    sig = "t:uniform_(from = 0, to = 1) -> t",
    doc = [[Fills the floating tensor t in place with numbers drawn uniformly from [from, to) and returns
it. A leaf that requires grad (a parameter) can be filled only under `ms.no_grad()`, as in PyTorch.]],
    example = [==[
ms.manual_seed(0)
local w = ms.empty(100):uniform_(-1, 1)
print(w:min():item() >= -1, w:max():item() < 1) --> true true
]==] },
  { name = "Tensor:normal_", also = {"ms.normal_"},
    sig = "t:normal_(mean = 0, std = 1) -> t",
    doc = [[Fills the floating tensor t in place with numbers drawn from a normal distribution of the given
mean and standard deviation, and returns it. Parameters only under `ms.no_grad()`.]],
    example = [==[
ms.manual_seed(0)
local w = ms.empty(10000):normal_(3, 0.5)
print(math.abs(w:mean():item() - 3) < 0.05) --> true
]==] },
}
