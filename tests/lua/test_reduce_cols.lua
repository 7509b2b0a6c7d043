-- test_reduce_cols.lua: sums and means over an outer dim ("column" reductions: Linear's bias
-- gradient, the sum over the batch of a (M, N) gradient), which the CPU reduces a contiguous run
-- of columns at a time (kernels/cpu/reduce_cols.c), and bfloat16 / float16 sums read without a
-- widened copy. Every result is checked against a float64 sum of the stored elements computed
-- here, element by element, within one rounding to the output dtype.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local T = require "testing"

-- Unit roundoff of each dtype's rounding to nearest: the result is rounded once from a float64 sum.
local ROUNDOFF = { float32 = 2 ^ -24, float64 = 2 ^ -53, bfloat16 = 2 ^ -8, float16 = 2 ^ -11 }
-- Half the spacing of subnormals: the rounding error of a result too small to be normal (a mean
-- of thousands of float16 values can be).
local TINY = { float32 = 2 ^ -150, float64 = 2 ^ -1075, bfloat16 = 2 ^ -134, float16 = 2 ^ -25 }

-- A (rows, cols) Lua matrix of x's stored values (x 2-D, any strides).
local function values(x)
  return x:double():tolist()
end

-- Column sums and absolute sums of a Lua matrix: sums[c] = sum over r of m[r][c].
local function column_sums(m, rows, cols)
  local sums, abs = {}, {}
  for c = 1, cols do sums[c], abs[c] = 0.0, 0.0 end
  for r = 1, rows do
    local row = m[r]
    for c = 1, cols do
      local v = row[c]
      sums[c], abs[c] = sums[c] + v, abs[c] + math.abs(v)
    end
  end
  return sums, abs
end

