-- test_grad_buffers.lua: backward functions that reuse the gradient they are handed (relu,
-- dropout) and AccumulateGrad adopting a leaf's first gradient must do so only when nothing
-- else can see that buffer: a hook that keeps the gradient, a gradient shared by two inputs and
-- a user's own gradient tensor must come through unchanged.
local T = require "testing"
local ms = require "moonshard"
local F = require "moonshard.functional"

local function leaf(values) return ms.tensor(values, {dtype = "float32", requires_grad = true}) end
local function f32(values) return ms.tensor(values, {dtype = "float32"}) end

T.test("relu backward: right values, and a gradient a hook kept is not overwritten", function()
  local x = leaf({-1, 2, -3, 4})
  ;(F.relu(x) * f32({10, 20, 30, 40})):sum():backward()
  T.same(x.grad:tolist(), {0, 20, 0, 40})
  local kept
  local y = leaf({-1, 2, -3, 4})
  local r = F.relu(y)
  r:register_hook(function(g) kept = g end)
  ;(r * f32({10, 20, 30, 40})):sum():backward()
  T.same(y.grad:tolist(), {0, 20, 0, 40})
  T.same(kept:tolist(), {10, 20, 30, 40}) -- the hook's tensor still holds relu's incoming gradient
end)

T.test("dropout backward: a gradient a hook kept is not overwritten", function()
  ms.manual_seed(3)
  local x = leaf({1, 1, 1, 1, 1, 1, 1, 1})
  local d = F.dropout(x, {p = 0.5, training = true})
  local kept
  d:register_hook(function(g) kept = g end)
  ;(d * f32({1, 2, 3, 4, 5, 6, 7, 8})):sum():backward()
  T.same(kept:tolist(), {1, 2, 3, 4, 5, 6, 7, 8})
  local dv, gv = d:tolist(), x.grad:tolist()
  for i = 1, 8 do T.same(gv[i], dv[i] * i) end -- kept elements: 2 * i, dropped: 0
  -- and without a hook (the buffer reused): the same values
  ms.manual_seed(3)
  local x2 = leaf({1, 1, 1, 1, 1, 1, 1, 1})
  ;(F.dropout(x2, {p = 0.5, training = true}) * f32({1, 2, 3, 4, 5, 6, 7, 8})):sum():backward()
  T.same(x2.grad:tolist(), gv)
end)

T.test("AccumulateGrad: one gradient reaching two leaves gives each its own .grad", function()
  local a, b = leaf({1, 2}), leaf({3, 4})
  ;((a + b) * f32({1, 1})):sum():backward() -- add hands the same (dense) buffer to both leaves
  a.grad:add_(100)
  T.same(a.grad:tolist(), {101, 101})
  T.same(b.grad:tolist(), {1, 1})
end)

T.test("AccumulateGrad: a user's gradient tensor is copied, an adopted one accumulates", function()
  local x = leaf({1, 2, 3})
  local g = f32({1, 1, 1})
  x:backward(g)
  g:mul_(0)
  T.same(x.grad:tolist(), {1, 1, 1})
  ;(x * 2):sum():backward() -- into the existing .grad
  ;(x * 2):sum():backward()
  T.same(x.grad:tolist(), {5, 5, 5})
  local grad = x.grad
  ;(x * 1):sum():backward()
  T.same(grad:tolist(), {6, 6, 6}) -- the same tensor, accumulated in place as PyTorch does
  local kept
  local y = leaf({1, 2})
  local m = y * 3
  m:register_hook(function(gm) kept = gm end)
  ;(m * 1):sum():backward()
  y.grad:add_(1)
  T.same(kept:tolist(), {1, 1})
  T.same(y.grad:tolist(), {4, 4})
end)

T.finish()
