-- gradcheck.lua: checks an op's analytic gradients against central finite differences in
-- float64, as torch.autograd.gradcheck does. The op's output is projected on a fixed random
-- weight so one backward checks the whole Jacobian-vector product.
--   local gradcheck = require "gradcheck"
--   gradcheck(function(a, b) return a * b end, {ms.randn(3, 4):double(), ms.randn(4):double()})
-- Inputs must be float64; each one is checked unless its entry in opts.skip is true. Raises an
-- error naming the input and element where the two disagree.
local ms = require "moonshard"

local function projection(out, weight)
  return (out * weight):sum()
end

local function value_at(f, inputs, weight)
  local _ <close> = ms.no_grad()
  return projection(f(table.unpack(inputs, 1, inputs.n)), weight):item()
end

return function(f, inputs, opts)
  opts = opts or {}
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  inputs.n = inputs.n or #inputs
  local leaves = {n = inputs.n}
  for i = 1, inputs.n do
    local x = inputs[i]
    if ms.is_tensor(x) and not (opts.skip and opts.skip[i]) then
      assert(x.dtype == "float64", ("gradcheck: input %d must be float64, got %s"):format(i, x.dtype))
      x = x:detach():requires_grad_()
    end
    leaves[i] = x
  end
  local out = f(table.unpack(leaves, 1, leaves.n))
  local weight = ms.randn(out:size(), {dtype = "float64"})
  projection(out, weight):backward()
  for i = 1, leaves.n do
    local x = leaves[i]
    if ms.is_tensor(x) and x.requires_grad then
      local analytic = x.grad and x.grad:reshape(-1) or ms.zeros(x:numel(), {dtype = "float64"})
      -- perturb a contiguous copy whose flat view aliases the input given to f
      local probe = x:detach():clone()
      local flat = probe:view(-1)
      local args = {table.unpack(leaves, 1, leaves.n)}
      args[i] = probe
      args.n = leaves.n
      for k = 1, probe:numel() do
        local orig = flat[k]:item()
        flat[k] = orig + eps
        local plus = value_at(f, args, weight)
        flat[k] = orig - eps
        local minus = value_at(f, args, weight)
        flat[k] = orig
        local numeric, got = (plus - minus) / (2 * eps), analytic[k]:item()
        if math.abs(numeric - got) > atol + rtol * math.abs(numeric) then
          error(("gradcheck: input %d element %d: analytic %.8g, numeric %.8g"):format(i, k, got, numeric), 2)
        end
      end
    end
  end
  return true
end
