-- Docstrings: dtype and device conversion, element access, and a tensor's autograd methods.
-- The entry format is described in lua/moonshard/doc.lua.
local entries = {title = "Tensors: dtype, device, values, autograd"}

-- {method, dtype, PyTorch's note}: the conversions t:float() ... t:bool().
local CONVERSIONS = {
  {"float", "float32"}, {"double", "float64"}, {"half", "float16"}, {"bfloat16", "bfloat16"},
  {"long", "int64"}, {"int", "int32"}, {"byte", "uint8"}, {"bool", "bool"},
}
local SAMPLE = {float = "ms.tensor({1, 2})", double = "ms.tensor({1, 2})", half = "ms.tensor({0.1})",
  bfloat16 = "ms.tensor({0.1})", long = "ms.tensor({1.7, -1.7})", int = "ms.tensor({1.7, -1.7})",
  byte = "ms.tensor({1, 255})", bool = "ms.tensor({0, 2})"}
local PRINTS = {float = "float32 tensor([1., 2.])", double = "float64 tensor([1., 2.], dtype=torch.float64)",
  half = "float16 tensor([0.1000], dtype=torch.float16)", bfloat16 = "bfloat16 tensor([0.1001], dtype=torch.bfloat16)",
  long = "int64 tensor([ 1, -1])", int = "int32 tensor([ 1, -1], dtype=torch.int32)",
  byte = "uint8 tensor([ 1, 255], dtype=torch.uint8)", bool = "bool tensor([False, True])"}
for _, c in ipairs(CONVERSIONS) do
  local m, dt = c[1], c[2]
  -- ms.float, ms.double, ... are dtype names (strings): only ms.byte is the same function.
  entries[#entries + 1] = { name = "Tensor:" .. m, also = m == "byte" and {"ms.byte"} or nil,
    sig = ("t:%s() -> Tensor"):format(m),
    doc = ("t converted to %s (`t:to(ms.%s)`): a new tensor, or t itself when it is %s already. Floats " ..
           "convert to integers by truncation toward zero; to bool, nonzero is true. Differentiable between " ..
           "floating dtypes."):format(dt, dt, dt),
    example = ("local y = %s:%s()\nprint(y.dtype, y)  --> %s\n"):format(SAMPLE[m], m, PRINTS[m]) }
end

local rest = {
  { name = "Tensor:to", also = {"ms.to"},
    sig = "t:to(dtype | device | other | {dtype =, device =, non_blocking =} [, {non_blocking =}]) -> Tensor",
    doc = [[t converted to another dtype (`"float64"`, `ms.bfloat16`), moved to another device (`"cpu"`,
`"cuda"`, `"cuda:1"`, or an integer CUDA index), or both at once (a table, or another tensor: its dtype and
device). t itself when nothing changes. `non_blocking = true` copies a pinned CPU tensor to CUDA without the
host waiting.]],
    opts = {
      {"dtype", "string", "t.dtype", "the element type of the result"},
      {"device", "string|integer", "t.device", "the device of the result"},
      {"non_blocking", "boolean", "false", "copy from pinned memory asynchronously"},
    },
    example = [==[
local x = ms.tensor({1, 2})
print(x:to("float64").dtype, x:to({dtype = ms.float32, device = "cpu"}).device) --> float64 cpu
print(x:to(ms.zeros(1, {dtype = ms.float16})).dtype) --> float16
]==] },
  { name = "Tensor:cuda",
    sig = "t:cuda([device] [, {non_blocking =}]) -> Tensor; t:cuda({device =, non_blocking =})",
    doc = [[A copy of t on a CUDA device (the current one, or `device`: an index or "cuda:N"); t itself
when it is there already. Raises, saying why, where no GPU is usable (see `ms.cuda.is_available()`).]],
    opts = {{"device", "string|integer", "nil", "the CUDA device; nil: the current one"},
            {"non_blocking", "boolean", "false", "copy from pinned memory asynchronously"}},
    needs = "cuda",
    example = [==[
local x = ms.ones(2):cuda()
print(x.device, x.is_cuda)                 --> cuda:0  true
]==] },
  { name = "Tensor:cpu",
    sig = "t:cpu() -> Tensor",
    doc = [[A copy of t in host memory, or t itself when it is there already.]],
    example = [==[
print(ms.ones(2):cpu().device)             --> cpu
]==] },
  { name = "Tensor:pin_memory",
    sig = "t:pin_memory() -> Tensor",
    doc = [[A copy of the CPU tensor t in page-locked host memory, from which copies to a GPU run without
the host waiting (`t:to("cuda", {non_blocking = true})`); t itself when pinned already. Needs CUDA, as in
PyTorch. The DataLoader's `pin_memory = true` does this for every batch.]],
    needs = "cuda",
    example = [==[
local p = ms.ones(4):pin_memory()
print(p:is_pinned())                       --> true
]==] },
  { name = "Tensor:is_pinned",
    sig = "t:is_pinned() -> boolean",
    doc = [[Whether t lives in page-locked host memory (see `pin_memory`).]],
    example = [==[
print(ms.ones(4):is_pinned())              --> false
]==] },
  { name = "Tensor:is_floating_point", also = {"ms.is_floating_point"},
    sig = "t:is_floating_point() -> boolean",
    doc = [[Whether t's dtype is a floating one (float32, float64, bfloat16, float16).]],
    example = [==[
print(ms.zeros(1):is_floating_point(), ms.arange(3):is_floating_point()) --> true false
]==] },
  { name = "Tensor:item", also = {"ms.item"},
    sig = "t:item() -> number | integer | boolean",
    doc = [[The value of a one-element tensor as a Lua value: a float for floating dtypes, an integer for
integer dtypes, a boolean for bool. On CUDA it waits for the device.]],
    example = [==[
print(ms.tensor({2.5}):item(), ms.tensor(7):item(), ms.tensor(true):item()) --> 2.5 7 true
print(ms.tensor({{1, 2}, {3, 4}}):sum():item()) --> 10
]==] },
  { name = "Tensor:tolist", also = {"ms.tolist"},
    sig = "t:tolist() -> table | value",
    doc = [[t's elements as nested Lua tables of t's shape (a plain value for a 0-dim tensor), with the
value types of `item`.]],
    example = [==[
local l = ms.tensor({{1, 2}, {3, 4}}):tolist()
print(#l, l[2][1], math.type(l[2][1]))     --> 2 3 integer
]==] },
  { name = "Tensor:backward", also = {"ms.backward"},
    sig = "t:backward([gradient], {retain_graph = false}) -> nil",
    doc = [[Computes the gradient of t with respect to every leaf that requires grad, and adds it into
their `.grad` fields (zero them between steps: `optimizer:zero_grad()`). A scalar t needs no `gradient`;
otherwise pass the gradient of t's shape. The graph is freed unless `retain_graph = true`; `create_graph`
(higher-order gradients) is not supported.]],
    opts = {{"retain_graph", "boolean", "false", "keep the graph for another backward"},
            {"create_graph", "boolean", "false", "not supported (raises when true)"}},
    example = [==[
local w = ms.tensor({1.0, 2.0, 3.0}, {requires_grad = true})
local loss = (w * w):sum()
loss:backward()
print(w.grad)                              --> tensor([2., 4., 6.])
]==] },
  { name = "Tensor:detach", also = {"ms.detach"},
    sig = "t:detach() -> Tensor",
    doc = [[A tensor sharing t's memory but cut from the graph: it does not require grad, and nothing
computed from it flows back to t.]],
    example = [==[
local w = ms.ones(2, {requires_grad = true})
local d = (w * 2):detach()
print(d.requires_grad, d.grad_fn, d)       --> false nil tensor([2., 2.])
]==] },
  { name = "Tensor:requires_grad_", also = {"ms.requires_grad_"},
    sig = "t:requires_grad_(requires_grad = true) -> t",
    doc = [[Sets whether autograd records operations on the leaf t, in place, and returns t (the same as
assigning `t.requires_grad = true`). Floating dtypes only; a computed (non-leaf) tensor cannot be switched
off: use `detach`.]],
    example = [==[
local w = ms.zeros(3):requires_grad_()
print(w.requires_grad, w.is_leaf)          --> true true
w.requires_grad = false
print(w.requires_grad)                     --> false
]==] },
  { name = "Tensor:register_hook", also = {"ms.register_hook"},
    sig = "t:register_hook(fn) -> handle",
    doc = [[Calls `fn(grad)` each time the gradient with respect to t is computed during backward; when fn
returns a tensor, that replaces the gradient. Returns a handle whose `handle:remove()` takes the hook off (as
PyTorch's RemovableHandle).]],
    example = [==[
local w = ms.ones(2, {requires_grad = true})
local handle = w:register_hook(function(g) return g * 10 end)
w:sum():backward()
print(w.grad)                              --> tensor([10., 10.])
handle:remove()
]==] },
  { name = "Tensor:register_post_accumulate_grad_hook", also = {"ms.register_post_accumulate_grad_hook"},
    sig = "t:register_post_accumulate_grad_hook(fn) -> handle",
    doc = [[For a leaf t: calls `fn(t)` after backward has added into `t.grad` (PyTorch 2.1's hook, for
stepping an optimizer per parameter as soon as its gradient is ready). Returns a handle with `remove()`.]],
    example = [==[
local w = ms.ones(2, {requires_grad = true})
local seen
w:register_post_accumulate_grad_hook(function(p) seen = p.grad:sum():item() end)
local loss = (w * 3):sum()
loss:backward()
print(seen)                                --> 6.0
]==] },
}
for _, e in ipairs(rest) do entries[#entries + 1] = e end
return entries
