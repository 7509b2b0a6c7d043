-- nn_lowp_bench.lua: LayerNorm and GELU (tanh) forward + backward on a GPT-sized activation
-- (64 x 128 tokens, 768 wide) in float32, bfloat16 and float16, interleaved (each sample round
-- times every dtype in turn, so load from other processes falls on all alike); prints the fastest
-- sample and the median of 11 per dtype, in ms. One thread unless --threads N.
--   build/moonshard bench/nn_lowp_bench.lua [--threads N] [--rows M] [--dtypes float32,bfloat16]
local ms = require "moonshard"
local F = require "moonshard.functional"
local argparse = require "moonshard.argparse"
local parser = argparse.ArgumentParser{description = "LayerNorm and GELU in bfloat16/float16 next to float32"}
parser:add_argument("--threads", {type = "int", default = 1, min = 1, metavar = "N", help = "engine threads"})
parser:add_argument("--rows", {type = "int", default = 64 * 128, min = 1, metavar = "M", help = "rows of 768"})
parser:add_argument("--dtypes", {default = "float32,bfloat16,float16", metavar = "LIST",
                                 help = "comma-separated dtypes (float32 alone for an older build)"})
local args = parser:parse_args(arg)
ms.set_num_threads(args.threads)

local M, N, DTYPES = args.rows, 768, {}
for dt in args.dtypes:gmatch("[^,]+") do DTYPES[#DTYPES + 1] = dt end
local OPS = {
  layer_norm = function(x, w, b) return F.layer_norm(x, {N}, w, b) end,
  gelu_tanh = function(x) return F.gelu(x, "tanh") end,
}

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2], xs[1]
end

ms.manual_seed(1)
for _, name in ipairs({ "layer_norm", "gelu_tanh" }) do
  local cases = {}
  for _, dt in ipairs(DTYPES) do
    local x = ms.randn(M, N):to(dt):requires_grad_()
    local w, b = ms.randn(N):to(dt):requires_grad_(), ms.randn(N):to(dt):requires_grad_()
    local g = ms.randn(M, N):to(dt)
    cases[#cases + 1] = { dt = dt, samples = {}, fn = function()
      x.grad, w.grad, b.grad = nil, nil, nil
      OPS[name](x, w, b):backward(g)
    end }
  end
  for _, c in ipairs(cases) do c.fn() end -- warm up
  for _ = 1, 11 do
    for _, c in ipairs(cases) do
      local t0 = ms.perf_counter()
      for _ = 1, 3 do c.fn() end
      c.samples[#c.samples + 1] = (ms.perf_counter() - t0) / 3 * 1e3
    end
  end
  for _, c in ipairs(cases) do
    local med, best = median(c.samples)
    print(("%-10s %-8s (%d, %d) fwd+bwd: best %7.2f ms  median %7.2f ms"):format(name, c.dt, M, N, best, med))
  end
end
