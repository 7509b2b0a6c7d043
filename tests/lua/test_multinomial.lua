-- test_multinomial.lua: ms.multinomial (torch.multinomial, 1-based indices): frequencies against
-- the weights by a chi-square statistic (a fixed seed: the same draws every run, so the check is
-- deterministic; a wrong sampler misses the bound by far), distinct samples without
-- replacement, the distribution of a second draw without replacement, reproducibility under
-- ms.manual_seed and the seed option, every input dtype, shapes, and every error.
local T = require "testing"
local ms = require "moonshard"

-- Weights as float32 (integer literals would make int64, which multinomial refuses, as PyTorch).
local function F(v) return ms.tensor(v, { dtype = "float32" }) end

-- The chi-square statistic of counts (a Lua list) against weights w (zero weights must count 0).
local function chi_square(counts, w, draws)
  local total, stat, cats = 0, 0, 0
  for _, x in ipairs(w) do total = total + x end
  for i, x in ipairs(w) do
    if x == 0 then
      T.eq(counts[i] or 0, 0, "a zero weight drawn")
    else
      local e = draws * x / total
      stat, cats = stat + ((counts[i] or 0) - e) ^ 2 / e, cats + 1
    end
  end
  return stat, cats - 1
end

-- Counts of the values 1..n in the int64 tensor idx.
local function counts_of(idx, n)
  local c = {}
  for i = 1, n do c[i] = 0 end
  for _, v in ipairs(idx:reshape(-1):tolist()) do c[v] = c[v] + 1 end
  return c
end

-- The 99.9% quantiles of chi-square with 1..9 degrees of freedom.
local CHI2_999 = { 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88 }
local W = { 1, 2, 3, 4, 0, 10, 0.5 }