-- got (a Lua list) against want: one rounding of want (to dtype dt) plus float64 accumulation
-- error over the absolute sum, all divided by div (a mean).
local function check_sums(got, want, abs, dt, div, what)
  T.eq(#got, #want, what .. ": length")
  for c = 1, #want do
    local w = want[c] / div
    local tol = math.abs(w) * ROUNDOFF[dt] * 1.01 + abs[c] / div * 1e-13 + TINY[dt]
    if not (math.abs(got[c] - w) <= tol) then
      error(("%s: element %d: expected %.17g, got %.17g (tol %.3g)"):format(what, c, w, got[c], tol), 2)
    end
  end
end

local DTYPES = { "float32", "float64", "bfloat16", "float16" }
local MS = { 1, 7, 1000, 4097 }
local NS = { 1, 3, 17, 768 }

ms.manual_seed(19)
for _, dt in ipairs(DTYPES) do
  T.test(("sum and mean over dim 1 of (M, N) %s, keepdim or not"):format(dt), function()
    for _, m in ipairs(MS) do
      for _, n in ipairs(NS) do
        local x = (ms.randn(m, n) * 3):to(dt)
        local want, abs = column_sums(values(x), m, n)
        local what = ("%s (%d, %d)"):format(dt, m, n)
        local s = x:sum(1)
        T.eq(s.dtype, dt, what .. ": sum's dtype")
        T.same(s:size(), { n }, 0, what .. ": sum's shape")
        check_sums(s:double():tolist(), want, abs, dt, 1, what .. " sum")
        local mean = x:mean({ dim = 1, keepdim = true })
        T.same(mean:size(), { 1, n }, 0, what .. ": mean's keepdim shape")
        check_sums(mean:double():tolist()[1], want, abs, dt, m, what .. " mean")
      end
    end
  end)

  T.test(("non-contiguous %s: a transposed matrix over either dim, a narrowed one"):format(dt), function()
    for _, shape in ipairs({ { 1000, 17 }, { 7, 768 }, { 4097, 3 } }) do
      local m, n = shape[1], shape[2]
      local xt = (ms.randn(n, m) * 3):to(dt):t() -- (m, n), the m dim contiguous
      local vals = values(xt)
      local want, abs = column_sums(vals, m, n)
      local what = ("%s transposed (%d, %d)"):format(dt, m, n)
      check_sums(xt:sum(1):double():tolist(), want, abs, dt, 1, what .. " sum(1)")
      -- sum(2) of the transpose: the reduced dim is outer to the contiguous m dim
      local rows, rabs = {}, {}
      for r = 1, m do
        rows[r], rabs[r] = 0.0, 0.0
        for c = 1, n do rows[r], rabs[r] = rows[r] + vals[r][c], rabs[r] + math.abs(vals[r][c]) end
      end
      check_sums(xt:sum(2):double():tolist(), rows, rabs, dt, 1, what .. " sum(2)")
      check_sums(xt:mean(2):double():tolist(), rows, rabs, dt, n, what .. " mean(2)")
    end
    -- columns 2..n of a (m, n): rows n apart, runs of n - 1 contiguous columns
    local x = (ms.randn(1000, 768) * 3):to(dt):narrow(2, 2, 767)
    local want, abs = column_sums(values(x), 1000, 767)
    check_sums(x:sum(1):double():tolist(), want, abs, dt, 1, dt .. " narrowed sum(1)")
  end)
end

T.test("(B, T, N) over an outer dim: dim 1 and dim 2", function()
  for _, dt in ipairs(DTYPES) do
    local b, t, n = 3, 65, 40
    local x = (ms.randn(b, t, n) * 3):to(dt)
    local flat = values(x:reshape(b * t, n))
    -- over dim 2 (T) alone: (b, n), each batch's columns
    local got = x:sum(2):double():tolist()
    for i = 1, b do
      local part = {}
      for r = 1, t do part[r] = flat[(i - 1) * t + r] end
      local want, pabs = column_sums(part, t, n)
      check_sums(got[i], want, pabs, dt, 1, ("%s sum(2) batch %d"):format(dt, i))
    end
    -- over dim 1 (B): kept (T, N) merge into one contiguous run of t * n columns
    local s1 = x:sum(1):reshape(t * n):double():tolist()
    local cols = {}
    for i = 1, b do
      cols[i] = {}
      for r = 1, t do
        for c = 1, n do cols[i][(r - 1) * n + c] = flat[(i - 1) * t + r][c] end
      end
    end
    local want, wabs = column_sums(cols, b, t * n)
    check_sums(s1, want, wabs, dt, 1, dt .. " sum(1)")
  end
end)

T.test("column sums accumulate wider than the input (float64 for float32); NaN and inf propagate", function()
  -- 4097 rows of 0.1 (float32) sum to 409.7 within float32's rounding of the exact sum
  local x = ms.full({ 4097, 33 }, 0.1)
  local exact = 4097 * ms.tensor({ 0.1 }):double():item()
  for _, v in ipairs(x:sum(1):double():tolist()) do T.near(v, exact, exact * 2 ^ -24) end
  -- bfloat16 1 + 256 times 2^-8: a bfloat16 accumulator adding them one by one would stay at 1
  local y = ms.full({ 257, 16 }, 2 ^ -8, { dtype = "bfloat16" })
  y[1]:fill_(1)
  for _, v in ipairs(y:sum(1):double():tolist()) do T.eq(v, 2) end
  local z = ms.zeros(1000, 16)
  z[500][3], z[7][5], z[8][5] = 0 / 0, math.huge, -math.huge
  z[9][6] = math.huge
  local s = z:sum(1):tolist()
  T.truthy(s[3] ~= s[3], "NaN propagates")
  T.truthy(s[5] ~= s[5], "inf - inf is NaN")
  T.eq(s[6], math.huge)
  T.eq(s[1], 0)
end)

T.test("an empty reduced dim: sum 0, mean NaN, in every dtype", function()
  for _, dt in ipairs(DTYPES) do
    local x = ms.zeros({ 0, 20 }, { dtype = dt })
    for _, v in ipairs(x:sum(1):double():tolist()) do T.eq(v, 0) end
    for _, v in ipairs(x:mean(1):double():tolist()) do T.truthy(v ~= v, dt .. " mean of nothing is NaN") end
  end
end)

T.test("the bias gradient of a bfloat16 Linear is the column sum of its output gradient", function()
  local lin = nn.Linear(64, 40):to("bfloat16")
  local x = ms.randn(300, 64):to("bfloat16")
  local g = ms.randn(300, 40):to("bfloat16")
  lin(x):backward(g)
  local want, abs = column_sums(values(g), 300, 40)
  check_sums(lin.bias.grad:double():tolist(), want, abs, "bfloat16", 1, "bias grad")
end)

T.test("norm (clip_grad_norm's 2-norm) of contiguous float32 and float64 tensors", function()
  for _, dt in ipairs({ "float32", "float64" }) do
    for _, n in ipairs({ 1, 7, 8, 9, 1000, 100003 }) do
      local x = ms.randn(n):to(dt)
      local ss = 0.0
      for _, v in ipairs(values(x:view(1, n))[1]) do ss = ss + v * v end
      local want = math.sqrt(ss)
      local tol = want * (ROUNDOFF[dt] * 1.01 + n * 2 ^ -52) -- one rounding; the reference's own sum
      T.near(x:norm():item(), want, tol, ("%s norm of %d"):format(dt, n))
      T.near(ms.norm(x, 2):item(), want, tol, ("%s ms.norm of %d"):format(dt, n))
    end
  end
end)

T.finish()
