-- test_autograd.lua: the graph machinery: accumulation into .grad, broadcasting, no_grad
-- scopes, detach, hooks, retain_graph and the errors for misuse.
local T = require "testing"
local ms = require "moonshard"
local gradcheck = require "gradcheck"

local function leaf(values) return ms.tensor(values, {dtype = "float64", requires_grad = true}) end

T.test("binary ops: gradients with broadcasting and plain numbers", function()
  ms.manual_seed(0)
  local shapes = {{{3, 4}, {4}}, {{2, 1, 3}, {4, 1}}, {{3}, {}}}
  for _, s in ipairs(shapes) do
    local a, b = ms.randn(s[1], {dtype = "float64"}), ms.randn(s[2], {dtype = "float64"}) + 3
    gradcheck(function(x, y) return x + y end, {a, b})
    gradcheck(function(x, y) return x - y * 2 end, {a, b})
    gradcheck(function(x, y) return x * y end, {a, b})
    gradcheck(function(x, y) return x / y end, {a, b})
    gradcheck(function(x, y) return 2.5 / y - x end, {a, b})
    gradcheck(function(x, y) return y ^ x end, {a, b})
    gradcheck(function(x) return x ^ 3 end, {a})
    gradcheck(function(x, y) return x:maximum(y) + x:minimum(y * 0.5) end, {a, b})
  end
end)

T.test("gradients accumulate across backward calls", function()
  local x = leaf({1, 2})
  ;(x * 3):sum():backward()
  ;(x * 3):sum():backward()
  T.same(x.grad:tolist(), {6.0, 6.0})
  T.truthy(x.is_leaf)
  T.eq((x * 3).grad_fn, "MulBackward0")
  T.eq(x.grad_fn, nil)
end)

T.test("no_grad as a scope and around a function; enable_grad inside", function()
  local x = leaf({1, 2})
  do
    local _ <close> = ms.no_grad()
    T.eq((x * 2).requires_grad, false)
    T.eq(ms.is_grad_enabled(), false)
    do
      local _ <close> = ms.enable_grad()
      T.eq((x * 2).requires_grad, true)
    end
    T.eq(ms.is_grad_enabled(), false)
  end
  T.eq(ms.is_grad_enabled(), true)
  local y = ms.no_grad(function(v) return v * 2 end, x)
  T.eq(y.requires_grad, false)
  T.raises(function() ms.no_grad(function() error("boom") end) end, "boom")
  T.eq(ms.is_grad_enabled(), true, "mode restored after an error")
end)

T.test("detach cuts the graph but shares storage", function()
  local x = leaf({1, 2})
  local d = (x * 2):detach()
  T.eq(d.requires_grad, false)
  local y = x * 2
  local e = y:detach()
  e[1] = 7
  T.eq(y[1]:item(), 7.0)
end)

T.test("hooks: replace a gradient, observe accumulation, remove", function()
  local x = leaf({1, 2})
  local seen
  local h = x:register_hook(function(g) seen = g:tolist(); return g * 10 end)
  local posts = 0
  x:register_post_accumulate_grad_hook(function(p) posts = posts + 1; T.truthy(p.grad) end)
  ;(x * 2):sum():backward()
  T.same(seen, {2.0, 2.0})
  T.same(x.grad:tolist(), {20.0, 20.0})
  T.eq(posts, 1)
  h:remove()
  x.grad = nil
  ;(x * 2):sum():backward()
  T.same(x.grad:tolist(), {2.0, 2.0})
  local y = x * 3 -- a hook on a non-leaf sees the gradient flowing into it
  y:register_hook(function(g) return g * 0 end)
  x.grad = nil
  y:sum():backward()
  T.same(x.grad:tolist(), {0.0, 0.0})
  T.raises(function() ms.ones(2):register_hook(function() end) end, "register_hook", "doesn't require grad")
end)

T.test("a hook's error stops backward with its message", function()
  local x = leaf({1, 2})
  local y = x * 2
  y:register_hook(function() error("hook failed here") end)
  T.raises(function() y:sum():backward() end, "hook failed here")
  T.eq(ms.is_grad_enabled(), true)
end)

T.test("retain_graph and the second-backward error", function()
  local x = leaf({1, 2})
  local y = (x * x):sum()
  y:backward({retain_graph = true})
  y:backward()
  T.same(x.grad:tolist(), {4.0, 8.0})
  T.raises(function() y:backward() end, "backward through the graph a second time", "retain_graph")
end)

T.test("in-place ops under autograd", function()
  local x = leaf({1, 2})
  T.raises(function() x:add_(1) end, "add_", "leaf", "in-place")
  local y = x * 1
  y:add_(x) -- y = 2x
  y:sum():backward()
  T.same(x.grad:tolist(), {2.0, 2.0})
  local z = x * 1
  local w = z * z -- saves z
  z:mul_(2)
  T.raises(function() w:sum():backward() end, "modified by an in-place operation")
  do
    local _ <close> = ms.no_grad()
    x:add_(1) -- allowed without grad mode
  end
  T.same(x:tolist(), {2.0, 3.0})
end)

T.test("errors for misuse", function()
  T.raises(function() ms.ones(2):sum():backward() end, "does not require grad")
  local x = leaf({1, 2})
  T.raises(function() (x * 2):backward() end, "scalar outputs")
  T.raises(function() (x * 2):backward(ms.ones(3)) end, "shape (3,)", "shape (2,)")
  T.raises(function() ms.ones(2, {dtype = "int64"}):requires_grad_() end, "floating point")
  T.raises(function() (x * 2).requires_grad = false end, "leaf")
  T.raises(function() x:backward({create_graph = true}) end, "create_graph")
end)

T.test("a long chain does not overflow the stack when freed", function()
  local x = leaf({1})
  local y = x
  for _ = 1, 100000 do y = y + 1 end
  y:sum():backward()
  T.same(x.grad:tolist(), {1.0})
  y = nil -- luacheck: ignore
  collectgarbage()
end)

T.finish()
