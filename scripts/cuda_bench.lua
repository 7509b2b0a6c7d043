-- cuda_bench.lua: a short GPU micro-benchmark for scripts/gpu-check.sh: GEMM (cuBLAS, float32
-- and float64) and conv2d TFLOP/s on cuda:0, timed with CUDA events after a warm-up. A step
-- whose op has no CUDA kernel yet says so and the others still run.
--   build/moonshard scripts/cuda_bench.lua [seconds per case, default 1]
local ms = require "moonshard"
local timing = require "bench.lib.cuda_timing"
local F = require "moonshard.functional"
local argparse = require "moonshard.argparse"

local parser = argparse.ArgumentParser{description = "GEMM and conv2d TFLOP/s on cuda:0 (scripts/gpu-check.sh)"}
parser:add_argument("seconds", {type = "float", nargs = "?", default = 1.0, min = 0,
                                help = "GPU time spent on each case"})
local budget = parser:parse_args(arg).seconds

if not ms.cuda.is_available() then
  print("cuda_bench: no GPU: " .. tostring(ms.cuda.unavailable_reason()))
  os.exit(0)
end
print(("cuda_bench on %s (%d device(s))"):format(ms.cuda.get_device_name(0), ms.cuda.device_count()))

local function time_ms(fn) return timing.time_ms(fn, { seconds = budget, max_calls = 10000 }) end

local function case(name, flops, fn)
  local ok, res = pcall(time_ms, fn)
  if ok then
    print(("  %-44s %9.3f ms  %8.2f TFLOP/s"):format(name, res, flops / (res * 1e-3) / 1e12))
  else
    print(("  %-44s not run: %s"):format(name, tostring(res)))
  end
end

for _, spec in ipairs { { 4096, "float32" }, { 8192, "float32" }, { 4096, "float64" } } do
  local n, dt = spec[1], spec[2]
  local a = ms.randn(n, n, { dtype = dt, device = "cuda" })
  local b = ms.randn(n, n, { dtype = dt, device = "cuda" })
  case(("mm %dx%d %s"):format(n, n, dt), 2 * n ^ 3, function() return a:mm(b) end)
end
do
  local x = ms.randn(64, 784, { device = "cuda" })
  local w = ms.randn(128, 784, { device = "cuda" })
  local bias = ms.randn(128, { device = "cuda" })
  case("linear (64, 784) x (128, 784)^T, the seed's fc1 size", 2 * 64 * 784 * 128,
    function() return F.linear(x, w, bias) end)
end
-- conv2d: the seed's conv2 at batch 64, and a ResNet-like 3x3 layer
for _, c in ipairs { { 64, 32, 26, 64, "seed conv2 (64, 32, 26, 26) * (64, 32, 3, 3)" },
                     { 64, 256, 56, 256, "(64, 256, 56, 56) * (256, 256, 3, 3)" } } do
  local N, C, H, O, name = c[1], c[2], c[3], c[4], c[5]
  local x = ms.randn(N, C, H, H, { device = "cuda" })
  local w = ms.randn(O, C, 3, 3, { device = "cuda" })
  local oh = H - 2
  case("conv2d " .. name, 2 * N * O * oh * oh * C * 9, function() return F.conv2d(x, w) end)
end
print(("peak memory allocated: %.1f MiB"):format(ms.cuda.max_memory_allocated() / 2 ^ 20))
