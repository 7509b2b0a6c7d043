-- nn_lowp_bench.lua: LayerNorm and GELU (tanh) on a GPT-sized activation (64 x 128 tokens, 768
-- wide by default) in float32, bfloat16 and float16, interleaved (each sample round times every
-- dtype in turn, so load from other processes falls on all alike): the forward alone (as training
-- runs it, recording the graph), the backward alone (the gradients of x, and of LayerNorm's w and
-- b) and the two together; prints the fastest sample and the median of 11 per dtype, in ms. One
-- thread unless --threads N.
--   build/moonshard bench/nn_lowp_bench.lua [--threads N] [--rows M] [--cols N] [--dtypes float32,bfloat16]
local ms = require "moonshard"
local F = require "moonshard.functional"
local argparse = require "moonshard.argparse"
local parser = argparse.ArgumentParser{description = "LayerNorm and GELU in bfloat16/float16 next to float32"}
parser:add_argument("--threads", {type = "int", default = 1, min = 1, metavar = "N", help = "engine threads"})
parser:add_argument("--rows", {type = "int", default = 64 * 128, min = 1, metavar = "M", help = "rows"})
parser:add_argument("--cols", {type = "int", default = 768, min = 1, metavar = "N", help = "row length"})
parser:add_argument("--dtypes", {default = "float32,bfloat16,float16", metavar = "LIST",
                                 help = "comma-separated dtypes (float32 alone for an older build)"})
parser:add_argument("--ops", {default = "layer_norm,gelu_tanh", metavar = "LIST", help = "comma-separated ops"})
local args = parser:parse_args(arg)
ms.set_num_threads(args.threads)

local M, N = args.rows, args.cols
local function list(s)
  local t = {}
  for v in s:gmatch("[^,]+") do t[#t + 1] = v end
  return t
end
local OPS = {
  layer_norm = function(x, w, b) return F.layer_norm(x, {N}, w, b) end,
  gelu_tanh = function(x) return F.gelu(x, "tanh") end,
}

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2], xs[1]
end

-- One call's forward and backward seconds.
local function time_once(c)
  c.x.grad, c.w.grad, c.b.grad = nil, nil, nil
  local t0 = ms.perf_counter()
  local y = c.op(c.x, c.w, c.b)
  local t1 = ms.perf_counter()
  y:backward(c.g)
  return t1 - t0, ms.perf_counter() - t1
end

ms.manual_seed(1)
for _, name in ipairs(list(args.ops)) do
  assert(OPS[name], "nn_lowp_bench: unknown op " .. name)
  local cases = {}
  for _, dt in ipairs(list(args.dtypes)) do
    cases[#cases + 1] = { dt = dt, op = OPS[name], x = ms.randn(M, N):to(dt):requires_grad_(),
      w = ms.randn(N):to(dt):requires_grad_(), b = ms.randn(N):to(dt):requires_grad_(), g = ms.randn(M, N):to(dt),
      samples = { fwd = {}, bwd = {}, ["fwd+bwd"] = {} } }
  end
  for _, c in ipairs(cases) do time_once(c) end -- warm up
  for _ = 1, 11 do
    for _, c in ipairs(cases) do
      local f, b = 0, 0
      for _ = 1, 3 do
        local df, db = time_once(c)
        f, b = f + df, b + db
      end
      local s = c.samples
      s.fwd[#s.fwd + 1], s.bwd[#s.bwd + 1], s["fwd+bwd"][#s["fwd+bwd"] + 1] = f / 3e-3, b / 3e-3, (f + b) / 3e-3
    end
  end
  for _, c in ipairs(cases) do
    for _, part in ipairs({ "fwd", "bwd", "fwd+bwd" }) do
      local med, best = median(c.samples[part])
      print(("%-10s %-8s (%d, %d) %-7s: best %7.3f ms  median %7.3f ms"):format(name, c.dt, M, N, part, best, med))
    end
  end
end
