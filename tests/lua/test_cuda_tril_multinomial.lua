-- test_cuda_tril_multinomial.lua: tril/triu and multinomial on cuda:0 against the CPU. tril and
-- triu copy and zero (triangle_zero): the same bits in every dtype, batched, strided, in place,
-- with the gradient. multinomial draws from the one generator on the GPU: the same indices as
-- the CPU for the same seed (its keys are logs of the same float64 draws: CUDA's log and log1p
-- differ from glibc's by an ulp at most, far below the gaps between keys), a CUDA result, and
-- a single sample from a 50257-category row (GPT-2's vocabulary: no sort). Exits 77 where no
-- GPU is usable.
local T = require "testing"
local ms = require "moonshard"

T.need_cuda()
local DEV = "cuda:0"

T.test("tril/triu on CUDA: the CPU's bits in every dtype, batched, strided, in place", function()
  ms.manual_seed(1)
  for _, dt in ipairs { "float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool" } do
    for _, shape in ipairs { { 5, 7 }, { 3, 4, 6 }, { 2, 2, 3, 3 }, { 0, 4 }, { 1, 9 } } do
      local base = ms.randn(shape):mul(4)
      local x = dt == "bool" and base:gt(0) or base:to(dt)
      for _, input in ipairs { x, x:transpose(-1, -2) } do
        for _, d in ipairs { 0, 1, -2, 100, -100 } do
          for _, name in ipairs { "tril", "triu" } do
            local want = input[name](input, d)
            local got = input:to(DEV)[name](input:to(DEV), d)
            T.eq(got.device, DEV)
            T.truthy(got:cpu():equal(want), ("%s %s %s d=%d"):format(name, dt, tostring(input:size()), d))
            local inplace, wantp = input:to(DEV):clone(), input:clone()
            local v, vw = inplace:transpose(-1, -2), wantp:transpose(-1, -2) -- strided views
            v[name .. "_"](v, d)
            vw[name .. "_"](vw, d)
            T.truthy(inplace:cpu():equal(wantp), name .. "_ strided " .. dt)
          end
        end
      end
    end
  end
  local a = ms.randn(3, 4, 4, { device = DEV, requires_grad = true })
  a:tril(-1):backward(ms.ones(3, 4, 4, { device = DEV }))
  T.truthy(a.grad:cpu():equal(ms.tril(ms.ones(3, 4, 4), -1)), "gradient")
end)

T.test("multinomial on CUDA: a CUDA result, the CPU's indices for the same seed", function()
  ms.manual_seed(3)
  local w = ms.rand(6, 300, { dtype = "float64" }):pow(3)
  w:select(2, 7):zero_()
  for _, case in ipairs { { 1, false }, { 5, false }, { 299, false }, { 1, true }, { 40, true } } do
    local k, repl = case[1], case[2]
    for _, dt in ipairs { "float32", "float64", "bfloat16" } do
      local wd = w:to(dt)
      ms.manual_seed(9)
      local want = ms.multinomial(wd, k, repl)
      ms.manual_seed(9)
      local got = ms.multinomial(wd:to(DEV), k, repl)
      T.eq(got.device, DEV)
      T.eq(got.dtype, "int64")
      T.truthy(got:cpu():equal(want), ("k=%d replacement=%s %s"):format(k, tostring(repl), dt))
      T.eq(got:eq(7):sum():item(), 0, "a zero weight drawn")
    end
  end
  T.same(ms.multinomial(w:to(DEV), 3, { seed = 5 }):cpu():tolist(), ms.multinomial(w, 3, { seed = 5 }):tolist())
  -- a single sample from a GPT-2-sized row: an argmin, no sort (whose CUDA rows stop at 16384)
  local probs = ms.softmax(ms.randn(2, 50257, { device = DEV }), 2)
  local idx = ms.multinomial(probs, 1)
  T.same(idx:size(), { 2, 1 })
  T.truthy(idx:min():item() >= 1 and idx:max():item() <= 50257)
  T.raises(function() ms.multinomial(ms.tensor({ 1.0, -1.0 }, { device = DEV }), 1) end, "multinomial", "negative")
  T.raises(function() ms.multinomial(ms.zeros(2, 3, { device = DEV }), 1) end, "multinomial", "row 1", "no positive weight")
end)

T.finish()
