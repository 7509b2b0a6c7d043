-- test_matmul_half.lua: mm, bmm, matmul and addmm on bfloat16 and float16 CPU tensors (bfloat16
-- on the bf16 GEMM where the CPU has AVX-512 BF16, else through float32 copies, as float16): the
-- dtype stays and each result equals the float32 op on the same values, rounded once, within
-- the dtype's rounding. Sizes off the GEMM's tiles with odd inner sizes, transposed and strided
-- views, broadcast batches, addmm's beta and alpha, and mm's gradients.
local T = require "testing"
local ms = require "moonshard"

local TOL = { bfloat16 = 2 ^ -7, float16 = 2 ^ -10 }

-- The max |a - b| relative to max |b|.
local function rel(a, b)
  local d = (a:to("float32") - b:to("float32")):abs():max():item()
  return d / math.max(b:to("float32"):abs():max():item(), 1e-12)
end

-- A random (rows, cols) tensor in dt; as a transposed view of a (cols, rows) one when `t`.
local function mat(dt, rows, cols, t)
  if t then return ms.randn(cols, rows):to(dt):t() end
  return ms.randn(rows, cols):to(dt)
end

-- fn on the 16-bit inputs against fn on their float32 copies.
local function check(dt, what, fn, ...)
  local lo, hi = {...}, {}
  for i, x in ipairs(lo) do hi[i] = x:to("float32") end
  local yl, yh = fn(table.unpack(lo)), fn(table.unpack(hi))
  T.eq(yl.dtype, dt, what .. " dtype")
  T.eq(#yl:size(), #yh:size(), what .. " rank")
  T.truthy(rel(yl, yh) <= TOL[dt], ("%s in %s differs by %g"):format(what, dt, rel(yl, yh)))
end

for _, dt in ipairs({"bfloat16", "float16"}) do
  T.test(("mm in %s: odd sizes, every transpose"):format(dt), function()
    ms.manual_seed(5)
    for _, s in ipairs({{37, 53, 41}, {1, 7, 1}, {64, 9, 33}, {13, 241, 3}}) do
      local M, K, N = s[1], s[2], s[3]
      for ta = 0, 1 do
        for tb = 0, 1 do
          check(dt, ("mm %dx%dx%d ta=%d tb=%d"):format(M, K, N, ta, tb), ms.mm,
                mat(dt, M, K, ta == 1), mat(dt, K, N, tb == 1))
        end
      end
    end
  end)

  T.test(("mm in %s on views strided in both dims"):format(dt), function()
    ms.manual_seed(6)
    local a = ms.randn(20, 31, 2):to(dt):select(3, 1) -- (20, 31), strides (62, 2)
    local b = ms.randn(3, 17, 31):to(dt):select(1, 2):t() -- (31, 17), strides (1, 31)
    check(dt, "mm strided", ms.mm, a, b)
    check(dt, "mm strided, transposed", ms.mm, b:t(), a:t())
  end)

  T.test(("bmm and broadcast matmul in %s"):format(dt), function()
    ms.manual_seed(7)
    check(dt, "bmm", ms.bmm, ms.randn(3, 13, 17):to(dt), ms.randn(3, 17, 33):to(dt))
    check(dt, "matmul broadcast", ms.matmul, ms.randn(2, 1, 5, 9):to(dt), ms.randn(3, 9, 4):to(dt))
  end)

  T.test(("addmm in %s: beta and alpha, broadcast input"):format(dt), function()
    ms.manual_seed(8)
    local a, b = mat(dt, 25, 19, true), mat(dt, 19, 35)
    for _, ba in ipairs({{1, 1}, {0.5, 2}, {0, 1}, {2, 0}}) do
      for _, c in ipairs({ms.randn(25, 35):to(dt), ms.randn(35):to(dt)}) do
        check(dt, ("addmm beta=%g alpha=%g c%d"):format(ba[1], ba[2], #c:size()),
              function(c_, a_, b_) return ms.addmm(c_, a_, b_, {beta = ba[1], alpha = ba[2]}) end,
              c, a, b)
      end
    end
  end)

  T.test(("mm's gradients in %s"):format(dt), function()
    ms.manual_seed(9)
    local a0, b0, g = mat(dt, 23, 45), mat(dt, 45, 21, true), ms.randn(23, 21):to(dt)
    local al, bl = a0:detach():requires_grad_(true), b0:detach():requires_grad_(true)
    local ah = a0:to("float32"):detach():requires_grad_(true)
    local bh = b0:to("float32"):detach():requires_grad_(true)
    ms.mm(al, bl):backward(g)
    ms.mm(ah, bh):backward(g:to("float32"))
    T.eq(al.grad.dtype, dt)
    T.truthy(rel(al.grad, ah.grad) <= 2 * TOL[dt], "grad a " .. rel(al.grad, ah.grad))
    T.truthy(rel(bl.grad, bh.grad) <= 2 * TOL[dt], "grad b " .. rel(bl.grad, bh.grad))
  end)
end

T.finish()
