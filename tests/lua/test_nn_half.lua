-- test_nn_half.lua: the seed Net's ops on bfloat16 and float16 inputs (engine/src/nn/nn_half.c:
-- computed in float32, rounded back; linear in bfloat16 on the bfloat16 GEMM where it exists,
-- max_pool2d and dropout natively): each output keeps the 16-bit dtype and equals the float32
-- op on the same (rounded) inputs rounded once; gradients come back in the 16-bit dtype and
-- match float32's within the dtype's rounding.
local T = require "testing"
local ms = require "moonshard"
local F = require "moonshard.functional"

-- Relative tolerance of one rounding (and a little accumulation) per dtype.
local TOL = { bfloat16 = 2 ^ -7, float16 = 2 ^ -10 }

-- The max |a - b| relative to max |b|.
local function rel(a, b)
  local d = (a:to("float32") - b:to("float32")):abs():max():item()
  return d / math.max(b:to("float32"):abs():max():item(), 1e-12)
end

-- Each case: inputs (float32, already representable in the 16-bit dtype after rounding) and a
-- function of them returning a tensor.
local CASES = {
  conv2d = { {1, 2, 6, 6}, {3, 2, 3, 3}, {3}, fn = function(x, w, b) return F.conv2d(x, w, b, 1, 0) end },
  linear = { {4, 7}, {5, 7}, {5}, fn = function(x, w, b) return F.linear(x, w, b) end },
  -- bfloat16 runs the AVX-512 BF16 GEMM where the CPU has it: whole tiles, edges and an odd K
  linear_tiles = { {37, 301}, {45, 301}, {45}, fn = function(x, w, b) return F.linear(x, w, b) end },
  relu = { {3, 5}, fn = function(x) return F.relu(x) end },
  max_pool2d = { {2, 3, 6, 6}, fn = function(x) return F.max_pool2d(x, 2) end },
  dropout_eval = { {3, 5}, fn = function(x) return F.dropout(x, 0.5, false) end },
  flatten = { {2, 3, 4}, fn = function(x) return ms.flatten(x, 2) end },
  log_softmax = { {4, 6}, fn = function(x) return F.log_softmax(x, 2) end },
  nll_loss = { {4, 6}, fn = function(x) return F.nll_loss(F.log_softmax(x, 2), ms.tensor({1, 6, 3, 2}, {dtype = "int64"})) end },
}

for _, dt in ipairs({"bfloat16", "float16"}) do
  for name, c in pairs(CASES) do
    T.test(("%s in %s: the dtype stays, values and grads match float32"):format(name, dt), function()
      ms.manual_seed(3)
      local lo, hi = {}, {}
      for i, shape in ipairs(c) do
        local x = ms.randn(table.unpack(shape)):to(dt)
        lo[i] = x:detach():requires_grad_(true)
        hi[i] = x:to("float32"):detach():requires_grad_(true)
      end
      local yl, yh = c.fn(table.unpack(lo)), c.fn(table.unpack(hi))
      T.eq(yl.dtype, dt)
      T.truthy(rel(yl, yh) <= TOL[dt], ("%s output differs by %g"):format(name, rel(yl, yh)))
      local g = ms.randn(table.unpack(yh:size())):to(dt)
      yl:backward(g)
      yh:backward(g:to("float32"))
      for i = 1, #lo do
        T.eq(lo[i].grad.dtype, dt, "grad dtype")
        -- the gradient went through one more rounding (of the op's input grad) and a 16-bit g
        T.truthy(rel(lo[i].grad, hi[i].grad) <= 2 * TOL[dt], ("%s grad %d differs by %g"):format(name, i, rel(lo[i].grad, hi[i].grad)))
      end
    end)
  end

  T.test(("dropout in %s keeps the float32 mask"):format(dt), function()
    local x = ms.randn(64):to(dt)
    ms.manual_seed(9)
    local a = F.dropout(x, 0.5, true)
    ms.manual_seed(9)
    local b = F.dropout(x:to("float32"), 0.5, true)
    T.eq(a.dtype, dt)
    T.truthy(rel(a, b) == 0, "same mask, exact scale by 2")
  end)
end

-- bfloat16 max pooling runs natively on the CPU (kernels/cpu/pool.c, a plane at a time through
-- the float32 bodies): a maximum is one of its inputs and each gradient lands on one winner, so
-- values, indices and gradients equal float32's on the same inputs exactly, NaN included; where
-- windows overlap the gradient is summed in float32 and rounded once.
local POOLS = {
  { name = "2x2 (the row kernels), odd sizes", shape = {2, 3, 9, 37}, k = 2, opts = {} },
  { name = "3x3 stride 2 padding 1 dilation 1, overlapping", shape = {2, 2, 11, 10}, k = 3,
    opts = { stride = 2, padding = 1 } },
  { name = "2x3 dilated, ceil mode", shape = {1, 2, 13, 12}, k = {2, 3},
    opts = { stride = {2, 1}, dilation = {2, 1}, ceil_mode = true } },
}
for _, c in ipairs(POOLS) do
  T.test(("max_pool2d in bfloat16 equals float32 exactly: %s"):format(c.name), function()
    ms.manual_seed(5)
    local x = ms.randn(table.unpack(c.shape)):bfloat16()
    x[1][1][2][3] = 0 / 0 -- a NaN wins its windows
    x[1][2][1][1] = x[1][2][1][2] -- a tie: the first in scan order wins
    local lo, hi = x:detach():requires_grad_(), x:float():detach():requires_grad_()
    local opts = { return_indices = true }
    for k, v in pairs(c.opts) do opts[k] = v end
    local yl, il = F.max_pool2d(lo, c.k, opts)
    local yh, ih = F.max_pool2d(hi, c.k, opts)
    T.eq(yl.dtype, "bfloat16")
    T.truthy(ms.equal(il, ih), "indices")
    local function no_nan(t) return t:masked_fill(t:ne(t), 7) end
    T.truthy(ms.equal(yl:float():ne(yl:float()), yh:ne(yh)), "NaN where float32's")
    T.truthy(ms.equal(no_nan(yl:float()), no_nan(yh)), "values")
    local g = ms.randn(table.unpack(yh:size())):bfloat16()
    yl:backward(g)
    yh:backward(g:float())
    T.eq(lo.grad.dtype, "bfloat16")
    T.truthy(ms.equal(lo.grad, hi.grad:bfloat16()), "gradient")
  end)
end

T.test("dropout in bfloat16 on the CPU equals float32's rounded once, forward and backward", function()
  local x = ms.randn(3, 1000):bfloat16() -- more than one block of the kernel's widening
  local lo, hi = x:detach():requires_grad_(), x:float():detach():requires_grad_()
  ms.manual_seed(11)
  local yl = F.dropout(lo, 0.3, true) -- 1 / 0.7 is inexact: the product rounds
  ms.manual_seed(11)
  local yh = F.dropout(hi, 0.3, true)
  T.eq(yl.dtype, "bfloat16")
  T.truthy(ms.equal(yl, yh:bfloat16()), "forward")
  local g = ms.randn(3, 1000):bfloat16()
  yl:backward(g)
  yh:backward(g:float())
  T.eq(lo.grad.dtype, "bfloat16")
  T.truthy(ms.equal(lo.grad, hi.grad:bfloat16()), "backward")
end)

T.test("a 16-bit input with a float64 weight is refused with the dtypes named", function()
  local x = ms.randn(2, 3):to("bfloat16")
  local w = ms.randn(4, 3):to("float64")
  T.raises(function() F.linear(x, w) end, "linear")
end)

T.finish()