T.test("frequencies match the weights (chi-square, fixed seed), with and without replacement", function()
  ms.manual_seed(11)
  local w = F(W)
  local n = 20000
  -- with replacement: one row, n samples (the running-sums path)
  local idx = ms.multinomial(w, n, { replacement = true })
  T.eq(idx.dtype, "int64")
  T.same(idx:size(), { n })
  local stat, dof = chi_square(counts_of(idx, #W), W, n)
  print(("with replacement: chi-square %.2f, %d degrees of freedom (bound %.2f)"):format(stat, dof, CHI2_999[dof]))
  T.truthy(stat < CHI2_999[dof], "with replacement: chi-square " .. stat)
  -- one sample from each of n equal rows (the exponential race with k = 1)
  local rows = w:view(1, #W):expand(n, #W)
  idx = rows:multinomial(1)
  T.same(idx:size(), { n, 1 })
  stat, dof = chi_square(counts_of(idx, #W), W, n)
  print(("one per row: chi-square %.2f"):format(stat))
  T.truthy(stat < CHI2_999[dof], "one per row: chi-square " .. stat)
  -- without replacement, k = 2: the first sample ~ w, the second ~ sum_i w_i/W * w_j/(W - w_i)
  idx = ms.multinomial(rows, 2)
  local first, second = counts_of(idx:select(2, 1), #W), counts_of(idx:select(2, 2), #W)
  stat, dof = chi_square(first, W, n)
  T.truthy(stat < CHI2_999[dof], "first of two: chi-square " .. stat)
  local total = 0
  for _, x in ipairs(W) do total = total + x end
  local p2 = {}
  for j, wj in ipairs(W) do
    p2[j] = 0
    for i, wi in ipairs(W) do if i ~= j then p2[j] = p2[j] + wi / total * wj / (total - wi) end end
  end
  stat, dof = chi_square(second, p2, n)
  print(("second of two without replacement: chi-square %.2f"):format(stat))
  T.truthy(stat < CHI2_999[dof], "second of two: chi-square " .. stat)
end)

T.test("without replacement each row's samples are distinct", function()
  ms.manual_seed(2)
  local w = ms.rand(50, 8) + 0.01
  local idx = ms.multinomial(w, 8) -- every category: a permutation per row
  for r, row in ipairs(idx:tolist()) do
    table.sort(row)
    T.same(row, { 1, 2, 3, 4, 5, 6, 7, 8 }, 0, "row " .. r)
  end
  -- as many samples as positive weights: exactly those
  local z = F { { 0, 3, 0, 1, 2 }, { 5, 0, 2, 0, 1 } }
  for _ = 1, 20 do
    local got = ms.multinomial(z, 3):tolist()
    table.sort(got[1])
    table.sort(got[2])
    T.same(got, { { 2, 4, 5 }, { 1, 3, 5 } })
  end
end)

T.test("reproducible under ms.manual_seed; the seed option leaves the global generator alone", function()
  local w = F { { 1, 2, 3, 4 }, { 4, 3, 2, 1 } }
  ms.manual_seed(7)
  local a, ar = ms.multinomial(w, 3), ms.multinomial(w, 5, true)
  ms.manual_seed(7)
  local b, br = w:multinomial(3), w:multinomial(5, { replacement = true })
  T.same(a:tolist(), b:tolist())
  T.same(ar:tolist(), br:tolist())
  ms.manual_seed(7)
  local s1 = ms.multinomial(w, 4, { seed = 99 })
  local after = ms.multinomial(w, 3) -- the global generator did not move for the seeded draw
  T.same(after:tolist(), a:tolist())
  T.same(ms.multinomial(w, 4, { seed = 99 }):tolist(), s1:tolist())
  -- successive draws differ (the generator advances)
  ms.manual_seed(7)
  local x, y = ms.multinomial(ms.ones(100), 100), ms.multinomial(ms.ones(100), 100)
  T.truthy(not x:equal(y), "two draws gave the same permutation")
end)

T.test("every floating input dtype draws the same indices; shapes, single category", function()
  local ref
  for _, dt in ipairs { "float64", "float32", "bfloat16", "float16" } do
    local w = ms.tensor({ { 1, 2, 0, 4 }, { 0.5, 0, 8, 1 } }, { dtype = dt })
    ms.manual_seed(4)
    local got = { w:multinomial(3):tolist(), w:multinomial(6, true):tolist() }
    if ref then T.same(got, ref, 0, dt) else ref = got end
  end
  T.same(ms.multinomial(F { 5 }, 3, true):tolist(), { 1, 1, 1 })
  T.same(ms.multinomial(F { 0, 0, 2 }, 1):tolist(), { 3 })
  T.same(ms.multinomial(ms.ones(0, 4), 2):size(), { 0, 2 })
  local big = ms.multinomial(ms.ones(3, 5), 40, { replacement = true })
  T.same(big:size(), { 3, 40 })
  T.truthy(big:min():item() >= 1 and big:max():item() <= 5)
  T.eq(ms.multinomial(ms.ones(4, { requires_grad = true }), 2).requires_grad, false)
end)

T.test("errors", function()
  local w = F { 1, 2, 3 }
  T.raises(function() ms.multinomial(F { 1, -2, 3 }, 1) end, "multinomial", "negative weight", "-2")
  T.raises(function() ms.multinomial(F { 1, 1 / 0, 3 }, 1) end, "multinomial", "infinite weight")
  T.raises(function() ms.multinomial(F { 1, 0 / 0, 3 }, 1) end, "multinomial", "NaN weight")
  T.raises(function() ms.multinomial(F { 0, 0 }, 1) end, "multinomial", "input has no positive weight", "sum to 0")
  T.raises(function() ms.multinomial(F { { 1, 1 }, { 0, 0 } }, 1) end, "multinomial", "row 2 of input", "no positive weight")
  T.raises(function() ms.multinomial(w, 0) end, "multinomial", "num_samples must be at least 1, got 0")
  T.raises(function() ms.multinomial(w, 4) end, "multinomial", "4 samples without replacement from 3 categories")
  T.raises(function() ms.multinomial(F { { 1, 1, 0 }, { 1, 1, 1 } }, 3) end, "multinomial", "row 1 of input",
    "2 categories of positive weight")
  T.raises(function() ms.multinomial(ms.ones(2, 2, 2), 1) end, "multinomial", "1-D", "2-D", "got 3 dims")
  T.raises(function() ms.multinomial(ms.tensor(1.0), 1) end, "multinomial", "got 0 dims")
  T.raises(function() ms.multinomial(ms.tensor { 1, 2 }, 1) end, "multinomial", "floating", "int64")
  T.raises(function() ms.multinomial(ms.ones(2, 0), 1) end, "multinomial", "no categories")
  T.raises(function() ms.multinomial(w, 1.5) end, "multinomial", "num_samples", "integer")
  T.raises(function() ms.multinomial(w) end, "multinomial", "num_samples")
  T.raises(function() ms.multinomial(w, 1, { generator = {} }) end, "multinomial", "generator", "seed =")
  T.raises(function() ms.multinomial(w, 1, { replacment = true }) end, "multinomial", "replacment")
  T.raises(function() ms.multinomial(w, 1, { seed = 1.5 }) end, "multinomial", "seed")
  T.raises(function() ms.multinomial(w, 1, true, 3) end, "multinomial", "unexpected argument")
  T.raises(function() ms.multinomial(ms.empty(3, { device = "meta" }), 1) end, "multinomial")
end)

T.finish()
