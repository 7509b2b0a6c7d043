-- test_autograd_function.lua: ms.autograd.Function (PyTorch's torch.autograd.Function): one node
-- per apply named "<Name>Backward" whose backward is Lua; gradcheck against finite differences and
-- against the same computation in built-in ops; ctx (save_for_backward, saved_tensors,
-- needs_input_grad, mark_non_differentiable); non-tensor inputs; the errors; a backward nested in
-- a backward that reaches a leaf the outer walk still has to finish.
local T = require "testing"
local ms = require "moonshard"
local gradcheck = require "gradcheck"

-- x * y + sin(x), by hand.
local MulSin = ms.autograd.Function:extend("MulSin")
function MulSin.forward(ctx, x, y)
  ctx:save_for_backward(x, y)
  return x * y + x:sin()
end
function MulSin.backward(ctx, grad)
  local x, y = table.unpack(ctx.saved_tensors)
  return grad * (y + x:cos()), grad * x
end

local function f64(...) return ms.randn(..., {dtype = "float64"}) end

T.test("a Function's gradients: gradcheck, and equal to the built-in ops'", function()
  ms.manual_seed(0)
  gradcheck(MulSin.apply, {f64(3, 4), f64(3, 4)})
  local x, y = f64(5):requires_grad_(), f64(5):requires_grad_()
  local z = MulSin.apply(x, y)
  T.eq(z.grad_fn, "MulSinBackward")
  T.truthy(z.requires_grad)
  ;(z * z):sum():backward()
  local x2, y2 = x:detach():requires_grad_(), y:detach():requires_grad_()
  local z2 = x2 * y2 + x2:sin()
  ;(z2 * z2):sum():backward()
  T.same(x.grad:tolist(), x2.grad:tolist(), 1e-12)
  T.same(y.grad:tolist(), y2.grad:tolist(), 1e-12)
  T.same(z:tolist(), z2:tolist(), 0)
end)

T.test("forward records nothing; without an input requiring grad there is no node", function()
  local Probe = ms.autograd.Function:extend("Probe")
  local seen
  function Probe.forward(ctx, x)
    seen = {grad = ms.is_grad_enabled(), needs = ctx.needs_input_grad[1]}
    return x * 2
  end
  function Probe.backward(_, g) return g * 2 end
  local x = ms.ones(2):requires_grad_()
  local y = Probe.apply(x)
  T.eq(seen.grad, false, "grad mode inside forward")
  T.eq(seen.needs, true)
  T.eq(y.grad_fn, "ProbeBackward")
  local plain = Probe.apply(ms.ones(2))
  T.eq(plain.grad_fn, nil)
  T.eq(plain.requires_grad, false)
  do
    local _ <close> = ms.no_grad()
    T.eq(Probe.apply(x).requires_grad, false, "under no_grad")
    T.eq(seen.needs, false)
  end
end)

T.test("non-tensor inputs get nil; several outputs; mark_non_differentiable; an unused output's gradient is zeros", function()
  local Split = ms.autograd.Function:extend("Split")
  local got
  function Split.forward(ctx, x, k, scale)
    ctx.k, ctx.scale = k, scale
    local idx = ms.tensor({1, 2}, {dtype = "int64"})
    local hi = x * scale
    local lo = x * 0
    ctx:mark_non_differentiable(lo)
    return hi, lo, idx, "label"
  end
  function Split.backward(ctx, g_hi, g_lo, g_idx, g_label)
    got = {g_lo = g_lo, g_idx = g_idx, g_label = g_label, needs = ctx.needs_input_grad}
    return g_hi * ctx.scale, nil, nil
  end
  local x = ms.tensor({1.0, 2.0}, {dtype = "float64", requires_grad = true})
  local hi, lo, idx, label = Split.apply(x, 3, 2.5)
  T.eq(hi.grad_fn, "SplitBackward")
  T.eq(lo.grad_fn, nil, "non-differentiable output")
  T.eq(lo.requires_grad, false)
  T.eq(idx.dtype, "int64")
  T.eq(label, "label")
  hi:sum():backward()
  T.same(x.grad:tolist(), {2.5, 2.5})
  T.same(got.g_lo:tolist(), {0.0, 0.0}, 0, "zeros for a non-differentiable output")
  T.eq(got.g_label, nil)
  T.same(got.needs, {true, false, false})
  -- two differentiable outputs, only the second used
  local Two = ms.autograd.Function:extend("Two")
  function Two.forward(_, a) return a * 2, a * 3 end
  function Two.backward(_, g1, g2) return g1 * 2 + g2 * 3 end
  local a = ms.ones(3):requires_grad_()
  local _, b = Two.apply(a)
  b:sum():backward()
  T.same(a.grad:tolist(), {3.0, 3.0, 3.0})
end)

T.test("an output that is an input comes back as a new tensor: the input keeps no grad_fn", function()
  local Id = ms.autograd.Function:extend("Id")
  function Id.forward(_, x) return x end
  function Id.backward(_, g) return g * 1 end
  local x = ms.ones(2):requires_grad_()
  local y = Id.apply(x)
  T.truthy(x.is_leaf, "the input stays a leaf")
  T.eq(y.grad_fn, "IdBackward")
  ;(y * 4):sum():backward()
  T.same(x.grad:tolist(), {4.0, 4.0})
end)

T.test("errors: in backward (naming the function), wrong counts, wrong shapes, a second backward", function()
  local Bad = ms.autograd.Function:extend("Bad")
  function Bad.forward(_, x) return x * 1 end
  function Bad.backward() error("broken on purpose") end
  local x = ms.ones(2):requires_grad_()
  T.raises(function() Bad.apply(x):sum():backward() end, "BadBackward", "broken on purpose")
  local Short = ms.autograd.Function:extend("Short")
  function Short.forward(_, a, b) return a * b end
  function Short.backward(_, g) return g end
  T.raises(function() Short.apply(x, ms.ones(2):requires_grad_()):sum():backward() end,
    "ShortBackward", "incorrect number of gradients (expected 2, got 1)")
  local NonTensor = ms.autograd.Function:extend("NonTensor")
  function NonTensor.forward(_, a, k) return a * k end
  function NonTensor.backward(_, g) return g, g end
  T.raises(function() NonTensor.apply(x, 2):sum():backward() end, "at position 2",
    "forward input was not a tensor")
  local Shape = ms.autograd.Function:extend("Shape")
  function Shape.forward(_, a) return a * 1 end
  function Shape.backward() return ms.ones(3) end
  T.raises(function() Shape.apply(x):sum():backward() end, "ShapeBackward", "shape (3,)", "shape (2,)")
  local y = MulSin.apply(x, ms.ones(2))
  y:sum():backward()
  T.raises(function() y:sum():backward() end, "MulSinBackward", "second time")
  T.raises(function() ms.autograd.Function:extend() end, "Function.extend", "non-empty string")
  T.raises(function() ms.autograd.Function.apply(x) end, "subclass")
  local NoBackward = ms.autograd.Function:extend("NoBackward")
  function NoBackward.forward(_, a) return a * 1 end
  T.raises(function() NoBackward.apply(x):sum():backward() end, "must define backward")
  local Many = ms.autograd.Function:extend("Many")
  function Many.forward(_, a) return a * 1, a * 2, a * 3, a * 4, a * 5 end
  T.raises(function() Many.apply(x) end, "Many", "1 to 4 differentiable tensors, got 5")
  T.raises(function() x:detach():requires_grad_():save_for_backward() end)
  local SaveBad = ms.autograd.Function:extend("SaveBad")
  function SaveBad.forward(ctx, a) ctx:save_for_backward(a, 3); return a end
  T.raises(function() SaveBad.apply(x) end, "save_for_backward", "#2", "got number")
  -- after an error the engine is usable again
  local z = ms.ones(2):requires_grad_()
  MulSin.apply(z, ms.ones(2)):sum():backward()
  T.truthy(z.grad ~= nil)
end)

T.test("retain_graph keeps the Lua backward for a second backward", function()
  local x = ms.tensor({0.5, 1.0}, {dtype = "float64", requires_grad = true})
  local y = MulSin.apply(x, ms.tensor({2.0, 3.0}, {dtype = "float64"}))
  y:sum():backward({retain_graph = true})
  y:sum():backward()
  T.same(x.grad:tolist(), {2 * (2 + math.cos(0.5)), 2 * (3 + math.cos(1.0))}, 1e-12)
end)

-- A backward nested in a backward (what checkpointing does) that reaches a leaf the outer walk
-- also feeds: each walk keeps its own pending gradient, and the leaf gets both.
T.test("a backward inside a Function's backward: a leaf used inside and outside gets both gradients", function()
  local w = ms.tensor({2.0, 3.0}, {dtype = "float64", requires_grad = true})
  local Inner = ms.autograd.Function:extend("Inner")
  function Inner.forward(_, x) return x * 1 end
  function Inner.backward(_, g)
    do
      local _ <close> = ms.enable_grad()
      local y = w * 5
      y:backward(g)
    end
    return g
  end
  local x = ms.tensor({1.0, 1.0}, {dtype = "float64", requires_grad = true})
  -- w feeds the loss through two paths the outer walk sums before its AccumulateGrad runs, and
  -- the Inner node runs between them
  local loss = ((w * 7) * Inner.apply(x * w)):sum() + (w * 11):sum()
  loss:backward()
  -- d/dw: outer = 7 * (x * w) + 7 * w * x + 11 = 14 w + 11 (x = 1); inner: 5 * g with g = 7 w
  local want = {14 * 2 + 11 + 35 * 2, 14 * 3 + 11 + 35 * 3}
  T.same(w.grad:tolist(), want, 1e-12)
  T.same(x.grad:tolist(), {28.0, 63.0}, 1e-12)
end)

T.finish()
