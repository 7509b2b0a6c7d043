-- autograd.lua: custom autograd Functions, as PyTorch's torch.autograd.Function (reached as
-- ms.autograd.Function; require "moonshard.autograd" gives the same table).
--   local MyFn = ms.autograd.Function:extend("MyFn")
--   function MyFn.forward(ctx, x, y) ctx:save_for_backward(x, y); return x * y + x:sin() end
--   function MyFn.backward(ctx, grad)
--     local x, y = table.unpack(ctx.saved_tensors)
--     return grad * (y + x:cos()), grad * x
--   end
--   local z = MyFn.apply(x, y)             -- z.grad_fn: "MyFnBackward"
-- forward runs without recording a graph; apply attaches one engine node to its differentiable
-- outputs (ms.autograd._function_node, lua/l_function.c) whose backward calls MyFn.backward with
-- one gradient per output (zeros for outputs nobody used), which returns one gradient per forward
-- input (nil for inputs that are not tensors or need none). backward runs with grad mode off.
local ms = require "moonshard"
local native = ms.autograd
local fmt = string.format
local pack, unpack = table.pack, table.unpack
local is_tensor = ms.is_tensor

local M = {}

-- ---- ctx ------------------------------------------------------------------------------------

local Ctx = {}
Ctx.__index = Ctx
Ctx.__name = "FunctionCtx"
M.FunctionCtx = Ctx -- public as PyTorch's torch.autograd.function.FunctionCtx: what ctx is (its docs)

-- Keeps tensors for backward, read back as ctx.saved_tensors (a list, in the order given).
function Ctx:save_for_backward(...)
  local saved = pack(...)
  for i = 1, saved.n do
    if saved[i] ~= nil and not is_tensor(saved[i]) then
      error(fmt("save_for_backward: bad argument #%d: expected a tensor or nil, got %s", i, type(saved[i])), 2)
    end
  end
  self.saved_tensors = saved
end

-- Outputs given here get no gradient (their grad_fn stays nil); backward still receives a zero
-- gradient in their place.
function Ctx:mark_non_differentiable(...)
  for i = 1, select("#", ...) do
    local t = select(i, ...)
    if not is_tensor(t) then
      error(fmt("mark_non_differentiable: bad argument #%d: expected a tensor, got %s", i, type(t)), 2)
    end
    self._non_differentiable[t] = true
  end
end

-- ---- Function -------------------------------------------------------------------------------

local Function = { __name = "Function" }
M.Function = Function

local function check_grads(name, args, r)
  if r.n < args.n then
    error(fmt("function %s returned an incorrect number of gradients (expected %d, got %d)", name, args.n, r.n), 0)
  end
  for i = args.n + 1, r.n do
    if r[i] ~= nil then
      error(fmt("function %s returned an incorrect number of gradients (expected %d, got %d)", name, args.n, r.n), 0)
    end
  end
  for i = 1, args.n do
    local g = r[i]
    if g ~= nil and not is_tensor(g) then
      error(fmt("function %s returned %s as the gradient of input %d (expected a tensor or nil)", name, type(g), i), 0)
    end
    if g ~= nil and not is_tensor(args[i]) then
      error(fmt("function %s returned a gradient different than nil at position %d, but the corresponding "
        .. "forward input was not a tensor", name, i), 0)
    end
  end
end

-- The Lua backward the engine node calls with the gradients of the differentiable outputs
-- (`where` maps them to their places among all outputs); returns the input gradients as a table.
local function backward_of(cls, ctx, args, outs, where)
  local name = cls.__name .. "Backward"
  return function(...)
    local full = {}
    for k, i in ipairs(where) do full[i] = (select(k, ...)) end
    for i = 1, outs.n do
      if full[i] == nil and is_tensor(outs[i]) then full[i] = ms.zeros_like(outs[i]) end
    end
    local r = pack(cls.backward(ctx, unpack(full, 1, outs.n)))
    check_grads(name, args, r)
    return r
  end
end

local function apply(cls, ...)
  local args = pack(...)
  local ctx = setmetatable({ needs_input_grad = {}, saved_tensors = { n = 0 }, _non_differentiable = {} }, Ctx)
  local grad_on, any = ms.is_grad_enabled(), false
  for i = 1, args.n do
    local a = args[i]
    ctx.needs_input_grad[i] = grad_on and is_tensor(a) and a.requires_grad or false
    any = any or ctx.needs_input_grad[i]
  end
  local outs
  do
    local _ <close> = ms.no_grad()
    outs = pack(cls.forward(ctx, ...))
  end
  if not any then return unpack(outs, 1, outs.n) end
  local diff, where = {}, {}
  for i = 1, outs.n do
    local o = outs[i]
    if is_tensor(o) and o:is_floating_point() and not ctx._non_differentiable[o] then
      diff[#diff + 1], where[#diff + 1] = o, i
    end
  end
  if #diff == 0 then return unpack(outs, 1, outs.n) end
  local attached = native._function_node(cls.__name .. "Backward", backward_of(cls, ctx, args, outs, where),
    args, args.n, diff)
  local result = { n = outs.n }
  for i = 1, outs.n do result[i] = outs[i] end
  for k, i in ipairs(where) do result[i] = attached[k] end
  return unpack(result, 1, result.n)
end

-- Function:extend("Name") -> a Function class; define Name.forward and Name.backward, call
-- Name.apply(...).
function Function.extend(parent, name)
  if type(name) ~= "string" or name == "" then
    error(fmt("Function.extend: bad argument #1 (name): expected a non-empty string, got %s", type(name)), 2)
  end
  local cls = setmetatable({ __name = name, super = parent }, {
    __index = parent,
    __tostring = function() return "class " .. name end,
  })
  cls.apply = function(...) return apply(cls, ...) end
  return cls
end

function Function.forward()
  error("autograd.Function: a Function subclass must define forward(ctx, ...)", 2)
end

function Function.backward()
  error("autograd.Function: a Function subclass must define backward(ctx, grad, ...)", 2)
end

function Function.apply()
  error("autograd.Function: call apply on a subclass (Function:extend(\"Name\")), not on Function itself", 2)
end

return M
