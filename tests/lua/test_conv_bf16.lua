-- test_conv_bf16.lua: conv2d on bfloat16 inputs through autograd (kernels/cpu/conv_bf16.c where
-- the CPU has AVX-512 BF16, the float32 widening elsewhere) against float32 on the same values:
-- the output and all three gradients keep bfloat16 and agree within bf16 rounding, at the seed's
-- conv1 and conv2 shapes and with stride and padding.
local T = require "testing"
local ms = require "moonshard"
local F = require "moonshard.functional"

local function rel(a, b)
  local d = (a:to("float32") - b:to("float32")):abs():max():item()
  return d / math.max(b:to("float32"):abs():max():item(), 1e-12)
end

local CASES = {
  { "conv1", { 2, 1, 28, 28 }, { 32, 1, 3, 3 }, 1, 0 },
  { "conv2", { 2, 32, 26, 26 }, { 64, 32, 3, 3 }, 1, 0 },
  { "stride 2, padding 1", { 3, 5, 9, 8 }, { 7, 5, 3, 3 }, 2, 1 },
  { "padding 1", { 2, 4, 10, 10 }, { 16, 4, 3, 3 }, 1, 1 },
}

for _, c in ipairs(CASES) do
  T.test(("conv2d %s in bfloat16: output and gradients match float32"):format(c[1]), function()
    ms.manual_seed(5)
    local x = ms.randn(table.unpack(c[2])):bfloat16()
    local w = (ms.randn(table.unpack(c[3])) * 0.2):bfloat16()
    local b = ms.randn(c[3][1]):bfloat16()
    local lo = { x:detach():requires_grad_(true), w:detach():requires_grad_(true), b:detach():requires_grad_(true) }
    local hi = {}
    for i, t in ipairs({ x, w, b }) do hi[i] = t:to("float32"):detach():requires_grad_(true) end
    local yl = F.conv2d(lo[1], lo[2], lo[3], c[4], c[5])
    local yh = F.conv2d(hi[1], hi[2], hi[3], c[4], c[5])
    T.eq(yl.dtype, "bfloat16")
    T.truthy(rel(yl, yh) <= 2 ^ -7, ("output differs by %g"):format(rel(yl, yh)))
    local g = ms.randn(table.unpack(yh:size())):bfloat16()
    yl:backward(g)
    yh:backward(g:to("float32"))
    for i = 1, 3 do
      T.eq(lo[i].grad.dtype, "bfloat16", "grad dtype")
      T.truthy(rel(lo[i].grad, hi[i].grad) <= 2 ^ -7, ("grad %d differs by %g"):format(i, rel(lo[i].grad, hi[i].grad)))
    end
  end)
end
T.finish()
