-- cuda_half_ops.lua: elementwise ops and reductions on cuda:0 in float32, bfloat16 and float16
-- at one shape (default 4 x 256 x 3072, 3.1M elements), timed with CUDA events after a warm-up:
-- milliseconds per call, the GB/s that the tensors read and written make, and each 16-bit time
-- over float32's (16-bit ops read and write half the bytes: a memory-bound op should take about
-- half the time once its kernel takes 16-bit operands as they are).
--   build/moonshard bench/cuda_half_ops.lua [--seconds S] [--shape 4,256,3072]
local ms = require "moonshard"
local argparse = require "moonshard.argparse"
local timing = require "bench.lib.cuda_timing"

-- "4,256,3072" -> {4, 256, 3072}
local function shape_list(s)
  local dims = {}
  for word in (s .. ","):gmatch("([^,]*),") do
    local n = math.tointeger(tonumber(word))
    if not n or n < 1 then return nil, "a comma-separated list of positive integers" end
    dims[#dims + 1] = n
  end
  return dims
end

local parser = argparse.ArgumentParser{description = "16-bit against float32 elementwise ops and reductions on cuda:0"}
parser:add_argument("--seconds", {type = "float", default = 0.5, min = 0, help = "GPU time spent on each case"})
parser:add_argument("--shape", {type = shape_list, default = "4,256,3072", metavar = "DIMS",
                                help = "the tensors' shape (the last dim is reduced)"})
local args = parser:parse_args(arg)

if not ms.cuda.is_available() then
  print("cuda_half_ops: no GPU: " .. tostring(ms.cuda.unavailable_reason()))
  os.exit(0)
end

local function time_ms(fn) return timing.time_ms(fn, { seconds = args.seconds, close = true }) end

-- name, bytes read and written per element for an element size es, the op
local OPS = {
  { "add", function(es) return 3 * es end, function(t) return t.x + t.y end },
  { "mul number", function(es) return 2 * es end, function(t) return t.x * 0.5 end },
  { "exp", function(es) return 2 * es end, function(t) return t.x:exp() end },
  { "sigmoid", function(es) return 2 * es end, function(t) return t.x:sigmoid() end },
  { "relu", function(es) return 2 * es end, function(t) return t.x:relu() end },
  { "gt (bool out)", function(es) return es + 1 end, function(t) return t.x:gt(0) end },
  { "clamp", function(es) return 2 * es end, function(t) return t.x:clamp(-0.5, 0.5) end },
  { "where", function(es) return 3 * es + 1 end, function(t) return ms.where(t.c, t.x, t.y) end },
  { "sum last dim", function(es) return es end, function(t) return t.x:sum(-1) end },
  { "max last dim", function(es) return es end, function(t) return (t.x:max(-1)) end },
  { "var last dim", function(es) return es end, function(t) return t.x:var(-1) end },
  -- float32 to bfloat16, 16-bit to float32: mixed precision's casts
  { "cast", function(es) return es + (es == 4 and 2 or 4) end,
    function(t) return t.x.dtype == "float32" and t.x:bfloat16() or t.x:float() end },
}

local numel = 1
for _, n in ipairs(args.shape) do numel = numel * n end
print(("cuda_half_ops on %s, shape {%s} (%d elements)"):format(ms.cuda.get_device_name(0), table.concat(args.shape, ","), numel))
ms.manual_seed(1)
local base = ms.randn(args.shape):cuda()
local inputs = {}
for _, dt in ipairs { "float32", "bfloat16", "float16" } do
  inputs[dt] = { x = base:to(dt), y = (base * 0.5):to(dt), c = base:gt(0.1) }
end
print(("  %-16s %10s %8s %10s %8s %6s %10s %8s %6s"):format("op", "f32 ms", "GB/s", "bf16 ms", "GB/s", "ratio",
                                                            "f16 ms", "GB/s", "ratio"))
for _, row in ipairs(OPS) do
  local name, bytes_per, fn = row[1], row[2], row[3]
  local cells = {}
  local f32
  for _, dt in ipairs { "float32", "bfloat16", "float16" } do
    local ok, t = pcall(time_ms, function() return fn(inputs[dt]) end)
    if not ok then
      cells[#cells + 1] = ("%10s %8s %6s"):format("failed", "", "")
      io.stderr:write(("%s %s: %s\n"):format(name, dt, t))
    else
      local bytes = bytes_per(dt == "float32" and 4 or 2) * numel
      f32 = f32 or (dt == "float32" and t)
      local ratio = dt == "float32" and "" or f32 and ("%.2f"):format(t / f32) or "n/a"
      cells[#cells + 1] = (dt == "float32" and "%10.4f %8.1f%s" or "%10.4f %8.1f %6s"):format(t, bytes / (t * 1e-3) / 1e9, ratio)
    end
  end
  print(("  %-16s %s"):format(name, table.concat(cells, " ")))
end
