-- autograd.lua: the docstrings of custom autograd Functions (require "moonshard.autograd", also
-- reached as ms.autograd.Function), PyTorch's torch.autograd.Function.
local MULSIN = [[
local MulSin = ms.autograd.Function:extend("MulSin")
function MulSin.forward(ctx, x, y)
  ctx:save_for_backward(x, y)
  return x * y + x:sin()
end
function MulSin.backward(ctx, grad)
  local x, y = table.unpack(ctx.saved_tensors)
  return grad * (y + x:cos()), grad * x
end
]]

return {
  title = "Autograd: custom Functions (ms.autograd)",
  {
    name = "autograd.Function",
    also = { "ms.autograd.Function" },
    sig = 'ms.autograd.Function:extend("Name") -> a Function class',
    doc = [[
The base of custom autograd operations (PyTorch's `torch.autograd.Function`). Make a class with
`extend`, define `Name.forward(ctx, ...)` and `Name.backward(ctx, grad...)`, and call
`Name.apply(...)`. forward runs without recording a graph; when grad mode is on and an input
tensor requires grad, apply attaches one node ("NameBackward") to the floating-point outputs,
whose backward calls `Name.backward` with one gradient per output and expects one per forward
input (nil for inputs that are not tensors or need none).]],
    example = MULSIN .. [[
local x = ms.tensor({0.0, 1.0}, {requires_grad = true})
local z = MulSin.apply(x, ms.tensor({2.0, 3.0}))
z:sum():backward()
print(z.grad_fn, x.grad)   --> MulSinBackward	tensor([3.0000, 3.5403])
]],
  },
  {
    name = "autograd.Function:extend",
    sig = 'Function:extend("Name") -> class',
    doc = [[
A new Function class named `Name` (its node is "NameBackward"), with its own `apply`. A class may
be extended again; forward and backward are looked up through the chain.]],
    example = [[
local Double = ms.autograd.Function:extend("Double")
function Double.forward(ctx, x) return x * 2 end
function Double.backward(ctx, g) return g * 2 end
print(Double.apply(ms.tensor({1.0, 2.0})))   --> tensor([2., 4.])
]],
  },
  {
    name = "autograd.Function:forward",
    sig = "Name.forward(ctx, ...) -> outputs...",
    doc = [[
What a subclass defines: computes the outputs from the inputs (any values; tensors among them),
with grad mode off. Save what backward needs with `ctx:save_for_backward`; `ctx.needs_input_grad[i]`
says whether input i wants a gradient. The base's forward raises: a subclass must define it.]],
    example = [[
local Square = ms.autograd.Function:extend("Square")
function Square.forward(ctx, x) ctx:save_for_backward(x); return x * x end
function Square.backward(ctx, g) local x = ctx.saved_tensors[1]; return g * 2 * x end
print(Square.apply(ms.tensor({3.0})))   --> tensor([9.])
]],
  },
  {
    name = "autograd.Function:backward",
    sig = "Name.backward(ctx, grad...) -> grads...",
    doc = [[
What a subclass defines: receives one gradient per output of forward (zeros for outputs nobody
used) and returns one gradient per forward input, nil where there is none. Runs with grad mode
off. Returning too many gradients, or one for an input that was not a tensor, is an error naming
the Function.]],
    example = [[
local Cube = ms.autograd.Function:extend("Cube")
function Cube.forward(ctx, x) ctx:save_for_backward(x); return x ^ 3 end
function Cube.backward(ctx, g) local x = ctx.saved_tensors[1]; return g * 3 * x ^ 2 end
local x = ms.tensor({2.0}, {requires_grad = true})
Cube.apply(x):backward()
print(x.grad)   --> tensor([12.])
]],
  },
  {
    name = "autograd.Function:apply",
    sig = "Name.apply(...) -> outputs...",
    doc = [[
Runs the Function: forward on the arguments, and the graph node when a gradient is wanted. Call
it on a subclass (`Name.apply(x)`, with a dot); on `Function` itself it raises.]],
    example = MULSIN .. [[
local y = MulSin.apply(ms.tensor({0.0}), ms.tensor({5.0}))
print(y, y.grad_fn)   --> tensor([0.])	nil
]],
  },
  {
    name = "autograd.FunctionCtx",
    sig = "ctx (the first argument of forward and backward)",
    doc = [[
The context a Function's forward and backward share (PyTorch's `FunctionCtx`): fields
`saved_tensors` (a list) and `needs_input_grad` (one boolean per forward input), methods
`save_for_backward` and `mark_non_differentiable`; any other field may hold what backward needs
(`ctx.scale = 3`).]],
    example = [[
local Scale = ms.autograd.Function:extend("Scale")
function Scale.forward(ctx, x, k) ctx.k = k; return x * k end
function Scale.backward(ctx, g) return g * ctx.k, nil end
local x = ms.tensor({1.0}, {requires_grad = true})
Scale.apply(x, 3):backward()
print(x.grad)   --> tensor([3.])
]],
  },
  {
    name = "autograd.FunctionCtx:save_for_backward",
    sig = "ctx:save_for_backward(tensor...)",
    doc = [[Keeps tensors (or nils) for backward, which reads them back as `ctx.saved_tensors`, in the order given.]],
    example = MULSIN .. [[
local x = ms.tensor({1.0}, {requires_grad = true})
MulSin.apply(x, ms.tensor({0.0})):backward()
print(x.grad)   --> tensor([0.5403])
]],
  },
  {
    name = "autograd.FunctionCtx:mark_non_differentiable",
    sig = "ctx:mark_non_differentiable(tensor...)",
    doc = [[
Marks outputs of forward that get no gradient (indices, masks): their grad_fn stays nil, and
backward receives a zero gradient in their place.]],
    example = [[
local MaxIdx = ms.autograd.Function:extend("MaxIdx")
function MaxIdx.forward(ctx, x)
  local v, i = x:max(1)
  ctx:mark_non_differentiable(i)
  ctx:save_for_backward(x, i)
  return v, i
end
function MaxIdx.backward(ctx, gv, gi)
  local x, i = table.unpack(ctx.saved_tensors)
  local g = ms.zeros_like(x)
  g[i:item()] = gv:item()
  return g
end
local x = ms.tensor({1.0, 5.0, 2.0}, {requires_grad = true})
local v, i = MaxIdx.apply(x)
v:backward()
print(i.grad_fn, x.grad)   --> nil	tensor([0., 1., 0.])
]],
  },
}
