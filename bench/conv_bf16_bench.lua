-- conv_bf16_bench.lua: conv2d forward, input grad and weight grad at the seed's conv1/conv2 shapes
-- in bfloat16 (ms.randn(...):bfloat16() inputs, gradients bf16 as FSDP's mixed precision sees
-- them) next to float32, timed as bench/ops_bench.lua times them (ms: the fastest of 11 samples,
-- then the median); one thread unless --threads N. MS_CONV_BF16=off|gemm|widen picks the bf16
-- path (off: the engine's widening around the float32 op).
--   build/moonshard bench/conv_bf16_bench.lua [--threads N] [--only PATTERN]
local ms = require "moonshard"
local F = require "moonshard.functional"
local argparse = require "moonshard.argparse"
local parser = argparse.ArgumentParser{description = "conv2d bfloat16 next to float32 at the seed's shapes"}
parser:add_argument("--threads", {type = "int", default = 1, min = 1, metavar = "N", help = "engine threads"})
parser:add_argument("--only", {metavar = "PATTERN", help = "run the cases whose id matches this Lua pattern"})
local args = parser:parse_args(arg)
local threads, only = args.threads, args.only
ms.set_num_threads(threads)
local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end
local function time_call(fn)
  local t0 = ms.perf_counter()
  for _ = 1, 2 do fn() end
  local per = (ms.perf_counter() - t0) / 2
  local inner = math.max(1, math.floor(0.05 / math.max(per, 1e-7)))
  local s = {}
  for k = 1, 11 do
    t0 = ms.perf_counter()
    for _ = 1, inner do fn() end
    s[k] = (ms.perf_counter() - t0) / inner
  end
  local med = median(s)
  return s[1], med -- sorted: the fastest sample (least disturbed by other load) and the median
end
local CONVS = { { "conv1", 1, 32, 28, 64 }, { "conv2", 32, 64, 26, 64 }, { "conv1", 1, 32, 28, 1000 },
                { "conv2", 32, 64, 26, 1000 } }
ms.manual_seed(1)
for _, L in ipairs(CONVS) do
  local name, c, o, hw, batch = table.unpack(L)
  local oh = hw - 2
  local flops = 2.0 * batch * o * oh * oh * c * 9
  for _, dt in ipairs({ "float32", "bfloat16" }) do
    for _, pass in ipairs({ "fwd", "gin", "gw" }) do
      local id = ("%s_b%d/%s/%s"):format(name, batch, dt, pass)
      if only and not id:find(only) then goto next end
      do
        local x, w, b = ms.randn(batch, c, hw, hw):to(dt), ms.randn(o, c, 3, 3):to(dt), ms.randn(o):to(dt)
        local fn
        if pass == "fwd" then
          fn = function() local _ <close> = ms.no_grad(); return F.conv2d(x, w, b) end
        else
          local wanted = pass == "gin" and x or w
          wanted:requires_grad_()
          local y = F.conv2d(x, w)
          local g = ms.randn(batch, o, oh, oh):to(dt)
          fn = function() wanted.grad = nil; y:backward(g, { retain_graph = true }) end
        end
        local s, med = time_call(fn)
        print(("BCONV %-28s t%d ms=%8.3f gflops=%7.1f median_ms=%8.3f"):format(id, threads, s * 1e3,
          flops / s / 1e9, med * 1e3))
        io.stdout:flush()
      end
      collectgarbage()
      ::next::
    end
  end
end
